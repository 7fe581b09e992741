"""The twin robot kinematic (default) vs dynamic (``TwinCfg(robot="dynamic", solver="mujoco")``): tracking, push, speed,
and the blocked pusher whose actual joints q (not the command q') the follower receives.

    python scripts/bench_robot_dynamics.py                      # procedural block (pusht.yaml)
    python scripts/bench_robot_dynamics.py --block real --worlds 1 20

Modes: ``kinematic`` (the current twin: XPBD, kinematic links), ``kinematic_mujoco`` (kinematic links under MuJoCo,
to separate the solver's effect on the block from the robot's) and ``dynamic`` (MuJoCo, links with mass and inertia,
gravity compensated per body, stiff PD drives on the same reference the kinematic arm follows).
Prints one JSON object on its last line: ``tracking`` (free motion, q vs q' and vs the reference, rad; pusher mm),
``push`` (final block pose difference, mm / deg, for pushes through the centre and 3 cm off it, and each mode
against itself with the path 1 mm further sideways: how sensitive the push is), ``speed``
(x realtime per world, wall and CPU time), ``blocked`` (the pusher commanded 3 cm into the table: the q - q' gap,
what the follower was sent, whether its safety filter accepted it), ``blocked_by_heavy_block`` (the centred push into
a 200 kg block: how far it moved, the q - q' gap, what the follower was sent).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from real_is_sim.cli import quiet_warp
from real_is_sim.loop import LoopCfg, OnlineLoop
from real_is_sim.robot.follower_factory import FollowerCfg, make_follower
from real_is_sim.transforms import quat_rotate, rotation_angle_between
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim_tasks.pusht import REAL_YAML, load_pusht_cfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher, push_plan

MODES = {
    "kinematic": TwinCfg(),
    "kinematic_mujoco": TwinCfg(solver="mujoco"),
    "dynamic": TwinCfg(solver="mujoco", robot="dynamic"),
    "dynamic_2substeps": TwinCfg(solver="mujoco", robot="dynamic", substeps=2),  # not run by default
}
DEFAULT_MODES = ["kinematic", "kinematic_mujoco", "dynamic"]
OUT_OF_THE_WAY = np.array([0.0, 1.5, 0.0])  # block moved here for free motion (far from the pusher's path)
SERIES: dict = {}  # per-step traces for --plot: SERIES[(section, mode)] = {name: list}


def block_center(twin: Twin) -> np.ndarray:
    pose = twin.object_poses()[0, 0]
    return pose[:3] + quat_rotate(pose[3:7], twin.geometry.centers.mean(axis=0))


def plan_for(twin: Twin, lateral: float) -> np.ndarray:
    return push_plan(ScriptedPusher(twin.task), block_center(twin), lateral, twin.control_dt)


def tracking(task, cfg: TwinCfg) -> dict:
    """The scripted push's path (approach, descent, push, retreat) with the block out of the way."""
    twin = Twin(task, 1, cfg)
    plan = plan_for(twin, 0.0)
    pusher = ScriptedPusher(task)
    pose = twin.object_poses()[0, 0].copy()
    pose[:3] += OUT_OF_THE_WAY
    twin.reset(object_poses=pose[None, None])
    vs_target, vs_reference, tool_mm = [], [], []
    for target in plan:
        twin.step(target[None])
        q = twin.robot_q()[0]
        vs_target.append(np.abs(q - target).max())
        vs_reference.append(np.abs(q - twin.robot_q_reference()[0]).max())
        tool_mm.append(1000 * np.linalg.norm(twin.tool_position()[0] - pusher.tool_position(target)))
    SERIES[("tracking", cfg.robot, cfg.solver)] = {"q_vs_target": vs_target, "pusher_mm": tool_mm}
    stats = lambda v: {"median": round(float(np.median(v)), 5), "max": round(float(np.max(v)), 5)}
    return {
        "steps": len(plan),
        "q_vs_target_rad": stats(vs_target),  # q vs q' (includes the 30 ms reference lag both modes share)
        "q_vs_reference_rad": stats(vs_reference),  # q vs the lagged, speed-capped reference the joints follow
        "pusher_vs_target_mm": stats(tool_mm),
    }


def push(task, cfg: TwinCfg, lateral: float) -> np.ndarray:
    twin = Twin(task, 1, cfg)
    for target in plan_for(twin, lateral):
        twin.step(target[None])
    for _ in range(30):
        twin.step()
    return twin.object_poses()[0, 0]


def pose_difference(a: np.ndarray, b: np.ndarray) -> dict:
    return {
        "position_mm": round(float(np.linalg.norm(a[:3] - b[:3]) * 1000), 2),
        "rotation_deg": round(float(np.degrees(rotation_angle_between(a[3:7], b[3:7]))), 2),
    }


def speed(task, cfg: TwinCfg, worlds: int, steps: int, repeats: int) -> dict:
    """x realtime per world during a push (all worlds push), wall clock and process CPU time, best of ``repeats``."""
    twin = Twin(task, worlds, cfg)
    plan = plan_for(twin, 0.0)
    start = len(plan) - 60 - steps * repeats - 1  # timed steps fall in the push, pusher on the block
    for target in plan[: max(start, 0)][-5:]:
        twin.step(np.repeat(target[None], worlds, axis=0))  # compile kernels, allocate
    best_wall = best_cpu = 0.0
    k = max(start, 0)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            twin.step(np.repeat(plan[min(k, len(plan) - 1)][None], worlds, axis=0))
            k += 1
        simulated = steps * twin.control_dt
        best_wall = max(best_wall, simulated / (time.perf_counter() - wall))
        best_cpu = max(best_cpu, simulated / (time.process_time() - cpu))
    return {"worlds": worlds, "realtime_factor_per_world": round(best_wall, 3), "realtime_factor_per_world_cpu_time": round(best_cpu, 3)}


def blocked(task, cfg: TwinCfg, depth: float = 0.03, hold_steps: int = 30) -> dict:
    """The pusher commanded ``depth`` into the table (tip below the surface) through the online loop with a
    (simulated, safety-filtered) follower: the loop sends twin.robot_q(); we record what reached ``send``."""
    twin = Twin(task, 1, cfg)
    pusher = ScriptedPusher(task)
    tip = task.robot.pusher_half_length + task.robot.pusher_radius  # pusher centre to tip (tip down at q_start)
    above = pusher.start_tool_position()
    target_point = np.array([above[0], above[1], tip - depth])
    # move the block away: only the table blocks the pusher
    pose = twin.object_poses()[0, 0].copy()
    pose[:3] += OUT_OF_THE_WAY
    twin.reset(object_poses=pose[None, None])
    plan = pusher.joint_path(np.array([above, target_point]), 0.1, twin.control_dt)
    plan = np.concatenate([plan, np.repeat(plan[-1:], hold_steps, axis=0)])
    follower = make_follower(FollowerCfg())
    sent = []
    inner_send = follower.send
    decisions = []

    def spy(q, stamp):
        sent.append(np.array(q, dtype=np.float64))
        decision = inner_send(q, stamp)
        decisions.append(decision.accepted)
        return decision

    follower.send = spy
    follower.start()
    loop = OnlineLoop(LoopCfg(visual_forces=False, follow_real=True), twin, follower=follower)
    robot_q, tip_z, commanded_z = [], [], []
    for target in plan:
        loop.tick(target[None])
        follower.step_to(loop.t)  # the simulated arm moves on in the loop's time
        robot_q.append(twin.robot_q()[0].copy())
        tip_z.append(1000 * (twin.tool_position()[0, 2] - tip))
        commanded_z.append(1000 * (pusher.tool_position(target)[2] - tip))
    SERIES[("blocked", cfg.robot, cfg.solver)] = {
        "tip_z_mm": tip_z, "commanded_tip_z_mm": commanded_z,
        "sent_vs_target": [np.abs(a - b).max() for a, b in zip(sent, plan)],
        "sent_vs_q": [np.abs(a - b).max() for a, b in zip(sent, robot_q)],
        "accepted": decisions,
    }
    q, q_target, q_sent = robot_q[-1], plan[-1], sent[-1]
    follower_q = follower.read_state().q
    follower.stop()
    tool = twin.tool_position()[0]
    return {
        "commanded_pusher_tip_z_mm": round(1000 * (target_point[2] - tip), 2),
        "pusher_tip_z_mm": round(1000 * (tool[2] - tip), 2),  # table at z = 0 (pusht.yaml)
        "gap_q_vs_target_rad": round(float(np.abs(q - q_target).max()), 5),
        "gap_pusher_mm": round(float(1000 * np.linalg.norm(tool - pusher.tool_position(q_target))), 2),
        "sent_equals_twin_q_rad": round(float(np.abs(q_sent - q).max()), 8),  # the follower was given q ...
        "sent_vs_target_rad": round(float(np.abs(q_sent - q_target).max()), 5),  # ... not q'
        "follower_accepted_last": bool(decisions[-1]),
        "follower_accepted_fraction": round(float(np.mean(decisions)), 3),
        "follower_q_vs_twin_q_rad": round(float(np.abs(follower_q - q).max()), 5),
    }


def blocked_by_block(task, cfg: TwinCfg, mass_scale: float = 1000.0) -> dict:
    """The centred scripted push (no retreat) into a block ``mass_scale`` times heavier (200 kg: sliding it takes
    ~1000 N, more than the drives' effort limits give at the pusher), through the online loop; what ``send`` got."""
    heavy = dataclasses.replace(task, physical=dataclasses.replace(task.physical, mass_scale=mass_scale))
    twin = Twin(heavy, 1, cfg)
    start = twin.object_poses()[0, 0].copy()
    plan = push_plan(ScriptedPusher(heavy), block_center(twin), 0.0, twin.control_dt, retreat=False)
    plan = np.concatenate([plan, np.repeat(plan[-1:], 20, axis=0)])
    sent = []

    class Spy:  # what the loop hands to the follower
        def send(self, q, stamp):
            sent.append(np.array(q, dtype=np.float64))

        def now(self):
            return 0.0

    loop = OnlineLoop(LoopCfg(visual_forces=False, follow_real=True), twin, follower=Spy())
    for target in plan:
        loop.tick(target[None])
    q, q_target = twin.robot_q()[0], plan[-1]
    return {
        "block_mass_kg": round(float(twin.object_mass()[0]), 1),
        "block_moved": pose_difference(twin.object_poses()[0, 0], start),
        "gap_q_vs_target_rad": round(float(np.abs(q - q_target).max()), 5),
        "gap_pusher_mm": round(float(1000 * np.linalg.norm(twin.tool_position()[0] - ScriptedPusher(heavy).tool_position(q_target))), 2),
        "sent_equals_twin_q_rad": round(float(np.abs(sent[-1] - q).max()), 8),
        "sent_vs_target_rad": round(float(np.abs(sent[-1] - q_target).max()), 5),
    }


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block", choices=["real", "procedural"], default="procedural")
    parser.add_argument("--modes", nargs="+", default=DEFAULT_MODES, choices=list(MODES))
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--steps", type=int, default=10, help="timed control steps per timing")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--laterals", type=float, nargs="+", default=[0.0, 0.03], help="push offsets sideways [m]")
    parser.add_argument("--plot", default=None, help="write a PNG of the tracking and blocked traces here")
    parser.add_argument("--skip", nargs="*", default=[], choices=["tracking", "push", "speed", "blocked", "heavy"])
    args = parser.parse_args()
    task = load_pusht_cfg(REAL_YAML) if args.block == "real" else load_pusht_cfg()
    result = {"block": args.block, "modes": {m: {"solver": MODES[m].solver, "robot": MODES[m].robot} for m in args.modes}}
    if "tracking" not in args.skip:
        result["tracking"] = {}
        for mode in args.modes:
            result["tracking"][mode] = tracking(task, MODES[mode])
            print(mode, "tracking", result["tracking"][mode], flush=True)
    if "push" not in args.skip:
        result["push"] = []
        for lateral in args.laterals:
            final = {mode: push(task, MODES[mode], lateral) for mode in args.modes}
            start = Twin(task, 1).object_poses()[0, 0]
            row = {"lateral_m": lateral, "moved": {m: pose_difference(final[m], start) for m in args.modes}}
            for a, b in (("dynamic", "kinematic"), ("dynamic", "kinematic_mujoco"), ("kinematic_mujoco", "kinematic"),
                         ("dynamic_2substeps", "dynamic"), ("dynamic_2substeps", "kinematic")):
                if a in final and b in final:
                    row[f"{a}_vs_{b}"] = pose_difference(final[a], final[b])
            # How sensitive the push itself is: the same mode with the pusher path 1 mm further sideways.
            for mode in args.modes:
                shifted = push(task, MODES[mode], lateral + 0.001)
                row[f"{mode}_vs_itself_1mm_further"] = pose_difference(shifted, final[mode])
            result["push"].append(row)
            print("push", row, flush=True)
    if "speed" not in args.skip:
        result["speed"] = {}
        for mode in args.modes:
            result["speed"][mode] = [speed(task, MODES[mode], w, args.steps, args.repeats) for w in args.worlds]
            print(mode, "speed", result["speed"][mode], flush=True)
    if "blocked" not in args.skip:
        result["blocked"] = {}
        for mode in args.modes:
            result["blocked"][mode] = blocked(task, MODES[mode])
            print(mode, "blocked", result["blocked"][mode], flush=True)
    if "heavy" not in args.skip:
        result["blocked_by_heavy_block"] = {}
        for mode in args.modes:
            result["blocked_by_heavy_block"][mode] = blocked_by_block(task, MODES[mode])
            print(mode, "heavy block", result["blocked_by_heavy_block"][mode], flush=True)
    if args.plot:
        plot(args.plot, 1.0 / task.control_hz)
        result["plot"] = args.plot
    print(json.dumps(result))


def plot(path: str, dt: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    styles = {("kinematic", "xpbd"): ("tab:blue", "-"), ("kinematic", "mujoco"): ("tab:cyan", ":"),
              ("dynamic", "mujoco"): ("tab:red", "-")}
    for (section, robot, solver), trace in SERIES.items():
        label = f"{robot} ({solver})"
        color, ls = styles.get((robot, solver), ("tab:gray", "-."))
        style = dict(color=color, ls=ls)
        t = np.arange(len(next(iter(trace.values())))) * dt
        if section == "tracking":
            axes[0].plot(t, 1000 * np.asarray(trace["q_vs_target"]), label=label, **style)
        else:
            axes[1].plot(t, trace["tip_z_mm"], label=f"{label}: pusher tip", **style)
            axes[2].plot(t, 1000 * np.asarray(trace["sent_vs_target"]), label=f"{label}: sent vs q'", **style)
            if robot == "kinematic" and solver == "xpbd":
                axes[1].plot(t, trace["commanded_tip_z_mm"], color="k", ls="--", label="commanded (q')")
                refused = [k for k, ok in enumerate(trace["accepted"]) if not ok]
                if refused:
                    axes[1].axvspan(refused[0] * dt, refused[-1] * dt, color="tab:blue", alpha=0.1,
                                    label="kinematic: follower refuses (tool below workspace)")
    axes[0].set(title="free motion (scripted push path, no block): max_j |q - q'|", xlabel="s", ylabel="mrad")
    axes[1].axhline(0.0, color="0.5", lw=0.8)
    axes[1].set(title="pusher commanded 3 cm into the table", xlabel="s", ylabel="tip height above table [mm]")
    axes[2].set(title="what the follower is sent: max_j |sent - q'|", xlabel="s", ylabel="mrad")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
