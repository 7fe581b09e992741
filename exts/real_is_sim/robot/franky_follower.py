"""The real Franka follows the twin through franky: asynchronous joint motions, Ruckig inside franky.

Every :meth:`FrankyFollower.send` queues a ``franky.JointMotion`` to the new target with
``asynchronous=True``; franky's Ruckig takes over seamlessly from the running motion, within the robot's
limits scaled by ``dynamics`` (franky's ``RelativeDynamicsFactor``). The Franka's joint impedance controller
tracks it. ``franky`` (package ``franky-control``, the ``hardware`` extra) is imported only when needed.

Connecting to an address that does not answer can block inside libfranka for a long time, so the connection
runs in a daemon thread and :class:`RobotConnectionError` is raised after ``connect_timeout_s``. A connection
lost while following (libfranka: no robot state for 1 s) becomes one :class:`RobotConnectionError`, raised by
``send``/``read_state`` and reported by ``health``; the dead connection is dropped and ``start()`` reconnects.
libfranka serves one client per robot: :meth:`FrankyFollower.close` releases the connection.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from real_is_sim.errors import DataError
from real_is_sim.robot.follower import (
    DynamicsFactorCfg,
    Follower,
    FollowerError,
    Health,
    HealthStatus,
    JointState,
    RobotConnectionError,
    check_finite_joint_vector,
)

JOINT_IMPEDANCE_MAX = 14250.0  # Nm/rad, libfranka's accepted range is [0, 14250]


@dataclass
class FrankyCfg:
    address: str = "172.16.0.2"  # FCI hostname or IP
    connect_timeout_s: float = 5.0
    dynamics: DynamicsFactorCfg = field(default_factory=DynamicsFactorCfg)
    # libfranka's default joint stiffness (Nm/rad): the "high impedance" joint controller
    joint_impedance: list[float] = field(default_factory=lambda: [3000.0, 3000.0, 3000.0, 2500.0, 2500.0, 2000.0, 2000.0])
    collision_torque_thresholds_nm: list[float] = field(default_factory=lambda: [20.0] * 7)
    collision_force_thresholds_n: list[float] = field(default_factory=lambda: [30.0] * 6)
    require_realtime_kernel: bool = True  # franky's RealtimeConfig.Enforce; False: Ignore (testing only)
    stop_timeout_s: float = 2.0  # how long stop() waits for the arm to come to rest

    def __post_init__(self):
        if not (isinstance(self.address, str) and self.address.strip()):
            raise ValueError(f"address must be the robot's hostname or IP, got {self.address!r}")
        for name in ("connect_timeout_s", "stop_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 < value <= 120.0):
                raise ValueError(f"{name} must be in (0, 120] s, got {value}")
        _check_vector(self.joint_impedance, 7, 0.0, JOINT_IMPEDANCE_MAX, "joint_impedance (Nm/rad)")
        _check_vector(self.collision_torque_thresholds_nm, 7, 1e-9, 500.0, "collision_torque_thresholds_nm")
        _check_vector(self.collision_force_thresholds_n, 6, 1e-9, 500.0, "collision_force_thresholds_n")


def _check_vector(values, size: int, low: float, high: float, name: str) -> None:
    array = np.asarray(values, dtype=float)
    if array.shape != (size,) or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be {size} finite numbers, got {values}")
    if np.any(array < low) or np.any(array > high):
        raise ValueError(f"{name} must lie in [{low:g}, {high:g}], got {values}")


def import_franky():
    try:
        import franky
    except ImportError as exc:
        raise FollowerError(f"franky is not installed ({exc}): pip install 'real-is-sim[hardware]'") from None
    return franky


def relative_dynamics_factor(dynamics: DynamicsFactorCfg):
    """Our dynamics scaling as franky's ``RelativeDynamicsFactor``."""
    return import_franky().RelativeDynamicsFactor(dynamics.velocity, dynamics.acceleration, dynamics.jerk)


def joint_motion(q, dynamics: DynamicsFactorCfg):
    """The franky motion to an absolute joint target that keeps holding it once there (so the next queued target
    takes over from a held, not finished, motion)."""
    franky = import_franky()
    target = check_finite_joint_vector(q, "franky joint target")
    return franky.JointMotion(
        franky.JointState(target),
        reference_type=franky.ReferenceType.Absolute,
        relative_dynamics_factor=relative_dynamics_factor(dynamics),
        return_when_finished=False,
    )


class FrankyFollower(Follower):
    def __init__(self, cfg: FrankyCfg | None = None):
        self.cfg = cfg or FrankyCfg()
        self._robot = None
        self._running = False
        self._health = Health(HealthStatus.STOPPED, "not connected")
        self._connection_lost = ""  # why the last connection died; start() reconnects
        self._lock = threading.RLock()

    @property
    def realtime(self) -> bool:
        return True

    def now(self) -> float:
        return time.monotonic()

    def connect(self) -> None:
        """Connect and configure impedance and collision behaviour; :class:`RobotConnectionError` on failure."""
        if self._robot is not None:
            return
        franky = import_franky()
        realtime = franky.RealtimeConfig.Enforce if self.cfg.require_realtime_kernel else franky.RealtimeConfig.Ignore
        outcome: dict = {}

        def connect_blocking():
            try:
                outcome["robot"] = franky.Robot(self.cfg.address, realtime_config=realtime)
            except Exception as exc:  # franky.NetworkException, RealtimeException, ...
                outcome["error"] = exc

        thread = threading.Thread(target=connect_blocking, name=f"franky-connect-{self.cfg.address}", daemon=True)
        thread.start()
        thread.join(self.cfg.connect_timeout_s)
        if thread.is_alive():
            raise RobotConnectionError(
                f"the Franka at {self.cfg.address} did not answer within {self.cfg.connect_timeout_s} s "
                "(is it powered, FCI enabled in Desk, the address right? libfranka serves one client at a time)"
            )
        if "error" in outcome:
            error = outcome["error"]
            raise RobotConnectionError(f"cannot connect to the Franka at {self.cfg.address}: {error}") from None
        robot = outcome["robot"]
        try:
            robot.set_joint_impedance(list(self.cfg.joint_impedance))
            robot.set_collision_behavior(list(self.cfg.collision_torque_thresholds_nm), list(self.cfg.collision_force_thresholds_n))
        except franky.Exception as exc:
            raise RobotConnectionError(f"the Franka at {self.cfg.address} refused its settings: {exc}") from None
        self._robot = robot
        self._connection_lost = ""
        self._health = Health(HealthStatus.STOPPED, "connected; call start()")

    def start(self) -> None:
        with self._lock:
            self.connect()
            if self._health.status in (HealthStatus.REFLEX, HealthStatus.ERROR):
                raise FollowerError(f"the Franka is in {self._health.status.value} ({self._health.message}); call recover()")
            self._running = True
            self._health = Health(HealthStatus.OK)

    def stop(self) -> None:
        with self._lock:
            self._running = False
            if self._robot is None:
                return
            franky = import_franky()
            try:
                self._robot.move(franky.JointStopMotion(relative_dynamics_factor(self.cfg.dynamics)), asynchronous=True)
                self._robot.join_motion(timeout=self.cfg.stop_timeout_s)
                self._health = Health(HealthStatus.STOPPED, "stopped")
            except franky.Exception as exc:
                self._record_failure(exc)

    def close(self) -> None:
        """Stop and release the connection: libfranka serves one client, the next one can connect."""
        with self._lock:
            if self._robot is None:
                return
            self.stop()
            self._robot = None  # franky's destructor closes the connection
            if self._health.status is HealthStatus.STOPPED:
                self._health = Health(HealthStatus.STOPPED, "not connected (closed)")

    def send(self, q, stamp: float) -> None:
        motion = joint_motion(q, self.cfg.dynamics)
        if not math.isfinite(stamp):
            raise DataError(f"target stamp must be finite, got {stamp}")
        with self._lock:
            self._raise_if_connection_lost()
            if not self._running:
                raise FollowerError(f"the Franka follower is not running ({self._health.message}): call start()")
            try:
                self._robot.move(motion, asynchronous=True)
            except import_franky().Exception as exc:
                self._record_failure(exc)
                self._raise_if_connection_lost()

    def move_to(self, q_target, tolerance_rad: float = 2e-3, timeout_s: float = 30.0) -> None:
        """Bring the arm to ``q_target`` with one joint motion at the configured dynamics, before a session (the
        follower's path is a straight line in joint space: the caller checks it is clear). Returns when the arm is
        within ``tolerance_rad`` on every joint; a timeout raises FollowerError."""
        q_target = check_finite_joint_vector(q_target, "home pose")
        self.start()
        self.send(q_target, self.now())
        deadline = time.monotonic() + timeout_s
        while np.max(np.abs(self.read_state().q - q_target)) > tolerance_rad:
            if time.monotonic() > deadline:
                raise FollowerError(f"the Franka did not reach {np.round(q_target, 3).tolist()} within {timeout_s} s "
                                    f"(at {np.round(self.read_state().q, 3).tolist()})")
            time.sleep(0.02)

    def read_state(self) -> JointState:
        with self._lock:
            self._raise_if_connection_lost()
            if self._robot is None:
                raise FollowerError("the Franka follower is not connected: call start()")
            try:
                state = self._robot.current_joint_state
            # a dead connection: NetworkException after 1 s without robot state, or RuntimeError("Net Exception")
            # once a motion has failed on it
            except (import_franky().Exception, RuntimeError) as exc:
                self._record_failure(exc)
                self._raise_if_connection_lost()
                raise FollowerError(f"cannot read the Franka's joint state: {exc}") from None
            return JointState(q=np.array(state.position, dtype=float), qd=np.array(state.velocity, dtype=float),
                              stamp=time.monotonic())

    def health(self) -> Health:
        with self._lock:
            if self._robot is not None and self._running:
                try:
                    self._robot.poll_motion()  # raises what went wrong in the asynchronous motion
                except import_franky().Exception as exc:
                    self._record_failure(exc)
            return self._health

    def recover(self) -> None:
        """Run the Franka's automatic error recovery after a reflex; :meth:`start` resumes following."""
        with self._lock:
            self._raise_if_connection_lost()
            if self._robot is None:
                raise FollowerError("the Franka follower is not connected: nothing to recover")
            try:
                recovered = self._robot.recover_from_errors()
            except import_franky().Exception as exc:
                self._record_failure(exc)
                self._raise_if_connection_lost()
                raise FollowerError(f"the Franka's automatic error recovery failed: {exc}") from None
            if not recovered:
                raise FollowerError("the Franka's automatic error recovery failed; check Desk")
            self._health = Health(HealthStatus.STOPPED, "recovered; call start()")

    def _record_failure(self, exc: Exception) -> None:
        franky = import_franky()
        self._running = False
        if isinstance(exc, (franky.NetworkException, RuntimeError)):
            # Dead connection: drop it (every later franky call would block or fail differently); start() reconnects.
            self._robot = None
            self._connection_lost = f"lost the connection to the Franka at {self.cfg.address}: {exc}"
            self._health = Health(HealthStatus.ERROR, self._connection_lost)
            return
        status = HealthStatus.REFLEX if isinstance(exc, franky.ControlException) else HealthStatus.ERROR
        self._health = Health(status, str(exc))

    def _raise_if_connection_lost(self) -> None:
        if self._connection_lost:
            raise RobotConnectionError(f"{self._connection_lost}; start() reconnects")
