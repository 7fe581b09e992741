"""What every camera source hands the loop: calibrated camera descriptions and timestamped frames.

Conventions:
- ``X_WC`` is the camera-to-world pose with **OpenGL axes** (camera looks down -Z, +Y up), as the
  shared data stores it. :meth:`CameraInfo.viewmat_opencv` is the one place a source-level caller
  gets OpenCV axes (via :func:`real_is_sim.transforms.viewmat_from_opengl`).
- ``K`` is the 3x3 pinhole intrinsic matrix in pixels for an image of ``width`` x ``height``.
- Images are ``H x W x 3`` uint8 RGB.
- Timestamps are seconds on the source's one clock (:meth:`CameraSource.now`): the recording clock
  for replays, the host clock (``time.time()``) for RealSense, simulation time for rendered sources.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from real_is_sim.errors import DataError
from real_is_sim.transforms import opengl_to_opencv, viewmat_from_opengl


def check_pose(X: object, what: str) -> np.ndarray:
    """A 4x4 rigid transform as float64, or :class:`DataError` naming ``what``."""
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{what} is not a numeric 4x4 matrix") from None
    if X.shape != (4, 4):
        raise DataError(f"{what} must be a 4x4 matrix, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise DataError(f"{what} contains NaN or infinite values")
    R = X[:3, :3]
    if not np.allclose(X[3], [0.0, 0.0, 0.0, 1.0]) or not np.allclose(R.T @ R, np.eye(3), atol=1e-3) or np.linalg.det(R) < 0:
        raise DataError(f"{what} is not a rigid transform (rotation not orthonormal or last row not 0 0 0 1)")
    return X


def check_intrinsics(K: object, what: str) -> np.ndarray:
    """A 3x3 pinhole matrix with positive focal lengths as float64, or :class:`DataError`."""
    try:
        K = np.asarray(K, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{what} is not a numeric 3x3 matrix") from None
    if K.shape != (3, 3):
        raise DataError(f"{what} must be a 3x3 matrix, got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise DataError(f"{what} contains NaN or infinite values")
    if K[0, 0] <= 0 or K[1, 1] <= 0 or not np.allclose(K[2], [0.0, 0.0, 1.0]):
        raise DataError(f"{what} is not a pinhole matrix (fx, fy > 0 and last row 0 0 1 required)")
    return K


@dataclass(frozen=True)
class CameraInfo:
    """One calibrated camera: ``serial``, intrinsics ``K`` for ``width`` x ``height``, pose ``X_WC`` (OpenGL axes)."""

    serial: str
    K: np.ndarray
    width: int
    height: int
    X_WC: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.serial, str) or not self.serial:
            raise DataError(f"camera serial must be a non-empty string, got {self.serial!r}")
        object.__setattr__(self, "K", check_intrinsics(self.K, f"K of camera {self.serial}"))
        object.__setattr__(self, "X_WC", check_pose(self.X_WC, f"X_WC of camera {self.serial}"))
        for name in ("width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise DataError(f"{name} of camera {self.serial} must be a positive integer, got {value!r}")
            object.__setattr__(self, name, int(value))

    @property
    def resolution(self) -> tuple[int, int]:
        """``(W, H)`` as the shared JSON stores it."""
        return (self.width, self.height)

    def X_WC_opencv(self) -> np.ndarray:
        """Camera-to-world pose with OpenCV axes (+Z forward, +Y down)."""
        return opengl_to_opencv(self.X_WC)

    def viewmat_opencv(self) -> np.ndarray:
        """World-to-camera 4x4 matrix with OpenCV axes (gsplat's ``viewmats``)."""
        return viewmat_from_opengl(self.X_WC)


@dataclass(frozen=True)
class Frame:
    """One colour image of camera ``serial``: ``image`` H x W x 3 uint8 RGB, ``timestamp`` (s), ``index`` in its stream."""

    serial: str
    image: np.ndarray
    timestamp: float
    index: int

    def __post_init__(self) -> None:
        image = self.image
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            shape = getattr(image, "shape", None)
            dtype = getattr(image, "dtype", type(image).__name__)
            raise DataError(f"frame of camera {self.serial} must be an HxWx3 uint8 image, got shape {shape} dtype {dtype}")
        if not np.isfinite(self.timestamp):
            raise DataError(f"frame {self.index} of camera {self.serial} has a non-finite timestamp")


class CameraSource(abc.ABC):
    """A set of calibrated cameras delivering timestamped frames on one clock.

    Use as a context manager (``start`` / ``close``). Each :meth:`poll` returns the frames that
    became available since the previous poll, in timestamp order, never blocking on a camera.
    """

    @property
    @abc.abstractmethod
    def cameras(self) -> dict[str, CameraInfo]:
        """Camera descriptions by serial, in a fixed order."""

    @property
    def serials(self) -> list[str]:
        return list(self.cameras)

    def start(self) -> None:
        """Acquire devices or files; idempotent. Sources that need nothing do nothing."""

    def close(self) -> None:
        """Release devices or files; idempotent."""

    @abc.abstractmethod
    def now(self) -> float:
        """The current time on this source's clock (seconds)."""

    @abc.abstractmethod
    def poll(self, t: float | None = None) -> list[Frame]:
        """Frames that became available up to time ``t`` (default :meth:`now`), oldest first."""

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
