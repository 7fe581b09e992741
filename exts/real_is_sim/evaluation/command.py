"""``real-is-sim eval`` (and ``scripts/eval_offline.py``): arguments and the command (docs/evaluation.md)."""

from __future__ import annotations

import json
from pathlib import Path

from real_is_sim.errors import ConfigError


def add_eval_arguments(p) -> None:
    from real_is_sim.evaluation.controls import CONTROLS
    from real_is_sim.evaluation.run import EXECUTORS
    from real_is_sim.evaluation.spec import APPEARANCES, MODES, PROTOCOLS

    p.add_argument("--checkpoint", nargs="+", required=True, metavar="CKPT",
                   help="checkpoint files, or run directories (every step_*.pt in them, in order: a sweep)")
    p.add_argument("--out", required=True, help="summary JSON; finished episodes go to OUT with suffix .jsonl")
    p.add_argument("--protocol", default="quick", choices=tuple(PROTOCOLS),
                   help="quick: offline the 20 fixed start poses x 1 trial, 30 s; online 4 of them, 20 s, 2 cameras at "
                        "240x135; paper: 20 x 3, 30 s (>= 6 checkpoints for a sweep). Explicit --trials/--seconds/"
                        "--random/--start-poses/--poses make the run 'custom'")
    p.add_argument("--mode", default="offline", choices=MODES,
                   help="offline: N worlds of one twin, no correction; online: the full loop against the stand-in")
    p.add_argument("--start-poses", default="", help="start-pose file (default: tasks/pusht/start_poses.json)")
    p.add_argument("--random", type=int, help="random start poses after the file's")
    p.add_argument("--random-seed", type=int, default=0, help="seed of the random start poses")
    p.add_argument("--poses", type=int, nargs="+", metavar="I", help="only these start poses (indices into the list)")
    p.add_argument("--trials", type=int, help="trials per start pose")
    p.add_argument("--seconds", type=float, help="time limit per episode (twin time)")
    p.add_argument("--seed", type=int, default=0, help="evaluation seed (each episode's seed comes from it, its start "
                                                       "pose and its trial)")
    p.add_argument("--worlds", type=int, default=20, help="offline: worlds per batch (one Twin)")
    p.add_argument("--execute", type=int, help="waypoints of each chunk run before the next policy call (default all)")
    p.add_argument("--noise-scale", type=float, help="the flow's start noise x this (default: the checkpoint's, 1)")
    p.add_argument("--tempo", type=float, help="run chunks this many times faster than demonstrated (default: the "
                                               "checkpoint's, 1); the twin's arm keeps to its joint speed limits")
    p.add_argument("--appearance", default="twin", choices=APPEARANCES,
                   help="online: how the stand-in looks. twin: the twin's own Gaussians, background, calibration and "
                        "exposure (a best case for the sensor); realistic: every HiddenAppearance knob on "
                        "(docs/fidelity.md), the honest setting; realistic_calibrated: that, the cameras hand-eye "
                        "calibrated before each episode (cameras.hand_eye, docs/cameras.md)")
    p.add_argument("--control", choices=CONTROLS,
                   help="offline, instead of the policy: a demonstration replayed open loop (start pose k: "
                        "demonstration k), the arm held at q_start, or the scripted expert; the checkpoint gives the "
                        "cell and dataset")
    p.add_argument("--executor", default="local", choices=EXECUTORS, help="local: in this process; ray: one Ray "
                                                                          "task per batch (online: per episode)")
    p.add_argument("--address", help="ray: a running cluster's address (default: start Ray here, loopback only)")
    p.add_argument("--num-cpus", type=int, help="ray: CPUs of the local Ray (default: all)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per process")
    p.add_argument("overrides", nargs="*", help="online: BridgeCfg overrides, e.g. cameras.num_cameras=2")


def expand_checkpoints(items: list[str]) -> list[str]:
    """Files as given; a directory gives its step_*.pt files in order."""
    out = []
    for item in items:
        path = Path(item)
        if "=" in item and not path.exists():
            raise ConfigError(f"--checkpoint {item}: an override? --checkpoint takes every word after it; give the "
                              f"overrides before --checkpoint or after another option")
        if path.is_dir():
            steps = sorted(path.glob("step_*.pt"))
            if not steps:
                raise ConfigError(f"--checkpoint {item}: a directory without step_*.pt checkpoints")
            out += [str(s) for s in steps]
        else:
            out.append(str(path))
    return out


def spec_from_args(args):
    from real_is_sim.evaluation.spec import EvalSpec

    custom = {k: v for k, v in (("trials", args.trials), ("seconds", args.seconds), ("random_poses", args.random),
                                ("poses", args.poses)) if v is not None}
    spec = EvalSpec.for_protocol(args.protocol, expand_checkpoints(args.checkpoint), mode=args.mode,
                                 start_poses=args.start_poses, random_seed=args.random_seed, seed=args.seed,
                                 worlds=args.worlds, execute=args.execute, overrides=list(args.overrides),
                                 control=args.control, noise_scale=args.noise_scale, tempo=args.tempo,
                                 appearance=args.appearance)
    for key, value in custom.items():
        setattr(spec, key, value)
    spec.__post_init__()
    return spec


def eval_command(args) -> int:
    import torch

    from real_is_sim.evaluation.run import evaluate
    from real_is_sim.evaluation.spec import headline

    torch.set_num_threads(args.threads)
    spec = spec_from_args(args)
    result = evaluate(spec, args.out, executor=args.executor, threads=args.threads, address=args.address,
                      num_cpus=args.num_cpus)
    for c in result["checkpoints"]:
        gt, cov, prog = c["ground_truth"], c["coverage"], c["progress"]
        print(f"{c['checkpoint']} ({c['control'] or c['variant']}, step {c['training_steps']}): ground truth {gt['rate']:.3f} "
              f"{gt['wilson95']}, coverage >= 0.95 {cov['rate']:.3f} {cov['wilson95']}, progress > 0.9 "
              f"{prog['rate']:.3f} {prog['wilson95']} over {c['episodes']} episodes")
    print(f"protocol {result['protocol']}, {spec.mode}; summary {args.out}, episodes {Path(args.out).with_suffix('.jsonl')}")
    print(json.dumps(headline(result)))
    return 0
