"""A deploy session: the bridge run at 60 Hz, recorded, stopped cleanly.

Every tick: the policy commands the twin robot, the loop corrects and steps the twin, the follower tracks the twin
robot's actual joints, and the tick is recorded. Paced against the wall clock when ``cfg.loop.realtime``.

A stop for any reason (the duration is over, Ctrl-C, a stop request, any stage failing) ends the same way: the
robot holds where it is, then stops; the cameras and the recording are closed; ``summary.json`` says why it
stopped. A stage failure is then raised again as one :class:`StageError` naming the stage.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from real_is_sim.bridge.compose import Bridge, build_bridge
from real_is_sim.bridge.config import BridgeCfg
from real_is_sim.bridge.recording import SessionRecording
from real_is_sim.errors import RealIsSimError
from real_is_sim.robot.follower import FollowerError, HealthStatus
from real_is_sim.transforms import rotation_angle_between


class StageError(RealIsSimError):
    """A stage of the running session failed; ``stage`` names it, the cause is chained."""

    def __init__(self, stage: str, cause: BaseException):
        super().__init__(f"deploy stopped: the {stage} stage failed: {type(cause).__name__}: {cause}")
        self.stage = stage


@dataclass
class SessionResult:
    policy: str
    ticks: int
    seconds_simulated: float
    wall_s: float
    loop_hz: float
    stopped_by: str  # "duration" | "interrupt" | "stop request" | "<stage> failed"
    success: bool | None  # ground truth: reality's block at the goal (the stand-in's; None without ground truth)
    sync_error_mm_median: float | None  # twin vs the stand-in's ground truth, every tick
    sync_error_deg_median: float | None
    sync_error_mm_p95: float | None
    sync_error_deg_p95: float | None
    follower_health: str | None
    recording: str

    def to_dict(self) -> dict:
        return asdict(self)


class DeploySession:
    def __init__(self, cfg: BridgeCfg, task=None):
        self.cfg = cfg
        self.recording = SessionRecording(cfg.recording.out, cfg, with_ground_truth=cfg.cameras.source == "standin")
        try:
            wrap = self._record_cameras if cfg.recording.cameras else None
            self.bridge: Bridge = build_bridge(cfg, task, wrap_source=wrap)
        except BaseException:
            self.recording.close()
            raise
        if self.bridge.loop.sensor is not None:
            self.recording.save_backgrounds({c.name: c.background for c in self.bridge.loop.sensor.cameras})
        self.view = None
        if cfg.recording.rerun:
            from real_is_sim.bridge.live_view import LiveView

            self.view = LiveView(self.bridge, Path(cfg.recording.out) / "session.rrd", cfg.recording.rerun_image_every)
        self._sync_errors: list[tuple[float, float]] = []

    def _record_cameras(self, source, cameras):
        # The stand-in renders once per control tick; real cameras at their own rate (a hint for the encoder only).
        fps = self.cfg.cameras.fps if self.cfg.cameras.source == "realsense" else (self.cfg.twin.control_hz or 60.0)
        return self.recording.recording_source(source, cameras, fps, self.cfg.recording.lossless)

    def run(self, duration_s: float | None = None, stop: threading.Event | None = None) -> SessionResult:
        """Run until ``duration_s`` (default ``cfg.duration_s``) of twin time, a ``stop`` request, Ctrl-C or a stage
        failure. Always holds and stops the robot and closes the recording before it returns or raises."""
        bridge, twin = self.bridge, self.bridge.twin
        ticks = int(round((duration_s or self.cfg.duration_s) / twin.control_dt))
        stopped_by, failure = "duration", None
        done, wall_start = 0, time.perf_counter()
        try:
            _stage("follower", self._start_follower)
            for _ in range(ticks):
                if stop is not None and stop.is_set():
                    stopped_by = "stop request"
                    break
                if self.cfg.loop.realtime:
                    delay = wall_start + bridge.loop.t - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                self._tick()
                done += 1
        except KeyboardInterrupt:
            stopped_by = "interrupt"
        except StageError as exc:
            stopped_by, failure = f"{exc.stage} failed", exc
        wall = time.perf_counter() - wall_start
        try:
            bridge.hold_and_stop()
        finally:
            result = self._result(done, wall, stopped_by)
            self.recording.write_summary(result.to_dict())
            self.recording.close()
            if self.view is not None:
                self.view.close()
        if failure is not None:
            raise failure
        return result

    def _start_follower(self) -> None:
        follower = self.bridge.follower
        if follower is not None:
            self.bridge.start()
            if self.cfg.loop.follow_real:
                _check_start_pose(follower.read_state().q, self.bridge.twin.robot_q()[0],
                                  self.cfg.follower.start_tolerance_rad)
            # where the arm starts: a replay renders it there until the first tick
            self.recording.record_follower(0.0, follower.read_state().q, follower.health().status.name)

    def _tick(self) -> None:
        bridge = self.bridge
        t = bridge.loop.t
        q_target = _stage("policy", bridge.policy, t)
        report = _stage("loop", bridge.loop.tick, q_target)
        _stage("reality", bridge.advance_reality)
        if self.cfg.loop.follow_real:
            _stage("follower", _check_following, bridge.follower)
        truth = bridge.ground_truth()
        twin_pose = bridge.twin.object_poses()[0, 0]
        if truth is not None:
            self._sync_errors.append((float(np.linalg.norm(twin_pose[:2] - truth[0, :2])),
                                      float(rotation_angle_between(twin_pose[3:7], truth[0, 3:7]))))
        follower = bridge.follower
        follower_q = follower.read_state().q if follower is not None else None
        health = follower.health().status.name if follower is not None else ""
        _stage("recording", self.recording.record, bridge.loop.t, report, twin_pose, bridge.twin.robot_q()[0],
               follower_q, health, truth[0] if truth is not None else None)
        if self.view is not None:
            _stage("live view", self.view.log, report)

    def _result(self, ticks: int, wall: float, stopped_by: str) -> SessionResult:
        bridge = self.bridge
        truth = bridge.ground_truth()
        errors = np.array(self._sync_errors) if self._sync_errors else None
        return SessionResult(
            policy=bridge.policy_name,
            ticks=ticks,
            seconds_simulated=round(ticks * bridge.twin.control_dt, 3),
            wall_s=round(wall, 3),
            loop_hz=round(ticks / wall, 1) if wall > 0 else 0.0,
            stopped_by=stopped_by,
            success=bridge.task.success(bridge.twin.task, truth) if truth is not None else None,
            sync_error_mm_median=round(float(np.median(errors[:, 0])) * 1e3, 2) if errors is not None else None,
            sync_error_deg_median=round(float(np.degrees(np.median(errors[:, 1]))), 2) if errors is not None else None,
            sync_error_mm_p95=round(float(np.percentile(errors[:, 0], 95)) * 1e3, 2) if errors is not None else None,
            sync_error_deg_p95=round(float(np.degrees(np.percentile(errors[:, 1], 95))), 2) if errors is not None else None,
            follower_health=bridge.follower.health().status.name if bridge.follower is not None else None,
            recording=str(self.recording.out),
        )


def _check_start_pose(q_robot: np.ndarray, q_twin: np.ndarray, tolerance_rad: float) -> None:
    far = np.abs(q_robot - q_twin).max()
    if far > tolerance_rad:
        raise FollowerError(f"the robot is at {np.round(q_robot, 3).tolist()}, {far:.3f} rad from the twin robot's start "
                            f"{np.round(q_twin, 3).tolist()} (tolerance {tolerance_rad} rad): bring it there first "
                            f"(real-is-sim home)")


def _check_following(follower) -> None:
    """A follower that stopped following (its watchdog stopped it: the loop fell behind its rate; a reflex; a lost
    connection) ends the session: the twin would go on without the real robot."""
    health = follower.health()
    if health.status in (HealthStatus.STOPPED, HealthStatus.REFLEX, HealthStatus.ERROR):
        raise FollowerError(f"the follower is {health.status.value}: {health.message}")


def _stage(name: str, fn, *args):
    try:
        return fn(*args)
    except (KeyboardInterrupt, StageError):
        raise
    except Exception as exc:
        raise StageError(name, exc) from exc
