"""Rendering several GaussianClouds together (object + static scene + robot links as occluders).

Every cloud occludes every other; gradients flow only into the clouds marked differentiable: the
others enter the renderer detached, so they cost no backward work beyond the shared compositing.
"""

from __future__ import annotations

import torch

from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import GaussianCloud, pose_cloud
from real_is_sim.render.rasterize import rasterization


def render_clouds(clouds: list[GaussianCloud], body_poses: list[torch.Tensor | None], viewmats, Ks,
                  width: int, height: int, requires_grad: list[bool] | None = None, **kwargs):
    """Render ``clouds`` posed by ``body_poses`` (one [B,7] tensor per cloud, None for a static cloud).

    ``requires_grad[i]`` False detaches cloud i (and its poses). Other keyword arguments go to
    :func:`~real_is_sim.render.rasterization`. Returns its ``(colors, alphas, meta)``.
    """
    if len(body_poses) != len(clouds):
        raise DataError(f"render_clouds got {len(clouds)} clouds but {len(body_poses)} pose tensors")
    requires_grad = [True] * len(clouds) if requires_grad is None else list(requires_grad)
    if len(requires_grad) != len(clouds):
        raise DataError(f"render_clouds got {len(clouds)} clouds but {len(requires_grad)} requires_grad flags")
    parts = []
    for cloud, poses, differentiable in zip(clouds, body_poses, requires_grad):
        if poses is None:
            if cloud.num_bodies:
                raise DataError("a cloud with Gaussians attached to bodies needs its body poses (got None)")
            means, quats = cloud.means, cloud.quats
        else:
            means, quats = pose_cloud(cloud, poses)
        fields = [means, quats, cloud.scales, cloud.opacities, cloud.colors]
        parts.append(fields if differentiable else [f.detach() for f in fields])
    means, quats, scales, opacities, colors = (torch.cat([p[i].float() for p in parts]) for i in range(5))
    return rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width, height, **kwargs)
