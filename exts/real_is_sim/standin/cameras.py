"""Calibrated virtual cameras for simulated cells: a ring looking at the work area, like the real three."""

from __future__ import annotations

import numpy as np

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.transforms import look_at_X_WC

# The shared recording's RealSense colour focal length at 480x270 (pixels, rounded).
DEFAULT_FOCAL = 242.0


def ring_cameras(target, count: int = 3, distance: float = 0.7, elevation_deg: float = 45.0,
                 width: int = 480, height: int = 270, focal: float | None = None, first_azimuth_deg: float = -80.0,
                 span_deg: float = 160.0) -> list[CameraInfo]:
    """``count`` cameras on an arc around ``target``, from ``first_azimuth_deg`` over ``span_deg`` (azimuth 0 looks
    back along -x: the default arc faces the robot, which stands at the origin, so the arm rarely blocks a view);
    the focal length defaults to the RealSense's field of view."""
    target = np.asarray(target, dtype=np.float64)
    focal = DEFAULT_FOCAL * width / 480 if focal is None else focal
    K = np.array([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])
    cameras = []
    elevation = np.radians(elevation_deg)
    for k in range(count):
        azimuth = np.radians(first_azimuth_deg + (span_deg * k / (count - 1) if count > 1 else 0.0))
        offset = distance * np.array([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth), np.sin(elevation)])
        cameras.append(CameraInfo(f"sim{k}", K, width, height, look_at_X_WC(target + offset, target)))
    return cameras
