"""Training loop: one seeded generator draws every batch, noise and flow time, so a fixed seed gives the same
weights on CPU, and a resumed run continues exactly where its checkpoint stopped."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import quat_multiply_wxyz
from real_is_sim.policy.checkpoint import read_checkpoint, save_checkpoint
from real_is_sim.policy.config import PolicyCfg, TrainCfg
from real_is_sim.policy.data import TrainingSet, build_training_set
from real_is_sim.policy.flow import (FlowPolicy, current_q, dct_basis, flow_representation, image_tensor,
                                     observation_features, state_vector)
from real_is_sim.policy.normalizer import Normalizer
from real_is_sim.policy.observations import cached_images, renderer_for

LAST = "last.pt"


@dataclass
class TrainResult:
    checkpoint: Path
    steps: int
    losses: list[float]
    samples: int
    seconds: float


def learning_rate(step: int, cfg: TrainCfg) -> float:
    """Linear warm-up, then constant or cosine decay to lr_min at the last step."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return cfg.lr
    span = max(cfg.steps - cfg.warmup_steps, 1)
    return cfg.lr_min + 0.5 * (cfg.lr - cfg.lr_min) * (1 + math.cos(math.pi * (step - cfg.warmup_steps) / span))


def shift_images(images: torch.Tensor, max_shift: int, generator: torch.Generator) -> torch.Tensor:
    """Random translation by up to ``max_shift`` pixels per image (edge pixels repeated): the camera-variant
    augmentation of Diffusion Policy, against overfitting 60 demonstrations' few views."""
    if max_shift == 0:
        return images
    size = images.shape[-1]
    padded = torch.nn.functional.pad(images, (max_shift,) * 4, mode="replicate")
    offsets = torch.randint(0, 2 * max_shift + 1, (len(images), 2), generator=generator)
    return torch.stack([p[:, dy:dy + size, dx:dx + size] for p, (dy, dx) in zip(padded, offsets.tolist())])


class WeightAverage:
    """Exponential moving average of the policy's weights: the flow's samples from averaged weights vary less from
    one checkpoint to the next than the raw weights', the usual practice of diffusion and flow policies."""

    def __init__(self, policy: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.weights = {k: v.detach().clone() for k, v in policy.state_dict().items()}

    def update(self, policy: torch.nn.Module, step: int) -> None:
        """After optimiser step ``step`` (1-based); the decay warms up so early weights fade fast."""
        decay = min(self.decay, (1.0 + step) / (10.0 + step))
        with torch.no_grad():
            for key, value in policy.state_dict().items():
                if value.is_floating_point():
                    self.weights[key].lerp_(value, 1.0 - decay)
                else:
                    self.weights[key].copy_(value)


def training_images(dataset, data: TrainingSet, cfg: PolicyCfg, progress: bool) -> np.ndarray | None:
    """Camera variants: the images of every sample's state, from the cache beside the dataset."""
    if not cfg.uses_images:
        return None
    renderer = renderer_for(cfg.variant, cfg.image_size, cfg.cell)
    return cached_images(Path(dataset.root) / "cache", renderer, data.object_poses, data.q, progress)


def perturb_states(states: torch.Tensor, cfg: PolicyCfg, noise: list[float], generator: torch.Generator) -> torch.Tensor:
    """Raw states [B, D] (as ``state_vector``) with Gaussian noise on the current frame's block positions (x, y),
    yaws (about the vertical) and joints: ``noise`` = their standard deviations (TrainCfg.state_noise)."""
    position, yaw, joints = noise
    if not any(noise):
        return states
    states = states.clone()
    for b in range(cfg.num_objects if cfg.variant == "pose" else 0):  # the current frame's; a history frame follows
        pose = states[:, 7 * b:7 * b + 7]
        pose[:, :2] += position * torch.randn(len(states), 2, generator=generator)
        half = 0.5 * yaw * torch.randn(len(states), generator=generator)
        turn = torch.stack([torch.cos(half), torch.zeros_like(half), torch.zeros_like(half), torch.sin(half)], dim=1)
        pose[:, 3:7] = quat_multiply_wxyz(turn, pose[:, 3:7].roll(1, dims=1)).roll(-1, dims=1)  # states hold xyzw
    current_q(cfg, states).add_(joints * torch.randn(len(states), 7, generator=generator))  # a view into states
    return states


def training_states(cfg: PolicyCfg, data: TrainingSet) -> torch.Tensor:
    return state_vector(cfg.variant, data.object_poses, data.q, data.previous if cfg.history_frames else None)


def make_policy(cfg: PolicyCfg, data: TrainingSet) -> FlowPolicy:
    """A fresh policy whose normalisers hold this data's statistics."""
    states = training_states(cfg, data)
    chunks = torch.as_tensor(data.chunks)
    flow = flow_representation(cfg, chunks, states, dct_basis(cfg.waypoints, cfg.basis) if cfg.basis else None)
    return FlowPolicy(cfg, Normalizer.fit(flow, keep_dims=2 if cfg.basis else 1),
                      Normalizer.fit(observation_features(cfg, states)))


def goal_of(cell_yaml: str) -> list[float]:
    """[x, y, yaw, position tolerance, yaw tolerance] of the cell's goal (PolicyCfg.goal)."""
    from real_is_sim.policy.observations import cell_from_yaml

    goal = cell_from_yaml(cell_yaml).goal
    x, y, z, w = goal.pose[3:]
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return [float(goal.pose[0]), float(goal.pose[1]), yaw, float(goal.position_tolerance), float(goal.yaw_tolerance)]


def train(dataset_root: str | Path, policy_cfg: PolicyCfg, train_cfg: TrainCfg, out_dir: str | Path,
          resume: bool = False, progress: bool = True) -> TrainResult:
    """Train on the dataset at ``dataset_root``; checkpoints ``out_dir/step_NNNNNN.pt`` every ``checkpoint_every``
    steps and ``out_dir/last.pt``; ``loss.png`` and ``train.json`` at the end. ``resume``: continue from last.pt."""
    from tqdm import tqdm

    from real_is_sim.demos.dataset import load_dataset

    out_dir = Path(out_dir)
    dataset = load_dataset(dataset_root)
    episodes = [e for e in dataset.episodes if e.success or not train_cfg.successful_only]
    if dataset.episodes and not episodes:
        raise DataError(f"dataset {dataset_root} has no successful episode to train on (train.successful_only=false "
                        f"uses the failed ones)")
    if train_cfg.max_episodes:
        episodes = episodes[:train_cfg.max_episodes]
    data = build_training_set(episodes, policy_cfg.waypoints, policy_cfg.horizon_s, policy_cfg.num_objects,
                              train_cfg.frame_stride, policy_cfg.history_frames)
    # the cell the data comes from: camera images are rendered in it, an evaluation builds its twin from it
    policy_cfg = dataclasses.replace(policy_cfg, cell=dataset.cell_yaml)
    if policy_cfg.goal_features:
        policy_cfg = dataclasses.replace(policy_cfg, goal=goal_of(dataset.cell_yaml))
    images = training_images(dataset, data, policy_cfg, progress)
    states = training_states(policy_cfg, data)
    chunks = torch.as_tensor(data.chunks)

    torch.manual_seed(train_cfg.seed)  # weight initialisation
    policy = make_policy(policy_cfg, data)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    generator = torch.Generator().manual_seed(train_cfg.seed)
    average = WeightAverage(policy, train_cfg.ema_decay) if train_cfg.ema_decay else None
    losses: list[float] = []
    step = 0
    if resume and (out_dir / LAST).is_file():
        state = read_checkpoint(out_dir / LAST)
        if state["policy_cfg"] != policy_cfg.__dict__ or state["train_cfg"] != train_cfg.__dict__:
            raise DataError(f"{out_dir / LAST} was trained with other settings: resume with the same ones "
                            f"(policy {state['policy_cfg']}, training {state['train_cfg']})")
        policy.load_state_dict(state["model"])
        policy.action_norm = Normalizer.from_state_dict(state["action_norm"])
        policy.state_norm = Normalizer.from_state_dict(state["state_norm"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        if average is not None:
            average.weights = state["ema"]
        losses, step = state["losses"].tolist(), state["step"]

    def checkpoint(path: Path) -> Path:
        return save_checkpoint(path, policy, train_cfg, step, optimizer=optimizer, generator=generator,
                               losses=losses, dataset=str(dataset_root),
                               ema=average.weights if average is not None else None)

    policy.train()
    started = time.perf_counter()
    bar = tqdm(total=train_cfg.steps, initial=step, desc=f"train {policy_cfg.variant}", disable=not progress)
    while step < train_cfg.steps:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, train_cfg)
        index = torch.randint(0, len(data), (train_cfg.batch_size,), generator=generator)
        image = None
        if images is not None:
            image = shift_images(image_tensor(images[index.numpy()]), train_cfg.image_shift, generator)
        loss = policy.loss(perturb_states(states[index], policy_cfg, train_cfg.state_noise, generator), image,
                           chunks[index], generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        step += 1
        if average is not None:
            average.update(policy, step)
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
        if step % train_cfg.checkpoint_every == 0 or step == train_cfg.steps:
            checkpoint(out_dir / f"step_{step:06d}.pt")
            checkpoint(out_dir / LAST)
    bar.close()
    seconds = time.perf_counter() - started
    plot_losses(losses, out_dir / "loss.png", f"{policy_cfg.variant}: {len(data)} samples, batch {train_cfg.batch_size}")
    summary = {"checkpoint": str(out_dir / LAST), "steps": step, "samples": len(data), "episodes": len(episodes),
               "episodes_in_dataset": len(dataset.episodes),
               "final_loss_mean_last_100": float(np.mean(losses[-100:])), "seconds_this_run": round(seconds, 1),
               "policy": {k: v for k, v in policy_cfg.__dict__.items() if k != "cell"}, "train": train_cfg.__dict__}
    (out_dir / "train.json").write_text(json.dumps(summary, indent=2))
    return TrainResult(out_dir / LAST, step, losses, len(data), seconds)


def plot_losses(losses: list[float], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, lw=0.5, alpha=0.4, label="per step")
    window = min(100, len(losses))
    if window > 1:
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, lw=1.5, label=f"mean of {window}")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("flow-matching loss")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def configs_from_args(variant: str, overrides: list[str], **train_values) -> tuple[PolicyCfg, TrainCfg]:
    """PolicyCfg and TrainCfg from the command's options (``train_values``, None = default) and ``policy.KEY=V`` /
    ``train.KEY=V`` overrides."""
    from real_is_sim.config import load_config
    from real_is_sim.errors import ConfigError

    unknown = [o for o in overrides if not o.startswith(("policy.", "train."))]
    if unknown:
        raise ConfigError(f"overrides must start with policy. or train., got {unknown}")
    policy = load_config(PolicyCfg, {"variant": variant}, [o[len("policy."):] for o in overrides if o.startswith("policy.")])
    given = {k: v for k, v in train_values.items() if v is not None}
    train = load_config(TrainCfg, given, [o[len("train."):] for o in overrides if o.startswith("train.")])
    return policy, train
