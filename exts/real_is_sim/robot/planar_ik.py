"""Planar inverse kinematics for teleoperation: the pusher centre tracks a target (x, y) in a plane parallel to
the table, held at a fixed height with the tool axis along the table's downward normal (Pink, QP solver daqp).

One QP per control tick (differential IK, Pink's ``solve_ik``):
- hard equality constraints (Pink's ``constraints``): :class:`PlaneTask`, three rows: the pusher's height above the
  table along its normal, and the two tilt components of the tool z axis away from the downward normal;
- costs: a ``FrameTask`` on the pusher frame whose target is the operator's point on the plane, costed only in the
  tool frame's x and y (in-plane, since the constraints keep the tool z axis on the normal) and weakly in yaw; a
  weak ``PostureTask`` towards ``q_start`` resolves the arm's redundancy;
- inequalities: the Panda's joint limits (shrunk by the safety layer's margin) and joint velocity limits.
Everything is solved in the robot base frame (the pinocchio model's root); targets and the plane are given in
the world frame and moved there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import pink
from pink.exceptions import NoSolutionFound
from pink.tasks import FrameTask, PostureTask, Task

from real_is_sim.cell import CellCfg
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.robot import franka
from real_is_sim.robot.kinematics import TCP_FRAME
from real_is_sim.robot.safety import SafetyCfg
from real_is_sim.transforms import pose_inverse, quat_rotate
from real_is_sim.twin.tblock import table_plane

PUSHER_FRAME = "pusher"
QP_SOLVER = "daqp"


class PlaneTask(Task):
    """Pusher on the plane ``normal . p = offset`` (base frame), tool z axis along ``-normal``.

    Error (3): ``normal . p - offset`` (m), then ``u_i . (z_tool x -normal)`` for two unit vectors u_i spanning the
    plane (the sine of the tilt, split in two directions). Each row is clipped to what one tick may correct, so a
    tool that starts off the plane is brought onto it at a bounded speed instead of making the QP infeasible.
    """

    def __init__(self, frame_id: int, normal: np.ndarray, offset: float, max_height_step: float, max_tilt_step: float):
        super().__init__(cost=None)
        self.frame_id, self.normal, self.offset = frame_id, normal, offset
        self.down = -normal
        helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        u1 = np.cross(normal, helper)
        u1 /= np.linalg.norm(u1)
        self.plane_axes = np.stack([u1, np.cross(normal, u1)])
        self.max_step = np.array([max_height_step, max_tilt_step, max_tilt_step])

    def raw_error(self, configuration: pink.Configuration) -> np.ndarray:
        pose = configuration.data.oMf[self.frame_id]
        z_tool = pose.rotation[:, 2]
        tilt = self.plane_axes @ np.cross(z_tool, self.down)
        return np.concatenate([[self.normal @ pose.translation - self.offset], tilt])

    def compute_error(self, configuration: pink.Configuration) -> np.ndarray:
        return np.clip(self.raw_error(configuration), -self.max_step, self.max_step)

    def compute_jacobian(self, configuration: pink.Configuration) -> np.ndarray:
        J = pin.getFrameJacobian(configuration.model, configuration.data, self.frame_id, pin.LOCAL_WORLD_ALIGNED)
        z_tool = configuration.data.oMf[self.frame_id].rotation[:, 2]
        # d/dt (z x m) = (w x z) x m = z (m . w) - w (m . z), m = the downward normal, w the angular velocity
        tilt_rows = np.outer(self.plane_axes @ z_tool, self.down) - (self.down @ z_tool) * self.plane_axes
        return np.vstack([self.normal @ J[:3], tilt_rows @ J[3:]])

    def __repr__(self) -> str:
        return f"PlaneTask(normal={self.normal}, offset={self.offset})"


@dataclass
class PlanarIKResult:
    q: np.ndarray  # (7,) joint targets q' for this tick, within the joint limits
    tool_position: np.ndarray  # (3,) world position of the pusher centre at q
    target_xy: np.ndarray  # (2,) the target asked for (world)
    tracking_error_m: float  # in-plane distance from the pusher to the target
    plane_error_m: float  # signed distance of the pusher centre from the tool plane
    tilt_deg: float  # angle between the tool z axis and the table's downward normal
    solve_ms: float  # wall time of this tick's QP (build + solve)
    feasible: bool  # False: the QP had no solution (limits), q held where it was


class PlanarIK:
    """Differential IK at the control rate: ``reset(q)`` once, then ``step(target_xy)`` every tick."""

    def __init__(self, cell: CellCfg, height: float = 0.035, max_tool_speed: float = 0.4, max_tilt_rate: float = 1.0,
                 joint_margin_rad: float = SafetyCfg().joint_margin_rad, posture_cost: float = 1e-3,
                 yaw_cost: float = 0.05):
        """``height``: pusher centre above the table plane (m; 0.035 m puts the capsule's bottom 5 mm above the
        table). ``max_tool_speed`` (m/s) and ``max_tilt_rate`` (rad/s): how fast the pusher may move in the plane
        and be brought back onto it and upright."""
        for name, value in (("height", height), ("max_tool_speed", max_tool_speed), ("max_tilt_rate", max_tilt_rate)):
            if not (np.isfinite(value) and value > 0.0):
                raise ConfigError(f"PlanarIK {name} must be a positive number, got {value}")
        self.cell, self.height, self.max_tool_speed = cell, height, max_tool_speed
        self.dt = 1.0 / cell.control_hz
        self.model = self._arm_model(cell, joint_margin_rad)
        self.frame_id = self.model.getFrameId(PUSHER_FRAME)

        self.base_pose = np.asarray(cell.robot.base_pose, dtype=np.float64)
        self.base_inv = pose_inverse(self.base_pose)
        self.plane_world = plane_world = table_plane(cell.table)
        # Plane n.p + d = height (world) in the base frame: n_b = R^T n, offset = height - d - n . t
        normal_base = quat_rotate(self.base_inv[3:7], plane_world[:3])
        offset_base = height - plane_world[3] - plane_world[:3] @ self.base_pose[:3]
        self.plane_task = PlaneTask(self.frame_id, normal_base, offset_base, max_tool_speed * self.dt,
                                    max_tilt_rate * self.dt)
        self.frame_task = FrameTask(PUSHER_FRAME, position_cost=[1.0, 1.0, 0.0], orientation_cost=[0.0, 0.0, yaw_cost])
        self.posture_task = PostureTask(cost=posture_cost)
        self.q_start = np.asarray(cell.robot.q_start, dtype=np.float64)
        self.posture_task.set_target(self.q_start)
        self.target_rotation = self._upright_rotation(self.q_start)
        self.limits = [self.model.configuration_limit, self.model.velocity_limit]
        self.configuration = pink.Configuration(self.model, self.model.createData(), self._within_limits(self.q_start))

    @staticmethod
    def _arm_model(cell: CellCfg, joint_margin_rad: float) -> pin.Model:
        """The URDF's 7 arm joints (fingers locked), a ``pusher`` frame at the pusher centre, limits with a margin."""
        full = pin.buildModelFromUrdf(str(franka.panda_urdf_path()))
        fingers = [full.getJointId(name) for name in ("panda_finger_joint1", "panda_finger_joint2")]
        q_ref = np.concatenate([np.zeros(franka.ARM_DOF), [cell.robot.finger_q] * 2])
        model = pin.buildReducedModel(full, fingers, q_ref)
        tcp = model.frames[model.getFrameId(TCP_FRAME)]
        offset = pin.SE3(np.eye(3), np.array([0.0, 0.0, cell.robot.pusher_offset]))
        model.addFrame(pin.Frame(PUSHER_FRAME, tcp.parentJoint, tcp.parentFrame, tcp.placement * offset,
                                 pin.FrameType.OP_FRAME))
        # Keep the safety layer's margin, so the follower never clamps what the IK sends.
        model.lowerPositionLimit = franka.Q_MIN + joint_margin_rad
        model.upperPositionLimit = franka.Q_MAX - joint_margin_rad
        model.velocityLimit = franka.QD_MAX.copy()
        return model

    def _within_limits(self, q: np.ndarray) -> np.ndarray:
        return np.clip(q, self.model.lowerPositionLimit, self.model.upperPositionLimit)

    def _upright_rotation(self, q: np.ndarray) -> np.ndarray:
        """Tool rotation (base frame) with z along the downward normal and x as close as possible to the tool's x at q."""
        x_tool = pink.Configuration(self.model, self.model.createData(), q).data.oMf[self.frame_id].rotation[:, 0]
        z = -self.plane_task.normal
        x = x_tool - (x_tool @ z) * z
        x /= np.linalg.norm(x)
        return np.stack([x, np.cross(z, x), z], axis=1)

    def reset(self, q: np.ndarray) -> None:
        """Start from joints ``q`` (7,), e.g. the twin robot's at the start of an episode."""
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (franka.ARM_DOF,) or not np.all(np.isfinite(q)):
            raise DataError(f"PlanarIK.reset needs 7 finite joint angles, got shape {q.shape}")
        self.configuration.update(self._within_limits(q))

    @property
    def q(self) -> np.ndarray:
        return self.configuration.q.copy()

    def tool_position(self) -> np.ndarray:
        """World position of the pusher centre at the current joints."""
        p_base = self.configuration.data.oMf[self.frame_id].translation
        return self.base_pose[:3] + quat_rotate(self.base_pose[3:7], p_base)

    def plane_point(self, target_xy) -> np.ndarray:
        """The point of the tool plane (world) straight above (x, y)."""
        a, b, c, d = self.plane_world
        x, y = target_xy
        return np.array([x, y, (self.height - d - a * x - b * y) / c])

    def step(self, target_xy) -> PlanarIKResult:
        """One control tick towards the world target (x, y); the pusher moves at most ``max_tool_speed``."""
        target_xy = np.asarray(target_xy, dtype=np.float64)
        if target_xy.shape != (2,) or not np.all(np.isfinite(target_xy)):
            raise DataError(f"PlanarIK target must be 2 finite numbers (world x, y), got {target_xy!r}")
        started = time.perf_counter()
        # Rate-limit the target: one tick asks for at most max_tool_speed * dt of in-plane motion.
        tool_world = self.tool_position()
        step_world = self.plane_point(target_xy) - self.plane_point(tool_world[:2])
        distance = np.linalg.norm(step_world)
        if distance > self.max_tool_speed * self.dt:
            step_world *= self.max_tool_speed * self.dt / distance
        goal_world = self.plane_point(tool_world[:2]) + step_world
        goal_base = self.base_inv[:3] + quat_rotate(self.base_inv[3:7], goal_world)
        self.frame_task.set_target(pin.SE3(self.target_rotation, goal_base))
        try:
            velocity = pink.solve_ik(self.configuration, [self.frame_task, self.posture_task], self.dt,
                                     solver=QP_SOLVER, limits=self.limits, constraints=[self.plane_task])
            self.configuration.update(self._within_limits(self.configuration.integrate(velocity, self.dt)))
            feasible = True
        except NoSolutionFound:
            feasible = False
        solve_ms = 1e3 * (time.perf_counter() - started)
        return self._result(target_xy, solve_ms, feasible)

    def plane_errors(self, q: np.ndarray) -> tuple[float, float]:
        """(signed distance of the pusher centre from the tool plane in m, tilt of the tool z axis in deg) at joints
        ``q``: the IK's own output, or the joints a robot actually reached."""
        configuration = pink.Configuration(self.model, self.model.createData(), np.asarray(q, dtype=np.float64))
        return self._plane_errors(configuration)

    def _plane_errors(self, configuration: pink.Configuration) -> tuple[float, float]:
        z_tool = configuration.data.oMf[self.frame_id].rotation[:, 2]
        tilt = np.degrees(np.arccos(np.clip(z_tool @ self.plane_task.down, -1.0, 1.0)))
        return float(self.plane_task.raw_error(configuration)[0]), float(tilt)

    def _result(self, target_xy: np.ndarray, solve_ms: float, feasible: bool) -> PlanarIKResult:
        tool = self.tool_position()
        plane_error, tilt = self._plane_errors(self.configuration)
        in_plane_error = np.linalg.norm(self.plane_point(target_xy) - self.plane_point(tool[:2]))
        return PlanarIKResult(q=self.q, tool_position=tool, target_xy=target_xy.copy(),
                              tracking_error_m=float(in_plane_error), plane_error_m=plane_error, tilt_deg=tilt,
                              solve_ms=solve_ms, feasible=feasible)
