"""Speed of offline evaluation: N PushT worlds in one twin driven by the policy, inference included.

    python scripts/bench_eval.py [--envs 1 5 20 80] [--seconds 2] [--checkpoint CKPT] [--camera-variant V]

For each N: the evaluation's own loop (``evaluation.offline.simulate``: the waypoint scheduler, one batched policy
call whenever chunks are due, every 16 waypoints here, twin steps at 60 Hz, the success rules checked) from the
fixed start poses (repeated when N > 20), timed over ``--seconds`` of twin time after one warm-up chunk. The pose policy is ``--checkpoint`` when given (its
cell), else untrained weights of the default pose configuration (speed does not depend on the weights); the camera
policy is an untrained ``--camera-variant`` (rendering the observation images of all due envs in every call).

Prints one JSON object on its last line: ``by_envs`` [{envs, env_steps_per_s, realtime_factor_per_env,
realtime_factor_per_env_cpu}] for the pose policy, ``by_envs_camera`` the same for the camera policy, and the
1-minute load average. ``realtime_factor_per_env``: simulated seconds per wall-clock second of each env;
``_cpu``: the same by this process's CPU time (on a shared machine the steadier figure).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch

from real_is_sim.cli import quiet_warp

EXECUTE = 16  # the receding horizon of the policy figures (docs/policy.md)


def pose_policy(checkpoint: str | None):
    from real_is_sim.policy.checkpoint import load_checkpoint
    from real_is_sim.policy.config import PolicyCfg
    from real_is_sim.policy.flow import untrained_policy

    if checkpoint:
        return load_checkpoint(checkpoint)[0]
    return untrained_policy(PolicyCfg(variant="pose"))


def timed_run(policy, envs: int, seconds: float) -> dict:
    """The offline evaluation loop (``evaluation.offline.simulate``, rule checks included) over ``envs`` worlds;
    rates over ``seconds`` of twin time after a warm-up chunk."""
    from real_is_sim.evaluation.offline import simulate
    from real_is_sim.evaluation.spec import Episode, Unit
    from real_is_sim.policy.observations import cell_from_yaml
    from real_is_sim_tasks.pusht.start_poses import load_start_poses

    cell = cell_from_yaml(policy.cfg.cell)
    starts = load_start_poses()
    episodes = [Episode("bench", f"fixed_{i % len(starts):02d}", i % len(starts), 0, i,
                        tuple(float(v) for v in starts[i % len(starts)])) for i in range(envs)]
    control_dt = 1.0 / cell.control_hz
    warm_up = int(round(EXECUTE * policy.cfg.horizon_s / policy.cfg.waypoints / control_dt))
    ticks = int(round(seconds / control_dt))
    clocks = {}

    def timer(tick, twin):  # after the warm-up chunk's last tick, and after the last timed tick
        if tick + 1 in (warm_up, warm_up + ticks):
            clocks[tick + 1] = (time.perf_counter(), time.process_time())

    simulate(policy, "", cell, Unit("offline", "bench", episodes, (warm_up + ticks) * control_dt, execute=EXECUTE),
             on_tick=timer)
    (wall0, cpu0), (wall1, cpu1) = clocks[warm_up], clocks[warm_up + ticks]
    simulated = ticks * control_dt
    return {"envs": envs, "env_steps_per_s": round(envs * ticks / (wall1 - wall0), 1),
            "realtime_factor_per_env": round(simulated / (wall1 - wall0), 3),
            "realtime_factor_per_env_cpu": round(simulated / (cpu1 - cpu0), 3)}


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 5, 20, 80])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed twin time per env count")
    parser.add_argument("--checkpoint", help="pose policy checkpoint (default: untrained weights)")
    parser.add_argument("--camera-variant", default="wrist_camera", choices=("static_camera", "wrist_camera", "real_image"))
    parser.add_argument("--no-camera", action="store_true", help="skip the camera policy")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from real_is_sim.policy.config import PolicyCfg
    from real_is_sim.policy.flow import untrained_policy

    pose = pose_policy(args.checkpoint)
    by_envs = []
    for envs in args.envs:
        by_envs.append(timed_run(pose, envs, args.seconds))
        print(f"pose, {envs} envs: {by_envs[-1]}", flush=True)
    by_envs_camera = []
    if not args.no_camera:
        camera = untrained_policy(PolicyCfg(variant=args.camera_variant))
        for envs in args.envs:
            by_envs_camera.append(timed_run(camera, envs, args.seconds))
            print(f"{args.camera_variant}, {envs} envs: {by_envs_camera[-1]}", flush=True)
    print(json.dumps({"pose_policy": args.checkpoint or "untrained pose policy", "camera_variant": args.camera_variant,
                      "execute_waypoints": EXECUTE, "threads": args.threads, "seconds": args.seconds,
                      "load_average_1min": round(os.getloadavg()[0], 2),
                      "by_envs": by_envs, "by_envs_camera": by_envs_camera}))


if __name__ == "__main__":
    main()
