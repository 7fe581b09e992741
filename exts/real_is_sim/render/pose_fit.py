"""Fitting one rigid body's pose to camera images by gradient descent through the renderer.

The body stays on a plane (the table): only its in-plane translation and its rotation about the
plane normal are fitted; height and tilt stay those of ``init_pose``. The target in each view is a
binary mask of the body (a task finds its object's pixels, e.g. PushT's red-orange mask) and the loss is the squared difference between the rendered alpha and that mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree

from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import GaussianCloud, pose_cloud
from real_is_sim.render.rasterize import rasterization
from real_is_sim.transforms import matrix_to_pose, pose_to_matrix, quat_from_axis_angle, quat_to_matrix


@dataclass(frozen=True)
class PoseFit:
    pose: np.ndarray  # (7,) px, py, pz, qx, qy, qz, qw
    ious: list[float]  # per view: silhouette (alpha > 0.5) vs target mask
    losses: list[float]  # per iteration


def silhouette_iou(alpha: np.ndarray, mask: np.ndarray) -> float:
    silhouette = np.asarray(alpha) > 0.5
    union = np.logical_or(silhouette, mask).sum()
    return float(np.logical_and(silhouette, mask).sum() / union) if union else 0.0


def _plane_frame(plane) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    plane = np.asarray(plane, dtype=np.float64)
    if plane.shape != (4,) or not np.isfinite(plane).all() or np.linalg.norm(plane[:3]) == 0:
        raise DataError(f"plane must be 4 finite numbers (a, b, c, d) with a nonzero normal, got {plane}")
    normal = plane[:3] / np.linalg.norm(plane[:3])
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(normal, helper)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(normal, e1)
    return tuple(torch.tensor(v, dtype=torch.float32) for v in (normal, e1, e2))


def _planar_pose(init_pose: torch.Tensor, pivot, normal, e1, e2, params: torch.Tensor) -> torch.Tensor:
    """init_pose turned by params[2] about ``normal`` through ``pivot``, shifted by params[0] e1 + params[1] e2."""
    a, b, theta = params.unbind()
    half = 0.5 * theta
    q_turn = torch.cat([normal * torch.sin(half), torch.cos(half)[None]])  # x, y, z, w
    x1, y1, z1, w1 = q_turn.unbind()
    x2, y2, z2, w2 = init_pose[3:7].unbind()
    q = torch.stack([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])
    arm = init_pose[:3] - pivot
    cos, sin = torch.cos(theta), torch.sin(theta)  # Rodrigues rotation of the arm about the normal
    turned = arm * cos + torch.linalg.cross(normal, arm) * sin + normal * (normal @ arm) * (1 - cos)
    return torch.cat([pivot + turned + a * e1 + b * e2, q])


def fit_body_pose(cloud: GaussianCloud, images: list[np.ndarray], viewmats: torch.Tensor, Ks: torch.Tensor,
                  init_pose, plane, *, masks: list[np.ndarray], iters: int = 120,
                  lr_translation: float = 0.003, lr_rotation: float = 0.03, margin: int = 40,
                  backend: str = "auto") -> PoseFit:
    """Pose (7,) of body 0 of ``cloud`` that best explains ``images`` (H x W x 3 RGB, one per camera).

    ``viewmats`` [C,4,4] world-to-camera (OpenCV axes), ``Ks`` [C,3,3], ``init_pose`` (7,) the start,
    ``plane`` (a, b, c, d) the table, ``masks`` the body's pixels in each view (H x W bool). The loss is
    evaluated in a window of ``margin`` pixels around the target and the starting silhouette.
    """
    if len(cloud) == 0 or cloud.num_bodies != 1 or bool((cloud.body_ids != 0).any()):
        raise DataError("fit_body_pose needs a non-empty cloud whose Gaussians are all attached to body 0")
    if len(images) != viewmats.shape[0] or Ks.shape[0] != viewmats.shape[0]:
        raise DataError(f"fit_body_pose got {len(images)} images for {viewmats.shape[0]} viewmats and {Ks.shape[0]} Ks")
    if iters < 1:
        raise DataError(f"iters must be >= 1, got {iters}")
    heights = {np.asarray(im).shape[:2] for im in images}
    if len(heights) != 1:
        raise DataError(f"all images must have the same size, got {sorted(heights)}")
    height, width = heights.pop()
    targets = [np.asarray(m, dtype=bool) for m in masks]
    if len(targets) != len(images):
        raise DataError(f"fit_body_pose got {len(masks)} masks for {len(images)} images")
    if any(t.shape != (height, width) for t in targets):
        raise DataError(f"masks must be {height} x {width}")
    init = torch.tensor(np.asarray(init_pose, dtype=np.float64), dtype=torch.float32)
    if init.shape != (7,) or not torch.isfinite(init).all():
        raise DataError(f"init_pose must be 7 finite numbers (px,py,pz,qx,qy,qz,qw), got {init_pose}")
    init = torch.cat([init[:3], torch.nn.functional.normalize(init[3:], dim=0)])
    normal, e1, e2 = _plane_frame(plane)
    frozen = cloud.detach()
    with torch.no_grad():
        pivot = pose_cloud(frozen, init[None])[0].mean(0)
    # Only a window around the block carries signal: render and compare that crop of every view.
    viewmats, Ks = viewmats.float(), Ks.float()
    with torch.no_grad():
        means0, quats0 = pose_cloud(frozen, init[None])
        alpha0 = rasterization(means0, quats0, frozen.scales, frozen.opacities, frozen.colors, viewmats, Ks, width, height,
                               backend=backend)[1][..., 0].cpu().numpy()
    crops = crop_windows([t | (a > 0.01) for t, a in zip(targets, alpha0)], width, height, margin)
    crop_w, crop_h = crops[0][2], crops[0][3]
    Ks_crop = Ks.clone()
    Ks_crop[:, 0, 2] -= torch.tensor([float(c[0]) for c in crops])
    Ks_crop[:, 1, 2] -= torch.tensor([float(c[1]) for c in crops])
    target = torch.tensor(np.stack([t[y:y + h, x:x + w] for t, (x, y, w, h) in zip(targets, crops)]), dtype=torch.float32)
    params = torch.zeros(3, requires_grad=True)
    optimizer = torch.optim.Adam([{"params": [params], "lr": 1.0}])
    step_sizes = torch.tensor([lr_translation, lr_translation, lr_rotation])  # Adam steps ~ lr per unit

    def render(p):
        means, quats = pose_cloud(frozen, _planar_pose(init, pivot, normal, e1, e2, p * step_sizes)[None])
        return rasterization(means, quats, frozen.scales, frozen.opacities, frozen.colors, viewmats, Ks_crop, crop_w,
                             crop_h, backend=backend)[1][..., 0].cpu()

    losses = []
    for _ in range(iters):
        optimizer.zero_grad()
        loss = (render(params) - target).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        pose = _planar_pose(init, pivot, normal, e1, e2, params * step_sizes)
        means, quats = pose_cloud(frozen, pose[None])
        alpha = rasterization(means, quats, frozen.scales, frozen.opacities, frozen.colors, viewmats, Ks, width, height,
                              backend=backend)[1][..., 0].cpu().numpy()
    pose = pose.numpy().astype(np.float64)
    pose[3:] /= np.linalg.norm(pose[3:])
    return PoseFit(pose, [silhouette_iou(a, t) for a, t in zip(alpha, targets)], losses)


def upside_down_pose(cloud: GaussianCloud, pose, plane, angle_steps: int = 180) -> np.ndarray:
    """``pose`` (7,) turned 180 deg about the line of mirror symmetry of the body's footprint on ``plane``.

    A body with a mirror-symmetric footprint (the PushT T) shows the same outline with either face up,
    so a silhouette cannot tell the two apart, and a scan's pose may hold the body either way up (the
    shared T-block's X_WB has its yellowish face up; in the footage the red one is). The mirror line is
    the in-plane direction through the footprint's centroid (the Gaussian means projected on the plane)
    whose reflection maps the footprint best onto itself; the turn keeps the height of the body origin,
    so a body whose thickness is centred on its origin stays resting on the table.
    """
    pose = np.asarray(pose, dtype=np.float64)
    if pose.shape != (7,) or not np.isfinite(pose).all():
        raise DataError(f"pose must be 7 finite numbers (px,py,pz,qx,qy,qz,qw), got {pose}")
    if len(cloud) == 0:
        raise DataError("upside_down_pose needs a non-empty cloud")
    normal, e1, e2 = (v.double().numpy() for v in _plane_frame(plane))
    with torch.no_grad():
        means = pose_cloud(cloud.detach(), torch.tensor(pose[None], dtype=torch.float32))[0].double().numpy()
    flat = np.stack([means @ e1, means @ e2], axis=-1)
    centre = flat.mean(axis=0)
    flat -= centre
    footprint = cKDTree(flat)

    def mismatch(angle: float) -> float:  # mean distance of the mirrored footprint to the footprint
        u = np.array([np.cos(angle), np.sin(angle)])
        return float(footprint.query(2.0 * (flat @ u)[:, None] * u - flat)[0].mean())

    step = np.pi / angle_steps
    coarse = min(np.arange(angle_steps) * step, key=mismatch)
    angle = min(coarse + np.linspace(-step, step, 41), key=mismatch)  # to 1/20 of a step
    u = np.array([np.cos(angle), np.sin(angle)])
    axis = u[0] * e1 + u[1] * e2
    origin = pose[:3]
    through = origin + e1 * (centre[0] - origin @ e1) + e2 * (centre[1] - origin @ e2)
    turn = np.eye(4)
    turn[:3, :3] = quat_to_matrix(quat_from_axis_angle(axis, np.pi))
    turn[:3, 3] = through - turn[:3, :3] @ through
    return matrix_to_pose(turn @ pose_to_matrix(pose))


def crop_windows(masks: list[np.ndarray], width: int, height: int, margin: int) -> list[tuple[int, int, int, int]]:
    """One (x, y, w, h) window per view, all of the same size, around each mask's bounding box plus ``margin``."""
    boxes = []
    for mask in masks:
        ys, xs = np.nonzero(mask)
        if len(xs) == 0:
            boxes.append((0, 0, width, height))
            continue
        boxes.append((max(xs.min() - margin, 0), max(ys.min() - margin, 0),
                      min(xs.max() + 1 + margin, width), min(ys.max() + 1 + margin, height)))
    w = max(x1 - x0 for x0, _, x1, _ in boxes)
    h = max(y1 - y0 for _, y0, _, y1 in boxes)
    return [(int(min(x0, width - w)), int(min(y0, height - h)), int(w), int(h)) for x0, y0, _, _ in boxes]
