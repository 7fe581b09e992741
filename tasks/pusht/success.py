"""Ground-truth success rule of PushT: the block's position (in the table plane) and yaw are near the goal's."""

from __future__ import annotations

import numpy as np

from real_is_sim.errors import DataError
from real_is_sim.transforms import yaw_of
from real_is_sim_tasks.pusht.config import GoalCfg, PushTCfg


def goal_errors(object_pose: np.ndarray, goal: GoalCfg) -> tuple[np.ndarray, np.ndarray]:
    """(xy distance [m], |yaw difference| [rad]) of block poses ``[..., 7]`` (xyzw) to the goal pose."""
    pose = np.asarray(object_pose, dtype=np.float64)
    if pose.shape[-1] != 7 or not np.all(np.isfinite(pose)):
        raise DataError(f"object_pose must be finite [..., 7] poses, got shape {pose.shape}")
    target = np.asarray(goal.pose, dtype=np.float64)
    distance = np.linalg.norm(pose[..., :2] - target[:2], axis=-1)
    yaw_diff = yaw_of(pose[..., 3:7]) - yaw_of(target[3:7])
    yaw_error = np.abs(np.arctan2(np.sin(yaw_diff), np.cos(yaw_diff)))
    return distance, yaw_error


def is_success(object_pose: np.ndarray, goal: GoalCfg) -> np.ndarray:
    """True where the block is within both tolerances of the goal (bool array of the batch shape)."""
    distance, yaw_error = goal_errors(object_pose, goal)
    return (distance <= goal.position_tolerance) & (yaw_error <= goal.yaw_tolerance)


def success(cfg: PushTCfg, object_poses: np.ndarray) -> bool:
    """The task interface's success: the block (object 0 of ``object_poses`` (n_obj, 7)) is at ``cfg.goal``."""
    return bool(is_success(np.asarray(object_poses)[0], cfg.goal))
