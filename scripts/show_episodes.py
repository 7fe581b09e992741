"""Chosen offline episodes of an evaluation, run again and recorded for rerun (docs/evaluation.md).

    python scripts/show_episodes.py --results out/eval/run.json --out out/episodes [--episodes I ...] [--failures N]
                                    [--successes N] [--image-every 6] [--image-size 256]

Reads the evaluation's episode rows (RESULTS with suffix .jsonl), picks ``--episodes`` (row indices) and/or the first
``--failures`` / ``--successes`` by ground truth, runs each again alone in the twin and writes OUT/<start>_t<trial>.rrd
(open with ``rerun FILE``): block, goal, pusher, arm, errors to the goal, the virtual static camera. Each episode's
outcome is compared with its row (``reproduced``). The last stdout line is one JSON object: ``episodes``.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from real_is_sim.cli import quiet_warp
from real_is_sim.errors import RealIsSimError


def main() -> int:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="an evaluation's summary JSON or its .jsonl of episode rows")
    parser.add_argument("--out", required=True)
    parser.add_argument("--episodes", type=int, nargs="*", default=[], metavar="I", help="row indices")
    parser.add_argument("--failures", type=int, default=0, help="the first N episodes that failed by ground truth")
    parser.add_argument("--successes", type=int, default=0, help="the first N that succeeded")
    parser.add_argument("--image-every", type=int, default=6, help="ticks between static-camera images")
    parser.add_argument("--image-size", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from real_is_sim.evaluation.episode_view import load_rows, record_episode

    try:
        rows = load_rows(args.results)
        bad = [i for i in args.episodes if not 0 <= i < len(rows)]
        if bad:
            raise RealIsSimError(f"--episodes {bad} out of range: {args.results} has {len(rows)} rows")
        chosen = list(args.episodes)
        chosen += [i for i, r in enumerate(rows) if not r.get("ground_truth")][:args.failures]
        chosen += [i for i, r in enumerate(rows) if r.get("ground_truth")][:args.successes]
        chosen = list(dict.fromkeys(chosen))
        if not chosen:
            raise RealIsSimError("no episode chosen: give --episodes, --failures or --successes")
        results = []
        for i in chosen:
            result = {"row": i, **record_episode(rows[i], args.out, args.image_every, args.image_size)}
            print(f"row {i}: {result['rerun']} ground truth {result['ground_truth']} (row: {result['row_ground_truth']}), "
                  f"same outcome {result['same_outcome']}, reproduced {result['reproduced']}", flush=True)
            results.append(result)
    except RealIsSimError as exc:
        print(f"show_episodes: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"episodes": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
