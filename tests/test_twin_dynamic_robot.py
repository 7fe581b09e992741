"""The dynamic twin robot (``TwinCfg(robot="dynamic", solver="mujoco")``): links with mass and inertia, gravity
compensated per body, stiff joint drives (docs/dynamic_robot.md)."""

import numpy as np
import pytest

from real_is_sim.config import load_config
from real_is_sim.errors import ConfigError
from real_is_sim.loop import LoopCfg, OnlineLoop
from real_is_sim.robot.follower import Follower, Health, HealthStatus, JointState
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim_tasks.pusht import load_pusht_cfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher

pytest.importorskip("mujoco_warp")

DYNAMIC = TwinCfg(solver="mujoco", robot="dynamic")
# Stated bounds (measured on the scripted push path: q vs q' max 0.020 rad, q vs the reference max 0.006 rad).
TRACKING_VS_TARGET_RAD = 0.03
TRACKING_VS_REFERENCE_RAD = 0.01
AWAY = np.array([0.0, 1.5, 0.0])  # the block out of the pusher's way


class SpyFollower(Follower):
    """Records what the loop sends."""

    def __init__(self):
        self.sent = []

    def start(self):
        pass

    def stop(self):
        pass

    def send(self, q, stamp):
        self.sent.append(np.array(q, dtype=np.float64))

    def read_state(self):
        return JointState(self.sent[-1], np.zeros(7), 0.0)

    def health(self):
        return Health(HealthStatus.OK)

    def recover(self):
        pass

    def now(self):
        return 0.0

    @property
    def realtime(self):
        return False


def _block_away(twin):
    pose = twin.object_poses()[0, 0].copy()
    pose[:3] += AWAY
    twin.reset(object_poses=pose[None, None])


@pytest.fixture(scope="module")
def task():
    return load_pusht_cfg()


def test_config_choice_and_errors():
    cfg = load_config(TwinCfg, None, ["robot=dynamic", "solver=mujoco"])
    assert (cfg.robot, cfg.solver) == ("dynamic", "mujoco")
    assert TwinCfg().robot == "kinematic"
    with pytest.raises(ConfigError, match="needs solver='mujoco'"):
        TwinCfg(robot="dynamic")
    with pytest.raises(ConfigError, match="unknown robot"):
        TwinCfg(robot="floppy", solver="mujoco")
    with pytest.raises(ConfigError, match="twin.solver=mujoco"):
        load_config(TwinCfg, None, ["robot=dynamic"])


def test_free_motion_tracking_within_bound(task):
    twin = Twin(task, 1, DYNAMIC)
    _block_away(twin)
    pusher = ScriptedPusher(task)
    start = pusher.start_tool_position()
    path = pusher.joint_path(np.array([start, start + [0.1, 0.0, -0.05]]), 0.1, twin.control_dt)
    vs_target, vs_reference = [], []
    for target in path:
        twin.step(target[None])
        q = twin.robot_q()[0]
        vs_target.append(np.abs(q - target).max())
        vs_reference.append(np.abs(q - twin.robot_q_reference()[0]).max())
    for _ in range(30):
        twin.step()
    assert max(vs_target) < TRACKING_VS_TARGET_RAD
    assert max(vs_reference) < TRACKING_VS_REFERENCE_RAD
    np.testing.assert_allclose(twin.robot_q()[0], path[-1], atol=1e-3)  # settles on q'
    assert np.linalg.norm(twin.tool_position()[0] - pusher.tool_position(path[-1])) < 1e-3


def test_gravity_does_not_pull_the_arm_down(task):
    twin = Twin(task, 1, DYNAMIC)
    assert np.all(twin.model.mujoco.gravcomp.numpy()[twin._robot_bodies.ravel()] == 1.0)
    assert twin.model.mujoco.gravcomp.numpy()[twin._object_bodies.ravel()].max() == 0.0  # the block keeps gravity
    tool0 = twin.tool_position().copy()
    for _ in range(60):  # 1 s, no targets: hold
        twin.step()
    np.testing.assert_allclose(twin.robot_q()[0], task.robot.q_start, atol=1e-4)
    np.testing.assert_allclose(twin.tool_position(), tool0, atol=1e-4)
    # the links do have mass (they are dynamic, not kinematic)
    assert twin.model.body_mass.numpy()[twin._robot_bodies.ravel()].sum() > 10.0


def test_blocked_pusher_gives_q_not_target_and_the_follower_gets_q(task):
    twin = Twin(task, 1, DYNAMIC)
    _block_away(twin)
    pusher = ScriptedPusher(task)
    above = pusher.start_tool_position()
    tip = task.robot.pusher_half_length + task.robot.pusher_radius
    into_table = np.array([above[0], above[1], tip - 0.03])  # tip 3 cm below the z = 0 table
    path = pusher.joint_path(np.array([above, into_table]), 0.1, twin.control_dt)
    path = np.concatenate([path, np.repeat(path[-1:], 20, axis=0)])
    follower = SpyFollower()
    loop = OnlineLoop(LoopCfg(visual_forces=False, follow_real=True), twin, follower=follower)
    for target in path:
        loop.tick(target[None])
    q = twin.robot_q()[0]
    assert np.abs(q - path[-1]).max() > 0.02  # q != q': the table stopped the pusher
    assert twin.tool_position()[0, 2] - tip > -0.003  # the tip rests on the table, not 3 cm in it
    np.testing.assert_array_equal(follower.sent[-1], q)  # the follower was given the simulated q
    assert np.abs(follower.sent[-1] - path[-1]).max() > 0.02
    # robot_q() is the simulated joint state (MuJoCo's joint_q), not the command
    np.testing.assert_allclose(q, twin.state.joint_q.numpy()[twin._arm_q[0]], atol=1e-5)


@pytest.mark.parametrize("cfg", [DYNAMIC, TwinCfg()], ids=["dynamic", "kinematic"])
def test_wrench_never_acts_on_the_robot(task, cfg):
    twin = Twin(task, 2, cfg)
    start = twin.object_poses()
    q0 = twin.robot_q().copy()
    twin.object_wrench[:, 0, :3] = [3.0, 0.0, 0.0]
    twin.object_wrench[:, 0, 3:] = [0.0, 0.0, 0.05]
    for _ in range(20):
        twin.step()
        assert np.abs(twin.state.body_f.numpy()[twin._robot_bodies.ravel()]).max() == 0.0
    assert np.all(twin.object_poses()[:, 0, 0] - start[:, 0, 0] > 0.005)  # the block was pushed
    np.testing.assert_allclose(twin.robot_q(), q0, atol=1e-4)  # the arm was not
