"""Scene building against known objects: stand-in renders of the shipped T-block and an L-block, rebuilt from 4 and
from 8 views, and the table plane from the shipped point cloud. Needs the shared data.

    python scripts/bench_scene.py [--views 4 8] [--objects tblock lblock] [--iterations 150] [--figures docs/img]

The stand-in cell: table z = 0 with the stand-in's checker texture (correction.background), the object resting on it
(the T: tblock.json's Gaussians and spheres; the L: two 4 x 3 cm legs of 15 and 12 cm filled with 6 mm spheres, one
Gaussian per sphere as the twin draws procedural blocks), cameras on a ring around it (elevation alternating 20 and
70 deg, 0.4 m away, 480x270 at the RealSense focal length) rendered with pixel noise 0.01, the empty cell rendered
(with its own noise) without the object. One more camera between the others (azimuth +22.5 deg, 35 deg) is held out.

Per object and view count:
- footprint_iou: built spheres at the built pose vs the known spheres at the true pose, as footprints on the table
  (discs under the centres, closed by a disc of the sphere radius; 1 mm grid: compare.footprint_iou)
- volume_error: the same for volume (closed union of spheres, 2 mm grid), built / known - 1; hull_volume_error: the
  carved hull's volume / the known solid - 1
- pose_error_mm / _deg: the built body frame vs the frame the same rule (build.footprint_frame) gives the known
  spheres: distance in the table plane, angle about its normal
- render_psnr_heldout_view: the built Gaussians in the held-out camera vs a noise-free render of the truth, in a
  window 8 px around the object
- seconds: build_object's wall time (hull, spheres, Gaussian fit)
ground: the fitted plane vs ground_plane.json (angle between normals, distance at the inliers' centroid), for the
shipped cloud and for it with 1 mm noise and 30% clutter. Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.cli import quiet_warp
from real_is_sim.correction.background import table_background
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.gaussians.io import load_object_cloud
from real_is_sim.gaussians.spheres import cloud_from_spheres
from real_is_sim.objectfile import load_object_file
from real_is_sim.paths import shared_data_dir
from real_is_sim.render.clouds import render_clouds
from real_is_sim.render.pose_fit import crop_windows
from real_is_sim.scene.build import ObjectBuildCfg, build_object, footprint_frame
from real_is_sim.scene.compare import footprint_iou, pose_error, psnr, solid_volume
from real_is_sim.scene.gaussian_fit import GaussianFitCfg
from real_is_sim.scene.ground import fit_plane, load_points, plane_difference
from real_is_sim.scene.views import make_views
from real_is_sim.standin.cameras import DEFAULT_FOCAL
from real_is_sim.transforms import look_at_X_WC, matrix_to_pose, pose_to_matrix, quat_from_yaw, quat_multiply
from real_is_sim.twin.tblock import rest_on_table

PLANE = np.array([0.0, 0.0, 1.0, 0.0])
WIDTH, HEIGHT = 480, 270
NOISE_STD = 0.01
RADIUS = 0.006


def l_block_centers(radius: float = RADIUS) -> np.ndarray:
    """An L of two 4 cm wide, 3 cm tall legs (15 cm along x, 8 cm more along y), filled as the procedural T is."""
    def box(x0, y0, sx, sy, sz):
        axes = [np.linspace(lo + radius, lo + size - radius, max(2, int(np.ceil((size - 2 * radius) / (2 * radius))) + 1))
                for lo, size in ((x0, sx), (y0, sy), (0.0, sz))]
        return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)

    return np.concatenate([box(0.0, 0.0, 0.15, 0.04, 0.03), box(0.0, 0.04, 0.04, 0.08, 0.03)])


def known_object(name: str) -> tuple[GaussianCloud, np.ndarray, np.ndarray]:
    """(Gaussians in the body frame, sphere centres in the body frame, the pose it stands at on the table)."""
    if name == "tblock":
        path = shared_data_dir() / "objects" / "tblock.json"
        cloud, scan_pose = load_object_cloud(path)
        centers = load_object_file(path).sphere_centers
        pose = scan_pose.copy()
        pose[:3] = [0.45, 0.05, 0.0]
        pose[3:7] = quat_multiply(quat_from_yaw(0.5), pose[3:7])
    elif name == "lblock":
        centers = l_block_centers()
        cloud = cloud_from_spheres(centers, np.full(len(centers), RADIUS), color=(0.15, 0.45, 0.85))
        pose = np.array([0.5, -0.05, 0.0, *quat_from_yaw(0.3)])
    else:
        raise SystemExit(f"unknown object {name!r}")
    return cloud, centers, rest_on_table(pose, centers, RADIUS, PLANE)


def ring(target: np.ndarray, count: int, azimuth0: float = 10.0, distance: float = 0.4,
         elevations=(20.0, 70.0)) -> list[CameraInfo]:
    K = np.array([[DEFAULT_FOCAL, 0, WIDTH / 2], [0, DEFAULT_FOCAL, HEIGHT / 2], [0, 0, 1.0]])
    cameras = []
    for k in range(count):
        azimuth, elevation = np.radians(azimuth0 + 360.0 * k / count), np.radians(elevations[k % len(elevations)])
        eye = target + distance * np.array([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                                            np.sin(elevation)])
        cameras.append(CameraInfo(f"view{k}", K, WIDTH, HEIGHT, look_at_X_WC(eye, target)))
    return cameras


def render(cloud: GaussianCloud, pose: np.ndarray, cameras: list[CameraInfo], backgrounds: np.ndarray) -> np.ndarray:
    viewmats = torch.tensor(np.stack([c.viewmat_opencv() for c in cameras]), dtype=torch.float32)
    Ks = torch.tensor(np.stack([c.K for c in cameras]), dtype=torch.float32)
    with torch.no_grad():
        rgb, _, _ = render_clouds([cloud], [torch.tensor(pose[None], dtype=torch.float32)], viewmats, Ks, WIDTH, HEIGHT,
                                  backgrounds=torch.tensor(backgrounds), backend="cpu")
    return rgb.clamp(0, 1).numpy()


def bench_object(name: str, views: int, iterations: int, figures: Path | None, elevations=(20.0, 70.0),
                 distance: float = 0.4) -> dict:
    cloud, centers, pose = known_object(name)
    X_true = pose_to_matrix(pose)
    centers_world = centers @ X_true[:3, :3].T + X_true[:3, 3]
    target = centers_world.mean(axis=0) * np.array([1, 1, 0])
    cameras = ring(target, views, distance=distance, elevations=elevations)
    held_out = ring(target, 1, azimuth0=10.0 + 180.0 / 8, distance=distance, elevations=(35.0,))[0]
    held_out = CameraInfo("held_out", held_out.K, WIDTH, HEIGHT, held_out.X_WC)
    everything = cameras + [held_out]
    backgrounds = np.stack([table_background(c.K, c.viewmat_opencv(), WIDTH, HEIGHT, tuple(PLANE)) for c in everything])
    clean = render(cloud, pose, everything, backgrounds)
    noisy = np.clip(clean + np.random.default_rng(views).normal(0, NOISE_STD, clean.shape), 0, 1).astype(np.float32)
    noisy_bg = np.clip(backgrounds + np.random.default_rng(views + 100).normal(0, NOISE_STD, backgrounds.shape), 0, 1)
    view_list = make_views({c.serial: noisy[k] for k, c in enumerate(cameras)}, {c.serial: c for c in cameras},
                           backgrounds={c.serial: noisy_bg[k].astype(np.float32) for k, c in enumerate(cameras)})
    cfg = ObjectBuildCfg(name=f"{name}_{views}", sphere_radius=RADIUS, gaussians=GaussianFitCfg(iterations=iterations, backend="cpu"))
    built = build_object(view_list, PLANE, cfg)

    built_centers = built.sphere_centers_world()
    true_volume = solid_volume(centers_world, RADIUS)
    distance, angle = pose_error(built.X_WB, footprint_frame(centers_world, PLANE), PLANE)
    rebuilt = render(built.cloud, matrix_to_pose(built.X_WB), [held_out], backgrounds[-1:])[0]
    truth_mask = np.abs(clean[-1] - backgrounds[-1]).max(axis=2) > 0.02
    x, y, w, h = crop_windows([truth_mask], WIDTH, HEIGHT, 8)[0]
    result = {
        "name": name, "views": views,
        "footprint_iou": round(footprint_iou(built_centers, centers_world, RADIUS, PLANE), 4),
        "sphere_count": len(built.sphere_centers), "true_sphere_count": len(centers),
        "volume_error": round(solid_volume(built_centers, RADIUS) / true_volume - 1.0, 4),
        "hull_volume_error": round(built.hull.volume / true_volume - 1.0, 4),
        "render_psnr_heldout_view": round(psnr(rebuilt[y:y + h, x:x + w], clean[-1, y:y + h, x:x + w]), 2),
        "pose_error_mm": round(1000 * distance, 2), "pose_error_deg": round(angle, 2),
        "seconds": round(built.seconds, 1),
    }
    if figures is not None:
        save_overlay(figures / f"scene_{name}_{views}views.png", view_list[0], built, clean[-1][y:y + h, x:x + w],
                     rebuilt[y:y + h, x:x + w], centers_world)
    return result


def save_overlay(path: Path, view, built, truth_crop, rebuilt_crop, true_centers) -> None:
    """Three panels: a building view with its mask (green) and the built spheres' projections (red), the held-out
    view (truth | rebuilt Gaussians), and the footprints on the table (true spheres grey, built red)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from real_is_sim.scene.hull import project

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    overlay = view.image.copy()
    overlay[view.mask] = 0.6 * overlay[view.mask] + 0.4 * np.array([0.1, 0.9, 0.1])
    x, y, w, h = crop_windows([view.mask], view.camera.width, view.camera.height, 20)[0]
    axes[0].imshow(overlay[y:y + h, x:x + w])
    uv, _ = project(built.sphere_centers_world(), view.camera)
    axes[0].scatter(uv[:, 0] - x, uv[:, 1] - y, s=2, c="red")
    axes[0].set_title(f"{view.camera.serial}: mask (green), built sphere centres (red)")
    axes[1].imshow(np.concatenate([truth_crop, rebuilt_crop], axis=1))
    axes[1].set_title("held-out view: truth | rebuilt Gaussians")
    axes[2].scatter(true_centers[:, 0], true_centers[:, 1], s=30, c="0.7", label="true spheres")
    built_centers = built.sphere_centers_world()
    axes[2].scatter(built_centers[:, 0], built_centers[:, 1], s=6, c="red", label="built spheres")
    axes[2].set_aspect("equal")
    axes[2].legend(loc="upper right", fontsize=8)
    axes[2].set_title("footprint (world x, y; m)")
    for ax in axes[:2]:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def fit_against_reference(points: np.ndarray, reference: np.ndarray) -> dict:
    fit = fit_plane(points)
    angle, offset = plane_difference(fit.plane, reference, points[fit.inliers].mean(axis=0))
    return {"normal_angle_deg": round(angle, 4), "offset_mm": round(1000 * offset, 3),
            "inlier_ratio": round(fit.inlier_ratio, 4), "rms_residual_mm": round(1000 * fit.rms_residual, 3)}


def bench_ground() -> dict:
    """The shipped cloud against ground_plane.json, and (the shipped cloud lies exactly on that plane) the same cloud
    with 1 mm depth noise plus 30% clutter up to 10 cm above the table, as a depth camera would see it."""
    environment = shared_data_dir() / "environment"
    points = load_points(environment / "ground.npy")
    reference = np.asarray(json.loads((environment / "ground_plane.json").read_text())["plane"], dtype=np.float64)
    rng = np.random.default_rng(0)
    noisy = points + rng.normal(0.0, 0.001, points.shape) * reference[:3] / np.linalg.norm(reference[:3])
    clutter = rng.uniform(points.min(axis=0), points.max(axis=0) + [0.0, 0.0, 0.1], (int(0.3 * len(points) / 0.7), 3))
    return {**fit_against_reference(points, reference),
            "noisy": {"noise_mm": 1.0, "clutter_ratio": 0.3, **fit_against_reference(np.concatenate([noisy, clutter]), reference)}}


def main() -> None:
    quiet_warp()
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--views", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--objects", nargs="+", default=["tblock", "lblock"])
    parser.add_argument("--iterations", type=int, default=150, help="Gaussian fit iterations")
    parser.add_argument("--elevations", type=float, nargs="+", default=[20.0, 70.0], help="deg, alternating over the ring")
    parser.add_argument("--distance", type=float, default=0.4, help="m from the object")
    parser.add_argument("--figures", type=Path, help="write the overlays docs/img/scene_<object>_<N>views.png here")
    args = parser.parse_args()
    if not (shared_data_dir() / "objects" / "tblock.json").is_file():
        raise SystemExit(f"bench_scene needs the shared data at {shared_data_dir()} (set REAL_IS_SIM_DATA)")
    start = time.perf_counter()
    objects = []
    for name in args.objects:
        for views in args.views:
            objects.append(bench_object(name, views, args.iterations, args.figures, args.elevations, args.distance))
            print(objects[-1], flush=True)
    ground = bench_ground()
    print(ground)
    print(json.dumps({"objects": objects, "ground": ground, "wall_s": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
