"""The pusher's position from the joints, in torch and batched: the policy's tool features.

The Panda's seven joints all turn about their local z axis, so the chain is seven fixed placements (read once from
the same URDF pinocchio and Newton load) each followed by a rotation about z, then the TCP frame and the pusher's
offset along its z axis, in the cell's world frame (the robot's base pose applied).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from real_is_sim.robot import franka


class ToolChain:
    """Batched forward kinematics of the pusher centre: ``position(q)`` [B, 7] -> [B, 3] in the world frame."""

    def __init__(self, pusher_offset: float, base_pose) -> None:
        from real_is_sim.robot.kinematics import PandaKinematics
        from real_is_sim.transforms import quat_to_matrix

        kinematics = PandaKinematics(tool_offset=pusher_offset)
        model = kinematics.model
        placements = [model.jointPlacements[j] for j in range(1, franka.ARM_DOF + 1)]
        self.joint_rotations = torch.tensor(np.stack([p.rotation for p in placements]), dtype=torch.float32)
        self.joint_translations = torch.tensor(np.stack([p.translation for p in placements]), dtype=torch.float32)
        tcp = model.frames[kinematics.frame].placement * kinematics.tool  # in joint 7's frame
        self.tool_translation = torch.tensor(np.asarray(tcp.translation), dtype=torch.float32)
        base = np.asarray(base_pose, dtype=np.float64)
        self.base_rotation = torch.tensor(quat_to_matrix(base[3:]), dtype=torch.float32)
        self.base_translation = torch.tensor(base[:3], dtype=torch.float32)

    def position(self, q: torch.Tensor) -> torch.Tensor:
        rotation = self.base_rotation.expand(q.shape[0], 3, 3)
        translation = self.base_translation.expand(q.shape[0], 3)
        cos, sin = torch.cos(q), torch.sin(q)
        zeros, ones = torch.zeros_like(q), torch.ones_like(q)
        about_z = torch.stack([cos, -sin, zeros, sin, cos, zeros, zeros, zeros, ones], dim=-1).reshape(*q.shape, 3, 3)
        for j in range(franka.ARM_DOF):
            translation = translation + rotation @ self.joint_translations[j]
            rotation = rotation @ self.joint_rotations[j] @ about_z[:, j]
        return translation + rotation @ self.tool_translation


@lru_cache(maxsize=4)
def tool_chain(cell_yaml: str) -> ToolChain:
    """The chain of a policy's cell (``PolicyCfg.cell``): its robot's base pose and pusher offset."""
    from real_is_sim.policy.observations import cell_from_yaml

    robot = cell_from_yaml(cell_yaml).robot
    return ToolChain(robot.pusher_offset, robot.base_pose)
