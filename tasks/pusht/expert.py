"""Scripted PushT expert: greedy pushes chosen by simulating candidates in the twin's parallel worlds.

Each decision (when the previous push is done) reads the block pose, lays candidate push lines across the block
(``DIRECTIONS`` headings x ``OFFSETS`` lateral offsets), simulates every line in a batched :class:`Twin` (one
candidate per world, the block at its observed pose, the pusher starting ``APPROACH_GAP`` before the contact) and
keeps the candidate and the push depth whose simulated block pose is nearest the goal. The pusher then moves there
fast while it touches nothing (low and straight when that clears the block by ``EDGE_CLEARANCE``, else lifted over
it), pushes slowly, and backs off. Camera occlusion: the stand-in's and the real cell's cameras look at the block
from the side opposite the robot, so pushes from the robot's side (arm behind the block) are preferred, and the
pusher lifts only as high as it must. See docs/expert.md.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.transforms import quat_rotate, yaw_of
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim.twin.tblock import block_geometry, table_plane
from real_is_sim_tasks.pusht.config import PushTCfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher
from real_is_sim_tasks.pusht.start_poses import WORK_AREA_RADIUS
from real_is_sim_tasks.pusht.success import goal_errors

TRANSIT_SPEED = 0.30  # m/s, pusher in free space (like an operator moving to the next contact)
VERTICAL_SPEED = 0.20  # m/s, lifting and lowering
PUSH_SPEED = 0.07  # m/s, in contact (quasi-static: the block stops when the pusher stops)
RETREAT_DISTANCE = 0.015  # m backed off along the push after each push
APPROACH_GAP = 0.02  # m between pusher and block where a push starts
EDGE_CLEARANCE = 0.015  # m kept between pusher and block edges when repositioning low
LIFT_CLEARANCE = 0.02  # m between the pusher's bottom and the block's top when lifted over it
PUSH_BOTTOM_HEIGHT = 0.005  # m between the pusher's bottom and the table while pushing
DIRECTIONS = 12  # push headings per decision, 30 deg apart (the grid's turn: GRIDS)
# "random": the grid turned by a random angle at each decision; "block": turned with the block's yaw, so the
# candidates, and the push chosen, are a function of the block's pose (consistent demonstrations for a policy)
GRIDS = ("random", "block")
OFFSETS = 5  # push lines per heading, spread across the block's width seen along that heading
MAX_PUSH = 0.10  # m of pusher travel past the contact, at most
KNOT_SPACING = 0.01  # m between IK solutions; joints are interpolated linearly in between
STOP_FRACTION = 0.75  # the expert stops at this fraction of the goal tolerances (margin for the real block)
OCCLUSION_WEIGHT = 1.0  # cost per metre the pusher starts beyond the block's centre, seen from the robot
TRANSIT_WEIGHT = 1.0  # cost per metre of repositioning
WORKSPACE_PENALTY = 100.0  # cost of a block pushed out of the work area
CLEAR_LIFT = 0.06  # m the pusher rises above the lift height when it leaves the solved block
SETTLE_TICKS = 6  # ticks held at the end before ``done`` (the arm's lag settles)
# Ticks the pusher holds still before the block is judged at the goal: online the twin's correction catches up with
# the last push (a stand-in episode ended 2.8 deg off when judged right after the push).
JUDGE_WAIT_TICKS = 20
STALL_TICKS = 40  # a simulated batch stops once no candidate got nearer the goal for this long (approach + 0.3 s)
# The planner's worlds: 2 substeps, collisions every other one: 2.4x faster per step than the twin's default, and the
# standard 12 cm push ends 0.6 mm from the 16-substep reference (docs/twin.md, Benchmark).
PLANNER_TWIN = TwinCfg(substeps=2, collide_every=2)


@dataclass
class PushLine:
    """One candidate push: the pusher goes from ``start`` along ``direction`` to ``end`` (world, push height)."""

    direction: np.ndarray  # (3,) unit, in the table plane
    start: np.ndarray  # (3,) APPROACH_GAP before the contact
    end: np.ndarray  # (3,) MAX_PUSH (or less) past the contact


class PushTExpert:
    """Joint targets at 60 Hz that push the T-block to ``cfg.goal``, from the block pose and the robot's joints."""

    def __init__(self, cfg: PushTCfg, planner_worlds: int = 16, seed: int = 0, grid: str = "random"):
        if grid not in GRIDS:
            raise ConfigError(f"expert grid must be one of {GRIDS}, got {grid!r}")
        self.cfg = cfg
        self.grid = grid
        self.pusher = ScriptedPusher(cfg)
        self.dt = 1.0 / cfg.control_hz
        self.planner = Twin(cfg, planner_worlds, PLANNER_TWIN)
        self.rng = np.random.default_rng(seed)
        geometry = block_geometry(cfg)
        self.centers, self.com = geometry.centers, geometry.com
        self.contact_radius = geometry.radius + cfg.robot.pusher_radius
        self.plane = table_plane(cfg.table)
        self.base_xy = np.asarray(cfg.robot.base_pose[:2], dtype=np.float64)
        self.pusher_reach_down = cfg.robot.pusher_radius + cfg.robot.pusher_half_length
        self.block_height = 2.0 * geometry.radius + np.ptp(self.centers @ self._body_up(geometry.start_pose))
        self.goal_scale = np.array([cfg.goal.position_tolerance, cfg.goal.yaw_tolerance])
        self.done = False
        self._queue: deque[np.ndarray] = deque()
        self._q_last = np.asarray(cfg.robot.q_start, dtype=np.float64)
        self._clearing = False
        self._held_still = False  # the pusher has held still since the last push

    # ---- episode interface ----------------------------------------------------------------------------------
    def reset(self, object_pose: np.ndarray, robot_q: np.ndarray) -> None:
        """A new episode: the block at ``object_pose`` (7,), the arm at ``robot_q`` (7,)."""
        self._check_inputs(object_pose, robot_q)
        self.done = False
        self._clearing = False
        self._held_still = False
        self._queue.clear()
        self._q_last = np.asarray(robot_q, dtype=np.float64).copy()

    def act(self, t: float, object_pose: np.ndarray, robot_q: np.ndarray) -> np.ndarray:
        """The arm's joint target (7,) for this tick; plans the next push when the previous one is finished."""
        object_pose, _ = self._check_inputs(object_pose, robot_q)
        if not self._queue and not self.done:
            if self._clearing:
                self.done = True
            elif self._solved(object_pose) and self._held_still:
                self._queue.extend(self._clear_motion())
                self._clearing = True
            elif self._solved(object_pose):
                self._queue.extend([self._q_last] * JUDGE_WAIT_TICKS)
                self._held_still = True
            else:
                self._queue.extend(self._next_push(object_pose))
                self._held_still = False
        if self._queue:
            self._q_last = self._queue.popleft()
        return self._q_last.copy()

    @staticmethod
    def _check_inputs(object_pose, robot_q) -> tuple[np.ndarray, np.ndarray]:
        pose = np.asarray(object_pose, dtype=np.float64)
        q = np.asarray(robot_q, dtype=np.float64)
        if pose.shape != (7,) or q.shape != (7,) or not (np.all(np.isfinite(pose)) and np.all(np.isfinite(q))):
            raise DataError(f"expert needs a finite object pose (7,) and robot q (7,), got shapes {pose.shape}, {q.shape}")
        return pose, q

    def _solved(self, object_pose: np.ndarray) -> bool:
        errors = np.array(goal_errors(object_pose, self.cfg.goal))
        return bool(np.all(errors <= STOP_FRACTION * self.goal_scale))

    # ---- geometry -------------------------------------------------------------------------------------------
    @staticmethod
    def _body_up(pose: np.ndarray) -> np.ndarray:
        """The table normal (world +z) in the block's body frame (the scanned block's body z points down)."""
        return quat_rotate(pose[3:7] * np.array([-1.0, -1.0, -1.0, 1.0]), np.array([0.0, 0.0, 1.0]))

    def _table_z(self, xy: np.ndarray) -> float:
        a, b, c, d = self.plane
        return float(-(a * xy[0] + b * xy[1] + d) / c)

    def _push_z(self, xy: np.ndarray) -> float:
        return self._table_z(xy) + PUSH_BOTTOM_HEIGHT + self.pusher_reach_down

    def _lift_z(self, xy: np.ndarray) -> float:
        return self._table_z(xy) + self.block_height + LIFT_CLEARANCE + self.pusher_reach_down

    def _spheres_xy(self, object_pose: np.ndarray) -> np.ndarray:
        return (object_pose[:3] + quat_rotate(object_pose[3:7], self.centers))[:, :2]

    def _com_xy(self, object_pose: np.ndarray) -> np.ndarray:
        return (object_pose[:3] + quat_rotate(object_pose[3:7], self.com))[:2]

    # ---- motions --------------------------------------------------------------------------------------------
    def _line(self, q: np.ndarray, p0: np.ndarray, p1: np.ndarray, speed: float) -> np.ndarray:
        """Targets [T, 7] moving the pusher straight from ``p0`` (where joints ``q`` put it) to ``p1`` at ``speed``:
        IK every ``KNOT_SPACING``, joints interpolated per tick. Raises DataError where IK fails."""
        length = float(np.linalg.norm(p1 - p0))
        ticks = max(1, int(np.ceil(length / (speed * self.dt))))
        knots = max(1, int(np.ceil(length / KNOT_SPACING)))
        qs = [q]
        for k in range(1, knots + 1):
            point = self.pusher.to_base(p0 + (p1 - p0) * k / knots)
            qs.append(self.pusher.kinematics.solve(point, self.pusher.rotation, qs[-1]))
        s = np.arange(1, ticks + 1) / ticks * knots
        qs = np.array(qs)
        return np.stack([np.interp(s, np.arange(knots + 1), qs[:, j]) for j in range(7)], axis=1)

    def _path(self, q: np.ndarray, points: list[np.ndarray], speeds: list[float]) -> np.ndarray:
        """Targets along the polyline ``points`` (the first is where ``q`` puts the pusher)."""
        parts = []
        for p0, p1, speed in zip(points[:-1], points[1:], speeds):
            if np.linalg.norm(p1 - p0) < 1e-6:
                continue
            parts.append(self._line(q, p0, p1, speed))
            q = parts[-1][-1]
        return np.concatenate(parts) if parts else q[None]

    def _clear_of_block(self, p0: np.ndarray, p1: np.ndarray, spheres_xy: np.ndarray) -> bool:
        """Whether the pusher moving low from ``p0`` to ``p1`` keeps ``EDGE_CLEARANCE`` from every block edge."""
        seg = p1[:2] - p0[:2]
        t = np.clip(((spheres_xy - p0[:2]) @ seg) / max(seg @ seg, 1e-12), 0.0, 1.0)
        gap = np.linalg.norm(p0[:2] + t[:, None] * seg - spheres_xy, axis=1)
        return bool(gap.min() >= self.contact_radius + EDGE_CLEARANCE)

    def _transit_points(self, p_now: np.ndarray, start: np.ndarray, spheres_xy: np.ndarray) -> tuple[list, list]:
        """Waypoints and speeds from ``p_now`` to the push ``start``: straight and low when that keeps clear of the
        block, else up to the lift height, over, and down."""
        low = p_now[2] <= self._push_z(p_now[:2]) + 0.005
        if low and self._clear_of_block(p_now, start, spheres_xy):
            return [p_now, start], [TRANSIT_SPEED]
        up = np.append(p_now[:2], max(p_now[2], self._lift_z(p_now[:2])))
        over = np.append(start[:2], self._lift_z(start[:2]))
        return [p_now, up, over, start], [VERTICAL_SPEED, TRANSIT_SPEED, VERTICAL_SPEED]

    def _clear_motion(self) -> np.ndarray:
        """Leave the solved block: straight up, clear of its top and out of the cameras' way above it."""
        p_now = self.pusher.tool_position(self._q_last)
        top = np.append(p_now[:2], self._lift_z(p_now[:2]) + CLEAR_LIFT)
        targets = self._path(self._q_last, [p_now, top], [VERTICAL_SPEED])
        return np.concatenate([targets, np.repeat(targets[-1:], SETTLE_TICKS, axis=0)])

    # ---- planning -------------------------------------------------------------------------------------------
    def _candidates(self, object_pose: np.ndarray) -> list[PushLine]:
        spheres = self._spheres_xy(object_pose)
        com = self._com_xy(object_pose)
        step = 2.0 * np.pi / DIRECTIONS
        turn = self.rng.uniform(0.0, step) if self.grid == "random" else float(yaw_of(object_pose[3:7])) % step
        lines = []
        for angle in turn + np.arange(DIRECTIONS) * 2.0 * np.pi / DIRECTIONS:
            u = np.array([np.cos(angle), np.sin(angle)])
            v = np.array([-u[1], u[0]])
            across = (spheres - com) @ v
            for offset in np.linspace(across.min() + 0.3 * self.contact_radius, across.max() - 0.3 * self.contact_radius, OFFSETS):
                line_point = com + offset * v
                rel = spheres - line_point
                lateral = np.abs(rel @ v)
                hit = lateral < self.contact_radius
                if not np.any(hit):
                    continue
                s_hit = np.min(rel[hit] @ u - np.sqrt(self.contact_radius**2 - lateral[hit] ** 2))
                start = line_point + (s_hit - APPROACH_GAP) * u
                end = line_point + (s_hit + MAX_PUSH) * u
                direction = np.append(u, 0.0)
                lines.append(PushLine(direction, np.append(start, self._push_z(start)), np.append(end, self._push_z(end))))
        return lines

    def _cost(self, object_poses: np.ndarray) -> np.ndarray:
        """Distance to the goal in tolerance units (position + yaw), plus a penalty outside the work area."""
        distance, yaw_error = goal_errors(object_poses, self.cfg.goal)
        com = object_poses[:, :2] + quat_rotate(object_poses[:, 3:7], np.broadcast_to(self.com, (len(object_poses), 3)))[:, :2]
        radius = np.linalg.norm(com - self.base_xy, axis=1)
        outside = (radius < WORK_AREA_RADIUS[0]) | (radius > WORK_AREA_RADIUS[1] - 0.05)
        return distance / self.goal_scale[0] + yaw_error / self.goal_scale[1] + WORKSPACE_PENALTY * outside

    def _simulate(self, object_pose: np.ndarray, start_qs: np.ndarray, pushes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """For each push (targets [T_i, 7] from ``start_qs[i]``): the lowest simulated cost and the tick reaching it."""
        n = len(pushes)
        best_cost = np.full(n, np.inf)
        best_tick = np.zeros(n, dtype=int)
        worlds = self.planner.num_worlds
        for first in range(0, n, worlds):
            ids = np.arange(first, min(first + worlds, n))
            fill = np.resize(ids, worlds)  # idle worlds repeat candidates of this batch
            self.planner.reset(None, np.broadcast_to(object_pose, (worlds, 1, 7)), start_qs[fill])
            longest = max(len(pushes[i]) for i in ids)
            last_improvement = 0
            for tick in range(longest):
                targets = np.stack([pushes[i][min(tick, len(pushes[i]) - 1)] for i in fill])
                self.planner.step(targets)
                cost = self._cost(self.planner.object_poses()[: len(ids), 0])
                running = np.array([tick < len(pushes[i]) for i in ids])
                better = running & (cost < best_cost[ids])
                best_cost[ids[better]] = cost[better]
                best_tick[ids[better]] = tick
                if better.any():
                    last_improvement = tick
                elif tick - last_improvement >= STALL_TICKS:
                    break
        return best_cost, best_tick

    def _next_push(self, object_pose: np.ndarray) -> np.ndarray:
        """Targets for the transit to, the execution of and the retreat from the best simulated push."""
        q_now = self._q_last  # the arm tracks its targets closely; planning from them keeps the motion continuous
        p_now = self.pusher.tool_position(q_now)
        spheres = self._spheres_xy(object_pose)
        com = self._com_xy(object_pose)
        away = com - self.base_xy
        away /= np.linalg.norm(away)
        lines, start_qs, pushes, transits, extra = [], [], [], [], []
        for line in self._candidates(object_pose):
            try:
                q_start = self.pusher.kinematics.solve(self.pusher.to_base(line.start), self.pusher.rotation, q_now)
                push = self._line(q_start, line.start, line.end, PUSH_SPEED)
            except DataError:
                continue  # out of reach
            points, _ = self._transit_points(p_now, line.start, spheres)
            transit_length = sum(np.linalg.norm(b - a) for a, b in zip(points[:-1], points[1:]))
            beyond = max(0.0, float((line.start[:2] - com) @ away))
            lines.append(line)
            start_qs.append(q_start)
            pushes.append(push)
            extra.append(OCCLUSION_WEIGHT * beyond + TRANSIT_WEIGHT * transit_length)
        if not lines:
            raise DataError(f"no reachable push for the block at {np.round(object_pose[:3], 3).tolist()}")
        cost, tick = self._simulate(object_pose, np.array(start_qs), pushes)
        best = int(np.argmin(cost + np.array(extra)))
        line = lines[best]
        points, speeds = self._transit_points(p_now, line.start, spheres)
        transit = self._path(q_now, points, speeds)
        # the same push again from where the transit ends (same ticks, joints continuous with the transit)
        push = self._line(transit[-1], line.start, line.end, PUSH_SPEED)[: tick[best] + 1]
        reached = self.pusher.tool_position(push[-1])
        back = reached - RETREAT_DISTANCE * line.direction
        retreat = self._path(push[-1], [reached, back], [2.0 * PUSH_SPEED])
        return np.concatenate([transit, push, retreat])
