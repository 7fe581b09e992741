"""A recorded deploy session as a time-sampled USD stage, to inspect in usdview or Isaac Sim.

    export_session_usd("out/run7")  # -> out/run7/session.usda

One text ``.usda`` that references no other file: the session's scene (physics scene, table, robot base) as
:func:`real_is_sim.twin.usd_scene.write_scene` writes it, then per 60 Hz tick of ``twin.csv``

    /World/TBlock            the twin's block: sphere colliders, a kinematic rigid body, its Gaussians as a child
                             ParticleField3DGaussianSplat in the body frame (the ones the sensor renders)
    /World/Robot/<link>      the Franka's links by forward kinematics of the twin robot's q, in the base frame:
                             a sphere per link, a capsule to the next link, the pusher on panda_hand_tcp
    /World/Reality/TBlock    reality's block (``ground_truth.csv``, stand-in sessions only): green spheres, no physics

Time code = seconds x 60 (``timeCodesPerSecond`` 60), so a tick's time code is its index from 1.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pinocchio as pin
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

from real_is_sim.bridge.config import load_bridge_cfg
from real_is_sim.bridge.recording import GROUND_TRUTH_COLUMNS, TWIN_COLUMNS
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.robot.appearance import RobotAppearanceCfg
from real_is_sim.robot.kinematics import PandaKinematics
from real_is_sim.task import import_task
from real_is_sim.twin.tblock import block_cloud, block_geometry
from real_is_sim.twin.usd_scene import BLOCK_PATH, write_gaussians, write_scene

TIME_CODES_PER_SECOND = 60.0
ROBOT_PATH = "/World/Robot"  # write_scene's robot prim, posed at the task's robot base
REALITY_PATH = "/World/Reality/TBlock"
# The next link's origin is fixed in each link's frame (its joint turns it about an axis through that origin), so
# one capsule per consecutive pair, fixed in the first link, draws the arm.
LINKS = ("panda_link0", "panda_link1", "panda_link2", "panda_link3", "panda_link4", "panda_link5", "panda_link6",
         "panda_link7", "panda_hand", "panda_hand_tcp")
LINK_RADIUS = 0.045
TWIN_COLOR = (0.9, 0.35, 0.15)  # the block's red-orange
REALITY_COLOR = (0.2, 0.8, 0.3)
PUSHER_COLOR = (0.2, 0.2, 0.2)


def export_session_usd(session_dir: str | Path, out_path: str | Path | None = None) -> Path:
    """Write the session recorded in ``session_dir`` as a time-sampled USD stage (default ``session_dir/session.usda``).

    Raises one DataError naming the file when the session's config.yaml, twin.csv or ground_truth.csv is missing
    or malformed (ground_truth.csv only when present)."""
    session = Path(session_dir)
    config = session / "config.yaml"
    if not config.is_file():
        raise DataError(f"no recorded deploy session in {session}: {config} is missing")
    try:
        cfg = load_bridge_cfg("standin", path=config)  # config.yaml is the whole resolved BridgeCfg
        task = import_task(cfg.task_module).load_cfg(cfg.task)  # as build_bridge loads it
    except ConfigError as exc:
        raise DataError(f"{config}: {exc}") from None
    ticks = _read_table(session / "twin.csv", TWIN_COLUMNS)
    truth_path = session / "ground_truth.csv"
    truth = _read_table(truth_path, GROUND_TRUTH_COLUMNS) if truth_path.is_file() else None

    out = Path(out_path) if out_path is not None else session / "session.usda"
    if out.suffix not in (".usda", ".usd", ".usdc"):
        raise DataError(f"{out}: the USD file name must end in .usda, .usd or .usdc")
    write_scene(out, task, with_gaussians=False)
    stage = Usd.Stage.Open(str(out))
    stage.GetRootLayer().documentation = f"real-is-sim deploy session {session.resolve()}"
    times = _time_codes(ticks[:, 0])
    stage.SetTimeCodesPerSecond(TIME_CODES_PER_SECOND)
    stage.SetFramesPerSecond(TIME_CODES_PER_SECOND)
    stage.SetStartTimeCode(float(times[0]))
    stage.SetEndTimeCode(float(times[-1]))

    block = stage.GetPrimAtPath(BLOCK_PATH)
    # Kinematic: played in Isaac Sim, the block follows the recorded poses instead of being simulated again.
    UsdPhysics.RigidBodyAPI(block).CreateKinematicEnabledAttr(True)
    _set_color(stage.GetPrimAtPath(BLOCK_PATH + "/Spheres"), TWIN_COLOR)
    cloud = block_cloud(task)
    arrays = (cloud.means, cloud.quats, cloud.scales, cloud.opacities, cloud.colors)
    write_gaussians(stage, BLOCK_PATH + "/Gaussians", *(a.detach().cpu().numpy() for a in arrays))
    _animate(block, times, ticks[:, 1:8])
    _write_robot(stage, task, times, ticks[:, 8:15])
    if truth is not None:
        geometry = block_geometry(task)
        reality = _visual_spheres(stage, REALITY_PATH, geometry.centers, geometry.radius, REALITY_COLOR)
        _animate(reality, _time_codes(truth[:, 0]), truth[:, 1:8])
    stage.GetRootLayer().Save()
    return out


def session_usd_summary(path: str | Path) -> dict:
    """What an exported stage holds: its path, frames (time codes) and the bodies whose pose is time-sampled."""
    stage = Usd.Stage.Open(str(path))
    bodies = [str(p.GetPath()) for p in stage.Traverse() if p.IsA(UsdGeom.Xformable)
              and UsdGeom.Xformable(p).TransformMightBeTimeVarying()]
    frames = int(round(stage.GetEndTimeCode() - stage.GetStartTimeCode())) + 1
    return {"path": str(path), "frames": frames, "bodies": bodies}


def _read_table(path: Path, columns: tuple[str, ...]) -> np.ndarray:
    """The recorded CSV as float64 rows, the header checked, at least one row, finite, strictly increasing t."""
    if not path.is_file():
        raise DataError(f"{path} is missing: not a recorded deploy session")
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows or tuple(rows[0]) != columns:
        raise DataError(f"{path}: the header must be {','.join(columns)}")
    try:
        data = np.array([[float(v) for v in row] for row in rows[1:]], dtype=np.float64)
    except ValueError as exc:  # a non-number, or rows of different lengths
        raise DataError(f"{path} is malformed: {exc}") from None
    if data.ndim != 2 or data.shape[1] != len(columns):
        raise DataError(f"{path} has no complete rows of {len(columns)} values")
    if not np.all(np.isfinite(data)) or not np.all(np.diff(data[:, 0]) > 0):
        raise DataError(f"{path}: values must be finite and t strictly increasing")
    return data


def _time_codes(t: np.ndarray) -> np.ndarray:
    # t = k / 60 times 60 can land a hair off k; rounded, a tick's samples sit exactly on its integer time code.
    return np.round(t * TIME_CODES_PER_SECOND, 6)


def _animate(prim: Usd.Prim, times: np.ndarray, poses: np.ndarray) -> None:
    """Time-sampled ``xformOp:translate`` and ``xformOp:orient`` (double precision), poses (px,py,pz,qx,qy,qz,qw)."""
    xform = UsdGeom.Xformable(prim)
    xform.ClearXformOpOrder()  # write_scene's static pose: replaced, not composed with
    translate = xform.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble)
    orient = xform.AddOrientOp(UsdGeom.XformOp.PrecisionDouble)
    for time, (px, py, pz, qx, qy, qz, qw) in zip(times, poses):
        translate.Set(Gf.Vec3d(px, py, pz), float(time))
        orient.Set(Gf.Quatd(qw, qx, qy, qz), float(time))


def _set_color(prim: Usd.Prim, color) -> None:
    """A constant displayColor on ``prim``, inherited by the gprims below it."""
    UsdGeom.PrimvarsAPI(prim).CreatePrimvar("displayColor", Sdf.ValueTypeNames.Color3fArray,
                                            UsdGeom.Tokens.constant).Set([Gf.Vec3f(*color)])


def _visual_spheres(stage: Usd.Stage, path: str, centers: np.ndarray, radius: float, color) -> Usd.Prim:
    """An Xform with one sphere per centre and no physics: drawn, never collided with."""
    body = UsdGeom.Xform.Define(stage, path).GetPrim()
    _set_color(body, color)
    for i, center in enumerate(centers):
        sphere = UsdGeom.Sphere.Define(stage, f"{path}/Spheres/s{i:04d}")
        sphere.CreateRadiusAttr(float(radius))
        sphere.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, center)))
    return body


def _write_robot(stage: Usd.Stage, task, times: np.ndarray, qs: np.ndarray) -> None:
    """The links under the robot's base prim, posed per tick by pinocchio FK of the recorded arm q (fingers at the
    task's ``finger_q``, as the twin holds them)."""
    kinematics = PandaKinematics()
    model, data = kinematics.model, kinematics.data
    frames = [model.getFrameId(name) for name in LINKS]
    fingers = np.full(model.nq - qs.shape[1], task.robot.finger_q)
    poses = np.empty((len(qs), len(LINKS), 7))
    for k, q in enumerate(qs):
        pin.framesForwardKinematics(model, data, np.concatenate([q, fingers]))
        for j, frame in enumerate(frames):
            poses[k, j] = pin.SE3ToXYZQUAT(data.oMf[frame])  # (x, y, z, qx, qy, qz, qw)
    # the next link's origin in each link's frame: fixed, so read at any tick
    first = [pin.XYZQUATToSE3(pose) for pose in poses[0]]
    color = RobotAppearanceCfg.color  # Franka white
    for j, name in enumerate(LINKS):
        link = UsdGeom.Xform.Define(stage, f"{ROBOT_PATH}/{name}").GetPrim()
        _set_color(link, color)
        _animate(link, times, poses[:, j])
        if name == "panda_hand_tcp":
            r = task.robot
            pusher = _capsule(stage, f"{link.GetPath()}/Pusher", np.array([0.0, 0.0, r.pusher_offset]),
                              np.array([0.0, 0.0, 1.0]), 2 * r.pusher_half_length, r.pusher_radius)
            _set_color(pusher, PUSHER_COLOR)
            continue
        UsdGeom.Sphere.Define(stage, f"{link.GetPath()}/Joint").CreateRadiusAttr(LINK_RADIUS)
        offset = first[j].actInv(first[j + 1]).translation
        length = float(np.linalg.norm(offset))
        if length > 1e-6:  # link1/link2 and link5/link6 share their origins
            _capsule(stage, f"{link.GetPath()}/Segment", offset / 2, offset / length, length, 0.8 * LINK_RADIUS)


def _capsule(stage: Usd.Stage, path: str, center: np.ndarray, axis: np.ndarray, height: float,
             radius: float) -> Usd.Prim:
    """A capsule centred at ``center`` whose cylinder of length ``height`` runs along the unit ``axis``."""
    capsule = UsdGeom.Capsule.Define(stage, path)
    capsule.CreateAxisAttr(UsdGeom.Tokens.z)
    capsule.CreateHeightAttr(float(height))
    capsule.CreateRadiusAttr(float(radius))
    capsule.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, center)))
    rotation = Gf.Rotation(Gf.Vec3d(0.0, 0.0, 1.0), Gf.Vec3d(*map(float, axis))).GetQuat()
    capsule.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(rotation)
    return capsule.GetPrim()
