"""Figures of a recorded session: the twin-to-reality sync error over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from real_is_sim.transforms import rotation_angle_between


def sync_error_over_time(session_dir: Path) -> np.ndarray:
    """``(T, 3)``: t, position error (m, in the table plane), rotation error (rad) of a recorded stand-in session."""
    twin = np.genfromtxt(session_dir / "twin.csv", delimiter=",", names=True)
    truth = np.genfromtxt(session_dir / "ground_truth.csv", delimiter=",", names=True)
    n = min(len(twin), len(truth))
    twin, truth = twin[:n], truth[:n]
    position = np.hypot(twin["x"] - truth["x"], twin["y"] - truth["y"])
    quat = lambda rows: np.stack([rows["qx"], rows["qy"], rows["qz"], rows["qw"]], axis=1)  # noqa: E731
    rotation = np.array([rotation_angle_between(a, b) for a, b in zip(quat(twin), quat(truth))])
    return np.stack([twin["t"], position, rotation], axis=1)


def plot_sync_error(sessions: dict[str, Path], path: Path) -> Path:
    """Position and rotation error over time of each labelled session, side by side; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for label, session_dir in sessions.items():
        errors = sync_error_over_time(Path(session_dir))
        axes[0].plot(errors[:, 0], errors[:, 1] * 1e3, label=label)
        axes[1].plot(errors[:, 0], np.degrees(errors[:, 2]), label=label)
    for ax, unit in zip(axes, ("position error (mm)", "rotation error (deg)")):
        ax.set_xlabel("time (s)")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("twin vs stand-in reality (ground truth)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
