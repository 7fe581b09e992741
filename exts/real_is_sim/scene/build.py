"""An object from calibrated views: hull, spheres, Gaussians, pose on the table; written as an object file + USD.

    views = load_views("captures/box", frame=30, background_frame=0)         # or make_views(images, cameras, ...)
    built = build_object(views, plane, ObjectBuildCfg(name="box"))
    write_object(built, "out/objects")                                          # box.json (tblock.json's format), box.usda

Body frame (what the twin reports the pose of): origin on the table under the centroid of the spheres' footprint,
z along the table's upward normal, x along the footprint's long principal axis, pointing to the side where more of
the footprint lies far out (its third moment), so the same shape gets the same frame wherever it stands.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.gaussians.cloud import GaussianCloud, quat_multiply_wxyz
from real_is_sim.objectfile import load_object_file
from real_is_sim.scene.gaussian_fit import GaussianFitCfg, fit_gaussians
from real_is_sim.scene.hull import VoxelHull, carve_hull, fill_spheres, table_frame
from real_is_sim.scene.views import ObjectView
from real_is_sim.transforms import matrix_to_pose, matrix_to_quat


@dataclass
class ObjectBuildCfg:
    name: str = "object"
    voxel_size: float = 0.002  # m
    max_height: float = 0.15  # m above the table
    sphere_radius: float = 0.006  # m, as the shipped tblock.json
    sphere_spacing: float = 0.01  # m between sphere centres, about the shipped file's density (466 for the T)
    mass: float = 0.2  # kg, written to the USD (the object file has no mass; the twin takes block.mass)
    gaussians: GaussianFitCfg = field(default_factory=GaussianFitCfg)

    def __post_init__(self):
        if not self.name or not all(ch.isalnum() or ch in "_-" for ch in self.name):
            raise ConfigError(f"object name must be letters, digits, '_' or '-', got {self.name!r}")
        for key in ("voxel_size", "max_height", "sphere_radius", "sphere_spacing", "mass"):
            if not np.isfinite(getattr(self, key)) or getattr(self, key) <= 0:
                raise ConfigError(f"{key} must be positive, got {getattr(self, key)}")


@dataclass(frozen=True)
class BuiltObject:
    name: str
    X_WB: np.ndarray  # (4, 4) the body frame in the world: the object's pose on the table
    sphere_centers: np.ndarray  # (S, 3) body frame
    sphere_radius: float
    cloud: GaussianCloud  # body frame, body 0
    hull: VoxelHull
    mass: float
    fit_losses: list[float]
    seconds: float

    def sphere_centers_world(self) -> np.ndarray:
        return self.sphere_centers @ self.X_WB[:3, :3].T + self.X_WB[:3, 3]

    def summary(self) -> dict:
        return {"name": self.name, "pose": [round(float(v), 6) for v in matrix_to_pose(self.X_WB)],
                "spheres": len(self.sphere_centers), "sphere_radius": self.sphere_radius, "gaussians": len(self.cloud),
                "hull_volume_cm3": round(self.hull.volume * 1e6, 2), "mass": self.mass,
                "fit_loss": [round(self.fit_losses[0], 4), round(self.fit_losses[-1], 4)] if self.fit_losses else None,
                "seconds": round(self.seconds, 1)}


def footprint_frame(centers_world: np.ndarray, plane) -> np.ndarray:
    """4x4 world pose of the body frame the module docstring defines, from sphere centres on the table ``plane``."""
    X_WT = table_frame(plane)
    local = (centers_world - X_WT[:3, 3]) @ X_WT[:3, :3]
    xy = local[:, :2] - local[:, :2].mean(axis=0)
    _, axes = np.linalg.eigh(xy.T @ xy)
    x_axis = axes[:, 1]  # largest spread
    if np.sum((xy @ x_axis) ** 3) < 0:
        x_axis = -x_axis
    R_T = np.eye(3)
    R_T[:2, 0] = x_axis
    R_T[:2, 1] = [-x_axis[1], x_axis[0]]
    X_TB = np.eye(4)
    X_TB[:3, :3] = R_T
    X_TB[:2, 3] = local[:, :2].mean(axis=0)
    return X_WT @ X_TB


def _to_body(X_WB: np.ndarray, cloud: GaussianCloud) -> GaussianCloud:
    R = torch.tensor(X_WB[:3, :3], dtype=torch.float32)
    means = (cloud.means - torch.tensor(X_WB[:3, 3], dtype=torch.float32)) @ R
    x, y, z, w = matrix_to_quat(X_WB[:3, :3].T)  # rotation world -> body
    q = torch.tensor([w, x, y, z], dtype=torch.float32)
    quats = quat_multiply_wxyz(q.expand_as(cloud.quats), cloud.quats)
    return GaussianCloud(means, quats, cloud.scales, cloud.opacities, cloud.colors, torch.zeros(len(cloud), dtype=torch.int64))


def build_object(views: list[ObjectView], plane, cfg: ObjectBuildCfg | None = None) -> BuiltObject:
    """Hull from the views' masks, spheres inside it, Gaussians fitted to the views, all in the body frame."""
    cfg = cfg or ObjectBuildCfg()
    start = time.perf_counter()
    hull = carve_hull(views, plane, cfg.voxel_size, cfg.max_height)
    centers_world = hull.to_world(fill_spheres(hull, cfg.sphere_radius, cfg.sphere_spacing))
    X_WB = footprint_frame(centers_world, plane)
    cloud_world, losses = fit_gaussians(views, hull, cfg.gaussians)
    centers_body = (centers_world - X_WB[:3, 3]) @ X_WB[:3, :3]
    return BuiltObject(cfg.name, X_WB, centers_body, cfg.sphere_radius, _to_body(X_WB, cloud_world), hull, cfg.mass,
                       losses, time.perf_counter() - start)


# -- writing ---------------------------------------------------------------------------------------------------


def _nearest_colors(points: np.ndarray, cloud: GaussianCloud) -> np.ndarray:
    means = cloud.means.numpy()
    nearest = np.argmin(((points[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    return cloud.colors.numpy()[nearest]


def object_file_dict(built: BuiltObject) -> dict:
    """The object file (``tblock.json``'s layout): quats w,x,y,z, linear scales and opacities, colours stored BGR as
    that file stores them (:func:`real_is_sim.gaussians.io.load_object_cloud` flips them back)."""
    c = built.cloud
    spheres = len(built.sphere_centers)
    return {
        "name": built.name,
        "X_WB": built.X_WB.tolist(),
        "gaussians": {
            "means": c.means.numpy().tolist(), "quats": c.quats.numpy().tolist(), "scales": c.scales.numpy().tolist(),
            "opacities": c.opacities.numpy().tolist(), "colors": c.colors.numpy()[:, ::-1].tolist(),
        },
        "particles": {
            "means": built.sphere_centers.tolist(), "quats": [[1.0, 0.0, 0.0, 0.0]] * spheres,
            "radii": [built.sphere_radius] * spheres,
            "colors": _nearest_colors(built.sphere_centers, c)[:, ::-1].tolist(),
        },
    }


def write_object(built: BuiltObject, out_dir: str | Path) -> tuple[Path, Path]:
    """``<name>.json`` (object file) and ``<name>.usda`` (rigid body with sphere colliders and mass, the Gaussians as
    a ParticleField3DGaussianSplat child) in ``out_dir``. Both are written to temporary files, checked and then
    renamed: a failure leaves neither half-written."""
    from real_is_sim.twin.tblock import BlockGeometry, sphere_inertia
    from real_is_sim.twin.usd_scene import new_stage, write_block, write_gaussians

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, usd_path = out / f"{built.name}.json", out / f"{built.name}.usda"
    json_tmp, usd_tmp = out / f".{built.name}.json.tmp", out / f".{built.name}.tmp.usda"
    try:
        json_tmp.write_text(json.dumps(object_file_dict(built)))
        load_object_file(json_tmp)  # the reader the twin uses must accept it
        com = built.sphere_centers.mean(axis=0)
        geometry = BlockGeometry(built.sphere_centers, built.sphere_radius, built.mass, com,
                                 sphere_inertia(built.sphere_centers, built.sphere_radius, built.mass, com),
                                 matrix_to_pose(built.X_WB))
        prim = f"/{built.name.replace('-', '_')}"
        stage, _ = new_stage(prim if not prim[1].isdigit() else f"/object_{prim[1:]}")
        root = stage.GetDefaultPrim().GetPath().pathString
        write_block(stage, geometry, root)
        c = built.cloud
        write_gaussians(stage, f"{root}/Gaussians", c.means.numpy(), c.quats.numpy(), c.scales.numpy(),
                        c.opacities.numpy(), c.colors.numpy())
        stage.GetRootLayer().Export(str(usd_tmp))
        os.replace(json_tmp, json_path)
        os.replace(usd_tmp, usd_path)
    finally:
        for tmp in (json_tmp, usd_tmp):
            tmp.unlink(missing_ok=True)
    return json_path, usd_path
