"""The Franka Emika Panda: where its description is installed, its published limits, its home pose.

The description comes from the ``example-robot-data`` pip package (URDF + meshes under the cmeel prefix),
usable by Newton's URDF importer and by pinocchio / pink alike. Nothing is copied into this project.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np

from real_is_sim.errors import DataError

ARM_DOF = 7
JOINT_NAMES = tuple(f"panda_joint{i}" for i in range(1, ARM_DOF + 1))

# Home pose used with the Embodied Gaussians PushT data set.
Q_START = np.array([2.6537935, 1.5346614, -1.6750929, -2.61287848, 1.46183864, 1.54922744, 0.82306163])

# Published Panda joint-space limits (Franka "Robot and interface specifications").
Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
QD_MAX = np.array([2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100])
QDD_MAX = np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])
QDDD_MAX = np.array([7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0])
TAU_MAX = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])


def description_share_dir() -> Path:
    """``<site-packages>/cmeel.prefix/share``: the ``package://`` root of example-robot-data's URDFs."""
    for key in ("purelib", "platlib"):
        share = Path(sysconfig.get_paths()[key]) / "cmeel.prefix" / "share"
        if (share / "example-robot-data").is_dir():
            return share
    raise DataError("the Franka description is missing: pip install example-robot-data")


def panda_urdf_path() -> Path:
    path = description_share_dir() / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf"
    if not path.is_file():
        raise DataError(f"panda URDF not found at {path}: reinstall example-robot-data")
    return path


def panda_urdf_xml() -> str:
    """The panda URDF with its ``package://`` mesh URIs made absolute paths under :func:`description_share_dir`.

    Newton 1.6's URDF importer has no ``package_dirs`` and looks for packages three folders above the file or in
    ROS environment variables; absolute paths need neither.
    """
    return panda_urdf_path().read_text().replace("package://", str(description_share_dir()) + "/")
