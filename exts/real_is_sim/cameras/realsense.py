"""Intel RealSense colour streams (D455 in the paper's cell) as a camera source, via ``pyrealsense2``.

- Devices are enumerated and the configured serials started at one resolution and rate; a serial
  that is not connected fails :meth:`RealSenseSource.start` with one :class:`CameraUnavailableError`
  naming every missing serial.
- Hardware sync: where the device supports ``inter_cam_sync_mode``, the first serial is the master (1)
  and the others slaves (2), so exposures line up (needs the sync cable).
- Timestamps: ``global_time_enabled`` makes librealsense translate the device clock into the host's
  (milliseconds on ``time.time()``'s clock); frames in ``system_time`` are host time too. A device
  that only offers its ``hardware_clock`` gets the host arrival time instead (a few ms later).
- Intrinsics ``K`` come from the device's active colour profile; poses ``X_WC`` (OpenGL axes) from
  the caller, e.g. :func:`load_extrinsics`.
- ``pyrealsense2`` is imported only when a source starts (the ``hardware`` extra).
"""

from __future__ import annotations

import time
from typing import Mapping

import numpy as np

from real_is_sim.cameras.base import CameraInfo, CameraSource, Frame, check_pose
from real_is_sim.errors import DataError, RealIsSimError

_SYNC_MASTER, _SYNC_SLAVE = 1.0, 2.0


class CameraUnavailableError(RealIsSimError, RuntimeError):
    """A requested camera is not connected, or its driver is not installed."""


def _pyrealsense2():
    try:
        import pyrealsense2
    except ImportError as exc:
        raise CameraUnavailableError(f"pyrealsense2 is not installed (pip install 'real-is-sim[hardware]'): {exc}") from None
    return pyrealsense2


def list_realsense_devices() -> list[str]:
    """Serial numbers of the RealSense devices connected now."""
    rs = _pyrealsense2()
    return [device.get_info(rs.camera_info.serial_number) for device in rs.context().query_devices()]


class RealSenseSource(CameraSource):
    """Colour streams of the RealSense cameras named by the keys of ``X_WC`` (serial -> 4x4 pose)."""

    def __init__(
        self,
        X_WC: Mapping[str, np.ndarray],
        width: int = 480,
        height: int = 270,
        fps: int = 90,
        hardware_sync: bool = True,
    ) -> None:
        if not X_WC:
            raise DataError("RealSenseSource needs at least one camera serial with its pose X_WC")
        self._poses = {str(serial): check_pose(pose, f"X_WC of camera {serial}") for serial, pose in X_WC.items()}
        self.width, self.height, self.fps = int(width), int(height), int(fps)
        self.hardware_sync = hardware_sync
        self._pipelines: dict[str, object] = {}
        self._cameras: dict[str, CameraInfo] = {}

    @property
    def cameras(self) -> dict[str, CameraInfo]:
        if not self._cameras:
            raise RealIsSimError("RealSenseSource has not been started: intrinsics are read from the devices by start()")
        return dict(self._cameras)

    @property
    def serials(self) -> list[str]:
        return list(self._poses)

    def now(self) -> float:
        return time.time()

    def start(self) -> None:
        if self._pipelines:
            return
        rs = _pyrealsense2()
        context = rs.context()
        devices = {device.get_info(rs.camera_info.serial_number): device for device in context.query_devices()}
        missing = [serial for serial in self._poses if serial not in devices]
        if missing:
            found = ", ".join(devices) or "none"
            raise CameraUnavailableError(f"RealSense camera(s) not connected: {', '.join(missing)} (connected: {found})")
        try:
            for i, serial in enumerate(self._poses):
                self._configure_device(rs, devices[serial], master=(i == 0))
                self._start_pipeline(rs, context, serial)
        except BaseException:
            self.close()
            raise

    def _configure_device(self, rs, device, master: bool) -> None:
        for sensor in device.query_sensors():
            if sensor.supports(rs.option.global_time_enabled):
                sensor.set_option(rs.option.global_time_enabled, 1.0)
            if self.hardware_sync and sensor.supports(rs.option.inter_cam_sync_mode):
                sensor.set_option(rs.option.inter_cam_sync_mode, _SYNC_MASTER if master else _SYNC_SLAVE)

    def _start_pipeline(self, rs, context, serial: str) -> None:
        config = rs.config()
        config.enable_device(serial)
        config.enable_stream(rs.stream.color, self.width, self.height, rs.format.rgb8, self.fps)
        pipeline = rs.pipeline(context)
        try:
            profile = pipeline.start(config)
        except RuntimeError as exc:
            raise CameraUnavailableError(
                f"RealSense {serial} cannot stream colour {self.width}x{self.height} at {self.fps} fps: {exc}"
            ) from None
        self._pipelines[serial] = pipeline
        intr = profile.get_stream(rs.stream.color).as_video_stream_profile().get_intrinsics()
        K = np.array([[intr.fx, 0.0, intr.ppx], [0.0, intr.fy, intr.ppy], [0.0, 0.0, 1.0]])
        self._cameras[serial] = CameraInfo(serial, K, intr.width, intr.height, self._poses[serial])

    def poll(self, t: float | None = None) -> list[Frame]:
        """Every frame that arrived since the last poll (``t`` is ignored: a live source is always at now)."""
        rs = _pyrealsense2()
        frames = []
        for serial, pipeline in self._pipelines.items():
            while True:
                frameset = pipeline.poll_for_frames()
                if not frameset:
                    break
                color = frameset.get_color_frame()
                if not color:
                    continue
                if color.get_frame_timestamp_domain() in (rs.timestamp_domain.global_time, rs.timestamp_domain.system_time):
                    timestamp = color.get_timestamp() / 1000.0
                else:  # device clock only: the host arrival time is the best shared clock
                    timestamp = time.time()
                image = np.asanyarray(color.get_data()).copy()
                frames.append(Frame(serial, image, timestamp, int(color.get_frame_number())))
        frames.sort(key=lambda f: f.timestamp)
        return frames

    def close(self) -> None:
        for pipeline in self._pipelines.values():
            try:
                pipeline.stop()
            except RuntimeError:
                pass  # already stopped (device unplugged)
        self._pipelines = {}
