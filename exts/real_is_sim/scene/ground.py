"""The table plane from a point cloud: RANSAC for the inliers, then least squares on them.

The plane is ``a x + b y + c z + d = 0`` with ``(a, b, c)`` a unit normal pointing up (c > 0, world +z up): points
above the table give a positive value, the convention of ``TableCfg.plane`` and ``ground_plane.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real_is_sim.errors import ConfigError, DataError


@dataclass(frozen=True)
class PlaneFit:
    plane: np.ndarray  # (4,) unit upward normal, d
    inliers: np.ndarray  # (N,) bool
    inlier_ratio: float
    rms_residual: float  # m, of the inliers to the final plane
    iterations: int

    def to_dict(self) -> dict:
        return {"plane": [float(v) for v in self.plane], "inlier_ratio": round(self.inlier_ratio, 4),
                "rms_residual_m": float(self.rms_residual), "points": int(self.inliers.size),
                "inliers": int(self.inliers.sum())}


def least_squares_plane(points: np.ndarray) -> np.ndarray:
    """The plane through the centroid whose normal is the direction of least spread (total least squares), upward."""
    centroid = points.mean(axis=0)
    normal = np.linalg.svd(points - centroid, full_matrices=False)[2][-1]
    if normal[2] < 0:
        normal = -normal
    return np.append(normal, -normal @ centroid)


def load_points(path: str | Path) -> np.ndarray:
    """An (N, 3) float point cloud from ``.npy`` (the shared data's ``environment/ground.npy``)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"point cloud not found: {path}")
    try:
        points = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise DataError(f"{path} is not a numpy array file: {exc}") from None
    return check_points(points, str(path))


def check_points(points: np.ndarray, what: str = "point cloud") -> np.ndarray:
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3:
        raise DataError(f"{what} must be an (N, 3) array of points, got shape {points.shape}")
    points = points[np.all(np.isfinite(points), axis=1)]  # depth cameras mark missing depth as NaN
    if len(points) < 3:
        raise DataError(f"{what} needs at least 3 finite points, got {len(points)}")
    return points


def fit_plane(points: np.ndarray, threshold: float = 0.003, iterations: int = 500, seed: int = 0) -> PlaneFit:
    """RANSAC over ``iterations`` random point triples (inlier: distance < ``threshold`` m; the largest set wins), then
    least squares on that set and its inliers again. Raises DataError when no triple spans a plane or the best plane
    holds under 3 points."""
    points = check_points(points)
    if not threshold > 0 or iterations < 1:
        raise ConfigError(f"fit_plane needs threshold > 0 and iterations >= 1, got {threshold}, {iterations}")
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(iterations):
        a, b, c = points[rng.choice(len(points), size=3, replace=False)]
        normal = np.cross(b - a, c - a)
        length = np.linalg.norm(normal)
        if length < 1e-12:  # collinear sample
            continue
        normal /= length
        inliers = np.abs((points - a) @ normal) < threshold
        if best is None or inliers.sum() > best.sum():
            best = inliers
    if best is None or best.sum() < 3:
        raise DataError("no plane found: the points are collinear or too scattered for the inlier threshold")
    plane = least_squares_plane(points[best])
    inliers = np.abs(points @ plane[:3] + plane[3]) < threshold
    plane = least_squares_plane(points[inliers])  # the refined plane may gain or lose points at the threshold
    residual = points[inliers] @ plane[:3] + plane[3]
    return PlaneFit(plane, inliers, float(inliers.mean()), float(np.sqrt(np.mean(residual**2))), iterations)


def plane_difference(plane: np.ndarray, reference: np.ndarray, at: np.ndarray) -> tuple[float, float]:
    """Angle between the normals (deg) and the distance between the two planes along the reference normal at the
    point ``at`` (m)."""
    n, r = (np.asarray(p[:3], dtype=np.float64) / np.linalg.norm(p[:3]) for p in (plane, reference))
    d, dr = plane[3] / np.linalg.norm(plane[:3]), reference[3] / np.linalg.norm(reference[:3])
    angle = float(np.degrees(np.arccos(np.clip(abs(n @ r), -1.0, 1.0))))
    on_reference = at - (at @ r + dr) * r  # the point at ``at`` projected on the reference plane
    return angle, float(abs(on_reference @ n + d))


def read_ground_plane(path: str | Path) -> np.ndarray:
    """The plane of a ``ground_plane.json`` (``{"plane": [a, b, c, d]}``), normalised, upward normal."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"ground plane file not found: {path}")
    try:
        plane = np.asarray(json.loads(path.read_text())["plane"], dtype=np.float64)
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"ground plane file {path} needs a 'plane' of 4 numbers: {exc}") from None
    if plane.shape != (4,) or not np.all(np.isfinite(plane)) or not np.linalg.norm(plane[:3]) > 0:
        raise DataError(f"ground plane file {path} needs a 'plane' of 4 finite numbers with a non-zero normal, got {plane}")
    plane = plane / np.linalg.norm(plane[:3])
    return -plane if plane[2] < 0 else plane


def write_ground_plane(fit: PlaneFit, path: str | Path) -> Path:
    """``ground_plane.json``'s layout (``{"plane": [a, b, c, d]}``) plus the fit's inlier ratio and residual."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(fit.to_dict(), indent=2))
    os.replace(tmp, path)
    return path
