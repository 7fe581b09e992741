"""PushT task configuration: the cell (:class:`real_is_sim.cell.CellCfg`: table, T-block, Franka with a pusher,
physical parameters) and the goal.

Loaded from YAML with :func:`real_is_sim.config.load_config` (see ``pusht.yaml`` beside this file).
The default config needs no shared data: a z = 0 table and a procedural T-block.
``pusht_real.yaml`` uses the real data's table plane and scanned T-block instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List

from real_is_sim.cell import CellCfg, check_finite
from real_is_sim.errors import ConfigError

TASK_DIR = Path(__file__).resolve().parent
DEFAULT_YAML = TASK_DIR / "pusht.yaml"
REAL_YAML = TASK_DIR / "pusht_real.yaml"


@dataclass
class GoalCfg:
    # Goal pose of the block body frame (px, py, pz, qx, qy, qz, qw); success compares xy and yaw only.
    pose: List[float] = field(default_factory=lambda: [0.5, 0.1, 0.0, 0.0, 0.0, 0.3826834, 0.9238795])
    position_tolerance: float = 0.02  # m, in the table plane
    yaw_tolerance: float = 0.15  # rad

    def __post_init__(self):
        check_finite("goal.pose", self.pose, 7)
        if self.position_tolerance <= 0.0 or self.yaw_tolerance <= 0.0:
            raise ConfigError("goal tolerances must be positive")


@dataclass
class PushTCfg(CellCfg):
    goal: GoalCfg = field(default_factory=GoalCfg)


def load_pusht_cfg(source=None, overrides=()) -> PushTCfg:
    """The PushT config from a YAML path or dict (default: ``pusht.yaml``) plus dotlist overrides."""
    from real_is_sim.config import load_config

    return load_config(PushTCfg, DEFAULT_YAML if source is None else source, overrides)


def load_cfg(name: str) -> PushTCfg:
    """The task interface's config loader: ``name`` is a file in tasks/pusht/ or a path to a task YAML."""
    path = Path(name)
    if not path.is_file():
        path = TASK_DIR / name
    if not path.is_file():
        raise ConfigError(f"task: no task YAML {name!r} (neither a path nor a file in {TASK_DIR})")
    return load_pusht_cfg(path)
