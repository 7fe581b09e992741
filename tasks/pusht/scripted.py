"""Scripted pusher motions: a tool path through world waypoints -> arm joint targets at the control rate (IK);
``scripted_policy``: the bridge's scripted push (one push through the block's centre)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from real_is_sim.cell import CellCfg
from real_is_sim.errors import DataError
from real_is_sim.robot.kinematics import PandaKinematics
from real_is_sim.task import Policy
from real_is_sim.transforms import pose_inverse, quat_rotate

if TYPE_CHECKING:
    from real_is_sim.bridge.config import PolicyCfg
    from real_is_sim.twin import Twin


def sample_path(waypoints: np.ndarray, speed: float, dt: float) -> np.ndarray:
    """Points every ``dt`` along the polyline ``waypoints [K, 3]`` travelled at constant ``speed`` (m/s)."""
    waypoints = np.asarray(waypoints, dtype=np.float64)
    if waypoints.ndim != 2 or waypoints.shape[1] != 3 or len(waypoints) < 2 or not np.all(np.isfinite(waypoints)):
        raise DataError(f"waypoints must be at least two finite 3-vectors, got shape {waypoints.shape}")
    if not speed > 0:
        raise DataError(f"speed must be positive, got {speed}")
    lengths = np.linalg.norm(np.diff(waypoints, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(lengths)])
    s = np.append(np.arange(0.0, arc[-1], speed * dt), arc[-1])
    return np.stack([np.interp(s, arc, waypoints[:, k]) for k in range(3)], axis=1)


class ScriptedPusher:
    """Joint targets that move the pusher centre along world-frame paths, the hand pointing as at ``q_start``."""

    def __init__(self, task: CellCfg):
        self.task = task
        self.kinematics = PandaKinematics(tool_offset=task.robot.pusher_offset)
        self.q_start = np.asarray(task.robot.q_start, dtype=np.float64)
        self.rotation = self.kinematics.tool_pose(self.q_start).rotation.copy()
        self._base_inv = pose_inverse(np.asarray(task.robot.base_pose, dtype=np.float64))

    def to_base(self, points_world: np.ndarray) -> np.ndarray:
        return self._base_inv[:3] + quat_rotate(self._base_inv[3:7], points_world)

    def tool_position(self, q: np.ndarray) -> np.ndarray:
        """Pusher centre at arm joints ``q`` in the world frame."""
        base = np.asarray(self.task.robot.base_pose, dtype=np.float64)
        return base[:3] + quat_rotate(base[3:7], self.kinematics.tool_position(q))

    def start_tool_position(self) -> np.ndarray:
        """Pusher centre at ``q_start`` in the world frame."""
        return self.tool_position(self.q_start)

    def joint_path(self, waypoints_world: np.ndarray, speed: float, dt: float, q_init: np.ndarray | None = None) -> np.ndarray:
        """Arm targets ``[T, 7]``, one per control step ``dt``, following the waypoints at ``speed``."""
        q = self.q_start if q_init is None else np.asarray(q_init, dtype=np.float64)
        path = []
        for point in self.to_base(sample_path(waypoints_world, speed, dt)):
            q = self.kinematics.solve(point, self.rotation, q)
            path.append(q)
        return np.array(path)


def push_plan(pusher: ScriptedPusher, block_center: np.ndarray, lateral: float, dt: float, distance: float = 0.2,
              push_z: float = 0.035, approach_speed: float = 0.25, push_speed: float = 0.08, settle_steps: int = 20,
              retreat: bool = True) -> np.ndarray:
    """Joint targets ``[T, 7]`` for one push away from the robot base through the block's centre of spheres,
    offset sideways by ``lateral``: home -> above the start 17 cm before the centre -> down -> wait
    ``settle_steps`` -> push ``distance`` -> up (``retreat``) or stop there. Works for any block shape or heading.
    ``push_z``: pusher centre height above a z = 0 table."""
    base = np.asarray(pusher.task.robot.base_pose[:2], dtype=np.float64)
    away = block_center[:2] - base
    away = np.append(away / np.linalg.norm(away), 0.0)
    side = np.array([-away[1], away[0], 0.0])
    start = np.append(block_center[:2], push_z) - 0.17 * away + lateral * side
    end = start + distance * away
    above = start + [0.0, 0.0, 0.08]
    approach = pusher.joint_path(np.array([pusher.start_tool_position(), above, start]), approach_speed, dt)
    push = pusher.joint_path(np.array([start, end]), push_speed, dt, approach[-1])
    parts = [approach, np.repeat(approach[-1:], settle_steps, axis=0), push]
    if retreat:
        parts.append(pusher.joint_path(np.array([end, end + [0.0, 0.0, 0.08]]), approach_speed, dt, push[-1]))
    return np.concatenate(parts)


def scripted_policy(twin: Twin, cfg: PolicyCfg) -> Policy:
    """One push of ``cfg.push_distance`` through the centre of the twin block's spheres, offset sideways by
    ``cfg.lateral_offset``, planned from where the block is now; the pusher then lifts and stays there."""
    pose = twin.object_poses()[0, 0]
    center = pose[:3] + quat_rotate(pose[3:7], twin.geometry.centers.mean(axis=0))
    plan = push_plan(ScriptedPusher(twin.task), center, cfg.lateral_offset, twin.control_dt, distance=cfg.push_distance)
    dt = twin.control_dt

    def scripted_push(t: float) -> np.ndarray:
        return plan[min(int(round(t / dt)), len(plan) - 1)][None]

    return scripted_push
