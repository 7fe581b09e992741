"""Replay of the real PushT footage: initial pose estimate, a short replay through the loop, bad input."""

import csv
import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from real_is_sim.cameras.replay import VideoReplaySource
from real_is_sim.correction.initial_pose import InitialPoseCfg, estimate_initial_pose
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.gaussians.io import load_object_cloud
from real_is_sim.objectfile import load_object_file
from real_is_sim.bridge import BridgeCfg, build_bridge
from real_is_sim.bridge.config import CamerasCfg, PolicyCfg
from real_is_sim.loop import LoopCfg
from real_is_sim.replay import TRAJECTORY_COLUMNS, ReplayCfg, replay_real, tuned_sensor_cfg
from real_is_sim.robot.franka import Q_START
from real_is_sim.robot.recorded_follower import load_follower_csv
from real_is_sim.transforms import quat_rotate, quat_to_matrix
from real_is_sim.twin.tblock import table_plane
from real_is_sim_tasks.pusht.config import REAL_YAML, load_pusht_cfg
from real_is_sim_tasks.pusht.masks import red_orange_mask

REPO = Path(__file__).resolve().parents[1]
FRAMES = 24


@pytest.fixture(scope="module")
def first_frames(shared_data):
    with VideoReplaySource(shared_data / "sample_demos" / "0") as source:
        cams = list(source.cameras.values())
        images = [source.frame(c.serial, 0).image for c in cams]
    cloud, scan_pose = load_object_cloud(shared_data / "objects" / "tblock.json")
    viewmats = np.stack([c.viewmat_opencv() for c in cams])
    Ks = np.stack([c.K for c in cams])
    return cloud, scan_pose, images, viewmats, Ks, table_plane(load_pusht_cfg(REAL_YAML).table)


@pytest.fixture(scope="module")
def short_replay(shared_data, tmp_path_factory):
    """The first FRAMES frames of the clip through the whole pipeline, once for the tests below."""
    out = tmp_path_factory.mktemp("replay")
    cfg = ReplayCfg(max_frames=FRAMES, background_stride=16, overlays=2,
                    initial_pose=InitialPoseCfg(refine_candidates=1, refine_iters=30))
    return out, replay_real(out, cfg, log=lambda *_: None)


def test_initial_pose_recovers_first_frame(short_replay, first_frames, shared_data):
    _, result = short_replay
    _, scan_pose, _, _, _, plane = first_frames
    estimate, at_scan = result.initial_iou_per_view, result.scan_pose_iou_per_view
    assert min(estimate.values()) > 0.6, estimate
    # X_WB is a few cm and tens of degrees off the block in the first frame: the estimate must do much better.
    assert all(estimate[s] > at_scan[s] + 0.2 for s in estimate), (estimate, at_scan)
    pose = np.array(result.initial_pose)
    assert np.linalg.norm(pose[:2] - scan_pose[:2]) > 0.01
    # Resting on the table: flat, its lowest sphere touching the plane.
    normal = plane[:3] / np.linalg.norm(plane[:3])
    body_z, scan_z = quat_to_matrix(pose[3:])[:, 2], quat_to_matrix(scan_pose[3:])[:, 2]
    assert abs(abs(body_z @ normal) - abs(scan_z @ normal)) < 1e-3
    spheres = load_object_file(shared_data / "objects" / "tblock.json")
    heights = (pose[:3] + quat_rotate(pose[3:], spheres.sphere_centers)) @ normal + plane[3] / np.linalg.norm(plane[:3])
    assert abs(heights.min() - spheres.sphere_radii[0]) < 1e-4
    # The red face up: upside down relative to X_WB (docs/render.md)
    assert body_z @ scan_z < -0.99


def test_initial_pose_rejects_images_without_block(first_frames):
    cloud, scan_pose, images, viewmats, Ks, plane = first_frames
    blank = [np.full_like(im, 128) for im in images]
    with pytest.raises(DataError, match="no object pixels"):
        estimate_initial_pose(cloud, blank, viewmats, Ks, scan_pose, plane, object_mask=red_orange_mask)
    with pytest.raises(DataError, match="images for"):
        estimate_initial_pose(cloud, images[:1], viewmats, Ks, scan_pose, plane, object_mask=red_orange_mask)


def test_short_replay_writes_trajectory_and_tracks(short_replay):
    out, result = short_replay
    with open(out / "trajectory.csv") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == TRAJECTORY_COLUMNS
    values = np.array(rows[1:], dtype=float)
    assert len(values) == result.ticks
    assert np.all(np.isfinite(values)) and np.all(np.diff(values[:, 0]) > 0)
    assert np.allclose(np.linalg.norm(values[:, 4:8], axis=1), 1.0, atol=1e-4)
    assert all(n >= FRAMES - 6 for n in result.frames.values()), result.frames  # a few are stale (recording gap)
    assert result.mean_iou > 0.65 and min(result.iou_per_view.values()) > 0.55, result
    assert len(list(out.glob("overlay_*.png"))) == 2
    assert (out / "replay.rrd").stat().st_size > 0
    assert json.loads(result.to_json())["mean_iou"] == result.mean_iou


def test_short_replay_scores_without_the_arm_and_runs_the_checks(short_replay):
    out, result = short_replay
    serials = sorted(result.iou_per_view)
    assert sorted(result.iou_arm_excluded) == serials and min(result.iou_arm_excluded.values()) > 0.55, result
    # The arm fitted to the views, one row per frame of the first camera: a follower log.
    t, q = load_follower_csv(out / "arm.csv")
    assert FRAMES - 6 <= len(t) <= FRAMES and q.shape == (len(t), 7) and 0.2 < result.arm_fit_iou <= 1.0
    # Each view alone tracks, the other scores; and the forces-off control beside both.
    assert sorted(result.leave_one_view_out_iou) == serials
    assert all(0.3 < v <= 1.0 for v in result.leave_one_view_out_iou.values()), result.leave_one_view_out_iou
    assert sorted(result.forces_off_iou["per_view"]) == serials
    assert sorted(result.forces_off_iou["leave_one_view_out"]) == serials


def test_arm_occluder_is_the_fitted_arm_at_the_frames_time(shared_data, tmp_path, monkeypatch):
    """With ``occlude_arm`` the sensor renders the arm fitted to the footage, at each tick's newest fitted frame."""
    import real_is_sim.replay as replay_module

    posed = []

    class Recording(replay_module.RobotAppearance):
        def cloud(self, q_arm):
            posed.append(np.array(q_arm))
            return super().cloud(q_arm)

    monkeypatch.setattr(replay_module, "RobotAppearance", Recording)
    cfg = ReplayCfg(max_frames=8, background_stride=64, overlays=0, checks=False, occlude_arm=True,
                    initial_pose=InitialPoseCfg(refine_candidates=1, refine_iters=10))
    result = replay_real(tmp_path, cfg, log=lambda *_: None)
    t, q = load_follower_csv(tmp_path / "arm.csv")
    assert len(posed) >= result.ticks - 3  # every tick with a fresh frame
    # every occluder pose is one of the fitted frames' joints, not the parked twin robot's
    assert all(np.min(np.abs(q - p).max(axis=1)) < 1e-5 for p in posed)
    assert all(np.abs(p - Q_START).max() > 0.05 for p in posed)


def test_replay_source_gives_the_loop_only_the_chosen_views(shared_data):
    """Leave-one-view-out is honest only if the sensor never sees the scored view."""
    recording = shared_data / "sample_demos" / "0"
    with VideoReplaySource(recording) as source:
        serials = source.serials
    bridge = build_bridge(BridgeCfg(
        task="pusht_real.yaml", sensor=tuned_sensor_cfg(), policy=PolicyCfg(kind="hold"), render_robot=False,
        recover_lost=False, loop=LoopCfg(visual_forces=True, follow_real=False, realtime=False),
        cameras=CamerasCfg(source="replay", recording=str(recording), serials=[serials[1]], background_stride=64)))
    try:
        assert [c.name for c in bridge.loop.sensor.cameras] == [serials[1]]
        assert bridge.source.serials == [serials[1]]
    finally:
        bridge.source.close()


def test_missing_recording_is_one_clear_error(tmp_path):
    with pytest.raises(DataError, match="no recording at"):
        replay_real(tmp_path / "out", ReplayCfg(recording=str(tmp_path / "nowhere")))


def test_cli_reports_missing_recording(tmp_path, monkeypatch, capsys):
    argv = ["replay_real.py", "--out", str(tmp_path / "out"), "--recording", str(tmp_path / "nowhere")]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(REPO / "scripts" / "replay_real.py"), run_name="__main__")
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err.strip().splitlines()
    assert len(stderr) == 1 and stderr[0].startswith("real-is-sim replay: no recording at")  # one line, no traceback


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="max_frames"):
        ReplayCfg(max_frames=0)
    with pytest.raises(ConfigError, match="yaw_steps"):
        InitialPoseCfg(yaw_steps=0)
