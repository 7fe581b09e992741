"""Offline evaluation: a batch of episodes of one checkpoint in the N worlds of one Twin, one policy call per chunk.

Visual forces and following are off (a bare ``Twin``: nothing corrects it, nothing follows it), with the bridge's
twin settings (those the demonstrations were collected with). Every episode: the block at its start pose, the arm at
``q_start``, the policy's chunks through the waypoint scheduler at 60 Hz, at most ``seconds`` of twin time. Each
episode draws its flow noise from its own generator (seeded by the episode), so its chunks do not depend on which
episodes share its batch. Rules (``spec.RULE_TEXT``) are judged every tick (ground truth, progress) or every 6th
tick (coverage, 10 Hz as gym-pusht steps); the batch stops when every world has met the ground-truth and coverage
rules, or at the limit.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import torch

from real_is_sim.evaluation.spec import PROGRESS_DONE, Episode, Unit

COVERAGE_EVERY = 6  # ticks between coverage checks (10 Hz)
_CACHE: dict = {}  # per process: loaded policies and built twins, reused across units


def cached_policy(path: str):
    """(policy, checkpoint dict, cell) of a checkpoint, loaded once per process."""
    key = ("policy", path)
    if key not in _CACHE:
        from real_is_sim.policy.checkpoint import load_checkpoint
        from real_is_sim.policy.observations import cell_from_yaml

        policy, state = load_checkpoint(path)
        _CACHE[key] = (policy, state, cell_from_yaml(policy.cfg.cell))
    return _CACHE[key]


def cached_twin(cell, cell_yaml: str, worlds: int):
    from real_is_sim.bridge.config import load_bridge_cfg
    from real_is_sim.twin import Twin

    key = ("twin", cell_yaml, worlds)
    if key not in _CACHE:
        _CACHE[key] = Twin(cell, worlds, load_bridge_cfg("standin").twin)
    return _CACHE[key]


def checkpoint_meta(path: str) -> dict:
    _, state, _ = cached_policy(path)
    return {"checkpoint": path, "variant": state["policy_cfg"]["variant"], "training_steps": int(state["step"]),
            "dataset": state.get("dataset", "")}


def renderer_of(policy, seed: int):
    """The policy's cameras in an evaluation (``real_image``: realities other than the training images')."""
    from real_is_sim.policy.observations import EVALUATION_REALITIES, renderer_for

    if not policy.cfg.uses_images:
        return None
    return renderer_for(policy.cfg.variant, policy.cfg.image_size, policy.cfg.cell, seed=seed, realities=EVALUATION_REALITIES)


class ChunkSource:
    """Batched policy inference with one noise generator per episode. ``observe(poses [N, n_obj, 7], q [N, 7])``
    every tick (the policy may look ``history_frames`` ticks back), then ``chunks(env_ids)`` for the envs that need
    one."""

    def __init__(self, policy, seeds: list[int], renderer=None, noise_scale: float | None = None):
        self.policy, self.renderer, self.noise_scale = policy, renderer, noise_scale
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.history_frames = policy.cfg.history_frames
        self.history = deque(maxlen=self.history_frames + 1)  # [0]: history_frames ticks ago (or the first frame)
        self.seen = None

    def observe(self, object_poses: np.ndarray, robot_q: np.ndarray, seen=None) -> None:
        """``seen``: (object poses, robot q, t) the cameras see when that differs from the state the policy reads
        (``real_image`` online: the real world's)."""
        self.history.append((np.array(object_poses), np.array(robot_q)))
        self.seen = seen

    def chunks(self, env_ids) -> np.ndarray:
        from real_is_sim.policy.flow import image_tensor, state_vector

        p, ids = self.policy, np.asarray(env_ids, dtype=int)
        (poses, q), (poses_before, q_before) = self.history[-1], self.history[0]
        noise = torch.stack([torch.randn((p.cfg.flow_length, 8), generator=self.generators[i]) for i in ids])
        images = None
        if self.renderer is not None:
            seen_poses, seen_q, t = self.seen if self.seen is not None else (poses, q, None)
            images = self.renderer.render(seen_poses[ids], seen_q[ids], t)
        if self.history_frames:
            state = state_vector(p.cfg.variant, poses[ids], q[ids], (poses_before[ids], q_before[ids]))
        else:
            state = state_vector(p.cfg.variant, poses[ids], q[ids])
        image = image_tensor(images) if p.cfg.uses_images else None
        p.eval()
        return p.sample(state, image, noise=noise, noise_scale=self.noise_scale).numpy()


def make_scheduler(policy, n: int, control_dt: float, execute: int | None, tempo: float | None = None):
    """The waypoint scheduler; ``execute``: waypoints of each chunk run before the next call (receding horizon);
    ``tempo``: chunks run this many times faster than demonstrated (None: the checkpoint's PolicyCfg.tempo)."""
    from real_is_sim.policy.scheduler import WaypointScheduler

    horizon_s = policy.cfg.horizon_s / (policy.cfg.tempo if tempo is None else tempo)
    return WaypointScheduler(n, policy.cfg.waypoints, horizon_s, 1.0 / control_dt, execute)


class RuleClock:
    """First time each success rule held, per env, and the running maximum coverage."""

    def __init__(self, n: int, cell):
        self.cell = cell
        self.first = {rule: np.full(n, np.nan) for rule in ("ground_truth", "coverage", "progress")}
        self.max_coverage = np.zeros(n)

    def update(self, t: float, block_poses: np.ndarray, progress: np.ndarray | None, check_coverage: bool) -> None:
        from real_is_sim_tasks.pusht.coverage import COVERAGE_SUCCESS, coverages
        from real_is_sim_tasks.pusht.success import is_success

        self._mark("ground_truth", t, is_success(block_poses, self.cell.goal))
        if progress is not None:
            self._mark("progress", t, progress > PROGRESS_DONE)
        if check_coverage:
            cov = coverages(self.cell, block_poses)
            self.max_coverage = np.maximum(self.max_coverage, cov)
            self._mark("coverage", t, cov >= COVERAGE_SUCCESS)

    def _mark(self, rule: str, t: float, hit: np.ndarray) -> None:
        first = self.first[rule]
        first[np.isnan(first) & np.asarray(hit, dtype=bool)] = t

    def settled(self) -> bool:
        return not (np.any(np.isnan(self.first["ground_truth"])) or np.any(np.isnan(self.first["coverage"])))

    def row(self, i: int, block_pose: np.ndarray) -> dict:
        from real_is_sim_tasks.pusht.coverage import coverage
        from real_is_sim_tasks.pusht.success import goal_errors

        distance, yaw_error = goal_errors(block_pose, self.cell.goal)
        out = {}
        for rule, first in self.first.items():
            hit = not np.isnan(first[i])
            out[rule] = hit
            out[f"{rule}_time_s"] = round(float(first[i]), 3) if hit else None
        out.update(final_distance_m=round(float(distance), 4), final_yaw_error_rad=round(float(yaw_error), 4),
                   final_coverage=round(coverage(self.cell, block_pose), 4), max_coverage=round(float(self.max_coverage[i]), 4))
        return out


def episode_row(e: Episode, unit: Unit, outcome: dict, wall_s: float) -> dict:
    return {"key": unit.key(e), "mode": unit.mode, "checkpoint": e.checkpoint, "start": e.start,
            "pose_index": e.pose_index, "trial": e.trial, "seed": e.seed, "seconds_limit": unit.seconds,
            "execute_waypoints": unit.execute, "control": unit.control, "noise_scale": unit.noise_scale,
            "tempo": unit.tempo, "appearance": unit.appearance,
            "start_pose": [round(v, 6) for v in e.start_pose], **outcome, "wall_s": round(wall_s, 2)}


def run_offline_unit(unit: Unit) -> list[dict]:
    """The unit's episodes, all at once in one Twin of ``len(unit.episodes)`` worlds."""
    wall = time.perf_counter()
    clock, final = simulate_unit(unit)
    wall_s = (time.perf_counter() - wall) / len(unit.episodes)
    return [episode_row(e, unit, clock.row(i, final[i]), wall_s) for i, e in enumerate(unit.episodes)]


def simulate_unit(unit: Unit, on_tick=None) -> tuple[RuleClock, np.ndarray]:
    """Run the unit's episodes; ``on_tick(tick, twin)`` after every twin step (failure mining records the block's
    path with it). Returns the rule clock and the final block poses [N, 7]."""
    policy, state, cell = cached_policy(unit.checkpoint)
    return simulate(policy, state.get("dataset", ""), cell, unit, on_tick)


def simulate(policy, dataset: str, cell, unit: Unit, on_tick=None) -> tuple[RuleClock, np.ndarray]:
    """``simulate_unit`` with the policy given (``dataset``: the replay control's demonstrations); the unit's
    checkpoint only names it. ``scripts/bench_eval.py`` times this loop with untrained policies."""
    n = len(unit.episodes)
    twin = cached_twin(cell, policy.cfg.cell, n)
    starts = np.array([e.start_pose for e in unit.episodes])
    q_start = np.asarray(cell.robot.q_start, dtype=np.float64)
    twin.reset(object_poses=starts[:, None, :], robot_q=np.tile(q_start, (n, 1)))
    scheduler = make_scheduler(policy, n, twin.control_dt, unit.execute, unit.tempo)
    expert = None
    if unit.control is None:
        source = ChunkSource(policy, [e.seed for e in unit.episodes], renderer_of(policy, unit.episodes[0].seed),
                             unit.noise_scale)
    elif unit.control == "expert":
        from real_is_sim.evaluation.controls import ExpertControl

        expert = ExpertControl(cell, [e.seed for e in unit.episodes], starts, q_start)
    else:
        from real_is_sim.evaluation.controls import control_source

        source = control_source(unit.control, policy.cfg, dataset,
                                [e.pose_index for e in unit.episodes], unit.execute, q_start)
    clock = RuleClock(n, cell)
    ticks = int(round(unit.seconds / twin.control_dt))
    for tick in range(ticks):
        if expert is not None:  # 60 Hz targets of its own, no progress output
            targets, progress = expert.targets(tick * twin.control_dt, twin.object_poses(), twin.robot_q()), None
        else:
            source.observe(twin.object_poses(), twin.robot_q())
            envs = scheduler.needs_chunk()
            if len(envs):
                scheduler.set_chunks(envs, source.chunks(envs))
            targets = scheduler.step()
            progress = scheduler.progress
        twin.step(targets)
        if on_tick is not None:
            on_tick(tick, twin)
        clock.update((tick + 1) * twin.control_dt, twin.object_poses()[:, 0], progress,
                     check_coverage=(tick + 1) % COVERAGE_EVERY == 0 or tick == ticks - 1)
        if clock.settled():
            break
    return clock, twin.object_poses()[:, 0]
