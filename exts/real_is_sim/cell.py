"""The cell the twin models: table, T-block, Franka with a pusher, physical parameters, control rate.

What the twin, the stand-in world and the bridge build from; a task (``real_is_sim_tasks.pusht``) adds its goal
to it. Loaded from the task's YAML with :func:`real_is_sim.config.load_config`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np

from real_is_sim.errors import ConfigError
from real_is_sim.paths import shared_data_dir
from real_is_sim.robot.franka import Q_START

BLOCK_SOURCES = ("procedural", "file")


def check_finite(name: str, values, length: int | None = None) -> None:
    """ConfigError unless ``values`` are finite numbers (``length`` of them when given); ``name`` is the key."""
    arr = np.asarray(values, dtype=np.float64)
    if length is not None and arr.shape != (length,):
        raise ConfigError(f"{name} needs {length} numbers, got {list(values)}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} has non-finite values: {list(values)}")


@dataclass
class TableCfg:
    # Plane a*x + b*y + c*z + d = 0 with (a, b, c) the upward normal: points above the table give
    # a positive value (true for ground_plane.json: the scanned T-block's spheres lie on its positive side).
    plane: List[float] = field(default_factory=lambda: [0.0, 0.0, 1.0, 0.0])
    # Read the plane from <shared data>/environment/ground_plane.json instead of `plane`.
    use_real_plane: bool = False

    def __post_init__(self):
        check_finite("table.plane", self.plane, 4)
        if self.plane[2] <= 0.0:
            raise ConfigError(f"table.plane normal must point up (c > 0), got {list(self.plane)}")


@dataclass
class TBlockCfg:
    source: str = "procedural"  # "procedural" (boxes filled with spheres) or "file" (Embodied Gaussians object file)
    # Object file for source="file"; a relative path is resolved against the shared data directory.
    object_file: str = "objects/tblock.json"
    # Procedural T (metres). Body frame: +z up, origin on the bottom face at the centre of the top bar;
    # the bar runs along x, the stem hangs from the bar towards -y.
    bar_length: float = 0.2
    bar_width: float = 0.05
    stem_length: float = 0.15
    stem_width: float = 0.05
    height: float = 0.03
    sphere_radius: float = 0.01
    mass: float = 0.2  # kg (the file has no mass); spread evenly over the spheres
    # Start pose (px, py, pz, qx, qy, qz, qw) of the body frame; None: procedural -> on the table at
    # (0.45, 0, table height), file -> the file's X_WB (where the block was scanned, resting on the table).
    start_pose: Optional[List[float]] = None

    def __post_init__(self):
        if self.source not in BLOCK_SOURCES:
            raise ConfigError(f"block.source must be one of {BLOCK_SOURCES}, got {self.source!r}")
        for name in ("bar_length", "bar_width", "stem_length", "stem_width", "height", "sphere_radius", "mass"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0.0:
                raise ConfigError(f"block.{name} must be positive, got {value}")
        if self.source == "procedural":
            smallest = min(self.bar_length, self.bar_width, self.stem_length, self.stem_width, self.height)
            if 2.0 * self.sphere_radius > smallest:
                raise ConfigError(f"block.sphere_radius {self.sphere_radius} is more than half the smallest block dimension {smallest}")
        if self.start_pose is not None:
            check_finite("block.start_pose", self.start_pose, 7)

    def object_file_path(self) -> Path:
        path = Path(self.object_file)
        return path if path.is_absolute() else shared_data_dir() / path


@dataclass
class RobotCfg:
    base_pose: List[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    q_start: List[float] = field(default_factory=lambda: [float(v) for v in Q_START])
    finger_q: float = 0.0  # both fingers, held closed
    # Position control: each joint follows its target with this first-order lag (s), capped at the Panda's speed limits.
    tracking_time_constant: float = 0.03
    # The pusher: a vertical capsule below the hand's TCP frame (panda_hand_tcp), the only robot collider.
    pusher_radius: float = 0.01
    pusher_half_length: float = 0.02
    pusher_offset: float = 0.0  # m along the TCP z axis (down when the hand points down)

    def __post_init__(self):
        check_finite("robot.base_pose", self.base_pose, 7)
        check_finite("robot.q_start", self.q_start, 7)
        if self.pusher_radius <= 0.0 or self.pusher_half_length < 0.0:
            raise ConfigError(f"robot pusher needs radius > 0 and half_length >= 0, got {self.pusher_radius}, {self.pusher_half_length}")
        if not self.tracking_time_constant > 0.0:
            raise ConfigError(f"robot.tracking_time_constant must be positive, got {self.tracking_time_constant}")


@dataclass
class PhysicalParams:
    """Physical parameters of the block and its contacts: the knobs a stand-in real world perturbs."""

    friction_table: float = 0.5  # block-table Coulomb coefficient (Newton averages the two shapes' mu)
    friction_pusher: float = 0.5
    mass_scale: float = 1.0  # multiplies block.mass
    com_offset: List[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])  # body frame, added to the spheres' centroid
    linear_damping: float = 0.0  # 1/s, a force -m * c * v on the block
    angular_damping: float = 0.0  # 1/s, a torque -c * I * w on the block
    block_scale: float = 1.0  # uniform scale of the block's sphere centres and radii

    def __post_init__(self):
        check_finite("physical.com_offset", self.com_offset, 3)
        for name in ("friction_table", "friction_pusher", "linear_damping", "angular_damping"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) < 0.0:
                raise ConfigError(f"physical.{name} must be non-negative, got {getattr(self, name)}")
        if self.friction_pusher < 0.5 * self.friction_table:
            # Newton averages the two shapes' mu; the pusher's own mu (2*pusher - table) must stay >= 0.
            raise ConfigError(
                f"physical.friction_pusher ({self.friction_pusher}) must be at least half of friction_table ({self.friction_table})"
            )
        for name in ("mass_scale", "block_scale"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) <= 0.0:
                raise ConfigError(f"physical.{name} must be positive, got {getattr(self, name)}")




@dataclass
class CellCfg:
    table: TableCfg = field(default_factory=TableCfg)
    block: TBlockCfg = field(default_factory=TBlockCfg)
    robot: RobotCfg = field(default_factory=RobotCfg)
    physical: PhysicalParams = field(default_factory=PhysicalParams)
    control_hz: float = 60.0

    def __post_init__(self):
        if not math.isfinite(self.control_hz) or self.control_hz <= 0.0:
            raise ConfigError(f"control_hz must be positive, got {self.control_hz}")
