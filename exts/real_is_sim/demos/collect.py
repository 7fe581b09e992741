"""Collect PushT demonstrations into a dataset: the scripted expert or a teleoperator, offline or online.

``real-is-sim collect`` (``scripts/collect.py``; this module imports the runner when a collection runs, so the
command line parser stays quick). Episode k starts from start pose k; a rerun on the same ``--out``
appends to the dataset and starts at the first episode it does not hold yet (resumable). Every finished episode is
kept, success or not (``success`` in meta/episodes says which; a trainer filters). The PushT expert and start poses
come from the task package, imported when a collection runs (the core does not import it at module level).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from real_is_sim.errors import ConfigError

EXPERTS = ("scripted", "teleop")
TIME_LIMIT_S = 30.0


@dataclass
class CollectResult:
    out: str
    expert: str
    mode: str
    episodes: int  # in the dataset now
    recorded: int  # by this run
    successes: int  # of this run's episodes
    success_rate: float | None
    median_seconds: float | None
    wall_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def start_poses_for(cfg, source: str, episodes: int, seed: int) -> np.ndarray:
    """``episodes`` start poses [N, 7]: drawn at random (``source == "random"``, seeded) or the first N of a file."""
    from real_is_sim_tasks.pusht.start_poses import load_start_poses, random_start_poses

    if source == "random":
        return random_start_poses(cfg, episodes, seed)
    poses = load_start_poses(source)
    if len(poses) < episodes:
        raise ConfigError(f"--start-poses {source} holds {len(poses)} poses, {episodes} episodes were asked for")
    return poses[:episodes]


def collect(expert: str, mode: str, episodes: int, start_poses: str, out: str | Path, seed: int = 0,
            task: str = "pusht.yaml", overrides=(), time_limit_s: float = TIME_LIMIT_S, progress: bool = True,
            teleop_port: int = 8080, expert_grid: str = "random") -> CollectResult:
    """Record episodes until the dataset at ``out`` holds ``episodes`` of them."""
    from real_is_sim.demos.runner import EpisodeRunner, dataset_writer_for

    if expert not in EXPERTS:
        raise ConfigError(f"expert must be one of {EXPERTS}, got {expert!r}")
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    if not time_limit_s > 0:
        raise ConfigError(f"the time limit must be positive, got {time_limit_s}")
    wall = time.perf_counter()
    # online: the stand-in's hidden physics and noise follow the seed, unless an override sets them
    runner = EpisodeRunner(mode, task=task, overrides=[f"standin.seed={seed}", *overrides])
    try:
        poses = start_poses_for(runner.twin.task, start_poses, episodes, seed)
        runner.writer = dataset_writer_for(runner, out)
        done = runner.writer.num_episodes
        todo = range(done, episodes)
        if not todo:
            results = []
        elif expert == "scripted":
            results = _scripted(runner, poses, todo, seed, time_limit_s, progress, expert_grid)
        else:
            results = _teleop(runner, poses, todo, teleop_port)
        total = runner.writer.num_episodes
    finally:
        runner.close()
    successes = sum(r["success"] for r in results)
    return CollectResult(
        out=str(out), expert=expert, mode=mode, episodes=total, recorded=len(results), successes=successes,
        success_rate=round(successes / len(results), 3) if results else None,
        median_seconds=round(float(np.median([r["seconds"] for r in results])), 2) if results else None,
        wall_s=round(time.perf_counter() - wall, 1))


def _scripted(runner, poses: np.ndarray, todo: range, seed: int, time_limit_s: float,
              progress: bool, grid: str = "random") -> list[dict]:
    from tqdm import tqdm

    from real_is_sim.demos.runner import DEFAULT_TASK_TEXT
    from real_is_sim_tasks.pusht.expert import PushTExpert

    expert = PushTExpert(runner.twin.task, planner_worlds=16, seed=seed, grid=grid)
    max_ticks = int(round(time_limit_s / runner.twin.control_dt))
    results = []
    bar = tqdm(todo, desc=f"collect {runner.mode}", unit="episode", disable=not progress)
    for k in bar:
        runner.begin(poses[k], DEFAULT_TASK_TEXT)
        expert.reset(runner.object_pose(), runner.robot_q())
        for _ in range(max_ticks):
            if expert.done:
                break
            runner.step(expert.act(runner.t, runner.object_pose(), runner.robot_q()))
        results.append(runner.end())
        bar.set_postfix(success=f"{sum(r['success'] for r in results)}/{len(results)}")
    return results


def _teleop(runner, poses: np.ndarray, todo: range, port: int) -> list[dict]:
    """The operator records the episodes in the browser (real_is_sim.teleop), one per remaining start pose. No time
    limit is imposed on a person: the operator stops or discards each episode on the page."""
    from real_is_sim.teleop.app import run_teleop

    return run_teleop(runner, port=port, episodes=len(todo), start_poses=poses[todo.start:todo.stop])
