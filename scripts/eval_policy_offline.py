"""Offline evaluation of a policy checkpoint in the twin: N worlds in one Twin, one batched policy call per chunk.

    python scripts/eval_policy_offline.py --checkpoint out/policy/pose/last.pt --out docs/results/policy_pose.json

Start poses: the expert benchmark's 20 fixed ones (``tasks/pusht/start_poses.json``) + ``--random`` random ones
(``random_start_poses(cfg, n, seed)``). Each episode: block at its start pose, arm at q_start, the policy's chunks
through the waypoint scheduler at 60 Hz, at most ``--seconds`` of twin time. Success by ground truth: the block
within the task's goal tolerances at some tick (an evaluator stops the episode there); beside it the paper's rule,
the policy's own progress output > 0.9 at some tick. Both with Wilson 95 % intervals. Resumable: finished
episodes are kept in ``OUT.jsonl`` and skipped when run again. Last stdout line: the summary JSON (also in OUT).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from real_is_sim.policy.checkpoint import load_checkpoint
from real_is_sim.policy.observations import cell_from_yaml, renderer_for
from real_is_sim.policy.scheduler import WaypointScheduler

PROGRESS_DONE = 0.9  # the paper's offline success rule


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def run_batch(policy, renderer, twin, goal, starts: np.ndarray, seconds: float, seed: int) -> list[dict]:
    """Episodes from ``starts`` [N, 7] in the N worlds of ``twin``, all at once."""
    from real_is_sim_tasks.pusht import goal_errors

    n = len(starts)
    q_start = np.asarray(twin.task.robot.q_start, dtype=np.float64)
    twin.reset(object_poses=starts[:, None, :], robot_q=np.tile(q_start, (n, 1)))
    scheduler = WaypointScheduler(n, policy.cfg.waypoints, policy.cfg.horizon_s, 1.0 / twin.control_dt)
    generator = torch.Generator().manual_seed(seed)
    success_t = np.full(n, np.nan)
    progress_t = np.full(n, np.nan)
    ticks = int(round(seconds / twin.control_dt))
    for tick in range(ticks):
        envs = scheduler.needs_chunk()
        if len(envs):
            poses, q = twin.object_poses()[envs], twin.robot_q()[envs]
            images = renderer.render(poses, q) if renderer is not None else None
            scheduler.set_chunks(envs, policy.act(poses, q, images, generator=generator))
        twin.step(scheduler.step())
        t = (tick + 1) * twin.control_dt
        distance, yaw_error = goal_errors(twin.object_poses()[:, 0], goal)
        at_goal = (distance <= goal.position_tolerance) & (yaw_error <= goal.yaw_tolerance)
        success_t[np.isnan(success_t) & at_goal] = t
        progress_t[np.isnan(progress_t) & (scheduler.progress > PROGRESS_DONE)] = t
        if not np.any(np.isnan(success_t)):
            break  # every block reached the goal
    distance, yaw_error = goal_errors(twin.object_poses()[:, 0], goal)

    def seconds(t: float) -> float | None:
        return None if np.isnan(t) else round(float(t), 3)

    return [{"success": bool(not np.isnan(success_t[i])), "time_s": seconds(success_t[i]),
             "progress_success": bool(not np.isnan(progress_t[i])), "progress_time_s": seconds(progress_t[i]),
             "final_distance_m": round(float(distance[i]), 4), "final_yaw_error_rad": round(float(yaw_error[i]), 4)}
            for i in range(n)]


def summary(rows: list[dict], meta: dict) -> dict:
    n = len(rows)
    wins = sum(r["success"] for r in rows)
    progress_wins = sum(r["progress_success"] for r in rows)
    times = [r["time_s"] for r in rows if r["success"]]
    return {**meta, "episodes": n,
            "success_rate": round(wins / n, 4), "success_wilson95": [round(v, 4) for v in wilson_interval(wins, n)],
            "progress_success_rate": round(progress_wins / n, 4),
            "progress_success_wilson95": [round(v, 4) for v in wilson_interval(progress_wins, n)],
            "median_time_s": round(float(np.median(times)), 2) if times else None,
            "per_episode": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True, help="summary JSON; finished episodes go to OUT.jsonl")
    parser.add_argument("--worlds", type=int, default=20, help="worlds per batch (one Twin)")
    parser.add_argument("--random", type=int, default=20, help="random start poses after the 20 fixed ones")
    parser.add_argument("--random-seed", type=int, default=0, help="seed of the random start poses (0: the expert benchmark's)")
    parser.add_argument("--seconds", type=float, default=30.0, help="time limit per episode (twin time)")
    parser.add_argument("--seed", type=int, default=0, help="policy noise seed (per batch: seed + batch index)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import warp as wp

    from real_is_sim.bridge.config import load_bridge_cfg
    from real_is_sim.twin import Twin
    from real_is_sim_tasks.pusht.start_poses import load_start_poses, random_start_poses

    wp.config.log_level = wp.LOG_WARNING
    policy, state = load_checkpoint(args.checkpoint)
    cfg = cell_from_yaml(policy.cfg.cell)  # the cell the demonstrations were recorded in
    starts = np.concatenate([load_start_poses(), random_start_poses(cfg, args.random, args.random_seed)])
    labels = [f"fixed_{i}" for i in range(len(starts) - args.random)] + [f"random_{i}" for i in range(args.random)]
    renderer = renderer_for(policy.cfg.variant, policy.cfg.image_size, policy.cfg.cell, seed=args.seed) \
        if policy.cfg.uses_images else None
    twin_cfg = load_bridge_cfg("standin").twin  # the twin settings the demonstrations were collected with
    out = Path(args.out)
    done_path = out.with_suffix(".jsonl")
    done = {}
    if done_path.is_file():
        rows = map(json.loads, done_path.read_text().splitlines())
        done = {row["start"]: row for row in rows if row.get("checkpoint") == str(args.checkpoint)}
    todo = [i for i, label in enumerate(labels) if label not in done]
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    twin = None
    for batch_index, first in enumerate(range(0, len(todo), args.worlds)):
        ids = todo[first:first + args.worlds]
        if twin is None or twin.num_worlds != len(ids):
            twin = Twin(cfg, len(ids), twin_cfg)
        rows = run_batch(policy, renderer, twin, cfg.goal, starts[ids], args.seconds, args.seed + batch_index)
        with done_path.open("a") as f:
            for i, row in zip(ids, rows):
                row = {"start": labels[i], "checkpoint": str(args.checkpoint), "start_pose": starts[i].round(5).tolist(), **row}
                done[labels[i]] = row
                f.write(json.dumps(row) + "\n")
        print(f"batch {batch_index}: {sum(r['success'] for r in rows)}/{len(rows)} at the goal "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    meta = {"checkpoint": str(args.checkpoint), "variant": policy.cfg.variant, "training_steps": state["step"],
            "dataset": state.get("dataset", ""), "seconds_limit": args.seconds, "random_seed": args.random_seed,
            "policy_seed": args.seed, "success_rule": "block within the goal tolerances (ground truth) at some tick",
            "progress_rule": f"policy progress > {PROGRESS_DONE} at some tick"}
    result = summary([done[label] for label in labels], meta)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{policy.cfg.variant}: ground-truth success {result['success_rate']:.3f} "
          f"{result['success_wilson95']}, progress > 0.9: {result['progress_success_rate']:.3f} over {result['episodes']}")
    print(json.dumps({k: v for k, v in result.items() if k != "per_episode"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
