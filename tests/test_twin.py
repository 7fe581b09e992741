"""The PushT twin: resting, pushing, independent worlds, determinism, wrenches, clear errors."""

import numpy as np
import pytest

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim.twin.twin import contact_capacity
from real_is_sim.transforms import quat_rotate
from real_is_sim.twin.tblock import table_plane
from real_is_sim_tasks.pusht import REAL_YAML, load_pusht_cfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher

PUSH_Z = 0.035  # pusher centre height: the capsule's bottom just above the z = 0 table


def _push_plan(task, block_xy, start_dy=-0.23, end_dy=-0.12, speed=0.1, dt=1 / 60):
    """Arm start configuration below the stem and the joint path pushing the block towards +y."""
    pusher = ScriptedPusher(task)
    start = np.array([block_xy[0], block_xy[1] + start_dy, PUSH_Z])
    q0 = pusher.kinematics.solve(pusher.to_base(start), pusher.rotation, pusher.q_start)
    path = pusher.joint_path(np.array([start, [block_xy[0], block_xy[1] + end_dy, PUSH_Z]]), speed, dt, q0)
    return q0, path


def test_block_at_rest_stays_on_table():
    twin = Twin(load_pusht_cfg(), num_worlds=1)
    z0 = twin.object_poses()[0, 0, 2]
    for _ in range(120):  # 2 s
        twin.step()
    pose = twin.object_poses()[0, 0]
    assert abs(pose[2] - z0) < 1e-3
    assert np.linalg.norm(pose[:2] - twin.geometry.start_pose[:2]) < 1e-3


def test_real_block_rests_on_real_table(shared_data):
    twin = Twin(load_pusht_cfg(REAL_YAML), num_worlds=1)
    assert len(twin.geometry.centers) == 466 and twin.geometry.radius == pytest.approx(0.006, abs=1e-6)
    plane = table_plane(twin.task.table)

    def clearance():  # lowest sphere's gap to the (tilted) table; the scanned pose is not exactly flat on it
        pose = twin.object_poses()[0, 0]
        world = pose[:3] + quat_rotate(pose[3:7], twin.geometry.centers)
        return np.min(world @ plane[:3] + plane[3]) - twin.geometry.radius

    assert abs(clearance()) < 1e-6
    for _ in range(120):
        twin.step()
    assert abs(clearance()) < 1e-3


def test_push_moves_block_and_worlds_are_independent():
    task = load_pusht_cfg()
    twin = Twin(task, num_worlds=2)
    poses = np.repeat(twin.geometry.start_pose[None, None], 2, axis=0)
    poses[1, 0, 0] += 0.05  # world 1 starts elsewhere and is not pushed
    q_push, path = _push_plan(task, poses[0, 0, :2])
    twin.reset(object_poses=poses, robot_q=np.stack([q_push, task.robot.q_start]))
    before = twin.object_poses()
    for q in path:
        twin.step(np.stack([q, task.robot.q_start]))
    after = twin.object_poses()
    moved = after[0, 0, :3] - before[0, 0, :3]
    assert moved[1] > 0.03 and abs(moved[0]) < 0.5 * moved[1]  # along the push (+y)
    assert np.linalg.norm(after[1, 0, :3] - before[1, 0, :3]) < 1e-3  # the other world's block stays
    assert abs(after[1, 0, 0] - after[0, 0, 0]) > 0.04  # different start poses stay different


def test_reset_of_one_world_leaves_the_other():
    twin = Twin(load_pusht_cfg(), num_worlds=2)
    before = twin.object_poses()
    moved = before[1:].copy()
    moved[0, 0, 1] += 0.1
    twin.reset(world_ids=[1], object_poses=moved)
    after = twin.object_poses()
    np.testing.assert_allclose(after[0], before[0], atol=1e-7)
    np.testing.assert_allclose(after[1, 0, :3], moved[0, 0, :3], atol=1e-6)


def test_same_inputs_give_identical_trajectories():
    task = load_pusht_cfg()
    q_push, path = _push_plan(task, np.array([0.45, 0.0]), end_dy=-0.15)
    runs = []
    for _ in range(2):
        twin = Twin(task, num_worlds=1)
        twin.reset(robot_q=q_push[None])
        trajectory = []
        for q in path:
            twin.step(q[None])
            trajectory.append(twin.object_poses())
        runs.append(np.array(trajectory))
    assert np.array_equal(runs[0], runs[1])
    assert np.abs(runs[0][-1] - runs[0][0]).max() > 1e-3  # the push really happened


def test_tight_contact_buffer_changes_nothing_in_a_push():
    # The bound from the shape pairs (contact_capacity) against Newton's 5-per-pair estimate: the same push must
    # give the same trajectory, and the contacts in use must stay within the bound while the pusher is in contact.
    task = load_pusht_cfg()
    q_push, path = _push_plan(task, np.array([0.45, 0.0]), end_dy=-0.15)
    runs, most_contacts = [], 0
    for rigid_contact_max in (None, 50_000):
        twin = Twin(task, num_worlds=2, cfg=TwinCfg(rigid_contact_max=rigid_contact_max))
        twin.reset(robot_q=np.repeat(q_push[None], 2, axis=0))
        trajectory = []
        for q in path:
            twin.step(np.repeat(q[None], 2, axis=0))
            trajectory.append(twin.object_poses())
            if rigid_contact_max is None:
                most_contacts = max(most_contacts, int(twin.contacts.rigid_contact_count.numpy()[0]))
        runs.append(np.array(trajectory))
    tight = Twin(task, num_worlds=2)
    assert tight.collision.rigid_contact_max == contact_capacity(tight.model) < 50_000
    assert most_contacts < tight.collision.rigid_contact_max
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-6)
    assert np.abs(runs[0][-1] - runs[0][0]).max() > 1e-3  # the push really happened


def test_undriven_robot_does_not_sag():
    task = load_pusht_cfg()
    twin = Twin(task, num_worlds=1)
    tool0 = twin.tool_position().copy()
    for _ in range(60):
        twin.step()  # no targets: hold
    np.testing.assert_allclose(twin.robot_q()[0], task.robot.q_start, atol=1e-4)
    np.testing.assert_allclose(twin.tool_position(), tool0, atol=1e-4)


@pytest.mark.parametrize("solver", ["xpbd", "mujoco"])
def test_object_wrench_pushes_block_and_persists(solver):
    # mujoco: the arm drive once rewrote the block's free joint every substep and SolverMuJoCo never moved it
    twin = Twin(load_pusht_cfg(), num_worlds=2, cfg=TwinCfg(solver=solver))
    start = twin.object_poses()
    twin.object_wrench[0, 0, :3] = [3.0, 0.0, 0.0]  # above friction (0.5 * 0.2 kg * g = 1 N)
    for _ in range(30):
        twin.step()
    moved = twin.object_poses() - start
    assert moved[0, 0, 0] > 0.01 and abs(moved[0, 0, 1]) < 0.3 * moved[0, 0, 0]
    assert np.abs(moved[1, 0, :3]).max() < 1e-3  # world 1 had no wrench
    assert twin.object_mass()[0] == pytest.approx(0.2, rel=1e-6)


def test_linear_damping_slows_a_pushed_block():
    moved = []
    for damping in (0.0, 20.0):
        twin = Twin(load_pusht_cfg(overrides=[f"physical.linear_damping={damping}"]), num_worlds=1)
        start = twin.object_poses()[0, 0, 0]
        twin.object_wrench[0, 0, 0] = 3.0
        for _ in range(30):
            twin.step()
        moved.append(twin.object_poses()[0, 0, 0] - start)
    assert 0.0 < moved[1] < 0.7 * moved[0]


def test_physical_params_change_the_model():
    task = load_pusht_cfg(overrides=["physical.mass_scale=2.0", "physical.com_offset=[0.01,0.0,0.0]", "physical.block_scale=1.1"])
    twin = Twin(task, num_worlds=1)
    base = Twin(load_pusht_cfg(), num_worlds=1)
    assert twin.object_mass()[0] == pytest.approx(2 * base.object_mass()[0], rel=1e-6)
    np.testing.assert_allclose(twin.object_body_com()[0], 1.1 * base.object_body_com()[0] + [0.01, 0, 0], atol=1e-6)


def test_bad_inputs_raise_one_clear_error(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("block: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_pusht_cfg(bad_yaml)
    with pytest.raises(ConfigError, match="unknown solver"):
        TwinCfg(solver="bullet")
    with pytest.raises(ConfigError, match="sphere_radius must be positive"):
        load_pusht_cfg(overrides=["block.sphere_radius=-0.01"])
    missing = load_pusht_cfg(overrides=["block.source=file", f"block.object_file={tmp_path / 'none.json'}"])
    with pytest.raises(DataError, match="object file not found"):
        Twin(missing)
    twin = Twin(load_pusht_cfg(), num_worlds=1)
    with pytest.raises(DataError, match="robot_q_target must have shape"):
        twin.step(np.zeros((2, 7)))
    with pytest.raises(DataError, match="non-finite"):
        twin.reset(object_poses=np.full((1, 1, 7), np.nan))


def test_recorded_step_replays_the_plain_step():
    # The step recorded once and replayed (graph_capture) must give the same numbers as launching it: across new
    # arm targets, a wrench, a reset of one world and collisions every second substep.
    task = load_pusht_cfg()
    q_push, path = _push_plan(task, np.array([0.45, 0.0]), end_dy=-0.15)
    runs = []
    for capture in (False, True):
        twin = Twin(task, num_worlds=2, cfg=TwinCfg(graph_capture=capture, collide_every=2))
        twin.reset(robot_q=np.repeat(q_push[None], 2, axis=0))
        trajectory = []
        for k, q in enumerate(path):
            twin.object_wrench[1, 0, 0] = 1.5 if k < 20 else 0.0
            if k == 30:
                twin.reset(world_ids=[1])
            twin.step(np.repeat(q[None], 2, axis=0))
            trajectory.append(np.concatenate([twin.object_poses().ravel(), twin.robot_q().ravel()]))
        runs.append(np.array(trajectory))
        assert (twin._graph is not None) == capture
    np.testing.assert_array_equal(runs[0], runs[1])
    assert np.abs(runs[0][-1] - runs[0][0]).max() > 1e-3  # the push really happened


def test_reachable_spheres():
    from real_is_sim.twin.tblock import ball_reachable, plane_reachable

    grid = np.stack(np.meshgrid(*[np.arange(3) * 0.011] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    ball = ball_reachable(grid, 0.006, 0.01, 0.001)
    assert not ball[13] and ball.sum() == 26  # the centre of a 3 x 3 x 3 block is shielded by its neighbours
    plane = plane_reachable(grid, 0.001)
    assert plane.sum() == 26  # every face sphere ties with its face's outermost ones; the centre never leads
    flat = np.concatenate([grid, [[0.011, 0.011, -0.005]]])  # one sphere sticking out below the bottom face
    assert plane_reachable(flat, 0.001)[-1] and plane_reachable(flat, 0.001)[:9].all()  # the face still counts


def test_pruned_spheres_change_nothing_in_a_push(shared_data):
    # Only the spheres the table or the pusher can reach collide (contact_spheres="reachable"): the scanned block's
    # push must match the one with every sphere colliding, with fewer shape pairs.
    task = load_pusht_cfg(REAL_YAML)
    twins = {mode: Twin(task, num_worlds=1, cfg=TwinCfg(contact_spheres=mode)) for mode in ("all", "reachable")}
    assert len(twins["reachable"].model.shape_contact_pairs) < 0.6 * len(twins["all"].model.shape_contact_pairs)
    start = twins["all"].object_poses()[0, 0]
    center = start[:2] + quat_rotate(start[3:7], twins["all"].geometry.centers.mean(axis=0))[:2]
    q_push, path = _push_plan(task, center, start_dy=-0.16, end_dy=0.0)
    finals = []
    for twin in twins.values():
        twin.reset(robot_q=q_push[None])
        for q in path:
            twin.step(q[None])
        finals.append(twin.object_poses()[0, 0])
    assert np.linalg.norm(finals[0][:2] - start[:2]) > 0.02  # the block was pushed
    np.testing.assert_allclose(finals[1], finals[0], atol=2e-4)
