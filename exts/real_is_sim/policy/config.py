"""Policy and training settings; bad values raise one ConfigError naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from real_is_sim.errors import ConfigError

VARIANTS = ("pose", "static_camera", "wrist_camera", "real_image")
CAMERA_VARIANTS = ("static_camera", "wrist_camera", "real_image")
TRUNKS = ("mlp", "unet")
LR_SCHEDULES = ("cosine", "constant")
ACTION_DIM = 8  # 7 desired joints q' + progress p


@dataclass
class PolicyCfg:
    variant: str = "pose"
    waypoints: int = 32  # m waypoints per chunk
    horizon_s: float = 1.0  # H: the chunk spans H seconds, one waypoint every H/m s
    euler_steps: int = 10  # integration steps from noise to a chunk at inference
    noise_scale: float = 1.0  # inference: the flow starts from noise x this (below 1: samples nearer the flow's mean)
    # execution: chunks run this many times faster than demonstrated (a waypoint every H / (m tempo) s); the twin's
    # arm still keeps to the joint speed limits (docs/policy.md, Execution tempo)
    tempo: float = 1.0
    basis: int = 8  # > 0: the flow runs over the chunk's first `basis` DCT coefficients (smooth by construction)
    trunk: str = "mlp"  # "mlp" (chosen: docs/policy.md, Trunk) or "unet" (1D conv U-Net over the waypoints)
    hidden: int = 256  # trunk width (MLP: hidden units; U-Net: hidden/4 and hidden/2 channels)
    cond_dim: int = 256  # observation embedding width fed to the trunk
    image_size: int = 64  # square camera observations, pixels
    image_embed: int = 64  # the CNN's output width
    num_objects: int = 1
    # pose variant: + the block's offset from the task's goal in tolerance units (flow.goal_features); training
    # fills ``goal`` = [x, y, yaw, position tolerance, yaw tolerance] from the dataset's cell
    goal_features: bool = False
    goal: list = field(default_factory=list)
    # pose variant: + the pusher's position (forward kinematics of q in the cell) and its offset from each object in
    # that object's frame (flow.tool_features)
    tool_features: bool = False
    # the chunk's joints as offsets from the current q (the flow learns the motion, not the arm's posture)
    relative_actions: bool = False
    history_frames: int = 0  # > 0: the state also holds its change since the frame this many ticks (1/60 s) earlier
    cell: str = ""  # the dataset's cell YAML (set by training): where images are rendered and evaluations run

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"policy variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.trunk not in TRUNKS:
            raise ConfigError(f"policy trunk must be one of {TRUNKS}, got {self.trunk!r}")
        for name in ("waypoints", "euler_steps", "hidden", "cond_dim", "image_embed", "num_objects"):
            if getattr(self, name) < 1:
                raise ConfigError(f"policy {name} must be >= 1, got {getattr(self, name)}")
        if self.goal_features and self.variant != "pose":
            raise ConfigError("policy goal_features needs the pose variant (the block's pose is observed)")
        if self.tool_features and self.variant != "pose":
            raise ConfigError("policy tool_features needs the pose variant (the block's pose is observed)")
        if self.goal and len(self.goal) != 5:
            raise ConfigError(f"policy goal must be [x, y, yaw, position_tolerance, yaw_tolerance], got {self.goal}")
        if not self.noise_scale >= 0:
            raise ConfigError(f"policy noise_scale must be >= 0, got {self.noise_scale}")
        if not self.tempo > 0:
            raise ConfigError(f"policy tempo must be > 0, got {self.tempo}")
        if self.history_frames < 0:
            raise ConfigError(f"policy history_frames must be >= 0, got {self.history_frames}")
        if not 0 <= self.basis <= self.waypoints:
            raise ConfigError(f"policy basis must be in [0, waypoints={self.waypoints}], got {self.basis}")
        if self.trunk == "unet" and self.flow_length % 4:
            raise ConfigError(f"the U-Net halves its sequence twice: it must be a multiple of 4, got {self.flow_length}")
        if not self.horizon_s > 0:
            raise ConfigError(f"policy horizon_s must be > 0, got {self.horizon_s}")
        if self.image_size < 16 or self.image_size % 16:
            raise ConfigError(f"policy image_size must be a multiple of 16 (>= 16), got {self.image_size}")

    @property
    def flow_length(self) -> int:
        """Rows of the array the flow runs over: DCT coefficients or waypoints."""
        return self.basis or self.waypoints

    @property
    def uses_images(self) -> bool:
        return self.variant in CAMERA_VARIANTS


@dataclass
class TrainCfg:
    steps: int = 20000
    batch_size: int = 256
    lr: float = 1e-3
    lr_schedule: str = "cosine"  # cosine decay to lr_min after a linear warm-up, or constant after it
    lr_min: float = 1e-5
    warmup_steps: int = 200
    weight_decay: float = 1e-6
    seed: int = 0
    checkpoint_every: int = 1000
    frame_stride: int = 1  # train on every k-th frame of each episode (camera variants render only those)
    image_shift: int = 4  # random shift augmentation of camera observations, pixels
    successful_only: bool = True  # datasets keep failed episodes too (success in meta/episodes): skip them
    max_episodes: int = 0  # > 0: train on the dataset's first this many (successful) episodes only
    # > 0: keep an exponential moving average of the weights (decay warmed up as min(ema_decay, (1+k)/(10+k)));
    # checkpoints carry it and inference uses it
    ema_decay: float = 0.0
    # Gaussian noise added to each training observation, its action label kept: [block position (m), block yaw
    # (rad), joints (rad)] standard deviations (the current frame's; camera variants use the joints' only). The
    # policy then sees states a little off the demonstrations and learns to act from them as the expert did there.
    state_noise: List[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def __post_init__(self) -> None:
        if len(self.state_noise) != 3 or any(not v >= 0 for v in self.state_noise):
            raise ConfigError(f"state_noise must be 3 standard deviations >= 0 (position m, yaw rad, joints rad), got {self.state_noise}")
        for name in ("steps", "batch_size", "checkpoint_every", "frame_stride"):
            if getattr(self, name) < 1:
                raise ConfigError(f"training {name} must be >= 1, got {getattr(self, name)}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if not (self.lr > 0 and 0 <= self.lr_min <= self.lr):
            raise ConfigError(f"need lr > 0 and 0 <= lr_min <= lr, got lr={self.lr}, lr_min={self.lr_min}")
        if self.max_episodes < 0:
            raise ConfigError(f"max_episodes must be >= 0 (0: all), got {self.max_episodes}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ConfigError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if self.warmup_steps < 0 or self.weight_decay < 0 or self.image_shift < 0:
            raise ConfigError("warmup_steps, weight_decay and image_shift must be >= 0")
