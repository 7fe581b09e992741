"""The empty cell as each camera sees it: what the sensor renders the Gaussians over.

- :func:`table_background` — a simulated cell: a textured table plane, ray-cast per pixel (exact, cheap),
  used by the stand-in real world and by the twin that watches it (both "captured the empty table").
- :func:`median_background` — real footage: the per-pixel temporal median of a clip; the block and the
  robot move, so the median is mostly the table.
"""

from __future__ import annotations

import numpy as np


def table_background(
    K: np.ndarray,
    viewmat: np.ndarray,
    width: int,
    height: int,
    plane: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 0.0),
    base_color: tuple[float, float, float] = (0.55, 0.55, 0.6),
    tile: float = 0.05,
    far_color: tuple[float, float, float] = (0.3, 0.3, 0.32),
) -> np.ndarray:
    """``(H, W, 3)`` float image of a checker-textured plane ``ax+by+cz+d=0`` (OpenCV ``viewmat``)."""
    X_WC = np.linalg.inv(np.asarray(viewmat, dtype=np.float64))
    u, v = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    rays_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], axis=-1)
    rays = rays_cam @ X_WC[:3, :3].T
    origin = X_WC[:3, 3]
    normal, d = np.asarray(plane[:3], dtype=np.float64), float(plane[3])
    denom = rays @ normal
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = -(origin @ normal + d) / denom
    hit = np.isfinite(depth) & (depth > 0)
    points = origin + rays * np.where(hit, depth, 0.0)[..., None]
    checker = (np.floor(points[..., 0] / tile) + np.floor(points[..., 1] / tile)) % 2
    shade = 0.9 + 0.2 * checker
    image = np.where(hit[..., None], np.asarray(base_color) * shade[..., None], np.asarray(far_color))
    return np.clip(image, 0.0, 1.0).astype(np.float32)


def median_background(frames: np.ndarray) -> np.ndarray:
    """Per-pixel median of ``(T, H, W, 3)`` uint8 frames, as float in [0, 1]."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.shape[0] == 0:
        raise ValueError(f"median_background needs (T, H, W, 3) frames, got {frames.shape}")
    return (np.median(frames, axis=0) / 255.0).astype(np.float32)


def median_backgrounds(source, stride: int) -> dict[str, np.ndarray]:
    """Each camera's per-pixel median over every ``stride``-th frame of a replay source (a ``VideoReplaySource``):
    the empty cell of a clip that never shows it empty. Rewinds the source to its start."""
    kept: dict[str, list[np.ndarray]] = {s: [] for s in source.serials}
    for frame in source.frames():  # sequential decoding: far cheaper than seeking every k-th frame
        if frame.index % stride == 0:
            kept[frame.serial].append(frame.image)
    source.seek(source.start_time)
    return {s: median_background(np.stack(images)) for s, images in kept.items()}
