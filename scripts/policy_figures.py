"""Figures of docs/policy.md: what the camera variants see, and a trained policy's chunks beside the demonstration's.

    python scripts/policy_figures.py --dataset out/demos/pusht_scripted --checkpoint out/policy/pose/last.pt
    python scripts/policy_figures.py --dataset DATASET --fit-quality CKPT [CKPT ...]

Writes ``OUT/policy_observations.png`` (the three image variants at the policy's resolution for two recorded
states) and ``OUT/policy_chunks.png`` (joints 1, 2, 4 and progress of 8 sampled chunks against the recorded chunk,
at three frames of one episode). ``--fit-quality``: how far single samples are from the recorded chunks, and how
jagged they are, per checkpoint (the trunk and basis comparison of docs/policy.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from real_is_sim.cli import quiet_warp
from real_is_sim.demos.dataset import load_dataset
from real_is_sim.policy.checkpoint import load_checkpoint
from real_is_sim.policy.data import build_training_set
from real_is_sim.policy.observations import renderer_for

VARIANTS = ("static_camera", "wrist_camera", "real_image")
SAMPLES = 8


def observations_figure(dataset, size: int, out: Path) -> Path:
    episode = dataset.episodes[0]
    frames = [0, len(episode.t) // 2]
    fig, axes = plt.subplots(len(frames), len(VARIANTS), figsize=(2.4 * len(VARIANTS), 2.5 * len(frames)))
    for col, variant in enumerate(VARIANTS):
        images = renderer_for(variant, size, dataset.cell_yaml).render(episode.object_poses[frames], episode.q[frames])
        for row, frame in enumerate(frames):
            axes[row, col].imshow(images[row], interpolation="nearest")
            axes[row, col].set_xticks([])
            axes[row, col].set_yticks([])
            axes[row, col].set_title(f"{variant}, t={episode.t[frame]:.1f} s", fontsize=8)
    fig.suptitle(f"episode {episode.index}: the policy's {size}x{size} observations", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def chunks_figure(dataset, checkpoint: str, out: Path) -> Path:
    policy, _ = load_checkpoint(checkpoint)
    cfg = policy.cfg
    episode = dataset.episodes[0]
    data = build_training_set([episode], cfg.waypoints, cfg.horizon_s, cfg.num_objects)
    frames = np.linspace(0, len(data) - 1, 3).astype(int)
    images = None
    if cfg.uses_images:
        images = renderer_for(cfg.variant, cfg.image_size, cfg.cell).render(
            np.repeat(data.object_poses[frames], SAMPLES, 0), np.repeat(data.q[frames], SAMPLES, 0))
    samples = policy.act(np.repeat(data.object_poses[frames], SAMPLES, 0), np.repeat(data.q[frames], SAMPLES, 0),
                         images, generator=torch.Generator().manual_seed(0)).reshape(len(frames), SAMPLES, cfg.waypoints, 8)
    dims = [(0, "joint 1 [rad]"), (1, "joint 2 [rad]"), (3, "joint 4 [rad]"), (7, "progress")]
    waypoint_t = np.arange(cfg.waypoints) * cfg.horizon_s / cfg.waypoints
    fig, axes = plt.subplots(len(dims), len(frames), figsize=(3.2 * len(frames), 1.9 * len(dims)), sharex=True)
    for col, frame in enumerate(frames):
        for row, (d, label) in enumerate(dims):
            ax = axes[row, col]
            for s in range(SAMPLES):
                ax.plot(waypoint_t, samples[col, s, :, d], color="tab:blue", lw=0.8, alpha=0.5,
                        label="policy samples" if s == 0 else None)
            ax.plot(waypoint_t, data.chunks[frame, :, d], color="k", lw=1.5, ls="--", label="demonstration")
            if col == 0:
                ax.set_ylabel(label, fontsize=8)
            if row == 0:
                ax.set_title(f"t = {episode.t[frame]:.1f} s", fontsize=9)
            ax.tick_params(labelsize=7)
        axes[-1, col].set_xlabel("waypoint time [s]", fontsize=8)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"{cfg.variant} policy ({checkpoint}), episode {episode.index}: {SAMPLES} samples per state", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def fit_quality(dataset, checkpoints: list[str], every: int = 25) -> list[dict]:
    """Per checkpoint: mean |sample - recorded chunk| over the joints (one sample per state, every ``every``-th
    training sample of the dataset) and the mean |second difference| between waypoints (jitter), with the data's."""
    rows = []
    for checkpoint in checkpoints:
        policy, state = load_checkpoint(checkpoint)
        cfg = policy.cfg
        data = build_training_set([e for e in dataset.episodes if e.success], cfg.waypoints, cfg.horizon_s, cfg.num_objects)
        picked = np.arange(0, len(data), every)
        images = renderer_for(cfg.variant, cfg.image_size, cfg.cell).render(data.object_poses[picked], data.q[picked]) \
            if cfg.uses_images else None
        chunks = policy.act(data.object_poses[picked], data.q[picked], images, generator=torch.Generator().manual_seed(0))
        recorded = data.chunks[picked]
        rows.append({"checkpoint": checkpoint, "trunk": cfg.trunk, "basis": cfg.basis, "steps": state["step"],
                     "loss_last_100": round(float(state["losses"][-100:].mean()), 4),
                     "sample_error_rad": round(float(np.abs(chunks - recorded)[..., :7].mean()), 4),
                     "jitter_rad": round(float(np.abs(np.diff(chunks[..., :7], 2, axis=1)).mean()), 4),
                     "data_jitter_rad": round(float(np.abs(np.diff(recorded[..., :7], 2, axis=1)).mean()), 4)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--checkpoint", help="a trained policy (chunks figure)")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--fit-quality", nargs="+", metavar="CKPT", help="only print the fit quality of these "
                                                                      "checkpoints (JSON on the last line)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    quiet_warp()
    dataset = load_dataset(args.dataset)
    if args.fit_quality:
        print(json.dumps(fit_quality(dataset, args.fit_quality)))
        return
    out = Path(args.out)
    print(observations_figure(dataset, args.image_size, out / "policy_observations.png"))
    if args.checkpoint:
        print(chunks_figure(dataset, args.checkpoint, out / "policy_chunks.png"))


if __name__ == "__main__":
    main()
