"""Reader of the Embodied Gaussians object file (e.g. ``objects/tblock.json``).

Layout: ``name``, ``X_WB`` (4x4, the body's world pose when it was scanned, *not* where it stands in a
recording), ``gaussians`` {means, quats (w,x,y,z), scales, opacities, colors} and ``particles``
{means, quats, radii, colors}: the spheres used for physics. Means are in the body frame.
This module only parses and validates; conversion to the project's conventions happens in the
consumers (:mod:`real_is_sim.gaussians.io` for Gaussians, the twin for spheres).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real_is_sim.errors import DataError


@dataclass(frozen=True)
class ObjectFile:
    name: str
    X_WB: np.ndarray  # (4, 4)
    gaussians: dict[str, np.ndarray]  # raw arrays as stored (quats w,x,y,z; colors as stored)
    sphere_centers: np.ndarray  # (S, 3) body frame
    sphere_radii: np.ndarray  # (S,)


_GAUSSIAN_SHAPES = {"means": 3, "quats": 4, "scales": 3, "opacities": None, "colors": 3}


def load_object_file(path: str | Path) -> ObjectFile:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"object file not found: {path}")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"object file {path} is not valid JSON: {exc}") from None
    try:
        X_WB = np.asarray(raw["X_WB"], dtype=np.float64)
        particles = raw["particles"]
        centers = np.asarray(particles["means"], dtype=np.float64)
        radii = np.asarray(particles["radii"], dtype=np.float64)
        gaussians = {}
        for key, width in _GAUSSIAN_SHAPES.items():
            arr = np.asarray(raw["gaussians"][key], dtype=np.float64) if "gaussians" in raw else None
            if arr is not None:
                gaussians[key] = arr
    except KeyError as exc:
        raise DataError(f"object file {path} lacks the field {exc}") from None
    except (TypeError, ValueError) as exc:
        raise DataError(f"object file {path} has a non-numeric field: {exc}") from None
    if X_WB.shape != (4, 4):
        raise DataError(f"object file {path}: X_WB must be 4x4, got shape {X_WB.shape}")
    if centers.ndim != 2 or centers.shape[1] != 3 or radii.shape != (centers.shape[0],):
        raise DataError(f"object file {path}: particles need means (S,3) and radii (S,), got {centers.shape}, {radii.shape}")
    n = None
    for key, width in _GAUSSIAN_SHAPES.items():
        if key not in gaussians:
            continue
        arr = gaussians[key]
        expected = (arr.shape[0],) if width is None else (arr.shape[0], width)
        if arr.shape != expected or (n is not None and arr.shape[0] != n):
            raise DataError(f"object file {path}: gaussians.{key} has shape {arr.shape}, expected ({n or 'N'}{'' if width is None else f', {width}'})")
        n = arr.shape[0]
    for label, arr in [("X_WB", X_WB), ("particles.means", centers), ("particles.radii", radii), *[(f"gaussians.{k}", v) for k, v in gaussians.items()]]:
        if not np.all(np.isfinite(arr)):
            raise DataError(f"object file {path}: {label} has non-finite values")
    if np.any(radii <= 0):
        raise DataError(f"object file {path}: particle radii must be positive")
    return ObjectFile(str(raw.get("name", path.stem)), X_WB, gaussians, centers, radii)
