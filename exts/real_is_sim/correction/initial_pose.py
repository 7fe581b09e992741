"""Where the block is in the first frames, before the loop starts: a coarse search, then a gradient fit.

The object file's ``X_WB`` is where the block was scanned, not where it stands in a recording (there it is
a few cm and tens of degrees away), and the visual forces only close small errors. So the twin starts at:

1. a seed: the object's pixels of every view (``object_mask``, the task's: PushT's red-orange block) back-projected onto the plane at the block's mid height;
   their mean (over views) is where the block's Gaussian centroid goes;
2. a coarse search over yaw about the table normal (full turn), then over in-plane translations around
   the seed for the best few yaws, each candidate scored by silhouette IoU (alpha > 0.5 against the object's
   pixels) at a reduced resolution. Candidates are rendered in one batch: moving the
   block by a rigid motion D equals moving every camera by D (``viewmat @ D``), so one cloud serves all;
3. :func:`real_is_sim.render.pose_fit.fit_body_pose` gradient refinement of the best candidates of each face;
4. the refined pose whose render, composited into the frames, the task's ``object_mask`` finds most like the
   frames' own object pixels (mean IoU over views; silhouette IoU breaks ties). A silhouette cannot tell which
   face is up, the object's colours can: with one view of the shared clip, silhouettes picked the wrong face
   (docs/replay.md).

Every candidate is the scan pose, or the scan pose upside down
(:func:`~real_is_sim.render.pose_fit.upside_down_pose`: a silhouette cannot tell which face of the T is
up, and the shared scan's X_WB has the wrong one up), turned about the table normal and shifted in the
table plane, so the block keeps resting on the table (its height and tilt are the scanned ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.gaussians.cloud import GaussianCloud, pose_cloud
from real_is_sim.render import rasterization
from real_is_sim.render.pose_fit import fit_body_pose, silhouette_iou, upside_down_pose
from real_is_sim.transforms import matrix_to_pose, pose_multiply, pose_to_matrix, quat_from_axis_angle


@dataclass
class InitialPoseCfg:
    yaw_steps: int = 72  # coarse yaw candidates over a full turn (5 degrees apart)
    keep_yaws: int = 4  # best yaws whose translations are searched
    translation_span: float = 0.02  # m, +- around the seed along both in-plane axes
    translation_steps: int = 5  # per axis
    coarse_downscale: int = 4  # coarse candidates are scored on images at most this many times smaller,
    # and small enough a factor that the object keeps coarse_min_pixels mask pixels in its best view: a T-block left
    # 12 coarse pixels ranked a yaw 120 deg off first (160x90 frames, tests/test_relocalize.py), 22 or more its own
    coarse_min_pixels: int = 50
    refine_candidates: int = 2  # best coarse candidates refined by gradient descent
    refine_iters: int = 60
    both_faces: bool = True  # also search the block upside down (its outline is the same either face up)
    backend: str = "auto"

    def __post_init__(self):
        for name in ("yaw_steps", "keep_yaws", "translation_steps", "coarse_downscale", "coarse_min_pixels",
                     "refine_candidates"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"InitialPoseCfg.{name} must be at least 1, got {getattr(self, name)}")
        if self.refine_iters < 0 or not self.translation_span >= 0:
            raise ConfigError("InitialPoseCfg.refine_iters and translation_span must be non-negative")


@dataclass(frozen=True)
class InitialPose:
    pose: np.ndarray  # (7,) px, py, pz, qx, qy, qz, qw: the body frame in the world
    ious: list[float]  # per view, at full resolution
    colour_ious: list[float]  # per view: IoU of object_mask on the frame with the render composited in vs on the frame
    seed: np.ndarray  # (3,) the back-projected mask centroid
    coarse_iou: float  # mean IoU of the best coarse candidate (reduced resolution)


def _plane_axes(plane: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    plane = np.asarray(plane, dtype=np.float64)
    if plane.shape != (4,) or not np.isfinite(plane).all() or np.linalg.norm(plane[:3]) == 0:
        raise DataError(f"table plane must be 4 finite numbers (a, b, c, d), got {plane}")
    scale = np.linalg.norm(plane[:3])
    normal, d = plane[:3] / scale, plane[3] / scale
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(normal, helper)
    e1 /= np.linalg.norm(e1)
    return normal, e1, np.cross(normal, e1), d


def planar_motion(normal: np.ndarray, pivot: np.ndarray, yaw: float, shift: np.ndarray) -> np.ndarray:
    """4x4 world-frame motion: turn by ``yaw`` about ``normal`` through ``pivot``, then translate by ``shift``."""
    q = quat_from_axis_angle(normal, yaw)
    D = pose_to_matrix(np.concatenate([np.zeros(3), q]))
    D[:3, 3] = pivot - D[:3, :3] @ pivot + shift
    return D


def _moved_pose(D: np.ndarray, pose: np.ndarray) -> np.ndarray:
    return pose_multiply(matrix_to_pose(D), pose)


def backproject_to_plane(mask: np.ndarray, K: np.ndarray, viewmat: np.ndarray, normal: np.ndarray, offset: float) -> np.ndarray:
    """World points where the rays of ``mask``'s pixels meet the plane ``normal . x = offset`` (OpenCV viewmat)."""
    v, u = np.nonzero(mask)
    rays_cam = np.stack([(u + 0.5 - K[0, 2]) / K[0, 0], (v + 0.5 - K[1, 2]) / K[1, 1], np.ones(len(u))], axis=-1)
    X_WC = np.linalg.inv(viewmat)
    rays = rays_cam @ X_WC[:3, :3].T
    origin = X_WC[:3, 3]
    depth = (offset - origin @ normal) / (rays @ normal)
    hit = depth > 0
    return origin + rays[hit] * depth[hit, None]


def _downscale_mask(mask: np.ndarray, factor: int) -> np.ndarray:
    h, w = mask.shape[0] // factor, mask.shape[1] // factor
    blocks = mask[: h * factor, : w * factor].reshape(h, factor, w, factor)
    return blocks.mean(axis=(1, 3)) > 0.5


def _render(cloud: GaussianCloud, pose: np.ndarray, viewmats: np.ndarray, Ks: np.ndarray, width: int, height: int,
            backend: str) -> tuple[np.ndarray, np.ndarray]:
    """Colours ``(C, H, W, 3)`` in [0, 1] and alpha ``(C, H, W)`` of ``cloud`` at ``pose`` seen by every camera (one
    batched render)."""
    means, quats = pose_cloud(cloud, torch.tensor(pose[None], dtype=torch.float32))
    with torch.no_grad():
        rgb, alpha, _ = rasterization(means, quats, cloud.scales, cloud.opacities, cloud.colors,
                                      torch.tensor(viewmats, dtype=torch.float32), torch.tensor(Ks, dtype=torch.float32),
                                      width, height, backend=backend)
    return rgb.clamp(0.0, 1.0).cpu().numpy(), alpha[..., 0].cpu().numpy()  # gsplat renders on CUDA


def _silhouettes(cloud: GaussianCloud, pose: np.ndarray, viewmats: np.ndarray, Ks: np.ndarray, width: int, height: int,
                 backend: str) -> np.ndarray:
    """Alpha ``(C, H, W)`` of ``cloud`` at ``pose`` seen by every camera."""
    return _render(cloud, pose, viewmats, Ks, width, height, backend)[1]


def _coarse_factor(masks: list[np.ndarray], cfg: InitialPoseCfg) -> int:
    """The largest downscale up to ``cfg.coarse_downscale`` that leaves the object ``cfg.coarse_min_pixels`` mask
    pixels in the view that shows most of it (1 when even the full image has fewer)."""
    pixels = max(int(np.count_nonzero(m)) for m in masks)
    f = int(cfg.coarse_downscale)
    while f > 1 and pixels / f**2 < cfg.coarse_min_pixels:
        f -= 1
    return f


def _score(cloud, pose, motions, viewmats, Ks, masks, width, height, backend) -> np.ndarray:
    """Mean IoU over views for every motion in ``motions`` (M, 4, 4), rendered as moved cameras."""
    moved = np.einsum("cij,mjk->mcik", viewmats, motions).reshape(-1, 4, 4)
    alpha = _silhouettes(cloud, pose, moved, np.tile(Ks, (len(motions), 1, 1)), width, height, backend)
    alpha = alpha.reshape(len(motions), len(viewmats), height, width)
    return np.array([np.mean([silhouette_iou(a, m) for a, m in zip(per_view, masks)]) for per_view in alpha])


def _colour_ious(cloud: GaussianCloud, pose: np.ndarray, images: list[np.ndarray], viewmats: np.ndarray, Ks: np.ndarray,
                 masks: list[np.ndarray], object_mask, backend: str) -> list[float]:
    """Per view: the object's pixels (``object_mask``) in the frame with ``cloud`` at ``pose`` rendered into it,
    against those of the frame itself: the silhouette, and whether the render shows the colours the frame does."""
    height, width = masks[0].shape
    rgb, alpha = _render(cloud, pose, viewmats, Ks, width, height, backend)
    ious = []
    for image, mask, colour, a in zip(images, masks, rgb, alpha[..., None]):
        image = np.asarray(image)
        scale = 255.0 if image.dtype == np.uint8 else 1.0
        composite = (colour * scale * a + image * (1.0 - a)).astype(image.dtype)
        ious.append(silhouette_iou(object_mask(composite).astype(np.float32), mask))
    return ious


def estimate_initial_pose(cloud: GaussianCloud, images: list[np.ndarray], viewmats: np.ndarray, Ks: np.ndarray,
                          scan_pose: np.ndarray, plane: np.ndarray, cfg: InitialPoseCfg | None = None, *,
                          object_mask: Callable[[np.ndarray], np.ndarray]) -> InitialPose:
    """The pose (7,) of ``cloud``'s body that explains ``images`` (one RGB image per camera) best.

    ``viewmats`` (C, 4, 4) world-to-camera with OpenCV axes, ``Ks`` (C, 3, 3), ``scan_pose`` (7,) a pose of
    the block resting on the table (e.g. the object file's X_WB), ``plane`` (a, b, c, d) the table,
    ``object_mask(image) -> H x W bool`` the object's pixels (the task's perception).
    """
    cfg = cfg or InitialPoseCfg()
    viewmats, Ks = np.asarray(viewmats, dtype=np.float64), np.asarray(Ks, dtype=np.float64)
    scan_pose = np.asarray(scan_pose, dtype=np.float64)
    if viewmats.ndim != 3 or viewmats.shape[1:] != (4, 4) or Ks.shape != (len(viewmats), 3, 3):
        raise DataError(f"viewmats must be (C, 4, 4) and Ks (C, 3, 3), got {viewmats.shape} and {Ks.shape}")
    if len(images) != len(viewmats):
        raise DataError(f"estimate_initial_pose got {len(images)} images for {len(viewmats)} cameras")
    if scan_pose.shape != (7,) or not np.isfinite(scan_pose).all():
        raise DataError(f"scan_pose must be 7 finite numbers (px,py,pz,qx,qy,qz,qw), got {scan_pose}")
    shapes = {np.asarray(im).shape for im in images}
    if len(shapes) != 1 or len(next(iter(shapes))) != 3:
        raise DataError(f"images must be H x W x 3 and share one size, got {sorted(shapes)}")
    height, width = next(iter(shapes))[:2]
    masks = [object_mask(im) for im in images]
    empty = [i for i, m in enumerate(masks) if not m.any()]
    if empty:
        raise DataError(f"no object pixels (object_mask) in view(s) {empty}: cannot estimate the block's pose")
    normal, e1, e2, d = _plane_axes(plane)
    faces = [scan_pose, upside_down_pose(cloud, scan_pose, plane)] if cfg.both_faces else [scan_pose]

    # 1. Seed: mask pixels on the plane through the Gaussians' centroid, parallel to the table.
    with torch.no_grad():
        pivots = [pose_cloud(cloud, torch.tensor(face[None], dtype=torch.float32))[0].mean(0).double().numpy()
                  for face in faces]
    offset = float(normal @ pivots[0])
    hits = [backproject_to_plane(m, K, V, normal, offset) for m, K, V in zip(masks, Ks, viewmats)]
    if any(len(h) == 0 for h in hits):
        raise DataError("the block's pixels do not meet the table plane in some view (wrong camera poses?)")
    seed = np.mean([h.mean(axis=0) for h in hits], axis=0)

    # 2. Coarse search at reduced resolution, for each face up: yaw at the seed, then translations for
    #    the best yaws.
    f = _coarse_factor(masks, cfg)
    small_w, small_h = width // f, height // f
    small_Ks = Ks.copy()
    small_Ks[:, :2] /= f
    small_masks = [_downscale_mask(m, f) for m in masks]
    yaws = np.linspace(-np.pi, np.pi, cfg.yaw_steps, endpoint=False)
    steps = np.linspace(-cfg.translation_span, cfg.translation_span, cfg.translation_steps)
    starts, scores, face_of = [], [], []
    for index, (face, pivot) in enumerate(zip(faces, pivots)):
        to_seed = seed - pivot - normal * (normal @ (seed - pivot))
        motions = np.stack([planar_motion(normal, pivot, yaw, to_seed) for yaw in yaws])
        yaw_scores = _score(cloud, face, motions, viewmats, small_Ks, small_masks, small_w, small_h, cfg.backend)
        best_yaws = yaws[np.argsort(yaw_scores)[::-1][: cfg.keep_yaws]]
        motions = np.stack([planar_motion(normal, pivot, yaw, to_seed + a * e1 + b * e2)
                            for yaw in best_yaws for a in steps for b in steps])
        scores.extend(_score(cloud, face, motions, viewmats, small_Ks, small_masks, small_w, small_h, cfg.backend))
        starts.extend(_moved_pose(motion, face) for motion in motions)
        face_of.extend([index] * len(motions))
    scores, face_of = np.array(scores), np.array(face_of)
    ranked = np.argsort(scores, kind="stable")[::-1]
    order = [i for face in range(len(faces)) for i in ranked[face_of[ranked] == face][: cfg.refine_candidates]]

    # 3. Gradient refinement of each face's best few at full resolution; 4. keep the one whose colours explain the
    #    frames best (the faces tie in silhouette), silhouette IoU breaking ties.
    vm_t, K_t = torch.tensor(viewmats, dtype=torch.float32), torch.tensor(Ks, dtype=torch.float32)
    best = None
    for index in order:
        start = starts[index]
        if cfg.refine_iters > 0:
            fit = fit_body_pose(cloud, images, vm_t, K_t, start, plane, iters=cfg.refine_iters, masks=masks,
                                backend=cfg.backend)
            pose, ious = fit.pose, fit.ious
        else:
            pose = start
            ious = [silhouette_iou(a, m) for a, m in zip(_silhouettes(cloud, start, viewmats, Ks, width, height, cfg.backend), masks)]
        colour_ious = _colour_ious(cloud, pose, images, viewmats, Ks, masks, object_mask, cfg.backend)
        key = (np.mean(colour_ious), np.mean(ious))
        if best is None or key > best[0]:
            best = (key, pose, ious, colour_ious)
    _, pose, ious, colour_ious = best
    return InitialPose(pose, [float(v) for v in ious], [float(v) for v in colour_ious], seed, float(scores.max()))
