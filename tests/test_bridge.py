"""The bridge: one configuration tree, one composition root, deploy sessions that stop cleanly, the command line."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from real_is_sim.bridge import PRESETS, build_bridge, load_bridge_cfg
from real_is_sim.bridge.config import session_replay_overrides
from real_is_sim.bridge.session import DeploySession, StageError
from real_is_sim.cameras.calibration import load_video_metadata, save_cameras_json
from real_is_sim.cameras.realsense import CameraUnavailableError
from real_is_sim.errors import ConfigError
from real_is_sim.robot.follower import HealthStatus

# Small views and a short run keep a stand-in session to a few seconds here.
SMALL = ["cameras.num_cameras=2", "cameras.width=160", "cameras.height=90", "loop.realtime=false"]


def test_presets_are_the_shipped_ones():
    assert set(PRESETS) == {"standin", "real_cell"}
    standin, real = load_bridge_cfg("standin"), load_bridge_cfg("real_cell")
    assert (standin.cameras.source, standin.follower.kind) == ("standin", "simulated")
    assert (real.cameras.source, real.follower.kind, real.task) == ("realsense", "franky", "pusht_real.yaml")


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["sensor.kpp=3"], "kpp"),  # a typo
        (["cameras.source=webcam"], "cameras.source"),
        (["sensor.iterations=-1"], "iterations"),
        (["policy.kind=teleport"], "policy.kind"),
        (["duration_s=abc"], "duration_s"),
    ],
)
def test_a_bad_value_is_one_config_error_naming_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key):
        load_bridge_cfg("standin", overrides=overrides)


def test_unknown_preset_and_missing_file_name_themselves(tmp_path):
    with pytest.raises(ConfigError, match="unknown preset 'lab'"):
        load_bridge_cfg("lab")
    with pytest.raises(ConfigError, match="not found"):
        load_bridge_cfg("standin", path=tmp_path / "nope.yaml")


def test_standin_preset_builds_the_whole_loop():
    bridge = build_bridge(load_bridge_cfg("standin", overrides=SMALL))
    try:
        assert bridge.standin is not None and bridge.loop.sensor is not None and bridge.loop.actuator is not None
        assert bridge.follower is bridge.standin.follower  # reality's robot is the bridge's follower
        assert [c.width for c in bridge.cameras] == [160, 160]
        before = bridge.twin.robot_q()[0].copy()
        for _ in range(20):
            report = bridge.step()
        assert report.reading is not None and report.frames_used  # the sensor read the stand-in's frames
        assert not np.allclose(bridge.twin.robot_q()[0], before)  # the scripted push moved the twin robot
        # the stand-in's robot follows the twin robot (with lag)
        assert np.abs(bridge.follower.read_state().q - before).max() > 1e-3
    finally:
        bridge.hold_and_stop()


def test_real_cell_preset_stops_at_the_devices_naming_the_missing_serials(tmp_path):
    calibration = tmp_path / "cameras.json"
    serials = ["000000000011", "000000000022", "000000000033"]
    save_cameras_json(calibration, {s: np.eye(4) for s in serials})
    cfg = load_bridge_cfg("real_cell", overrides=[f"cameras.calibration={calibration}"])
    with pytest.raises(CameraUnavailableError, match="000000000011.*000000000022.*000000000033"):
        build_bridge(cfg)
    with pytest.raises(Exception, match="no calibration file"):
        build_bridge(load_bridge_cfg("real_cell", overrides=[f"cameras.calibration={tmp_path / 'missing.json'}"]))


def _failing_policy(bridge, fail_at: int):
    policy, ticks = bridge.policy, []

    def policy_that_fails(t):
        ticks.append(t)
        if len(ticks) > fail_at:
            raise RuntimeError("injected policy failure")
        return policy(t)

    return policy_that_fails


def test_a_failing_stage_stops_cleanly_with_the_robot_holding(tmp_path):
    cfg = load_bridge_cfg("standin", overrides=[*SMALL, f"recording.out={tmp_path / 'session'}"])
    session = DeploySession(cfg)
    session.bridge.policy = _failing_policy(session.bridge, fail_at=30)
    sent = []
    inner_send = session.bridge.follower.inner.send
    session.bridge.follower.inner.send = lambda q, stamp: (sent.append(np.array(q)), inner_send(q, stamp))[1]
    with pytest.raises(StageError, match="policy stage failed: RuntimeError: injected policy failure") as failure:
        session.run(duration_s=2.0)
    assert failure.value.stage == "policy"
    follower = session.bridge.follower
    # held: the last target sent is where the arm was when the session stopped; then it was stopped
    assert np.allclose(sent[-1], follower.read_state().q, atol=1e-9)
    assert follower.health().status is HealthStatus.STOPPED
    out = tmp_path / "session"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"] == "policy failed" and summary["ticks"] == 30
    assert len((out / "twin.csv").read_text().splitlines()) == 1 + 30
    for serial in ("sim0", "sim1"):  # camera streams closed and complete, replayable
        assert load_video_metadata(out / "cameras" / "videos" / f"{serial}.json").complete


def test_a_session_records_what_it_did(tmp_path):
    out = tmp_path / "session"
    cfg = load_bridge_cfg("standin", overrides=[*SMALL, f"recording.out={out}", "initial_offset=[0.015,0.0,0.0]"])
    result = DeploySession(cfg).run(duration_s=0.5)
    assert result.ticks == 30 and result.stopped_by == "duration" and result.success is False
    twin = np.genfromtxt(out / "twin.csv", delimiter=",", names=True)
    truth = np.genfromtxt(out / "ground_truth.csv", delimiter=",", names=True)
    assert len(twin) == len(truth) == 30
    # the summary's sync error is the recorded twin against the recorded ground truth
    error = np.hypot(twin["x"] - truth["x"], twin["y"] - truth["y"])
    assert result.sync_error_mm_median == pytest.approx(np.median(error) * 1e3, abs=0.01)
    assert error[0] > 0.01  # reality's block really started away from the twin's
    with pytest.raises(Exception, match="refusing to overwrite"):
        DeploySession(cfg)


def test_a_recorded_session_replays_through_the_loop_to_the_same_twin_trajectory(tmp_path):
    live = tmp_path / "live"
    cfg = load_bridge_cfg("standin", overrides=[*SMALL, f"recording.out={live}", "initial_offset=[0.012,-0.008,0.1]",
                                                "recording.lossless=true"])
    DeploySession(cfg).run(duration_s=1.5)
    # the session's own config, its recording as the cameras and its arm as the follower
    replayed_out = tmp_path / "replayed"
    cfg = load_bridge_cfg("standin", path=live / "config.yaml",
                          overrides=[*session_replay_overrides(live), f"recording.out={replayed_out}", "recording.cameras=false"])
    DeploySession(cfg).run(duration_s=1.5)
    a = np.genfromtxt(live / "twin.csv", delimiter=",", names=True)
    b = np.genfromtxt(replayed_out / "twin.csv", delimiter=",", names=True)
    assert len(a) == len(b) == 90
    difference = np.hypot(a["x"] - b["x"], a["y"] - b["y"])
    assert difference.max() < 1e-3, difference.max()
    # the correction really acted in both: the twin block moved towards reality's by several mm
    moved = np.hypot(a["x"][-1] - a["x"][0], a["y"][-1] - a["y"][0])
    assert moved > 0.005, moved


def test_command_line_help_for_every_subcommand():
    exe = Path(sys.executable).with_name("real-is-sim")
    assert exe.is_file(), "the console script is installed by `pip install -e .`"
    for args in ([], ["deploy"], ["demo"], ["replay"]):
        out = subprocess.run([str(exe), *args, "--help"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "usage: real-is-sim" in out.stdout


def test_command_line_bad_override_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "real_is_sim.cli", "deploy", "sensor.kpp=3"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("real-is-sim deploy: invalid BridgeCfg config")
    assert "Traceback" not in out.stderr


def test_a_background_session_stops_cleanly_on_request(tmp_path):
    import time

    from real_is_sim.bridge.background import BackgroundSession
    from real_is_sim.errors import RealIsSimError

    background = BackgroundSession()
    cfg = load_bridge_cfg("standin", overrides=[*SMALL, f"recording.out={tmp_path / 's'}", "duration_s=60"])
    background.start(cfg)
    with pytest.raises(RealIsSimError, match="already running"):
        background.start(cfg)
    time.sleep(2.0)
    result = background.stop()
    assert not background.running and background.error is None
    assert result.stopped_by == "stop request" and 0 < result.ticks < 3600
    assert result.follower_health == "STOPPED"


def test_a_follower_that_stops_following_ends_the_session(tmp_path):
    # e.g. its watchdog stopped it because the loop fell behind: the twin must not go on without the robot
    cfg = load_bridge_cfg("standin", overrides=[*SMALL, f"recording.out={tmp_path / 's'}"])
    session = DeploySession(cfg)
    policy = session.bridge.policy

    def stop_the_arm_at_tick_10(t):
        if round(t * 60) == 10:
            session.bridge.follower.stop()
        return policy(t)

    session.bridge.policy = stop_the_arm_at_tick_10
    with pytest.raises(StageError, match="follower stage failed.*stopped") as failure:
        session.run(duration_s=1.0)
    assert failure.value.stage == "follower"
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["ticks"] == 10


def test_a_session_refuses_to_start_with_the_arm_away_from_the_twin_robot(tmp_path):
    cfg = load_bridge_cfg("standin", overrides=[*SMALL, f"recording.out={tmp_path / 's'}"])
    session = DeploySession(cfg)
    twin = session.bridge.twin
    away = twin.robot_q()[0] + 0.2  # the twin robot starts elsewhere than the arm is
    twin.reset(robot_q=away[None])
    with pytest.raises(StageError, match=r"follower stage failed.*0\.200 rad from the twin robot's start"):
        session.run(duration_s=0.5)
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["ticks"] == 0


@pytest.mark.parametrize("guard", [True, False])
def test_the_real_arm_can_follow_a_twin_whose_policy_asks_for_the_tool_below_the_workspace(guard):
    from real_is_sim.robot.kinematics import PandaKinematics

    bridge = build_bridge(load_bridge_cfg("standin", overrides=[*SMALL, "loop.visual_forces=false",
                                                                 f"loop.guard_targets={str(guard).lower()}"]))
    try:
        kinematics = PandaKinematics()
        q = np.asarray(bridge.twin.robot_q()[0], dtype=float)
        start = kinematics.tool_pose(q)
        floor = bridge.follower.cfg.workspace_min[2]
        for k in range(60):  # 1 s: the tool sinks 4 cm, to 2 cm under the workspace's floor
            depth = min(1.0, (k + 1) / 30) * (start.translation[2] - floor + 0.02)
            q = kinematics.solve(np.array(start.translation) - [0, 0, depth], start.rotation, q)
            bridge.tick(q[None])
        refused = sum(bridge.follower.filter.refusals.values())
        twin_tool = kinematics.tool_position(bridge.twin.robot_q()[0])[2]
        real_tool = kinematics.tool_position(bridge.follower.read_state().q)[2]
    finally:
        bridge.hold_and_stop()
    if guard:  # the twin stops at the floor (less a margin) and the real arm stays with it
        assert refused == 0 and bridge.loop.target_guard.moved > 20
        assert floor < twin_tool < floor + 0.01 and abs(real_tool - twin_tool) < 0.01
    else:  # the control: the twin goes under the floor, the real arm is refused and left behind
        assert refused > 10 and bridge.loop.target_guard is None
        assert twin_tool < floor and real_tool - twin_tool > 0.005
