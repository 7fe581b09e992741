"""The Gaussian renderer as an Isaac Lab renderer, kit-less on Newton (MJWarp, CPU): a scene with the T-block as a
RigidObject and a camera per env whose renderer_cfg is GaussianRendererCfg. The camera's image must equal a direct
render_clouds call for the same block pose and camera (built here from our own conventions: OpenGL X_WC ->
OpenCV viewmat, K), must follow the block when it moves, and a camera mounted on the block (as the wrist camera on
its link) must ride with it. One scene for the module (first Warp compile ~50 s). ``python
tests/test_isaaclab_renderer.py [asset dir]`` prints the agreement and the time per frame (docs/isaaclab_renderer.md)."""

import contextlib
import functools
import sys
import time

import numpy as np
import pytest
import torch

pytest.importorskip("isaaclab", reason="Isaac Lab 3.0 is not installed (kit-less: pip install --no-deps isaaclab==3.0.0)")

pytestmark = pytest.mark.kitless

from real_is_sim.gaussians.spheres import cloud_from_spheres  # noqa: E402
from real_is_sim.render.clouds import render_clouds  # noqa: E402
from real_is_sim.transforms import look_at_X_WC, matrix_to_quat, quat_from_yaw, quat_multiply, viewmat_from_opengl  # noqa: E402
from real_is_sim.twin.tblock import block_geometry  # noqa: E402
from real_is_sim_tasks.pusht.config import DEFAULT_YAML, load_pusht_cfg  # noqa: E402

NUM_ENVS = 2
WIDTH, HEIGHT = 128, 96
FOCAL = 110.0  # px; Isaac Lab's pinhole camera has square pixels and the principal point at the image centre
K = np.array([[FOCAL, 0.0, WIDTH / 2], [0.0, FOCAL, HEIGHT / 2], [0.0, 0.0, 1.0]])
BACKGROUND = (0.2, 0.3, 0.4)
EYE_OFFSET = np.array([0.18, -0.22, 0.3])  # camera position relative to the block's start, env frame [m]
MOUNTED_EYE = np.array([0.15, -0.2, 0.25])  # a camera riding on the block (as a wrist camera on its link), block frame


def _uint8(image: torch.Tensor) -> np.ndarray:
    return (image.clamp(0, 1) * 255).round().to(torch.uint8).numpy()


@contextlib.contextmanager
def built_world(asset_dir):
    """``(sim, scene, cloud, X_WC)``: the kit-less scene, the block's cloud and the camera pose (env frame)."""
    from isaaclab.assets import RigidObjectCfg
    from isaaclab.scene import InteractiveScene, InteractiveSceneCfg
    from isaaclab.sensors import CameraCfg
    from isaaclab.sim import PinholeCameraCfg, SimulationCfg, SimulationContext, UsdFileCfg
    from isaaclab.sim.utils.stage import use_stage
    from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg

    from real_is_sim.isaaclab.assets import pusht_asset_paths
    from real_is_sim.isaaclab.renderer import GaussianBodyCfg, GaussianRendererCfg

    task = load_pusht_cfg(DEFAULT_YAML)
    geometry = block_geometry(task)
    start = geometry.start_pose
    _, block_usd = pusht_asset_paths(task, asset_dir)  # the PushT env's block asset
    cloud = functools.partial(cloud_from_spheres, geometry.centers, np.full(len(geometry.centers), geometry.radius))
    X_WC = look_at_X_WC(start[:3] + EYE_OFFSET, start[:3])  # OpenGL axes, env frame

    scene_cfg = InteractiveSceneCfg(num_envs=NUM_ENVS, env_spacing=2.0)
    scene_cfg.block = RigidObjectCfg(
        prim_path="{ENV_REGEX_NS}/TBlock",
        spawn=UsdFileCfg(usd_path=str(block_usd)),
        init_state=RigidObjectCfg.InitialStateCfg(pos=tuple(map(float, start[:3])), rot=tuple(map(float, start[3:7]))),
    )
    scene_cfg.camera = CameraCfg(
        prim_path="{ENV_REGEX_NS}/Camera",
        width=WIDTH,
        height=HEIGHT,
        data_types=["rgba"],
        spawn=PinholeCameraCfg.from_intrinsic_matrix(K.flatten().tolist(), WIDTH, HEIGHT),
        offset=CameraCfg.OffsetCfg(pos=tuple(X_WC[:3, 3]), rot=tuple(matrix_to_quat(X_WC[:3, :3])), convention="opengl"),
        renderer_cfg=GaussianRendererCfg(
            bodies=[GaussianBodyCfg(body_path="{ENV_REGEX_NS}/TBlock", cloud=cloud)], background_color=BACKGROUND, backend="cpu"
        ),
    )
    # A camera on a moving body needs update_latest_camera_pose, else its pose is read once at start.
    X_BC = look_at_X_WC(MOUNTED_EYE, np.zeros(3))
    scene_cfg.mounted_camera = scene_cfg.camera.replace(
        prim_path="{ENV_REGEX_NS}/TBlock/MountedCamera",
        update_latest_camera_pose=True,
        offset=CameraCfg.OffsetCfg(pos=tuple(X_BC[:3, 3]), rot=tuple(matrix_to_quat(X_BC[:3, :3])), convention="opengl"),
    )
    # No gravity and no table: the block stays exactly where a test writes it.
    sim = SimulationContext(SimulationCfg(device="cpu", dt=1.0 / 240.0, gravity=(0.0, 0.0, 0.0),
                                          physics=NewtonCfg(solver_cfg=MJWarpSolverCfg())))
    try:
        with use_stage(sim.stage):
            scene = InteractiveScene(scene_cfg)
            sim.reset()
        scene.update(dt=sim.get_physics_dt())
        yield sim, scene, cloud(), X_WC
    finally:
        SimulationContext.clear_instance()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with built_world(tmp_path_factory.mktemp("usd")) as built:
        yield built


def _set_block_poses(sim, scene, poses_env: np.ndarray) -> None:
    """Write each env's block pose (env frame, xyzw) and let the camera render the new state on its next read."""
    pose = torch.as_tensor(poses_env, dtype=torch.float32).clone()
    pose[:, :3] += scene.env_origins
    scene["block"].write_root_pose_to_sim_index(root_pose=pose)
    sim.forward()
    scene.update(dt=sim.get_physics_dt())


def _camera_images(scene, name: str = "camera") -> np.ndarray:
    return scene[name].data.output["rgba"].torch.clone().numpy()  # [envs, H, W, 4] uint8


def _direct_images(cloud, poses_env: np.ndarray, X_WC: np.ndarray) -> np.ndarray:
    """render_clouds with the block at each env's pose, seen through our own OpenGL -> OpenCV conversion and K."""
    viewmat = torch.as_tensor(viewmat_from_opengl(X_WC)[None], dtype=torch.float32)
    Ks = torch.as_tensor(K[None], dtype=torch.float32)
    images = []
    with torch.no_grad():
        for pose in poses_env:
            rgb, alpha, _ = render_clouds([cloud], [torch.as_tensor(pose[None], dtype=torch.float32)], viewmat, Ks, WIDTH,
                                          HEIGHT, backgrounds=torch.tensor([BACKGROUND]), backend="cpu")
            images.append(_uint8(torch.cat([rgb[0], alpha[0]], dim=-1)))
    return np.stack(images)


def _moved_poses(start: np.ndarray) -> np.ndarray:
    """A different pose per env: env 0 shifted 2 cm in x and turned 0.3 rad, env 1 shifted 1.5 cm in y."""
    poses = np.repeat(start[None], NUM_ENVS, axis=0)
    poses[0, 0] += 0.02
    poses[0, 3:7] = quat_multiply(quat_from_yaw(0.3), start[3:7])
    poses[1, 1] += 0.015
    return poses


def test_camera_image_matches_a_direct_render(world):
    sim, scene, cloud, X_WC = world
    start = block_geometry(load_pusht_cfg(DEFAULT_YAML)).start_pose
    for poses in (np.repeat(start[None], NUM_ENVS, axis=0), _moved_poses(start)):
        _set_block_poses(sim, scene, poses)
        camera, direct = _camera_images(scene), _direct_images(cloud, poses, X_WC)
        block = direct[..., 3] > 0
        assert block.mean() > 0.05, "the block must fill a good part of the view for the check to mean anything"
        difference = np.abs(camera.astype(int) - direct.astype(int))
        # float32 rounding (the camera renders in world coordinates, the direct call in env coordinates) can push
        # a colour across a uint8 rounding boundary, nothing more
        assert difference.max() <= 1
        assert (difference > 0).mean() < 1e-3
        assert np.all(camera[~block][:, :3] == np.round(np.array(BACKGROUND) * 255))


def test_camera_image_follows_the_block_and_a_mounted_camera_rides_with_it(world):
    sim, scene, _, _ = world
    start = block_geometry(load_pusht_cfg(DEFAULT_YAML)).start_pose
    _set_block_poses(sim, scene, np.repeat(start[None], NUM_ENVS, axis=0))
    before, mounted_before = _camera_images(scene), _camera_images(scene, "mounted_camera")
    # Same pose in each env's frame: each camera sees its own block, alike up to float32 rounding of the env origins.
    assert np.abs(before[0].astype(int) - before[1].astype(int)).max() <= 1
    moved = _moved_poses(start)
    _set_block_poses(sim, scene, moved)
    after = _camera_images(scene)
    for env in range(NUM_ENVS):
        changed = np.abs(after[env].astype(int) - before[env].astype(int)).max(axis=-1) > 10
        assert changed.mean() > 0.01, f"env {env}: the image did not follow the block"
    assert not np.array_equal(after[0], after[1])  # envs are rendered from their own poses
    # The mounted camera moved with the block: it sees the same image (its pose is read from the moved body).
    mounted_after = _camera_images(scene, "mounted_camera")
    assert (mounted_before[..., 3] > 0).mean() > 0.05
    assert np.abs(mounted_after.astype(int) - mounted_before.astype(int)).max() <= 1


def test_bad_config_raises_one_clear_error():
    from real_is_sim.errors import ConfigError
    from real_is_sim.isaaclab.renderer import GaussianBodyCfg, GaussianRenderer, GaussianRendererCfg, checked_clouds

    geometry = block_geometry(load_pusht_cfg(DEFAULT_YAML))
    spheres = functools.partial(cloud_from_spheres, geometry.centers, np.full(len(geometry.centers), geometry.radius))
    block = GaussianBodyCfg(body_path="{ENV_REGEX_NS}/TBlock", cloud=spheres)
    assert len(checked_clouds(GaussianRendererCfg(bodies=[block]))[0]) == len(geometry.centers)
    bad = {
        "backend": GaussianRendererCfg(bodies=[block], backend="cuda"),
        "background_color": GaussianRendererCfg(bodies=[block], background_color=(0.0, 2.0, 0.0)),
        "bodies is empty": GaussianRendererCfg(bodies=[]),
        "body_path": GaussianRendererCfg(bodies=[GaussianBodyCfg(body_path="/World/TBlock", cloud=spheres)]),
        "body 0": GaussianRendererCfg(bodies=[GaussianBodyCfg(body_path="{ENV_REGEX_NS}/TBlock",
                                                              cloud=lambda: spheres().with_body_id(-1))]),
    }
    for words, cfg in bad.items():
        with pytest.raises(ConfigError, match=words):
            checked_clouds(cfg)
    paths = ["/World/envs/env_0/TBlock", "/World/envs/env_0/TBlock2", "/World/envs/env_1/TBlock"]
    assert GaussianRenderer._body_index(paths, "{ENV_REGEX_NS}/TBlock", 1) == 2
    for pattern, count in (("{ENV_REGEX_NS}/Robot", 0), ("{ENV_REGEX_NS}/TBlock.*", 2)):
        with pytest.raises(ConfigError, match=f"matched {count} rigid bodies"):
            GaussianRenderer._body_index(paths, pattern, 0)


def measure(asset_dir, repeats: int = 50) -> None:
    """Agreement with the direct render and the time per frame (docs/isaaclab_renderer.md)."""
    torch.set_num_threads(1)
    with built_world(asset_dir) as (sim, scene, cloud, X_WC):
        start = block_geometry(load_pusht_cfg(DEFAULT_YAML)).start_pose
        for name, poses in (("start", np.repeat(start[None], NUM_ENVS, axis=0)), ("moved", _moved_poses(start))):
            _set_block_poses(sim, scene, poses)
            difference = np.abs(_camera_images(scene).astype(int) - _direct_images(cloud, poses, X_WC).astype(int))
            print(f"{name}: max |camera - direct| = {difference.max()} / 255, values differing: "
                  f"{(difference > 0).sum()} of {difference.size}")
        camera = scene["camera"]
        viewmat = torch.as_tensor(viewmat_from_opengl(X_WC)[None], dtype=torch.float32)
        Ks = torch.as_tensor(K[None], dtype=torch.float32)
        pose = torch.as_tensor(start[None], dtype=torch.float32)
        timings = {}
        for label, frame in (
            ("camera render (all envs)", lambda: camera._renderer.render(camera._render_data)),
            ("direct render_clouds (one view)", lambda: render_clouds([cloud], [pose], viewmat, Ks, WIDTH, HEIGHT,
                                                                      backgrounds=torch.tensor([BACKGROUND]), backend="cpu")),
        ):
            frame()  # warm-up
            samples = []
            for _ in range(repeats):
                begin = time.perf_counter()
                frame()
                samples.append(time.perf_counter() - begin)
            timings[label] = 1e3 * float(np.median(samples))
        for label, ms in timings.items():
            print(f"{label}: {ms:.2f} ms median of {repeats} ({NUM_ENVS} envs, {WIDTH}x{HEIGHT}, {len(cloud)} Gaussians)")


if __name__ == "__main__":  # python tests/test_isaaclab_renderer.py <asset dir>
    measure(sys.argv[1] if len(sys.argv) > 1 else "/tmp/real_is_sim_renderer_usd")
