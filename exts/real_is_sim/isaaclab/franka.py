"""The Franka Panda with the PushT pusher as an Isaac Lab articulation, kit-less on Newton's MuJoCo-Warp solver.

``FRANKA_PUSHER_CFG`` spawns ``usd/franka_pusher.usda`` (``python scripts/build_franka_usd.py`` rebuilds it from
example-robot-data's URDF). Use it with ``FRANKA_PUSHER_SOLVER_CFG`` (or any ``MJWarpSolverCfg`` with
``integrator="implicitfast"``): under Isaac Lab's default ``integrator="euler"`` MuJoCo integrates the drives'
damping explicitly and the 15 g fingers and the wrist blow up (docs/isaaclab_franka.md has the measurements).

Reset writes the joint state: an env's ``_reset_idx`` writes ``default_joint_pos`` (the home pose) with
``write_joint_position_to_sim_index``; the USD also starts at the home pose. Gravity on the robot's links is
cancelled by MuJoCo body gravity compensation authored in the USD (``mjc:gravcomp``), as the real Franka's controller
does, so scene gravity stays on for the block.
"""

from __future__ import annotations

import isaaclab.sim as sim_utils
from isaaclab.actuators import ImplicitActuatorCfg
from isaaclab.assets import ArticulationCfg
from isaaclab_newton.physics import MJWarpSolverCfg

from real_is_sim.paths import USD_DIR
from real_is_sim.robot import franka
from real_is_sim.cell import RobotCfg

FRANKA_PUSHER_USD = USD_DIR / "franka_pusher.usda"

ARM_JOINT_NAMES = franka.JOINT_NAMES
FINGER_JOINT_NAMES = ("panda_finger_joint1", "panda_finger_joint2")
# The articulation's joint_names, in this order (arm 1..7, then the fingers).
JOINT_NAMES = ARM_JOINT_NAMES + FINGER_JOINT_NAMES

# The body carrying the pusher capsule; its origin is the URDF's TCP frame (as real_is_sim.twin.scene.PUSHER_BODY).
PUSHER_BODY = "panda_hand_tcp"
# Baked into the USD from the default PushT task's RobotCfg: a capsule along the TCP z axis (down when the hand points
# down), centred PUSHER_CENTER_IN_BODY; its tip (the lowest point with the hand down) is PUSHER_TIP_IN_BODY.
_PUSHER = RobotCfg()
PUSHER_RADIUS = _PUSHER.pusher_radius
PUSHER_HALF_LENGTH = _PUSHER.pusher_half_length
PUSHER_CENTER_IN_BODY = (0.0, 0.0, _PUSHER.pusher_offset)
PUSHER_TIP_IN_BODY = (0.0, 0.0, _PUSHER.pusher_offset + _PUSHER.pusher_half_length + _PUSHER.pusher_radius)

HOME_JOINT_POS = {**dict(zip(ARM_JOINT_NAMES, map(float, franka.Q_START))), **{name: _PUSHER.finger_q for name in FINGER_JOINT_NAMES}}

# PD gains, overdamped, settling a 0.3 rad step in 0.15-0.5 s within the Panda's torque limits (docs/isaaclab_franka.md).
# The same numbers are authored in the USD's drives for importers that read the file alone.
FRANKA_PUSHER_CFG = ArticulationCfg(
    spawn=sim_utils.UsdFileCfg(usd_path=str(FRANKA_PUSHER_USD)),
    init_state=ArticulationCfg.InitialStateCfg(joint_pos=HOME_JOINT_POS, joint_vel={".*": 0.0}),
    actuators={
        "panda_shoulder": ImplicitActuatorCfg(
            joint_names_expr=["panda_joint[1-4]"], stiffness=4500.0, damping=200.0, joint_effort_limit=87.0
        ),
        "panda_forearm": ImplicitActuatorCfg(
            joint_names_expr=["panda_joint[5-7]"], stiffness=2000.0, damping=60.0, joint_effort_limit=12.0
        ),
        # Both fingers driven (no mimic constraint): the pusher task holds them closed.
        "panda_hand": ImplicitActuatorCfg(
            joint_names_expr=["panda_finger_joint[1-2]"], stiffness=2000.0, damping=100.0, joint_effort_limit=100.0
        ),
    },
    soft_joint_pos_limit_factor=1.0,
)
"""The Panda + pusher; set ``prim_path`` (e.g. ``FRANKA_PUSHER_CFG.replace(prim_path="{ENV_REGEX_NS}/Robot")``)."""

FRANKA_PUSHER_SOLVER_CFG = MJWarpSolverCfg(integrator="implicitfast")
"""MuJoCo-Warp with the integrator the drives need (velocity terms implicit); ``.replace(...)`` it for contact sizes.
Use as ``SimulationCfg(physics=NewtonCfg(solver_cfg=FRANKA_PUSHER_SOLVER_CFG))``."""
