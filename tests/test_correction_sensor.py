"""The visual-force sensor on a small synthetic cell: frames are rendered from a known 'real' pose."""

import numpy as np
import pytest
import torch

from real_is_sim.correction.background import table_background
from real_is_sim.correction.sensor import SensorCamera, VisualForceSensor, VisualForceSensorCfg
from real_is_sim.gaussians.cloud import STATIC_WORLD, GaussianCloud, pose_cloud
from real_is_sim.gaussians.spheres import cloud_from_spheres
from real_is_sim.render import rasterization

W, H = 160, 90
K = np.array([[80.0, 0.0, 80.0], [0.0, 80.0, 45.0], [0.0, 0.0, 1.0]])
CENTER = np.array([0.45, 0.0, 0.0])


def _t_block_cloud():
    xs = np.arange(-0.09, 0.091, 0.015)
    bar = [[x, y, 0.01] for x in xs for y in (0.0, 0.015, 0.03)]
    stem = [[x, y, 0.01] for x in (-0.015, 0.0, 0.015) for y in np.arange(-0.13, -0.01, 0.015)]
    centers = np.array(bar + stem)
    return cloud_from_spheres(centers, np.full(len(centers), 0.01)), centers.mean(0)[None]


def _look_at(eye, target):
    f = target - eye
    f /= np.linalg.norm(f)
    r = np.cross(f, [0, 0, 1.0])
    r /= np.linalg.norm(r)
    X = np.eye(4)
    X[:3, :3] = np.stack([r, np.cross(f, r), f], 1)
    X[:3, 3] = eye
    return np.linalg.inv(X)


def _cameras():
    cams = []
    for i, az in enumerate((0.3, 2.4, 4.4)):
        V = _look_at(CENTER + np.array([0.45 * np.cos(az), 0.45 * np.sin(az), 0.4]), CENTER)
        cams.append(SensorCamera(f"cam{i}", V, K, W, H, table_background(K, V, W, H)))
    return cams


def _observe(cloud, cams, pose, occluder=None, as_float=False):
    means, quats = pose_cloud(cloud, torch.tensor(pose[None], dtype=torch.float32))
    parts = [(means, quats, cloud.scales, cloud.opacities, cloud.colors)]
    if occluder is not None:
        parts.append((occluder.means, occluder.quats, occluder.scales, occluder.opacities, occluder.colors))
    m, q, s, o, c = (torch.cat([p[k] for p in parts]) for k in range(5))
    viewmats = torch.tensor(np.stack([c.viewmat for c in cams]), dtype=torch.float32)
    Ks = torch.tensor(np.stack([c.K for c in cams]), dtype=torch.float32)
    bg = torch.tensor(np.stack([c.background for c in cams]))
    image = rasterization(m, q, s, o, c, viewmats, Ks, W, H, backgrounds=bg)[0].cpu()
    if as_float:
        return [im.numpy() for im in image]
    return [(im.clamp(0, 1).numpy() * 255).round().astype(np.uint8) for im in image]


def _pose(x=0.0, y=0.0):
    return np.array([CENTER[0] + x, CENTER[1] + y, 0.0, 0.0, 0.0, 0.0, 1.0])


@pytest.fixture(scope="module")
def scene():
    cloud, com = _t_block_cloud()
    return cloud, com, _cameras()


@pytest.mark.parametrize("offset", [(0.012, 0.0), (0.0, -0.012), (-0.008, 0.008)])
def test_force_points_from_twin_pose_toward_observed_pose(scene, offset):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(*offset))
    sensor = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com)
    force = sensor.update(_pose()[None], frames).wrench[0, :3]
    direction = np.array([*offset, 0.0]) / np.linalg.norm(offset)
    assert force[:2] @ direction[:2] > 0.7 * np.linalg.norm(force[:2]), (force, offset)


def test_zero_error_gives_zero_force(scene):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(), as_float=True)  # exactly what the twin renders
    reading = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com).update(_pose()[None], frames)
    assert np.abs(reading.wrench).max() < 1e-6
    assert reading.confidence[0] > 0.9 and not reading.lost[0]


def test_clamp_holds(scene):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.02, 0.02))
    cfg = VisualForceSensorCfg(max_force=0.05, max_torque=0.001)
    wrench = VisualForceSensor(cfg, cloud, cams, com).update(_pose()[None], frames).wrench[0]
    assert np.linalg.norm(wrench[:3]) <= 0.05 + 1e-6 and np.linalg.norm(wrench[3:]) <= 0.001 + 1e-7
    assert np.linalg.norm(wrench[:3]) > 0.04  # a 2.8 cm error saturates it


def test_nan_frame_and_missing_camera_are_flagged_not_fatal(scene):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.01, 0.0))
    bad = frames[0].astype(np.float32) / 255
    bad[10, 10, 0] = np.nan
    sensor = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com)
    reading = sensor.update(_pose()[None], [bad, None, frames[2]])
    assert reading.cameras_used == ["cam2"]
    assert reading.cameras_rejected == {"cam0": "non-finite pixels", "cam1": "missing"}
    assert reading.wrench[0, 0] > 0  # the remaining camera still corrects
    nothing = sensor.update(_pose()[None], [None, None, None])
    assert np.count_nonzero(nothing.wrench) == 0 and not nothing.ok


def _grey_blob(height: float, thickness: float) -> GaussianCloud:
    """An arm-like grey blob of 300 Gaussians centred ``height`` above the bar's right end, ``thickness`` deep."""
    g = torch.Generator().manual_seed(0)
    n = 300
    means = torch.tensor([CENTER[0] + 0.07, 0.015, height]) + (torch.rand(n, 3, generator=g) - 0.5) * torch.tensor([0.07, 0.07, thickness])
    return GaussianCloud(means, torch.tensor([1.0, 0, 0, 0]).expand(n, 4).contiguous(), torch.full((n, 3), 0.008),
                         torch.full((n,), 0.95), torch.full((n, 3), 0.85), torch.full((n,), STATIC_WORLD, dtype=torch.int64))


def test_robot_occluder_keeps_a_hidden_block_from_being_pulled(scene):
    cloud, com, cams = scene
    # A grey blob just above the bar's right end hides it in every view: the twin knows it is there.
    occluder = _grey_blob(0.05, 0.06)
    frames = _observe(cloud, cams, _pose(), occluder)  # the block has NOT moved
    with_occluder = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com).update(_pose()[None], frames, occluder)
    without = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com).update(_pose()[None], frames)
    f_with, f_without = np.linalg.norm(with_occluder.wrench[0, :3]), np.linalg.norm(without.wrench[0, :3])
    assert f_without > 0.2, f_without  # blind to the robot, the sensor drags a block that stands still
    assert f_with < 0.25 * f_without, (f_with, f_without)


def test_occluder_layer_reads_as_compositing_the_occluder(scene):
    # The robot rendered once into a layer per update (occluder_layer, default) against its Gaussians composited in
    # every iteration: the same reading when it hovers in front of the block (no depth interleaving).
    cloud, com, cams = scene
    occluder = _grey_blob(0.06, 0.04)
    frames = _observe(cloud, cams, _pose(0.01, -0.006), occluder)
    readings = [VisualForceSensor(VisualForceSensorCfg(occluder_layer=layer), cloud, cams, com).update(_pose()[None], frames, occluder)
                for layer in (False, True)]
    assert np.linalg.norm(readings[0].wrench[0, :3]) > 0.1  # the block is pulled toward where it is seen
    np.testing.assert_allclose(readings[1].wrench, readings[0].wrench, atol=1e-3 * np.abs(readings[0].wrench).max())  # float32 sums in another order
    assert readings[1].loss_before == pytest.approx(readings[0].loss_before, rel=1e-4)


def test_bad_config_and_bad_poses_give_one_clear_error(scene):
    cloud, com, cams = scene
    from real_is_sim.config import load_config
    from real_is_sim.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown loss"):
        load_config(VisualForceSensorCfg, {"loss": "l3"})
    with pytest.raises(ConfigError, match="iterations"):
        load_config(VisualForceSensorCfg, {"iterations": -1})
    sensor = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com)
    with pytest.raises(ValueError, match="body_poses"):
        sensor.update(np.full((1, 7), np.nan), [None] * 3)


def test_cropped_windows_give_the_same_wrench_as_whole_images(scene):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.01, -0.005))
    cropped = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com).update(_pose()[None], frames)
    whole = VisualForceSensor(VisualForceSensorCfg(crop_margin_px=None), cloud, cams, com).update(_pose()[None], frames)
    assert np.allclose(cropped.wrench, whole.wrench, rtol=1e-3, atol=1e-4)
    assert cropped.loss_before == pytest.approx(whole.loss_before, rel=1e-2)


def test_springs_pull_from_where_the_twin_is_now(scene):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.012, 0.0))  # exposed while the twin was at _pose()
    sensor = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com)
    still = sensor.update(_pose()[None], frames).wrench[0, 0]
    moved_on = sensor.update(_pose()[None], frames, current_poses=_pose(0.002, 0.0)[None]).wrench[0, 0]
    assert 0 < moved_on < still  # the twin already covered part of the way since the exposure


def test_held_springs_give_the_wrench_and_each_bodys_mean_distance_to_the_targets(scene):
    cloud, com, cams = scene
    sensor = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com)
    at_pose = pose_cloud(cloud, torch.as_tensor(_pose(0.004, 0.0)[None], dtype=torch.float32))[0]
    np.testing.assert_allclose(sensor.held_springs(at_pose, _pose(0.004, 0.0)[None])[1], [0.0], atol=1e-7)
    wrench, lengths = sensor.held_springs(at_pose, _pose(0.0, 0.003)[None])
    np.testing.assert_allclose(lengths, [0.005], rtol=1e-4)  # 3-4-5
    assert wrench[0, 0] > 0 and wrench[0, 1] < 0  # towards the targets: +x, -y
    frames = _observe(cloud, cams, _pose(0.012, 0.0))  # a reading's springs, recomputed later from the same poses
    reading = sensor.update(_pose()[None], frames, current_poses=_pose(0.002, 0.0)[None])
    np.testing.assert_allclose(sensor.held_springs(reading.targets, _pose(0.002, 0.0)[None])[0], reading.wrench,
                               rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("crop_margin_px", [12, None])
def test_downscaled_rendering_pulls_the_same_way_about_as_hard(scene, crop_margin_px):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.01, -0.005))
    full = VisualForceSensor(VisualForceSensorCfg(crop_margin_px=crop_margin_px), cloud, cams, com).update(_pose()[None], frames)
    half = VisualForceSensor(VisualForceSensorCfg(crop_margin_px=crop_margin_px, render_downscale=2), cloud, cams,
                             com).update(_pose()[None], frames)
    f_full, f_half = full.wrench[0, :2], half.wrench[0, :2]
    # the same per-pixel loss on area-averaged frames; the force turns < 10 deg and keeps its size within 15%
    assert half.loss_before == pytest.approx(full.loss_before, rel=0.15)
    assert f_half @ f_full > np.cos(np.radians(10)) * np.linalg.norm(f_half) * np.linalg.norm(f_full), (f_half, f_full)
    assert np.linalg.norm(f_half) == pytest.approx(np.linalg.norm(f_full), rel=0.15)
    assert half.residual[0] == pytest.approx(full.residual[0], rel=0.5, abs=0.01)


def test_downscale_must_be_a_positive_integer():
    from real_is_sim.config import load_config
    from real_is_sim.errors import ConfigError

    for bad in (0, 1.5):
        with pytest.raises(ConfigError, match="render_downscale"):
            load_config(VisualForceSensorCfg, {"render_downscale": bad})


def test_downscaled_rendering_of_the_right_pose_barely_pulls(scene):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(), as_float=True)
    half = VisualForceSensor(VisualForceSensorCfg(render_downscale=2), cloud, cams, com).update(_pose()[None], frames)
    off = VisualForceSensor(VisualForceSensorCfg(render_downscale=2), cloud, cams, com).update(
        _pose()[None], _observe(cloud, cams, _pose(0.01, -0.005), as_float=True))
    # the coarse render of the right pose matches the area-averaged frames (same low-pass in camera pixels)
    assert half.loss_before < 0.1 * off.loss_before, (half.loss_before, off.loss_before)
    assert np.linalg.norm(half.wrench[0, :3]) < 0.1 * np.linalg.norm(off.wrench[0, :3])


def test_gsplat_backend_needs_cuda_and_says_so(scene):
    from real_is_sim.errors import ConfigError
    from real_is_sim.render import gsplat_available

    if gsplat_available():
        pytest.skip("CUDA and gsplat are here")
    cloud, com, cams = scene
    with pytest.raises(ConfigError, match="needs CUDA and the gsplat package"):
        VisualForceSensor(VisualForceSensorCfg(backend="gsplat"), cloud, cams, com)


def test_sensor_on_gsplat_pulls_as_on_cpu(scene):
    from real_is_sim.render import gsplat_available

    if not gsplat_available():
        pytest.skip("needs a CUDA GPU and the gsplat package (scripts/bench_sensor.py times it there)")
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.01, -0.005))
    for downscale in (1, 2):
        readings = [VisualForceSensor(VisualForceSensorCfg(backend=b, render_downscale=downscale), cloud, cams, com)
                    .update(_pose()[None], frames) for b in ("cpu", "gsplat")]
        assert np.allclose(readings[0].wrench, readings[1].wrench, rtol=1e-2, atol=1e-3)
        assert readings[1].residual[0] == pytest.approx(readings[0].residual[0], rel=1e-3)


def test_warm_up_changes_nothing_the_update_sees(scene):
    # OnlineLoop and the sensor's worker process warm the sensor up before the first tick: a render, a backward pass
    # and an Adam step on a throwaway copy of the cloud. The readings after it equal a cold sensor's.
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.008, 0.004))
    warm, cold = (VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com) for _ in range(2))
    means_before = cloud.means.clone()
    warm.warm_up()
    assert torch.equal(cloud.means, means_before)
    for _ in range(2):  # the health counters too: the second reading depends on the first
        readings = [sensor.update(_pose()[None], frames) for sensor in (warm, cold)]
        np.testing.assert_array_equal(readings[0].wrench, readings[1].wrench)
        np.testing.assert_array_equal(readings[0].residual, readings[1].residual)
    assert np.linalg.norm(readings[0].wrench[0, :3]) > 0.1
