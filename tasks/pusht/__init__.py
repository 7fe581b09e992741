"""PushT: push a T-shaped block onto a goal pose."""

from real_is_sim_tasks.pusht.config import (
    DEFAULT_YAML,
    REAL_YAML,
    GoalCfg,
    PhysicalParams,
    PushTCfg,
    RobotCfg,
    TableCfg,
    TBlockCfg,
    load_pusht_cfg,
)
from real_is_sim_tasks.pusht.success import goal_errors, is_success

__all__ = [
    "DEFAULT_YAML", "REAL_YAML", "GoalCfg", "PhysicalParams", "PushTCfg", "RobotCfg", "TableCfg", "TBlockCfg",
    "load_pusht_cfg", "goal_errors", "is_success",
]
