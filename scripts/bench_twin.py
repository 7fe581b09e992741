"""Speed of the PushT twin per world for 1, 5, 20 and 80 worlds, and the effect of the settings on a standard push.

    python scripts/bench_twin.py                       # real 466-sphere block when the shared data is present
    python scripts/bench_twin.py --substeps 2 --contact-gap 0.002 --worlds 20
    python scripts/bench_twin.py --contact-spheres all --no-graph-capture     # the settings before both speed-ups

Prints one JSON object on its last line: spheres_per_block, shape_pairs_per_world, substeps, by_worlds [{worlds,
realtime_factor_per_world}], and push_fidelity (final block pose of a scripted push vs a 16-substep, 8-iteration reference).
"""

import argparse
import dataclasses
import json
import time

import numpy as np

from real_is_sim.paths import shared_data_dir
from real_is_sim.transforms import quat_rotate, rotation_angle_between
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim_tasks.pusht import REAL_YAML, load_pusht_cfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher
from real_is_sim.cli import quiet_warp

PUSH_Z = 0.035


def standard_push(task, twin_cfg: TwinCfg) -> np.ndarray:
    """Final block pose after pushing 12 cm towards the block's start heading, from 10 cm behind its centre of spheres."""
    twin = Twin(task, 1, twin_cfg)
    pusher = ScriptedPusher(task)
    start_pose = twin.object_poses()[0, 0]
    center = start_pose[:3] + quat_rotate(start_pose[3:7], twin.geometry.centers.mean(axis=0))
    direction = np.array([0.0, 1.0, 0.0])
    begin = center - 0.16 * direction
    begin[2] = PUSH_Z
    q0 = pusher.kinematics.solve(pusher.to_base(begin), pusher.rotation, pusher.q_start)
    twin.reset(robot_q=q0[None])
    for q in pusher.joint_path(np.array([begin, begin + 0.12 * direction]), 0.1, twin.control_dt, q0):
        twin.step(q[None])
    for _ in range(30):
        twin.step()
    return twin.object_poses()[0, 0]


def speed(task, twin_cfg: TwinCfg, worlds: int, steps: int, repeats: int) -> tuple[float, float]:
    """Simulated seconds per second of one world, by wall clock and by this process's CPU time.

    The best of ``repeats`` timings each. On a shared machine the CPU-time figure is the steadier one: Warp runs CPU
    kernels in the calling thread, so it is close to what one unloaded core would give."""
    twin = Twin(task, worlds, twin_cfg)
    twin.step()  # compile kernels, allocate
    best_wall = best_cpu = 0.0
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            twin.step()
        simulated = steps * twin.control_dt
        best_wall = max(best_wall, simulated / (time.perf_counter() - wall))
        best_cpu = max(best_cpu, simulated / (time.process_time() - cpu))
    return best_wall, best_cpu


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block", choices=["real", "procedural"], default=None, help="default: real if the shared data is present")
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 5, 20, 80])
    parser.add_argument("--steps", type=int, default=30, help="timed control steps per world count")
    parser.add_argument("--repeats", type=int, default=3, help="timings per world count; the best is reported")
    parser.add_argument("--substeps", type=int, default=TwinCfg.substeps)
    parser.add_argument("--iterations", type=int, default=TwinCfg.iterations)
    parser.add_argument("--contact-gap", type=float, default=TwinCfg.contact_gap)
    parser.add_argument("--collide-every", type=int, default=TwinCfg.collide_every)
    parser.add_argument("--broad-phase", default=TwinCfg.broad_phase)
    parser.add_argument("--contact-spheres", choices=["reachable", "all"], default=TwinCfg.contact_spheres,
                        help="block spheres that collide: those the table or pusher can reach, or all")
    parser.add_argument("--no-graph-capture", action="store_true", help="launch every kernel of every step (no recorded step)")
    parser.add_argument("--contacts-per-pair", type=int, default=0,
                        help="size the contact buffer at N per shape pair (Newton's estimate: 5); 0: the exact bound")
    parser.add_argument("--no-fidelity", action="store_true")
    args = parser.parse_args()
    block = args.block or ("real" if (shared_data_dir() / "objects" / "tblock.json").exists() else "procedural")
    task = load_pusht_cfg(REAL_YAML) if block == "real" else load_pusht_cfg()
    cfg = TwinCfg(
        substeps=args.substeps,
        iterations=args.iterations,
        contact_gap=args.contact_gap,
        collide_every=args.collide_every,
        broad_phase=args.broad_phase,
        contact_spheres=args.contact_spheres,
        graph_capture=not args.no_graph_capture,
    )
    probe = Twin(task, 1, cfg)  # one world: the shape pairs and spheres every world has
    pairs_per_world = len(probe.model.shape_contact_pairs)
    by_worlds = []
    for worlds in args.worlds:
        if args.contacts_per_pair:
            cfg = dataclasses.replace(cfg, rigid_contact_max=args.contacts_per_pair * pairs_per_world * worlds)
        factor, factor_cpu = speed(task, cfg, worlds, args.steps, args.repeats)
        by_worlds.append(
            {"worlds": worlds, "realtime_factor_per_world": round(factor, 3), "realtime_factor_per_world_cpu_time": round(factor_cpu, 3)}
        )
        print(f"{worlds:3d} worlds: {factor:.2f}x realtime per world (wall), {factor_cpu:.2f}x (CPU time)", flush=True)
    result = {
        "block": block,
        "spheres_per_block": int(len(probe.geometry.centers)),
        "substeps": cfg.substeps,
        "iterations": cfg.iterations,
        "contact_gap": cfg.contact_gap,
        "collide_every": cfg.collide_every,
        "broad_phase": cfg.broad_phase,
        "contact_spheres": cfg.contact_spheres,
        "graph_capture": cfg.graph_capture,
        "shape_pairs_per_world": pairs_per_world,
        "contact_buffer": f"{args.contacts_per_pair} per shape pair" if args.contacts_per_pair else "exact bound",
        "timing": f"best of {args.repeats} x {args.steps} control steps",
        "by_worlds": by_worlds,
    }
    if not args.no_fidelity:
        pose = standard_push(task, cfg)
        reference = standard_push(task, TwinCfg(substeps=16, iterations=8, contact_gap=0.005, contact_spheres="all"))
        result["push_fidelity"] = {
            "position_error_mm": round(float(np.linalg.norm(pose[:3] - reference[:3]) * 1000), 2),
            "rotation_error_deg": round(float(np.degrees(rotation_angle_between(pose[3:7], reference[3:7]))), 2),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
