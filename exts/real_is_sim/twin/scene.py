"""One PushT world as a Newton ``ModelBuilder``: the Franka with its pusher and the T-block of spheres.

The table plane is not part of a world: it is one static shape in the global world (-1) that every world
collides with. ``Twin`` replicates the world builder N times; the USD importer test compares its block.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import newton
import numpy as np
import warp as wp

from real_is_sim.cell import CellCfg, PhysicalParams, RobotCfg
from real_is_sim.robot import franka
from real_is_sim.twin.tblock import BlockGeometry, ball_reachable, plane_reachable

BLOCK_LABEL = "tblock"
PUSHER_BODY = "panda_hand_tcp"

# Collision groups (Newton: a positive group meets itself and the negative ones, a negative group every group but
# itself, 0 none). The table meets the spheres a plane can reach, the pusher those a pusher-sized ball can reach,
# and the pusher meets the table (a dynamic arm must not go through it).
TABLE_GROUP = 1
PUSHER_GROUP = -2
PUSHER_ONLY_SPHERES, BOTH_SPHERES, SHIELDED_SPHERES = 2, -1, 0
REACH_TOLERANCE = 0.001  # m a probe may enter a neighbouring sphere and still count as touching this one


@dataclass(frozen=True)
class ContactSettings:
    gap: float  # extra detection distance [m] beyond touching (Newton's builder default is 0.1 m)
    margin: float  # outward offset of the colliders [m]
    friction_max: bool = False  # the solver takes the larger of two shapes' mu (MuJoCo), not their average (XPBD)
    # "reachable": a block sphere collides only with what can touch it (sphere_collision_groups); "all": every
    # sphere with the table and the pusher
    spheres: str = "reachable"


@dataclass(frozen=True)
class WorldLayout:
    """Indices inside ONE world (add ``world * <count per world>`` for world ``world``)."""

    robot_bodies: list[int]
    robot_body_names: list[str]
    pusher_body: int  # the body carrying the pusher (link7 after collapsing the hand onto it)
    pusher_center: np.ndarray  # (3,) pusher centre in that body's frame
    arm_q: list[int]  # joint_q indices of panda_joint1..7
    finger_q: list[int]
    block_body: int
    block_q: list[int]  # the block free joint's 7 coordinates
    bodies: int
    joint_coords: int
    joint_dofs: int


def sphere_collision_groups(geometry: BlockGeometry, pusher_radius: float) -> np.ndarray:
    """``(S,)`` collision group of each block sphere: with the table where a plane can touch it, with the pusher
    where a ball of the pusher's radius can; inner spheres shielded by their neighbours (group 0) with nothing. Mass,
    COM and inertia stay those of all the spheres."""
    table = plane_reachable(geometry.centers, REACH_TOLERANCE)
    pusher = ball_reachable(geometry.centers, geometry.radius, pusher_radius, REACH_TOLERANCE)
    groups = np.full(len(table), SHIELDED_SPHERES)
    groups[table] = TABLE_GROUP
    groups[pusher] = PUSHER_ONLY_SPHERES
    groups[table & pusher] = BOTH_SPHERES
    return groups


def _shape_cfg(mu: float, contact: ContactSettings, **kwargs) -> newton.ModelBuilder.ShapeConfig:
    """Collider settings: Coulomb friction ``mu`` only. Newton's default torsional (0.005 m) and rolling (0.0001 m)
    friction would add 0.005 m x the block's weight (0.01 N m for 0.2 kg) of resistance to turning on top of what
    its spread of sphere contacts gives; point contacts have none, nor has MuJoCo with condim 3 (docs/isaaclab.md)."""
    return newton.ModelBuilder.ShapeConfig(
        mu=mu, mu_torsional=0.0, mu_rolling=0.0, gap=contact.gap, margin=contact.margin, **kwargs
    )


def add_block(builder: newton.ModelBuilder, geometry: BlockGeometry, physical: PhysicalParams, contact: ContactSettings,
              groups: np.ndarray | None = None) -> int:
    """A free rigid body with fixed-radius sphere colliders; mass, COM and inertia set explicitly (spheres carry none).
    ``groups``: each sphere's collision group (default: the table's, it meets everything); spheres of group 0 would
    meet nothing and are left out."""
    body = builder.add_body(
        xform=wp.transform(*geometry.start_pose),
        mass=geometry.mass,
        com=wp.vec3(*geometry.com),
        inertia=wp.mat33(*geometry.inertia.flatten()),
        lock_inertia=True,
        label=BLOCK_LABEL,
    )
    groups = np.full(len(geometry.centers), TABLE_GROUP) if groups is None else groups
    for center, group in zip(geometry.centers, groups):
        if group == SHIELDED_SPHERES:
            continue
        cfg = _shape_cfg(physical.friction_table, contact, density=0.0, collision_group=int(group))
        builder.add_shape_sphere(body, xform=wp.transform(wp.vec3(*center), wp.quat_identity()), radius=geometry.radius, cfg=cfg)
    return body


def add_table(builder: newton.ModelBuilder, plane: np.ndarray, physical: PhysicalParams, contact: ContactSettings) -> int:
    cfg = _shape_cfg(physical.friction_table, contact, collision_group=TABLE_GROUP)
    return builder.add_shape_plane(plane=tuple(float(v) for v in plane), width=0.0, length=0.0, cfg=cfg, label="table")


def add_robot(builder: newton.ModelBuilder, robot: RobotCfg, physical: PhysicalParams, contact: ContactSettings) -> int:
    """The Panda on a fixed base; no colliders except the pusher capsule under the TCP (the Twin makes its links kinematic).

    Fixed joints inside the arm are collapsed (link8, hand and TCP merge into link7): the URDF's massless
    link8 and TCP frames would otherwise be immovable bodies for XPBD and tear the arm apart.
    The URDF's inertia tensors make Newton 1.8's XPBD diverge at the home pose (joint 3 below about -1.2 rad, even
    with no gravity and no drives: measured); inertias computed from the link meshes, scaled to the URDF's link
    masses, are stable. Must be called on an empty builder. Returns the pusher's shape index.
    """
    first_shape = builder.shape_count
    urdf = franka.panda_urdf_path()
    builder.add_urdf(
        franka.panda_urdf_xml(),
        xform=wp.transform(*robot.base_pose),
        floating=False,
        enable_self_collisions=False,
        ignore_inertial_definitions=True,
    )
    _scale_to_urdf_masses(builder, _urdf_link_masses(urdf))
    # Full-mesh link collisions are slow and unstable in XPBD: the links only occlude, they never touch.
    for shape in range(first_shape, builder.shape_count):
        builder.shape_flags[shape] &= ~int(newton.ShapeFlags.COLLIDE_SHAPES)
    pusher_body = next(i for i, label in enumerate(builder.body_label) if label.endswith("/" + PUSHER_BODY))
    # Pusher mu such that the pusher-block pair gets friction_pusher: under the average rule (XPBD) exactly; under
    # MuJoCo's max rule when friction_pusher >= friction_table (the block's mu).
    average = 2.0 * physical.friction_pusher - physical.friction_table
    pusher_mu = physical.friction_pusher if contact.friction_max else average
    cfg = _shape_cfg(pusher_mu, contact, density=0.0, collision_group=PUSHER_GROUP if contact.spheres == "reachable" else TABLE_GROUP)
    builder.add_shape_capsule(
        pusher_body,
        xform=wp.transform(wp.vec3(0.0, 0.0, robot.pusher_offset), wp.quat_identity()),
        radius=robot.pusher_radius,
        half_height=robot.pusher_half_length,
        cfg=cfg,
        label="pusher",
    )
    base_joint = next(label for label in builder.joint_label if label.endswith("/fixed_base"))
    builder.collapse_fixed_joints(joints_to_keep=[base_joint])
    return next(i for i, label in enumerate(builder.shape_label) if label == "pusher")


def _urdf_link_masses(urdf: Path) -> dict[str, float]:
    masses = {}
    for link in ElementTree.parse(urdf).getroot().iter("link"):
        mass = link.find("inertial/mass")
        masses[link.get("name")] = float(mass.get("value")) if mass is not None else 0.0
    return masses


def _scale_to_urdf_masses(builder: newton.ModelBuilder, masses: dict[str, float]) -> None:
    """Keep each link's mesh-derived COM and inertia shape, at the URDF's mass."""
    for body, label in enumerate(builder.body_label):
        target, current = masses.get(label.rsplit("/", 1)[-1], 0.0), builder.body_mass[body]
        if target <= 0.0 or current <= 0.0:
            continue
        scale = target / current
        builder.body_mass[body] = target
        builder.body_inv_mass[body] = 1.0 / target
        builder.body_inertia[body] = wp.mat33(np.array(builder.body_inertia[body]) * scale)
        builder.body_inv_inertia[body] = wp.inverse(builder.body_inertia[body])


def build_world(
    task: CellCfg, geometry: BlockGeometry, contact: ContactSettings, gravity=(0.0, 0.0, -9.81)
) -> tuple[newton.ModelBuilder, WorldLayout]:
    """The builder of one world (robot first, then the block) and where its parts are."""
    builder = newton.ModelBuilder(gravity=gravity)
    pusher_shape = add_robot(builder, task.robot, task.physical, contact)
    robot_bodies = list(range(builder.body_count))
    robot_names = [label.rsplit("/", 1)[-1] for label in builder.body_label]
    joint_index = {label.rsplit("/", 1)[-1]: j for j, label in enumerate(builder.joint_label)}
    arm_q = [builder.joint_q_start[joint_index[name]] for name in franka.JOINT_NAMES]
    finger_q = [builder.joint_q_start[joint_index[f"panda_finger_joint{i}"]] for i in (1, 2)]
    q_start = list(task.robot.q_start) + [task.robot.finger_q] * 2
    for index, value in zip(arm_q + finger_q, q_start):
        builder.joint_q[index] = value
    block_q0 = builder.joint_coord_count
    groups = sphere_collision_groups(geometry, task.robot.pusher_radius) if contact.spheres == "reachable" else None
    block_body = add_block(builder, geometry, task.physical, contact, groups)
    pusher_body = builder.shape_body[pusher_shape]
    pusher_center = np.array(builder.shape_transform[pusher_shape].p, dtype=np.float64)
    layout = WorldLayout(
        robot_bodies=robot_bodies,
        robot_body_names=robot_names,
        pusher_body=pusher_body,
        pusher_center=pusher_center,
        arm_q=arm_q,
        finger_q=finger_q,
        block_body=block_body,
        block_q=list(range(block_q0, block_q0 + 7)),
        bodies=builder.body_count,
        joint_coords=builder.joint_coord_count,
        joint_dofs=builder.joint_dof_count,
    )
    return builder, layout
