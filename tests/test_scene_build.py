"""Scene building: visual hull, sphere fill, Gaussians, object file + USD, table plane; clear errors on bad views."""

import numpy as np
import pytest
from PIL import Image, ImageDraw
from scipy.spatial import ConvexHull

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.correction.background import table_background
from real_is_sim.errors import DataError
from real_is_sim.scene.build import ObjectBuildCfg, build_object, footprint_frame, write_object
from real_is_sim.scene.gaussian_fit import GaussianFitCfg
from real_is_sim.scene.ground import fit_plane
from real_is_sim.scene.hull import VoxelHull, carve_hull, fill_spheres, project, table_frame
from real_is_sim.scene.views import make_views
from real_is_sim.transforms import look_at_X_WC

PLANE = np.array([0.0, 0.0, 1.0, 0.0])
BOX_LO, BOX_HI = np.array([0.47, -0.02, 0.0]), np.array([0.53, 0.02, 0.03])  # 6 x 4 x 3 cm on the table
BOX_COLOR = (0.9, 0.3, 0.1)
W, H, FOCAL = 320, 240, 560.0  # 1.1 mm per pixel at 0.6 m
VOXEL = 0.002


def _cameras(count=4, elevation_deg=5.0, distance=0.6):
    """Cameras facing the box's faces (a box's visual hull is the box only when views look along its faces), low
    enough that the hull's roof above the top face stays under a voxel."""
    K = np.array([[FOCAL, 0, W / 2], [0, FOCAL, H / 2], [0, 0, 1.0]])
    target = (BOX_LO + BOX_HI) / 2
    cameras = {}
    for k in range(count):
        azimuth, elevation = np.radians(90.0 * k), np.radians(elevation_deg)
        eye = target + distance * np.array([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                                            np.sin(elevation)])
        cameras[f"cam{k}"] = CameraInfo(f"cam{k}", K, W, H, look_at_X_WC(eye, target))
    return cameras


def _box_views(cameras):
    """(images, backgrounds): the textured empty table, and the same with the box drawn flat in its colour (the
    silhouette of a convex box is the convex hull of its projected corners)."""
    corners = np.array([[x, y, z] for x in (BOX_LO[0], BOX_HI[0]) for y in (BOX_LO[1], BOX_HI[1]) for z in (BOX_LO[2], BOX_HI[2])])
    images, backgrounds = {}, {}
    for serial, camera in cameras.items():
        background = table_background(camera.K, camera.viewmat_opencv(), W, H, tuple(PLANE))
        uv, _ = project(corners, camera)
        silhouette = Image.new("L", (W, H), 0)
        ImageDraw.Draw(silhouette).polygon([tuple(p) for p in uv[ConvexHull(uv).vertices]], fill=255)
        inside = np.asarray(silhouette) > 0
        image = background.copy()
        image[inside] = BOX_COLOR
        images[serial], backgrounds[serial] = image, background
    return images, backgrounds


@pytest.fixture(scope="module")
def box_views():
    cameras = _cameras()
    images, backgrounds = _box_views(cameras)
    return make_views(images, cameras, backgrounds=backgrounds)


def _distance_to_box(points):
    outside = np.maximum(np.maximum(BOX_LO - points, points - BOX_HI), 0.0)
    return np.linalg.norm(outside, axis=1)


def test_hull_of_a_box_from_four_views_is_within_a_voxel(box_views):
    hull = carve_hull(box_views, PLANE, voxel_size=VOXEL, max_height=0.1)
    centers = hull.to_world(hull.centers_table())
    assert _distance_to_box(centers).max() <= VOXEL  # nothing more than a voxel outside the box
    # every voxel whose centre is over a voxel inside the box is kept
    grid = hull.to_world(hull.centers_table(np.argwhere(np.ones_like(hull.occupied))))
    deep_inside = np.all((grid > BOX_LO + VOXEL) & (grid < BOX_HI - VOXEL), axis=1)
    assert hull.occupied.reshape(-1)[deep_inside].all()
    assert hull.volume == pytest.approx(np.prod(BOX_HI - BOX_LO), rel=0.15)


def _boxy_hull(shape=(30, 20, 15)):
    occupied = np.zeros((shape[0] + 4, shape[1] + 4, shape[2] + 2), dtype=bool)
    occupied[2:-2, 2:-2, :shape[2]] = True
    return VoxelHull(table_frame(PLANE), np.array([0.4, -0.02, 0.0]), VOXEL, occupied)


def test_spheres_fill_the_hull_at_the_given_radius_and_stay_inside():
    hull = _boxy_hull()
    radius, spacing = 0.006, 0.01
    centers = fill_spheres(hull, radius, spacing)
    assert len(centers) > 10
    # every point of every sphere lies in an occupied voxel
    directions = np.random.default_rng(0).normal(size=(200, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    points = (centers[:, None, :] + radius * directions[None]).reshape(-1, 3)
    index = np.floor((points - hull.origin) / VOXEL).astype(int)
    assert np.all((index >= 0) & (index < hull.occupied.shape))
    assert hull.occupied[tuple(index.T)].all()
    # no two closer than the spacing; the outer spheres touch the hull's faces (within a voxel)
    gaps = np.linalg.norm(centers[:, None] - centers[None], axis=-1) + np.eye(len(centers))
    assert gaps.min() >= spacing - 1e-9
    filled = hull.centers_table()
    lo, hi = filled.min(axis=0) - VOXEL / 2, filled.max(axis=0) + VOXEL / 2
    assert np.all(np.abs((centers.min(axis=0) - radius) - lo) <= VOXEL)
    assert np.all(np.abs((centers.max(axis=0) + radius) - hi) <= VOXEL)
    with pytest.raises(DataError, match="no sphere of radius"):
        fill_spheres(hull, 0.02, spacing)  # 3 cm tall: a 4 cm sphere does not fit


def test_plane_fit_ignores_outliers_and_points_its_normal_up():
    rng = np.random.default_rng(1)
    normal = np.array([np.sin(np.radians(3.0)), 0.0, -np.cos(np.radians(3.0))])  # given pointing down on purpose
    d = 0.012
    basis = np.linalg.svd(normal[None])[2][1:]
    on_plane = rng.uniform(-0.4, 0.4, (2000, 2)) @ basis - d * normal + rng.normal(0, 0.0005, (2000, 1)) * normal
    outliers = rng.uniform([-0.4, -0.4, -0.1], [0.4, 0.4, 0.2], (800, 3))
    fit = fit_plane(np.concatenate([on_plane, outliers]), threshold=0.003)
    up = -normal
    assert fit.plane[2] > 0
    angle = np.degrees(np.arccos(min(1.0, fit.plane[:3] @ up)))
    assert angle < 0.1
    assert abs(fit.plane[3] + d) < 0.0003  # normal . x + d = 0 with the normal flipped up: up . x - d = 0
    assert fit.inlier_ratio == pytest.approx(2000 / 2800, abs=0.02)
    assert 0.0003 < fit.rms_residual < 0.0007
    above = np.array([0.0, 0.0, 0.5])
    assert above @ fit.plane[:3] + fit.plane[3] > 0  # points above the table are positive
    with pytest.raises(DataError, match="collinear"):
        fit_plane(np.outer(np.linspace(0, 1, 50), [1.0, 2.0, 3.0]))


def test_a_view_without_calibration_or_with_an_empty_mask_is_one_clear_error():
    cameras = _cameras()
    images, backgrounds = _box_views(cameras)
    uncalibrated = dict(cameras)
    del uncalibrated["cam2"]
    with pytest.raises(DataError, match="view cam2: no calibration"):
        make_views(images, uncalibrated, backgrounds=backgrounds)
    masks = {serial: np.ones((H, W), dtype=bool) for serial in cameras}
    masks["cam1"] = np.zeros((H, W), dtype=bool)
    with pytest.raises(DataError, match="view cam1: the object's mask is empty"):
        make_views(images, cameras, masks=masks)
    empty_scene = dict(images, cam3=backgrounds["cam3"])  # the object missed this camera
    with pytest.raises(DataError, match="view cam3: the object's mask is empty"):
        make_views(empty_scene, cameras, backgrounds=backgrounds)
    with pytest.raises(DataError, match="at least 4 views"):
        make_views({k: images[k] for k in list(images)[:3]}, cameras, backgrounds=backgrounds)


def test_footprint_frame_follows_the_object():
    rng = np.random.default_rng(2)
    l_shape = np.concatenate([rng.uniform([0, 0, 0], [0.15, 0.04, 0.03], (400, 3)),
                              rng.uniform([0, 0.04, 0], [0.04, 0.12, 0.03], (200, 3))])
    yaw = 0.7
    R = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    moved = l_shape @ R.T + [0.5, 0.1, 0.0]
    X_a, X_b = footprint_frame(l_shape, PLANE), footprint_frame(moved, PLANE)
    expected = np.eye(4)
    expected[:3, :3], expected[:3, 3] = R, [0.5, 0.1, 0.0]
    np.testing.assert_allclose(X_b, expected @ X_a, atol=1e-9)
    assert X_a[2, 3] == 0.0 and np.allclose(X_a[:3, 2], [0, 0, 1])


def test_built_box_writes_an_object_file_and_usd_the_twin_and_renderer_read(box_views, tmp_path):
    from pxr import Usd, UsdPhysics

    from real_is_sim.gaussians.io import load_object_cloud, read_usd
    from real_is_sim.objectfile import load_object_file

    cfg = ObjectBuildCfg(name="box", gaussians=GaussianFitCfg(num_gaussians=200, iterations=10, backend="cpu"))
    built = build_object(box_views, PLANE, cfg)
    json_path, usd_path = write_object(built, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box.json", "box.usda"]  # no temporary left behind
    obj = load_object_file(json_path)
    assert np.allclose(obj.sphere_radii, 0.006) and len(obj.sphere_centers) == len(built.sphere_centers)
    np.testing.assert_allclose(obj.X_WB, built.X_WB)
    cloud, _ = load_object_cloud(json_path)
    np.testing.assert_allclose(cloud.colors.numpy(), built.cloud.colors.numpy(), atol=1e-6)  # BGR on disk, RGB back
    assert np.allclose(cloud.colors.numpy().mean(axis=0), BOX_COLOR, atol=0.12)  # the fit learned the box's colour
    world = built.sphere_centers_world()
    assert _distance_to_box(world).max() < 1e-9 + VOXEL  # every centre in (or within a voxel of) the box
    assert np.all(world[:, 2] >= 0.006 - 1e-9)  # spheres rest on, not in, the table
    stage = Usd.Stage.Open(str(usd_path))
    body = stage.GetDefaultPrim()
    assert body.HasAPI(UsdPhysics.RigidBodyAPI)
    assert UsdPhysics.MassAPI(body).GetMassAttr().Get() == pytest.approx(0.2)
    colliders = [p for p in Usd.PrimRange(body) if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert len(colliders) == len(built.sphere_centers)
    assert len(read_usd(usd_path)) == len(built.cloud)


@pytest.fixture(scope="module")
def built_box_file(tmp_path_factory):
    """The box built by the command from a recording in the shared data's layout: frame 0 the empty table, frame 1
    the box (lossless, so segmentation sees the drawn pixels)."""
    from real_is_sim.cameras.base import Frame
    from real_is_sim.cameras.recorder import Recorder
    from real_is_sim.cli import main

    root = tmp_path_factory.mktemp("scene")
    cameras = _cameras()
    images, backgrounds = _box_views(cameras)
    with Recorder(root / "capture", list(cameras.values()), lossless=True) as recorder:
        for index, frames in enumerate((backgrounds, images)):
            for serial, image in frames.items():
                recorder.write(Frame(serial, (np.clip(image, 0, 1) * 255).round().astype(np.uint8), 0.1 * index, index))
    argv = ["build-object", str(root / "capture"), "--frame", "1", "--background-frame", "0", "--name", "box",
            "--out", str(root / "objects"), "--gaussians", "200", "--iterations", "10"]
    assert main(argv) == 0
    return root


def test_command_errors_name_the_uncalibrated_mask(built_box_file, capsys):
    from real_is_sim.cli import main

    masks = built_box_file / "masks"
    masks.mkdir()
    np.save(masks / "cam9.npy", np.ones((H, W), dtype=bool))
    argv = ["build-object", str(built_box_file / "capture"), "--frame", "1", "--masks", str(masks), "--out",
            str(built_box_file / "bad")]
    assert main(argv) == 2
    assert "camera cam9 has no calibration" in capsys.readouterr().err
    assert not (built_box_file / "bad").exists()  # nothing written


def test_built_object_is_pushed_in_the_twin(built_box_file):
    from real_is_sim.twin import Twin
    from real_is_sim_tasks.pusht import load_pusht_cfg
    from real_is_sim_tasks.pusht.scripted import ScriptedPusher

    task = load_pusht_cfg(overrides=["block.source=file", f"block.object_file={built_box_file / 'objects' / 'box.json'}"])
    twin = Twin(task)
    start = twin.object_poses()[0, 0].copy()
    assert np.linalg.norm(start[:2] - (BOX_LO + BOX_HI)[:2] / 2) < 0.003  # the twin puts it where it was captured
    pusher = ScriptedPusher(task)
    begin, end = np.array([0.5, -0.08, 0.035]), np.array([0.5, 0.03, 0.035])  # along +y through the box's centre
    q0 = pusher.kinematics.solve(pusher.to_base(begin), pusher.rotation, pusher.q_start)
    twin.reset(robot_q=q0[None])
    for q in pusher.joint_path(np.array([begin, end]), 0.1, twin.control_dt, q0):
        twin.step(q[None])
    moved = twin.object_poses()[0, 0, :3] - start[:3]
    assert moved[1] > 0.02 and abs(moved[2]) < 0.002  # pushed along +y, still on the table


def test_built_object_runs_in_the_stand_in_and_the_sensor(built_box_file):
    from real_is_sim.bridge import BridgeCfg, build_bridge
    from real_is_sim.bridge.config import CamerasCfg
    from real_is_sim.correction.sensor import VisualForceSensorCfg
    from real_is_sim.loop import LoopCfg
    from real_is_sim.standin.world import StandInCfg
    from real_is_sim_tasks.pusht import load_pusht_cfg

    task = load_pusht_cfg(overrides=["block.source=file", f"block.object_file={built_box_file / 'objects' / 'box.json'}"])
    cfg = BridgeCfg(loop=LoopCfg(visual_forces=True), cameras=CamerasCfg(num_cameras=2, width=320, height=180),
                    initial_offset=[0.01, 0.0, 0.0], standin=StandInCfg(seed=3, drop_probability=0.0),
                    sensor=VisualForceSensorCfg(kp=10.0))
    bridge = build_bridge(cfg, task)
    try:
        errors, reports = [bridge.sync_error()[0]], []
        for _ in range(30):
            reports.append(bridge.tick())
            errors.append(bridge.sync_error()[0])
        assert any(r.reading is not None and r.frames_used for r in reports)  # the sensor rendered the built Gaussians
        # and pulled the twin towards the stand-in's box (10 mm -> 0.8 mm at best, 4.5 mm at tick 30; without visual
        # forces it stays at 10 mm)
        assert min(errors[10:]) < 0.3 * errors[0] and errors[-1] < errors[0]
    finally:
        bridge.hold_and_stop()


def test_given_masks_build_the_same_box_as_segmentation(box_views):
    masks = {v.camera.serial: v.mask for v in box_views}
    views = make_views({v.camera.serial: v.image for v in box_views}, {v.camera.serial: v.camera for v in box_views},
                       masks=masks)
    cfg = ObjectBuildCfg(gaussians=GaussianFitCfg(num_gaussians=100, iterations=5, backend="cpu"))
    built = build_object(views, PLANE, cfg)
    assert _distance_to_box(built.sphere_centers_world()).max() < VOXEL
    assert np.allclose(built.cloud.colors.numpy().mean(axis=0), BOX_COLOR, atol=0.15)
