"""The safety layer in front of every follower: what the twin sends is checked before the real arm sees it.

:class:`SafetyFilter` checks one target at a time, in this order, and refuses (or clamps) with a reason:
non-finite values, stale then out-of-order stamps, joint limits with a margin (clamp or reject), the step from
the previous accepted target (clamped), and the tool position inside a workspace box (robot base frame, forward
kinematics: ``real_is_sim.robot.kinematics.PandaKinematics``). Every refusal and clamp is logged and counted.

:class:`SafeFollower` wraps any :class:`~real_is_sim.robot.follower.Follower` with that filter and a watchdog:
when no target has been accepted for ``watchdog_timeout_s`` it commands the arm's current position (hold), and
after ``watchdog_stop_after_s`` more of silence it stops the follower. A fresh accepted target during the hold
resumes following (rate-limited from the hold position).
"""

from __future__ import annotations

import collections
import enum
import logging
import math
import threading
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from real_is_sim.errors import DataError
from real_is_sim.robot import franka
from real_is_sim.robot.follower import (
    Follower,
    FollowerError,
    Health,
    HealthStatus,
    JointState,
    check_joint_vector,
)

logger = logging.getLogger(__name__)
_EPS = 1e-9  # float slack when comparing follower times


@dataclass
class SafetyCfg:
    joint_margin_rad: float = 0.05  # targets must stay this far inside the Franka joint limits
    clamp_to_limits: bool = True  # True: clamp out-of-limit targets into the margin; False: refuse them
    max_step_rad: float = 0.1  # largest per-joint change between consecutive accepted targets (clamped)
    max_target_age_s: float = 0.2  # refuse targets whose stamp is older than this
    # Box the tool point must stay in, robot base frame (metres); the table is at z ~ 0.
    workspace_min: list[float] = field(default_factory=lambda: [-0.3, -0.85, 0.02])
    workspace_max: list[float] = field(default_factory=lambda: [0.85, 0.85, 1.0])
    tool_offset_m: float = 0.0  # the checked tool point lies this far along the TCP z axis (e.g. the pusher tip)
    watchdog_timeout_s: float = 0.1  # no accepted target for this long: hold position
    watchdog_stop_after_s: float = 1.0  # still nothing this long after the hold began: stop
    watchdog_poll_s: float = 0.002  # real-time followers: how often the watchdog thread looks

    def __post_init__(self):
        positive = ("max_step_rad", "max_target_age_s", "watchdog_timeout_s", "watchdog_stop_after_s", "watchdog_poll_s")
        for name in positive:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        if not (math.isfinite(self.joint_margin_rad) and 0.0 <= self.joint_margin_rad):
            raise ValueError(f"joint_margin_rad must be >= 0, got {self.joint_margin_rad}")
        if np.any(franka.Q_MIN + self.joint_margin_rad >= franka.Q_MAX - self.joint_margin_rad):
            raise ValueError(f"joint_margin_rad {self.joint_margin_rad} leaves no room inside the joint limits")
        if not math.isfinite(self.tool_offset_m):
            raise ValueError(f"tool_offset_m must be finite, got {self.tool_offset_m}")
        for name in ("workspace_min", "workspace_max"):
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != (3,) or not np.all(np.isfinite(value)):
                raise ValueError(f"{name} must be 3 finite numbers (x, y, z), got {getattr(self, name)}")
        if np.any(np.asarray(self.workspace_min) >= np.asarray(self.workspace_max)):
            raise ValueError(f"workspace_min {self.workspace_min} must be below workspace_max {self.workspace_max}")


class Refusal(str, enum.Enum):
    NON_FINITE = "non-finite"
    STALE = "stale"
    OUT_OF_ORDER = "out-of-order"
    OUT_OF_LIMITS = "out-of-limits"
    OUTSIDE_WORKSPACE = "outside-workspace"
    STOPPED = "stopped"  # not started, or stopped (by the user or the watchdog); start() again


class Clamp(str, enum.Enum):
    JOINT_LIMITS = "joint-limits"
    STEP = "step"


@dataclass(frozen=True)
class SafetyDecision:
    accepted: bool
    q: np.ndarray | None  # the target to send (possibly clamped); None when refused
    refusal: Refusal | None = None
    clamps: tuple[Clamp, ...] = ()
    detail: str = ""


class SafetyFilter:
    """Checks targets one by one; remembers the last accepted one for the step limit and order check."""

    def __init__(self, cfg: SafetyCfg | None = None):
        self.cfg = cfg or SafetyCfg()
        self.q_low = franka.Q_MIN + self.cfg.joint_margin_rad
        self.q_high = franka.Q_MAX - self.cfg.joint_margin_rad
        self.workspace_min = np.asarray(self.cfg.workspace_min, dtype=float)
        self.workspace_max = np.asarray(self.cfg.workspace_max, dtype=float)
        self.refusals: collections.Counter[Refusal] = collections.Counter()
        self.clamps: collections.Counter[Clamp] = collections.Counter()
        self.accepted = 0
        self.last_q: np.ndarray | None = None
        self.last_stamp = -math.inf

    @cached_property
    def kinematics(self):
        """The twin engineer's PandaKinematics (pinocchio, same URDF), built on first use: pinocchio is heavy."""
        from real_is_sim.robot.kinematics import PandaKinematics

        return PandaKinematics(tool_offset=self.cfg.tool_offset_m)

    def reset(self, q_current: np.ndarray) -> None:
        """Rate-limit the next targets from ``q_current`` (the arm's position at start or hold)."""
        self.last_q = check_joint_vector(q_current, "current joint positions").copy()

    def check(self, q, stamp: float, now: float) -> SafetyDecision:
        """Decide on target ``q`` stamped ``stamp`` at time ``now`` (both on the follower's clock)."""
        q = check_joint_vector(q, "twin joint target")
        if not (np.all(np.isfinite(q)) and math.isfinite(stamp)):
            return self._refuse(Refusal.NON_FINITE, f"q={q}, stamp={stamp}")
        if now - stamp > self.cfg.max_target_age_s:
            return self._refuse(Refusal.STALE, f"target is {now - stamp:.3f} s old (max {self.cfg.max_target_age_s})")
        if stamp <= self.last_stamp:
            return self._refuse(Refusal.OUT_OF_ORDER, f"stamp {stamp:.6f} <= last accepted {self.last_stamp:.6f}")
        clamps = []
        outside = (q < self.q_low) | (q > self.q_high)
        if np.any(outside):
            joints = ", ".join(f"joint{i + 1}={q[i]:.4f}" for i in np.flatnonzero(outside))
            if not self.cfg.clamp_to_limits:
                return self._refuse(Refusal.OUT_OF_LIMITS, joints)
            q = np.clip(q, self.q_low, self.q_high)
            clamps.append(Clamp.JOINT_LIMITS)
            logger.info("target clamped into the joint limits (margin %.3f rad): %s", self.cfg.joint_margin_rad, joints)
        if self.last_q is not None:
            step = q - self.last_q
            if np.any(np.abs(step) > self.cfg.max_step_rad):
                q = self.last_q + np.clip(step, -self.cfg.max_step_rad, self.cfg.max_step_rad)
                clamps.append(Clamp.STEP)
                logger.info("target step %.4f rad clamped to %.4f rad", np.max(np.abs(step)), self.cfg.max_step_rad)
        tool = self.kinematics.tool_position(q)
        if np.any(tool < self.workspace_min) or np.any(tool > self.workspace_max):
            return self._refuse(Refusal.OUTSIDE_WORKSPACE, f"tool at {np.round(tool, 4).tolist()} m")
        self.clamps.update(clamps)
        self.accepted += 1
        self.last_q = q.copy()
        self.last_stamp = stamp
        return SafetyDecision(True, q, clamps=tuple(clamps))

    def refuse_stopped(self, why: str) -> SafetyDecision:
        return self._refuse(Refusal.STOPPED, f"{why}; call start()")

    def _refuse(self, reason: Refusal, detail: str) -> SafetyDecision:
        self.refusals[reason] += 1
        logger.warning("target refused (%s): %s", reason.value, detail)
        return SafetyDecision(False, None, refusal=reason, detail=detail)


class WorkspaceGuard:
    """The twin's half of the workspace check: a joint target whose tool point lies outside the follower's workspace
    box is moved, by inverse kinematics from it with the tool's orientation kept, to put the tool ``margin_m`` inside
    the box, before the twin robot takes it. The real arm follows the twin robot's actual joints, and its
    :class:`SafetyFilter` refuses a tool outside the box: without the guard the real arm holds while the twin arm
    goes on pushing its block, which reality's block then no longer matches (docs/experiments.md, section 3)."""

    def __init__(self, cfg: SafetyCfg, margin_m: float = 0.005):
        self.low = np.asarray(cfg.workspace_min, dtype=float) + margin_m
        self.high = np.asarray(cfg.workspace_max, dtype=float) - margin_m
        if not (math.isfinite(margin_m) and margin_m >= 0 and np.all(self.low < self.high)):
            raise ValueError(f"margin_m {margin_m} must be >= 0 and leave room inside the workspace box")
        self.tool_offset_m = cfg.tool_offset_m
        self.moved = 0  # targets moved into the box so far
        self._last: np.ndarray | None = None  # the last target let through or moved: held when the IK fails

    @cached_property
    def kinematics(self):
        from real_is_sim.robot.kinematics import PandaKinematics

        return PandaKinematics(tool_offset=self.tool_offset_m)

    def __call__(self, q) -> np.ndarray:
        """``q`` (7,) itself when its tool point is inside the box (or ``q`` is not finite: the filter refuses and
        counts that), else the moved target."""
        q = check_joint_vector(q, "twin joint target")
        if not np.all(np.isfinite(q)):
            return q
        pose = self.kinematics.tool_pose(q)
        tool = np.array(pose.translation)
        inside = np.clip(tool, self.low, self.high)
        if np.array_equal(inside, tool):
            self._last = q
            return q
        self.moved += 1
        try:
            self._last = self.kinematics.solve(inside, np.array(pose.rotation), q)
        except DataError:
            logger.warning("no joints put the tool at %s: the twin holds its last target", np.round(inside, 4).tolist())
            if self._last is None:
                raise
        return self._last


class _Watch(enum.Enum):
    IDLE = "idle"  # not started, or stopped by the user
    FOLLOWING = "following"
    HOLD = "hold"
    STOPPED = "stopped"  # stopped by the watchdog


class SafeFollower(Follower):
    """A follower behind a :class:`SafetyFilter` and a watchdog. Same interface as the follower it wraps."""

    def __init__(self, inner: Follower, cfg: SafetyCfg | None = None):
        self.inner = inner
        self.filter = SafetyFilter(cfg)
        self.cfg = self.filter.cfg
        self._lock = threading.RLock()
        self._watch = _Watch.IDLE
        self._last_accept_time = 0.0
        self._hold_since = 0.0
        self._thread: threading.Thread | None = None
        self._thread_stop = threading.Event()
        self.watchdog_events: list[tuple[str, float]] = []  # ("hold" | "stop", follower time)

    @property
    def realtime(self) -> bool:
        return self.inner.realtime

    def now(self) -> float:
        return self.inner.now()

    def start(self) -> None:
        self.filter.kinematics  # build the FK model now, not on the first target
        with self._lock:
            self.inner.start()
            self.filter.reset(self.inner.read_state().q)
            self._last_accept_time = self.inner.now()
            self._watch = _Watch.FOLLOWING
        if self.realtime and self._thread is None:
            self._thread_stop.clear()
            self._thread = threading.Thread(target=self._watch_realtime, name="follower-watchdog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._watch = _Watch.IDLE
            self.inner.stop()
        self._end_thread()

    def close(self) -> None:
        """Stop, and close the inner follower when it has a ``close()``."""
        self.stop()
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def send(self, q, stamp: float) -> SafetyDecision:
        """Check ``q`` and pass it on when accepted; returns the decision (refusals are also logged, counted)."""
        with self._lock:
            self.poll()
            if self._watch is not _Watch.FOLLOWING and self._watch is not _Watch.HOLD:
                check_joint_vector(q, "twin joint target")
                stopped_by = "the watchdog stopped the follower" if self._watch is _Watch.STOPPED else "not started"
                return self.filter.refuse_stopped(stopped_by)
            decision = self.filter.check(q, stamp, self.inner.now())
            if decision.accepted:
                self.inner.send(decision.q, stamp)
                self._last_accept_time = self.inner.now()
                if self._watch is _Watch.HOLD:
                    logger.warning("watchdog: targets are back, following again")
                    self._watch = _Watch.FOLLOWING
            return decision

    def read_state(self) -> JointState:
        with self._lock:
            self.poll()
            return self.inner.read_state()

    def health(self) -> Health:
        with self._lock:
            self.poll()
            inner = self.inner.health()
            if inner.status in (HealthStatus.REFLEX, HealthStatus.ERROR):
                return inner
            if self._watch is _Watch.HOLD:
                return Health(HealthStatus.WATCHDOG_HOLD, f"no target for > {self.cfg.watchdog_timeout_s} s: holding")
            if self._watch is _Watch.STOPPED:
                return Health(HealthStatus.STOPPED, "watchdog: the twin stopped sending; call start() to resume")
            return inner

    def recover(self) -> None:
        self.inner.recover()

    @property
    def last_accepted_at(self) -> float:
        """Follower time of the last accepted target (the watchdog counts its silence from here)."""
        return self._last_accept_time

    @property
    def refusals(self) -> collections.Counter:
        return self.filter.refusals

    def poll(self) -> None:
        """Run the watchdog now: hold after ``watchdog_timeout_s`` of silence, stop after ``watchdog_stop_after_s``."""
        with self._lock:
            now = self.inner.now()
            if self._watch is _Watch.FOLLOWING and now - self._last_accept_time >= self.cfg.watchdog_timeout_s - _EPS:
                if not self.inner.health().ok:  # reflex / error: the arm is not following anything to hold
                    return
                q_here = self.inner.read_state().q
                self.inner.send(q_here, now)
                self.filter.reset(q_here)
                self._watch = _Watch.HOLD
                self._hold_since = now
                self.watchdog_events.append(("hold", now))
                logger.warning("watchdog: no target for %.3f s, holding position", now - self._last_accept_time)
            elif self._watch is _Watch.HOLD and now - self._hold_since >= self.cfg.watchdog_stop_after_s - _EPS:
                self.inner.stop()
                self._watch = _Watch.STOPPED
                self.watchdog_events.append(("stop", now))
                logger.warning("watchdog: still no target %.3f s after the hold, follower stopped", now - self._hold_since)

    # -- deterministic stepping (inner followers with step_to) -------------------------------------------

    @property
    def control_dt_s(self) -> float:
        """The inner follower's control step (steppable followers only)."""
        if self.realtime or not hasattr(self.inner, "control_dt_s"):
            raise FollowerError(f"{type(self.inner).__name__} runs in real time; it has no stepping control_dt_s")
        return self.inner.control_dt_s

    def advance(self, dt: float) -> None:
        if not (math.isfinite(dt) and dt >= 0.0):
            raise DataError(f"advance() needs a finite dt >= 0, got {dt}")
        self.step_to(self.inner.now() + dt)

    def step_to(self, t: float) -> None:
        """Step the inner follower to ``t``, stopping at every watchdog deadline on the way so it fires on time
        (to within one control step)."""
        dt = self.control_dt_s
        while self.inner.now() + 0.5 * dt <= t:
            deadline = self._next_deadline()
            stop_at = t if deadline is None else min(t, max(deadline, self.inner.now() + dt))
            self.inner.step_to(stop_at)
            self.poll()

    def _next_deadline(self) -> float | None:
        if self._watch is _Watch.FOLLOWING:
            return self._last_accept_time + self.cfg.watchdog_timeout_s
        if self._watch is _Watch.HOLD:
            return self._hold_since + self.cfg.watchdog_stop_after_s
        return None

    # -- real-time watchdog thread --------------------------------------------------------------------------

    def _watch_realtime(self) -> None:
        while not self._thread_stop.wait(self.cfg.watchdog_poll_s):
            try:
                self.poll()
            except FollowerError as exc:  # a lost connection: health() and the next send() report it
                logger.error("watchdog: %s; the watchdog thread ends (start() begins a new one)", exc)
                with self._lock:
                    self._thread = None
                return

    def _end_thread(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._thread_stop.set()
            thread.join(timeout=1.0)
