"""Reading and writing GaussianClouds: the Embodied Gaussians object file, 3DGS ``.ply``, USD.

Every format is converted to the renderer's conventions (see :mod:`.cloud`) here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import STATIC_WORLD, GaussianCloud
from real_is_sim.objectfile import load_object_file
from real_is_sim.transforms import matrix_to_pose


def _cloud_from_numpy(means, quats, scales, opacities, colors, body_ids) -> GaussianCloud:
    as_float = lambda a: torch.as_tensor(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    return GaussianCloud(as_float(means), as_float(quats), as_float(scales), as_float(opacities),
                         as_float(colors), torch.as_tensor(np.asarray(body_ids, dtype=np.int64)))


def load_object_cloud(path: str | Path, body_id: int = 0) -> tuple[GaussianCloud, np.ndarray]:
    """The Gaussians of an object file (e.g. ``objects/tblock.json``) attached to ``body_id``.

    Returns ``(cloud, scan_pose)``: ``scan_pose`` is X_WB as a 7-vector (px,py,pz,qx,qy,qz,qw), the
    body's pose when it was scanned (not its pose in a recording). The file's colours are stored in
    BGR order (checked against the footage: the real block is red-orange) and are flipped to RGB here;
    its quaternions are already (w, x, y, z), its scales and opacities linear.
    """
    obj = load_object_file(path)
    g = obj.gaussians
    missing = [k for k in ("means", "quats", "scales", "opacities", "colors") if k not in g]
    if missing:
        raise DataError(f"object file {path} has no gaussians.{missing[0]}")
    cloud = _cloud_from_numpy(g["means"], g["quats"], g["scales"], g["opacities"], g["colors"][:, ::-1],
                              np.full(len(g["means"]), body_id))
    return cloud, matrix_to_pose(obj.X_WB)
