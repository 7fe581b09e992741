"""SimulatedFollower: Ruckig at 1 kHz + latency + first-order tracking, stepped deterministically."""

import time

import numpy as np
import pytest

from real_is_sim.config import load_config
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.robot import franka
from real_is_sim.robot.follower import DynamicsFactorCfg, FollowerError, HealthStatus
from real_is_sim.robot.safety import SafeFollower, SafetyCfg
from real_is_sim.robot.simulated_follower import SimulatedFollower, SimulatedFollowerCfg

TOL = 1e-6  # relative slack on the limits for float rounding


def started(**cfg) -> SimulatedFollower:
    follower = SimulatedFollower(SimulatedFollowerCfg(**cfg))
    follower.start()
    return follower


def test_converges_to_a_constant_target():
    follower = started()
    target = franka.Q_START + np.array([0.2, -0.1, 0.15, 0.2, -0.2, 0.1, 0.3])
    follower.send(target, follower.now())
    follower.advance(3.0)
    state = follower.read_state()
    assert np.allclose(state.q, target, atol=1e-6)
    assert np.allclose(state.qd, 0.0, atol=1e-5)
    assert state.stamp == pytest.approx(3.0)


def test_a_jump_is_smoothed_and_arrives_after_the_latency():
    follower = started(latency_s=0.01, tau_s=0.02)
    jump = franka.Q_START.copy()
    jump[3] += 0.3
    follower.send(jump, 0.0)
    follower.advance(0.009)  # before the latency: nothing moves
    assert np.array_equal(follower.read_state().q, franka.Q_START)
    follower.advance(0.011)  # 10 ms of motion: a small part of the jump, not all of it
    moved = follower.read_state().q[3] - franka.Q_START[3]
    assert 0.0 < moved < 0.02
    reference, _, _ = follower.reference()
    assert follower.read_state().q[3] < reference[3]  # the joint lags the Ruckig reference
    follower.advance(2.0)
    assert follower.read_state().q[3] == pytest.approx(jump[3], abs=1e-6)


def test_stepping_is_deterministic_and_independent_of_chunking():
    rng = np.random.default_rng(3)
    targets = franka.Q_START + rng.uniform(-0.05, 0.05, size=(30, 7))
    runs = []
    for one_ms_at_a_time in (False, True):
        follower = started()
        for i, target in enumerate(targets):
            follower.send(target, follower.now())
            end = (i + 1) / 60
            if one_ms_at_a_time:
                while follower.now() + 0.0005 <= end:
                    follower.advance(0.001)
            else:
                follower.step_to(end)
        runs.append(follower.read_state().q)
    assert np.array_equal(runs[0], runs[1])


def test_franka_limits_hold_at_1khz_under_adversarial_targets():
    """Random jumps, limit-hugging targets, NaN and stale ones through the safety layer: the executed 1 kHz joint
    trajectory never leaves the Franka position / velocity / acceleration / jerk limits."""
    rng = np.random.default_rng(0)
    full_speed = SimulatedFollowerCfg(dynamics=DynamicsFactorCfg(velocity=1.0, acceleration=1.0, jerk=1.0))
    follower = SafeFollower(SimulatedFollower(full_speed), SafetyCfg(max_step_rad=0.3))
    follower.start()
    q_log = [follower.read_state().q]
    for k in range(600):  # 10 s at 60 Hz
        kind = k % 4
        if kind == 0:
            target = rng.uniform(franka.Q_MIN - 0.5, franka.Q_MAX + 0.5)
        elif kind == 1:
            target = np.where(rng.random(7) < 0.5, franka.Q_MIN, franka.Q_MAX)
        elif kind == 2:
            target = follower.read_state().q + rng.normal(0.0, 0.3, 7)
            target[rng.integers(7)] = np.nan
        else:
            target = follower.read_state().q + rng.normal(0.0, 0.2, 7)
        follower.send(target, follower.now())
        for _ in range(17 if k % 3 else 16):
            follower.advance(0.001)
            q_log.append(follower.read_state().q)
    q = np.array(q_log)
    dt = 0.001
    qd = np.diff(q, axis=0) / dt
    qdd = np.diff(qd, axis=0) / dt
    qddd = np.diff(qdd, axis=0) / dt
    assert np.all(q >= franka.Q_MIN) and np.all(q <= franka.Q_MAX)
    assert np.all(np.abs(qd) <= franka.QD_MAX * (1 + TOL))
    assert np.all(np.abs(qdd) <= franka.QDD_MAX * (1 + TOL))
    assert np.all(np.abs(qddd) <= franka.QDDD_MAX * (1 + TOL))
    assert np.max(np.abs(qd) / franka.QD_MAX) > 0.5  # the stream really pushed the arm
    assert follower.refusals  # NaN targets were refused


def test_stop_brakes_smoothly_and_refuses_targets():
    follower = started()
    target = franka.Q_START.copy()
    target[0] -= 1.0
    follower.send(target, 0.0)
    follower.advance(0.4)
    assert np.max(np.abs(follower.read_state().qd)) > 0.3
    follower.stop()
    assert follower.health().status is HealthStatus.STOPPED
    with pytest.raises(FollowerError, match="start"):
        follower.send(target, follower.now())
    previous = follower.read_state().qd
    for _ in range(1500):
        follower.advance(0.001)
        qd = follower.read_state().qd
        assert np.all(np.abs(qd - previous) <= franka.QDD_MAX * 0.001 * (1 + TOL))
        previous = qd
    assert np.allclose(follower.read_state().qd, 0.0, atol=1e-6)
    assert abs(follower.read_state().q[0] - target[0]) > 0.05  # it stopped, it did not go on to the target


def test_bad_targets_raise_one_clear_error():
    follower = started()
    with pytest.raises(DataError, match=r"shape \(7,\)"):
        follower.send(np.zeros(9), 0.0)
    with pytest.raises(DataError, match="finite"):
        follower.send(np.full(7, np.nan), 0.0)
    with pytest.raises(DataError, match="dt"):
        follower.advance(-1.0)


def test_realtime_thread_moves_the_arm_in_wall_clock_time():
    follower = SimulatedFollower(SimulatedFollowerCfg(realtime=True))
    follower.start()
    try:
        target = franka.Q_START.copy()
        target[6] += 0.05
        follower.send(target, follower.now())
        time.sleep(0.6)
        assert follower.now() > 0.4
        assert follower.read_state().q[6] == pytest.approx(target[6], abs=1e-3)
        with pytest.raises(FollowerError, match="real-time"):
            follower.step_to(10.0)
    finally:
        follower.close()


@pytest.mark.parametrize(
    "source, message",
    [
        ({"tau_s": -0.1}, "tau_s"),
        ({"latency_s": "soon"}, "soon"),
        ({"q_initial": [0.0, 0.0]}, "q_initial"),
        ({"q_initial": [3.5, 0, 0, -1.0, 0, 1.0, 0]}, "outside the Franka joint limits"),
        ({"dynamics": {"velocity": 0.0}}, "velocity"),
        ({"dynamics": {"jerk": 1.5}}, "jerk"),
        ({"control_dt": 0.001}, "control_dt"),
    ],
)
def test_malformed_config_gives_one_clear_error(source, message):
    with pytest.raises(ConfigError, match=message):
        load_config(SimulatedFollowerCfg, source)


def test_config_loads_from_yaml(tmp_path):
    path = tmp_path / "follower.yaml"
    path.write_text("latency_s: 0.02\ndynamics:\n  velocity: 0.8\n")
    cfg = load_config(SimulatedFollowerCfg, path, ["tau_s=0.05"])
    assert (cfg.latency_s, cfg.tau_s, cfg.dynamics.velocity) == (0.02, 0.05, 0.8)
