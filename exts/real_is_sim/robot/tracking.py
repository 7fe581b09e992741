"""How well a stepped follower tracks the twin: a scripted PushT-like twin motion, a 1 kHz log, error and lag.

Used by ``scripts/follow_demo.py``, ``scripts/bench_follower.py`` and the tests; it needs a follower that can be
stepped in simulated time (a :class:`SafeFollower` around a :class:`SimulatedFollower`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from real_is_sim.errors import DataError
from real_is_sim.robot import franka

PUSHT_PERIOD_S = 8.0


def pusht_sweep(t: float, period_s: float = PUSHT_PERIOD_S) -> np.ndarray:
    """Twin joint positions at time ``t``: a closed sweep of the tool over the table around ``Q_START``.

    Joint 1 swings the tool sideways, joints 2 / 4 / 6 together move it in and out while keeping it level:
    about 0.19 m x 0.25 m with ~1.3 cm height variation, tool speed up to ~0.23 m/s with the 8 s period.
    """
    phase = 2.0 * math.pi * t / period_s
    offset = np.zeros(franka.ARM_DOF)
    offset[0] = 0.18 * math.sin(phase)  # Q_START is 0.24 rad from joint 1's upper limit
    in_out = math.sin(2.0 * phase)
    offset[1] = 0.1 * in_out
    offset[3] = -0.2 * in_out
    offset[5] = 0.1 * in_out
    return franka.Q_START + offset


@dataclass(frozen=True)
class TrackingLog:
    """Follower clock ``t`` [N] (1 kHz), twin joints ``q_twin`` [N, 7] at those times, real joints ``q_real``."""

    t: np.ndarray
    q_twin: np.ndarray
    q_real: np.ndarray
    qd_real: np.ndarray


def follow_trajectory(follower, trajectory: Callable[[float], np.ndarray], duration_s: float,
                      twin_rate_hz: float = 60.0) -> TrackingLog:
    """Start ``follower`` (steppable), send ``trajectory(t)`` at ``twin_rate_hz`` for ``duration_s``, log at 1 kHz."""
    if not (math.isfinite(duration_s) and duration_s > 0 and math.isfinite(twin_rate_hz) and twin_rate_hz > 0):
        raise DataError(f"duration_s and twin_rate_hz must be > 0, got {duration_s}, {twin_rate_hz}")
    follower.start()
    dt = follower.control_dt_s
    steps = int(round(duration_s / dt))
    send_every = 1.0 / twin_rate_hz
    t0 = follower.now()
    next_send = t0
    t_log, twin_log, q_log, qd_log = [], [], [], []
    for _ in range(steps):
        now = follower.now()
        if now >= next_send - 1e-9:
            follower.send(trajectory(now - t0), now)
            next_send += send_every
        follower.advance(dt)
        state = follower.read_state()
        t_log.append(state.stamp - t0)
        twin_log.append(trajectory(state.stamp - t0))
        q_log.append(state.q)
        qd_log.append(state.qd)
    return TrackingLog(np.array(t_log), np.array(twin_log), np.array(q_log), np.array(qd_log))


def tracking_error(log: TrackingLog, settle_s: float = 0.5) -> tuple[float, float]:
    """RMS and max absolute joint error (rad) between real and twin joints, after ``settle_s``."""
    keep = log.t >= settle_s
    error = log.q_real[keep] - log.q_twin[keep]
    return float(np.sqrt(np.mean(error**2))), float(np.max(np.abs(error)))


def estimate_lag_s(log: TrackingLog, max_lag_s: float = 0.3, settle_s: float = 0.5) -> float:
    """The delay (s, 1 ms resolution) that best aligns the real joints with the twin's: argmin over shifts of
    the RMS of ``q_real(t) - q_twin(t - lag)``."""
    dt = float(np.median(np.diff(log.t)))
    start = int(math.ceil(settle_s / dt))
    max_shift = int(round(max_lag_s / dt))
    if len(log.t) <= start + max_shift + 10:
        raise DataError(f"tracking log of {log.t[-1]:.2f} s is too short to estimate a lag up to {max_lag_s} s")
    begin = start + max_shift
    real = log.q_real[begin:]
    errors = [np.mean((real - log.q_twin[begin - shift: len(log.t) - shift]) ** 2) for shift in range(max_shift + 1)]
    return int(np.argmin(errors)) * dt


def _differences(q: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    qd = np.diff(q, axis=0) / dt
    qdd = np.diff(qd, axis=0) / dt
    return qd, qdd, np.diff(qdd, axis=0) / dt


def limit_usage(q: np.ndarray, dt: float) -> dict[str, float]:
    """How close a trajectory sampled every ``dt`` came to the Franka limits: the smallest distance (rad) to a
    position limit, and the peak fraction of the velocity / acceleration / jerk limits."""
    qd, qdd, qddd = _differences(q, dt)
    return {
        "closest_to_position_limit_rad": float(min(np.min(q - franka.Q_MIN), np.min(franka.Q_MAX - q))),
        "velocity": float(np.max(np.abs(qd) / franka.QD_MAX)),
        "acceleration": float(np.max(np.abs(qdd) / franka.QDD_MAX)),
        "jerk": float(np.max(np.abs(qddd) / franka.QDDD_MAX)),
    }


def limit_violations(q: np.ndarray, dt: float, rel_tol: float = 1e-6) -> dict[str, int]:
    """Samples of a joint trajectory sampled every ``dt`` beyond the Franka position / velocity / acceleration /
    jerk limits (finite differences), counted per kind."""
    qd, qdd, qddd = _differences(q, dt)
    tol = 1.0 + rel_tol
    return {
        "position": int(np.sum(np.any((q < franka.Q_MIN) | (q > franka.Q_MAX), axis=1))),
        "velocity": int(np.sum(np.any(np.abs(qd) > franka.QD_MAX * tol, axis=1))),
        "acceleration": int(np.sum(np.any(np.abs(qdd) > franka.QDD_MAX * tol, axis=1))),
        "jerk": int(np.sum(np.any(np.abs(qddd) > franka.QDDD_MAX * tol, axis=1))),
    }
