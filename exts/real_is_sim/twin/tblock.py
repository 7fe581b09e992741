"""The T-block as a rigid body of fixed-radius spheres, and the table plane it stands on.

Body frame:
- procedural: +z up, origin on the bottom face at the centre of the top bar (see ``TBlockCfg``).
- object file: the file's scanned body frame, unchanged (its z axis points DOWN into the table). Sphere centres
  and Gaussian means are both given in this frame, so ``body pose in the twin * body-frame means = world means``,
  exactly as ``X_WB * means`` in the file. The twin reports the pose of this frame (the body origin), not of the COM.
The COM is the spheres' centroid (+ ``PhysicalParams.com_offset``); mass is spread evenly over the spheres.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull

from real_is_sim.cell import CellCfg, TableCfg, TBlockCfg
from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.gaussians.io import load_object_cloud
from real_is_sim.gaussians.spheres import cloud_from_spheres
from real_is_sim.objectfile import load_object_file
from real_is_sim.paths import shared_data_dir
from real_is_sim.transforms import matrix_to_pose, quat_rotate


@dataclass(frozen=True)
class BlockGeometry:
    centers: np.ndarray  # (S, 3) sphere centres, body frame
    radius: float
    mass: float
    com: np.ndarray  # (3,) body frame
    inertia: np.ndarray  # (3, 3) about the COM, body axes
    start_pose: np.ndarray  # (7,) body frame in the world (xyzw)


def _axis_positions(length: float, radius: float) -> np.ndarray:
    """Sphere centres along one box edge: first and last touch the faces, spacing at most 2r (no gaps)."""
    inner = length - 2.0 * radius
    count = int(np.ceil(inner / (2.0 * radius) - 1e-9)) + 1 if inner > 1e-12 else 1
    return np.linspace(radius, length - radius, count) if count > 1 else np.array([length / 2.0])


def _box_centers(x0: float, y0: float, size_x: float, size_y: float, height: float, radius: float) -> np.ndarray:
    xs = x0 + _axis_positions(size_x, radius)
    ys = y0 + _axis_positions(size_y, radius)
    zs = _axis_positions(height, radius)
    return np.stack(np.meshgrid(xs, ys, zs, indexing="ij"), axis=-1).reshape(-1, 3)


def procedural_t_centers(block: TBlockCfg) -> np.ndarray:
    """Sphere centres (body frame) of a T made of a bar (along x) and a stem (towards -y)."""
    r = block.sphere_radius
    bar = _box_centers(-block.bar_length / 2, -block.bar_width / 2, block.bar_length, block.bar_width, block.height, r)
    stem = _box_centers(
        -block.stem_width / 2, -block.bar_width / 2 - block.stem_length, block.stem_width, block.stem_length, block.height, r
    )
    return np.concatenate([bar, stem], axis=0)


def sphere_inertia(centers: np.ndarray, radius: float, mass: float, com: np.ndarray) -> np.ndarray:
    """Inertia about ``com`` of equal solid spheres sharing ``mass`` (overlaps counted twice: a fixed, simple rule)."""
    d = centers - com
    point_masses = (mass / len(centers)) * (np.sum(d * d) * np.eye(3) - d.T @ d)
    return point_masses + mass * 0.4 * radius**2 * np.eye(3)


def _directions(count: int) -> np.ndarray:
    """``(count, 3)`` unit vectors spread evenly over the sphere (Fibonacci lattice)."""
    i = np.arange(count) + 0.5
    polar, azimuth = np.arccos(1.0 - 2.0 * i / count), np.pi * (1.0 + 5.0**0.5) * i
    return np.stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)], axis=1)


def plane_reachable(centers: np.ndarray, tolerance: float, directions: int = 400) -> np.ndarray:
    """``(S,)`` bool: the spheres (one radius) a plane can touch first in some orientation: within ``tolerance``
    of the outermost centre along a normal, the convex hull's facet normals (flat faces: all their spheres tie and
    are kept) and ``directions`` more spread over the sphere."""
    normals = ConvexHull(centers).equations[:, :3]
    support = centers @ np.concatenate([normals, _directions(directions)]).T  # (S, D)
    return np.any(support >= support.max(axis=0) - tolerance, axis=1)


def ball_reachable(centers: np.ndarray, radius: float, ball_radius: float, tolerance: float, directions: int = 400) -> np.ndarray:
    """``(S,)`` bool: the spheres a ball of ``ball_radius`` (the pusher's) can touch without entering another
    sphere by more than ``tolerance``, from one of ``directions``. The others are shielded by their neighbours."""
    reach = radius + ball_radius
    probes = _directions(directions) * reach  # ball centres touching a sphere, relative to its centre
    distance = np.linalg.norm(centers[:, None] - centers[None], axis=-1)
    reachable = np.zeros(len(centers), dtype=bool)
    for i in range(len(centers)):
        neighbours = centers[(distance[i] < 2.0 * reach) & (np.arange(len(centers)) != i)]
        clear = np.linalg.norm(centers[i] + probes[:, None] - neighbours[None], axis=-1) >= reach - tolerance
        reachable[i] = np.any(np.all(clear, axis=1))
    return reachable


def table_plane(table: TableCfg) -> np.ndarray:
    """Normalised (a, b, c, d), upward normal; from ground_plane.json when ``use_real_plane``."""
    plane = np.asarray(table.plane, dtype=np.float64)
    if table.use_real_plane:
        path = shared_data_dir() / "environment" / "ground_plane.json"
        if not path.is_file():
            raise DataError(f"table plane file not found: {path}")
        try:
            plane = np.asarray(json.loads(path.read_text())["plane"], dtype=np.float64)
        except (KeyError, ValueError, TypeError) as exc:
            raise DataError(f"table plane file {path} needs a 'plane' of 4 numbers: {exc}") from None
        if plane.shape != (4,) or not np.all(np.isfinite(plane)):
            raise DataError(f"table plane file {path} needs a 'plane' of 4 finite numbers, got {plane}")
    if plane[2] < 0:  # ax+by+cz+d=0 is sign-free: make the normal point up
        plane = -plane
    return plane / np.linalg.norm(plane[:3])


def rest_on_table(pose: np.ndarray, centers: np.ndarray, radius: float, plane: np.ndarray) -> np.ndarray:
    """``pose`` moved along the table normal so the lowest sphere just touches the table."""
    world = pose[:3] + quat_rotate(pose[3:7], centers)
    clearance = np.min(world @ plane[:3] + plane[3]) - radius
    moved = np.array(pose, dtype=np.float64)
    moved[:3] -= clearance * plane[:3]
    return moved


def block_cloud(cell: CellCfg) -> GaussianCloud:
    """The block as cameras see it, in its body frame: the object file's Gaussians when the block comes from one, else
    one Gaussian per sphere."""
    if cell.block.source == "file":
        return load_object_cloud(cell.block.object_file_path())[0]
    geometry = block_geometry(cell)
    return cloud_from_spheres(geometry.centers, np.full(len(geometry.centers), geometry.radius))


def block_geometry(task: CellCfg) -> BlockGeometry:
    block, physical = task.block, task.physical
    if block.source == "file":
        obj = load_object_file(block.object_file_path())
        if np.ptp(obj.sphere_radii) > 1e-9:
            raise DataError(f"object file {block.object_file_path()}: spheres must share one radius, got {obj.sphere_radii.min()}..{obj.sphere_radii.max()}")
        centers, radius, default_pose = obj.sphere_centers, float(obj.sphere_radii[0]), matrix_to_pose(obj.X_WB)
    else:
        centers, radius = procedural_t_centers(block), block.sphere_radius
        default_pose = np.array([0.45, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    centers = centers * physical.block_scale
    radius = radius * physical.block_scale
    mass = block.mass * physical.mass_scale
    com = centers.mean(axis=0) + np.asarray(physical.com_offset, dtype=np.float64)
    if block.start_pose is not None:
        start = np.asarray(block.start_pose, dtype=np.float64)
        start[3:7] /= np.linalg.norm(start[3:7])
    else:
        start = rest_on_table(default_pose, centers, radius, table_plane(task.table))
    return BlockGeometry(centers, radius, mass, com, sphere_inertia(centers, radius, mass, com), start)
