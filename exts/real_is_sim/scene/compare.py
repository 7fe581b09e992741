"""How close a built object is to a known one: footprint, volume, pose, appearance in a view."""

from __future__ import annotations

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from real_is_sim.scene.hull import table_frame


def _union_of_spheres(centers: np.ndarray, radius: float, grid: np.ndarray) -> np.ndarray:
    distance, _ = cKDTree(centers).query(grid, distance_upper_bound=radius)
    return np.isfinite(distance)


def footprint_iou(centers_a: np.ndarray, centers_b: np.ndarray, radius: float, plane, cell: float = 0.001) -> float:
    """IoU of two sphere sets' footprints on the table, on a ``cell`` grid. A footprint is the union of the discs of
    ``radius`` under the centres, closed by a disc of the same radius: the gaps between neighbouring spheres (which
    no pusher fits into) count as solid, so two fills of one shape at different spacings compare equal."""
    X_WT = table_frame(plane)
    a, b = (((c - X_WT[:3, 3]) @ X_WT[:3, :3])[:, :2] for c in (centers_a, centers_b))
    both = np.concatenate([a, b])
    pad = 3 * radius  # room for the closing
    axes = [np.arange(lo - pad, hi + pad + cell, cell) for lo, hi in zip(both.min(0), both.max(0))]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
    steps = int(round(radius / cell))
    disc = np.hypot(*np.mgrid[-steps:steps + 1, -steps:steps + 1]) <= steps
    shape = (len(axes[0]), len(axes[1]))
    in_a, in_b = (ndimage.binary_closing(_union_of_spheres(p, radius, grid).reshape(shape), structure=disc)
                  for p in (a, b))
    return float((in_a & in_b).sum() / max((in_a | in_b).sum(), 1))


def solid_volume(centers: np.ndarray, radius: float, cell: float = 0.002) -> float:
    """Volume (m^3) of the union of equal spheres closed by a ball of the same radius (as :func:`footprint_iou`, the
    gaps between neighbouring spheres count as solid), counted on a ``cell`` grid."""
    pad = 3 * radius
    axes = [np.arange(lo - pad, hi + pad + cell, cell) for lo, hi in zip(centers.min(0), centers.max(0))]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    steps = int(round(radius / cell))
    ball = np.linalg.norm(np.mgrid[-steps:steps + 1, -steps:steps + 1, -steps:steps + 1], axis=0) <= steps
    solid = ndimage.binary_closing(_union_of_spheres(centers, radius, grid).reshape([len(a) for a in axes]), structure=ball)
    return float(solid.sum()) * cell**3


def pose_error(X_a: np.ndarray, X_b: np.ndarray, plane) -> tuple[float, float]:
    """Distance of the two frames' origins in the table plane (m) and the angle between their x axes about the
    table normal (deg)."""
    X_WT = table_frame(plane)
    a, b = (np.linalg.inv(X_WT) @ X for X in (X_a, X_b))
    yaw = np.arctan2(a[1, 0], a[0, 0]) - np.arctan2(b[1, 0], b[0, 0])
    return float(np.linalg.norm(a[:2, 3] - b[:2, 3])), float(abs(np.degrees(np.arctan2(np.sin(yaw), np.cos(yaw)))))


def psnr(image: np.ndarray, reference: np.ndarray) -> float:
    mse = float(np.mean((np.asarray(image, dtype=np.float64) - reference) ** 2))
    return float(10 * np.log10(1.0 / max(mse, 1e-12)))
