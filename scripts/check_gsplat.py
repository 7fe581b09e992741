"""Our cpu backend against gsplat (classic mode): images, gradients and the speed of both.

On a CUDA machine with gsplat and this package installed, one command does it all:

    pip install 'real-is-sim[gsplat]'
    python scripts/check_gsplat.py [--repeats 20]

A GPU machine without Warp or PyAV (a bare cloud box) can run the gsplat half alone, on scenes made here:

    python scripts/check_gsplat.py --export-scenes scenes.pt                  # here (needs the data)
    python scripts/check_gsplat.py --gsplat-only scenes.pt --out gsplat_out   # on the GPU machine
    python scripts/check_gsplat.py --compare scenes.pt gsplat_out             # here: ours on the same inputs

(``--out`` gets one file per scene, each a few MB, so a size-capped copy back still carries them.)

Scenes: random Gaussians in front of a 96x72 camera (seeds 0-2), two edge cases (every Gaussian behind the
camera, no Gaussians: background, alpha 0, zero gradients) and, when the shared data is present, the
T-block at its scan pose in 3 cameras (the two real 480x270 views and one orbited 90 degrees about the
block, as in scripts/bench_render.py): the full views, the correction sensor's 140x120 windows over
background images, and 5,000 Gaussians (the block's ten times, jittered by 1 cm). For each scene and
backend: one forward + backward of an image loss (``fwd_bwd_ms``) and ``correction_ms``, 3 iterations of
forward + backward + an Adam step on copies of means and quats (the Embodied Gaussians settings).
Images agree within 1e-3 but for rare pixels at the 1/255 alpha cut-off (see CUTOFF_FLIP_ERROR), gradients
within 1e-2 of the largest entry. Exit status 1 on a mismatch, 2 when a needed backend is missing. Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from real_is_sim.render import gsplat_available, rasterization

IMAGE_TOLERANCE = 1e-3
GRADIENT_TOLERANCE = 1e-2  # relative to the largest entry: float32 sums in another order, gsplat's fast math
# A Gaussian whose alpha at a pixel lies within float32 rounding of the 1/255 cut-off is kept by one backend
# and skipped by the other: that pixel differs by up to 1/255 (seen once in 388,800 pixels, alpha 1.00003/255,
# with and without gsplat's fast math). Such pixels pass while they are this rare.
CUTOFF_FLIP_ERROR = 1.0 / 255 + IMAGE_TOLERANCE
CUTOFF_FLIP_FRACTION = 1e-4
FIELDS = ("means", "quats", "scales", "opacities", "colors")


def random_scene(seed: int, n: int = 300) -> dict:
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n, 3, generator=g) * torch.tensor([0.6, 0.45, 0.3]) + torch.tensor([0.0, 0.0, 2.5])
    params = [means, torch.randn(n, 4, generator=g), torch.rand(n, 3, generator=g) * 0.06 + 0.003,
              torch.rand(n, generator=g) * 0.9 + 0.05, torch.rand(n, 3, generator=g)]
    K = torch.tensor([[80.0, 0, 48.0], [0, 80.0, 36.0], [0, 0, 1]])[None]
    return scene(params, torch.eye(4)[None], K, 96, 72, torch.full((1, 3), 0.25))


def edge_scenes() -> dict:
    """What must render as background with alpha 0 and zero gradients on both backends."""
    params, viewmats, Ks, width, height = (random_scene(3)[k] for k in ("params", "viewmats", "Ks", "width", "height"))
    behind = dict(params, means=params["means"] * torch.tensor([1.0, 1.0, -1.0]))  # every Gaussian behind the camera
    empty = {k: v[:0] for k, v in params.items()}
    flat = torch.full((1, 3), 0.25)
    return {"all_behind": scene(list(behind.values()), viewmats, Ks, width, height, flat),
            "no_gaussians": scene(list(empty.values()), viewmats, Ks, width, height, flat)}


def scene(params, viewmats, Ks, width: int, height: int, backgrounds) -> dict:
    C = viewmats.shape[0]
    weights = torch.rand(C, height, width, 3, generator=torch.Generator().manual_seed(1))
    return {"params": dict(zip(FIELDS, params)), "viewmats": viewmats, "Ks": Ks, "width": width, "height": height,
            "backgrounds": backgrounds, "weights": weights}


def tblock_scenes() -> dict:
    from real_is_sim.gaussians import load_object_cloud, pose_cloud
    from real_is_sim.paths import shared_data_dir
    from real_is_sim_tasks.pusht.real_check import load_demo_views, orbited_viewmat, window_intrinsics

    data = shared_data_dir()
    if not (data / "objects" / "tblock.json").exists():
        print(f"no T-block data under {data}: random scenes only", file=sys.stderr)
        return {}
    cloud, scan_pose = load_object_cloud(data / "objects" / "tblock.json")
    views = load_demo_views(data / "sample_demos" / "0")
    means, quats = (t.detach() for t in pose_cloud(cloud, torch.tensor(scan_pose, dtype=torch.float32)[None]))
    block = [means, quats, cloud.scales, cloud.opacities, cloud.colors]
    centre = means.mean(0).double().numpy()
    viewmats = torch.cat([views.viewmats, orbited_viewmat(views.viewmats[0], centre, np.pi / 2)[None]])
    Ks = torch.cat([views.Ks, views.Ks[:1]])
    flat = torch.full((3, 3), 0.25)
    jitter = torch.randn(10 * len(cloud), 3, generator=torch.Generator().manual_seed(0)) * 0.01
    big = [means.repeat(10, 1) + jitter, quats.repeat(10, 1), cloud.scales.repeat(10, 1), cloud.opacities.repeat(10),
           cloud.colors.repeat(10, 1)]
    window_backgrounds = torch.rand(3, 120, 140, 3, generator=torch.Generator().manual_seed(2))
    return {
        "tblock_3_views": scene(block, viewmats, Ks, views.width, views.height, flat),
        "tblock_3_windows": scene(block, viewmats, window_intrinsics(viewmats, Ks, centre, 140, 120), 140, 120,
                                  window_backgrounds),
        "tblock_5k_3_views": scene(big, viewmats, Ks, views.width, views.height, flat),
    }


def make_scenes() -> dict:
    return {**{f"random_{s}": random_scene(s) for s in range(3)}, **edge_scenes(), **tblock_scenes()}


def _render(backend: str, s: dict, params: dict):
    device = params["means"].device
    return rasterization(*(params[k] for k in FIELDS), s["viewmats"].to(device), s["Ks"].to(device), s["width"],
                         s["height"], backgrounds=s["backgrounds"].to(device), backend=backend)


def _on_device(backend: str, tensors: dict) -> dict:
    return {k: v.to("cuda" if backend == "gsplat" else "cpu") for k, v in tensors.items()}


def render_and_grad(backend: str, s: dict) -> dict:
    leaves = {k: v.clone().requires_grad_() for k, v in _on_device(backend, s["params"]).items()}
    rgb, alpha, _ = _render(backend, s, leaves)
    ((rgb * s["weights"].to(rgb.device)).sum() + alpha.sum()).backward()
    return {"rgb": rgb.detach().cpu(), "alpha": alpha.detach().cpu(),
            "grads": {k: v.grad.cpu() for k, v in leaves.items()}}


def correction(backend: str, s: dict) -> None:
    """3 iterations of forward + backward + Adam on copies of means and quats, as the correction sensor."""
    params = _on_device(backend, s["params"])
    params["means"], params["quats"] = (params[k].clone().requires_grad_() for k in ("means", "quats"))
    target = s["weights"].to(params["means"].device)
    optimizer = torch.optim.Adam([params["means"], params["quats"]], lr=1e-3)
    for _ in range(3):
        optimizer.zero_grad()
        rgb, _, _ = _render(backend, s, params)
        (rgb - target).square().mean().backward()
        optimizer.step()


def median_ms(backend: str, fn, repeats: int) -> float:
    sync = torch.cuda.synchronize if backend == "gsplat" else (lambda: None)
    fn()  # warm-up: Warp / CUDA kernels load once
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def run_backend(backend: str, scenes: dict, repeats: int) -> dict:
    results = {}
    for name, s in scenes.items():
        results[name] = render_and_grad(backend, s)
        results[name]["fwd_bwd_ms"] = median_ms(backend, lambda: render_and_grad(backend, s), repeats)
        results[name]["correction_ms"] = median_ms(backend, lambda: correction(backend, s), max(repeats // 2, 3))
        print(f"{backend} {name}: fwd_bwd {results[name]['fwd_bwd_ms']:.2f} ms, "
              f"correction {results[name]['correction_ms']:.2f} ms", file=sys.stderr)
    return results


def compare(ours: dict, theirs: dict) -> dict:
    pixel_err = torch.maximum((ours["rgb"] - theirs["rgb"]).abs().amax(-1), (ours["alpha"] - theirs["alpha"]).abs()[..., 0])
    image_err, flips = float(pixel_err.max()), int((pixel_err > IMAGE_TOLERANCE).sum())
    grad_err = {k: float((ours["grads"][k] - g).abs().max() / g.abs().max().clamp(min=1e-12)) if g.numel() else 0.0
                for k, g in theirs["grads"].items()}
    image_ok = image_err <= CUTOFF_FLIP_ERROR and flips <= CUTOFF_FLIP_FRACTION * pixel_err.numel()
    return {"passed": image_ok and max(grad_err.values()) < GRADIENT_TOLERANCE,
            "image_max_abs_err": image_err, "pixels_over_image_tolerance": flips, "pixels": pixel_err.numel(),
            "grad_max_rel_err": grad_err,
            "cpu_fwd_bwd_ms": round(ours["fwd_bwd_ms"], 3), "gsplat_fwd_bwd_ms": round(theirs["fwd_bwd_ms"], 3),
            "cpu_correction_ms": round(ours["correction_ms"], 3),
            "gsplat_correction_ms": round(theirs["correction_ms"], 3)}


def report(scenes: dict, cpu: dict, gs: dict, header: dict) -> int:
    result, ok = dict(header), True
    for name in scenes:
        result[name] = compare(cpu[name], gs[name])
        ok &= result[name]["passed"]
        print(name, result[name], file=sys.stderr)
    result["ok"] = ok
    print(json.dumps(result))
    return 0 if ok else 1


def gsplat_header() -> dict:
    import gsplat

    return {"gsplat_version": gsplat.__version__, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--export-scenes", metavar="FILE", help="write the scenes (inputs) to FILE and stop")
    mode.add_argument("--gsplat-only", metavar="SCENES", help="render SCENES with gsplat alone; write to --out")
    mode.add_argument("--compare", nargs=2, metavar=("SCENES", "RESULTS"),
                      help="our cpu backend on SCENES against the gsplat results --gsplat-only wrote to RESULTS")
    parser.add_argument("--out", default="gsplat_out", help="the folder --gsplat-only writes (one file per scene)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the sensor and bench_render: small torch ops are slower in more threads here

    if args.export_scenes:
        torch.save(make_scenes(), args.export_scenes)
        return 0
    if args.compare:
        scenes = torch.load(args.compare[0], weights_only=True)
        results = Path(args.compare[1])
        missing = [f"{name}.pt" for name in scenes if not (results / f"{name}.pt").is_file()]
        if missing or not (results / "header.json").is_file():
            print(json.dumps({"ok": False, "reason": f"{results} lacks {missing or ['header.json']}: did --gsplat-only finish?"}))
            return 2
        gs = {name: torch.load(results / f"{name}.pt", weights_only=True) for name in scenes}
        header = json.loads((results / "header.json").read_text())
        return report(scenes, run_backend("cpu", scenes, args.repeats), gs, header)
    if not gsplat_available():
        print(json.dumps({"ok": False, "reason": "needs CUDA and gsplat (pip install 'real-is-sim[gsplat]')"}))
        return 2
    if args.gsplat_only:
        scenes = torch.load(args.gsplat_only, weights_only=True)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "header.json").write_text(json.dumps(gsplat_header()))
        for name, s in scenes.items():  # saved one by one: a scene that takes gsplat down keeps the others
            torch.save(run_backend("gsplat", {name: s}, args.repeats)[name], out / f"{name}.pt")
        print(json.dumps({"ok": True, "wrote": str(out), **gsplat_header()}))
        return 0
    scenes = make_scenes()
    return report(scenes, run_backend("cpu", scenes, args.repeats), run_backend("gsplat", scenes, args.repeats),
                  gsplat_header())


if __name__ == "__main__":
    sys.exit(main())
