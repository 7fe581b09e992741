"""Tracking helpers (scripted PushT sweep, error, lag, limit check), the follower factory and the demo script."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from real_is_sim.config import load_config
from real_is_sim.errors import ConfigError
from real_is_sim.robot import franka
from real_is_sim.robot.follower_factory import FollowerCfg, make_follower
from real_is_sim.robot.franky_follower import FrankyFollower
from real_is_sim.robot.kinematics import PandaKinematics
from real_is_sim.robot.safety import SafeFollower
from real_is_sim.robot.simulated_follower import SimulatedFollower
from real_is_sim.robot.tracking import (
    TrackingLog,
    estimate_lag_s,
    follow_trajectory,
    limit_usage,
    limit_violations,
    pusht_sweep,
    tracking_error,
)

REPO = Path(__file__).resolve().parents[1]


def test_the_pusht_sweep_stays_inside_the_limits_and_keeps_the_tool_level():
    kinematics = PandaKinematics()
    q = np.array([pusht_sweep(t) for t in np.linspace(0.0, 8.0, 400)])
    assert np.all(q > franka.Q_MIN + 0.05) and np.all(q < franka.Q_MAX - 0.05)
    tool = np.array([kinematics.tool_position(qi) for qi in q])
    assert np.ptp(tool[:, 2]) < 0.03  # level over the table
    assert np.ptp(tool[:, 0]) > 0.1 and np.ptp(tool[:, 1]) > 0.1  # and really sweeping it
    assert np.allclose(pusht_sweep(0.0), franka.Q_START)


def test_the_lag_estimate_recovers_a_known_delay():
    t = np.arange(0.0, 4.0, 0.001)
    q_twin = np.array([pusht_sweep(ti) for ti in t])
    delay = 0.042
    q_real = np.array([pusht_sweep(max(ti - delay, 0.0)) for ti in t])
    log = TrackingLog(t, q_twin, q_real, np.zeros_like(q_real))
    assert estimate_lag_s(log) == pytest.approx(delay, abs=0.0011)
    assert tracking_error(log)[0] > 0.0


def test_limit_violations_are_counted_per_limit():
    dt = 0.001
    q = np.tile(franka.Q_START, (50, 1))
    assert limit_violations(q, dt) == {"position": 0, "velocity": 0, "acceleration": 0, "jerk": 0}
    q[25:, 0] += 0.01  # a 10 rad/s jump in one sample
    q[40, 3] = franka.Q_MIN[3] - 0.1
    counts = limit_violations(q, dt)
    assert counts["position"] == 1 and counts["velocity"] >= 1 and counts["jerk"] >= 1


def test_the_simulated_follower_tracks_the_sweep_within_limits():
    follower = make_follower()
    log = follow_trajectory(follower, pusht_sweep, 4.0)
    rms, worst = tracking_error(log)
    assert 0.0 < rms < worst < 0.05  # follows: errors of a few hundredths of a radian at most
    assert 0.0 < estimate_lag_s(log) < 0.2
    assert sum(limit_violations(log.q_real, 0.001).values()) == 0
    assert not follower.refusals


def test_the_factory_builds_the_configured_follower_behind_the_safety_layer():
    simulated = make_follower(load_config(FollowerCfg, {"simulated": {"tau_s": 0.05}}))
    assert isinstance(simulated, SafeFollower) and isinstance(simulated.inner, SimulatedFollower)
    assert simulated.inner.cfg.tau_s == 0.05
    real = make_follower(load_config(FollowerCfg, {"kind": "franky", "franky": {"address": "127.0.0.1"}}))
    assert isinstance(real.inner, FrankyFollower) and real.realtime  # built, not connected
    with pytest.raises(ConfigError, match="kind"):
        load_config(FollowerCfg, {"kind": "ros"})
    with pytest.raises(ConfigError, match="max_step_rad"):
        load_config(FollowerCfg, None, ["safety.max_step_rad=-1"])


def test_the_demo_prints_its_figures_and_writes_the_plot(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "follow_demo.py"), "--out", str(tmp_path),
                           "--duration", "3"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rms_tracking_rad"] > 0 and result["lag_ms"] > 0
    plot = Path(result["plot"])
    assert plot.is_file() and plot.stat().st_size > 10_000


def test_limit_usage_reports_the_closest_approach_and_peak_fractions():
    dt = 0.001
    t = np.arange(0.0, 1.0, dt)[:, None]
    q = franka.Q_START + 0.1 * np.sin(2 * np.pi * t) * np.ones(7)  # amplitude 0.1 rad at 1 Hz
    usage = limit_usage(q, dt)
    assert usage["closest_to_position_limit_rad"] == pytest.approx(np.min(franka.Q_MAX - franka.Q_START) - 0.1, abs=1e-3)
    assert usage["velocity"] == pytest.approx(np.max(0.2 * np.pi / franka.QD_MAX), rel=1e-3)
