"""Camera sources behind one interface: recorded-video replay, RealSense, rendered; synchronisation and recording.

See docs/cameras.md. Poses ``X_WC`` use OpenGL axes; ``CameraInfo.viewmat_opencv()`` converts.
"""

from real_is_sim.cameras.base import CameraInfo, CameraSource, Frame
from real_is_sim.cameras.calibration import (
    CameraFiles,
    VideoMetadata,
    load_cameras_json,
    load_extrinsics,
    load_video_metadata,
    save_cameras_json,
    save_extrinsics,
    save_video_metadata,
)
from real_is_sim.cameras.realsense import CameraUnavailableError, RealSenseSource, list_realsense_devices
from real_is_sim.cameras.recorder import Recorder
from real_is_sim.cameras.rendered import RenderedSource
from real_is_sim.cameras.replay import VideoReplaySource
from real_is_sim.cameras.sync import CameraSample, FrameSynchronizer, SyncedFrames
from real_is_sim.cameras.video import VideoReader

__all__ = [
    "CameraFiles",
    "CameraInfo",
    "CameraSample",
    "CameraSource",
    "CameraUnavailableError",
    "Frame",
    "FrameSynchronizer",
    "RealSenseSource",
    "Recorder",
    "RenderedSource",
    "SyncedFrames",
    "VideoMetadata",
    "VideoReader",
    "VideoReplaySource",
    "list_realsense_devices",
    "load_cameras_json",
    "load_extrinsics",
    "load_video_metadata",
    "save_cameras_json",
    "save_extrinsics",
    "save_video_metadata",
]
