"""Benchmark of the cpu rasterizer on the real T-block views (480x270).

Prints one JSON object on its last stdout line:
- fwd_ms_per_camera, fwd_bwd_ms_per_camera: one real camera at the scan pose X_WB, the 498-Gaussian
  T-block, forward / forward + backward of an image loss (MSE against the real first frame);
- correction_ms: 3 cameras (the two real ones and a third orbited 90 degrees about the block) x 3
  iterations of forward + backward + an Adam step on copies of means and quats, all cameras in one call;
- the same with the tiles composited in 2 threads (``_threads``) and with 5,000 Gaussians
  (``_5k``: the block's Gaussians repeated ten times, jittered by 1 cm);
- window_fwd_bwd_ms, window_correction_ms: the correction sensor's shape of work, the same 3 cameras
  rendered as 140x120 windows centred on the block (principal points shifted, background images),
  one forward + backward / 3 iterations with Adam (``_threads``: in 2 threads; the sensor defaults to 1);
  ``_downscale2``: as the sensor with ``render_downscale=2`` (70x60 windows, frames area-averaged).
torch runs with one intra-op thread (on a loaded 2-core machine more threads make small ops far slower).

    python scripts/bench_render.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from real_is_sim.gaussians import load_object_cloud, pose_cloud
from real_is_sim.paths import shared_data_dir
from real_is_sim.render import rasterization
from real_is_sim_tasks.pusht.real_check import load_demo_views, orbited_viewmat, window_intrinsics
from real_is_sim.render.semantics import EPS2D
from real_is_sim.cli import quiet_warp


def best_ms(fn, repeats: int) -> float:
    fn()  # warm-up (Warp kernels load once)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = shared_data_dir()
    cloud, scan_pose = load_object_cloud(data / "objects" / "tblock.json")
    views = load_demo_views(data / "sample_demos" / "0")
    W, H = views.width, views.height
    means_w, quats_w = (t.detach() for t in pose_cloud(cloud, torch.tensor(scan_pose, dtype=torch.float32)[None]))
    # third camera: camera 0 orbited 90 degrees about the vertical through the block
    centre = means_w.mean(0).double().numpy()
    viewmats3 = torch.cat([views.viewmats, orbited_viewmat(views.viewmats[0], centre, np.pi / 2)[None]])
    Ks3 = torch.cat([views.Ks, views.Ks[:1]])
    frames = torch.tensor(np.stack(views.images), dtype=torch.float32) / 255.0
    targets3 = torch.cat([frames, frames[:1]])

    def gaussians(n_copies: int):
        g = torch.Generator().manual_seed(0)
        jitter = torch.randn(n_copies * len(cloud), 3, generator=g) * 0.01 * (n_copies > 1)
        return (means_w.repeat(n_copies, 1) + jitter, quats_w.repeat(n_copies, 1), cloud.scales.repeat(n_copies, 1),
                cloud.opacities.repeat(n_copies), cloud.colors.repeat(n_copies, 1))

    def per_camera(params, backward: bool) -> float:
        means, quats, scales, opacities, colors = params

        def run():
            for c in range(2):
                m, q = means.clone().requires_grad_(backward), quats.clone().requires_grad_(backward)
                rgb, _, _ = rasterization(m, q, scales, opacities, colors, views.viewmats[c:c + 1], views.Ks[c:c + 1],
                                          W, H, backend="cpu")
                if backward:
                    (rgb[0] - frames[c]).square().mean().backward()

        return best_ms(run, args.repeats) / 2

    def correction(params, threads: int) -> float:
        means, quats, scales, opacities, colors = params

        def run():
            m, q = means.clone().requires_grad_(True), quats.clone().requires_grad_(True)
            optimizer = torch.optim.Adam([m, q], lr=1e-3)
            for _ in range(3):
                optimizer.zero_grad()
                rgb, _, _ = rasterization(m, q, scales, opacities, colors, viewmats3, Ks3, W, H, backend="cpu",
                                          threads=threads)
                (rgb - targets3).square().mean().backward()
                optimizer.step()

        return best_ms(run, max(args.repeats // 4, 3))

    # the sensor's windows: principal points shifted so each camera sees the block centred in W_WIN x H_WIN
    W_WIN, H_WIN = 140, 120
    Ks_win = window_intrinsics(viewmats3, Ks3, centre, W_WIN, H_WIN)
    targets_win = torch.rand(3, H_WIN, W_WIN, 3, generator=torch.Generator().manual_seed(0))
    backgrounds_win = torch.full((3, H_WIN, W_WIN, 3), 0.4)

    def pooled(images: torch.Tensor, k: int) -> torch.Tensor:
        return torch.nn.functional.avg_pool2d(images.permute(0, 3, 1, 2), k).permute(0, 2, 3, 1).contiguous()

    def window(params, iterations: int, threads: int = 1, downscale: int = 1) -> float:
        means, quats, scales, opacities, colors = params
        # as the sensor with render_downscale: intrinsics / k, frames area-averaged, low-pass kept in camera pixels
        Ks = Ks_win.clone()
        Ks[:, :2] /= downscale
        targets, backgrounds = pooled(targets_win, downscale), pooled(backgrounds_win, downscale)

        def run():
            m, q = means.clone().requires_grad_(True), quats.clone().requires_grad_(True)
            optimizer = torch.optim.Adam([m, q], lr=1e-3)
            for _ in range(iterations):
                optimizer.zero_grad()
                rgb, _, _ = rasterization(m, q, scales, opacities, colors, viewmats3, Ks, W_WIN // downscale,
                                          H_WIN // downscale, backgrounds=backgrounds, backend="cpu", threads=threads,
                                          eps2d=EPS2D / downscale**2)
                (rgb - targets).square().mean().backward()
                if iterations > 1:
                    optimizer.step()

        return best_ms(run, args.repeats if iterations == 1 else max(args.repeats // 2, 3))

    block, big = gaussians(1), gaussians(10)
    result = {
        "n_gaussians": len(cloud),
        "resolution": [W, H],
        "fwd_ms_per_camera": round(per_camera(block, False), 2),
        "fwd_bwd_ms_per_camera": round(per_camera(block, True), 2),
        "correction_ms": round(correction(block, 1), 2),
        "correction_ms_threads": round(correction(block, 2), 2),
        "fwd_bwd_ms_per_camera_5k": round(per_camera(big, True), 2),
        "correction_ms_5k": round(correction(big, 1), 2),
        "correction_ms_5k_threads": round(correction(big, 2), 2),
        "window_fwd_bwd_ms": round(window(block, 1), 2),
        "window_correction_ms": round(window(block, 3), 2),
        "window_correction_ms_threads": round(window(block, 3, 2), 2),
        "window_correction_ms_downscale2": round(window(block, 3, 1, 2), 2),
        "window_correction_ms_downscale2_threads": round(window(block, 3, 2, 2), 2),
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
