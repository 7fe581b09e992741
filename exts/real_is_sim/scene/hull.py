"""Visual hull of an object on the table by voxel carving, and its fill with fixed-radius spheres.

The grid lives in the table frame (z along the table's upward normal, z = 0 on the table), so the object's bottom is
the grid's bottom face: the table, not empty space. A voxel is kept when its centre projects inside the object's
mask in every view (a voxel outside an image is carved: the object must be fully in view).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.scene.views import ObjectView

MAX_VOXELS = 4_000_000  # ~0.5 GB while projecting; a table-top object at 2 mm needs about 1.2 million


def table_frame(plane) -> np.ndarray:
    """4x4 world pose of a frame with z along the plane's upward normal and its origin on the plane (the point
    closest to the world origin); x is the world x axis projected on the plane."""
    plane = np.asarray(plane, dtype=np.float64)
    normal = plane[:3] / np.linalg.norm(plane[:3])
    d = plane[3] / np.linalg.norm(plane[:3])
    if normal[2] < 0:  # the twin's convention: upward normal
        normal, d = -normal, -d
    x = np.array([1.0, 0.0, 0.0]) - normal[0] * normal
    x /= np.linalg.norm(x)
    X = np.eye(4)
    X[:3, :3] = np.stack([x, np.cross(normal, x), normal], axis=1)
    X[:3, 3] = -d * normal
    return X


@dataclass(frozen=True)
class VoxelHull:
    X_WT: np.ndarray  # (4, 4) the table frame in the world
    origin: np.ndarray  # (3,) table-frame coordinates of voxel (0, 0, 0)'s lower corner
    voxel_size: float
    occupied: np.ndarray  # (nx, ny, nz) bool

    def centers_table(self, index: np.ndarray | None = None) -> np.ndarray:
        """Table-frame centres of the voxels ``index`` ((K, 3) ints; default: every occupied voxel)."""
        index = np.argwhere(self.occupied) if index is None else index
        return self.origin + (index + 0.5) * self.voxel_size

    def to_world(self, points_table: np.ndarray) -> np.ndarray:
        return points_table @ self.X_WT[:3, :3].T + self.X_WT[:3, 3]

    @property
    def volume(self) -> float:
        return float(self.occupied.sum()) * self.voxel_size**3


def project(points_world: np.ndarray, camera) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (K, 2) of world points in ``camera`` and whether each lies in front of it."""
    viewmat = camera.viewmat_opencv()
    p = points_world @ viewmat[:3, :3].T + viewmat[:3, 3]
    z = p[:, 2]
    in_front = z > 1e-6
    uv = (p[:, :2] / np.where(in_front, z, 1.0)[:, None]) @ camera.K[:2, :2].T + camera.K[:2, 2]
    return uv, in_front


def inside_masks(points_world: np.ndarray, views: list[ObjectView]) -> np.ndarray:
    """Whether each point projects inside the object's mask in every view."""
    keep = np.ones(len(points_world), dtype=bool)
    for view in views:
        uv, in_front = project(points_world, view.camera)
        col, row = np.floor(uv[:, 0]).astype(np.int64), np.floor(uv[:, 1]).astype(np.int64)
        in_image = in_front & (col >= 0) & (col < view.camera.width) & (row >= 0) & (row < view.camera.height)
        hit = np.zeros(len(points_world), dtype=bool)
        hit[in_image] = view.mask[row[in_image], col[in_image]]
        keep &= hit
    return keep


def _mask_footprint(view: ObjectView, X_WT: np.ndarray, max_height: float) -> tuple[np.ndarray, np.ndarray]:
    """Table-frame xy box holding every mask pixel's ray between the table and ``max_height`` (or the camera, when the
    camera is lower)."""
    rows, cols = np.nonzero(view.mask)
    pixels = np.stack([cols + 0.5, rows + 0.5], axis=1)
    K, X_WC = view.camera.K, view.camera.X_WC_opencv()
    rays_cam = np.concatenate([(pixels - K[:2, 2]) / np.diag(K)[:2], np.ones((len(pixels), 1))], axis=1)
    X_TC = np.linalg.inv(X_WT) @ X_WC
    rays = rays_cam @ X_TC[:3, :3].T
    eye = X_TC[:3, 3]
    down = rays[:, 2] < -1e-9  # a pixel looking up never meets the table
    if eye[2] <= 0 or not down.any():
        raise DataError(f"view {view.camera.serial}: no mask pixel looks down at the table (is the camera calibrated "
                        f"in the table's world frame?)")
    rays = rays[down]
    t_table = -eye[2] / rays[:, 2]
    t_top = np.maximum((max_height - eye[2]) / rays[:, 2], 0.0)
    ends = np.concatenate([eye[:2] + t_table[:, None] * rays[:, :2], eye[:2] + t_top[:, None] * rays[:, :2]])
    return ends.min(axis=0), ends.max(axis=0)


def carve_hull(views: list[ObjectView], plane, voxel_size: float = 0.002, max_height: float = 0.15) -> VoxelHull:
    """The visual hull on a grid of ``voxel_size`` from the table up to ``max_height`` (m), over the table area that
    every view's mask can see. Raises DataError when the views share no volume (bad calibration or masks)."""
    if not voxel_size > 0 or not max_height > voxel_size:
        raise ConfigError(f"carve_hull needs voxel_size > 0 and max_height > voxel_size, got {voxel_size}, {max_height}")
    X_WT = table_frame(plane)
    lo, hi = np.full(2, -np.inf), np.full(2, np.inf)
    for view in views:  # rays through a mask pixel stay inside its footprint between the table and max_height
        view_lo, view_hi = _mask_footprint(view, X_WT, max_height)
        lo, hi = np.maximum(lo, view_lo), np.minimum(hi, view_hi)
    if np.any(hi <= lo):
        raise DataError("the views' masks share no area on the table: check the calibration and the masks")
    origin = np.array([lo[0] - voxel_size, lo[1] - voxel_size, 0.0])
    shape = tuple(int(np.ceil(v)) for v in ((hi - lo + 2 * voxel_size) / voxel_size)) + (int(np.ceil(max_height / voxel_size)),)
    if np.prod(shape) > MAX_VOXELS:
        raise DataError(f"the hull's grid would have {np.prod(shape):,} voxels (over {MAX_VOXELS:,}): the views' masks "
                        f"cross over {hi - lo} m of table; use a coarser voxel_size or check the masks")
    index = np.indices(shape).reshape(3, -1).T
    hull = VoxelHull(X_WT, origin, voxel_size, np.zeros(shape, dtype=bool))
    occupied = inside_masks(hull.to_world(hull.centers_table(index)), views).reshape(shape)
    if not occupied.any():
        raise DataError("the visual hull is empty: no point projects inside every view's mask (check the calibration)")
    # keep the largest connected part: one object, no slivers where the silhouette cones happen to cross
    labels, count = ndimage.label(occupied)
    if count > 1:
        sizes = ndimage.sum(occupied, labels, index=np.arange(1, count + 1))
        occupied = labels == 1 + int(np.argmax(sizes))
    return VoxelHull(X_WT, origin, voxel_size, occupied)


def surface_depth(hull: VoxelHull) -> np.ndarray:
    """Distance (m) from each voxel centre to the hull's surface (0 outside); the table counts as surface."""
    padded = np.pad(hull.occupied, 1, constant_values=False)
    distance = ndimage.distance_transform_edt(padded)[1:-1, 1:-1, 1:-1]
    # edt reaches the nearest empty voxel's centre; the surface lies half a voxel nearer
    return np.where(hull.occupied, (distance - 0.5) * hull.voxel_size, 0.0)


def fill_spheres(hull: VoxelHull, radius: float, spacing: float) -> np.ndarray:
    """Centres (S, 3, table frame) of spheres of ``radius`` that lie inside the hull, no two nearer than ``spacing``.

    Candidates are the voxel centres at least ``radius`` deep; they are taken greedily from the surface inwards, so
    the outer spheres touch the hull's faces (the shape the physics sees) and the inside is filled after."""
    if not radius > 0 or not spacing > 0:
        raise ConfigError(f"sphere radius and spacing must be positive, got {radius}, {spacing}")
    depth = surface_depth(hull)
    candidates = np.argwhere(depth >= radius)
    if len(candidates) == 0:
        raise DataError(f"no sphere of radius {radius} m fits in the hull (thickest part {depth.max():.4f} m from its "
                        f"surface): use a smaller radius")
    order = np.lexsort((candidates[:, 2], candidates[:, 1], candidates[:, 0], depth[tuple(candidates.T)]))
    points = hull.centers_table(candidates[order])
    cells: dict[tuple[int, int, int], list[np.ndarray]] = {}
    accepted = []
    for p in points:
        key = tuple(np.floor(p / spacing).astype(int))
        near = [q for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1)
                for q in cells.get((key[0] + dx, key[1] + dy, key[2] + dz), ())]
        if near and np.min(np.linalg.norm(np.array(near) - p, axis=1)) < spacing:
            continue
        cells.setdefault(key, []).append(p)
        accepted.append(p)
    return np.array(accepted)
