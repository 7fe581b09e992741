"""Gaussians for an object known only by its collision spheres (a procedural block): one per sphere."""

from __future__ import annotations

import numpy as np
import torch

from real_is_sim.gaussians.cloud import GaussianCloud


def cloud_from_spheres(
    centers: np.ndarray,
    radii: np.ndarray,
    color: tuple[float, float, float] = (0.9, 0.35, 0.15),
    body_id: int = 0,
    opacity: float = 0.9,
) -> GaussianCloud:
    """Isotropic Gaussians on the sphere centres (body frame), standard deviation 0.7 * radius: neighbouring
    spheres overlap into a solid surface without bleeding far past the block's edges."""
    centers = torch.as_tensor(np.asarray(centers), dtype=torch.float32)
    n = centers.shape[0]
    scales = torch.as_tensor(np.asarray(radii), dtype=torch.float32)[:, None].expand(n, 3) * 0.7
    return GaussianCloud(
        means=centers,
        quats=torch.tensor([1.0, 0.0, 0.0, 0.0]).expand(n, 4).contiguous(),
        scales=scales.contiguous(),
        opacities=torch.full((n,), float(opacity)),
        colors=torch.tensor(color, dtype=torch.float32).expand(n, 3).contiguous(),
        body_ids=torch.full((n,), int(body_id), dtype=torch.int64),
    )
