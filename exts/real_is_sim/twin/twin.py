"""The PushT twin: one Newton model holding N independent worlds (Franka + pusher + T-block), stepped at 60 Hz.

Conventions:
- Poses are (px, py, pz, qx, qy, qz, qw). Worlds are replicated without spacing (Newton separates them by world
  id, not by position), so every pose is in its own world's frame and equal states give equal numbers.
- Object poses are of the body frame (see :mod:`real_is_sim.twin.tblock`); velocities are Newton's body twist
  (linear velocity of the COM, angular velocity), both world frame.
- ``object_wrench`` [N, n_obj, 6] is (force xyz [N], torque xyz [N m]), world frame, about the body's COM: exactly
  Newton 1.8's ``State.body_f`` layout (``spatial_top`` = force, ``spatial_bottom`` = torque, applied at the COM,
  see ``newton/_src/solvers/solver.py: integrate_rigid_body``). It is added to the object bodies in every substep of
  every following ``step()`` until it is overwritten (assign a new array or edit it in place); it never reaches
  the robot's links.
- The robot is position-controlled, like the real Franka: its links are KINEMATIC bodies (infinite mass for the
  block, untouched by gravity) whose joints follow the targets through a first-order lag (time constant
  ``RobotCfg.tracking_time_constant``) capped at the Panda's joint speed limits; each substep writes the resulting
  link poses and twists with forward kinematics. Dynamic links with XPBD joint drives were tried first and rejected
  (measured, Newton 1.8 XPBD): the pusher oscillated by 3-5 cm around a fixed target and lagged 5-7 cm at 0.2 m/s,
  and the URDF inertias made the arm diverge at the home pose (see docs/twin.md).
- ``TwinCfg(robot="dynamic", solver="mujoco")``: the paper's dynamic robot instead. The links keep their mass and
  inertia, MuJoCo's per-body gravity compensation cancels their weight, and stiff PD drives (position + velocity
  feed-forward, implicitfast integrator) pull the joints onto the same lagged, speed-capped reference the kinematic
  arm follows; contacts push back, so a blocked pusher gives q != q' and ``robot_q()`` reports q (docs/dynamic_robot.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import newton
import numpy as np
import warp as wp

from real_is_sim.cell import CellCfg
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.robot import franka
from real_is_sim.transforms import quat_rotate
from real_is_sim.twin.scene import BLOCK_LABEL, ContactSettings, add_table, build_world
from real_is_sim.twin.tblock import block_geometry, table_plane

SOLVERS = ("xpbd", "featherstone", "mujoco")
BROAD_PHASES = ("nxn", "sap", "explicit")
CONTACT_SPHERES = ("reachable", "all")
ROBOT_MODES = ("kinematic", "dynamic")

# robot="dynamic": joint drives of the arm (N m/rad, N m s/rad; fingers N/m, N s/m), the gains of the Isaac Lab Franka
# asset (docs/isaaclab_franka.md), effort limits = the Panda's published torques, and joint armature (kg m^2) standing
# in for the motors' reflected inertia (MuJoCo Menagerie's Panda uses 0.1).
DYNAMIC_DRIVE_KE = np.array([4500.0, 4500.0, 4500.0, 4500.0, 2000.0, 2000.0, 2000.0])
DYNAMIC_DRIVE_KD = np.array([200.0, 200.0, 200.0, 200.0, 60.0, 60.0, 60.0])
DYNAMIC_ARMATURE = 0.1
DYNAMIC_FINGER_KE, DYNAMIC_FINGER_KD, DYNAMIC_FINGER_EFFORT = 2000.0, 100.0, 100.0


@dataclass
class TwinCfg:
    solver: str = "xpbd"  # "xpbd" | "featherstone" | "mujoco" (needs mujoco_warp)
    # "kinematic": position-controlled links written by FK (default); "dynamic": links with mass and inertia, gravity
    # compensated, stiff joint drives (needs solver="mujoco"; docs/dynamic_robot.md)
    robot: str = "kinematic"
    substeps: int = 4  # physics substeps per control step (2 is ~1.5x faster but the real block sinks 1.5 mm: docs/twin.md)
    iterations: int = 2  # XPBD constraint iterations per substep
    control_hz: Optional[float] = None  # None: the task's control_hz (60)
    gravity: float = -9.81  # along world z
    contact_gap: float = 0.002  # m of detection distance beyond touching (Newton's default 0.1 m is costly)
    contact_margin: float = 0.0  # m outward offset of all colliders
    rigid_contact_max: Optional[int] = None  # None: the exact bound from the shape pairs (contact_capacity)
    broad_phase: str = "explicit"  # precomputed shape pairs: much faster than "nxn" or "sap" with many worlds (measured)
    collide_every: int = 1  # run collision detection every k-th substep
    # "reachable": each block sphere collides only with the table and/or pusher when they can touch it (the scanned
    # block: 447 shape pairs per world instead of 933, docs/twin.md); "all": every sphere with both
    contact_spheres: str = "reachable"
    deterministic: bool = False  # deterministic contact ordering (matters on CUDA; CPU runs are already repeatable)
    # record a step's launches once and replay them (XPBD, even substeps; the same numbers, docs/twin.md)
    graph_capture: bool = True
    device: str = "cpu"

    def __post_init__(self):
        if self.solver not in SOLVERS:
            raise ConfigError(f"unknown solver {self.solver!r}: choose one of {SOLVERS}")
        if self.robot not in ROBOT_MODES:
            raise ConfigError(f"unknown robot {self.robot!r}: choose one of {ROBOT_MODES}")
        if self.robot == "dynamic" and self.solver != "mujoco":
            raise ConfigError(
                f"TwinCfg.robot='dynamic' needs solver='mujoco' (per-body gravity compensation, implicit drives), got "
                f"solver={self.solver!r}: set twin.solver=mujoco (XPBD drives could not hold the arm: docs/twin.md)"
            )
        if self.contact_spheres not in CONTACT_SPHERES:
            raise ConfigError(f"unknown contact_spheres {self.contact_spheres!r}: choose one of {CONTACT_SPHERES}")
        if self.broad_phase not in BROAD_PHASES:
            raise ConfigError(f"unknown broad_phase {self.broad_phase!r}: choose one of {BROAD_PHASES}")
        for name in ("substeps", "iterations", "collide_every"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"TwinCfg.{name} must be at least 1, got {getattr(self, name)}")
        if self.control_hz is not None and not self.control_hz > 0:
            raise ConfigError(f"TwinCfg.control_hz must be positive, got {self.control_hz}")
        if not (self.contact_gap >= 0 and self.contact_margin >= 0):
            raise ConfigError("TwinCfg.contact_gap and contact_margin must be non-negative")


@wp.kernel
def _apply_body_forces(
    body_q: wp.array[wp.transform],
    body_qd: wp.array[wp.spatial_vector],
    body_mass: wp.array[float],
    body_inertia: wp.array[wp.mat33],
    base_f: wp.array[wp.spatial_vector],
    linear_damping: wp.array[float],
    angular_damping: wp.array[float],
    body_f: wp.array[wp.spatial_vector],
):
    i = wp.tid()
    rot = wp.transform_get_rotation(body_q[i])
    v = wp.spatial_top(body_qd[i])
    w = wp.spatial_bottom(body_qd[i])
    damping_torque = wp.quat_rotate(rot, body_inertia[i] * wp.quat_rotate_inv(rot, w)) * (-angular_damping[i])
    f = base_f[i]
    body_f[i] = wp.spatial_vector(
        wp.spatial_top(f) - body_mass[i] * linear_damping[i] * v, wp.spatial_bottom(f) + damping_torque
    )


@wp.kernel
def _advance_arm(
    q_target: wp.array2d[float], q_cmd: wp.array2d[float], gain: float, max_step: wp.array[float], dt: float,
    finger_q: float, q_index: wp.array2d[int], dof_index: wp.array2d[int], out_q: wp.array[float], out_qd: wp.array[float],
):
    """One substep of the arm's reference in world ``tid``: a first-order lag toward the targets, capped at the joint
    speed limits, written with the fixed fingers as joint coordinates and velocities (the kinematic links') or as
    drive targets (the dynamic arm's)."""
    world = wp.tid()
    for j in range(7):
        step = wp.clamp((q_target[world, j] - q_cmd[world, j]) * gain, -max_step[j], max_step[j])
        q_cmd[world, j] = q_cmd[world, j] + step
        out_q[q_index[world, j]] = q_cmd[world, j]
        out_qd[dof_index[world, j]] = step / dt
    for j in range(7, 9):
        out_q[q_index[world, j]] = finger_q
        out_qd[dof_index[world, j]] = 0.0


def _add_arm_drives(builder: newton.ModelBuilder, layout, robot) -> None:
    """robot="dynamic": stiff position + velocity drives on the arm joints, position drives holding the fingers."""
    arm = DYNAMIC_DRIVE_KE, DYNAMIC_DRIVE_KD, franka.TAU_MAX, list(robot.q_start)
    fingers = [DYNAMIC_FINGER_KE] * 2, [DYNAMIC_FINGER_KD] * 2, [DYNAMIC_FINGER_EFFORT] * 2, [robot.finger_q] * 2
    # Robot joints are 1-dof or fixed and come first: a robot joint's coordinate index is its dof index.
    for dofs, (ke, kd, effort, target), mode in (
        (layout.arm_q, arm, newton.JointTargetMode.POSITION_VELOCITY),
        (layout.finger_q, fingers, newton.JointTargetMode.POSITION),
    ):
        for k, dof in enumerate(dofs):
            builder.joint_target_ke[dof] = float(ke[k])
            builder.joint_target_kd[dof] = float(kd[k])
            builder.joint_effort_limit[dof] = float(effort[k])
            builder.joint_target_mode[dof] = int(mode)
            builder.joint_target_q[dof] = float(target[k])
            builder.joint_target_qd[dof] = 0.0
            builder.joint_armature[dof] = DYNAMIC_ARMATURE if mode == newton.JointTargetMode.POSITION_VELOCITY else builder.joint_armature[dof]


def _as_numpy(value) -> np.ndarray:
    if isinstance(value, wp.array):
        return value.numpy()
    if hasattr(value, "detach"):  # torch tensor
        return value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


# Most contacts one shape pair can produce, for the pair types of the PushT scene: a sphere touches anything at one
# point; a capsule lies on a plane at its two end caps.
_CONTACTS_PER_PAIR = {
    frozenset({newton.GeoType.SPHERE}): 1,
    frozenset({newton.GeoType.SPHERE, newton.GeoType.PLANE}): 1,
    frozenset({newton.GeoType.SPHERE, newton.GeoType.CAPSULE}): 1,
    frozenset({newton.GeoType.CAPSULE, newton.GeoType.PLANE}): 2,
}


def contact_capacity(model: newton.Model) -> Optional[int]:
    """The most rigid contacts the model's shape pairs can produce at once, or None for a pair type not bounded here.

    Newton's estimate allows 5 contacts per pair; the XPBD contact kernels run one thread per slot of that buffer
    whether used or not, which is most of a step's time with many worlds (docs/twin.md).
    """
    pairs = model.shape_contact_pairs.numpy() if model.shape_contact_pairs is not None else np.zeros((0, 2), int)
    shape_type = model.shape_type.numpy()
    total = 0
    for a, b in pairs:
        per_pair = _CONTACTS_PER_PAIR.get(frozenset({newton.GeoType(shape_type[a]), newton.GeoType(shape_type[b])}))
        if per_pair is None:
            return None
        total += per_pair
    return max(total, 1)


class Twin:
    def __init__(self, task: CellCfg, num_worlds: int = 1, cfg: TwinCfg | None = None):
        if int(num_worlds) < 1:
            raise ConfigError(f"num_worlds must be at least 1, got {num_worlds}")
        self.task = task
        self.cfg = cfg or TwinCfg()
        self.num_worlds = int(num_worlds)
        self.object_names = [BLOCK_LABEL]
        self.control_dt = 1.0 / (self.cfg.control_hz or task.control_hz)
        self.sim_dt = self.control_dt / self.cfg.substeps
        self.geometry = block_geometry(task)

        contact = ContactSettings(gap=self.cfg.contact_gap, margin=self.cfg.contact_margin, friction_max=self.cfg.solver == "mujoco",
                                  spheres=self.cfg.contact_spheres)
        gravity = (0.0, 0.0, self.cfg.gravity)
        world, self.layout = build_world(task, self.geometry, contact, gravity)
        self._dynamic = self.cfg.robot == "dynamic"
        if self._dynamic:
            _add_arm_drives(world, self.layout, task.robot)
        builder = newton.ModelBuilder(gravity=gravity)
        if self._dynamic:
            newton.solvers.SolverMuJoCo.register_custom_attributes(builder)  # mujoco:gravcomp per body
        add_table(builder, table_plane(task.table), task.physical, contact)
        builder.replicate(world, self.num_worlds)
        with wp.ScopedDevice(self.cfg.device):
            self.model = builder.finalize(device=self.cfg.device)
        self._index_worlds()

        if self._dynamic:
            # MuJoCo's gravcomp: each link gets -m g at its COM, as the Franka's controller compensates gravity;
            # the block keeps gravity.
            gravcomp = self.model.mujoco.gravcomp.numpy()
            gravcomp[self._robot_bodies.ravel()] = 1.0
            self.model.mujoco.gravcomp.assign(gravcomp)
        else:
            flags = self.model.body_flags.numpy()
            flags[self._robot_bodies.ravel()] = int(newton.BodyFlags.KINEMATIC)
            self.model.body_flags.assign(flags)
        self._robot_articulations = wp.array(
            np.isin(np.arange(self.model.articulation_count), self._robot_articulation_ids), dtype=bool, device=self.cfg.device
        )
        self.solver = self._make_solver()
        self.collision = newton.CollisionPipeline(
            self.model,
            broad_phase=self.cfg.broad_phase,
            rigid_contact_max=self.cfg.rigid_contact_max or contact_capacity(self.model),
            deterministic=self.cfg.deterministic,
        )
        self.contacts = self.collision.contacts()
        self.state = self.model.state()
        self._next_state = self.model.state()
        self.control = self.model.control()
        newton.eval_fk(self.model, self.model.joint_q, self.model.joint_qd, self.state)

        self._base_f = wp.zeros(self.model.body_count, dtype=wp.spatial_vector, device=self.cfg.device)
        lin = np.zeros(self.model.body_count, dtype=np.float32)
        ang = np.zeros(self.model.body_count, dtype=np.float32)
        lin[self._object_bodies.ravel()] = task.physical.linear_damping
        ang[self._object_bodies.ravel()] = task.physical.angular_damping
        self._linear_damping = wp.array(lin, dtype=float, device=self.cfg.device)
        self._angular_damping = wp.array(ang, dtype=float, device=self.cfg.device)
        # The arm's reference (kinematic: its actual joints) and targets live on the device, so a step is kernel
        # launches only (capturable in a CUDA graph); the targets are also kept here for robot_q_target().
        self._q_cmd = wp.zeros((self.num_worlds, 7), dtype=float, device=self.cfg.device)
        self._q_target_device = wp.zeros((self.num_worlds, 7), dtype=float, device=self.cfg.device)
        self._q_target = np.zeros((self.num_worlds, 7))
        self._max_step = wp.array(franka.QD_MAX * self.sim_dt, dtype=float, device=self.cfg.device)
        # The robot's joint coordinates (arm, then fingers) and dofs, written each substep without touching the
        # block's: SolverMuJoCo integrates the block from state.joint_q/joint_qd, so rewriting them would pin it.
        robot_q = np.concatenate([self._arm_q, self._finger_q], axis=1)
        robot_dof = np.concatenate([self._arm_dof, self._finger_dof], axis=1)
        self._robot_q_index = wp.array(robot_q, dtype=int, device=self.cfg.device)
        self._robot_dof_index = wp.array(robot_dof, dtype=int, device=self.cfg.device)
        self.object_wrench = np.zeros((self.num_worlds, len(self.object_names), 6))
        self._capturable = self.cfg.graph_capture and self.cfg.solver == "xpbd" and self.cfg.substeps % 2 == 0
        self._graph = None
        self._ik_q = wp.zeros_like(self.model.joint_q)
        self._ik_qd = wp.zeros_like(self.model.joint_qd)
        self.reset()

    # ---- set-up helpers ------------------------------------------------------------------------------------
    def _index_worlds(self) -> None:
        lay, n = self.layout, self.num_worlds
        offsets = np.arange(n)[:, None]
        self._robot_bodies = offsets * lay.bodies + np.asarray(lay.robot_bodies)[None]
        self._object_bodies = offsets * lay.bodies + np.array([lay.block_body])[None]
        self._pusher_bodies = offsets[:, 0] * lay.bodies + lay.pusher_body
        self._arm_q = offsets * lay.joint_coords + np.asarray(lay.arm_q)[None]
        self._finger_q = offsets * lay.joint_coords + np.asarray(lay.finger_q)[None]
        self._block_q = offsets * lay.joint_coords + np.asarray(lay.block_q)[None]
        # Joint targets are indexed by coordinate (joint_target_q_start), velocities by dof. The robot comes first in
        # each world and its joints are 1-dof or fixed, so its coordinate and dof indices agree within a world.
        self._arm_dof = offsets * lay.joint_dofs + np.asarray(lay.arm_q)[None]
        self._finger_dof = offsets * lay.joint_dofs + np.asarray(lay.finger_q)[None]
        body_world = self.model.body_world.numpy()
        if not np.all(body_world[self._object_bodies[:, 0]] == np.arange(n)):
            raise RuntimeError("replicated worlds are not laid out world after world")
        self._articulation_world = self.model.articulation_world.numpy()
        # Each world holds two articulations: the robot (added first), then the block.
        self._robot_articulation_ids = np.flatnonzero(np.arange(self.model.articulation_count) % 2 == 0)

    def _make_solver(self):
        cfg = self.cfg
        if cfg.solver == "xpbd":
            return newton.solvers.SolverXPBD(self.model, iterations=cfg.iterations)
        if cfg.solver == "featherstone":
            return newton.solvers.SolverFeatherstone(self.model)
        try:
            # elliptic: the isotropic Coulomb cone (MuJoCo's default pyramid makes sliding friction direction-dependent)
            # robot="dynamic": implicitfast (Newton's default, named here) integrates the stiff drives' damping
            # implicitly; MuJoCo's "euler" made the same drives blow up (docs/isaaclab_franka.md)
            extra = {"integrator": "implicitfast", **self._dynamic_buffers()} if self._dynamic else {}
            return newton.solvers.SolverMuJoCo(self.model, use_mujoco_contacts=False, cone="elliptic", **extra)
        except ImportError as exc:
            raise ConfigError(f"solver 'mujoco' needs the mujoco_warp package: {exc}") from None

    def _dynamic_buffers(self) -> dict:
        """MuJoCo Warp's per-world contact and constraint buffers sized from this scene's contact bound (Newton's
        estimate, 1085 contacts / 3256 rows for the procedural block, made a step 1.6x (1 world) to 3.6x (20 worlds) slower in CPU time: measured,
        docs/dynamic_robot.md). Each contact is 3 rows (elliptic cone, condim 3); joint limits add at most 2 per dof."""
        capacity = self.cfg.rigid_contact_max or contact_capacity(self.model)
        if capacity is None:
            return {}
        per_world = int(np.ceil(capacity / self.num_worlds))
        return {"nconmax": per_world, "njmax": 3 * per_world + 2 * self.layout.joint_dofs}

    def _world_ids(self, world_ids) -> np.ndarray:
        if world_ids is None:
            return np.arange(self.num_worlds)
        ids = np.atleast_1d(np.asarray(world_ids))
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0) or np.any(ids >= self.num_worlds):
            raise DataError(f"world_ids must be integers in [0, {self.num_worlds}), got {world_ids}")
        return ids

    @staticmethod
    def _checked(name: str, value, shape: tuple) -> np.ndarray:
        arr = _as_numpy(value).astype(np.float64)
        if arr.shape != shape:
            raise DataError(f"{name} must have shape {shape}, got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise DataError(f"{name} has non-finite values")
        return arr

    # ---- control -------------------------------------------------------------------------------------------
    def reset(self, world_ids=None, object_poses=None, robot_q=None) -> None:
        """Put the chosen worlds (default all) at rest at the given poses (default: the task's start poses)."""
        ids = self._world_ids(world_ids)
        n_obj = len(self.object_names)
        if object_poses is None:
            object_poses = np.broadcast_to(self.geometry.start_pose, (len(ids), n_obj, 7))
        poses = self._checked("object_poses", object_poses, (len(ids), n_obj, 7))
        norms = np.linalg.norm(poses[..., 3:7], axis=-1, keepdims=True)
        if np.any(norms < 1e-9):
            raise DataError("object_poses has a zero quaternion")
        poses[..., 3:7] /= norms
        if robot_q is None:
            robot_q = np.broadcast_to(np.asarray(self.task.robot.q_start), (len(ids), 7))
        q = self._checked("robot_q", robot_q, (len(ids), 7))

        joint_q = self.state.joint_q.numpy().copy()  # other worlds keep their state
        joint_q[self._arm_q[ids]] = q
        joint_q[self._finger_q[ids]] = self.task.robot.finger_q
        joint_q[self._block_q[ids]] = poses.reshape(len(ids), -1)  # free joint coordinates = body pose (one object)
        self.state.joint_q.assign(joint_q)
        joint_qd = self.state.joint_qd.numpy().reshape(self.num_worlds, self.layout.joint_dofs)
        joint_qd[ids] = 0.0
        self.state.joint_qd.assign(joint_qd.ravel())
        mask = wp.array(np.isin(self._articulation_world, ids), dtype=bool, device=self.cfg.device)
        newton.eval_fk(self.model, self.state.joint_q, self.state.joint_qd, self.state, mask=mask)
        q_cmd = self._q_cmd.numpy()
        q_cmd[ids] = q
        self._q_cmd.assign(q_cmd)
        self._q_target[ids] = q
        self._q_target_device.assign(self._q_target)
        if self._dynamic:  # drives hold the reset pose: one reference step of zero length
            self._advance_arm(gain=0.0)

    def step(self, robot_q_target=None) -> None:
        """One control step (``control_dt``): set the arm targets [N, 7] (None: keep), then run the substeps."""
        if robot_q_target is not None:
            target = self._checked("robot_q_target", robot_q_target, (self.num_worlds, 7))
            self._q_target = np.clip(target, franka.Q_MIN, franka.Q_MAX)
            self._q_target_device.assign(self._q_target)
        wrench = self._checked("object_wrench", self.object_wrench, (self.num_worlds, len(self.object_names), 6))
        base = np.zeros((self.model.body_count, 6), dtype=np.float32)
        base[self._object_bodies.ravel()] = wrench.reshape(-1, 6)
        self._base_f.assign(base)
        if not self._capturable:
            self._substeps()
            return
        if self._graph is None:
            # The substeps' ~70 launches recorded once (Warp records CPU launches as it records CUDA kernels; nothing
            # runs while recording) and replayed every step: their Python cost was most of a CPU step (docs/twin.md).
            # The graph holds the arrays, so targets and wrenches go in by copy and the states must be where they
            # were recorded: an even number of substeps leaves them so.
            with wp.ScopedCapture(device=self.cfg.device, force_module_load=False) as capture:
                self._substeps()
            self._graph = capture.graph
        wp.capture_launch(self._graph)

    def _substeps(self) -> None:
        gain = 1.0 - np.exp(-self.sim_dt / self.task.robot.tracking_time_constant)
        for substep in range(self.cfg.substeps):
            self._advance_arm(gain)
            if not self._dynamic:  # the kinematic links follow their joints
                newton.eval_fk(self.model, self.state.joint_q, self.state.joint_qd, self.state, mask=self._robot_articulations)
            wp.launch(
                _apply_body_forces,
                dim=self.model.body_count,
                inputs=[
                    self.state.body_q,
                    self.state.body_qd,
                    self.model.body_mass,
                    self.model.body_inertia,
                    self._base_f,
                    self._linear_damping,
                    self._angular_damping,
                ],
                outputs=[self.state.body_f],
                device=self.cfg.device,
            )
            if substep % self.cfg.collide_every == 0:
                self.collision.collide(self.state, self.contacts)
            self.solver.step(self.state, self._next_state, self.control, self.contacts, self.sim_dt)
            self.state, self._next_state = self._next_state, self.state

    def _advance_arm(self, gain: float) -> None:
        """One substep of the arm's reference toward its targets: the kinematic links' joints, or the dynamic arm's
        drive targets (the same reference drives the joints' PD, position + velocity feed-forward)."""
        out = (self.control.joint_target_q, self.control.joint_target_qd) if self._dynamic else (self.state.joint_q, self.state.joint_qd)
        wp.launch(_advance_arm, dim=self.num_worlds, device=self.cfg.device,
                  inputs=[self._q_target_device, self._q_cmd, gain, self._max_step, self.sim_dt, self.task.robot.finger_q,
                          self._robot_q_index, self._robot_dof_index], outputs=list(out))

    # ---- state views ---------------------------------------------------------------------------------------
    def object_poses(self) -> np.ndarray:
        return self.state.body_q.numpy()[self._object_bodies].astype(np.float64)

    def object_velocities(self) -> np.ndarray:
        return self.state.body_qd.numpy()[self._object_bodies].astype(np.float64)

    def _joint_coordinates(self) -> tuple[np.ndarray, np.ndarray]:
        # Read back from the links' simulated poses (not from the command), so a broken drive shows here.
        newton.eval_ik(self.model, self.state, self._ik_q, self._ik_qd)
        return self._ik_q.numpy(), self._ik_qd.numpy()

    def robot_q(self) -> np.ndarray:
        return self._joint_coordinates()[0][self._arm_q].astype(np.float64)

    def robot_qd(self) -> np.ndarray:
        return self._joint_coordinates()[1][self._arm_dof].astype(np.float64)

    def robot_q_target(self) -> np.ndarray:
        return self._q_target.copy()

    def robot_q_reference(self) -> np.ndarray:
        """``(N, 7)``: the lagged, speed-capped reference the arm follows (kinematic: its joints; dynamic: its drives' target)."""
        return self._q_cmd.numpy().astype(np.float64)

    @property
    def robot_link_names(self) -> list[str]:
        return list(self.layout.robot_body_names)

    def robot_link_poses(self) -> np.ndarray:
        return self.state.body_q.numpy()[self._robot_bodies].astype(np.float64)

    def tool_position(self) -> np.ndarray:
        pose = self.state.body_q.numpy()[self._pusher_bodies].astype(np.float64)
        return pose[:, :3] + quat_rotate(pose[:, 3:7], self.layout.pusher_center)

    def object_body_com(self) -> np.ndarray:
        return self.model.body_com.numpy()[self._object_bodies[0]].astype(np.float64)

    def object_mass(self) -> np.ndarray:
        return self.model.body_mass.numpy()[self._object_bodies[0]].astype(np.float64)

    def object_inertia(self) -> np.ndarray:
        """[n_obj, 3, 3] inertia about the COM in body axes."""
        return self.model.body_inertia.numpy()[self._object_bodies[0]].astype(np.float64)
