"""Virtual cameras in the PushT env (PushTEnvCfg.cameras), kit-less on Newton (MJWarp, CPU): a static camera at the
stand-in's first camera and a wrist camera on the Franka hand, both rendering the block's Gaussians with
GaussianRendererCfg. The static image must equal a direct render_clouds call of the same block pose, the wrist
image must follow the arm, and each env must see its own block. One env (2 envs, 64x48 images) for the module."""

import numpy as np
import pytest
import torch

pytest.importorskip("isaaclab", reason="Isaac Lab 3.0 is not installed (kit-less: pip install --no-deps isaaclab==3.0.0)")

pytestmark = pytest.mark.kitless

from real_is_sim.render.clouds import render_clouds  # noqa: E402
from real_is_sim.standin.cameras import ring_cameras  # noqa: E402
from real_is_sim.transforms import quat_rotate  # noqa: E402
from real_is_sim.twin.tblock import block_geometry  # noqa: E402
from real_is_sim_tasks.pusht.scripted import ScriptedPusher  # noqa: E402

NUM_ENVS = 2
WIDTH, HEIGHT = 64, 48


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from isaaclab.sim import SimulationContext

    from real_is_sim.isaaclab.tasks.pusht_env import PushTEnv
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import PushTEnvCfg

    cfg = PushTEnvCfg(asset_dir=str(tmp_path_factory.mktemp("usd")))
    # set after construction, as Isaac Lab's command-line overrides do: the env must still pick them up
    cfg.cameras = ("static", "wrist")
    cfg.camera_width, cfg.camera_height = WIDTH, HEIGHT
    cfg.scene.num_envs = NUM_ENVS
    cfg.seed = 0  # reset noise: each env's block at its own pose
    environment = PushTEnv(cfg)
    yield environment
    environment.close()
    SimulationContext.clear_instance()


def _hold(env) -> torch.Tensor:
    return torch.as_tensor(env.task.robot.q_start, dtype=torch.float32).repeat(NUM_ENVS, 1)


def _direct_rgb(env, pose: np.ndarray) -> np.ndarray:
    """render_clouds of the block's cloud at ``pose`` (env frame) through the stand-in's first camera, uint8."""
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import block_cloud_factory

    camera = ring_cameras(block_geometry(env.task).start_pose[:3], width=WIDTH, height=HEIGHT)[0]
    with torch.no_grad():
        rgb, _, _ = render_clouds([block_cloud_factory(env.task)()], [torch.as_tensor(pose[None], dtype=torch.float32)],
                                  torch.as_tensor(camera.viewmat_opencv()[None], dtype=torch.float32),
                                  torch.as_tensor(camera.K[None], dtype=torch.float32), WIDTH, HEIGHT,
                                  backgrounds=torch.zeros(1, 3), backend="cpu")
    return (rgb[0].clamp(0, 1) * 255).round().to(torch.uint8).numpy()


def test_images_are_extra_observations(env):
    obs, _ = env.reset()
    assert set(obs) == {"policy", "static_rgb", "wrist_rgb"}
    assert obs["policy"].shape == (NUM_ENVS, 14)  # the policy vector is unchanged
    for key in ("static_rgb", "wrist_rgb"):
        assert obs[key].shape == (NUM_ENVS, HEIGHT, WIDTH, 3) and obs[key].dtype == torch.uint8
        assert env.single_observation_space[key].shape == (HEIGHT, WIDTH, 3)


def test_static_camera_sees_each_envs_block_as_a_direct_render(env):
    env.reset()
    obs, *_ = env.step(_hold(env))
    poses = env.block_pose().double().numpy()
    # reset noise put the blocks at different poses, so the envs' images must differ
    assert np.linalg.norm(poses[0, :2] - poses[1, :2]) > 0.005
    images = obs["static_rgb"].numpy()
    for i in range(NUM_ENVS):
        direct = _direct_rgb(env, poses[i])
        block = direct.max(axis=-1) > 0
        assert block.mean() > 0.005, "the block must be in view for the comparison to mean anything"
        difference = np.abs(images[i].astype(int) - direct.astype(int))
        assert difference.max() <= 1 and (difference > 0).mean() < 1e-3, (i, difference.max(), (difference > 0).mean())
        assert np.all(images[i][~block] == 0)  # background: the renderer's default black
    changed = np.abs(images[0].astype(int) - images[1].astype(int)).max(axis=-1) > 10
    assert changed.mean() > 0.002


def test_wrist_camera_follows_the_arm(env):
    obs, _ = env.reset()
    before = obs["wrist_rgb"].numpy()
    # Drive the pusher's tip 15 cm above the block's centre of spheres (IK of the core twin's kinematics).
    pusher = ScriptedPusher(env.task)
    start = block_geometry(env.task).start_pose
    above = start[:3] + quat_rotate(start[3:7], block_geometry(env.task).centers.mean(axis=0)) + np.array([0.0, 0.0, 0.15])
    q_above = pusher.kinematics.solve(pusher.to_base(above), pusher.rotation, pusher.q_start)
    targets = torch.as_tensor(q_above, dtype=torch.float32).repeat(NUM_ENVS, 1)
    for _ in range(60):  # 1 s: the PD drives settle a large move in 0.5 s
        obs, *_ = env.step(targets)
    q = env.robot.data.joint_pos.torch[:, env.arm_joint_ids]
    assert (q - targets).abs().max() < 0.05, "the arm did not reach the pose above the block"
    after = obs["wrist_rgb"].numpy()
    for i in range(NUM_ENVS):
        seen = after[i].max(axis=-1) > 0
        assert seen.mean() > 0.05, f"env {i}: the block is not in the wrist view above it"
        changed = np.abs(after[i].astype(int) - before[i].astype(int)).max(axis=-1) > 10
        assert changed.mean() > 0.05, f"env {i}: the wrist image did not follow the arm"
    # same arm pose, blocks at different poses: each env's wrist camera sees its own block
    assert (np.abs(after[0].astype(int) - after[1].astype(int)).max(axis=-1) > 10).mean() > 0.01


def test_bad_camera_config_gives_one_clear_error(tmp_path):
    from real_is_sim.errors import ConfigError
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import PushTEnvCfg

    bad = {
        "cameras must be distinct names": dict(cameras=("static", "top")),
        "cameras must be": dict(cameras="static"),
        "camera_width and camera_height": dict(cameras=("wrist",), camera_height=0),
        "static_camera_pose": dict(cameras=("static",), static_camera_pose=np.eye(3).tolist()),
    }
    for words, fields in bad.items():
        with pytest.raises(ConfigError, match=words):
            PushTEnvCfg(asset_dir=str(tmp_path), **fields)
    cfg = PushTEnvCfg(asset_dir=str(tmp_path))
    assert cfg.scene.static_camera is None and cfg.scene.wrist_camera is None  # off by default
