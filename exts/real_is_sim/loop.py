"""The online loop: one 1/60 s tick of Real-is-Sim, the same wiring online and offline.

Per tick: frames in -> visual-force sensor -> actuator -> physics step -> (Gaussians re-posed on the bodies)
-> follower command out. Two switches: ``visual_forces`` (steps 1-4) and ``follow_real`` (step 6). With both
off, nothing is rendered and nothing is sent: the twin is a plain virtual environment.

``correction="pipelined"`` takes the sensor out of the tick: it runs beside it (a worker process or thread, or for
tests a fixed tick delay) on the newest frames and the twin's poses at their exposure, and each tick applies the newest
reading, its springs pulled from the twin's pose at that tick (docs/realtime.md).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from real_is_sim.cameras.base import CameraSource
from real_is_sim.cameras.sync import FrameSynchronizer, SyncedFrames
from real_is_sim.correction.actuator import VisualForceActuator
from real_is_sim.correction.sensor import SensorReading, VisualForceSensor
from real_is_sim.correction.worker import DelayedSensor, SensorProcess, SensorWorker
from real_is_sim.errors import ConfigError
from real_is_sim.robot.follower import Follower


HELD_READING_RULES = ("hold", "once", "age_scaled")


@dataclass
class LoopCfg:
    visual_forces: bool = True
    follow_real: bool = True
    # Pace ticks against the wall clock (online); False runs as fast as possible (replay, benchmarks).
    realtime: bool = False
    stale_after: float = 0.05  # s: an older frame is not used for the correction
    world: int = 0  # the twin world that mirrors reality
    # follow_real: keep the twin robot's joint targets where the follower's safety layer accepts the tool (the
    # composition root builds the guard, robot.safety.WorkspaceGuard, from the follower's SafetyCfg)
    guard_targets: bool = True
    # Compare each frame with the twin as it was when the frame was exposed (camera latency is tens of ms).
    latency_compensation: bool = True
    # Start the sensor's optimisation from the twin this many ticks after the exposure (capped at now). Adam's
    # steps overshoot small errors; started at the exposure pose, with the springs pulled from the current one, the
    # overshoot feeds the twin's own motion since the exposure back as a push and a resting block rings at 15 Hz
    # (0: the exposure pose; docs/fidelity.md).
    exposure_lead_ticks: int = 1
    # Pull the Gaussians' springs from where the twin is now rather than where it was at the exposure. Right when
    # the twin's motion since then is its own correction (a resting block: without it the twin rings around
    # it); wrong when it is tracking a block that keeps moving (reality moved on too). See docs/correction.md.
    pull_from_current: bool = True
    # "serial": the sensor runs inside each tick, which lasts as long as it takes. "pipelined": the sensor runs beside
    # the tick on the newest frames, and every tick applies the newest reading (physics and follower keep their rate).
    correction: str = "serial"
    # pipelined: None runs the sensor in a worker (sensor_worker); k >= 0 runs it inside the tick, without a worker, and
    # applies its reading k ticks later for k ticks (reproducible: tests; 0 is the serial loop).
    pipeline_delay_ticks: Optional[int] = None
    # pipelined worker: "thread" (shares the GIL with the tick) or "process" (a child process with its own copy of the
    # sensor, free of the GIL; not yet faster on the loaded 2-core machine: docs/realtime.md)
    sensor_worker: str = "thread"
    # pipelined: a sensor update that has not returned after this long (wall clock) stops the loop with an error
    sensor_timeout_s: float = 10.0
    # pipelined: "hold" applies the newest reading every tick until the next one (its springs from the twin's pose
    # then); "once" only in the tick it arrives, as the serial loop applies each reading; "age_scaled" holds it
    # with its wrench scaled by (age when submitted) / (age now): a reading older than the cameras' own latency
    # pulls less (docs/realtime.md)
    held_reading: str = "age_scaled"
    # "age_scaled" holds a reading whose springs are this short or shorter (m: each body's mean spring length) at full
    # strength, as "hold": a short held spring is stable and exact, a long one rings (docs/realtime.md)
    held_full_within: float = 0.003

    def __post_init__(self):
        if self.correction not in ("serial", "pipelined"):
            raise ConfigError(f"loop.correction must be 'serial' or 'pipelined', got {self.correction!r}")
        if self.pipeline_delay_ticks is not None and not (isinstance(self.pipeline_delay_ticks, int)
                                                          and self.pipeline_delay_ticks >= 0):
            raise ConfigError(f"loop.pipeline_delay_ticks must be None or an integer >= 0, "
                              f"got {self.pipeline_delay_ticks!r}")
        if self.sensor_worker not in ("process", "thread"):
            raise ConfigError(f"loop.sensor_worker must be 'process' or 'thread', got {self.sensor_worker!r}")
        if self.held_reading not in HELD_READING_RULES:
            raise ConfigError(f"loop.held_reading must be one of {HELD_READING_RULES}, got {self.held_reading!r}")
        if not (isinstance(self.exposure_lead_ticks, int) and self.exposure_lead_ticks >= 0):
            raise ConfigError(f"loop.exposure_lead_ticks must be an integer >= 0, got {self.exposure_lead_ticks!r}")
        if not self.held_full_within >= 0:
            raise ConfigError(f"loop.held_full_within must be >= 0 (m), got {self.held_full_within}")
        if not self.sensor_timeout_s > 0:
            raise ConfigError(f"loop.sensor_timeout_s must be positive, got {self.sensor_timeout_s}")


@dataclass
class TickReport:
    t: float
    reading: SensorReading | None
    frames_used: list[str] = field(default_factory=list)
    frames_stale: list[str] = field(default_factory=list)
    frames_missing: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per stage
    recovered: list[int] = field(default_factory=list)  # objects re-localised this tick after being lost
    # s from the exposure of the frames behind the wrench applied this tick to this tick (None: none applied). The
    # serial loop's is the camera latency; the pipelined loop adds the sensor's time and the ticks it was held.
    correction_age: float | None = None


@dataclass
class CorrectionJob:
    """One pipelined sensor update's inputs, fixed at the tick that submitted it."""

    tick: int
    exposed: float  # loop time the frames were exposed (median over the fresh cameras)
    poses_at_exposure: np.ndarray  # (n_obj, 7)
    images: list  # one per sensor camera, None where none is fresh
    robot_q: np.ndarray | None  # joints the robot occluders are rendered at; None without occluders
    current_poses: np.ndarray | None  # the twin's poses at submission (pull_from_current)


class OnlineLoop:
    def __init__(
        self,
        cfg: LoopCfg,
        twin,
        sensor: VisualForceSensor | None = None,
        actuator: VisualForceActuator | None = None,
        source: CameraSource | None = None,
        follower: Follower | None = None,
        occluders: Callable[[np.ndarray], object] | None = None,
        relocalize: Callable[[list, np.ndarray], np.ndarray | None] | None = None,
        arm_in_view: Callable[[float], np.ndarray] | None = None,
        target_guard: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        """``occluders(robot_q) -> GaussianCloud`` renders the robot into the sensor's views (e.g.
        ``RobotAppearance.cloud``); ``source`` delivers the camera frames, ``follower`` the real arm.
        ``relocalize(images, object_poses) -> object_poses | None`` finds lost objects again from the frames (e.g.
        with :func:`real_is_sim.correction.initial_pose.estimate_initial_pose`): the visual force only closes small
        errors, so a lost object is put back where the frames show it and tracking resumes from there.
        ``arm_in_view(t) -> q (7,)`` is the arm the cameras see when it is neither the follower nor the twin robot
        (a replayed clip whose arm was fitted to the footage, :mod:`real_is_sim.robot.arm_fit`).
        ``target_guard(q (7,)) -> q (7,)`` takes the mirroring world's joint target before the twin robot does (e.g.
        :class:`~real_is_sim.robot.safety.WorkspaceGuard`: only targets the real arm may follow)."""
        if cfg.visual_forces and (sensor is None or actuator is None or source is None):
            raise ValueError("visual_forces needs a sensor, an actuator and a camera source")
        if cfg.follow_real and follower is None:
            raise ValueError("follow_real needs a follower")
        self.cfg = cfg
        self.twin = twin
        self.sensor = sensor
        self.actuator = actuator
        self.source = source
        self.follower = follower
        self.occluders = occluders
        self.relocalize = relocalize
        self.arm_in_view = arm_in_view
        self.target_guard = target_guard
        self.sync = FrameSynchronizer([c.name for c in sensor.cameras], cfg.stale_after) if cfg.visual_forces else None
        self.t = 0.0
        self.ticks = 0
        history = int(np.ceil(2 * cfg.stale_after / twin.control_dt)) + 2
        self._pose_history: deque[tuple[float, np.ndarray]] = deque(maxlen=history)
        self._pose_history.append((0.0, twin.object_poses()[cfg.world]))
        self._worker: SensorWorker | SensorProcess | DelayedSensor | None = None
        self._held: tuple[CorrectionJob, SensorReading] | None = None  # applied every tick until a newer one is ready
        self._recover_retry_at = 0  # no re-localisation attempt before this tick
        self.last_recovery: dict | None = None  # the last re-localisation decision (_recover)
        if cfg.visual_forces and cfg.correction == "pipelined":
            if cfg.pipeline_delay_ticks is not None:
                self._worker = DelayedSensor(self._sensor_update, cfg.pipeline_delay_ticks)
            elif cfg.sensor_worker == "process":
                self._worker = SensorProcess(sensor, occluders, cfg.sensor_timeout_s)
            else:
                self._worker = SensorWorker(self._sensor_update, cfg.sensor_timeout_s)
        if cfg.visual_forces and not isinstance(self._worker, SensorProcess):  # the process warms its own copy
            sensor.warm_up()  # the first tick would otherwise spend ~1.7 s loading kernels and torch

    def tick(self, robot_q_target: np.ndarray | None = None) -> TickReport:
        """One control step at time ``self.t``; ``robot_q_target`` ``(num_worlds, 7)`` drives the twin robot."""
        cfg, twin, w = self.cfg, self.twin, self.cfg.world
        report = TickReport(self.t, None)
        clock = time.perf_counter()
        if cfg.visual_forces and self._worker is not None:
            self._pipelined_correction(report)
            report.seconds["correction"] = time.perf_counter() - clock
        elif cfg.visual_forces:
            synced = self._frames(self.t)
            report.frames_used = list(synced.fresh)
            report.frames_stale, report.frames_missing = synced.stale, synced.missing
            images = [synced.fresh[c.name].image if c.name in synced.fresh else None for c in self.sensor.cameras]
            occluders = self.occluders(self._robot_in_view()) if self.occluders is not None else None
            exposed = np.median([f.timestamp for f in synced.fresh.values()]) if synced.fresh else self.t
            current = twin.object_poses()[w] if cfg.pull_from_current else None
            report.reading = self.sensor.update(self._poses_at(exposed), images, occluders, current)
            self.actuator.apply(report.reading.wrench, world=w)
            report.correction_age = self.t - exposed
            if report.reading.lost.any() and self.relocalize is not None and synced.fresh:
                report.recovered = self._recover(images, report.reading.lost)
            report.seconds["sensor"] = time.perf_counter() - clock
        clock = time.perf_counter()
        if self.target_guard is not None and robot_q_target is not None:
            robot_q_target = np.array(robot_q_target, dtype=float)
            robot_q_target[w] = self.target_guard(robot_q_target[w])
        twin.step(robot_q_target)
        report.seconds["physics"] = time.perf_counter() - clock
        if cfg.visual_forces:
            # The wrench belongs to this tick's frames only (step 5: Gaussians are re-posed next tick).
            self.actuator.clear(world=w)
        self.ticks += 1
        self.t = self.ticks * twin.control_dt
        self._pose_history.append((self.t, twin.object_poses()[w]))
        if cfg.follow_real:
            # The real arm follows the twin robot's *actual* joints (not the policy's targets).
            self.follower.send(twin.robot_q()[w], self.follower.now())
        return report

    def _pipelined_correction(self, report: TickReport) -> None:
        """Collect a finished reading, hand the sensor the newest frames when it is free, apply the held reading."""
        w = self.cfg.world
        synced = self._frames(self.t)
        report.frames_used = list(synced.fresh)
        report.frames_stale, report.frames_missing = synced.stale, synced.missing
        self._collect(report)
        if self._worker.idle():
            self._worker.submit(self._job(synced))
            self._collect(report)  # ready at once only with pipeline_delay_ticks 0
        if self._held is None or (self.cfg.held_reading == "once" and report.reading is None):
            return
        job, reading = self._held
        short = False  # springs no longer than held_full_within: held at full strength
        if self.cfg.pull_from_current and reading.targets is not None:
            # the twin moved since the update began: its springs pull from where the bodies are now
            wrench, lengths = self.sensor.held_springs(reading.targets, self.twin.object_poses()[w])
            short = bool(lengths.max() <= self.cfg.held_full_within)
        else:
            wrench = reading.wrench
        report.correction_age = self.t - job.exposed
        if self.cfg.held_reading == "age_scaled" and report.correction_age > 0 and not short:
            submitted_age = job.tick * self.twin.control_dt - job.exposed  # the cameras' own latency
            wrench = wrench * min(1.0, max(submitted_age, self.twin.control_dt) / report.correction_age)
        self.actuator.apply(wrench, world=w)

    def _collect(self, report: TickReport) -> None:
        ready = self._worker.collect(self.ticks)
        if ready is None:
            return
        job, reading = ready
        report.reading = reading
        self._held = ready
        if reading.lost.any() and self.relocalize is not None and any(image is not None for image in job.images):
            report.recovered = self._recover(job.images, reading.lost)  # the sensor is idle: it just handed this over

    def _job(self, synced: SyncedFrames) -> CorrectionJob:
        images = [synced.fresh[c.name].image if c.name in synced.fresh else None for c in self.sensor.cameras]
        robot_q = self._robot_in_view() if self.occluders is not None else None
        exposed = float(np.median([f.timestamp for f in synced.fresh.values()])) if synced.fresh else self.t
        current = self.twin.object_poses()[self.cfg.world] if self.cfg.pull_from_current else None
        return CorrectionJob(self.ticks, exposed, self._poses_at(exposed), images, robot_q, current)

    def _sensor_update(self, job: CorrectionJob) -> SensorReading:
        """Runs where the sensor runs (the worker thread): the robot occluders are posed there too."""
        occluders = self.occluders(job.robot_q) if job.robot_q is not None else None
        return self.sensor.update(job.poses_at_exposure, job.images, occluders, job.current_poses)

    def close(self) -> None:
        """Stop the pipelined loop's sensor worker (after its update in flight); nothing to do for the serial loop."""
        if self._worker is not None:
            self._worker.close()

    def _robot_in_view(self) -> np.ndarray:
        """Joints of the robot the cameras see: a fitted arm's when the loop has one (``arm_in_view``); the real arm's
        measured ones when it follows (it lags the twin by tens of ms, and rendering the twin's arm instead drags the
        block at the arm's edges); else the twin's."""
        if self.arm_in_view is not None:
            return np.asarray(self.arm_in_view(self.t))
        if self.cfg.follow_real:
            return self.follower.read_state().q
        return self.twin.robot_q()[self.cfg.world]

    RECOVER_RETRY_TICKS = 30  # after a rejected (or failed) re-localisation, ticks before the next attempt

    def _recover(self, images: list, lost: np.ndarray) -> list[int]:
        """Re-localise the lost objects, and reset the twin there only if the candidate explains the frames better
        than the tracked poses: the sensor's photometric loss of the candidate below (1 - relocalize_min_gain) x the
        tracked poses' (same frames, occluders, renderer). Otherwise keep tracking and retry after
        RECOVER_RETRY_TICKS ticks. ``self.last_recovery`` says what was decided."""
        w = self.cfg.world
        if self.ticks < self._recover_retry_at:
            return []
        poses = self.twin.object_poses()[w]
        found = self.relocalize(images, poses)
        self._recover_retry_at = self.ticks + self.RECOVER_RETRY_TICKS
        if found is None:  # nothing seen, or an implausible candidate (the task's re-localiser decides)
            self.last_recovery = {"tick": self.ticks, "accepted": False, "reason": "no candidate"}
            return []
        found = np.asarray(found, dtype=np.float64).reshape(poses.shape)
        candidate = np.where(lost[:, None], found, poses)  # objects still tracked stay where they are
        occluders = self.occluders(self._robot_in_view()) if self.occluders is not None else None
        tracked_loss, candidate_loss = self.sensor.photometric_losses([poses, candidate], images, occluders)
        accepted = bool(candidate_loss < (1.0 - self.sensor.cfg.relocalize_min_gain) * tracked_loss)
        self.last_recovery = {"tick": self.ticks, "accepted": accepted, "tracked_loss": float(tracked_loss),
                              "candidate_loss": float(candidate_loss)}
        if not accepted:
            return []
        poses = candidate
        self.twin.reset(world_ids=[w], object_poses=poses[None], robot_q=self.twin.robot_q()[w][None])
        self.actuator.clear(world=w)
        self.reset_history()
        self.reset_sensor_health()
        return [int(i) for i in np.flatnonzero(lost)]

    def reset_history(self) -> None:
        """Forget past twin poses, and in the pipelined loop the readings of the twin before (after the twin was
        reset or re-initialised)."""
        if self._worker is not None:
            self._worker.collect(self.ticks, wait=True)  # an update begun on the old twin: let it end, drop it
            self._held = None
        self._pose_history.clear()
        self._pose_history.append((self.t, self.twin.object_poses()[self.cfg.world]))

    def reset_sensor_health(self) -> None:
        """Forget the sensor's past residuals (lost flags), wherever the sensor runs."""
        self.sensor.reset_health()
        if isinstance(self._worker, SensorProcess):
            self._worker.reset_health()  # the worker process's sensor is a copy with its own counters

    def _poses_at(self, t: float) -> np.ndarray:
        """The twin's object poses at the latest recorded time <= ``t`` (the current ones without compensation)."""
        if not self.cfg.latency_compensation:
            return self._pose_history[-1][1]
        t += self.cfg.exposure_lead_ticks * self.twin.control_dt
        for stamp, poses in reversed(self._pose_history):
            if stamp <= t + 1e-9:
                return poses
        return self._pose_history[0][1]

    def _frames(self, t: float) -> SyncedFrames:
        self.sync.push(self.source.poll(t))
        return self.sync.tick(t)

    def run(self, num_ticks: int, policy: Callable[[float], np.ndarray | None] | None = None, on_tick=None) -> list[TickReport]:
        """Run ``num_ticks`` ticks; ``policy(t)`` gives the robot targets, ``on_tick(report)`` observes."""
        reports = []
        start = time.perf_counter() - self.t
        for _ in range(num_ticks):
            if self.cfg.realtime:
                delay = start + self.t - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            report = self.tick(policy(self.t) if policy is not None else None)
            if on_tick is not None:
                on_tick(report)
            reports.append(report)
        return reports
