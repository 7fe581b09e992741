"""Offline vs online agreement over a checkpoint sweep, and significance of success-rate differences (docs/evaluation.md).

    python scripts/eval_agreement.py --offline out/eval/sweep_offline.json --online out/eval/sweep_online.json \
        --plot docs/img/eval_sweep.png
    python scripts/eval_agreement.py --compare out/eval/a.json out/eval/b.json [--rule ground_truth]

Agreement: Pearson r, Kendall tau-b and MMRV of the offline (S) vs online (R) success rates of the checkpoints both
files evaluated; a plot like the paper's Fig. 7. Compare: the first checkpoint of each file (or --checkpoints I J),
difference with the two-proportion z test and Fisher's exact test. Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys

from real_is_sim.errors import RealIsSimError
from real_is_sim.evaluation.agreement import compare_checkpoints, load_result, plot_sweep, sweep_agreement
from real_is_sim.evaluation.spec import RULES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--offline", help="offline result file (real-is-sim eval --mode offline)")
    parser.add_argument("--online", help="online result file of the same checkpoints")
    parser.add_argument("--rule", default="ground_truth", choices=RULES, help="success rule (online; offline too "
                                                                              "unless --offline-rule)")
    parser.add_argument("--offline-rule", choices=RULES, help="offline rule (e.g. progress: the paper's)")
    parser.add_argument("--plot", help="write the Fig. 7-like plot here")
    parser.add_argument("--all-offline-starts", action="store_true",
                        help="offline over all its start poses (default: only those the online run had)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two result files: is A's success different from B's?")
    parser.add_argument("--checkpoints", nargs=2, type=int, default=(0, 0), metavar=("I", "J"),
                        help="with --compare: the I-th checkpoint of A and the J-th of B (default 0 0)")
    args = parser.parse_args(argv)
    try:
        if args.compare:
            a, b = (load_result(p) for p in args.compare)
            out = compare_checkpoints(a["checkpoints"][args.checkpoints[0]], b["checkpoints"][args.checkpoints[1]], args.rule)
            for side, name in (("a", "A"), ("b", "B")):
                print(f"{name} {out[side + '_checkpoint']}: {out[side]['rate']:.3f} {out[side]['wilson95']} "
                      f"({out[side]['successes']}/{out[side]['n']})")
            print(f"difference {out['difference']:+.3f} ({args.rule}); two-proportion z p = {out['p_two_proportion']:.4f}, "
                  f"Fisher exact p = {out['p_fisher']:.4f}")
        else:
            if not (args.offline and args.online):
                parser.error("--offline and --online (or --compare A B)")
            out = sweep_agreement(load_result(args.offline), load_result(args.online), args.rule, args.offline_rule,
                                  same_starts=not args.all_offline_starts)
            for r in out["checkpoints"]:
                print(f"step {r['training_steps']:>7}: offline {r['offline']['rate']:.3f} {r['offline']['wilson95']}, "
                      f"online {r['online']['rate']:.3f} {r['online']['wilson95']}")
            print(f"Pearson r {out['pearson']}, Kendall tau {out['kendall_tau']}, MMRV {out['mmrv']}, "
                  f"max gap {out['max_abs_gap']}")
            if args.plot:
                out["plot"] = str(plot_sweep(out, args.plot))
    except RealIsSimError as exc:
        print(f"eval_agreement: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
