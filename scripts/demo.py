"""Headless PushT twin demo: in several worlds the Franka pushes the T-block along a scripted path
(away from the robot, through the block, at different sideways offsets).

    python scripts/demo.py --out out/demo                # 4 worlds, procedural block
    python scripts/demo.py --out out/demo --object real  # the scanned 466-sphere block on the real table plane

Prints a summary (block displacement per world, realtime factor) and writes DIR/demo.rrd (a rerun recording: block
spheres, pusher and robot link origins per world, worlds drawn side by side 0.6 m apart; open with `rerun DIR/demo.rrd`).
The last stdout line is one JSON object.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import rerun as rr

from real_is_sim.transforms import quat_rotate, rotation_angle_between
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim.twin.scripted import ScriptedPusher, push_plan
from real_is_sim_tasks.pusht import REAL_YAML, is_success, load_pusht_cfg

VIEW_SPACING = 0.6  # m between worlds in the recording only (the worlds share one frame in the twin)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--worlds", type=int, default=4)
    parser.add_argument("--object", choices=["procedural", "real"], default="procedural")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    task = load_pusht_cfg(REAL_YAML) if args.object == "real" else load_pusht_cfg()
    twin = Twin(task, args.worlds, TwinCfg())
    pusher = ScriptedPusher(task)
    start = twin.object_poses()
    center = start[0, 0, :3] + quat_rotate(start[0, 0, 3:7], twin.geometry.centers.mean(axis=0))
    laterals = np.linspace(-0.03, 0.03, args.worlds)  # off-centre pushes turn the block
    plans = [push_plan(pusher, center, lateral, twin.control_dt) for lateral in laterals]
    steps = max(len(p) for p in plans)
    targets = np.stack([np.concatenate([p, np.repeat(p[-1:], steps - len(p), axis=0)]) for p in plans], axis=1)

    rr.init("real_is_sim_pusht_demo")
    rr.save(str(out / "demo.rrd"))
    offsets = np.arange(args.worlds)[:, None] * np.array([0.0, VIEW_SPACING, 0.0])
    sim_wall = 0.0
    for k in range(steps):
        begin = time.perf_counter()
        twin.step(targets[k])
        sim_wall += time.perf_counter() - begin
        if k % 2 == 0:  # 30 Hz in the recording
            rr.set_time("sim_time", duration=(k + 1) * twin.control_dt)
            poses = twin.object_poses()[:, 0]
            spheres = poses[:, None, :3] + quat_rotate(poses[:, None, 3:7], twin.geometry.centers[None]) + offsets[:, None]
            rr.log("twin/blocks", rr.Points3D(spheres.reshape(-1, 3), radii=twin.geometry.radius, colors=[230, 90, 40]))
            rr.log("twin/pusher", rr.Points3D(twin.tool_position() + offsets, radii=task.robot.pusher_radius, colors=[40, 40, 40]))
            links = twin.robot_link_poses()[..., :3] + offsets[:, None]
            rr.log("twin/robot", rr.LineStrips3D(list(links), colors=[150, 150, 160]))

    final = twin.object_poses()
    simulated = steps * twin.control_dt
    worlds = []
    for w in range(args.worlds):
        worlds.append(
            {
                "world": w,
                "lateral_offset_m": round(float(laterals[w]), 3),
                "displacement_m": [round(float(v), 4) for v in final[w, 0, :3] - start[w, 0, :3]],
                "rotation_deg": round(float(np.degrees(rotation_angle_between(final[w, 0, 3:7], start[w, 0, 3:7]))), 2),
                "at_goal": bool(is_success(final[w, 0], task.goal)),
            }
        )
        print(f"world {w}: pushed {worlds[-1]['displacement_m']} m, turned {worlds[-1]['rotation_deg']} deg")
    factor = simulated * args.worlds / sim_wall
    print(f"{args.worlds} worlds, {simulated:.1f} s simulated in {sim_wall:.1f} s: {factor / args.worlds:.2f}x realtime per world")
    print(json.dumps({"worlds": worlds, "simulated_s": round(simulated, 2), "wall_s": round(sim_wall, 2),
                      "realtime_factor_per_world": round(factor / args.worlds, 3), "recording": str(out / "demo.rrd")}))


if __name__ == "__main__":
    main()
