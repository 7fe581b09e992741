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
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch

from real_is_sim.evaluation.stats import wilson_interval
from real_is_sim.policy.checkpoint import load_checkpoint
from real_is_sim.policy.observations import cell_from_yaml, renderer_for
from real_is_sim.policy.scheduler import WaypointScheduler

PROGRESS_DONE = 0.9  # the paper's offline success rule


class ReplayControl:
    """Control (``--control replay``): the demonstrations' commanded joints and progress replayed open loop, blind to
    the block: demonstration (first + k) mod 60 in world k. It answers the policy's calls (all worlds at once, every
    ``execute`` waypoints) with the demonstration's chunk at the time reached, through the same scheduler."""

    def __init__(self, policy_cfg, dataset_root: str, first: int, num_envs: int, execute: int) -> None:
        from real_is_sim.demos.dataset import load_dataset

        episodes = [e for e in load_dataset(dataset_root).episodes if e.success]
        self.cfg = policy_cfg
        self.episodes = [episodes[(first + k) % len(episodes)] for k in range(num_envs)]
        self.elapsed_s = 0.0
        self.call_s = execute * policy_cfg.horizon_s / policy_cfg.waypoints

    def act(self, object_poses, robot_q, images=None, generator=None, previous=None, noise=None) -> np.ndarray:
        from real_is_sim.policy.data import action_chunks

        assert len(robot_q) == len(self.episodes), "the replay answers all worlds at once"
        chunks = []
        for e in self.episodes:
            frame = np.searchsorted(e.t, min(self.elapsed_s, e.t[-1]))  # the frame at the time reached
            chunks.append(action_chunks(e.t, e.q_cmd, e.progress, np.array([frame]), self.cfg.waypoints,
                                        self.cfg.horizon_s)[0])
        self.elapsed_s += self.call_s
        return np.stack(chunks)


class HoldControl:
    """Control (``--control hold``): a constant policy, every waypoint the arm's start joints, progress 0."""

    def __init__(self, policy_cfg, q_start: np.ndarray) -> None:
        self.cfg, self.q_start = policy_cfg, np.asarray(q_start, dtype=np.float64)

    def act(self, object_poses, robot_q, images=None, generator=None, previous=None, noise=None) -> np.ndarray:
        chunk = np.concatenate([self.q_start, [0.0]])
        return np.tile(chunk, (len(robot_q), self.cfg.waypoints, 1))


def run_batch(policy, renderer, twin, goal, starts: np.ndarray, seconds: float, seed: int,
              execute: int | None = None, fixed_noise: bool = False) -> list[dict]:
    """Episodes from ``starts`` [N, 7] in the N worlds of ``twin``, all at once; the first ``execute`` waypoints
    of each chunk are run before the next policy call (None: all of them). ``fixed_noise``: each world draws its
    flow noise x0 once and starts every chunk from it (consecutive chunks keep to one mode), else fresh per call."""
    from real_is_sim_tasks.pusht import goal_errors

    n = len(starts)
    q_start = np.asarray(twin.task.robot.q_start, dtype=np.float64)
    twin.reset(object_poses=starts[:, None, :], robot_q=np.tile(q_start, (n, 1)))
    scheduler = WaypointScheduler(n, policy.cfg.waypoints, policy.cfg.horizon_s, 1.0 / twin.control_dt, execute)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn((n, policy.cfg.flow_length, 8), generator=generator) if fixed_noise else None
    success_t = np.full(n, np.nan)
    progress_t = np.full(n, np.nan)
    ticks = int(round(seconds / twin.control_dt))
    history = deque(maxlen=policy.cfg.history_frames + 1)  # [0]: the frame history_frames ticks ago (or the first)
    for tick in range(ticks):
        history.append((twin.object_poses(), twin.robot_q()))
        envs = scheduler.needs_chunk()
        if len(envs):
            (poses, q), (poses_before, q_before) = (history[-1], history[0])
            images = renderer.render(poses[envs], q[envs]) if renderer is not None else None
            scheduler.set_chunks(envs, policy.act(poses[envs], q[envs], images, generator=generator,
                                                  previous=(poses_before[envs], q_before[envs]),
                                                  noise=None if noise is None else noise[envs]))
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
    parser.add_argument("--execute", type=int, default=None,
                        help="waypoints of each chunk run before the next policy call (receding horizon; default all)")
    parser.add_argument("--fixed-noise", action="store_true",
                        help="one flow noise x0 per episode for all its chunks (default: fresh noise per call)")
    parser.add_argument("--control", choices=("replay", "hold"), default=None,
                        help="instead of the policy: a demonstration replayed open loop, or the arm held at q_start "
                             "(the checkpoint gives the cell and dataset)")
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
    execute = args.execute or policy.cfg.waypoints
    out = Path(args.out)
    done_path = out.with_suffix(".jsonl")
    done = {}
    if done_path.is_file():
        rows = map(json.loads, done_path.read_text().splitlines())
        done = {row["start"]: row for row in rows
                if row.get("checkpoint") == str(args.checkpoint)
                and row.get("execute_waypoints", policy.cfg.waypoints) == execute
                and row.get("control") == args.control and row.get("fixed_noise", False) == args.fixed_noise}
    todo = [i for i, label in enumerate(labels) if label not in done]
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    twin = None
    for batch_index, first in enumerate(range(0, len(todo), args.worlds)):
        ids = todo[first:first + args.worlds]
        if twin is None or twin.num_worlds != len(ids):
            twin = Twin(cfg, len(ids), twin_cfg)
        actor = policy
        if args.control == "replay":
            actor = ReplayControl(policy.cfg, state["dataset"], first, len(ids), execute)
        elif args.control == "hold":
            actor = HoldControl(policy.cfg, cfg.robot.q_start)
        rows = run_batch(actor, renderer, twin, cfg.goal, starts[ids], args.seconds, args.seed + batch_index,
                         execute, args.fixed_noise)
        with done_path.open("a") as f:
            for i, row in zip(ids, rows):
                row = {"start": labels[i], "checkpoint": str(args.checkpoint),
                       "execute_waypoints": execute, "control": args.control,
                       "fixed_noise": args.fixed_noise, "start_pose": starts[i].round(5).tolist(), **row}
                done[labels[i]] = row
                f.write(json.dumps(row) + "\n")
        print(f"batch {batch_index}: {sum(r['success'] for r in rows)}/{len(rows)} at the goal "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    meta = {"checkpoint": str(args.checkpoint), "variant": policy.cfg.variant, "training_steps": state["step"],
            "dataset": state.get("dataset", ""), "seconds_limit": args.seconds, "random_seed": args.random_seed,
            "policy_seed": args.seed, "execute_waypoints": execute, "control": args.control,
            "fixed_noise": args.fixed_noise,
            "success_rule": "block within the goal tolerances (ground truth) at some tick",
            "progress_rule": f"policy progress > {PROGRESS_DONE} at some tick"}
    result = summary([done[label] for label in labels], meta)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.control or policy.cfg.variant}: ground-truth success {result['success_rate']:.3f} "
          f"{result['success_wilson95']}, progress > 0.9: {result['progress_success_rate']:.3f} over {result['episodes']}")
    print(json.dumps({k: v for k, v in result.items() if k != "per_episode"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
