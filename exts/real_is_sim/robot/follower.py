"""The follower interface: something that makes a robot arm track the twin robot's actual joint positions.

In Real-is-Sim the policy commands the *simulated* Franka; the real one follows the twin's measured joints.
A follower receives the latest twin joint positions (7, radians) with their timestamp, and reports the real
joint state and its health. Implementations: :class:`~real_is_sim.robot.simulated_follower.SimulatedFollower`
(a model of the arm, deterministic in simulated time) and :class:`~real_is_sim.robot.franky_follower.FrankyFollower`
(the real arm through franky). Put a :class:`~real_is_sim.robot.safety.SafeFollower` in front of either.

Timestamps are seconds on the follower's own clock, :meth:`Follower.now` (simulated time for a deterministic
simulated follower, ``time.monotonic()`` otherwise).
"""

from __future__ import annotations

import abc
import enum
import math
from dataclasses import dataclass

import numpy as np

from real_is_sim.errors import DataError, RealIsSimError
from real_is_sim.robot.franka import ARM_DOF


class FollowerError(RealIsSimError):
    """A follower was used out of order (not started, already stopped) or its robot failed."""


class RobotConnectionError(FollowerError):
    """The real robot could not be reached or did not answer in time."""


class HealthStatus(enum.Enum):
    OK = "ok"
    REFLEX = "reflex"  # the robot stopped itself (collision / limit reflex); needs recover()
    WATCHDOG_HOLD = "watchdog-hold"  # the twin stopped sending: holding position
    STOPPED = "stopped"  # not started, or stopped (by the user or the watchdog)
    ERROR = "error"  # anything else; see the message


@dataclass(frozen=True)
class Health:
    status: HealthStatus
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status is HealthStatus.OK


@dataclass(frozen=True)
class JointState:
    """Measured arm joints: positions (rad), velocities (rad/s), and when they were measured (follower clock)."""

    q: np.ndarray
    qd: np.ndarray
    stamp: float


@dataclass
class DynamicsFactorCfg:
    """Fractions of the Franka's published velocity / acceleration / jerk limits a follower may use (franky's
    ``RelativeDynamicsFactor``)."""

    velocity: float = 0.5
    acceleration: float = 0.3
    jerk: float = 0.3

    def __post_init__(self):
        for name in ("velocity", "acceleration", "jerk"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 < value <= 1.0):
                raise ValueError(f"dynamics factor {name} must be in (0, 1], got {value}")


class Follower(abc.ABC):
    """Makes an arm follow the twin robot. Call :meth:`start` first, then :meth:`send` as targets arrive."""

    @abc.abstractmethod
    def start(self) -> None:
        """Connect / begin following from the arm's current position."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Brake smoothly to standstill and stop following; :meth:`start` again to resume."""

    @abc.abstractmethod
    def send(self, q: np.ndarray, stamp: float) -> None:
        """Make ``q`` (7 joint positions, rad; measured on the twin at ``stamp``) the new target."""

    @abc.abstractmethod
    def read_state(self) -> JointState:
        """The arm's latest measured joint positions and velocities."""

    @abc.abstractmethod
    def health(self) -> Health:
        """ok / reflex / watchdog-hold / stopped / error, with a message."""

    @abc.abstractmethod
    def recover(self) -> None:
        """Clear a reflex so that :meth:`start` can resume."""

    @abc.abstractmethod
    def now(self) -> float:
        """The follower's clock (seconds); targets' stamps are on this clock."""

    @property
    @abc.abstractmethod
    def realtime(self) -> bool:
        """True when the arm moves on its own in wall-clock time; False when the caller steps it."""


def check_joint_vector(q, what: str) -> np.ndarray:
    """``q`` as a float array of shape (7,), or :class:`DataError` naming ``what``. NaN is let through: the
    safety layer refuses non-finite targets and counts them; shape errors are programming errors."""
    array = np.asarray(q, dtype=float)
    if array.shape != (ARM_DOF,):
        raise DataError(f"{what} must have shape ({ARM_DOF},), got {array.shape}")
    return array


def check_finite_joint_vector(q, what: str) -> np.ndarray:
    array = check_joint_vector(q, what)
    if not np.all(np.isfinite(array)):
        raise DataError(f"{what} must be finite, got {array}")
    return array
