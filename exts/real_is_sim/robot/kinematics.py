"""Forward and inverse kinematics of the Panda's TCP (pinocchio, the same URDF Newton loads), in the robot base frame."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from real_is_sim.errors import DataError
from real_is_sim.robot import franka

TCP_FRAME = "panda_hand_tcp"


class PandaKinematics:
    """FK/IK of a point fixed in the TCP frame (e.g. a pusher centre ``tool_offset`` along the TCP z axis)."""

    def __init__(self, tool_offset: float = 0.0):
        self.model = pin.buildModelFromUrdf(str(franka.panda_urdf_path()))
        self.data = self.model.createData()
        self.frame = self.model.getFrameId(TCP_FRAME)
        self.tool = pin.SE3(np.eye(3), np.array([0.0, 0.0, tool_offset]))

    def _full_q(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (franka.ARM_DOF,) or not np.all(np.isfinite(q)):
            raise DataError(f"arm joint vector must be 7 finite numbers, got shape {q.shape}")
        return np.concatenate([q, np.zeros(self.model.nq - franka.ARM_DOF)])

    def tool_pose(self, q: np.ndarray) -> pin.SE3:
        pin.framesForwardKinematics(self.model, self.data, self._full_q(q))
        return self.data.oMf[self.frame] * self.tool

    def tool_position(self, q: np.ndarray) -> np.ndarray:
        return np.array(self.tool_pose(q).translation)

    def solve(self, position: np.ndarray, rotation: np.ndarray, q_init: np.ndarray, iterations: int = 100, tol: float = 1e-5) -> np.ndarray:
        """Joint angles placing the tool at ``position`` with ``rotation`` (3x3), by damped least squares from ``q_init``.

        Raises DataError when the pose is not reached within ``tol`` (m / rad)."""
        target = pin.SE3(np.asarray(rotation, dtype=np.float64), np.asarray(position, dtype=np.float64))
        q = self._full_q(q_init)
        for _ in range(iterations):
            pin.framesForwardKinematics(self.model, self.data, q)
            current = self.data.oMf[self.frame] * self.tool
            error = pin.log6(current.actInv(target)).vector  # in the tool frame
            if np.linalg.norm(error) < tol:
                return np.clip(q[: franka.ARM_DOF], franka.Q_MIN, franka.Q_MAX)
            J = pin.computeFrameJacobian(self.model, self.data, q, self.frame, pin.LOCAL)[:, : franka.ARM_DOF]
            J = pin.SE3(np.eye(3), self.tool.translation).toActionMatrixInverse() @ J  # TCP -> tool point
            dq = J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(6), error)
            q[: franka.ARM_DOF] = np.clip(q[: franka.ARM_DOF] + dq, franka.Q_MIN, franka.Q_MAX)
        raise DataError(f"IK did not reach the tool pose at {np.round(position, 4)} (error {np.linalg.norm(error):.2e})")
