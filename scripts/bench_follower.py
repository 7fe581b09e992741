"""Follower safety and tracking benchmark (simulated follower, simulated time: the figures do not depend on load,
only the run time does).

1. 10,000 random and adversarial twin targets (jumps, joint-limit hugging, out of limits, NaN / inf, stale,
   out-of-order, silences that trip the watchdog) through SafeFollower(SimulatedFollower) at full Franka
   dynamics; every 1 kHz sample of the executed joints (and of the Ruckig reference) is checked against the
   Franka position / velocity / acceleration / jerk limits.
2. Tracking of the scripted PushT sweep with the default FollowerCfg: RMS error and lag.
3. Watchdog: the twin goes silent at random moments; reaction from the timeout to the hold command, and time
   from the hold to standstill.

    python scripts/bench_follower.py [--targets 10000] [--seed 0]

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import time

import numpy as np

from real_is_sim.robot import franka
from real_is_sim.robot.follower import DynamicsFactorCfg, HealthStatus
from real_is_sim.robot.follower_factory import FollowerCfg, make_follower
from real_is_sim.robot.safety import SafeFollower, SafetyCfg
from real_is_sim.robot.simulated_follower import SimulatedFollower, SimulatedFollowerCfg
from real_is_sim.cli import quiet_warp
from real_is_sim.robot.tracking import (
    estimate_lag_s,
    follow_trajectory,
    limit_usage,
    limit_violations,
    pusht_sweep,
    tracking_error,
)

KINDS = ("smooth", "jump", "at_limits", "limit_run", "out_of_limits", "non_finite", "stale", "out_of_order", "silence")
KIND_WEIGHTS = np.array([0.3, 0.15, 0.1, 0.01, 0.1, 0.1, 0.08, 0.07, 0.05])
LIMIT_RUN_TARGETS = 40  # a limit_run drives joints flat out into their limits
INTERVALS_S = (0.001, 1 / 60, 1 / 30)  # the twin may send at 1 kHz, 60 Hz or 30 Hz


def adversarial_targets(count: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    full_dynamics = DynamicsFactorCfg(velocity=1.0, acceleration=1.0, jerk=1.0)
    follower = SafeFollower(SimulatedFollower(SimulatedFollowerCfg(dynamics=full_dynamics)), SafetyCfg())
    follower.start()
    kinds = collections.Counter()
    restarts = 0
    q_log, reference_log = [], []

    def run_for(seconds: float) -> None:
        for _ in range(max(1, int(round(seconds / 0.001)))):
            follower.advance(0.001)
            q_log.append(follower.read_state().q)
            reference_log.append(follower.inner.reference()[0])

    sent = 0
    while sent < count:
        kind = KINDS[rng.choice(len(KINDS), p=KIND_WEIGHTS / KIND_WEIGHTS.sum())]
        if kind == "limit_run":  # consecutive targets beyond the limits of one or two joints, at 60 Hz or 1 kHz
            corner = follower.read_state().q
            joints = rng.choice(7, size=rng.integers(1, 3), replace=False)
            corner[joints] = np.where(rng.random(len(joints)) < 0.5, franka.Q_MIN[joints] - 0.2, franka.Q_MAX[joints] + 0.2)
            interval = INTERVALS_S[rng.integers(2)]
            for _ in range(min(LIMIT_RUN_TARGETS, count - sent)):
                follower.send(corner, follower.now())
                run_for(interval)
                kinds[kind] += 1
                sent += 1
            continue
        kinds[kind] += 1
        sent += 1
        now = follower.now()
        here = follower.read_state().q
        stamp = now
        if kind == "smooth":
            target = here + rng.normal(0.0, 0.02, 7)
        elif kind == "jump":
            target = rng.uniform(franka.Q_MIN, franka.Q_MAX)
        elif kind == "at_limits":
            target = np.where(rng.random(7) < 0.5, franka.Q_MIN, franka.Q_MAX)
        elif kind == "out_of_limits":
            target = rng.uniform(franka.Q_MIN - 1.0, franka.Q_MAX + 1.0)
            target[rng.integers(7)] = rng.choice([franka.Q_MIN.min() - 1.0, franka.Q_MAX.max() + 1.0])
        elif kind == "non_finite":
            target = here.copy()
            target[rng.integers(7)] = rng.choice([np.nan, np.inf, -np.inf])
        elif kind == "stale":
            target, stamp = here + rng.normal(0.0, 0.05, 7), now - rng.uniform(0.25, 5.0)
        elif kind == "out_of_order":
            target, stamp = here + rng.normal(0.0, 0.05, 7), follower.filter.last_stamp - rng.uniform(0.0, 0.01)
        else:  # silence: the twin stops sending (watchdog hold, maybe stop), then comes back with a fresh target
            run_for(rng.uniform(0.05, 1.5))
            if follower.health().status is HealthStatus.STOPPED:
                follower.start()
                restarts += 1
            target = here + rng.normal(0.0, 0.02, 7)
        follower.send(target, stamp)
        run_for(INTERVALS_S[rng.integers(len(INTERVALS_S))])

    violations = limit_violations(np.array(q_log), 0.001)
    reference_violations = limit_violations(np.array(reference_log), 0.001)
    return {
        "targets": count,
        "targets_by_kind": dict(kinds),
        "accepted": follower.filter.accepted,
        "refused": {reason.value: n for reason, n in follower.refusals.items()},
        "clamped": {clamp.value: n for clamp, n in follower.filter.clamps.items()},
        "watchdog_holds": sum(1 for event, _ in follower.watchdog_events if event == "hold"),
        "watchdog_stops": sum(1 for event, _ in follower.watchdog_events if event == "stop"),
        "restarts": restarts,
        "simulated_s": len(q_log) * 0.001,
        "samples_checked": len(q_log),
        "violations": sum(violations.values()) + sum(reference_violations.values()),
        "violations_by_limit": violations,
        "reference_violations_by_limit": reference_violations,
        "limit_usage": limit_usage(np.array(q_log), 0.001),
    }


def watchdog_reaction(trials: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    reactions, standstills = [], []
    for _ in range(trials):
        follower = make_follower()
        follow_trajectory(follower, pusht_sweep, rng.uniform(1.0, 3.0))
        silent_from = follower.last_accepted_at + follower.cfg.watchdog_timeout_s  # when the hold is due
        while not follower.watchdog_events:
            follower.advance(0.001)
        hold_time = follower.watchdog_events[0][1]
        reactions.append(hold_time - silent_from)
        while np.max(np.abs(follower.read_state().qd)) > 1e-3:
            follower.advance(0.001)
        standstills.append(follower.now() - hold_time)
    return {
        "watchdog_timeout_ms": FollowerCfg().safety.watchdog_timeout_s * 1000.0,
        "watchdog_reaction_ms": max(reactions) * 1000.0,
        "watchdog_standstill_ms": max(standstills) * 1000.0,
    }


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # thousands of refusals are logged by design; the counters report them

    started = time.perf_counter()
    result = adversarial_targets(args.targets, args.seed)
    print(f"adversarial: {result['targets']} targets, {result['violations']} limit violations in "
          f"{result['samples_checked']} samples; refused {result['refused']}")
    log = follow_trajectory(make_follower(), pusht_sweep, 16.0)
    rms, worst = tracking_error(log)
    result.update(rms_tracking_rad=rms, max_tracking_rad=worst, lag_ms=estimate_lag_s(log) * 1000.0,
                  tracking_violations=sum(limit_violations(log.q_real, 0.001).values()))
    print(f"tracking: rms {rms:.4f} rad, lag {result['lag_ms']:.0f} ms")
    result.update(watchdog_reaction(20, args.seed))
    print(f"watchdog: reaction {result['watchdog_reaction_ms']:.1f} ms, standstill {result['watchdog_standstill_ms']:.0f} ms")
    result["wall_s"] = time.perf_counter() - started
    print(json.dumps(result))


if __name__ == "__main__":
    main()
