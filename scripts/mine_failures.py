"""Failure mining: where does a policy get stuck? Start poses for targeted demonstrations (docs/evaluation.md).

    python scripts/mine_failures.py --checkpoint CKPT --out out/mining/first30.json [--random 100] [--random-seed 200]
                                    [--clusters 30] [--trials 1] [--seconds 30] [--execute 16] [--tempo T] [--seed 0]

Runs the policy offline from ``--random`` random start poses (``random_start_poses(cell, n, --random-seed)``; keep the
seed away from the evaluation's 0 and the demonstrations' 100), keeps the block pose where each failed episode
stalled (or ended), clusters the valid ones and writes one start pose per cluster to OUT (a start-pose file for
``scripts/collect.py --start-poses``), every episode's outcome to OUT with suffix .rows.json. The last stdout line is
one JSON object: episodes, successes, failures, stalled, candidates, clusters.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from real_is_sim.cli import quiet_warp


def main() -> int:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--random", type=int, default=100)
    parser.add_argument("--random-seed", type=int, default=200)
    parser.add_argument("--clusters", type=int, default=30)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--execute", type=int, default=16)
    parser.add_argument("--tempo", type=float, help="chunks this many times faster than demonstrated, as the "
                        "evaluation runs the policy (default: the checkpoint's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from real_is_sim.errors import RealIsSimError
    from real_is_sim.evaluation.mining import mine, write_start_poses
    from real_is_sim.evaluation.spec import EvalSpec
    from real_is_sim_tasks.pusht.start_poses import load_start_poses

    fixed = len(load_start_poses())  # the evaluation's own start poses come first in the list: skipped
    try:
        spec = EvalSpec([args.checkpoint], protocol=None, random_poses=args.random, random_seed=args.random_seed,
                        poses=list(range(fixed, fixed + args.random)), trials=args.trials, seconds=args.seconds,
                        seed=args.seed, worlds=args.worlds, execute=args.execute, tempo=args.tempo)
    except RealIsSimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = mine(spec, args.clusters)
    settings = {"random": args.random, "random_seed": args.random_seed, "trials": args.trials, "seconds": args.seconds,
                "execute": args.execute, "tempo": args.tempo, "seed": args.seed, "clusters": args.clusters}
    write_start_poses(args.out, result["start_poses"], {"mined_from": args.checkpoint, "settings": settings})
    args.out.with_suffix(".rows.json").write_text(json.dumps(result["rows"], indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("rows", "start_poses")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
