"""Twin-to-real sync error with and without visual forces, against a stand-in real world.

    python scripts/bench_sync.py                 # 2 hidden-parameter draws x 2 pushes, on/off, + ablation
    python scripts/bench_sync.py --quick         # 1 draw x 1 push, no ablation (a smoke run)

Each run: the stand-in world draws hidden physical parameters (friction, mass, COM, damping) and starts its block
displaced from the twin's (up to 1.5 cm, 6 deg); the twin robot runs a scripted push (real_is_sim_tasks.pusht.scripted.push_plan); the stand-in robot follows
it through the lagging simulated follower; the twin sees only the stand-in's rendered frames (3 cameras,
480x270, noise, 33 ms latency, 2 % dropped frames). Error = twin block vs stand-in block, every tick.
Writes docs-ready figures to --out (plot of error over time). Last stdout line: one JSON object.
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from real_is_sim.bridge import Bridge, BridgeCfg, build_bridge
from real_is_sim.loop import LoopCfg
from real_is_sim.standin.world import StandInCfg
from real_is_sim.transforms import quat_rotate, yaw_of
from real_is_sim_tasks.pusht.config import load_pusht_cfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher, push_plan
from real_is_sim.cli import quiet_warp

def push_targets(session: Bridge, lateral: float) -> np.ndarray:
    """A push away from the robot through the block, offset sideways by ``lateral``; then the pusher holds still."""
    twin = session.twin
    pose = twin.object_poses()[0, 0]
    center = pose[:3] + quat_rotate(pose[3:7], twin.geometry.centers.mean(axis=0))
    push = push_plan(ScriptedPusher(twin.task), center, lateral, twin.control_dt, approach_speed=0.3,
                     settle_steps=0, retreat=False)
    return np.concatenate([push, np.repeat(push[-1:], 30, axis=0)])


def run_cfg(draw: int, visual_forces: bool, sensor_overrides: dict | None = None) -> BridgeCfg:
    """The bridge of one run: hidden parameters and the stand-in block's start offset drawn from ``draw``."""
    rng = np.random.default_rng(1000 + draw)
    offset = [*rng.uniform(-0.015, 0.015, 2), np.radians(rng.uniform(-6, 6))]
    base = BridgeCfg()
    sensor = dataclasses.replace(base.sensor, **(sensor_overrides or {}))
    return dataclasses.replace(base, loop=LoopCfg(visual_forces=visual_forces), initial_offset=offset, sensor=sensor,
                               standin=StandInCfg(seed=draw))


def run(task, draw: int, lateral: float, visual_forces: bool, sensor_overrides: dict | None = None) -> np.ndarray:
    """Per-tick (position error m, yaw error rad) of one scripted push."""
    session = build_bridge(run_cfg(draw, visual_forces, sensor_overrides), task)
    errors = []
    for q in push_targets(session, lateral):
        session.tick(q[None])
        errors.append(pose_error(session.twin.object_poses()[0, 0], session.standin.object_poses()[0]))
    return np.array(errors)


def pose_error(twin: np.ndarray, real: np.ndarray) -> tuple[float, float]:
    """Block pose error (7,) vs (7,): position in the table plane (m), |yaw difference| (rad)."""
    yaw = np.angle(np.exp(1j * (yaw_of(twin[3:7]) - yaw_of(real[3:7]))))
    return float(np.linalg.norm(twin[:2] - real[:2])), abs(float(yaw))


def summary(errors: list[np.ndarray]) -> dict:
    e = np.concatenate(errors)
    return {
        "pos_mm_median": round(float(np.median(e[:, 0]) * 1e3), 2),
        "pos_mm_p95": round(float(np.percentile(e[:, 0], 95) * 1e3), 2),
        "yaw_deg_median": round(float(np.degrees(np.median(e[:, 1]))), 2),
        "yaw_deg_p95": round(float(np.degrees(np.percentile(e[:, 1], 95))), 2),
    }


def plot(on: list[np.ndarray], off: list[np.ndarray], dt: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for runs, label, color in ((on, "visual forces on", "tab:green"), (off, "off", "tab:red")):
        n = min(len(r) for r in runs)
        stack = np.stack([r[:n] for r in runs])
        t = np.arange(n) * dt
        for k, (ax, scale, unit) in enumerate(zip(axes, (1e3, np.degrees(1.0)), ("position error (mm)", "yaw error (deg)"))):
            ax.plot(t, np.median(stack[:, :, k], axis=0) * scale, color=color, label=label)
            ax.fill_between(t, stack[:, :, k].min(0) * scale, stack[:, :, k].max(0) * scale, color=color, alpha=0.15)
            ax.set_xlabel("time (s)")
            ax.set_ylabel(unit)
    axes[0].legend()
    fig.suptitle("twin vs stand-in real world: median and range over runs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2, help="hidden-parameter draws (seeds)")
    parser.add_argument("--laterals", type=float, nargs="+", default=[0.0, 0.02], help="push offsets from the stem axis (m)")
    parser.add_argument("--quick", action="store_true", help="1 draw, 1 push, no ablation")
    parser.add_argument("--out", default="docs/img", help="where the plot goes")
    args = parser.parse_args()
    draws, laterals = (1, args.laterals[:1]) if args.quick else (args.draws, args.laterals)
    task = load_pusht_cfg()
    begin = time.perf_counter()
    on, off = [], []
    for draw in range(draws):
        for lateral in laterals:
            on.append(run(task, draw, lateral, True))
            off.append(run(task, draw, lateral, False))
            print(f"draw {draw} lateral {lateral}: on {summary([on[-1]])} off {summary([off[-1]])}", flush=True)
    result = {"runs": len(on), "ticks_per_run": int(np.mean([len(r) for r in on])), "on": summary(on), "off": summary(off)}
    result["off_over_on_pos_median"] = round(result["off"]["pos_mm_median"] / max(result["on"]["pos_mm_median"], 1e-9), 2)
    result["off_over_on_yaw_median"] = round(result["off"]["yaw_deg_median"] / max(result["on"]["yaw_deg_median"], 1e-9), 2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(on, off, 1.0 / task.control_hz, out / "sync_error.png")
    if not args.quick:
        ablation = []
        # The main setting (3 iterations, kp 10) is run 0 above; each row changes one knob of it.
        for overrides in ({"iterations": 1}, {"iterations": 5}, {"kp": 4.0}, {"kp": 20.0}, {"render_downscale": 2}):
            ablation.append({**overrides, **summary([run(task, 0, laterals[0], True, overrides)])})
            print("ablation", ablation[-1], flush=True)
        result["ablation"] = ablation
    result["wall_s"] = round(time.perf_counter() - begin, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
