"""Start poses of the T-block for PushT episodes: the fixed set in ``start_poses.json`` and random ones.

A start pose is the block body frame in the world (px, py, pz, qx, qy, qz, qw), resting on the table. Valid start
poses keep every sphere of the block inside the area the pusher can work around (``WORK_AREA_RADIUS``: the pusher must be
able to get to every side of the block at table height), away from the pusher's home position (in the table plane),
and away from the goal (``MIN_GOAL_DISTANCE`` or ``MIN_GOAL_YAW``), so every episode needs a push.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.transforms import quat_from_yaw, quat_multiply, quat_rotate
from real_is_sim.twin.tblock import block_geometry, rest_on_table, table_plane
from real_is_sim_tasks.pusht.config import PushTCfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher
from real_is_sim_tasks.pusht.success import goal_errors

FIXED_START_POSES = Path(__file__).resolve().parent / "start_poses.json"

# Body-origin positions drawn from (m, world frame), and every sphere centre must lie between these distances
# from the robot base in the table plane: the pusher reaches 0.75 m at table height with the hand down, and it
# must get 5 cm beyond the block's far edge to push it back.
ORIGIN_X = (0.38, 0.60)
ORIGIN_Y = (-0.18, 0.26)
WORK_AREA_RADIUS = (0.28, 0.68)
HOME_CLEARANCE = 0.08  # m from the pusher's home position (table plane) to every sphere centre
MIN_GOAL_DISTANCE = 0.06  # m: a start pose is this far from the goal position ...
MIN_GOAL_YAW = 0.5  # rad: ... or turned this far from the goal's yaw


def load_start_poses(path: str | Path = FIXED_START_POSES) -> np.ndarray:
    """Start poses ``[K, 7]`` from a JSON file ``{"poses": [[px, py, pz, qx, qy, qz, qw], ...]}``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"start pose file not found: {path}")
    try:
        poses = np.asarray(json.loads(path.read_text())["poses"], dtype=np.float64)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"start pose file {path} needs {{\"poses\": [[px, py, pz, qx, qy, qz, qw], ...]}}: {exc}") from None
    if poses.ndim != 2 or poses.shape[1] != 7 or len(poses) == 0 or not np.all(np.isfinite(poses)):
        raise DataError(f"start pose file {path}: poses must be a non-empty list of 7 finite numbers each, got shape {poses.shape}")
    norms = np.linalg.norm(poses[:, 3:7], axis=1)
    if np.any(np.abs(norms - 1.0) > 1e-3):
        raise DataError(f"start pose file {path}: quaternions (xyzw) must have unit norm, got norms {np.round(norms, 4).tolist()}")
    poses[:, 3:7] /= norms[:, None]
    return poses


def start_pose_at(cfg: PushTCfg, x: float, y: float, yaw: float) -> np.ndarray:
    """The block resting on the table with its body origin over (x, y), turned by ``yaw`` about world z from its
    default orientation (for the procedural T: body x axis at ``yaw``)."""
    geometry = block_geometry(cfg)
    pose = np.array(geometry.start_pose, dtype=np.float64)
    pose[:2] = (x, y)
    pose[3:7] = quat_multiply(quat_from_yaw(yaw), pose[3:7])
    return rest_on_table(pose, geometry.centers, geometry.radius, table_plane(cfg.table))


class StartPoseCheck:
    """Says why a block pose is not a valid start pose of ``cfg``'s cell (see the module doc)."""

    def __init__(self, cfg: PushTCfg):
        self.cfg = cfg
        self.centers = block_geometry(cfg).centers
        self.base = np.asarray(cfg.robot.base_pose[:2], dtype=np.float64)
        self.home = ScriptedPusher(cfg).start_tool_position()[:2]

    def problem(self, pose: np.ndarray) -> str | None:
        """The reason ``pose`` (7,) is invalid, or None when it is valid."""
        spheres = pose[:3] + quat_rotate(pose[3:7], self.centers)
        radius = np.linalg.norm(spheres[:, :2] - self.base, axis=1)
        if radius.min() < WORK_AREA_RADIUS[0] or radius.max() > WORK_AREA_RADIUS[1]:
            return f"block spans {radius.min():.3f}..{radius.max():.3f} m from the robot base, outside {WORK_AREA_RADIUS}"
        if np.min(np.linalg.norm(spheres[:, :2] - self.home, axis=1)) < HOME_CLEARANCE:
            return f"block within {HOME_CLEARANCE} m of the pusher's home"
        distance, yaw_error = goal_errors(pose, self.cfg.goal)
        if distance < MIN_GOAL_DISTANCE and yaw_error < MIN_GOAL_YAW:
            return f"block too near the goal ({distance:.3f} m, {yaw_error:.2f} rad)"
        return None


def random_start_poses(cfg: PushTCfg, n: int, seed: int) -> np.ndarray:
    """``n`` valid start poses ``[n, 7]`` drawn uniformly over ``ORIGIN_X`` x ``ORIGIN_Y`` x yaw (rejection sampling)."""
    if n < 0:
        raise ConfigError(f"number of start poses must be non-negative, got {n}")
    rng = np.random.default_rng(seed)
    check = StartPoseCheck(cfg)
    poses = []
    for _ in range(1000 * max(n, 1)):
        if len(poses) == n:
            return np.array(poses).reshape(n, 7)
        pose = start_pose_at(cfg, rng.uniform(*ORIGIN_X), rng.uniform(*ORIGIN_Y), rng.uniform(-np.pi, np.pi))
        if check.problem(pose) is None:
            poses.append(pose)
    raise ConfigError(f"could not draw {n} valid start poses for this cell (work area {WORK_AREA_RADIUS} m from the base)")


def stratified_start_poses(cfg: PushTCfg, n: int, seed: int, attempts: int = 200) -> np.ndarray:
    """``n`` valid start poses ``[n, 7]`` spread over ``ORIGIN_X`` x ``ORIGIN_Y`` x yaw by design, for demonstrations.

    Uniform draws leave the start area's edges thin (the work-area check rejects many poses there, and 30 draws
    seldom land near a corner), while an evaluation grid puts a fifth of its poses on them. Here the positions
    are a grid whose outer rows lie on the area's edges, each jittered by up to half a cell (clipped to the
    area), visited in a seeded random order; the yaws are ``n`` equal strata of [-pi, pi), one draw in each,
    shuffled. A pose the check refuses is drawn again within its cell and yaw stratum, then anywhere in its
    cell."""
    if n < 1:
        raise ConfigError(f"number of start poses must be at least 1, got {n}")
    rng = np.random.default_rng(seed)
    check = StartPoseCheck(cfg)
    width_x, width_y = ORIGIN_X[1] - ORIGIN_X[0], ORIGIN_Y[1] - ORIGIN_Y[0]
    cells_x = max(2, int(round(np.sqrt(n * width_x / width_y))))
    cells_y = max(2, int(np.ceil(n / cells_x)))
    grid_x, grid_y = np.linspace(*ORIGIN_X, cells_x), np.linspace(*ORIGIN_Y, cells_y)
    cells = [(i, j) for i in range(cells_x) for j in range(cells_y)]
    order = rng.permutation(len(cells))[:n]
    yaw_strata = rng.permutation(n)
    poses = []
    for cell, stratum in zip(order, yaw_strata):
        i, j = cells[cell]
        for attempt in range(attempts):
            x = np.clip(grid_x[i] + rng.uniform(-0.5, 0.5) * width_x / (cells_x - 1), *ORIGIN_X)
            y = np.clip(grid_y[j] + rng.uniform(-0.5, 0.5) * width_y / (cells_y - 1), *ORIGIN_Y)
            low = -np.pi + 2 * np.pi * stratum / n
            yaw = rng.uniform(low, low + 2 * np.pi / n) if attempt < attempts // 2 else rng.uniform(-np.pi, np.pi)
            pose = start_pose_at(cfg, x, y, yaw)
            if check.problem(pose) is None:
                poses.append(pose)
                break
        else:
            raise ConfigError(f"no valid start pose near ({grid_x[i]:.3f}, {grid_y[j]:.3f}) after {attempts} draws")
    return np.array(poses)
