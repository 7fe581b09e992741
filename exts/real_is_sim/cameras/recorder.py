"""Record live camera streams into the replay layout, so every real session can be played back.

Output (the layout :class:`VideoReplaySource` reads)::

    <out_dir>/cameras.json              poses X_WC (OpenGL axes) and file paths
    <out_dir>/videos/<serial>.mp4       H.264, fragmented MP4, one fragment per frame
    <out_dir>/videos/<serial>.json      serial, K, resolution, timestamps (+ "complete")

Surviving a killed process: every frame is its own MP4 fragment and the muxer flushes its I/O
after every packet (``movflags=frag_every_frame+empty_moov``, ``flush_packets=1``), so the video on
disk is playable up to the last written fragment without a closing ``moov`` box. The muxer writes a
frame's fragment only when the next packet arrives, so the newest muxed frame is not on disk yet.
The metadata JSON is rewritten atomically (temporary file + rename) every ``flush_interval`` seconds
with the timestamps of the frames on disk so far and ``"complete": false``; :meth:`close` writes it with
``"complete": true``. A replay of an interrupted recording therefore sees a valid JSON listing at
most as many frames as the video holds and plays those. (A killed process, not a power cut: the
video is not fsync'ed.)
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import av
import numpy as np

from real_is_sim.cameras.base import CameraInfo, Frame
from real_is_sim.cameras.calibration import VideoMetadata, save_cameras_json, save_video_metadata
from real_is_sim.errors import ConfigError, DataError, RealIsSimError

# 90 kHz: the usual video clock; frame timestamps (seconds) become presentation times on it.
_TIME_BASE = Fraction(1, 90_000)
_MUXER_OPTIONS = {"movflags": "frag_every_frame+empty_moov+default_base_moof", "flush_packets": "1"}


class _CameraTrack:
    """One camera's video file and the timestamps of the frames muxed into it."""

    def __init__(self, info: CameraInfo, video_path: Path, fps: float, crf: int, preset: str, lossless: bool) -> None:
        self.info = info
        self.container = av.open(str(video_path), "w", format="mp4", options=dict(_MUXER_OPTIONS))
        # zerolatency: no lookahead or B-frames, so each frame's packet is muxed as soon as it is encoded.
        # A keyframe every second of video bounds what a seek in the replay has to decode.
        options = {"preset": preset, "tune": "zerolatency", "crf": "0" if lossless else str(crf), "g": str(max(1, round(fps)))}
        # lossless: x264 on the RGB pixels at crf 0 (yuv420p at crf 0 still loses the colour conversion and chroma).
        codec = "libx264rgb" if lossless else "libx264"
        self.stream = self.container.add_stream(codec, rate=Fraction(fps).limit_denominator(1000), options=options)
        self.stream.width, self.stream.height = info.width, info.height
        self.stream.pix_fmt = "rgb24" if lossless else "yuv420p"
        self.stream.time_base = _TIME_BASE
        self.stream.codec_context.time_base = _TIME_BASE  # else the encoder rounds pts to 1/fps
        try:
            self.stream.codec_context.open()  # now, so that a bad preset or crf fails here, not at the first frame
        except av.FFmpegError as exc:
            self.container.close()
            raise ConfigError(f"x264 rejects the recorder settings {options}: {exc}") from None
        self.submitted: list[float] = []  # timestamps of frames given to the encoder
        self.muxed = 0  # how many of them were handed to the muxer

    def encode(self, frame: Frame) -> None:
        video_frame = av.VideoFrame.from_ndarray(frame.image, format="rgb24")
        video_frame.pts = round((frame.timestamp - (self.submitted[0] if self.submitted else frame.timestamp)) / _TIME_BASE)
        video_frame.time_base = _TIME_BASE
        self.submitted.append(frame.timestamp)
        self._mux(self.stream.encode(video_frame))

    def _mux(self, packets) -> None:
        for packet in packets:
            self.container.mux(packet)
            self.muxed += 1

    @property
    def on_disk(self) -> int:
        """How many frames the file holds now. With ``frag_every_frame`` the muxer writes a frame's
        fragment when the next packet arrives (measured: the last muxed frame is never on disk)."""
        return max(0, self.muxed - 1)

    def finish(self) -> None:
        self._mux(self.stream.encode(None))
        self.container.close()


class Recorder:
    """Writes frames of ``cameras`` into a new recording directory ``out_dir``.

    ``fps`` is the nominal camera rate (a rate-control hint for the encoder; the true times are the
    frames' timestamps). ``crf`` is x264's quality (lower is better; 18 is nearly transparent).
    ``preset`` is x264's speed preset: "ultrafast" (about 1.5-4 ms per 480x270 frame on a loaded
    2-core machine; see docs/cameras.md) keeps up with three 90 Hz cameras, at larger files than
    slower presets. ``lossless`` stores the exact pixels (libx264rgb at crf 0; files ~10x larger): a replay
    then sees exactly what the live loop saw.
    """

    def __init__(
        self,
        out_dir: str | Path,
        cameras: Mapping[str, CameraInfo] | Sequence[CameraInfo],
        fps: float = 90.0,
        crf: int = 18,
        preset: str = "ultrafast",
        flush_interval: float = 0.5,
        lossless: bool = False,
    ) -> None:
        infos = list(cameras.values()) if isinstance(cameras, Mapping) else list(cameras)
        if not infos:
            raise DataError("Recorder needs at least one camera")
        for info in infos:
            if not lossless and (info.width % 2 or info.height % 2):
                raise DataError(f"camera {info.serial}: H.264 (yuv420p) needs even width and height, got {info.width}x{info.height}")
        if not fps > 0:
            raise ConfigError(f"Recorder fps must be positive, got {fps}")
        if not 0 < flush_interval < float("inf"):
            raise ConfigError(f"Recorder flush_interval must be a positive number of seconds, got {flush_interval}")
        self.out_dir = Path(out_dir)
        if (self.out_dir / "cameras.json").exists():
            raise DataError(f"refusing to overwrite the recording in {self.out_dir}")
        (self.out_dir / "videos").mkdir(parents=True, exist_ok=True)
        self.flush_interval = float(flush_interval)
        self._tracks: dict[str, _CameraTrack] = {}
        try:
            for info in infos:
                self._tracks[info.serial] = _CameraTrack(info, self._video_path(info.serial), fps, crf, preset, lossless)
        except BaseException:
            for track in self._tracks.values():
                track.container.close()
            raise
        save_cameras_json(self.out_dir / "cameras.json", {info.serial: info.X_WC for info in infos})
        self._closed = False
        self.flush()

    def _video_path(self, serial: str) -> Path:
        return self.out_dir / "videos" / f"{serial}.mp4"

    def frames_written(self, serial: str) -> int:
        return len(self._tracks[serial].submitted)

    def write(self, frame: Frame) -> None:
        if self._closed:
            raise RealIsSimError(f"recording {self.out_dir} is closed")
        track = self._tracks.get(frame.serial)
        if track is None:
            raise DataError(f"frame from camera {frame.serial}, which recording {self.out_dir} does not have")
        expected = (track.info.height, track.info.width, 3)
        if frame.image.shape != expected:
            raise DataError(f"frame of camera {frame.serial} has shape {frame.image.shape}, expected {expected}")
        if track.submitted and frame.timestamp <= track.submitted[-1]:
            raise DataError(
                f"frame of camera {frame.serial} at {frame.timestamp} s is not after the previous one ({track.submitted[-1]} s)"
            )
        track.encode(frame)
        if time.monotonic() - self._last_flush >= self.flush_interval:
            self.flush()

    def write_all(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            self.write(frame)

    def flush(self) -> None:
        """Make every frame on disk replayable now (rewrite the metadata JSON)."""
        for serial, track in self._tracks.items():
            self._save_metadata(track, complete=False)
        self._last_flush = time.monotonic()

    def _save_metadata(self, track: _CameraTrack, complete: bool) -> None:
        info = track.info
        listed = track.submitted[: track.muxed if complete else track.on_disk]
        meta = VideoMetadata(info.serial, info.K, info.width, info.height, np.array(listed), complete)
        save_video_metadata(self.out_dir / "videos" / f"{info.serial}.json", meta)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for track in self._tracks.values():
            track.finish()
            self._save_metadata(track, complete=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
