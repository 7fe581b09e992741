"""Write the PushT scene as USD: physics scene, table, T-block rigid body (sphere colliders, mass), its Gaussians,
a task's goal marker and a robot prim that records the URDF the twin imports.

The T-block prim is what Newton's ``ModelBuilder.add_usd`` turns into the same body as
:func:`real_is_sim.twin.scene.add_block`: one sphere collider per sphere, the same radius, and mass, COM and
inertia authored on the body (``physics:mass``, ``physics:centerOfMass``, ``physics:diagonalInertia`` +
``physics:principalAxes``), so the importer needs no density.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, UsdVol, Vt

from real_is_sim.cell import CellCfg
from real_is_sim.robot import franka
from real_is_sim.transforms import matrix_to_quat
from real_is_sim.twin.tblock import BlockGeometry, block_geometry, table_plane

BLOCK_PATH = "/World/TBlock"
SH_C0 = 0.28209479177387814  # degree-0 spherical harmonic, as in real_is_sim.gaussians.io


def new_stage(default_prim: str) -> tuple[Usd.Stage, Usd.Prim]:
    """An in-memory stage in the project's units (z up, metres, kilograms) with an Xform ``default_prim`` as its
    default prim: the start of every generated asset (export it with ``stage.GetRootLayer().Export``)."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, default_prim).GetPrim()
    stage.SetDefaultPrim(root)
    return stage, root


def _set_pose(prim: Usd.Prim, pose: np.ndarray) -> None:
    xform = UsdGeom.Xformable(prim)
    xform.ClearXformOpOrder()
    xform.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, pose[:3])))
    x, y, z, w = map(float, pose[3:7])
    xform.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)))


def _plane_pose(plane: np.ndarray) -> np.ndarray:
    """A pose whose z axis is the plane's normal and whose origin is the plane point closest to the world origin."""
    n = plane[:3]
    x = np.cross([0.0, 1.0, 0.0], n)
    x /= np.linalg.norm(x)
    R = np.stack([x, np.cross(n, x), n], axis=1)
    return np.concatenate([-plane[3] * n, matrix_to_quat(R)])


def write_block(stage: Usd.Stage, geometry: BlockGeometry, path: str = BLOCK_PATH) -> Usd.Prim:
    body = UsdGeom.Xform.Define(stage, path).GetPrim()
    _set_pose(body, geometry.start_pose)
    UsdPhysics.RigidBodyAPI.Apply(body)
    mass = UsdPhysics.MassAPI.Apply(body)
    mass.CreateMassAttr(float(geometry.mass))
    mass.CreateCenterOfMassAttr(Gf.Vec3f(*map(float, geometry.com)))
    principal, axes = np.linalg.eigh(geometry.inertia)
    if np.linalg.det(axes) < 0:
        axes[:, 0] *= -1.0
    mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*map(float, principal)))
    x, y, z, w = map(float, matrix_to_quat(axes))
    mass.CreatePrincipalAxesAttr(Gf.Quatf(w, Gf.Vec3f(x, y, z)))
    for i, center in enumerate(geometry.centers):
        sphere = UsdGeom.Sphere.Define(stage, f"{path}/Spheres/s{i:04d}")
        sphere.CreateRadiusAttr(float(geometry.radius))
        sphere.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, center)))
        UsdPhysics.CollisionAPI.Apply(sphere.GetPrim())
    return body


def write_gaussians(stage: Usd.Stage, prim_path: str, means, quats_wxyz, scales, opacities, colors_rgb) -> Usd.Prim:
    """A ``UsdVol.ParticleField3DGaussianSplat`` in its parent's (body) frame; colours as degree-0 SH and displayColor."""
    splat = UsdVol.ParticleField3DGaussianSplat.Define(stage, prim_path)
    splat.CreatePositionsAttr(Vt.Vec3fArray.FromNumpy(np.asarray(means, dtype=np.float32)))
    splat.CreateOrientationsAttr(Vt.QuatfArray([Gf.Quatf(float(q[0]), Gf.Vec3f(*map(float, q[1:]))) for q in quats_wxyz]))
    splat.CreateScalesAttr(Vt.Vec3fArray.FromNumpy(np.asarray(scales, dtype=np.float32)))
    splat.CreateOpacitiesAttr(Vt.FloatArray.FromNumpy(np.asarray(opacities, dtype=np.float32).reshape(-1)))
    colors = np.asarray(colors_rgb, dtype=np.float32)
    splat.CreateRadianceSphericalHarmonicsDegreeAttr(0)
    splat.CreateRadianceSphericalHarmonicsCoefficientsAttr(Vt.Vec3fArray.FromNumpy((colors - 0.5) / SH_C0))
    splat.CreateDisplayColorPrimvar(UsdGeom.Tokens.vertex).Set(Vt.Vec3fArray.FromNumpy(colors))
    return splat.GetPrim()


def write_scene(path: str | Path, task: CellCfg, with_gaussians: bool | None = None,
                goal_pose: list[float] | None = None) -> Path:
    """Write the scene; Gaussians are written when the block comes from an object file (default) and it has them.
    ``goal_pose`` (7,): a goal marker there (visual only), e.g. PushT's ``goal.pose``; None: no marker."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    world = UsdGeom.Xform.Define(stage, "/World").GetPrim()
    stage.SetDefaultPrim(world)
    scene = UsdPhysics.Scene.Define(stage, "/World/PhysicsScene")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr(9.81)

    table = UsdGeom.Plane.Define(stage, "/World/Table")
    table.CreateAxisAttr(UsdGeom.Tokens.z)
    table.CreateWidthAttr(2.0)
    table.CreateLengthAttr(2.0)
    _set_pose(table.GetPrim(), _plane_pose(table_plane(task.table)))
    UsdPhysics.CollisionAPI.Apply(table.GetPrim())

    geometry = block_geometry(task)
    write_block(stage, geometry)
    if with_gaussians is None:
        with_gaussians = task.block.source == "file"
    if with_gaussians:
        from real_is_sim.gaussians.io import load_object_cloud  # flips the file's BGR colours to RGB

        cloud, _ = load_object_cloud(task.block.object_file_path())
        arrays = [t.detach().cpu().numpy() for t in (cloud.means, cloud.quats, cloud.scales, cloud.opacities, cloud.colors)]
        arrays[0] = arrays[0] * task.physical.block_scale
        arrays[2] = arrays[2] * task.physical.block_scale
        write_gaussians(stage, f"{BLOCK_PATH}/Gaussians", *arrays)

    if goal_pose is not None:
        goal = UsdGeom.Xform.Define(stage, "/World/Goal")
        _set_pose(goal.GetPrim(), np.asarray(goal_pose, dtype=np.float64))
        marker = UsdGeom.Cube.Define(stage, "/World/Goal/Marker")  # visual only: no CollisionAPI
        marker.CreateSizeAttr(1.0)
        marker.AddScaleOp().Set(Gf.Vec3f(0.05, 0.05, 0.001))
        marker.CreateDisplayColorAttr([Gf.Vec3f(0.1, 0.3, 0.9)])

    robot = UsdGeom.Xform.Define(stage, "/World/Robot").GetPrim()
    _set_pose(robot, np.asarray(task.robot.base_pose, dtype=np.float64))
    # The twin imports the robot from this URDF (Newton add_urdf); USD has no URDF reference, so record it.
    robot.CreateAttribute("realissim:urdf", Sdf.ValueTypeNames.Asset).Set(Sdf.AssetPath(str(franka.panda_urdf_path())))
    robot.CreateAttribute("realissim:q_start", Sdf.ValueTypeNames.DoubleArray).Set(Vt.DoubleArray(list(task.robot.q_start)))
    stage.GetRootLayer().Save()
    return path
