"""gym-pusht's success measure: the share of the goal's T footprint that the block's footprint covers.

``coverage = area(footprint(block) ∩ footprint(goal)) / area(footprint(goal))`` in the table plane; gym-pusht counts
an episode a success once coverage exceeds 0.95 (``COVERAGE_SUCCESS``). Computed exactly for the procedural T: its
footprint is two disjoint rectangles (bar and stem, sharing an edge), so the intersection of two Ts is the sum of
four convex-convex intersections (Sutherland-Hodgman clipping + the shoelace formula). A block from an object file
(scanned spheres) has no polygon: its footprint is the union of its spheres' discs in the table plane, rasterised at
``RASTER_M`` (1 mm) and morphologically closed (the gaps between neighbouring spheres filled).
"""

from __future__ import annotations

import numpy as np

from real_is_sim.transforms import quat_rotate
from real_is_sim_tasks.pusht.config import PushTCfg

COVERAGE_SUCCESS = 0.95  # gym-pusht's success threshold
RASTER_M = 0.001


def footprint_polygons(cfg: PushTCfg) -> list[np.ndarray] | None:
    """The procedural T's footprint in its body frame: disjoint convex polygons (counter-clockwise, (4, 2) each);
    None for a block from an object file."""
    b = cfg.block
    if b.source == "file":
        return None
    s = cfg.physical.block_scale

    def rect(x0, x1, y0, y1):
        return s * np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float64)

    bar = rect(-b.bar_length / 2, b.bar_length / 2, -b.bar_width / 2, b.bar_width / 2)
    stem = rect(-b.stem_width / 2, b.stem_width / 2, -b.bar_width / 2 - b.stem_length, -b.bar_width / 2)
    return [bar, stem]


def polygon_area(poly: np.ndarray) -> float:
    """Shoelace area of a simple polygon (k, 2); 0 for fewer than 3 vertices."""
    if len(poly) < 3:
        return 0.0
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def clip_convex(subject: np.ndarray, clip: np.ndarray) -> np.ndarray:
    """Sutherland-Hodgman: ``subject`` (k, 2) clipped by the convex counter-clockwise polygon ``clip`` (m, 2)."""
    out = subject
    for a, b in zip(clip, np.roll(clip, -1, axis=0)):
        if len(out) == 0:
            break
        edge = b - a
        side = edge[0] * (out[:, 1] - a[1]) - edge[1] * (out[:, 0] - a[0])  # >= 0: inside (left of the edge)
        points = []
        for i in range(len(out)):
            j = (i + 1) % len(out)
            p, q, sp, sq = out[i], out[j], side[i], side[j]
            if sp >= 0:
                points.append(p)
            if (sp >= 0) != (sq >= 0):
                points.append(p + (q - p) * (sp / (sp - sq)))
        out = np.array(points).reshape(-1, 2)
    return out


def _placed(polygons: list[np.ndarray], pose: np.ndarray) -> list[np.ndarray]:
    """Body-frame polygons at ``pose`` (7,), projected onto the table plane (world xy), kept counter-clockwise."""
    placed = []
    for poly in polygons:
        world = pose[:3] + quat_rotate(pose[3:7], np.column_stack([poly, np.zeros(len(poly))]))
        xy = world[:, :2]
        signed = float(np.dot(xy[:, 0], np.roll(xy[:, 1], -1)) - np.dot(xy[:, 1], np.roll(xy[:, 0], -1)))
        placed.append(xy if signed >= 0 else xy[::-1])
    return placed


_GOAL_MASKS: dict = {}


def _goal_mask(cfg: PushTCfg, goal: np.ndarray):
    """The footprint at ``goal`` rasterised in world xy: the union of the spheres' discs, closed with a disc of 1.5
    sphere radii (fills the scallops between neighbouring spheres, so the edges are the block's faces). Cached."""
    from scipy.ndimage import distance_transform_edt

    from real_is_sim.twin.tblock import block_geometry

    geometry = block_geometry(cfg)
    key = (id(cfg), tuple(np.round(goal, 9)))
    if key not in _GOAL_MASKS:
        world = (goal[:3] + quat_rotate(goal[3:7], geometry.centers))[:, :2]
        centers = np.unique(np.round(world, 6), axis=0)  # layers of spheres project onto one disc
        close = int(np.ceil(1.5 * geometry.radius / RASTER_M))
        origin = centers.min(axis=0) - geometry.radius - (close + 2) * RASTER_M
        shape = np.ceil((centers.max(axis=0) + geometry.radius + (close + 2) * RASTER_M - origin) / RASTER_M).astype(int)
        xs = origin[0] + (np.arange(shape[0]) + 0.5) * RASTER_M
        ys = origin[1] + (np.arange(shape[1]) + 0.5) * RASTER_M
        grid = np.stack(np.meshgrid(xs, ys, indexing="ij"), axis=-1)
        mask = np.zeros(tuple(shape), dtype=bool)
        for c in centers:
            mask |= np.sum((grid - c) ** 2, axis=-1) <= geometry.radius ** 2
        grown = distance_transform_edt(~mask) <= close  # closing: dilate, then erode, by a disc of `close` cells
        mask = distance_transform_edt(grown) > close
        _GOAL_MASKS[key] = (mask, origin, grid[mask], world)
    return _GOAL_MASKS[key]


def _raster_coverage(cfg: PushTCfg, pose: np.ndarray, goal: np.ndarray) -> float:
    """The block's footprint is the goal's moved by the planar rigid motion that takes the spheres at ``goal`` to
    those at ``pose`` (2D Kabsch): a goal cell is covered when that motion's inverse lands it inside the goal mask."""
    from real_is_sim.twin.tblock import block_geometry

    mask, origin, cells, goal_centers = _goal_mask(cfg, goal)
    centers = (pose[:3] + quat_rotate(pose[3:7], block_geometry(cfg).centers))[:, :2]
    a, b = goal_centers - goal_centers.mean(axis=0), centers - centers.mean(axis=0)
    u, _, vt = np.linalg.svd(a.T @ b)
    rot = (u @ np.diag([1.0, np.sign(np.linalg.det(u @ vt))]) @ vt).T  # b ~ rot @ a
    back = (cells - centers.mean(axis=0)) @ rot + goal_centers.mean(axis=0)  # rot^T (x - mean_b) + mean_a
    index = np.floor((back - origin) / RASTER_M).astype(int)
    inside = np.all((index >= 0) & (index < mask.shape), axis=1)
    hit = np.zeros(len(cells), dtype=bool)
    hit[inside] = mask[index[inside, 0], index[inside, 1]]
    return float(np.count_nonzero(hit) / len(cells))


def coverage(cfg: PushTCfg, object_pose: np.ndarray, goal_pose: np.ndarray | None = None) -> float:
    """Share of the goal footprint (``cfg.goal.pose`` by default) covered by the block at ``object_pose`` (7,)."""
    pose = np.asarray(object_pose, dtype=np.float64)
    goal = np.asarray(cfg.goal.pose if goal_pose is None else goal_pose, dtype=np.float64)
    polygons = footprint_polygons(cfg)
    if polygons is not None:
        block, target = _placed(polygons, pose), _placed(polygons, goal)
        inter = sum(polygon_area(clip_convex(a, b)) for a in block for b in target)
        return float(min(1.0, inter / sum(polygon_area(t) for t in target)))
    return _raster_coverage(cfg, pose, goal)


def coverages(cfg: PushTCfg, object_poses: np.ndarray, goal_pose: np.ndarray | None = None,
              within_m: float = 0.05) -> np.ndarray:
    """``coverage`` of each pose ``[N, 7]``; poses farther than ``within_m`` from the goal position get 0 without being
    computed (a T moved 5 cm covers well under half of its goal: the rule only needs values near 0.95)."""
    poses = np.asarray(object_poses, dtype=np.float64).reshape(-1, 7)
    goal = np.asarray(cfg.goal.pose if goal_pose is None else goal_pose, dtype=np.float64)
    out = np.zeros(len(poses))
    for i in np.flatnonzero(np.linalg.norm(poses[:, :2] - goal[:2], axis=1) < within_m):
        out[i] = coverage(cfg, poses[i], goal)
    return out
