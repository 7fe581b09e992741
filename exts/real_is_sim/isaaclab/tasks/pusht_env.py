"""The PushT direct-workflow env: push the T-block onto the goal pose; success by ground truth.

Observations: the block's pose in the env frame (position, quaternion xyzw), then the 7 arm joints, under "policy";
with ``cfg.cameras`` set, each virtual camera's image (the block's Gaussians) under "<name>_rgb". Actions: 7 absolute
arm joint position targets [rad]. Reward: minus the goal distance and weighted yaw error, plus a bonus on success; an
episode ends on success (:func:`real_is_sim_tasks.pusht.is_success`), when the block falls off the table, or at the
time limit. With ``scene.visual_force`` set, every control step pushes
the block with the visual-force sensor's wrench through :class:`real_is_sim.isaaclab.actuator.VisualForceActuator`.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from isaaclab.envs import DirectRLEnv
from isaaclab.utils import instantiate
from isaaclab.utils.math import quat_from_euler_xyz, quat_mul, sample_uniform

from real_is_sim.robot import franka
from real_is_sim.twin.tblock import table_plane
from real_is_sim_tasks.pusht.success import goal_errors

from .pusht_env_cfg import PushTEnvCfg


class PushTEnv(DirectRLEnv):
    cfg: PushTEnvCfg

    def __init__(self, cfg: PushTEnvCfg, render_mode: str | None = None, **kwargs):
        self.task = cfg.load_task()
        cfg.set_cameras(self.task)  # the camera fields may have changed since the config was built
        super().__init__(cfg, render_mode, **kwargs)
        self.cameras = {name: self.scene[f"{name}_camera"] for name in cfg.cameras}
        for name in cfg.cameras:
            shape = (cfg.camera_height, cfg.camera_width, 3)
            self.single_observation_space[f"{name}_rgb"] = gym.spaces.Box(0, 255, shape, np.uint8)
        self.block = self.scene["block"]
        self.robot = self.scene["robot"]
        self.visual_force = self.scene["visual_force"] if cfg.scene.visual_force is not None else None
        self.actuator = instantiate(cfg.visual_force_actuator, self.block) if self.visual_force is not None else None
        self._plane = torch.as_tensor(table_plane(self.task.table), dtype=torch.float32, device=self.device)
        self._q_min = torch.as_tensor(franka.Q_MIN, dtype=torch.float32, device=self.device)
        self._q_max = torch.as_tensor(franka.Q_MAX, dtype=torch.float32, device=self.device)
        self.arm_targets = torch.as_tensor(self.task.robot.q_start, dtype=torch.float32, device=self.device).repeat(self.num_envs, 1)
        self.arm_joint_ids, names = self.robot.find_joints(cfg.robot_arm_joints, preserve_order=True)
        if len(self.arm_joint_ids) != 7:
            raise ValueError(f"robot_arm_joints {cfg.robot_arm_joints!r} matched {names}, expected the 7 arm joints")

    # ---- state views -----------------------------------------------------------------------------------
    def block_pose(self) -> torch.Tensor:
        """``[num_envs, 7]`` block body pose in each env's frame (position, quaternion xyzw)."""
        pose = self.block.data.root_link_pose_w.torch.clone()
        pose[:, :3] -= self.scene.env_origins
        return pose

    def goal_errors(self) -> tuple[np.ndarray, np.ndarray]:
        """(xy distance [m], |yaw error| [rad]) of each env's block to the goal, as the task's success rule sees it."""
        return goal_errors(self.block_pose().detach().cpu().double().numpy(), self.task.goal)

    # ---- DirectRLEnv -----------------------------------------------------------------------------------
    def _pre_physics_step(self, actions: torch.Tensor) -> None:
        self.arm_targets = torch.clamp(actions.to(self.device), self._q_min, self._q_max)
        if self.visual_force is not None:
            # one reading per control step, held by the permanent composer over its physics steps
            self.actuator.apply(self.visual_force.data.wrench)

    def _apply_action(self) -> None:
        self.robot.actuators.target_command.set_position_index(value=self.arm_targets, joint_ids=self.arm_joint_ids)

    def _get_observations(self) -> dict:
        q = self.robot.data.joint_pos.torch[:, self.arm_joint_ids]
        observations = {"policy": torch.cat([self.block_pose(), q], dim=-1)}
        for name, camera in self.cameras.items():
            # rendered here, on first access after the physics moved (lazy sensor update); a copy, since the
            # camera's buffer is overwritten by its next render
            observations[f"{name}_rgb"] = camera.data.output["rgb"].torch.clone()
        return observations

    def _get_rewards(self) -> torch.Tensor:
        distance, yaw_error = (torch.as_tensor(e, dtype=torch.float32, device=self.device) for e in self.goal_errors())
        success = self._success(distance, yaw_error)
        return -distance - self.cfg.yaw_weight * yaw_error + self.cfg.success_bonus * success.float()

    def _get_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        distance, yaw_error = (torch.as_tensor(e, dtype=torch.float32, device=self.device) for e in self.goal_errors())
        height = self.block.data.root_link_pose_w.torch[:, :3] - self.scene.env_origins
        fell = height @ self._plane[:3] + self._plane[3] < self.cfg.fall_height
        time_out = self.episode_length_buf >= self.max_episode_length - 1
        return self._success(distance, yaw_error) | fell, time_out

    def _success(self, distance: torch.Tensor, yaw_error: torch.Tensor) -> torch.Tensor:
        goal = self.task.goal
        return (distance <= goal.position_tolerance) & (yaw_error <= goal.yaw_tolerance)

    def _reset_idx(self, env_ids: Sequence[int] | torch.Tensor | None):
        if env_ids is None:
            env_ids = self.block._ALL_INDICES
        env_ids = torch.as_tensor(env_ids, device=self.device).long()
        super()._reset_idx(env_ids)
        n = len(env_ids)
        pose = self.block.data.default_root_pose.torch[env_ids].clone()
        pose[:, :2] += sample_uniform(-self.cfg.reset_position_noise, self.cfg.reset_position_noise, (n, 2), self.device)
        yaw = sample_uniform(-self.cfg.reset_yaw_noise, self.cfg.reset_yaw_noise, (n,), self.device)
        zero = torch.zeros_like(yaw)
        pose[:, 3:7] = quat_mul(quat_from_euler_xyz(zero, zero, yaw), pose[:, 3:7])  # about the world z axis
        pose[:, :3] += self.scene.env_origins[env_ids]
        self.block.write_root_pose_to_sim_index(root_pose=pose, env_ids=env_ids)
        self.block.write_root_velocity_to_sim_index(root_velocity=torch.zeros(n, 6, device=self.device), env_ids=env_ids)
        q_start = torch.as_tensor(self.task.robot.q_start, dtype=torch.float32, device=self.device)
        self.arm_targets[env_ids] = q_start
        joint_pos = self.robot.data.default_joint_pos.torch[env_ids].clone()
        joint_pos[:, self.arm_joint_ids] = q_start
        self.robot.write_joint_position_to_sim_index(position=joint_pos, env_ids=env_ids)
        self.robot.write_joint_velocity_to_sim_index(velocity=torch.zeros_like(joint_pos), env_ids=env_ids)
        if self.actuator is not None:
            self.actuator.clear(env_ids)
