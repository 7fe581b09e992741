"""Calibration and recording-layout files, read and written in the shared data's format.

A recording directory (``sample_demos/0`` in the shared data) holds::

    cameras.json            {serial: {"X_WC": 4x4, "video_path": "videos/<serial>.mp4",
                                      "metadata_path": "videos/<serial>.json"}}
    videos/<serial>.mp4     colour video, one video frame per timestamp
    videos/<serial>.json    {"serial", "K": 3x3, "resolution": [W, H], "timestamps": [s, ...]}

``environment/extrinsics.json`` holds ``{serial: {"X_WT": 4x4}}``: the camera poses of the cell's
calibration (in the shared data identical to the recording's ``X_WC``). All poses use OpenGL axes.
Some writers store ``K``, ``resolution`` and ``timestamps`` as strings holding JSON lists; both
forms are accepted. A recording still being written (or killed mid-way) carries ``"complete": false``
in its metadata; see :class:`real_is_sim.cameras.Recorder`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from real_is_sim.cameras.base import check_intrinsics, check_pose
from real_is_sim.errors import DataError


@dataclass(frozen=True)
class CameraFiles:
    """One camera's entry in ``cameras.json``: its pose and where its video and metadata are (absolute paths)."""

    serial: str
    X_WC: np.ndarray
    video_path: Path
    metadata_path: Path


@dataclass(frozen=True)
class VideoMetadata:
    """A video's ``<serial>.json``: intrinsics, resolution and one timestamp (s) per frame."""

    serial: str
    K: np.ndarray
    width: int
    height: int
    timestamps: np.ndarray
    complete: bool = True


def _read_json(path: Path, what: str) -> object:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found: {path}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{what} {path} is not valid JSON: {exc}") from None


def _write_json_atomic(path: Path, data: object, indent: int | None = 2) -> None:
    """Write JSON via a temporary file and rename, so a reader never sees a half-written file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=indent)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _mapping(data: object, path: Path, what: str) -> dict:
    if not isinstance(data, dict) or not data:
        raise DataError(f"{what} {path} must hold a non-empty mapping from camera serial to entry")
    for serial, entry in data.items():
        if not isinstance(entry, dict):
            raise DataError(f"entry of camera {serial} in {path} must be a mapping")
    return data


def _field(entry: dict, key: str, serial: str, path: Path) -> object:
    if key not in entry:
        raise DataError(f"camera {serial} in {path} has no {key!r}")
    value = entry[key]
    if isinstance(value, str) and key in ("K", "resolution", "timestamps", "X_WC", "X_WT"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise DataError(f"{key!r} of camera {serial} in {path} is a string that is not a JSON list") from None
    return value


def load_cameras_json(path: str | Path) -> dict[str, CameraFiles]:
    """Parse a recording's ``cameras.json``; video and metadata paths are resolved against its folder."""
    path = Path(path)
    data = _mapping(_read_json(path, "cameras.json"), path, "cameras.json")
    cameras = {}
    for serial, entry in data.items():
        X_WC = check_pose(_field(entry, "X_WC", serial, path), f"X_WC of camera {serial} in {path}")
        files = {}
        for key in ("video_path", "metadata_path"):
            value = _field(entry, key, serial, path)
            if not isinstance(value, str) or not value:
                raise DataError(f"{key!r} of camera {serial} in {path} must be a non-empty string")
            files[key] = (path.parent / value).resolve()
        cameras[str(serial)] = CameraFiles(str(serial), X_WC, files["video_path"], files["metadata_path"])
    return cameras


def save_cameras_json(path: str | Path, X_WC: Mapping[str, np.ndarray]) -> None:
    """Write ``cameras.json`` for the standard layout (``videos/<serial>.mp4`` and ``.json``)."""
    data = {}
    for serial, pose in X_WC.items():
        pose = check_pose(pose, f"X_WC of camera {serial}")
        data[str(serial)] = {
            "X_WC": pose.tolist(),
            "video_path": f"videos/{serial}.mp4",
            "metadata_path": f"videos/{serial}.json",
        }
    if not data:
        raise DataError("cameras.json needs at least one camera")
    _write_json_atomic(Path(path), data)


def load_extrinsics(path: str | Path) -> dict[str, np.ndarray]:
    """``environment/extrinsics.json`` as ``{serial: X_WT}`` (4x4, OpenGL axes)."""
    path = Path(path)
    data = _mapping(_read_json(path, "extrinsics file"), path, "extrinsics file")
    return {
        str(serial): check_pose(_field(entry, "X_WT", serial, path), f"X_WT of camera {serial} in {path}")
        for serial, entry in data.items()
    }


def save_extrinsics(path: str | Path, X_WT: Mapping[str, np.ndarray]) -> None:
    data = {str(serial): {"X_WT": check_pose(pose, f"X_WT of camera {serial}").tolist()} for serial, pose in X_WT.items()}
    if not data:
        raise DataError("extrinsics file needs at least one camera")
    _write_json_atomic(Path(path), data)


def load_video_metadata(path: str | Path, serial: str | None = None) -> VideoMetadata:
    """Parse ``<serial>.json``; ``serial``, when given, must match the file's."""
    path = Path(path)
    entry = _read_json(path, "video metadata")
    if not isinstance(entry, dict):
        raise DataError(f"video metadata {path} must hold a mapping")
    name = str(entry.get("serial", serial))
    if serial is not None and name != serial:
        raise DataError(f"video metadata {path} is for camera {name}, expected {serial}")
    K = check_intrinsics(_field(entry, "K", name, path), f"K of camera {name} in {path}")
    resolution = _field(entry, "resolution", name, path)
    if (
        not isinstance(resolution, list)
        or len(resolution) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in resolution)
    ):
        raise DataError(f"resolution of camera {name} in {path} must be [W, H] positive integers, got {resolution!r}")
    try:
        timestamps = np.asarray(_field(entry, "timestamps", name, path), dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"timestamps of camera {name} in {path} are not a list of numbers") from None
    if timestamps.ndim != 1 or not np.all(np.isfinite(timestamps)):
        raise DataError(f"timestamps of camera {name} in {path} must be a flat list of finite numbers")
    if np.any(np.diff(timestamps) <= 0):
        first = int(np.argmax(np.diff(timestamps) <= 0)) + 1
        raise DataError(f"timestamps of camera {name} in {path} are not increasing (at frame {first})")
    complete = entry.get("complete", True)
    if not isinstance(complete, bool):
        raise DataError(f"'complete' of camera {name} in {path} must be true or false")
    return VideoMetadata(name, K, resolution[0], resolution[1], timestamps, complete)


def save_video_metadata(path: str | Path, meta: VideoMetadata) -> None:
    """Write ``<serial>.json`` atomically (real JSON lists, plus ``complete``)."""
    _write_json_atomic(
        Path(path),
        {
            "serial": meta.serial,
            "K": np.asarray(meta.K, dtype=np.float64).tolist(),
            "resolution": [int(meta.width), int(meta.height)],
            "timestamps": np.asarray(meta.timestamps, dtype=np.float64).tolist(),
            "complete": bool(meta.complete),
        },
        indent=None,  # one line, like the shared data: the timestamps list can be long
    )
