"""Episodes recorded by the runner (offline and online), re-rendered from the dataset and replayed through the twin."""

import numpy as np
import pytest

from real_is_sim.demos.collect import collect, start_poses_for
from real_is_sim.demos.dataset import load_dataset
from real_is_sim.demos.replay import dataset_cameras, dataset_cell, render_frames, replay_open_loop
from real_is_sim.demos.runner import EpisodeRunner, dataset_writer_for
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.render.virtual_cameras import VirtualCameras
from real_is_sim.transforms import quat_rotate
from real_is_sim_tasks.pusht.scripted import ScriptedPusher, push_plan
from real_is_sim_tasks.pusht.start_poses import FIXED_START_POSES, stratified_start_poses

FRAME = 150  # in contact: the block has moved by then


@pytest.fixture(scope="module")
def offline_episode(tmp_path_factory):
    """One offline episode: the pusher comes down beside the block and pushes it 8 cm; the state at FRAME."""
    root = tmp_path_factory.mktemp("demos")
    runner = EpisodeRunner("offline")
    runner.writer = dataset_writer_for(runner, root)
    start = runner.default_start[0]
    center = start[:3] + quat_rotate(start[3:7], runner.twin.geometry.centers.mean(axis=0))
    plan = push_plan(ScriptedPusher(runner.twin.task), center, 0.03, runner.twin.control_dt, distance=0.08,
                     settle_steps=0, retreat=False)
    runner.begin(start)
    state = None
    for k, q in enumerate(plan):
        if k == FRAME:
            state = runner.twin.object_poses()[0], runner.robot_q()
        runner.step(q)
    result = runner.end()
    runner.close()
    return root, result, len(plan), start, state, runner.twin.task


def test_an_offline_episode_is_recorded_with_its_initial_state(offline_episode):
    root, result, length, start, _, cell = offline_episode
    assert result["episode_index"] == 0 and result["success"] is False
    assert result["seconds"] == pytest.approx(length / 60, abs=1e-3)
    ds = load_dataset(root)
    ep = ds.episodes[0]
    assert len(ep) == length and np.allclose(ep.object_poses[0, 0], start, atol=1e-6)
    assert np.linalg.norm(ep.object_poses[-1, 0, :2] - start[:2]) > 0.01  # the push moved the block
    assert ds.static["object_names"] == ["tblock"] and len(ds.static["cameras"]) == 3 and ds.static["mode"] == "offline"
    assert "friction_table" in ds.cell_yaml and np.allclose(ep.extra["start_pose"], [start])


def test_replaying_an_offline_episode_open_loop_ends_where_it_was_recorded(offline_episode):
    result = replay_open_loop(load_dataset(offline_episode[0]), 0)
    assert result.frames == offline_episode[2]
    assert result.max_position_error_mm < 0.01 and result.max_rotation_error_deg < 0.01


def test_rerendered_frames_equal_a_direct_render_of_the_same_state(offline_episode):
    root, _, _, _, (object_poses, robot_q), cell = offline_episode
    ds = load_dataset(root)
    cameras = dataset_cameras(ds)
    direct = VirtualCameras(cell)  # the same stand-in camera ring, built from the cell, not from the dataset
    for kind in ("static", "wrist"):
        again = render_frames(ds, 0, [FRAME], kind, 96, 72, cameras=cameras)[0]
        assert np.array_equal(again, direct.render(kind, object_poses, robot_q, 96, 72))
        assert not np.array_equal(again, render_frames(ds, 0, [0], kind, 96, 72, cameras=cameras)[0])
    with pytest.raises(DataError, match="out of range"):
        render_frames(ds, 0, [10_000], "static", 32, 32, cameras=cameras)


def test_an_online_episode_runs_against_the_standin(tmp_path):
    overrides = ["cameras.num_cameras=2", "cameras.width=96", "cameras.height=54", "sensor.iterations=1",
                 "standin.seed=3"]
    with EpisodeRunner("online", overrides=overrides) as runner:
        runner.writer = dataset_writer_for(runner, tmp_path)
        start = runner.default_start[0].copy()
        start[:2] += (0.03, -0.02)
        runner.begin(start)
        assert np.allclose(runner.object_pose(), start, atol=1e-3)
        truth = runner.ground_truth_pose()
        assert np.linalg.norm(truth[:2] - start[:2]) < 2e-3  # the stand-in's block was placed there too
        q = runner.robot_q()
        for k in range(5):
            runner.step(q + 0.002 * k)
        result = runner.end()
    ds = load_dataset(tmp_path)
    assert result["episode_index"] == 0 and len(ds.episodes[0]) == 5 and ds.static["mode"] == "online"
    assert "standin_physical" in ds.static and len(ds.static["cameras"]) == 2


class _HoldingExpert:
    """Holds the arm where it is; done after 3 ticks (the real expert plans for seconds: its own tests cover it)."""

    def __init__(self, cfg, planner_worlds=16, seed=0, grid="random"):
        self.ticks = 0

    def reset(self, object_pose, robot_q):
        self.ticks, self.done = 0, False

    def act(self, t, object_pose, robot_q):
        self.ticks += 1
        self.done = self.ticks >= 3
        return robot_q


def test_collect_appends_the_missing_episodes_of_a_dataset(tmp_path, monkeypatch):
    monkeypatch.setattr("real_is_sim_tasks.pusht.expert.PushTExpert", _HoldingExpert)
    first = collect("scripted", "offline", 1, "random", tmp_path, progress=False)
    assert (first.recorded, first.episodes, first.success_rate) == (1, 1, 0.0)
    second = collect("scripted", "offline", 3, "random", tmp_path, progress=False, time_limit_s=2 / 60)
    assert (second.recorded, second.episodes) == (2, 3)
    ds = load_dataset(tmp_path)
    assert [len(e) for e in ds.episodes] == [3, 2, 2]  # done after 3 ticks; then the 2-tick time limit
    poses = start_poses_for(dataset_cell(ds), "random", 3, 0)
    for episode, pose in zip(ds.episodes, poses):  # episode k from start pose k, across the two runs
        assert np.allclose(episode.object_poses[0, 0], pose, atol=1e-6)
    with pytest.raises(ConfigError, match="holds 20 poses, 30 episodes"):
        collect("scripted", "offline", 30, str(FIXED_START_POSES), tmp_path / "other", progress=False)


def test_collect_starts_from_the_stratified_design_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr("real_is_sim_tasks.pusht.expert.PushTExpert", _HoldingExpert)
    collect("scripted", "offline", 2, "stratified", tmp_path, seed=5, progress=False)
    ds = load_dataset(tmp_path)
    designed = stratified_start_poses(dataset_cell(ds), 2, 5)
    assert not np.allclose(designed, start_poses_for(dataset_cell(ds), "random", 2, 5))
    for episode, pose in zip(ds.episodes, designed):
        assert np.allclose(episode.object_poses[0, 0], pose, atol=1e-6)
