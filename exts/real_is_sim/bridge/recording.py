"""Everything a deploy session records, so it can be inspected and replayed.

    <out>/config.yaml          the resolved BridgeCfg
    <out>/cameras/             the camera streams in the replay layout (cameras.json + videos/), when recorded
    <out>/frames.csv           when each recorded frame reached the loop: t, serial, timestamp (exposure)
    <out>/backgrounds/         the sensor's empty cell per camera, <serial>.npy
    <out>/twin.csv             60 Hz: t, block pose (7), twin robot q (7)
    <out>/follower.csv         t = 0, then 60 Hz: t, the follower's measured q (7), its health
    <out>/sensor.csv           per tick with visual forces: t, losses, residual, confidence, lost, wrench (6), cameras
    <out>/ground_truth.csv     stand-in only: t, reality's block pose (7)
    <out>/summary.json         written last by the session

CSV rows are flushed every tick, so a killed session leaves every finished tick on disk.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterable

import numpy as np

from real_is_sim.cameras.base import CameraInfo, CameraSource, Frame
from real_is_sim.cameras.recorder import Recorder
from real_is_sim.config import to_yaml
from real_is_sim.errors import DataError
from real_is_sim.loop import TickReport

POSE = ("x", "y", "z", "qx", "qy", "qz", "qw")
JOINTS = tuple(f"q{k}" for k in range(1, 8))
TWIN_COLUMNS = ("t", *POSE, *JOINTS)
FOLLOWER_COLUMNS = ("t", *JOINTS, "health")
SENSOR_COLUMNS = ("t", "loss_before", "loss_after", "residual", "confidence", "lost", "fx", "fy", "fz", "tx", "ty", "tz",
                  "cameras_used")
GROUND_TRUTH_COLUMNS = ("t", *POSE)


ARRIVAL_COLUMNS = ("t", "serial", "timestamp")


class RecordingSource(CameraSource):
    """A camera source that writes every frame it delivers into a :class:`Recorder` on the way through, and when it
    delivered it into ``frames.csv`` (a replay then hands each frame to the loop at the same tick)."""

    def __init__(self, inner: CameraSource, recorder: Recorder, arrivals_path: Path):
        self.inner = inner
        self.recorder = recorder
        self.arrivals = _Table(arrivals_path, ARRIVAL_COLUMNS)

    @property
    def cameras(self) -> dict[str, CameraInfo]:
        return self.inner.cameras

    def start(self) -> None:
        self.inner.start()

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.recorder.close()
            self.arrivals.close()

    def now(self) -> float:
        return self.inner.now()

    def poll(self, t: float | None = None) -> list[Frame]:
        frames = self.inner.poll(t)
        self.recorder.write_all(frames)
        arrival = self.inner.now() if t is None else t
        for frame in frames:
            self.arrivals.row([arrival, frame.serial, frame.timestamp])
        return frames


class _Table:
    def __init__(self, path: Path, columns: Iterable[str]):
        self.file = path.open("w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(columns)

    def row(self, values) -> None:
        # repr-exact floats: a replay must find the same times (a frame's exposure, its tick)
        self.writer.writerow([repr(float(v)) if isinstance(v, (float, np.floating)) else v for v in values])
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class SessionRecording:
    def __init__(self, out: str | Path, cfg, with_ground_truth: bool):
        self.out = Path(out)
        if (self.out / "twin.csv").exists():
            raise DataError(f"refusing to overwrite the session recorded in {self.out}")
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "config.yaml").write_text(to_yaml(cfg))
        self.twin = _Table(self.out / "twin.csv", TWIN_COLUMNS)
        self.follower = _Table(self.out / "follower.csv", FOLLOWER_COLUMNS)
        self.sensor = _Table(self.out / "sensor.csv", SENSOR_COLUMNS)
        self.ground_truth = _Table(self.out / "ground_truth.csv", GROUND_TRUTH_COLUMNS) if with_ground_truth else None

    def recording_source(self, source: CameraSource, cameras: list[CameraInfo], fps: float, lossless: bool) -> RecordingSource:
        recorder = Recorder(self.out / "cameras", cameras, fps=fps, lossless=lossless)
        return RecordingSource(source, recorder, self.out / "frames.csv")

    def save_backgrounds(self, backgrounds: dict[str, np.ndarray]) -> None:
        (self.out / "backgrounds").mkdir(exist_ok=True)
        for serial, image in backgrounds.items():
            np.save(self.out / "backgrounds" / f"{serial}.npy", np.asarray(image, dtype=np.float32))

    def record_follower(self, t: float, q: np.ndarray, health: str) -> None:
        self.follower.row([t, *q, health])

    def record(self, t: float, report: TickReport, block_pose: np.ndarray, robot_q: np.ndarray,
               follower_q: np.ndarray | None, follower_health: str, ground_truth: np.ndarray | None) -> None:
        self.twin.row([t, *block_pose, *robot_q])
        if follower_q is not None:
            self.record_follower(t, follower_q, follower_health)
        reading = report.reading
        if reading is not None:
            self.sensor.row([t, reading.loss_before, reading.loss_after, float(reading.residual[0]),
                             float(reading.confidence[0]), int(reading.lost[0]), *reading.wrench[0],
                             len(reading.cameras_used)])
        if self.ground_truth is not None and ground_truth is not None:
            self.ground_truth.row([t, *ground_truth])

    def write_summary(self, summary: dict) -> None:
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))

    def close(self) -> None:
        for table in (self.twin, self.follower, self.sensor, self.ground_truth):
            if table is not None:
                table.close()
