"""Speed of offline evaluation: N PushT worlds in one twin driven by the policy, inference included.

    python scripts/bench_eval.py [--envs 1 5 20 80] [--seconds 2] [--checkpoint CKPT] [--camera-variant V]

For each N: the evaluation's own loop (evaluation.offline: the waypoint scheduler, one batched policy call whenever
chunks are due, every 16 waypoints here, twin steps at 60 Hz) from the fixed start poses (repeated when N > 20),
timed over ``--seconds`` of twin time after one warm-up chunk. The pose policy is ``--checkpoint`` when given (its
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
    """The offline evaluation loop over ``envs`` worlds; rates over ``seconds`` of twin time after a warm-up chunk."""
    from real_is_sim.bridge.config import load_bridge_cfg
    from real_is_sim.evaluation.offline import ChunkSource, make_scheduler, renderer_of
    from real_is_sim.policy.observations import cell_from_yaml
    from real_is_sim.twin import Twin
    from real_is_sim_tasks.pusht.start_poses import load_start_poses

    cell = cell_from_yaml(policy.cfg.cell)
    twin = Twin(cell, envs, load_bridge_cfg("standin").twin)
    starts = load_start_poses()
    starts = starts[np.arange(envs) % len(starts)]
    twin.reset(object_poses=starts[:, None, :], robot_q=np.tile(np.asarray(cell.robot.q_start), (envs, 1)))
    scheduler = make_scheduler(policy, envs, twin.control_dt, EXECUTE)
    source = ChunkSource(policy, list(range(envs)), renderer_of(policy, 0))

    def tick() -> None:
        source.observe(twin.object_poses(), twin.robot_q())
        due = scheduler.needs_chunk()
        if len(due):
            scheduler.set_chunks(due, source.chunks(due))
        twin.step(scheduler.step())

    warm_up = int(round(EXECUTE * policy.cfg.horizon_s / policy.cfg.waypoints / twin.control_dt))
    for _ in range(warm_up):
        tick()
    ticks = int(round(seconds / twin.control_dt))
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(ticks):
        tick()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    simulated = ticks * twin.control_dt
    return {"envs": envs, "env_steps_per_s": round(envs * ticks / wall, 1),
            "realtime_factor_per_env": round(simulated / wall, 3),
            "realtime_factor_per_env_cpu": round(simulated / cpu, 3)}


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
