"""The velocity network v(x_t, t | observation): an observation encoder per variant and one temporal trunk."""

from __future__ import annotations

import math

import torch
from torch import nn

from real_is_sim.policy.config import ACTION_DIM, PolicyCfg

TIME_FEATURES = 64
ROBOT_JOINTS = 7


def time_features(t: torch.Tensor) -> torch.Tensor:
    """Sinusoidal features [B, 64] of the flow time t in [0, 1] (scaled so neighbouring steps differ)."""
    half = TIME_FEATURES // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    angles = 1000.0 * t[:, None] * freqs[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


POSE_FEATURES = 5  # per object: position (3) + cos, sin of the yaw (flow.pose_features)
GOAL_FEATURES = 3  # the block's offset from the goal: along, across, yaw (flow.goal_features)


def state_dim(cfg: PolicyCfg) -> int:
    """Width of the encoder's state input (flow.observation_features): pose [+ goal] features + q, or q alone;
    doubled by history."""
    now = ROBOT_JOINTS
    if cfg.variant == "pose":
        now += cfg.num_objects * POSE_FEATURES + (GOAL_FEATURES if cfg.goal_features else 0)
        now += 3 + 2 * cfg.num_objects if cfg.tool_features else 0  # pusher position + its offset per object
    return 2 * now if cfg.history_frames else now


class PoseEncoder(nn.Module):
    """Normalised object pose features (position + cos/sin yaw each) and joints [+ their change] -> embedding."""

    def __init__(self, cfg: PolicyCfg) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(state_dim(cfg), cfg.cond_dim), nn.SiLU(),
                                 nn.Linear(cfg.cond_dim, cfg.cond_dim))

    def forward(self, state: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        return self.mlp(state)


class ImageEncoder(nn.Module):
    """A small CNN (four stride-2 convolutions) -> 64-d, joined with the normalised joints -> embedding."""

    def __init__(self, cfg: PolicyCfg) -> None:
        super().__init__()
        channels = (3, 32, 64, 128, 128)
        layers = []
        for c_in, c_out in zip(channels[:-1], channels[1:]):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.GroupNorm(8, c_out), nn.SiLU()]
        side = cfg.image_size // 16
        self.cnn = nn.Sequential(*layers, nn.Flatten(), nn.Linear(channels[-1] * side * side, cfg.image_embed))
        self.mlp = nn.Sequential(nn.Linear(cfg.image_embed + state_dim(cfg), cfg.cond_dim), nn.SiLU(),
                                 nn.Linear(cfg.cond_dim, cfg.cond_dim))

    def forward(self, state: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """``state``: [B, 7] normalised joints (14 with history); ``image``: [B, 3, S, S] in [-0.5, 0.5]."""
        return self.mlp(torch.cat([self.cnn(image), state], dim=1))


class MLPTrunk(nn.Module):
    """The flattened chunk through residual blocks, the condition added inside every block."""

    def __init__(self, cfg: PolicyCfg, cond_width: int, blocks: int = 3) -> None:
        super().__init__()
        size = cfg.flow_length * ACTION_DIM
        self.inp = nn.Linear(size, cfg.hidden)
        self.norms = nn.ModuleList(nn.LayerNorm(cfg.hidden) for _ in range(blocks))
        self.lin1 = nn.ModuleList(nn.Linear(cfg.hidden, cfg.hidden) for _ in range(blocks))
        self.cond = nn.ModuleList(nn.Linear(cond_width, cfg.hidden) for _ in range(blocks))
        self.lin2 = nn.ModuleList(nn.Linear(cfg.hidden, cfg.hidden) for _ in range(blocks))
        self.out = nn.Sequential(nn.LayerNorm(cfg.hidden), nn.Linear(cfg.hidden, size))

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = self.inp(x.flatten(1))
        for norm, lin1, cond_proj, lin2 in zip(self.norms, self.lin1, self.cond, self.lin2):
            h = h + lin2(nn.functional.silu(lin1(norm(h)) + cond_proj(cond)))
        return self.out(h).view_as(x)


class FiLMBlock(nn.Module):
    """Two 1D convolutions over the waypoints; the condition scales and shifts the first one's output."""

    def __init__(self, c_in: int, c_out: int, cond_width: int) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv1d(c_in, c_out, 5, padding=2), nn.GroupNorm(8, c_out), nn.Mish())
        self.conv2 = nn.Sequential(nn.Conv1d(c_out, c_out, 5, padding=2), nn.GroupNorm(8, c_out), nn.Mish())
        self.film = nn.Linear(cond_width, 2 * c_out)
        self.skip = nn.Conv1d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        scale, shift = self.film(cond)[:, :, None].chunk(2, dim=1)
        h = self.conv1(x) * (1 + scale) + shift
        return self.conv2(h) + self.skip(x)


class UNetTrunk(nn.Module):
    """A 1D conv U-Net over the waypoints (two down- and up-samplings), in the manner of Diffusion Policy."""

    def __init__(self, cfg: PolicyCfg, cond_width: int) -> None:
        super().__init__()
        c1, c2 = cfg.hidden // 4, cfg.hidden // 2
        self.down1, self.down2 = FiLMBlock(ACTION_DIM, c1, cond_width), FiLMBlock(c1, c2, cond_width)
        self.pool1, self.pool2 = nn.Conv1d(c1, c1, 3, 2, 1), nn.Conv1d(c2, c2, 3, 2, 1)
        self.mid = FiLMBlock(c2, c2, cond_width)
        self.unpool2, self.unpool1 = nn.ConvTranspose1d(c2, c2, 4, 2, 1), nn.ConvTranspose1d(c1, c1, 4, 2, 1)
        self.up2, self.up1 = FiLMBlock(2 * c2, c1, cond_width), FiLMBlock(2 * c1, c1, cond_width)
        self.out = nn.Conv1d(c1, ACTION_DIM, 1)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        skip1 = self.down1(x.transpose(1, 2), cond)  # [B, c1, m]
        skip2 = self.down2(self.pool1(skip1), cond)  # [B, c2, m/2]
        h = self.mid(self.pool2(skip2), cond)  # [B, c2, m/4]
        h = self.up2(torch.cat([self.unpool2(h), skip2], dim=1), cond)
        h = self.up1(torch.cat([self.unpool1(h), skip1], dim=1), cond)
        return self.out(h).transpose(1, 2)


class VelocityNet(nn.Module):
    """v(x_t, t | obs) for normalised chunks x_t [B, flow_length, 8]."""

    def __init__(self, cfg: PolicyCfg) -> None:
        super().__init__()
        self.encoder = ImageEncoder(cfg) if cfg.uses_images else PoseEncoder(cfg)
        self.time = nn.Sequential(nn.Linear(TIME_FEATURES, 128), nn.SiLU(), nn.Linear(128, 128))
        cond_width = cfg.cond_dim + 128
        self.trunk = UNetTrunk(cfg, cond_width) if cfg.trunk == "unet" else MLPTrunk(cfg, cond_width)

    def encode(self, state: torch.Tensor, image: torch.Tensor | None) -> torch.Tensor:
        return self.encoder(state, image)

    def velocity(self, x: torch.Tensor, t: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        return self.trunk(x, torch.cat([embedding, self.time(time_features(t))], dim=1))
