"""PushT as an Isaac Lab task, kit-less on Newton (MJWarp, CPU): env, gym registration, visual-force sensor and
actuator. One env (4 envs, visual forces on) is created for the whole module: the first Warp compile costs ~50 s,
cached runs ~5 s."""

import contextlib
import importlib.metadata
import io
import socket
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("isaaclab", reason="Isaac Lab 3.0 is not installed (kit-less: pip install --no-deps isaaclab==3.0.0)")

pytestmark = pytest.mark.kitless

from real_is_sim.correction.background import table_background  # noqa: E402
from real_is_sim.correction.sensor import SensorCamera  # noqa: E402
from real_is_sim.render.clouds import render_clouds  # noqa: E402
from real_is_sim.standin.cameras import ring_cameras  # noqa: E402

NUM_ENVS = 4
TASK_IDS = ("RealIsSim-PushT-Franka-v0", "RealIsSim-PushT-Franka-Play-v0")
# Each env's 'real' block is this far from where the twin starts it (x, y [m]): the visual force must close it.
OFFSETS = np.array([[0.012, 0.0], [0.0, -0.012], [-0.008, 0.008], [0.0, 0.0]])


def _cameras(target) -> list[SensorCamera]:
    infos = ring_cameras(target, 3, distance=0.6, width=160, height=90)
    return [SensorCamera.from_info(c, table_background(c.K, c.viewmat_opencv(), c.width, c.height)) for c in infos]


def _render(sensor, pose: np.ndarray) -> list[np.ndarray]:
    """What the cameras see with the block at ``pose`` (env frame): the core renderer, uint8 like a camera."""
    cams = sensor.cfg.cameras
    viewmats = torch.as_tensor(np.stack([c.viewmat for c in cams]), dtype=torch.float32)
    Ks = torch.as_tensor(np.stack([c.K for c in cams]), dtype=torch.float32)
    backgrounds = torch.as_tensor(np.stack([c.background for c in cams]), dtype=torch.float32)
    with torch.no_grad():
        images, _, _ = render_clouds([sensor.cloud], [torch.as_tensor(pose[None], dtype=torch.float32)], viewmats, Ks,
                                     cams[0].width, cams[0].height, backgrounds=backgrounds)
    return [(im.clamp(0, 1).numpy() * 255).round().astype(np.uint8) for im in images]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    import gymnasium as gym
    from isaaclab.sim import SimulationContext

    import real_is_sim.isaaclab.tasks  # noqa: F401  (registers the gym ids)
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import PushTEnvCfg, enable_visual_forces
    from real_is_sim.twin.tblock import block_geometry

    cfg = PushTEnvCfg(asset_dir=str(tmp_path_factory.mktemp("usd")))  # assets generated from scratch
    cfg.scene.num_envs = NUM_ENVS
    cfg.seed = 0
    start = block_geometry(cfg.load_task()).start_pose
    enable_visual_forces(cfg, _cameras(start[:3]))
    connections = []
    with pytest.MonkeyPatch.context() as patch:  # record any attempt to reach the network while loading
        patch.setattr(socket.socket, "connect", lambda self, address: connections.append(address))
        environment = gym.make(TASK_IDS[0], cfg=cfg).unwrapped
    environment.connections = connections
    yield environment
    environment.close()
    SimulationContext.clear_instance()


def test_env_resets_and_steps_with_finite_observations(env):
    obs, _ = env.reset()
    width = 7 + 7  # block pose, arm joints
    assert obs["policy"].shape == (NUM_ENVS, width)
    assert torch.isfinite(obs["policy"]).all()
    generator = torch.Generator().manual_seed(0)
    q_start = torch.as_tensor(env.task.robot.q_start, dtype=torch.float32)
    for _ in range(120):
        actions = q_start + 0.1 * torch.randn(NUM_ENVS, 7, generator=generator)
        obs, reward, terminated, truncated, _ = env.step(actions)
        assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
    assert obs["policy"].shape == (NUM_ENVS, width)
    # env frame: every env's block is near the task's start, not at its env origin offset
    assert (env.block_pose()[:, 0] - 0.45).abs().max() < 0.1


def test_success_and_goal_come_from_the_task_config(env):
    from real_is_sim_tasks.pusht import is_success

    goal = np.asarray(env.task.goal.pose)
    assert np.allclose(goal, [0.5, 0.1, 0.0, 0.0, 0.0, 0.3826834, 0.9238795])  # tasks/pusht/pusht.yaml
    pose = torch.as_tensor(goal, dtype=torch.float32).repeat(NUM_ENVS, 1)
    pose[:, 2] = env.block_pose()[:, 2]
    pose[:, :3] += env.scene.env_origins
    env.block.write_root_pose_to_sim_index(root_pose=pose)
    env.sim.forward()
    assert is_success(env.block_pose().double().numpy(), env.task.goal).all()
    terminated, _ = env._get_dones()
    assert terminated.all()
    env.reset()
    terminated, _ = env._get_dones()
    assert not terminated.any()


def test_gym_ids_are_registered_and_listed_by_isaac_lab():
    import gymnasium as gym
    from isaaclab.cli.commands.list_envs import command_list_envs

    groups = {ep.value for ep in importlib.metadata.entry_points(group="isaaclab.tasks")}
    assert "real_is_sim.isaaclab.tasks" in groups  # pyproject entry point, installed
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        command_list_envs(["--keyword", "RealIsSim"])
    for task_id in TASK_IDS:
        assert task_id in gym.registry and task_id in out.getvalue()
        assert gym.registry[task_id].kwargs["env_cfg_entry_point"].startswith("real_is_sim.isaaclab.tasks.")


def test_visual_force_pulls_each_block_toward_its_observed_pose(env):
    env.reset()
    sensor = env.visual_force
    start = env.block_pose().double().numpy()
    targets = start.copy()
    targets[:, :2] += OFFSETS
    frames = [_render(sensor, targets[i]) for i in range(NUM_ENVS)]
    q_hold = torch.as_tensor(env.task.robot.q_start, dtype=torch.float32).repeat(NUM_ENVS, 1)

    sensor.set_frames(frames)
    first = sensor.data
    assert first.wrench.shape == (NUM_ENVS, 1, 6)
    assert torch.isfinite(first.loss_before).all() and (first.loss_after < first.loss_before).all()
    assert torch.isfinite(first.residual).all() and ((first.confidence > 0) & (first.confidence <= 1)).all()
    assert not first.lost.any()
    force = first.wrench[:, 0, :2].double().numpy()
    for i in range(3):  # the force points from the twin's pose toward the observed one
        direction = OFFSETS[i] / np.linalg.norm(OFFSETS[i])
        assert force[i] @ direction > 0.7 * np.linalg.norm(force[i]), (i, force[i])
    assert np.linalg.norm(force[3]) < 0.2 * np.linalg.norm(force[:3], axis=1).min()  # already where it is seen

    for _ in range(60):  # 1 s: the same frames every tick (a block standing still where the cameras see it)
        sensor.set_frames(frames)
        env.step(q_hold)
    error_before = np.linalg.norm(OFFSETS, axis=1)
    error_after = np.linalg.norm(env.block_pose().double().numpy()[:, :2] - targets[:, :2], axis=1)
    assert (error_after[:3] < 0.2 * error_before[:3]).all(), (error_before, error_after)
    assert error_after[3] < 0.003, error_after

    env.step(q_hold)  # no new frames: no evidence, no force
    assert torch.count_nonzero(sensor.data.wrench) == 0 and torch.isnan(sensor.data.loss_before).all()


def test_actuator_pushes_object_bodies_only(env):
    from real_is_sim.errors import ConfigError
    from real_is_sim.isaaclab.actuator import VisualForceActuator, VisualForceActuatorCfg

    for not_an_object in (env.robot, env.visual_force, env.scene["table"]):
        if not_an_object is not None:
            with pytest.raises(ConfigError, match="object bodies only"):
                VisualForceActuator(VisualForceActuatorCfg(), not_an_object)
    env.reset()
    actuator = VisualForceActuator(VisualForceActuatorCfg(linear_damping=0.0, angular_damping=0.0), env.block)
    wrench = torch.zeros(NUM_ENVS, 1, 6)
    wrench[:, 0, 0] = 2.0  # N along +x: more than the block's friction on the table (0.5 * 0.2 kg * g = 0.98 N)
    actuator.apply(wrench)
    assert env.block.permanent_wrench_composer.active
    assert not env.robot.permanent_wrench_composer.active
    assert not env.robot.instantaneous_wrench_composer.active
    start = env.block_pose()
    for _ in range(12):  # physics steps only (0.05 s): Isaac Lab writes the composer's wrench before each
        env.scene.write_data_to_sim()
        env.sim.step()
        env.scene.update(env.physics_dt)
    moved = env.block_pose() - start
    assert (moved[:, 0] > 0.003).all() and (moved[:, 1].abs() < 0.3 * moved[:, 0]).all(), moved
    actuator.clear()
    assert not env.block.permanent_wrench_composer.active
    env.reset()


def test_assets_are_local_and_nothing_reached_the_network(env):
    from pxr import UsdUtils

    assert env.connections == []
    assert not any(name == "omni.client" or name.startswith("omni.client.") for name in sys.modules)
    for entity in ("table", "block", "robot"):
        if getattr(env.cfg.scene, entity) is None:
            continue
        path = getattr(env.cfg.scene, entity).spawn.usd_path
        layers, assets, unresolved = UsdUtils.ComputeAllDependencies(path)
        assert layers and not unresolved, (path, unresolved)


def test_bad_env_config_gives_one_clear_error():
    from real_is_sim.errors import ConfigError
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import PushTEnvCfg

    with pytest.raises(ConfigError, match="reset_yaw_noise"):
        PushTEnvCfg(reset_yaw_noise=-1.0)
    with pytest.raises(ConfigError, match="block.mass"):
        PushTEnvCfg(task_overrides=["block.mass=-1"])
