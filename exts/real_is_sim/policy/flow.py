"""Conditional flow matching over normalised action chunks (rectified-flow path from noise x0 to data x1).

Training: t ~ U(0, 1), x_t = (1 - t) x0 + t x1, regress v(x_t, t | obs) onto x1 - x0.
Inference: x = x0 ~ N(0, I), then ``euler_steps`` Euler steps x += v dt from t = 0 to 1; unnormalise; clip progress.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from real_is_sim.policy.config import ACTION_DIM, PolicyCfg
from real_is_sim.policy.network import VelocityNet
from real_is_sim.policy.normalizer import Normalizer


def as_tensor(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x, dtype=torch.float32)


def canonical_quaternions(object_poses: torch.Tensor) -> torch.Tensor:
    """q and -q are one rotation: the policy sees the one with qw >= 0."""
    sign = torch.where(object_poses[..., 6:7] < 0, -1.0, 1.0)
    return torch.cat([object_poses[..., :3], object_poses[..., 3:] * sign], dim=-1)


def state_vector(variant: str, object_poses, robot_q) -> torch.Tensor:
    """The low-dimensional part of an observation: object poses + q (pose variant) or q alone (image variants)."""
    q = as_tensor(robot_q)
    if variant != "pose":
        return q
    poses = canonical_quaternions(as_tensor(object_poses))
    return torch.cat([poses.flatten(1), q], dim=1)


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


class FlowPolicy(nn.Module):
    """``action_norm`` scales the flow's representation of chunks (:meth:`to_flow`), ``state_norm`` the states."""

    def __init__(self, cfg: PolicyCfg, action_norm: Normalizer, state_norm: Normalizer) -> None:
        super().__init__()
        self.cfg = cfg
        self.action_norm = action_norm
        self.state_norm = state_norm
        self.net = VelocityNet(cfg)
        self.basis = dct_basis(cfg.waypoints, cfg.basis) if cfg.basis else None

    def to_flow(self, chunk: torch.Tensor) -> torch.Tensor:
        """Chunks [B, m, 8] -> what the flow runs over: the chunk itself or its DCT coefficients [B, K, 8]."""
        return chunk if self.basis is None else self.basis.T @ chunk

    def from_flow(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.basis is None else self.basis @ x

    def loss(self, state: torch.Tensor, image: torch.Tensor | None, chunk: torch.Tensor,
             generator: torch.Generator) -> torch.Tensor:
        """Flow-matching loss of raw states [B, D], images [B, 3, S, S] (or None), raw chunks [B, m, 8]."""
        x1 = self.action_norm.normalize(self.to_flow(chunk))
        x0 = torch.randn(x1.shape, generator=generator)
        t = torch.rand(x1.shape[0], generator=generator)
        xt = (1 - t[:, None, None]) * x0 + t[:, None, None] * x1
        embedding = self.net.encode(self.state_norm.normalize(state), image)
        return nn.functional.mse_loss(self.net.velocity(xt, t, embedding), x1 - x0)

    @torch.no_grad()
    def sample(self, state: torch.Tensor, image: torch.Tensor | None = None, noise: torch.Tensor | None = None,
               generator: torch.Generator | None = None, steps: int | None = None) -> torch.Tensor:
        """Chunks [B, m, 8] in joint radians + progress clipped to [0, 1]; ``noise`` [B, flow_length, 8] fixes x0."""
        steps = steps or self.cfg.euler_steps
        batch = state.shape[0]
        x = noise if noise is not None else torch.randn((batch, self.cfg.flow_length, ACTION_DIM), generator=generator)
        embedding = self.net.encode(self.state_norm.normalize(state), image)  # once: the observation is fixed
        dt = 1.0 / steps
        for k in range(steps):
            x = x + dt * self.net.velocity(x, torch.full((batch,), k * dt), embedding)
        chunk = self.from_flow(self.action_norm.unnormalize(x))
        return torch.cat([chunk[..., :7], chunk[..., 7:].clamp(0.0, 1.0)], dim=-1)

    def act(self, object_poses, robot_q, images=None, generator: torch.Generator | None = None) -> np.ndarray:
        """One call for N environments: poses [N, n_obj, 7], q [N, 7], images uint8 [N, S, S, 3] (camera variants)."""
        state = state_vector(self.cfg.variant, object_poses, robot_q)
        image = image_tensor(images) if self.cfg.uses_images else None
        self.eval()
        return self.sample(state, image, generator=generator).numpy()
