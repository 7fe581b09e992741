"""The scripted PushT expert (offline, in a bare twin) and the start poses it is benchmarked from."""

import json

import numpy as np
import pytest

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.transforms import quat_from_yaw, quat_multiply, quat_rotate, yaw_of
from real_is_sim.twin import Twin
from real_is_sim_tasks.pusht import goal_errors, is_success, load_pusht_cfg
from real_is_sim_tasks.pusht.expert import PUSH_SPEED, TRANSIT_SPEED, PushTExpert
from real_is_sim_tasks.pusht.start_poses import (
    FIXED_START_POSES,
    StartPoseCheck,
    load_start_poses,
    ORIGIN_X,
    ORIGIN_Y,
    random_start_poses,
    start_pose_at,
    stratified_start_poses,
)


@pytest.fixture(scope="module")
def cfg():
    return load_pusht_cfg()


def run_offline(cfg, expert, twin, start_pose, seconds=20.0):
    """One episode in ``twin``; the tool positions and the pusher-to-block gaps, per tick."""
    twin.reset(None, start_pose[None, None], np.asarray(cfg.robot.q_start)[None])
    expert.reset(twin.object_poses()[0, 0], twin.robot_q()[0])
    tools, gaps = [], []
    radius = twin.geometry.radius + cfg.robot.pusher_radius
    for tick in range(int(seconds / twin.control_dt)):
        pose = twin.object_poses()[0, 0]
        q = expert.act(tick * twin.control_dt, pose, twin.robot_q()[0])
        if expert.done:
            break
        twin.step(q[None])
        tool = twin.tool_position()[0]
        spheres = pose[:3] + quat_rotate(pose[3:7], twin.geometry.centers)
        tools.append(tool)
        gaps.append(np.min(np.linalg.norm(spheres - tool, axis=1)) - radius)
    return np.array(tools), np.array(gaps)


def test_expert_pushes_the_block_onto_the_goal_from_nearby_start_poses(cfg):
    expert = PushTExpert(cfg, planner_worlds=64, seed=0)  # all candidates in one batch: the quickest here
    twin = Twin(cfg, 1)
    goal = np.asarray(cfg.goal.pose)
    goal_yaw = float(yaw_of(goal[3:7]))
    # shifted, turned, and both: each needs a few pushes (kept near the goal so the test stays short)
    starts = [(0.07, -0.03, 0.0), (0.0, 0.0, 0.6), (-0.05, 0.04, -0.5)]
    for dx, dy, dyaw in starts:
        start = start_pose_at(cfg, goal[0] + dx, goal[1] + dy, goal_yaw + dyaw)
        assert not is_success(start, cfg.goal)
        tools, gaps = run_offline(cfg, expert, twin, start)
        final = twin.object_poses()[0, 0]
        assert expert.done, f"start offset {(dx, dy, dyaw)}: not done, errors {goal_errors(final, cfg.goal)}"
        assert is_success(final, cfg.goal), f"start offset {(dx, dy, dyaw)}: errors {goal_errors(final, cfg.goal)}"
        # the pusher ends clear of the block
        assert gaps[-1] > 0.02
        # like an operator: fast when free, slow in contact
        speed = np.linalg.norm(np.diff(tools, axis=0), axis=1) / twin.control_dt
        touching = gaps[1:] < 0.003
        assert touching.any()
        assert speed[touching].max() < 1.5 * PUSH_SPEED
        assert speed.max() > 0.6 * TRANSIT_SPEED


def test_expert_rejects_malformed_state(cfg):
    expert = PushTExpert(cfg, planner_worlds=2)
    with pytest.raises(DataError, match="object pose"):
        expert.reset(np.zeros(6), np.asarray(cfg.robot.q_start))
    with pytest.raises(DataError, match="finite"):
        expert.act(0.0, np.full(7, np.nan), np.asarray(cfg.robot.q_start))


def test_block_grid_makes_the_candidate_pushes_a_function_of_the_block_pose(cfg):
    pose = load_start_poses()[3]
    turned = pose.copy()
    turned[3:7] = quat_multiply(quat_from_yaw(0.2), pose[3:7])

    def headings(expert, p):
        return np.array([np.arctan2(line.direction[1], line.direction[0]) for line in expert._candidates(p)])

    block = PushTExpert(cfg, planner_worlds=2, grid="block")
    np.testing.assert_array_equal(headings(block, pose), headings(block, pose))  # same pose, same pushes
    step = np.pi / 6
    for p in (pose, turned):  # every heading is the block's yaw plus a multiple of 30 deg: the grid turns with it
        rest = np.mod(headings(block, p) - yaw_of(p[3:7]), step)
        assert np.all(np.minimum(rest, step - rest) < 1e-6)
    randomised = PushTExpert(cfg, planner_worlds=2, grid="random")
    assert not np.array_equal(headings(randomised, pose), headings(randomised, pose))
    with pytest.raises(ConfigError, match="grid"):
        PushTExpert(cfg, planner_worlds=2, grid="sideways")


def test_fixed_start_poses_are_twenty_valid_spread_poses(cfg):
    poses = load_start_poses(FIXED_START_POSES)
    assert poses.shape == (20, 7)
    check = StartPoseCheck(cfg)
    assert [check.problem(p) for p in poses] == [None] * 20
    assert not is_success(poses, cfg.goal).any()
    assert np.ptp(poses[:, 0]) > 0.15 and np.ptp(poses[:, 1]) > 0.3
    assert np.ptp(yaw_of(poses[:, 3:7])) > 5.0


def test_random_start_poses_are_valid_and_reproducible(cfg):
    poses = random_start_poses(cfg, 12, seed=3)
    assert poses.shape == (12, 7)
    check = StartPoseCheck(cfg)
    assert [check.problem(p) for p in poses] == [None] * 12
    np.testing.assert_array_equal(poses, random_start_poses(cfg, 12, seed=3))
    assert not np.allclose(poses, random_start_poses(cfg, 12, seed=4))


def test_stratified_start_poses_are_valid_and_reach_the_edges_random_draws_leave_thin(cfg):
    n = 30
    poses = stratified_start_poses(cfg, n, seed=3)
    assert poses.shape == (n, 7)
    check = StartPoseCheck(cfg)
    assert [check.problem(p) for p in poses] == [None] * n
    np.testing.assert_array_equal(poses, stratified_start_poses(cfg, n, seed=3))
    assert not np.allclose(poses, stratified_start_poses(cfg, n, seed=4))

    def near_edges(p):  # within 2 cm of the start area's x or y limits
        return int(np.sum((np.min(np.abs(p[:, :1] - np.array(ORIGIN_X)), axis=1) < 0.02)
                          | (np.min(np.abs(p[:, 1:2] - np.array(ORIGIN_Y)), axis=1) < 0.02)))

    # over 10 seeds, the design puts clearly more poses at the edges than as many uniform draws
    designed = sum(near_edges(stratified_start_poses(cfg, n, seed)) for seed in range(10))
    uniform = sum(near_edges(random_start_poses(cfg, n, seed)) for seed in range(10))
    assert designed > 1.5 * uniform
    # every sixth of the yaw circle is covered
    counts = np.histogram(yaw_of(poses[:, 3:7]), bins=6, range=(-np.pi, np.pi))[0]
    assert counts.min() >= 2


def test_start_pose_check_names_what_is_wrong(cfg):
    check = StartPoseCheck(cfg)
    goal = np.asarray(cfg.goal.pose)
    assert "near the goal" in check.problem(start_pose_at(cfg, goal[0], goal[1], float(yaw_of(goal[3:7]))))
    assert "robot base" in check.problem(start_pose_at(cfg, 0.9, 0.0, 0.0))
    assert "home" in check.problem(start_pose_at(cfg, check.home[0] + 0.07, check.home[1] + 0.03, 0.0))


@pytest.mark.parametrize("content, message", [
    (None, "not found"),
    ("{not json", "needs"),
    (json.dumps({"pose": [[0, 0, 0, 0, 0, 0, 1]]}), "needs"),
    (json.dumps({"poses": [[0, 0, 0, 0, 0, 1]]}), "7 finite numbers"),
    (json.dumps({"poses": []}), "non-empty"),
    (json.dumps({"poses": [[0, 0, 0, 0, 0, 0, 2]]}), "unit norm"),
    (json.dumps({"poses": [[0, 0, "x", 0, 0, 0, 1]]}), "needs"),
])
def test_bad_start_pose_files_raise_one_clear_error(tmp_path, content, message):
    path = tmp_path / "poses.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=message) as info:
        load_start_poses(path)
    assert str(path) in str(info.value)
