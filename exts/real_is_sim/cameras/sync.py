"""Hand the control loop, at each tick, the newest frame of every camera without waiting for any of them."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Sequence

from real_is_sim.cameras.base import Frame
from real_is_sim.errors import DataError


@dataclass(frozen=True)
class CameraSample:
    """One camera at one tick: its newest frame (None if it never delivered one) and that frame's age (s)."""

    serial: str
    frame: Frame | None
    age: float
    stale: bool

    @property
    def missing(self) -> bool:
        return self.frame is None


@dataclass(frozen=True)
class SyncedFrames:
    """All cameras at tick time ``t``."""

    t: float
    samples: dict[str, CameraSample]

    @property
    def fresh(self) -> dict[str, Frame]:
        """Frames of the cameras that are neither missing nor stale: what the correction should use."""
        return {s: c.frame for s, c in self.samples.items() if c.frame is not None and not c.stale}

    @property
    def stale(self) -> list[str]:
        return [s for s, c in self.samples.items() if c.frame is not None and c.stale]

    @property
    def missing(self) -> list[str]:
        return [s for s, c in self.samples.items() if c.frame is None]

    @property
    def complete(self) -> bool:
        """Every camera has a fresh frame."""
        return len(self.fresh) == len(self.samples)


class FrameSynchronizer:
    """Keeps the frames pushed by a source and, per :meth:`tick`, picks each camera's newest frame at that time.

    A frame counts at a tick only once its timestamp is ``<= t`` (frames polled ahead of the loop wait).
    A camera whose newest frame is older than ``stale_after`` seconds is marked stale; one that has
    delivered nothing yet is marked missing. Neither blocks the tick.
    """

    def __init__(self, serials: Sequence[str], stale_after: float = 0.05) -> None:
        if not serials:
            raise DataError("FrameSynchronizer needs at least one camera serial")
        if not (stale_after > 0 and math.isfinite(stale_after)):
            raise DataError(f"stale_after must be a positive number of seconds, got {stale_after}")
        self.stale_after = float(stale_after)
        self._current: dict[str, Frame | None] = {s: None for s in serials}
        self._pending: dict[str, deque[Frame]] = {s: deque() for s in serials}

    @property
    def serials(self) -> list[str]:
        return list(self._current)

    def push(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            if frame.serial not in self._pending:
                raise DataError(f"frame from camera {frame.serial}, which this synchronizer does not know ({', '.join(self._current)})")
            pending = self._pending[frame.serial]
            newest = pending[-1] if pending else self._current[frame.serial]
            if newest is not None and frame.timestamp <= newest.timestamp:
                continue  # late or duplicate: never the newest frame
            pending.append(frame)

    def tick(self, t: float) -> SyncedFrames:
        samples = {}
        for serial, pending in self._pending.items():
            while pending and pending[0].timestamp <= t:
                self._current[serial] = pending.popleft()
            frame = self._current[serial]
            age = math.inf if frame is None else t - frame.timestamp
            samples[serial] = CameraSample(serial, frame, age, frame is not None and age > self.stale_after)
        return SyncedFrames(float(t), samples)
