"""Frames rendered from a scene (the stand-in real world's cameras), with the flaws of real ones.

The source does not know the renderer: it takes ``render(cameras, t) -> {serial: image}`` where an
image is H x W x 3 RGB, float in [0, 1] or uint8. The simulation drives time: :meth:`capture` at
each camera exposure, :meth:`poll` at each loop tick. Flaws, all optional:

- ``noise_std``: additive Gaussian pixel noise (in [0, 1] units), from a seeded RNG;
- exposure: a gain on the image (``exposure`` at start, :meth:`set_exposure` to change it later);
- ``latency``: a frame captured at ``t`` is released by ``poll`` only from ``t + latency`` on; its
  timestamp stays ``t`` (the exposure time, as a RealSense global timestamp would say);
- ``drop_probability``: a frame is lost with this probability (seeded RNG); its index is skipped.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from real_is_sim.cameras.base import CameraInfo, CameraSource, Frame
from real_is_sim.errors import DataError

_TIME_EPSILON = 1e-9
RenderFn = Callable[[dict[str, CameraInfo], float], Mapping[str, np.ndarray]]


class RenderedSource(CameraSource):
    def __init__(
        self,
        cameras: Mapping[str, CameraInfo] | Sequence[CameraInfo],
        render: RenderFn,
        latency: float = 0.0,
        noise_std: float = 0.0,
        exposure: float = 1.0,
        drop_probability: float = 0.0,
        seed: int = 0,
    ) -> None:
        infos = list(cameras.values()) if isinstance(cameras, Mapping) else list(cameras)
        if not infos:
            raise DataError("RenderedSource needs at least one camera")
        if not callable(render):
            raise DataError(f"render must be callable, got {type(render).__name__}")
        if not (math.isfinite(latency) and latency >= 0):
            raise DataError(f"latency must be >= 0 seconds, got {latency}")
        if not (math.isfinite(noise_std) and noise_std >= 0):
            raise DataError(f"noise_std must be >= 0, got {noise_std}")
        if not 0 <= drop_probability < 1:
            raise DataError(f"drop_probability must be in [0, 1), got {drop_probability}")
        self._cameras = {info.serial: info for info in infos}
        self._render = render
        self.latency = float(latency)
        self.noise_std = float(noise_std)
        self.drop_probability = float(drop_probability)
        self._exposure = {serial: 1.0 for serial in self._cameras}
        self.set_exposure(exposure)
        self._rng = np.random.default_rng(seed)
        self._next_index = {serial: 0 for serial in self._cameras}
        self._in_flight: list[tuple[float, Frame]] = []  # (release time, frame), in capture order
        self._now = -math.inf
        self._last_capture = -math.inf

    @property
    def cameras(self) -> dict[str, CameraInfo]:
        return dict(self._cameras)

    def exposure(self, serial: str) -> float:
        return self._exposure[serial]

    def set_exposure(self, gain: float, serial: str | None = None) -> None:
        """Multiply every later image of ``serial`` (all cameras when None) by ``gain``."""
        if not (math.isfinite(gain) and gain > 0):
            raise DataError(f"exposure gain must be positive, got {gain}")
        if serial is not None and serial not in self._cameras:
            raise DataError(f"camera {serial} is not part of this source ({', '.join(self._cameras)})")
        for s in [serial] if serial is not None else self._cameras:
            self._exposure[s] = float(gain)

    def now(self) -> float:
        """The latest time the simulation passed to :meth:`capture` or :meth:`poll`."""
        return self._now

    def capture(self, t: float) -> None:
        """Render every camera at time ``t`` and put the frames in flight (or drop them)."""
        if not math.isfinite(t) or t <= self._last_capture:
            raise DataError(f"capture time {t} must be finite and after the previous capture ({self._last_capture})")
        self._last_capture = self._now = float(t)
        images = self._render(dict(self._cameras), float(t))
        for serial, info in self._cameras.items():
            if serial not in images:
                raise DataError(f"render returned no image for camera {serial} at t={t}")
            image = self._finish(serial, info, images[serial], t)
            index = self._next_index[serial]
            self._next_index[serial] = index + 1
            if self.drop_probability and self._rng.random() < self.drop_probability:
                continue
            self._in_flight.append((t + self.latency, Frame(serial, image, float(t), index)))

    def _finish(self, serial: str, info: CameraInfo, image: object, t: float) -> np.ndarray:
        """Validate a rendered image and apply exposure and noise; uint8 RGB out."""
        image = np.asarray(image)
        if image.shape != (info.height, info.width, 3):
            raise DataError(f"render gave camera {serial} an image of shape {image.shape}, expected {(info.height, info.width, 3)}")
        if image.dtype == np.uint8:
            if self.noise_std == 0 and self._exposure[serial] == 1.0:
                return image.copy()
            image = image / 255.0
        elif np.issubdtype(image.dtype, np.floating):
            if not np.all(np.isfinite(image)):
                raise DataError(f"render gave camera {serial} an image with NaN or infinite values at t={t}")
        else:
            raise DataError(f"render gave camera {serial} an image of dtype {image.dtype}, expected float or uint8")
        image = image * self._exposure[serial]
        if self.noise_std:
            image = image + self._rng.normal(0.0, self.noise_std, image.shape)
        return np.round(np.clip(image, 0.0, 1.0) * 255.0).astype(np.uint8)

    def poll(self, t: float | None = None) -> list[Frame]:
        """Frames whose release time has passed by ``t`` (default :meth:`now`), oldest first."""
        if t is None:
            t = self._now
        self._now = max(self._now, float(t))
        due = t + _TIME_EPSILON  # capture(0.1) with latency 0.03 is due at poll(0.13) despite rounding
        released = [frame for release, frame in self._in_flight if release <= due]
        self._in_flight = [(release, frame) for release, frame in self._in_flight if release > due]
        return released
