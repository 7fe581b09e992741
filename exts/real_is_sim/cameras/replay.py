"""Play a recorded session (the shared data's layout, or one written by :class:`Recorder`) back as a camera source."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from real_is_sim.cameras.base import CameraInfo, CameraSource, Frame
from real_is_sim.cameras.calibration import load_cameras_json, load_video_metadata
from real_is_sim.cameras.video import VideoReader
from real_is_sim.errors import DataError, RealIsSimError


class VideoReplaySource(CameraSource):
    """Frames of a recording directory (``cameras.json``, ``videos/<serial>.mp4|.json``), by timestamp.

    The clock is the recording's: frame timestamps are those stored in each ``<serial>.json``.

    - ``poll(t)`` returns the frames with timestamp ``<= t`` not delivered yet (the loop drives time).
    - ``poll()`` uses :meth:`now`: with ``realtime=True`` the recording clock advances with the wall
      clock (times ``speed``) from :meth:`start` or the last :meth:`seek`; otherwise ``now()`` is the
      next frame's timestamp, so each ``poll()`` returns the next frame at once (as fast as possible).
    - :meth:`frames` iterates over every remaining frame, sleeping between them when ``realtime``.
    - :meth:`seek` moves the play head; :meth:`frame` reads any frame directly.

    Frames are decoded on demand (one streaming decoder per camera), not up front.
    """

    def __init__(
        self,
        recording_dir: str | Path,
        serials: Sequence[str] | None = None,
        realtime: bool = False,
        speed: float = 1.0,
    ) -> None:
        if not speed > 0:
            raise DataError(f"replay speed must be positive, got {speed}")
        self.recording_dir = Path(recording_dir)
        files = load_cameras_json(self.recording_dir / "cameras.json")
        serials = list(files) if serials is None else [serials] if isinstance(serials, str) else list(serials)
        if not serials:
            raise DataError(f"no cameras to replay from {self.recording_dir}")
        missing = [s for s in serials if s not in files]
        if missing:
            raise DataError(f"camera(s) {', '.join(missing)} not in {self.recording_dir / 'cameras.json'} (has {', '.join(files)})")
        self.realtime = realtime
        self.speed = float(speed)
        self._cameras: dict[str, CameraInfo] = {}
        self._readers: dict[str, VideoReader] = {}
        self._timestamps: dict[str, np.ndarray] = {}
        try:
            for serial in serials:
                self._open_camera(serial, files[serial])
        except BaseException:
            self.close()
            raise
        # One schedule of (timestamp, camera, frame index) over all cameras, in timestamp order.
        times = np.concatenate([self._timestamps[s] for s in serials])
        cams = np.concatenate([np.full(len(self._timestamps[s]), i) for i, s in enumerate(serials)])
        idx = np.concatenate([np.arange(len(self._timestamps[s])) for s in serials])
        order = np.lexsort((cams, times))
        self._schedule_t, self._schedule_cam, self._schedule_idx = times[order], cams[order], idx[order]
        self._serials = list(serials)
        self._cursor = 0
        self._anchor: tuple[float, float] | None = None  # (recording time, monotonic wall time)

    def _open_camera(self, serial: str, files) -> None:
        meta = load_video_metadata(files.metadata_path, serial)
        # An interrupted recording may hold more video frames than flushed timestamps: use the latter.
        reader = VideoReader(files.video_path, allow_partial=not meta.complete)
        self._readers[serial] = reader
        if (reader.width, reader.height) != (meta.width, meta.height):
            raise DataError(
                f"video {files.video_path} is {reader.width}x{reader.height} but {files.metadata_path} says {meta.width}x{meta.height}"
            )
        n_video, n_meta = reader.num_frames, len(meta.timestamps)
        if n_meta == 0:
            raise DataError(f"{files.metadata_path} lists no frames")
        if n_video < n_meta or (meta.complete and n_video != n_meta):
            raise DataError(
                f"video {files.video_path} has {n_video} frames but {files.metadata_path} lists {n_meta} timestamps (truncated video?)"
            )
        self._timestamps[serial] = meta.timestamps
        self._cameras[serial] = CameraInfo(serial, meta.K, meta.width, meta.height, files.X_WC)

    @property
    def cameras(self) -> dict[str, CameraInfo]:
        return dict(self._cameras)

    @property
    def start_time(self) -> float:
        return float(self._schedule_t[0])

    @property
    def end_time(self) -> float:
        return float(self._schedule_t[-1])

    @property
    def finished(self) -> bool:
        return self._cursor >= len(self._schedule_t)

    def num_frames(self, serial: str) -> int:
        return len(self._timestamps[serial])

    def timestamps(self, serial: str) -> np.ndarray:
        return self._timestamps[serial].copy()

    def start(self) -> None:
        if self._anchor is None:
            self._anchor = (self._next_time(), time.monotonic())

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers = {}

    def now(self) -> float:
        if self.realtime:
            self.start()
            t0, wall0 = self._anchor
            return t0 + (time.monotonic() - wall0) * self.speed
        return self._next_time()

    def _next_time(self) -> float:
        return self.end_time if self.finished else float(self._schedule_t[self._cursor])

    def seek(self, t: float) -> None:
        """Move the play head so that the next frames delivered are those with timestamp ``>= t``."""
        self._cursor = int(np.searchsorted(self._schedule_t, t, side="left"))
        self._anchor = (float(t), time.monotonic())

    def frame(self, serial: str, index: int) -> Frame:
        """Frame ``index`` of camera ``serial`` (does not move the play head)."""
        if serial not in self._cameras:
            raise DataError(f"camera {serial} is not part of this replay (has {', '.join(self._cameras)})")
        if serial not in self._readers:
            raise RealIsSimError(f"replay of {self.recording_dir} is closed")
        if not 0 <= index < len(self._timestamps[serial]):
            raise IndexError(f"frame {index} out of range: camera {serial} has {len(self._timestamps[serial])} frames")
        image = self._readers[serial].read(int(index))
        return Frame(serial, image, float(self._timestamps[serial][index]), int(index))

    def poll(self, t: float | None = None) -> list[Frame]:
        if t is None:
            t = self.now()
        stop = int(np.searchsorted(self._schedule_t, t, side="right"))
        frames = [self._scheduled(k) for k in range(self._cursor, stop)]
        self._cursor = max(self._cursor, stop)
        return frames

    def frames(self) -> Iterator[Frame]:
        """Every remaining frame in timestamp order; paced by the wall clock when ``realtime``."""
        self.start()
        while not self.finished:
            k = self._cursor
            if self.realtime:
                wait = (self._schedule_t[k] - self.now()) / self.speed
                if wait > 0:
                    time.sleep(wait)
            self._cursor = k + 1
            yield self._scheduled(k)

    def _scheduled(self, k: int) -> Frame:
        serial = self._serials[self._schedule_cam[k]]
        return self.frame(serial, int(self._schedule_idx[k]))
