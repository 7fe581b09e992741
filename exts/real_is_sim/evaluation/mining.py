"""Failure mining, the paper's targeted demonstrations: run a policy offline in many worlds, keep the block poses
where it stalled (or where a failed episode ended), cluster them, and give one start pose per cluster to the
scripted expert (docs/evaluation.md, Failure mining).

A block is *stalled* at a time when, since it was first pushed (moved ``STALL_MOVE_M`` or turned ``STALL_TURN_RAD``
from its start), it has moved less than ``STALL_MOVE_M`` and turned less than ``STALL_TURN_RAD`` over the ``STALL_S``
before, while not at the goal: the policy is no longer making progress there. Of a failed episode the first stalled
pose is kept (where it got stuck); a block never pushed gives its start pose, one that never stalled its final pose. Only poses the
task accepts as start poses (inside the work area, clear of the pusher's home, away from the goal) are candidates.
Clusters: k-means over (x, y in 5 cm units, the yaw as a point on a circle of radius 2, so a half turn counts as
20 cm); each cluster gives its member nearest the centre.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from real_is_sim.evaluation.spec import EvalSpec, episodes, plan_units

STALL_S = 3.0
STALL_MOVE_M = 0.005
STALL_TURN_RAD = 0.05
TRACE_EVERY = 30  # ticks between recorded block poses (0.5 s)
POSITION_UNIT_M = 0.05
YAW_RADIUS = 2.0


def yaw_of(poses: np.ndarray) -> np.ndarray:
    """Heading of block poses [..., 7] (xyzw quaternions)."""
    from real_is_sim.transforms import yaw_of as heading

    return heading(poses[..., 3:7])


def first_push_index(trace: np.ndarray) -> int | None:
    """The first index of ``trace`` [T, 7] where the block is ``STALL_MOVE_M`` or ``STALL_TURN_RAD`` from where it
    started, or None (never pushed)."""
    yaw = yaw_of(trace)
    moved = np.linalg.norm(trace[:, :2] - trace[0, :2], axis=1) >= STALL_MOVE_M
    turned = np.abs(np.angle(np.exp(1j * (yaw - yaw[0])))) >= STALL_TURN_RAD
    hits = np.flatnonzero(moved | turned)
    return int(hits[0]) if len(hits) else None


def stall_index(trace: np.ndarray, dt: float, at_goal: np.ndarray) -> int | None:
    """The first index of ``trace`` [T, 7] (poses ``dt`` apart) where the block, pushed before, has been still for
    ``STALL_S`` while not at the goal (``at_goal`` [T]), or None."""
    window = int(round(STALL_S / dt))
    pushed = first_push_index(trace)
    if pushed is None:
        return None
    yaw = yaw_of(trace)
    for j in range(pushed + window, len(trace)):
        past = slice(j - window, j + 1)
        moved = np.linalg.norm(trace[past, :2] - trace[j, :2], axis=1).max()
        turned = np.abs(np.angle(np.exp(1j * (yaw[past] - yaw[j])))).max()
        if moved < STALL_MOVE_M and turned < STALL_TURN_RAD and not at_goal[j]:
            return j
    return None


def cluster_features(poses: np.ndarray) -> np.ndarray:
    yaw = yaw_of(poses)
    return np.column_stack([poses[:, 0] / POSITION_UNIT_M, poses[:, 1] / POSITION_UNIT_M,
                            YAW_RADIUS * np.cos(yaw), YAW_RADIUS * np.sin(yaw)])


def kmeans_representatives(features: np.ndarray, k: int, seed: int = 0, iterations: int = 100) -> np.ndarray:
    """Indices of one member per cluster (the one nearest its centre), k-means++ seeded; all when <= k points."""
    n = len(features)
    if n <= k:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    centres = [features[rng.integers(n)]]
    for _ in range(1, k):
        d2 = np.min(((features[:, None] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(features[rng.choice(n, p=d2 / d2.sum())])
    centres = np.array(centres)
    for _ in range(iterations):
        label = np.argmin(((features[:, None] - centres[None]) ** 2).sum(-1), axis=1)
        moved = np.array([features[label == c].mean(0) if np.any(label == c) else centres[c] for c in range(k)])
        if np.allclose(moved, centres):
            break
        centres = moved
    label = np.argmin(((features[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    members = []
    for c in range(k):
        ids = np.flatnonzero(label == c)
        if len(ids):
            members.append(ids[np.argmin(((features[ids] - centres[c]) ** 2).sum(-1))])
    return np.array(sorted(members))


def mine(spec: EvalSpec, clusters: int, log=print) -> dict:
    """Run ``spec`` (offline, one checkpoint) recording every block's path; returns the failures, their stall poses,
    the valid candidates and ``start_poses`` (one per cluster)."""
    from real_is_sim.evaluation.offline import cached_policy, simulate_unit
    from real_is_sim_tasks.pusht.start_poses import StartPoseCheck
    from real_is_sim_tasks.pusht.success import is_success

    _, _, cell = cached_policy(spec.checkpoints[0])
    check = StartPoseCheck(cell)
    rows = []
    for unit in plan_units(spec, episodes(spec, cell)):
        traces: list[np.ndarray] = []

        def record(tick, twin):
            if (tick + 1) % TRACE_EVERY == 0:
                traces.append(twin.object_poses()[:, 0].copy())

        clock, final = simulate_unit(unit, on_tick=record)
        trace = np.stack(traces, axis=1) if traces else final[:, None]  # [N, T, 7]
        dt = TRACE_EVERY * (1.0 / cell.control_hz)
        for i, e in enumerate(unit.episodes):
            success = not np.isnan(clock.first["ground_truth"][i])
            row = {"start": e.start, "seed": e.seed, "success": success}
            if not success:
                j = stall_index(trace[i], dt, is_success(trace[i], cell.goal))
                pushed = first_push_index(trace[i]) is not None
                pose = trace[i, j] if j is not None else final[i] if pushed else np.asarray(e.start_pose)
                row.update(stalled_at_s=None if j is None else round((j + 1) * dt, 2), pushed=pushed,
                           pose=pose.round(6).tolist(), problem=check.problem(pose))
            rows.append(row)
        if log:
            log(f"{sum(r['success'] for r in rows)}/{len(rows)} at the goal so far")
    candidates = [r for r in rows if not r["success"] and r["problem"] is None]
    poses = np.array([r["pose"] for r in candidates]).reshape(-1, 7)
    chosen = kmeans_representatives(cluster_features(poses), clusters, spec.seed) if len(poses) else np.arange(0)
    return {"checkpoint": spec.checkpoints[0], "episodes": len(rows), "successes": sum(r["success"] for r in rows),
            "failures": sum(not r["success"] for r in rows),
            "stalled": sum(r.get("stalled_at_s") is not None for r in rows),
            "never_pushed": sum(r.get("pushed") is False for r in rows), "candidates": len(candidates),
            "clusters": len(chosen), "start_poses": poses[chosen].tolist(), "rows": rows}


def write_start_poses(path: str | Path, poses: list, meta: dict) -> Path:
    """A start-pose file (``{"poses": [...]}``, as tasks/pusht/start_poses.json) with where the poses came from."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({**meta, "poses": poses}, indent=1) + "\n")
    tmp.replace(path)
    return path
