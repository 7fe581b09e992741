"""Streaming decode of one video file with random access by frame index (PyAV).

Only the packet index (presentation timestamps and keyframes, read once without decoding) is kept
in memory; frames are decoded on demand. Reading the next frame continues the running decoder;
jumping backwards or past a keyframe seeks to the nearest keyframe first.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import av
import numpy as np

from real_is_sim.errors import DataError


class VideoReader:
    """Frames of ``path`` as H x W x 3 uint8 RGB, by index in presentation order.

    ``allow_partial`` accepts a file whose tail cannot be demuxed (a recording killed mid-way):
    the frames before the damage are used. Otherwise damage anywhere raises :class:`DataError`.
    """

    def __init__(self, path: str | Path, allow_partial: bool = False) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(f"video not found: {self.path}")
        try:
            self._container = av.open(str(self.path))
        except av.FFmpegError as exc:
            raise DataError(f"video {self.path} cannot be opened (corrupt or truncated?): {exc}") from None
        if not self._container.streams.video:
            self._container.close()
            raise DataError(f"video {self.path} has no video stream")
        self._stream = self._container.streams.video[0]
        self.width = self._stream.codec_context.width
        self.height = self._stream.codec_context.height
        pts, keyframe_pts = self._read_packet_index(allow_partial)
        self._pts = sorted(pts)
        if len(set(self._pts)) != len(self._pts):
            raise DataError(f"video {self.path} has frames with duplicate timestamps")
        self._index_of = {p: i for i, p in enumerate(self._pts)}
        self._keyframes = sorted(self._index_of[p] for p in keyframe_pts)
        self._decoded = None  # running decoder (generator of av.VideoFrame)
        self._next_index: int | None = None  # index the running decoder yields next

    def _read_packet_index(self, allow_partial: bool) -> tuple[list[int], list[int]]:
        pts, keyframe_pts = [], []
        try:
            for packet in self._container.demux(self._stream):
                if packet.pts is None or packet.size == 0:  # the demuxer's final flush packet
                    continue
                pts.append(packet.pts)
                if packet.is_keyframe:
                    keyframe_pts.append(packet.pts)
        except av.FFmpegError as exc:
            if not allow_partial:
                raise DataError(f"video {self.path} is damaged after {len(pts)} frames: {exc}") from None
        if not pts:
            raise DataError(f"video {self.path} has no frames")
        return pts, keyframe_pts

    @property
    def num_frames(self) -> int:
        return len(self._pts)

    def read(self, index: int) -> np.ndarray:
        """Decode frame ``index`` (0-based, presentation order)."""
        if not 0 <= index < len(self._pts):
            raise IndexError(f"frame {index} out of range: video {self.path} has {len(self._pts)} frames")
        if self._next_index is None or index < self._next_index or self._keyframe_in(self._next_index, index):
            self._seek(index)
        try:
            for frame in self._decoded:
                i = self._index_of.get(frame.pts)
                if i is None or i < index:
                    continue
                self._next_index = i + 1
                if i != index:
                    raise DataError(f"video {self.path}: frame {index} could not be decoded (decoder skipped to {i})")
                return frame.to_ndarray(format="rgb24")
        except av.FFmpegError as exc:
            self._next_index = None
            raise DataError(f"video {self.path}: decoding frame {index} failed (corrupt data?): {exc}") from None
        self._next_index = None
        raise DataError(f"video {self.path} ends before frame {index} (truncated?)")

    def _keyframe_in(self, start: int, stop: int) -> bool:
        """Is there a keyframe with index in ``(start, stop]``? Then seeking beats decoding forward."""
        k = bisect.bisect_right(self._keyframes, start)
        return k < len(self._keyframes) and self._keyframes[k] <= stop

    def _seek(self, index: int) -> None:
        try:
            self._container.seek(self._pts[index], stream=self._stream, backward=True, any_frame=False)
        except av.FFmpegError as exc:
            raise DataError(f"video {self.path}: seeking to frame {index} failed: {exc}") from None
        self._decoded = self._container.decode(self._stream)
        self._next_index = 0  # unknown until decoded; any index >= 0 continues from here

    def close(self) -> None:
        self._container.close()
