"""Conditional flow matching over normalised action chunks (rectified-flow path from noise x0 to data x1).

Training: t ~ U(0, 1), x_t = (1 - t) x0 + t x1, regress v(x_t, t | obs) onto x1 - x0.
Inference: x = x0 ~ N(0, I), then ``euler_steps`` Euler steps x += v dt from t = 0 to 1; unnormalise; clip progress.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from real_is_sim.errors import ConfigError
from real_is_sim.policy.config import ACTION_DIM, PolicyCfg
from real_is_sim.policy.network import VelocityNet, state_dim
from real_is_sim.policy.normalizer import Normalizer
from real_is_sim.policy.tool import tool_chain

GOAL_SQUASH = 4.0  # tolerance units: tanh(1/4) = 0.24 at the tolerance, 0.76 at 4 tolerances


def as_tensor(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x, dtype=torch.float32)


def canonical_quaternions(object_poses: torch.Tensor) -> torch.Tensor:
    """q and -q are one rotation: the policy sees the one with qw >= 0."""
    sign = torch.where(object_poses[..., 6:7] < 0, -1.0, 1.0)
    return torch.cat([object_poses[..., :3], object_poses[..., 3:] * sign], dim=-1)


def state_vector(variant: str, object_poses, robot_q, previous=None) -> torch.Tensor:
    """The low-dimensional observation as recorded: object poses (position + quaternion xyzw, qw >= 0) + q (pose
    variant) or q alone (image variants); with ``previous`` = (object_poses, robot_q) of the frame
    ``PolicyCfg.history_frames`` ticks earlier, that frame's appended. The encoder's features are computed from it
    inside the policy (:func:`observation_features`)."""
    q = as_tensor(robot_q)
    now = q if variant != "pose" else torch.cat([canonical_quaternions(as_tensor(object_poses)).flatten(1), q], dim=1)
    return now if previous is None else torch.cat([now, state_vector(variant, *previous)], dim=1)


def current_q(cfg: PolicyCfg, state: torch.Tensor) -> torch.Tensor:
    """The current frame's joints [B, 7] in a raw state (state_vector's layout: [object poses,] q [, earlier frame])."""
    start = 7 * cfg.num_objects if cfg.variant == "pose" else 0
    return state[:, start:start + 7]


def yaw_cos_sin(object_poses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the yaw of [..., 7] poses: continuous where the yaw wraps (a canonical quaternion jumps from
    qz = 1 to -1 at +-180 deg) and, quadratic in the quaternion, blind to its sign."""
    x, y, z, w = object_poses[..., 3], object_poses[..., 4], object_poses[..., 5], object_poses[..., 6]
    cos, sin = 1 - 2 * (y * y + z * z), 2 * (w * z + x * y)
    norm = torch.sqrt(cos * cos + sin * sin).clamp(min=1e-9)
    return cos / norm, sin / norm


def pose_features(object_poses: torch.Tensor) -> torch.Tensor:
    """[B, n_obj, 7] poses -> [B, n_obj * 5]: position and (cos, sin) of the yaw (the objects rest on the table)."""
    cos, sin = yaw_cos_sin(object_poses)
    return torch.cat([object_poses[..., :3], cos[..., None], sin[..., None]], dim=-1).flatten(1)


def goal_features(pose: torch.Tensor, goal) -> torch.Tensor:
    """[B, 7] block poses -> [B, 3]: the offset from the goal along and across the goal's axes and the yaw error,
    in tolerance units, squashed by tanh(u / GOAL_SQUASH): steep within a few tolerances of the goal, where the
    expert's small corrective pushes and its "done" are decided, flat far away. ``goal`` = PolicyCfg.goal."""
    gx, gy, gyaw, position_tolerance, yaw_tolerance = goal
    dx, dy = pose[:, 0] - gx, pose[:, 1] - gy
    along = math.cos(gyaw) * dx + math.sin(gyaw) * dy
    across = -math.sin(gyaw) * dx + math.cos(gyaw) * dy
    cos, sin = yaw_cos_sin(pose)
    yaw_error = torch.atan2(sin * math.cos(gyaw) - cos * math.sin(gyaw), cos * math.cos(gyaw) + sin * math.sin(gyaw))
    units = torch.stack([along / position_tolerance, across / position_tolerance, yaw_error / yaw_tolerance], dim=1)
    return torch.tanh(units / GOAL_SQUASH)


def tool_features(poses: torch.Tensor, tool: torch.Tensor) -> torch.Tensor:
    """[B, n_obj, 7] poses, [B, 3] pusher positions -> [B, 3 + 2 n_obj]: the pusher's position and its offset from
    each object in that object's frame (along and across its axes in the table plane): where the pusher is relative
    to the block, which the joints encode only through the arm's kinematics."""
    cos, sin = yaw_cos_sin(poses)
    dx, dy = tool[:, None, 0] - poses[..., 0], tool[:, None, 1] - poses[..., 1]
    return torch.cat([tool, cos * dx + sin * dy, -sin * dx + cos * dy], dim=1)


def frame_features(cfg: PolicyCfg, state: torch.Tensor) -> torch.Tensor:
    """One frame's raw state (state_vector) -> pose features [+ goal features] [+ tool features] + q (pose), or q
    (image variants)."""
    if cfg.variant != "pose":
        return state
    poses = state[:, :7 * cfg.num_objects].reshape(-1, cfg.num_objects, 7)
    q = state[:, 7 * cfg.num_objects:]
    parts = [pose_features(poses)]
    if cfg.goal_features:
        parts.append(goal_features(poses[:, 0], cfg.goal))
    if cfg.tool_features:
        parts.append(tool_features(poses, tool_chain(cfg.cell).position(q)))
    return torch.cat([*parts, q], dim=1)


def observation_features(cfg: PolicyCfg, state: torch.Tensor) -> torch.Tensor:
    """Raw states [B, D] -> the encoder's input before normalisation; with history: the frame's features and their
    change since the earlier frame."""
    if not cfg.history_frames:
        return frame_features(cfg, state)
    now, before = state.chunk(2, dim=1)
    now = frame_features(cfg, now)
    return torch.cat([now, now - frame_features(cfg, before)], dim=1)


def image_tensor(images) -> torch.Tensor:
    """uint8 [B, S, S, 3] -> float [B, 3, S, S] in [-0.5, 0.5]."""
    return torch.as_tensor(np.asarray(images)).permute(0, 3, 1, 2).float() / 255.0 - 0.5


def dct_basis(waypoints: int, coefficients: int) -> torch.Tensor:
    """[m, K]: the first K orthonormal DCT-II basis vectors over m waypoints (cosines of rising frequency)."""
    n = torch.arange(waypoints, dtype=torch.float64)[:, None] + 0.5
    k = torch.arange(coefficients, dtype=torch.float64)[None, :]
    basis = torch.cos(torch.pi * n * k / waypoints) * math.sqrt(2.0 / waypoints)
    basis[:, 0] /= math.sqrt(2.0)
    return basis.float()


def flow_representation(cfg: PolicyCfg, chunk: torch.Tensor, state: torch.Tensor,
                        basis: torch.Tensor | None) -> torch.Tensor:
    """Chunks [B, m, 8] of raw states [B, D] -> what the flow runs over: the chunk itself or its DCT coefficients
    [B, K, 8] (``basis`` [m, K]); with ``relative_actions`` the joints as offsets from the state's current q."""
    if cfg.relative_actions:
        chunk = joints_shifted(chunk, -current_q(cfg, state))
    return chunk if basis is None else basis.T @ chunk


def joints_shifted(chunk: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """Chunks [B, m, 8] with ``offset`` [B, 7] added to every waypoint's joints (progress unchanged)."""
    return torch.cat([chunk[..., :7] + offset[:, None], chunk[..., 7:]], dim=-1)


class FlowPolicy(nn.Module):
    """``action_norm`` scales the flow's representation of chunks (:meth:`to_flow`), ``state_norm`` the states."""

    def __init__(self, cfg: PolicyCfg, action_norm: Normalizer, state_norm: Normalizer) -> None:
        super().__init__()
        self.cfg = cfg
        self.action_norm = action_norm
        self.state_norm = state_norm
        self.net = VelocityNet(cfg)
        self.basis = dct_basis(cfg.waypoints, cfg.basis) if cfg.basis else None

    def to_flow(self, chunk: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return flow_representation(self.cfg, chunk, state, self.basis)

    def from_flow(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        chunk = x if self.basis is None else self.basis @ x
        return joints_shifted(chunk, current_q(self.cfg, state)) if self.cfg.relative_actions else chunk

    def loss(self, state: torch.Tensor, image: torch.Tensor | None, chunk: torch.Tensor,
             generator: torch.Generator) -> torch.Tensor:
        """Flow-matching loss of raw states [B, D], images [B, 3, S, S] (or None), raw chunks [B, m, 8]."""
        x1 = self.action_norm.normalize(self.to_flow(chunk, state))
        x0 = torch.randn(x1.shape, generator=generator)
        t = torch.rand(x1.shape[0], generator=generator)
        xt = (1 - t[:, None, None]) * x0 + t[:, None, None] * x1
        embedding = self.net.encode(self.state_norm.normalize(observation_features(self.cfg, state)), image)
        return nn.functional.mse_loss(self.net.velocity(xt, t, embedding), x1 - x0)

    @torch.no_grad()
    def sample(self, state: torch.Tensor, image: torch.Tensor | None = None, noise: torch.Tensor | None = None,
               generator: torch.Generator | None = None, steps: int | None = None,
               noise_scale: float | None = None) -> torch.Tensor:
        """Chunks [B, m, 8] in joint radians + progress clipped to [0, 1]; ``noise`` [B, flow_length, 8] (standard
        normal draws) fixes x0 = noise x ``noise_scale`` (None: ``cfg.noise_scale``)."""
        steps = steps or self.cfg.euler_steps
        batch = state.shape[0]
        x = noise if noise is not None else torch.randn((batch, self.cfg.flow_length, ACTION_DIM), generator=generator)
        x = x * (self.cfg.noise_scale if noise_scale is None else noise_scale)
        # once: the observation is fixed
        embedding = self.net.encode(self.state_norm.normalize(observation_features(self.cfg, state)), image)
        dt = 1.0 / steps
        for k in range(steps):
            x = x + dt * self.net.velocity(x, torch.full((batch,), k * dt), embedding)
        chunk = self.from_flow(self.action_norm.unnormalize(x), state)
        return torch.cat([chunk[..., :7], chunk[..., 7:].clamp(0.0, 1.0)], dim=-1)

    def act(self, object_poses, robot_q, images=None, generator: torch.Generator | None = None,
            previous=None, noise: torch.Tensor | None = None) -> np.ndarray:
        """One call for N environments: poses [N, n_obj, 7], q [N, 7], images uint8 [N, S, S, 3] (camera variants);
        ``previous`` = (poses, q) ``cfg.history_frames`` frames earlier (the first frame while there is none),
        required when the policy uses history and ignored otherwise; ``noise`` [N, flow_length, 8] fixes x0."""
        if self.cfg.history_frames and previous is None:
            raise ConfigError(f"this policy observes the frame {self.cfg.history_frames} ticks earlier: pass previous")
        state = state_vector(self.cfg.variant, object_poses, robot_q, previous if self.cfg.history_frames else None)
        image = image_tensor(images) if self.cfg.uses_images else None
        self.eval()
        return self.sample(state, image, noise=noise, generator=generator).numpy()


def untrained_policy(cfg: PolicyCfg) -> FlowPolicy:
    """Random weights and normalisers of unit range, in eval mode: what the benchmarks time (speed does not depend on
    the weights)."""
    action = Normalizer(torch.tensor([-2.0] * 7 + [0.0]), torch.tensor([2.0] * 7 + [1.0]))
    width = state_dim(cfg)
    return FlowPolicy(cfg, action, Normalizer(-torch.ones(width), torch.ones(width))).eval()
