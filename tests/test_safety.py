"""SafetyFilter and SafeFollower: refusals, clamps, workspace box, watchdog, config validation."""

import logging
import time

import numpy as np
import pytest

from real_is_sim.config import load_config
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.robot import franka
from real_is_sim.robot.follower import HealthStatus
from real_is_sim.robot.kinematics import PandaKinematics
from real_is_sim.robot.safety import Clamp, Refusal, SafeFollower, SafetyCfg, SafetyFilter, WorkspaceGuard
from real_is_sim.robot.simulated_follower import SimulatedFollower, SimulatedFollowerCfg


@pytest.fixture(scope="module")
def kinematics():
    return PandaKinematics()


def test_non_finite_stale_and_out_of_order_targets_are_refused_logged_and_counted(caplog):
    safety = SafetyFilter(SafetyCfg(max_target_age_s=0.1))
    nan_target = franka.Q_START.copy()
    nan_target[2] = np.nan
    with caplog.at_level(logging.WARNING, logger="real_is_sim.robot.safety"):
        assert safety.check(nan_target, 1.0, 1.0).refusal is Refusal.NON_FINITE
        assert safety.check(franka.Q_START, np.inf, 1.0).refusal is Refusal.NON_FINITE
        assert safety.check(franka.Q_START, 0.5, 1.0).refusal is Refusal.STALE
        assert safety.check(franka.Q_START, 1.0, 1.0).accepted
        assert safety.check(franka.Q_START, 0.99, 1.0).refusal is Refusal.OUT_OF_ORDER
    assert safety.refusals == {Refusal.NON_FINITE: 2, Refusal.STALE: 1, Refusal.OUT_OF_ORDER: 1}
    reasons = [record.getMessage() for record in caplog.records]
    assert len(reasons) == 4 and "stale" in reasons[2] and "0.500 s old" in reasons[2]


def test_out_of_limit_targets_are_clamped_into_the_margin_or_refused():
    target = franka.Q_START.copy()
    target[0] = 3.2  # beyond Q_MAX[0] = 2.8973
    clamping = SafetyFilter(SafetyCfg(joint_margin_rad=0.05, max_step_rad=1.0))
    decision = clamping.check(target, 0.0, 0.0)
    assert decision.accepted and Clamp.JOINT_LIMITS in decision.clamps
    assert decision.q[0] == pytest.approx(franka.Q_MAX[0] - 0.05)
    assert np.array_equal(decision.q[1:], target[1:])
    refusing = SafetyFilter(SafetyCfg(clamp_to_limits=False))
    decision = refusing.check(target, 0.0, 0.0)
    assert not decision.accepted and decision.refusal is Refusal.OUT_OF_LIMITS and "joint1" in decision.detail


def test_the_step_between_consecutive_targets_is_limited():
    safety = SafetyFilter(SafetyCfg(max_step_rad=0.05))
    safety.reset(franka.Q_START)
    far = franka.Q_START + np.array([0.3, -0.3, 0.01, 0, 0, 0, 0])
    first = safety.check(far, 0.0, 0.0)
    assert Clamp.STEP in first.clamps
    assert np.allclose(first.q - franka.Q_START, [0.05, -0.05, 0.01, 0, 0, 0, 0])
    second = safety.check(far, 0.01, 0.01)  # the next one steps on from the last accepted target
    assert np.allclose(second.q - franka.Q_START, [0.1, -0.1, 0.01, 0, 0, 0, 0])


def test_the_tool_must_stay_inside_the_workspace_box(kinematics):
    tool_at_home = kinematics.tool_position(franka.Q_START)
    assert 0.0 < tool_at_home[2] < 0.5  # above the table, pointing down at it
    # the checked point is the pusher tip: 10 cm along the TCP z axis (down at home) leaves a box whose floor
    # is 5 cm under the TCP
    floor = (tool_at_home - [1.0, 1.0, 0.05]).tolist()
    ceiling = (tool_at_home + 1.0).tolist()
    bare = SafetyFilter(SafetyCfg(workspace_min=floor, workspace_max=ceiling))
    pusher = SafetyFilter(SafetyCfg(workspace_min=floor, workspace_max=ceiling, tool_offset_m=0.1))
    assert bare.check(franka.Q_START, 0.0, 0.0).accepted
    assert pusher.check(franka.Q_START, 0.0, 0.0).refusal is Refusal.OUTSIDE_WORKSPACE
    box_min = tool_at_home - 0.05
    box_max = tool_at_home + 0.05
    safety = SafetyFilter(SafetyCfg(workspace_min=box_min.tolist(), workspace_max=box_max.tolist(), max_step_rad=1.0))
    rng = np.random.default_rng(1)
    inside = outside = 0
    for i in range(200):
        target = franka.Q_START + rng.normal(0.0, 0.08, 7)
        tool = kinematics.tool_position(target)
        in_box = bool(np.all(tool >= box_min) and np.all(tool <= box_max))
        decision = safety.check(target, float(i), float(i))
        assert decision.accepted == in_box
        if not in_box:
            assert decision.refusal is Refusal.OUTSIDE_WORKSPACE
        inside += in_box
        outside += not in_box
    assert inside > 20 and outside > 20  # both sides were exercised
    assert safety.refusals[Refusal.OUTSIDE_WORKSPACE] == outside


def test_the_twins_guard_moves_a_target_the_filter_would_refuse_into_the_box_and_leaves_the_rest_alone(kinematics):
    cfg = SafetyCfg(max_step_rad=1.0)
    guard, safety = WorkspaceGuard(cfg, margin_m=0.005), SafetyFilter(cfg)
    home = kinematics.tool_pose(franka.Q_START)
    low = kinematics.solve(np.array(home.translation) * [1, 1, 0] + [0, 0, 0.012], home.rotation, franka.Q_START)
    assert safety.check(low, 0.0, 0.0).refusal is Refusal.OUTSIDE_WORKSPACE  # the tool 8 mm under the box's floor
    guarded = guard(low)
    moved = kinematics.tool_pose(guarded)
    np.testing.assert_allclose(moved.translation, [*home.translation[:2], cfg.workspace_min[2] + 0.005], atol=1e-5)
    np.testing.assert_allclose(moved.rotation, home.rotation, atol=1e-5)  # the tool still points the same way
    assert np.abs(guarded - low).max() < 0.1  # a small move from the policy's target, not another arm posture
    assert safety.check(guarded, 1.0, 1.0).accepted
    assert guard(franka.Q_START) is not None and np.array_equal(guard(franka.Q_START), franka.Q_START)
    assert guard.moved == 1
    nan_target = franka.Q_START.copy()
    nan_target[0] = np.nan
    assert np.isnan(guard(nan_target)[0])  # left for the filter to refuse and count
    with pytest.raises(ValueError, match="margin_m"):
        WorkspaceGuard(cfg, margin_m=0.5)


def test_wrong_shape_raises_one_clear_error():
    with pytest.raises(DataError, match=r"shape \(7,\)"):
        SafetyFilter().check(np.zeros((2, 7)), 0.0, 0.0)


def stepped_safe_follower(**safety) -> SafeFollower:
    follower = SafeFollower(SimulatedFollower(SimulatedFollowerCfg()), SafetyCfg(**safety))
    follower.start()
    return follower


def test_watchdog_holds_then_stops_when_the_twin_goes_silent():
    follower = stepped_safe_follower(watchdog_timeout_s=0.05, watchdog_stop_after_s=0.3)
    target = franka.Q_START.copy()
    target[0] -= 0.09
    for k in range(10):  # 60 Hz targets moving the arm, then silence
        follower.send(franka.Q_START + (target - franka.Q_START) * (k + 1) / 10, follower.now())
        follower.step_to((k + 1) / 60)
    last_send = 9 / 60
    assert follower.health().ok
    follower.step_to(1.0)
    (hold_event, hold_time), (stop_event, stop_time) = follower.watchdog_events
    assert hold_event == "hold" and hold_time - (last_send + 0.05) == pytest.approx(0.0, abs=0.0011)
    assert stop_event == "stop" and stop_time - hold_time == pytest.approx(0.3, abs=0.0011)
    assert follower.health().status is HealthStatus.STOPPED
    assert np.allclose(follower.read_state().qd, 0.0, atol=1e-6)
    assert follower.send(target, follower.now()).refusal is Refusal.STOPPED
    follower.start()
    assert follower.health().ok and follower.send(target, follower.now()).accepted


def test_a_fresh_target_during_the_hold_resumes_following():
    follower = stepped_safe_follower(watchdog_timeout_s=0.05, watchdog_stop_after_s=1.0)
    follower.step_to(0.1)
    assert follower.health().status is HealthStatus.WATCHDOG_HOLD
    target = franka.Q_START + 0.02
    assert follower.send(target, follower.now()).accepted
    assert follower.health().ok
    for _ in range(60):  # keep sending at 60 Hz: no second hold
        follower.send(target, follower.now())
        follower.advance(1 / 60)
    assert [event for event, _ in follower.watchdog_events] == ["hold"]
    assert np.allclose(follower.read_state().q, target, atol=1e-4)


def test_refused_targets_also_trip_the_watchdog():
    follower = stepped_safe_follower(watchdog_timeout_s=0.05)
    for _ in range(10):
        follower.send(np.full(7, np.nan), follower.now())
        follower.advance(1 / 60)
    assert follower.health().status is HealthStatus.WATCHDOG_HOLD
    assert follower.refusals[Refusal.NON_FINITE] == 10


@pytest.mark.parametrize(
    "source, message",
    [
        ({"max_step_rad": 0.0}, "max_step_rad"),
        ({"watchdog_timeout_s": -1.0}, "watchdog_timeout_s"),
        ({"joint_margin_rad": 2.0}, "no room"),
        ({"workspace_min": [0.0, 0.0]}, "workspace_min"),
        ({"workspace_min": [1.0, 0.0, 0.0], "workspace_max": [0.5, 1.0, 1.0]}, "below workspace_max"),
        ({"tool_offset_m": "x"}, "x"),
        ({"tool_offset_m": float("nan")}, "tool_offset_m"),
        ({"watchdog": 1.0}, "watchdog"),
    ],
)
def test_malformed_safety_config_gives_one_clear_error(source, message):
    with pytest.raises(ConfigError, match=message):
        load_config(SafetyCfg, source)


def test_the_watchdog_thread_holds_a_real_time_follower():
    follower = SafeFollower(SimulatedFollower(SimulatedFollowerCfg(realtime=True)), SafetyCfg(watchdog_timeout_s=0.05))
    follower.start()
    try:
        assert follower.send(franka.Q_START + 0.01, follower.now()).accepted
        deadline = time.monotonic() + 2.0
        while not follower.watchdog_events and time.monotonic() < deadline:
            time.sleep(0.01)
        assert follower.health().status is HealthStatus.WATCHDOG_HOLD
        event, at = follower.watchdog_events[0]
        assert event == "hold" and at - follower.last_accepted_at < 0.05 + 0.05  # poll 2 ms + scheduling on a busy box
    finally:
        follower.close()
    assert follower.send(franka.Q_START, follower.now()).refusal is Refusal.STOPPED


def test_targets_before_start_are_refused_as_stopped():
    follower = SafeFollower(SimulatedFollower(), SafetyCfg())
    decision = follower.send(franka.Q_START, 0.0)
    assert decision.refusal is Refusal.STOPPED and "not started" in decision.detail
