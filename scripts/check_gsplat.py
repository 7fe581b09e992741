"""On a CUDA machine with gsplat: our cpu backend against gsplat (classic mode), images and gradients,
and both speeds. Exits 1 on a mismatch, 2 without CUDA/gsplat. Last stdout line: one JSON object.

    pip install 'gsplat>=1.5'   # the [gsplat] extra
    python scripts/check_gsplat.py [--repeats 20]

Scenes: random Gaussians in front of a 96x72 camera (seeds 0-2) and, when the shared data is
present, the T-block at its scan pose in the two real 480x270 views.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from real_is_sim.render import gsplat_available, rasterization

IMAGE_TOLERANCE = 1e-3
GRADIENT_TOLERANCE = 1e-2  # relative to the largest entry: float32 sums in a different order on the GPU


def random_scene(seed: int, n: int = 300):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n, 3, generator=g) * torch.tensor([0.6, 0.45, 0.3]) + torch.tensor([0.0, 0.0, 2.5])
    params = [means, torch.randn(n, 4, generator=g), torch.rand(n, 3, generator=g) * 0.06 + 0.003,
              torch.rand(n, generator=g) * 0.9 + 0.05, torch.rand(n, 3, generator=g)]
    K = torch.tensor([[80.0, 0, 48.0], [0, 80.0, 36.0], [0, 0, 1]])[None]
    return params, torch.eye(4)[None], K, 96, 72


def tblock_scene():
    from real_is_sim.gaussians import load_object_cloud, pose_cloud
    from real_is_sim.paths import shared_data_dir
    from real_is_sim.render.real_check import load_demo_views

    data = shared_data_dir()
    if not (data / "objects" / "tblock.json").exists():
        return None
    cloud, scan_pose = load_object_cloud(data / "objects" / "tblock.json")
    views = load_demo_views(data / "sample_demos" / "0")
    means, quats = (t.detach() for t in pose_cloud(cloud, torch.tensor(scan_pose, dtype=torch.float32)[None]))
    return [means, quats, cloud.scales, cloud.opacities, cloud.colors], views.viewmats, views.Ks, views.width, views.height


def render_and_grad(backend, params, viewmats, Ks, width, height, weights):
    device = "cuda" if backend == "gsplat" else "cpu"
    leaves = [p.to(device).clone().requires_grad_() for p in params]
    rgb, alpha, _ = rasterization(*leaves, viewmats.to(device), Ks.to(device), width, height,
                                  backgrounds=torch.full((viewmats.shape[0], 3), 0.25, device=device), backend=backend)
    ((rgb * weights.to(device)).sum() + alpha.sum()).backward()
    return rgb.detach().cpu(), alpha.detach().cpu(), [p.grad.cpu() for p in leaves]


def timed_ms(backend, params, viewmats, Ks, width, height, weights, repeats):
    render_and_grad(backend, params, viewmats, Ks, width, height, weights)
    times = []
    for _ in range(repeats):
        if backend == "gsplat":
            torch.cuda.synchronize()
        start = time.perf_counter()
        render_and_grad(backend, params, viewmats, Ks, width, height, weights)
        if backend == "gsplat":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if not gsplat_available():
        print(json.dumps({"ok": False, "reason": "needs CUDA and gsplat (pip install 'gsplat>=1.5')"}))
        return 2
    import gsplat

    scenes = {f"random_{s}": random_scene(s) for s in range(3)}
    tblock = tblock_scene()
    if tblock is not None:
        scenes["tblock_real_views"] = tblock
    report, ok = {"gsplat_version": gsplat.__version__}, True
    for name, (params, viewmats, Ks, width, height) in scenes.items():
        weights = torch.rand(viewmats.shape[0], height, width, 3, generator=torch.Generator().manual_seed(1))
        ours = render_and_grad("cpu", params, viewmats, Ks, width, height, weights)
        theirs = render_and_grad("gsplat", params, viewmats, Ks, width, height, weights)
        image_err = max(float((ours[0] - theirs[0]).abs().max()), float((ours[1] - theirs[1]).abs().max()))
        grad_err = {field: float((a - b).abs().max() / b.abs().max().clamp(min=1e-12))
                    for field, a, b in zip(["means", "quats", "scales", "opacities", "colors"], ours[2], theirs[2])}
        passed = image_err < IMAGE_TOLERANCE and max(grad_err.values()) < GRADIENT_TOLERANCE
        ok &= passed
        report[name] = {
            "passed": passed, "image_max_abs_err": image_err, "grad_max_rel_err": grad_err,
            "cpu_fwd_bwd_ms": timed_ms("cpu", params, viewmats, Ks, width, height, weights, args.repeats),
            "gsplat_fwd_bwd_ms": timed_ms("gsplat", params, viewmats, Ks, width, height, weights, args.repeats),
        }
        print(name, report[name])
    report["ok"] = ok
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
