"""Replay a deploy session's camera streams as the loop received them: each frame at the tick it arrived then.

A recording in the replay layout knows when each frame was exposed, not when it reached the loop (camera latency,
dropped frames); the session's ``frames.csv`` does. Delivering by arrival makes a replay see, at every tick, exactly
the frames the live session saw.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from real_is_sim.bridge.recording import ARRIVAL_COLUMNS
from real_is_sim.cameras.base import CameraInfo, CameraSource, Frame
from real_is_sim.cameras.replay import VideoReplaySource
from real_is_sim.errors import DataError


class ArrivalReplaySource(CameraSource):
    def __init__(self, inner: VideoReplaySource, arrivals_csv: str | Path):
        path = Path(arrivals_csv)
        if not path.is_file():
            raise DataError(f"cameras.arrivals: no frames.csv at {path}")
        rows = np.atleast_1d(np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8"))
        if rows.dtype.names != ARRIVAL_COLUMNS:
            raise DataError(f"{path} must have the columns {', '.join(ARRIVAL_COLUMNS)}")
        self.inner = inner
        self._schedule: list[tuple[float, str, int]] = []  # (arrival, serial, frame index in the recording)
        count: dict[str, int] = {}
        for arrival, serial, timestamp in zip(rows["t"], rows["serial"], rows["timestamp"]):
            serial = str(serial)
            if serial not in inner.cameras:
                raise DataError(f"{path} lists camera {serial}, which the recording does not have")
            index = count.get(serial, 0)
            count[serial] = index + 1
            if index >= inner.num_frames(serial):
                break  # the recording ends here (a session cut off before its last frames reached the disk)
            if not np.isclose(inner.timestamps(serial)[index], timestamp, rtol=0.0, atol=1e-9):
                raise DataError(f"{path}: frame {index} of camera {serial} is not the recording's (timestamps differ)")
            self._schedule.append((float(arrival), serial, index))
        self._cursor = 0

    @property
    def cameras(self) -> dict[str, CameraInfo]:
        return self.inner.cameras

    def start(self) -> None:
        self.inner.start()

    def close(self) -> None:
        self.inner.close()

    def now(self) -> float:
        return self._schedule[self._cursor][0] if self._cursor < len(self._schedule) else float("inf")

    def poll(self, t: float | None = None) -> list[Frame]:
        t = self.now() if t is None else t
        frames = []
        while self._cursor < len(self._schedule) and self._schedule[self._cursor][0] <= t + 1e-9:
            _, serial, index = self._schedule[self._cursor]
            frames.append(self.inner.frame(serial, index))
            self._cursor += 1
        return frames
