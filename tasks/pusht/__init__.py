"""PushT: push a T-shaped block onto a goal pose.

The task interface the core uses (:class:`real_is_sim.task.Task`): ``load_cfg``, ``success``, ``object_mask``,
``relocalizer``, ``scripted_policy``.
"""

from real_is_sim_tasks.pusht.config import DEFAULT_YAML, REAL_YAML, GoalCfg, PushTCfg, load_cfg, load_pusht_cfg
from real_is_sim_tasks.pusht.perception import object_mask, relocalizer
from real_is_sim_tasks.pusht.scripted import scripted_policy
from real_is_sim_tasks.pusht.success import goal_errors, is_success, success

__all__ = [
    "DEFAULT_YAML", "REAL_YAML", "GoalCfg", "PushTCfg", "load_cfg", "load_pusht_cfg", "goal_errors", "is_success",
    "success", "object_mask", "relocalizer", "scripted_policy",
]
