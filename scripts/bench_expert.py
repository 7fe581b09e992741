"""Success rate and time of the scripted PushT expert (tasks/pusht/expert.py), offline and online.

    python scripts/bench_expert.py                          # both modes, 20 fixed + 20 random start poses
    python scripts/bench_expert.py --mode offline --episodes 4
    python scripts/bench_expert.py --plot                   # also draw docs/img/expert_trajectories.png
    python scripts/bench_expert.py --mode online --skip 20  # a second process on the second half of the list
    python scripts/bench_expert.py --report                 # the figures of the episodes already run

Episodes: the 20 fixed start poses (tasks/pusht/start_poses.json) and 20 random ones (``random_start_poses``,
seed 0), interleaved (fixed 0, random 0, fixed 1, ...) so ``--episodes N`` runs a mix; 30 s of twin time each.
- offline: a bare Twin (no cameras, no correction); success from the twin's block.
- online: the bridge against the stand-in world (``standin`` preset: visual forces on, the stand-in's robot
  following the twin robot, hidden physics drawn per episode with stand-in seed = episode number); the expert acts on
  the twin's state; success from the stand-in's block (ground truth). One bridge per episode (its cameras ring the
  start pose, as the preset places them).
An episode ends when the expert says it is done or at the time limit; success = the block within the goal's
tolerances then. Per-episode results go to <out>/<mode>.jsonl as they finish; a rerun skips the episodes already
there (resumable). Last stdout line: one JSON object {"offline": {...}, "online": {...}}.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from real_is_sim.cli import quiet_warp
from real_is_sim.errors import ConfigError
from real_is_sim_tasks.pusht import goal_errors, is_success, load_pusht_cfg
from real_is_sim_tasks.pusht.expert import PushTExpert
from real_is_sim_tasks.pusht.start_poses import load_start_poses, random_start_poses

MODES = ("offline", "online")
RANDOM_SEED = 0
TIME_LIMIT_S = 30.0
TRACE_EVERY = 6  # ticks between stored trajectory points (10 Hz)
PLOT = Path(__file__).resolve().parents[1] / "docs" / "img" / "expert_trajectories.png"


def episode_list(cfg) -> list[tuple[str, np.ndarray]]:
    fixed = load_start_poses()
    random = random_start_poses(cfg, len(fixed), RANDOM_SEED)
    names = [(f"fixed-{i:02d}", f"random-{i:02d}") for i in range(len(fixed))]
    return [item for i, pair in enumerate(names) for item in ((pair[0], fixed[i]), (pair[1], random[i]))]


class OfflineWorld:
    """The twin alone: it is both what the expert observes and the ground truth."""

    def __init__(self, cfg, start_pose: np.ndarray):
        from real_is_sim.twin import Twin

        self.twin = Twin(cfg, 1)
        self.twin.reset(None, start_pose[None, None], np.asarray(cfg.robot.q_start)[None])

    def tick(self, q_target: np.ndarray) -> None:
        self.twin.step(q_target[None])

    def ground_truth(self) -> np.ndarray:
        return self.twin.object_poses()[0, 0]

    def close(self) -> None:
        pass


class OnlineWorld:
    """The bridge against the stand-in: the twin (corrected by visual forces) is observed, the stand-in is the truth."""

    def __init__(self, cfg, start_pose: np.ndarray, seed: int, overrides: list[str]):
        from real_is_sim.evaluation.online import build_online_world

        self.bridge = build_online_world(cfg, start_pose, seed, overrides)
        self.twin = self.bridge.twin

    def tick(self, q_target: np.ndarray) -> None:
        self.bridge.tick(q_target[None])

    def ground_truth(self) -> np.ndarray:
        return self.bridge.ground_truth()[0]

    def close(self) -> None:
        self.bridge.hold_and_stop()


def run_episode(mode: str, cfg, name: str, number: int, start_pose: np.ndarray, planner_worlds: int, overrides) -> dict:
    world = OfflineWorld(cfg, start_pose) if mode == "offline" else OnlineWorld(cfg, start_pose, number, overrides)
    expert = PushTExpert(cfg, planner_worlds=planner_worlds, seed=number)
    twin = world.twin
    expert.reset(twin.object_poses()[0, 0], twin.robot_q()[0])
    block_trace, tool_trace = [], []
    wall = time.perf_counter()
    ticks = int(round(TIME_LIMIT_S / twin.control_dt))
    tick = 0
    try:
        for tick in range(ticks):
            q_target = expert.act(tick * twin.control_dt, twin.object_poses()[0, 0], twin.robot_q()[0])
            if expert.done:
                break
            if tick % TRACE_EVERY == 0:
                block_trace.append(world.ground_truth()[[0, 1, 3, 4, 5, 6]].round(4).tolist())
                tool_trace.append(twin.tool_position()[0].round(4).tolist())
            world.tick(q_target)
        truth = world.ground_truth()
    finally:
        world.close()
    distance, yaw_error = goal_errors(truth, cfg.goal)
    return {
        "episode": name, "number": number, "start_pose": start_pose.round(6).tolist(),
        "success": bool(is_success(truth, cfg.goal)), "done": bool(expert.done),
        "time_s": round(tick * twin.control_dt, 3), "final_distance_m": round(float(distance), 4),
        "final_yaw_error_rad": round(float(yaw_error), 4), "wall_s": round(time.perf_counter() - wall, 1),
        "block_xy_quat": block_trace, "tool_xyz": tool_trace,
    }


def summary(results: list[dict]) -> dict:
    if not results:
        return {"episodes": 0}
    successes = [r for r in results if r["success"]]
    return {
        "success_rate": round(len(successes) / len(results), 3),
        "median_time_s": round(float(np.median([r["time_s"] for r in successes])), 2) if successes else None,
        "episodes": len(results),
        "fixed": f"{sum(r['success'] for r in results if r['episode'].startswith('fixed'))}/"
                 f"{sum(r['episode'].startswith('fixed') for r in results)}",
        "random": f"{sum(r['success'] for r in results if r['episode'].startswith('random'))}/"
                  f"{sum(r['episode'].startswith('random') for r in results)}",
        "failed": [r["episode"] for r in results if not r["success"]],
        "median_final_distance_mm": round(float(np.median([r["final_distance_m"] for r in results])) * 1e3, 1),
        "median_final_yaw_deg": round(float(np.degrees(np.median([r["final_yaw_error_rad"] for r in results]))), 2),
        "median_wall_s": round(float(np.median([r["wall_s"] for r in results])), 1),
    }


def read_results(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    results = []
    for line in path.read_text().splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a killed run: that episode runs again
    return results


def plot_trajectories(cfg, results: list[dict], out: Path, count: int = 4) -> None:
    """One panel per episode: the goal (grey), the block every 2 s (faint to dark), the pusher's path (thin line)
    and where it was low enough to touch the block (dots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from real_is_sim.transforms import quat_rotate
    from real_is_sim.twin.tblock import block_geometry

    centers = block_geometry(cfg).centers
    goal = np.asarray(cfg.goal.pose)
    goal_spheres = goal[:3] + quat_rotate(goal[3:7], centers)
    fig, axes = plt.subplots(2, 2, figsize=(10, 10), sharex=True, sharey=True)
    for ax, r in zip(axes.ravel(), results[:count]):
        ax.scatter(goal_spheres[:, 0], goal_spheres[:, 1], s=6, c="0.8")
        trace = np.array(r["block_xy_quat"])
        poses = np.concatenate([trace[:, :2], np.zeros((len(trace), 1)), trace[:, 2:]], axis=1)
        shown = list(range(0, len(poses), 20)) + [len(poses) - 1]  # every 2 s, and the end
        for k, index in enumerate(shown):
            spheres = poses[index, :3] + quat_rotate(poses[index, 3:7], centers)
            ax.scatter(spheres[:, 0], spheres[:, 1], s=4, color=plt.cm.Reds(0.25 + 0.75 * k / max(len(shown) - 1, 1)))
        tool = np.array(r["tool_xyz"])
        low = tool[:, 2] < 0.05
        ax.plot(tool[:, 0], tool[:, 1], color="tab:blue", lw=0.5, alpha=0.6)
        ax.scatter(tool[low, 0], tool[low, 1], s=3, color="tab:blue")
        ax.set_title(f"{r['episode']}: {r['time_s']:.1f} s, {'success' if r['success'] else 'failed'}", fontsize=10)
        ax.set_aspect("equal")
    for ax in axes[-1]:
        ax.set_xlabel("x [m] (away from the robot)")
    for ax in axes[:, 0]:
        ax.set_ylabel("y [m]")
    fig.suptitle("Scripted expert, offline twin: goal (grey), block every 2 s (light to dark red), pusher path "
                 "(blue; dots: low)", fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("both", *MODES), default="both")
    parser.add_argument("--episodes", type=int, default=None, help="the first N of the interleaved list (default: all 40)")
    parser.add_argument("--skip", type=int, default=0, help="start at the K-th episode of the list (a second process)")
    parser.add_argument("--report", action="store_true", help="run nothing: the figures of the episodes already in the files")
    parser.add_argument("--out", type=Path, default=Path("out/bench_expert"), help="per-episode JSONL files go here")
    parser.add_argument("--planner-worlds", type=int, default=64, help="the expert simulates this many candidate pushes at once")
    parser.add_argument("--plot", action="store_true", help=f"draw {PLOT} from the offline results")
    parser.add_argument("overrides", nargs="*", help="online: BridgeCfg key=value overrides, e.g. cameras.num_cameras=2")
    args = parser.parse_args()
    if args.episodes is not None and args.episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {args.episodes}")
    if args.skip < 0:
        raise ConfigError(f"--skip must be non-negative, got {args.skip}")
    cfg = load_pusht_cfg()
    episodes = episode_list(cfg)[args.skip:][: args.episodes]
    args.out.mkdir(parents=True, exist_ok=True)
    figures = {}
    for mode in MODES if args.mode == "both" else (args.mode,):
        path = args.out / f"{mode}.jsonl"
        done = {r["episode"]: r for r in read_results(path)}
        for number, (name, pose) in enumerate(episodes, start=args.skip):
            if name in done or args.report:
                continue
            result = run_episode(mode, cfg, name, number, pose, args.planner_worlds, args.overrides)
            done[name] = result
            with path.open("a") as f:
                f.write(json.dumps(result) + "\n")
            print(f"{mode} {name}: success={result['success']} time={result['time_s']} s "
                  f"final={result['final_distance_m'] * 1e3:.1f} mm / {np.degrees(result['final_yaw_error_rad']):.1f} deg "
                  f"wall={result['wall_s']} s", flush=True)
        results = [done[name] for name, _ in episodes if name in done]
        figures[mode] = summary(results)
        if mode == "offline" and args.plot:
            plot_trajectories(cfg, results, PLOT)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
