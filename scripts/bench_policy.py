"""Policy timings on this CPU: inference per variant for 1 and 20 environments (10 Euler steps; camera variants
include rendering the observation images of all environments), one training step, parameter counts.

    python scripts/bench_policy.py [--trunk mlp|unet] [--hidden N] [--basis K] [--image-size S] [--threads T]

Prints one JSON object on its last line: ``inference_ms`` [{variant, batch_1, batch_20}] (wall clock),
``inference_cpu_ms`` (the same in this process's CPU time), ``train_step_ms`` [{variant, batch_size, ms, cpu_ms}],
``params`` [{variant, params}], and the 1-minute load average. Untrained weights (timing does not depend on them);
medians of ``--repeats`` runs after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch

from real_is_sim.policy.config import VARIANTS, PolicyCfg, TrainCfg
from real_is_sim.policy.flow import image_tensor, state_vector, untrained_policy
from real_is_sim.policy.observations import ObservationRenderer
from real_is_sim.policy.train import shift_images


def median_ms(fn, repeats: int) -> tuple[float, float]:
    """(wall, this process's CPU time) in ms, medians; on a shared machine the CPU time is the steadier figure."""
    fn()  # warm-up: kernel loads, allocations
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return round(1000 * statistics.median(wall), 2), round(1000 * statistics.median(cpu), 2)


def states(batch: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Block poses spread over the table, joints near the start pose."""
    from real_is_sim_tasks.pusht import load_pusht_cfg

    q_start = np.asarray(load_pusht_cfg().robot.q_start)
    poses = np.zeros((batch, 1, 7))
    poses[:, 0, :2] = rng.uniform([0.4, -0.15], [0.6, 0.2], (batch, 2))
    yaw = rng.uniform(-np.pi, np.pi, batch)
    poses[:, 0, 5], poses[:, 0, 6] = np.sin(yaw / 2), np.cos(yaw / 2)
    return poses, q_start + rng.normal(0, 0.05, (batch, 7))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trunk", default=PolicyCfg.trunk, choices=["mlp", "unet"])
    parser.add_argument("--hidden", type=int, default=PolicyCfg.hidden)
    parser.add_argument("--basis", type=int, default=PolicyCfg.basis, help="DCT coefficients (0: raw waypoints)")
    parser.add_argument("--image-size", type=int, default=PolicyCfg.image_size)
    parser.add_argument("--batch-size", type=int, default=TrainCfg.batch_size, help="training batch")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the tests and evaluation use 1)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    inference, inference_cpu, train_step, params = [], [], [], []
    for variant in args.variants:
        cfg = PolicyCfg(variant=variant, trunk=args.trunk, hidden=args.hidden, basis=args.basis, image_size=args.image_size)
        torch.manual_seed(0)
        policy = untrained_policy(cfg)
        renderer = ObservationRenderer(variant, cfg.image_size) if cfg.uses_images else None
        row, row_cpu = {"variant": variant}, {"variant": variant}
        for batch in (1, 20):
            poses, q = states(batch, rng)

            def act():
                images = renderer.render(poses, q) if renderer else None  # the N observation images, every call
                return policy.act(poses, q, images, generator=torch.Generator().manual_seed(0))

            row[f"batch_{batch}"], row_cpu[f"batch_{batch}"] = median_ms(act, args.repeats)
        inference.append(row)
        inference_cpu.append(row_cpu)

        poses, q = states(args.batch_size, rng)
        state = state_vector(variant, poses, q)
        images = image_tensor(renderer.render(poses[:1], q[:1]).repeat(args.batch_size, 0)) if renderer else None
        chunks = torch.randn(args.batch_size, cfg.waypoints, 8)
        optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
        generator = torch.Generator().manual_seed(0)
        policy.train()

        def step():
            image = shift_images(images, TrainCfg.image_shift, generator) if images is not None else None
            loss = policy.loss(state, image, chunks, generator)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        wall, cpu = median_ms(step, args.repeats)
        train_step.append({"variant": variant, "batch_size": args.batch_size, "ms": wall, "cpu_ms": cpu})
        params.append({"variant": variant, "params": sum(p.numel() for p in policy.parameters())})
        print(f"{variant:14s} inference {row['batch_1']:7.2f} ms (1 env) {row['batch_20']:7.2f} ms (20 envs); "
              f"(CPU {row_cpu['batch_1']:.2f} / {row_cpu['batch_20']:.2f}); train step {train_step[-1]['ms']:7.1f} ms "
              f"(CPU {cpu:.1f}, batch {args.batch_size}); {params[-1]['params']} params",
              flush=True)
    print(json.dumps({"trunk": args.trunk, "hidden": args.hidden, "basis": args.basis, "image_size": args.image_size,
                      "euler_steps": PolicyCfg.euler_steps,
                      "threads": args.threads, "load_average_1min": round(os.getloadavg()[0], 2), "inference_ms": inference,
                      "inference_cpu_ms": inference_cpu, "train_step_ms": train_step, "params": params}))


if __name__ == "__main__":
    main()
