"""Write usd/franka_pusher.usda: the Franka Panda of example-robot-data's URDF with the PushT pusher, as one USD file.

    python scripts/build_franka_usd.py                       # rebuilds the committed usd/franka_pusher.usda
    python scripts/build_franka_usd.py --out /tmp/franka.usda

Authored with usd-core's UsdPhysics from the URDF (no converter): one rigid body per URDF link with mass
(``physics:mass``, ``centerOfMass``, ``diagonalInertia`` + ``principalAxes`` from the URDF's inertia tensor),
revolute / prismatic joints with the URDF's limits and a position drive each, a fixed joint from the world to
``panda_link0`` and ``PhysicsArticulationRootAPI`` on the ``/panda`` default prim. The massless ``panda_link8`` frame
is folded into the fixed joint of ``panda_hand``; ``panda_hand_tcp`` is a body (fixed to the hand) that carries the
pusher capsule of the default PushT task (``RobotCfg.pusher_radius / pusher_half_length / pusher_offset``), the only
collider. Link visuals are the URDF's collision meshes, inlined (visual only), so the file references nothing on
disk. Joint frames follow the URDF's zero pose; bodies, drive targets and joint states (``state:*:physics:position``)
are at the task's home pose (``RobotCfg.q_start``). Every link has MuJoCo gravity compensation (``mjc:gravcomp = 1``),
as the real Franka's controller cancels gravity. Output is deterministic (values rounded to 1e-9).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import trimesh
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, Vt

from real_is_sim.errors import DataError
from real_is_sim.paths import USD_DIR
from real_is_sim.robot import franka
from real_is_sim.transforms import matrix_to_quat, quat_from_axis_angle, quat_to_matrix
from real_is_sim.twin.usd_scene import new_stage
from real_is_sim_tasks.pusht import load_pusht_cfg

ROOT = "/panda"
# The URDF's massless frames: link8 is folded into the hand's fixed joint, the TCP becomes the pusher's body.
FOLDED_LINK = "panda_link8"
TCP_LINK = "panda_hand_tcp"
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
# The pusher's own mass: the capsule's volume at 1000 kg/m^3 (a printed plastic part), so the TCP body is not massless.
PUSHER_DENSITY = 1000.0
# Drive gains (N m / rad, N m s / rad; fingers N / m, N s / m), the same as FRANKA_PUSHER_CFG's actuators
# (real_is_sim.isaaclab.franka; tests/test_isaaclab_franka.py checks they agree) for importers that read the USD alone.
DRIVE_GAINS = {
    **{f"panda_joint{i}": (4500.0, 200.0) for i in (1, 2, 3, 4)},
    **{f"panda_joint{i}": (2000.0, 60.0) for i in (5, 6, 7)},
    "panda_finger_joint1": (2000.0, 100.0),
    "panda_finger_joint2": (2000.0, 100.0),
}


def _rotation_rpy(rpy) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _origin(element) -> np.ndarray:
    """4x4 transform of a URDF ``<origin>`` child (identity when absent)."""
    origin = element.find("origin") if element is not None else None
    T = np.eye(4)
    if origin is not None:
        T[:3, :3] = _rotation_rpy([float(v) for v in origin.get("rpy", "0 0 0").split()])
        T[:3, 3] = [float(v) for v in origin.get("xyz", "0 0 0").split()]
    return T


def _clean(values) -> list[float]:
    """Rounded to 1e-9 (no 1e-17 trig residue, no -0): the file reads the same on every machine."""
    return [float(v) + 0.0 for v in np.round(np.asarray(values, dtype=np.float64), 9)]


def _quat_wxyz(R: np.ndarray) -> list[float]:
    x, y, z, w = _clean(matrix_to_quat(R))
    return [w, x, y, z]


def _quatf(R: np.ndarray) -> Gf.Quatf:
    w, x, y, z = _quat_wxyz(R)
    return Gf.Quatf(w, Gf.Vec3f(x, y, z))


def _vec3f(v) -> Gf.Vec3f:
    return Gf.Vec3f(*_clean(v))


def _set_xform(prim: Usd.Prim, T: np.ndarray) -> None:
    xform = UsdGeom.Xformable(prim)
    xform.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*_clean(T[:3, 3])))
    w, x, y, z = _quat_wxyz(T[:3, :3])
    xform.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)))


def _principal_inertia(inertia: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal moments and a right-handed rotation whose columns are the axes (signs fixed for a stable output)."""
    if np.count_nonzero(inertia - np.diag(np.diag(inertia))) == 0:
        return np.diag(inertia).copy(), np.eye(3)
    moments, axes = np.linalg.eigh(inertia)
    for k in range(3):
        if axes[np.argmax(np.abs(axes[:, k])), k] < 0:
            axes[:, k] *= -1.0
    if np.linalg.det(axes) < 0:
        axes[:, 2] *= -1.0
    return moments, axes


def _mass_of(link) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, COM, 3x3 inertia about the COM in the link frame) of a URDF link."""
    inertial = link.find("inertial")
    mass = float(inertial.find("mass").get("value"))
    frame = _origin(inertial)
    i = {k: float(v) for k, v in inertial.find("inertia").attrib.items()}
    tensor = np.array([[i["ixx"], i["ixy"], i["ixz"]], [i["ixy"], i["iyy"], i["iyz"]], [i["ixz"], i["iyz"], i["izz"]]])
    return mass, frame[:3, 3], frame[:3, :3] @ tensor @ frame[:3, :3].T


def _write_body(stage: Usd.Stage, name: str, T_world: np.ndarray, mass: float, com, inertia: np.ndarray) -> Usd.Prim:
    prim = UsdGeom.Xform.Define(stage, f"{ROOT}/{name}").GetPrim()
    _set_xform(prim, T_world)
    UsdPhysics.RigidBodyAPI.Apply(prim)
    mass_api = UsdPhysics.MassAPI.Apply(prim)
    mass_api.CreateMassAttr(float(mass))
    mass_api.CreateCenterOfMassAttr(_vec3f(com))
    moments, axes = _principal_inertia(inertia)
    mass_api.CreateDiagonalInertiaAttr(_vec3f(moments))
    mass_api.CreatePrincipalAxesAttr(_quatf(axes))
    # The real Franka's controller cancels gravity on its links; MuJoCo's body gravcomp does the same here.
    prim.CreateAttribute("mjc:gravcomp", Sdf.ValueTypeNames.Float).Set(1.0)
    return prim


def _write_visual(stage: Usd.Stage, body_path: str, mesh_file: Path, T_local: np.ndarray) -> None:
    """The link's collision mesh as a visual-only mesh (no CollisionAPI): the links never touch anything."""
    mesh = trimesh.load(mesh_file, force="mesh")  # STL repeats each face's corners: merged here
    vertices = np.asarray(mesh.vertices, dtype=np.float64) @ T_local[:3, :3].T + T_local[:3, 3]
    usd_mesh = UsdGeom.Mesh.Define(stage, f"{body_path}/visual")
    usd_mesh.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(vertices.astype(np.float32)))
    usd_mesh.CreateFaceVertexCountsAttr(Vt.IntArray([3] * len(mesh.faces)))
    usd_mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(np.asarray(mesh.faces, dtype=np.int32).reshape(-1)))
    usd_mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    usd_mesh.CreateDisplayColorAttr([Gf.Vec3f(0.9, 0.9, 0.9)])


def _visual_mesh(link, share: Path) -> tuple[Path, np.ndarray] | None:
    """The collision mesh file for this link's visual (fingers: the finger mesh at the visual's origin)."""
    visual = link.find("visual")
    if visual is None:
        return None
    uri = visual.find("geometry/mesh").get("filename")
    stem = Path(uri).stem
    path = share / "example-robot-data" / "robots" / "panda_description" / "meshes" / "collision" / f"{stem}.stl"
    if not path.is_file():
        raise DataError(f"Panda collision mesh {path} not found: reinstall example-robot-data")
    return path, _origin(visual)


def _joint_axis(axis) -> tuple[str, np.ndarray]:
    """UsdPhysics axis token and joint-frame rotation for a URDF axis along +-x, +-y or +-z (a minus: turned half round)."""
    axis = np.asarray(axis, dtype=np.float64)
    k = int(np.argmax(np.abs(axis)))
    if not np.allclose(np.abs(axis), np.eye(3)[k]):
        raise DataError(f"URDF joint axis {axis.tolist()} is not along x, y or z; UsdPhysics joints need one")
    R = np.eye(3)
    if axis[k] < 0:  # half a turn about the next axis flips this one
        R = _rotation_rpy(np.pi * np.eye(3)[(k + 1) % 3])
    return "XYZ"[k], R


def _joint_motion(joint, q: float) -> np.ndarray:
    """4x4 motion of a URDF joint at coordinate q (rad or m) in the joint's frame."""
    T = np.eye(4)
    if joint.get("type") == "fixed":
        return T
    axis = np.array([float(v) for v in joint.find("axis").get("xyz").split()])
    if joint.get("type") == "revolute":
        T[:3, :3] = quat_to_matrix(quat_from_axis_angle(axis, q))
    else:
        T[:3, 3] = axis * q
    return T


def _link_poses(joints, q: dict[str, float]) -> dict[str, np.ndarray]:
    """World pose of every URDF link with the base at the origin and joint coordinates q (missing: 0)."""
    poses = {"panda_link0": np.eye(4)}
    pending = list(joints)
    while pending:
        joint = next(j for j in pending if j.find("parent").get("link") in poses)
        pending.remove(joint)
        parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
        poses[child] = poses[parent] @ _origin(joint) @ _joint_motion(joint, q.get(joint.get("name"), 0.0))
    return poses


def build(out: Path) -> Path:
    urdf_path = franka.panda_urdf_path()
    share = franka.description_share_dir()
    robot = ElementTree.parse(urdf_path).getroot()
    links = {link.get("name"): link for link in robot.iter("link")}
    joints = list(robot.iter("joint"))
    task_robot = load_pusht_cfg().robot
    home = dict(zip(franka.JOINT_NAMES, map(float, task_robot.q_start)))
    home.update({name: float(task_robot.finger_q) for name in FINGER_JOINTS})

    # Joint frames come from the zero pose (the URDF's joint zero); bodies are placed at the home pose.
    zero_poses, home_poses = _link_poses(joints, {}), _link_poses(joints, home)

    out.parent.mkdir(parents=True, exist_ok=True)
    stage, root = new_stage(ROOT)
    UsdPhysics.ArticulationRootAPI.Apply(root)

    for name, link in links.items():
        if name in (FOLDED_LINK, TCP_LINK):
            continue
        prim = _write_body(stage, name, home_poses[name], *_mass_of(link))
        visual = _visual_mesh(link, share)
        if visual is not None:
            _write_visual(stage, str(prim.GetPath()), *visual)
    _write_pusher(stage, home_poses[TCP_LINK], task_robot)

    base = UsdPhysics.FixedJoint.Define(stage, f"{ROOT}/joints/fixed_base")
    base.CreateBody1Rel().SetTargets([Sdf.Path(f"{ROOT}/panda_link0")])
    folded_into = {FOLDED_LINK: next(j.find("parent").get("link") for j in joints if j.find("child").get("link") == FOLDED_LINK)}
    for joint in joints:
        if joint.find("child").get("link") != FOLDED_LINK:
            _write_joint(stage, joint, zero_poses, folded_into, home.get(joint.get("name"), 0.0))

    stage.GetRootLayer().documentation = f"Franka Panda + PushT pusher, written by scripts/build_franka_usd.py from {urdf_path.name}"
    stage.GetRootLayer().Export(str(out))
    return out


def _write_pusher(stage: Usd.Stage, tcp_pose: np.ndarray, task_robot) -> None:
    """The TCP body with the pusher: a capsule along the TCP z axis, centred pusher_offset along it."""
    length = 2.0 * task_robot.pusher_half_length
    radius = task_robot.pusher_radius
    mass = PUSHER_DENSITY * (math.pi * radius**2 * length + 4.0 / 3.0 * math.pi * radius**3)
    center = np.array([0.0, 0.0, task_robot.pusher_offset])
    tcp = _write_body(stage, TCP_LINK, tcp_pose, mass, center, _capsule_inertia(mass, radius, length))
    capsule = UsdGeom.Capsule.Define(stage, f"{tcp.GetPath()}/pusher")
    capsule.CreateAxisAttr(UsdGeom.Tokens.z)
    capsule.CreateRadiusAttr(float(radius))
    capsule.CreateHeightAttr(float(length))  # UsdGeom.Capsule height: the cylinder part, caps excluded
    capsule.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*_clean(center)))
    capsule.CreateDisplayColorAttr([Gf.Vec3f(0.2, 0.2, 0.2)])
    UsdPhysics.CollisionAPI.Apply(capsule.GetPrim())


def _capsule_inertia(mass: float, radius: float, length: float) -> np.ndarray:
    """Solid capsule about its centre, axis z, mass split by volume between the cylinder and the two caps."""
    v_cyl, v_caps = math.pi * radius**2 * length, 4.0 / 3.0 * math.pi * radius**3
    m_cyl, m_caps = mass * v_cyl / (v_cyl + v_caps), mass * v_caps / (v_cyl + v_caps)
    axial = m_cyl * radius**2 / 2.0 + m_caps * 2.0 * radius**2 / 5.0
    # Hemisphere caps: own moment 83/320 m r^2 about their COM, which sits h/2 + 3r/8 from the centre.
    transverse = m_cyl * (3.0 * radius**2 + length**2) / 12.0 + m_caps * (
        83.0 / 320.0 * radius**2 + (length / 2.0 + 3.0 * radius / 8.0) ** 2
    )
    return np.diag([transverse, transverse, axial])



def _write_joint(stage: Usd.Stage, joint, zero_poses: dict[str, np.ndarray], folded_into: dict[str, str], home: float) -> None:
    """One URDF joint. Frames from the zero pose, so it reads 0 where the URDF does; starts and is driven at ``home``."""
    name, kind = joint.get("name"), joint.get("type")
    parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
    parent = folded_into.get(parent, parent)
    path = f"{ROOT}/joints/{name}"
    T_parent_child = np.linalg.inv(zero_poses[parent]) @ zero_poses[child]
    if kind == "fixed":
        usd_joint = UsdPhysics.FixedJoint.Define(stage, path)
        R_joint = np.eye(3)
    elif kind in ("revolute", "prismatic"):
        axis_token, R_joint = _joint_axis([float(v) for v in joint.find("axis").get("xyz").split()])
        limit = joint.find("limit")
        lower, upper, effort = (float(limit.get(k)) for k in ("lower", "upper", "effort"))
        state = "angular" if kind == "revolute" else "linear"
        if kind == "revolute":
            usd_joint = UsdPhysics.RevoluteJoint.Define(stage, path)
            # UsdPhysics angular limits are in degrees and angular drive gains per degree.
            usd_joint.CreateLowerLimitAttr(math.degrees(lower))
            usd_joint.CreateUpperLimitAttr(math.degrees(upper))
            drive = UsdPhysics.DriveAPI.Apply(usd_joint.GetPrim(), "angular")
            drive.CreateStiffnessAttr(math.radians(DRIVE_GAINS[name][0]))
            drive.CreateDampingAttr(math.radians(DRIVE_GAINS[name][1]))
        else:
            usd_joint = UsdPhysics.PrismaticJoint.Define(stage, path)
            usd_joint.CreateLowerLimitAttr(lower)
            usd_joint.CreateUpperLimitAttr(upper)
            drive = UsdPhysics.DriveAPI.Apply(usd_joint.GetPrim(), "linear")
            drive.CreateStiffnessAttr(DRIVE_GAINS[name][0])
            drive.CreateDampingAttr(DRIVE_GAINS[name][1])
        usd_joint.CreateAxisAttr(axis_token)
        drive.CreateTypeAttr(UsdPhysics.Tokens.force)
        drive.CreateMaxForceAttr(effort)
        # UsdPhysics units: degrees for angular targets and states, metres for linear ones.
        home_usd = math.degrees(home) if kind == "revolute" else home
        drive.CreateTargetPositionAttr(home_usd)
        # PhysX's JointStateAPI (read by Newton's importer under Isaac Lab): the articulation starts at home.
        usd_joint.GetPrim().AddAppliedSchema(f"PhysicsJointStateAPI:{state}")
        usd_joint.GetPrim().CreateAttribute(f"state:{state}:physics:position", Sdf.ValueTypeNames.Float).Set(home_usd)
        usd_joint.GetPrim().CreateAttribute(f"state:{state}:physics:velocity", Sdf.ValueTypeNames.Float).Set(0.0)
    else:
        raise DataError(f"URDF joint {name} has type {kind!r}; only fixed, revolute and prismatic are converted")
    usd_joint.CreateBody0Rel().SetTargets([Sdf.Path(f"{ROOT}/{parent}")])
    usd_joint.CreateBody1Rel().SetTargets([Sdf.Path(f"{ROOT}/{child}")])
    usd_joint.CreateLocalPos0Attr(_vec3f(T_parent_child[:3, 3]))
    usd_joint.CreateLocalRot0Attr(_quatf(T_parent_child[:3, :3] @ R_joint))
    usd_joint.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    usd_joint.CreateLocalRot1Attr(_quatf(R_joint))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=USD_DIR / "franka_pusher.usda")
    args = parser.parse_args()
    path = build(args.out)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
