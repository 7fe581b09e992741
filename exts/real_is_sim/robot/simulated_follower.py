"""A model of the real Franka following the twin: command latency -> Ruckig at 1 kHz -> first-order joint lag.

What franky + the Franka do, modelled: a received target becomes active after ``latency_s``; Ruckig (7 DoF,
position interface) plans a jerk-limited motion from the current reference state to it within the Franka's
published limits scaled by ``dynamics``; the joint impedance controller tracks that reference with time
constant ``tau_s``. The actual joints are a first-order low-pass of the reference, so they never exceed the
reference's velocity / acceleration / jerk bounds.

Deterministic use (tests, the stand-in world): :meth:`SimulatedFollower.advance` / :meth:`step_to` in simulated
time, 1 kHz inner steps. Demo use: ``realtime=True`` runs the same steps in a thread against the wall clock.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import ruckig

from real_is_sim.errors import DataError
from real_is_sim.robot import franka
from real_is_sim.robot.follower import (
    DynamicsFactorCfg,
    Follower,
    FollowerError,
    Health,
    HealthStatus,
    JointState,
    check_finite_joint_vector,
)


@dataclass
class SimulatedFollowerCfg:
    control_dt_s: float = 0.001  # Franka control rate: 1 kHz
    latency_s: float = 0.004  # from send() until the target reaches the planner
    tau_s: float = 0.02  # joint tracking time constant of the impedance controller
    dynamics: DynamicsFactorCfg = field(default_factory=DynamicsFactorCfg)
    q_initial: list[float] = field(default_factory=lambda: franka.Q_START.tolist())
    realtime: bool = False  # run in a wall-clock thread instead of being stepped

    def __post_init__(self):
        if not (math.isfinite(self.control_dt_s) and 0.0 < self.control_dt_s <= 0.01):
            raise ValueError(f"control_dt_s must be in (0, 0.01] s, got {self.control_dt_s}")
        if not (math.isfinite(self.latency_s) and 0.0 <= self.latency_s <= 1.0):
            raise ValueError(f"latency_s must be in [0, 1] s, got {self.latency_s}")
        if not (math.isfinite(self.tau_s) and 0.0 <= self.tau_s <= 1.0):
            raise ValueError(f"tau_s must be in [0, 1] s (0: perfect tracking), got {self.tau_s}")
        q = np.asarray(self.q_initial, dtype=float)
        if q.shape != (franka.ARM_DOF,) or not np.all(np.isfinite(q)):
            raise ValueError(f"q_initial must be {franka.ARM_DOF} finite joint positions, got {self.q_initial}")
        if np.any(q < franka.Q_MIN) or np.any(q > franka.Q_MAX):
            raise ValueError(f"q_initial {self.q_initial} is outside the Franka joint limits")


class SimulatedFollower(Follower):
    def __init__(self, cfg: SimulatedFollowerCfg | None = None):
        self.cfg = cfg or SimulatedFollowerCfg()
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._wall_start = 0.0
        self._running = False
        self._error = ""
        self._time = 0.0
        self._step_count = 0
        q0 = np.asarray(self.cfg.q_initial, dtype=float)
        self._q = q0.copy()  # actual joints
        self._qd = np.zeros(franka.ARM_DOF)
        self._pending: collections.deque[tuple[float, np.ndarray]] = collections.deque()  # (active at, q)
        self._alpha = 1.0 if self.cfg.tau_s == 0 else 1.0 - math.exp(-self.cfg.control_dt_s / self.cfg.tau_s)
        self._otg = ruckig.Ruckig(franka.ARM_DOF, self.cfg.control_dt_s)
        self._input = ruckig.InputParameter(franka.ARM_DOF)
        self._output = ruckig.OutputParameter(franka.ARM_DOF)
        dyn = self.cfg.dynamics
        self._input.max_velocity = (franka.QD_MAX * dyn.velocity).tolist()
        self._input.max_acceleration = (franka.QDD_MAX * dyn.acceleration).tolist()
        self._input.max_jerk = (franka.QDDD_MAX * dyn.jerk).tolist()
        self._input.current_position = q0.tolist()
        self._input.current_velocity = [0.0] * franka.ARM_DOF
        self._input.current_acceleration = [0.0] * franka.ARM_DOF
        self._hold_here()

    # -- Follower interface -------------------------------------------------------------------------------

    @property
    def realtime(self) -> bool:
        return self.cfg.realtime

    @property
    def control_dt_s(self) -> float:
        return self.cfg.control_dt_s

    def now(self) -> float:
        with self._lock:
            return self._time

    def start(self) -> None:
        with self._lock:
            if self._error:
                raise FollowerError(f"simulated follower is in error ({self._error}); call recover() first")
            if self._running:
                return
            self._pending.clear()
            self._hold_here()
            self._running = True
        if self.cfg.realtime and (self._thread is None or not self._thread.is_alive()):
            self._wall_start = time.monotonic() - self._time
            self._thread = threading.Thread(target=self._run_realtime, name="simulated-follower", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Brake to standstill (jerk-limited, velocity interface to zero) and refuse new targets."""
        with self._lock:
            self._running = False
            self._pending.clear()
            self._input.control_interface = ruckig.ControlInterface.Velocity
            self._input.target_velocity = [0.0] * franka.ARM_DOF
            self._input.target_acceleration = [0.0] * franka.ARM_DOF
        # the thread keeps stepping the braking motion in real time; the caller keeps stepping otherwise

    def close(self) -> None:
        """Stop and end the real-time thread (if any)."""
        self.stop()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=1.0)

    def send(self, q: np.ndarray, stamp: float) -> None:
        target = check_finite_joint_vector(q, "follower target")
        if not math.isfinite(stamp):
            raise DataError(f"target stamp must be finite, got {stamp}")
        with self._lock:
            if not self._running:
                raise FollowerError("simulated follower is not running: call start() first")
            self._pending.append((self._time + self.cfg.latency_s, target.copy()))

    def read_state(self) -> JointState:
        with self._lock:
            return JointState(q=self._q.copy(), qd=self._qd.copy(), stamp=self._time)

    def health(self) -> Health:
        with self._lock:
            if self._error:
                return Health(HealthStatus.ERROR, self._error)
            if not self._running:
                return Health(HealthStatus.STOPPED, "not following")
            return Health(HealthStatus.OK)

    def recover(self) -> None:
        with self._lock:
            self._error = ""

    # -- deterministic stepping -----------------------------------------------------------------------

    def advance(self, dt: float) -> None:
        """Advance simulated time by ``dt`` seconds (whole control steps; the remainder carries over)."""
        if not (math.isfinite(dt) and dt >= 0.0):
            raise DataError(f"advance() needs a finite dt >= 0, got {dt}")
        self.step_to(self._time + dt)

    def step_to(self, t: float) -> None:
        """Run 1 kHz control steps until simulated time reaches ``t`` (to within half a step)."""
        if self.cfg.realtime:
            raise FollowerError("a real-time simulated follower steps itself; do not call step_to()")
        self._step_until(t)

    def reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Ruckig reference the joints track: position, velocity, acceleration."""
        with self._lock:
            return (
                np.array(self._input.current_position),
                np.array(self._input.current_velocity),
                np.array(self._input.current_acceleration),
            )

    # -- internals ----------------------------------------------------------------------------------------

    def _step_until(self, t: float) -> None:
        dt = self.cfg.control_dt_s
        with self._lock:
            while self._time + 0.5 * dt <= t:
                self._control_step()

    def _control_step(self) -> None:
        dt = self.cfg.control_dt_s
        self._step_count += 1
        self._time = self._step_count * dt  # no drift from summing floats
        target = None
        while self._pending and self._pending[0][0] <= self._time + 1e-12:
            target = self._pending.popleft()[1]
        if target is not None:
            self._input.control_interface = ruckig.ControlInterface.Position
            self._input.target_position = target.tolist()
            self._input.target_velocity = [0.0] * franka.ARM_DOF
            self._input.target_acceleration = [0.0] * franka.ARM_DOF
        if not self._error:
            result = self._otg.update(self._input, self._output)
            if result in (ruckig.Result.Working, ruckig.Result.Finished):
                self._output.pass_to_input(self._input)
            else:
                self._error = f"Ruckig failed with {result.name}"
                self._running = False
        reference = np.array(self._input.current_position)
        q_new = self._q + self._alpha * (reference - self._q)
        self._qd = (q_new - self._q) / dt
        self._q = q_new

    def _hold_here(self) -> None:
        """Make the current reference position the target (used at start: follow from where the arm is)."""
        self._input.control_interface = ruckig.ControlInterface.Position
        self._input.target_position = list(self._input.current_position)
        self._input.target_velocity = [0.0] * franka.ARM_DOF
        self._input.target_acceleration = [0.0] * franka.ARM_DOF

    def _run_realtime(self) -> None:
        dt = self.cfg.control_dt_s
        while self._thread is not None:
            self._step_until(time.monotonic() - self._wall_start)
            with self._lock:
                still_moving = self._running or np.any(np.abs(self._input.current_velocity) > 1e-9)
            if not still_moving:
                break
            time.sleep(dt)
