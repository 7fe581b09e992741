"""Gaussians for an object's appearance, fitted to its views through the differentiable renderer.

Start: one Gaussian per sampled voxel of the hull's visible surface (the bottom, on the table, is never seen),
isotropic, as large as the spacing of the samples, coloured by the mean of the pixels it projects to. Then Adam on
means, log scales, quaternions, logit opacities and logit colours against every view: L1 on colour rendered over the
empty cell (only on the object's pixels when a view has a given mask and no empty cell), plus the squared
silhouette error, in a window around the object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.gaussians.cloud import STATIC_WORLD, GaussianCloud
from real_is_sim.render.pose_fit import crop_windows
from real_is_sim.render.rasterize import rasterization
from real_is_sim.scene.hull import VoxelHull, project
from real_is_sim.scene.views import ObjectView


@dataclass
class GaussianFitCfg:
    num_gaussians: int = 800
    iterations: int = 150
    silhouette_weight: float = 1.0
    window_margin: int = 12  # pixels around the mask
    lr_means: float = 3e-4  # m per step (Adam's step ~ lr)
    lr_log_scales: float = 0.03
    lr_quats: float = 0.02
    lr_opacities: float = 0.05
    lr_colors: float = 0.05
    max_scale: float = 0.02  # m: no Gaussian grows past the object's size class
    seed: int = 0
    backend: str = "auto"

    def __post_init__(self):
        if self.num_gaussians < 1 or self.iterations < 0:
            raise ConfigError(f"num_gaussians must be >= 1 and iterations >= 0, got {self.num_gaussians}, {self.iterations}")


def visible_surface(hull: VoxelHull) -> np.ndarray:
    """Indices (K, 3) of occupied voxels with an empty 6-neighbour, the table below not counting as empty."""
    padded = np.pad(hull.occupied, 1, constant_values=False)
    padded[:, :, 0] = padded[:, :, 1]  # below the grid is the table: never a visible face
    core = padded[1:-1, 1:-1, 1:-1]
    exposed = np.zeros_like(core)
    for axis in range(3):
        for shift in (-1, 1):
            exposed |= ~np.roll(padded, shift, axis=axis)[1:-1, 1:-1, 1:-1]
    return np.argwhere(core & exposed)


def _mean_pixel_colors(points: np.ndarray, views: list[ObjectView]) -> np.ndarray:
    """Mean image colour at each point's projection over the views where it falls in the mask (no occlusion test:
    only a starting value)."""
    total, count = np.zeros((len(points), 3)), np.zeros(len(points))
    for view in views:
        uv, in_front = project(points, view.camera)
        col, row = np.floor(uv[:, 0]).astype(int), np.floor(uv[:, 1]).astype(int)
        ok = in_front & (col >= 0) & (col < view.camera.width) & (row >= 0) & (row < view.camera.height)
        ok[ok] = view.mask[row[ok], col[ok]]
        total[ok] += view.image[row[ok], col[ok]]
        count[ok] += 1
    fallback = np.mean([v.image[v.mask].mean(axis=0) for v in views], axis=0)
    return np.where(count[:, None] > 0, total / np.maximum(count, 1)[:, None], fallback)


def _logit(p: np.ndarray) -> torch.Tensor:
    p = np.clip(p, 0.02, 0.98)
    return torch.tensor(np.log(p / (1 - p)), dtype=torch.float32)


def fit_gaussians(views: list[ObjectView], hull: VoxelHull, cfg: GaussianFitCfg | None = None) -> tuple[GaussianCloud, list[float]]:
    """A static (world-frame) cloud fitted to ``views``, and the loss per iteration."""
    cfg = cfg or GaussianFitCfg()
    surface = visible_surface(hull)
    if len(surface) == 0:
        raise DataError("the hull has no visible surface to start the Gaussians on")
    rng = np.random.default_rng(cfg.seed)
    chosen = surface[rng.choice(len(surface), size=min(cfg.num_gaussians, len(surface)), replace=False)]
    means0 = hull.to_world(hull.centers_table(chosen))
    area = len(surface) * hull.voxel_size**2
    scale0 = 0.5 * np.sqrt(area / len(chosen))  # neighbouring samples overlap at about one standard deviation
    n = len(means0)
    means = torch.tensor(means0, dtype=torch.float32, requires_grad=True)
    log_scales = torch.full((n, 3), float(np.log(scale0)), requires_grad=True)
    quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(n, 1).requires_grad_(True)
    opacity_logits = _logit(np.full(n, 0.9)).requires_grad_(True)
    color_logits = _logit(_mean_pixel_colors(means0, views)).requires_grad_(True)
    optimizer = torch.optim.Adam([
        {"params": [means], "lr": cfg.lr_means}, {"params": [log_scales], "lr": cfg.lr_log_scales},
        {"params": [quats], "lr": cfg.lr_quats}, {"params": [opacity_logits], "lr": cfg.lr_opacities},
        {"params": [color_logits], "lr": cfg.lr_colors},
    ])

    sizes = {(v.camera.width, v.camera.height) for v in views}
    if len(sizes) != 1:
        raise DataError(f"all views must have the same image size to be fitted together, got {sorted(sizes)}")
    windows = crop_windows([v.mask for v in views], *sizes.pop(), cfg.window_margin)  # one batch: equal windows
    w, h = windows[0][2], windows[0][3]
    viewmats = torch.tensor(np.stack([v.camera.viewmat_opencv() for v in views]), dtype=torch.float32)
    Ks = torch.tensor(np.stack([v.camera.K for v in views]), dtype=torch.float32)
    Ks[:, 0, 2] -= torch.tensor([float(x) for x, _, _, _ in windows])
    Ks[:, 1, 2] -= torch.tensor([float(y) for _, y, _, _ in windows])
    crop = lambda a, x, y: a[y:y + h, x:x + w]  # noqa: E731
    targets = torch.tensor(np.stack([crop(v.image, x, y) for v, (x, y, _, _) in zip(views, windows)]))
    target_masks = torch.tensor(np.stack([crop(v.mask, x, y) for v, (x, y, _, _) in zip(views, windows)]), dtype=torch.float32)
    backgrounds = torch.tensor(np.stack([
        crop(v.background, x, y) if v.background is not None else np.zeros((h, w, 3), dtype=np.float32)
        for v, (x, y, _, _) in zip(views, windows)]))
    # colour is compared everywhere where the empty cell is known, only on the object where just a mask was given
    color_weights = torch.stack([torch.ones(h, w) if v.background is not None else target_masks[k]
                                 for k, v in enumerate(views)])[..., None]
    max_log_scale = float(np.log(cfg.max_scale))

    def current():
        return (means, quats, log_scales.clamp(max=max_log_scale).exp(), torch.sigmoid(opacity_logits),
                torch.sigmoid(color_logits))

    losses = []
    for _ in range(cfg.iterations):
        optimizer.zero_grad()
        rgb, alpha, _ = rasterization(*current(), viewmats, Ks, w, h, backgrounds=backgrounds, backend=cfg.backend)
        color_loss = ((rgb.cpu() - targets).abs() * color_weights).mean()
        loss = color_loss + cfg.silhouette_weight * (alpha.cpu()[..., 0] - target_masks).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        m, q, s, o, c = (t.detach().clone() for t in current())
        q = torch.nn.functional.normalize(q, dim=-1)
    return GaussianCloud(m, q, s, o, c, torch.full((n,), STATIC_WORLD, dtype=torch.int64)), losses
