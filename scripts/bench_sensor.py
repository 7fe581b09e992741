"""Speed of one visual-force sensor tick (``VisualForceSensor.update``) on each renderer backend here.

    python scripts/bench_sensor.py [--ticks 30] [--backend cpu gsplat] [--no-arm]

The scanned T-block (``objects/tblock.json``; a T of spheres when the shared data is absent) at its scan pose,
three 480x270 cameras on an arc around it over a checkered table, frames rendered with the block 1 cm and 3 deg
away; the sensor's Embodied Gaussians settings (3 Adam iterations, cropped windows), no robot occluders. Each
backend (cpu; gsplat where CUDA and gsplat are) at render_downscale 1 and 2. Then, with the arm in view (the
Franka's appearance model, its pusher 2 cm from the block's stem, seen in the frames and given to the sensor as
its occluder; skipped where pinocchio is missing), the cpu backend with the occluders as a layer (the default) and
composited in every iteration (``occluder_layer=False``). Needs neither Newton nor PyAV, so it also runs on a bare
GPU machine with torch and gsplat. Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from real_is_sim.correction.background import table_background
from real_is_sim.correction.sensor import SensorCamera, VisualForceSensor, VisualForceSensorCfg
from real_is_sim.gaussians import GaussianCloud, load_object_cloud, pose_cloud
from real_is_sim.gaussians.spheres import cloud_from_spheres
from real_is_sim.paths import shared_data_dir
from real_is_sim.render import gsplat_available, rasterization
from real_is_sim.transforms import look_at_X_WC, quat_from_yaw, quat_multiply, viewmat_from_opengl
from real_is_sim.cli import quiet_warp

WIDTH, HEIGHT = 480, 270
K = np.array([[300.0, 0.0, WIDTH / 2], [0.0, 300.0, HEIGHT / 2], [0.0, 0.0, 1.0]])


def the_block() -> tuple[GaussianCloud, np.ndarray, str]:
    """The block's Gaussians (body frame), its pose (7,) and where they came from."""
    path = shared_data_dir() / "objects" / "tblock.json"
    if path.exists():
        cloud, pose = load_object_cloud(path)
        return cloud, pose, "tblock.json"
    bar = [[x, y, 0.0] for x in np.arange(-0.09, 0.091, 0.015) for y in (0.0, 0.015, 0.03)]
    stem = [[x, y, 0.0] for x in (-0.015, 0.0, 0.015) for y in np.arange(-0.13, -0.01, 0.015)]
    centers = np.array(bar + stem)
    return cloud_from_spheres(centers, np.full(len(centers), 0.01)), np.array([0.45, 0.0, 0.02, 0, 0, 0, 1.0]), "spheres"


def cameras_around(centre: np.ndarray) -> list[SensorCamera]:
    cameras = []
    for i, azimuth in enumerate(np.radians([200.0, 270.0, 340.0])):  # an arc facing the robot, as the real cell
        eye = centre + 0.7 * np.array([np.cos(azimuth) * np.cos(0.8), np.sin(azimuth) * np.cos(0.8), np.sin(0.8)])
        viewmat = viewmat_from_opengl(look_at_X_WC(eye, centre))
        cameras.append(SensorCamera(f"cam{i}", viewmat, K, WIDTH, HEIGHT, table_background(K, viewmat, WIDTH, HEIGHT)))
    return cameras


def arm_beside(centre: np.ndarray) -> GaussianCloud | None:
    """The Franka (base and pusher of the PushT cell) with its pusher 2 cm beside the block's stem, as an occluder
    cloud; None without pinocchio (a bare GPU machine)."""
    try:
        from real_is_sim.robot.appearance import RobotAppearance
        from real_is_sim_tasks.pusht import load_pusht_cfg
        from real_is_sim_tasks.pusht.scripted import ScriptedPusher
    except ImportError:
        return None
    task = load_pusht_cfg()
    pusher = ScriptedPusher(task)
    target = centre + np.array([0.0, -0.14, 0.0])
    target[2] = 0.035
    q = pusher.kinematics.solve(pusher.to_base(target), pusher.rotation, pusher.q_start)
    return RobotAppearance(base_pose=np.asarray(task.robot.base_pose)).cloud(q)


def frames_of(cloud: GaussianCloud, pose: np.ndarray, cameras: list[SensorCamera], backend: str,
              arm: GaussianCloud | None = None) -> list[np.ndarray]:
    device = "cuda" if backend == "gsplat" else "cpu"
    means, quats = pose_cloud(cloud, torch.tensor(pose[None], dtype=torch.float32))
    fields = [means, quats, cloud.scales, cloud.opacities, cloud.colors]
    if arm is not None:
        fields = [torch.cat([f, a]) for f, a in zip(fields, (arm.means, arm.quats, arm.scales, arm.opacities, arm.colors))]
    viewmats = torch.tensor(np.stack([c.viewmat for c in cameras]), dtype=torch.float32, device=device)
    Ks = torch.tensor(np.stack([c.K for c in cameras]), dtype=torch.float32, device=device)
    backgrounds = torch.tensor(np.stack([c.background for c in cameras]), dtype=torch.float32, device=device)
    with torch.no_grad():
        rgb, _, _ = rasterization(*(t.detach().to(device) for t in fields), viewmats, Ks, WIDTH, HEIGHT,
                                  backgrounds=backgrounds, backend=backend)
    return [(image.clamp(0, 1).cpu().numpy() * 255).round().astype(np.uint8) for image in rgb]


def tick_ms(cloud, pose, real_pose, cameras, backend: str, downscale: int, ticks: int, arm: GaussianCloud | None = None,
            occluder_layer: bool = True) -> dict:
    cfg = VisualForceSensorCfg(backend=backend, render_downscale=downscale, plane_normal=[0.0, 0.0, 1.0],
                               occluder_layer=occluder_layer)
    com = cloud.means.detach().mean(0).numpy()[None].astype(np.float64)
    sensor = VisualForceSensor(cfg, cloud, cameras, com)
    frames = frames_of(cloud, real_pose, cameras, backend, arm)
    reading = sensor.update(pose[None], frames, arm)  # warm-up: kernels load, first allocations
    times = []
    for _ in range(ticks):
        start = time.perf_counter()
        reading = sensor.update(pose[None], frames, arm)  # returns numpy: the GPU work is done when it returns
        times.append(time.perf_counter() - start)
    force = reading.wrench[0, :3]
    extra = {} if arm is None else {"arm_gaussians": len(arm), "occluder_layer": occluder_layer}
    return {"backend": backend, "render_downscale": downscale, **extra, "tick_ms_median": round(1e3 * float(np.median(times)), 2),
            "tick_ms_p95": round(1e3 * float(np.percentile(times, 95)), 2),
            "force_n": [round(float(f), 3) for f in force], "loss_before": reading.loss_before}


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--backend", nargs="+", choices=["cpu", "gsplat"],
                        help="backends to time (default: cpu, and gsplat where CUDA and gsplat are)")
    parser.add_argument("--no-arm", action="store_true", help="skip the runs with the arm in view")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the loop: small torch ops are slower in more threads on 2 cores
    cloud, pose, source = the_block()
    # where the frames show it: turned 3 deg about the vertical through its origin, moved 1 cm
    real_pose = np.concatenate([pose[:3] + [0.01, 0.0, 0.0], quat_multiply(quat_from_yaw(np.radians(3.0)), pose[3:])])
    centre = pose_cloud(cloud, torch.tensor(pose[None], dtype=torch.float32))[0].detach().mean(0).double().numpy()
    cameras = cameras_around(centre)
    backends = args.backend or ["cpu"] + (["gsplat"] if gsplat_available() else [])
    runs = [tick_ms(cloud, pose, real_pose, cameras, backend, k, args.ticks) for backend in backends for k in (1, 2)]
    arm = None if args.no_arm else arm_beside(centre)
    if arm is not None and "cpu" in backends:
        runs += [tick_ms(cloud, pose, real_pose, cameras, "cpu", k, args.ticks, arm, layer)
                 for k in (1, 2) for layer in (True, False)]
    for run in runs:
        print(run, flush=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu only"
    print(json.dumps({"block": source, "gaussians": len(cloud), "cameras": len(cameras), "device": device, "runs": runs}))


if __name__ == "__main__":
    main()
