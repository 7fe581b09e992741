"""Rate of the online loop (frames -> sensor -> actuator -> physics -> follower) on this machine.

    python scripts/bench_loop.py            # 3 cameras at 480x270, EG settings, + a sweep for what holds 60 Hz

Frames come from a stand-in real world (its own rendering and physics are reality's cost, not the loop's, and
are not timed). Reports the loop's ticks per second, the per-stage profile, and, over a sweep of camera count and
Adam iterations, the largest setting that holds 60 Hz. Last stdout line: one JSON object.
"""

import argparse
import dataclasses
import json
import time

import numpy as np
import torch

from real_is_sim.bridge import BridgeCfg, build_bridge
from real_is_sim.bridge.config import CamerasCfg
from real_is_sim_tasks.pusht.config import load_pusht_cfg
from real_is_sim.cli import quiet_warp


def measure(task, cameras: int, iterations: int, ticks: int, render_threads: int, render_downscale: int = 1, width=480,
            height=270) -> dict:
    base = BridgeCfg()
    sensor = dataclasses.replace(base.sensor, iterations=iterations, render_threads=render_threads,
                                 render_downscale=render_downscale)
    cfg = dataclasses.replace(base, cameras=CamerasCfg(num_cameras=cameras, width=width, height=height),
                              initial_offset=[0.01, 0.0, 0.05],
                              sensor=sensor)
    session = build_bridge(cfg, task)
    for _ in range(5):  # warm up (kernel loads, first allocations)
        session.tick()
    loop_s, stages = [], {}
    for _ in range(ticks):
        begin = time.perf_counter()
        report = session.loop.tick()
        loop_s.append(time.perf_counter() - begin)
        for stage, seconds in report.seconds.items():
            stages.setdefault(stage, []).append(seconds)
        session.standin.advance()
    median = float(np.median(loop_s))
    return {
        "cameras": cameras, "iterations": iterations, "render_threads": render_threads,
        "render_downscale": render_downscale, "width": width, "height": height,
        "hz": round(1.0 / median, 1), "tick_ms_median": round(median * 1e3, 2),
        "tick_ms_p95": round(float(np.percentile(loop_s, 95)) * 1e3, 2),
        "stage_ms_median": {k: round(float(np.median(v)) * 1e3, 2) for k, v in stages.items()},
    }


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=60)
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--render-threads", type=int, default=1, help="the sensor's rasterizer threads")
    parser.add_argument("--render-downscale", type=int, default=1, help="the sensor renders at 1/N resolution")
    args = parser.parse_args()
    torch.set_num_threads(1)  # small tensors: thread start-up costs more than it saves on 2 cores
    task = load_pusht_cfg()
    result = measure(task, 3, 3, args.ticks, args.render_threads, args.render_downscale)
    print("main setting", result, flush=True)
    if not args.no_sweep:
        sweep = []
        for cameras, iterations in ((1, 1), (2, 1), (3, 1), (1, 3), (2, 2)):
            sweep.append(measure(task, cameras, iterations, max(20, args.ticks // 2), args.render_threads,
                                 args.render_downscale))
            print("sweep", sweep[-1], flush=True)
        holding = [s for s in sweep + [result] if s["hz"] >= 60.0]
        result["sweep"] = sweep
        result["largest_setting_at_60hz"] = (
            max(holding, key=lambda s: s["cameras"] * s["iterations"]) if holding else None
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
