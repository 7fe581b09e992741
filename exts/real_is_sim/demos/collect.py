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

from real_is_sim.errors import ConfigError, DataError

EXPERTS = ("scripted", "teleop")
TIME_LIMIT_S = 30.0
HANDOVER_ATTEMPTS = 3  # handover states drawn per episode before it starts from its start pose (_scripted_episode)


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
    handed_over: int | None = None  # --handover: episodes that start where the policy left (the rest: start poses)

    def to_dict(self) -> dict:
        return asdict(self)


def start_poses_for(cfg, source: str, episodes: int, seed: int) -> np.ndarray:
    """``episodes`` start poses [N, 7]: drawn at random (``source == "random"``), spread over the start area by
    design (``"stratified"``; both seeded) or the first N of a file."""
    from real_is_sim_tasks.pusht.start_poses import load_start_poses, random_start_poses, stratified_start_poses

    if source == "random":
        return random_start_poses(cfg, episodes, seed)
    if source == "stratified":
        return stratified_start_poses(cfg, episodes, seed)
    poses = load_start_poses(source)
    if len(poses) < episodes:
        raise ConfigError(f"--start-poses {source} holds {len(poses)} poses, {episodes} episodes were asked for")
    return poses[:episodes]


def collect(expert: str, mode: str, episodes: int, start_poses: str, out: str | Path, seed: int = 0,
            task: str = "pusht.yaml", overrides=(), time_limit_s: float = TIME_LIMIT_S, progress: bool = True,
            teleop_port: int = 8080, expert_grid: str = "random", handover: str = "",
            handover_after_s=(2.0, 12.0)) -> CollectResult:
    """Record episodes until the dataset at ``out`` holds ``episodes`` of them. ``handover``: a policy checkpoint
    that drives each episode first, for a time drawn from ``handover_after_s``, offline; the scripted expert's
    demonstration starts where it left block and arm (demos.handover)."""
    from real_is_sim.demos.runner import EpisodeRunner, dataset_writer_for

    if expert not in EXPERTS:
        raise ConfigError(f"expert must be one of {EXPERTS}, got {expert!r}")
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    if not time_limit_s > 0:
        raise ConfigError(f"the time limit must be positive, got {time_limit_s}")
    if handover and (expert != "scripted" or mode != "offline"):
        raise ConfigError("--handover needs the scripted expert offline (the policy drives in an offline twin)")
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
            from real_is_sim.demos.handover import PolicyHandover

            policy = PolicyHandover(handover, handover_after_s, seed) if handover else None
            results = _scripted(runner, poses, todo, seed, time_limit_s, progress, expert_grid, policy)
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
        wall_s=round(time.perf_counter() - wall, 1),
        handed_over=sum(r.get("handover_s") is not None for r in results) if handover else None)


def _scripted(runner, poses: np.ndarray, todo: range, seed: int, time_limit_s: float,
              progress: bool, grid: str = "random", handover=None) -> list[dict]:
    from tqdm import tqdm

    from real_is_sim_tasks.pusht.expert import PushTExpert

    expert = PushTExpert(runner.twin.task, planner_worlds=16, seed=seed, grid=grid)
    max_ticks = int(round(time_limit_s / runner.twin.control_dt))
    results = []
    bar = tqdm(todo, desc=f"collect {runner.mode}", unit="episode", disable=not progress)
    for k in bar:
        results.append(_scripted_episode(runner, expert, poses[k], k, max_ticks, handover))
        bar.set_postfix(success=f"{sum(r['success'] for r in results)}/{len(results)}")
    return results


def _scripted_episode(runner, expert, start_pose: np.ndarray, k: int, max_ticks: int, handover) -> dict:
    """One expert episode from ``start_pose``, or from where ``handover``'s policy left block and arm. The expert
    plans from the arm's pose by IK; from an arm the policy left in a pose IK cannot leave (a DataError), the episode
    is dropped and the handover drawn again (another time and noise), then from the start pose itself."""
    from real_is_sim.demos.runner import DEFAULT_TASK_TEXT

    for attempt in range(HANDOVER_ATTEMPTS if handover is not None else 0):
        state = handover.state_after(start_pose, k, attempt)
        runner.begin(state.object_pose, DEFAULT_TASK_TEXT, robot_q=state.robot_q)
        try:
            return {**_run_expert(runner, expert, max_ticks), "handover_s": state.after_s}
        except DataError:
            runner.discard()
    runner.begin(start_pose, DEFAULT_TASK_TEXT)
    return _run_expert(runner, expert, max_ticks)


def _run_expert(runner, expert, max_ticks: int) -> dict:
    expert.reset(runner.object_pose(), runner.robot_q())
    for _ in range(max_ticks):
        if expert.done:
            break
        runner.step(expert.act(runner.t, runner.object_pose(), runner.robot_q()))
    return runner.end()


def _teleop(runner, poses: np.ndarray, todo: range, port: int) -> list[dict]:
    """The operator records the episodes in the browser (real_is_sim.teleop), one per remaining start pose. No time
    limit is imposed on a person: the operator stops or discards each episode on the page."""
    from real_is_sim.teleop.app import run_teleop

    return run_teleop(runner, port=port, episodes=len(todo), start_poses=poses[todo.start:todo.stop])
