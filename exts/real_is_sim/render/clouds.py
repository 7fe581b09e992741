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
    """Render ``clouds`` posed by ``body_poses``: one tensor per cloud, [n_bodies, 7] for one scene or
    [B, n_bodies, 7] for B scenes (scene b seen by ``viewmats[b]`` [B, C, 4, 4] alone, in one rasterization call);
    None for a static cloud.

    ``requires_grad[i]`` False detaches cloud i (and its poses). Other keyword arguments go to
    :func:`~real_is_sim.render.rasterization`. Returns its ``(colors, alphas, meta)``.
    """
    if len(body_poses) != len(clouds):
        raise DataError(f"render_clouds got {len(clouds)} clouds but {len(body_poses)} pose tensors")
    requires_grad = [True] * len(clouds) if requires_grad is None else list(requires_grad)
    if len(requires_grad) != len(clouds):
        raise DataError(f"render_clouds got {len(clouds)} clouds but {len(requires_grad)} requires_grad flags")
    batches = {poses.shape[0] for poses in body_poses if poses is not None and poses.ndim == 3}
    if len(batches) > 1 or (batches and any(p is not None and p.ndim != 3 for p in body_poses)):
        raise DataError("render_clouds: body poses must all be [n_bodies, 7] (one scene) or all [B, n_bodies, 7] "
                        f"with one B, got shapes {[None if p is None else tuple(p.shape) for p in body_poses]}")
    scenes = batches.pop() if batches else None
    parts = []
    for cloud, poses, differentiable in zip(clouds, body_poses, requires_grad):
        if poses is None:
            if cloud.num_bodies:
                raise DataError("a cloud with Gaussians attached to bodies needs its body poses (got None)")
            means, quats = cloud.means, cloud.quats
        elif scenes is None:
            means, quats = pose_cloud(cloud, poses)
        else:
            means, quats = (torch.stack(field) for field in zip(*(pose_cloud(cloud, scene) for scene in poses)))
        shared = [cloud.scales, cloud.opacities, cloud.colors]  # the same in every scene
        if scenes is not None:
            if poses is None:
                means, quats = means.expand(scenes, *means.shape), quats.expand(scenes, *quats.shape)
            shared = [field.expand(scenes, *field.shape) for field in shared]
        fields = [means, quats, *shared]
        parts.append(fields if differentiable else [f.detach() for f in fields])
    gaussians_dim = 0 if scenes is None else 1
    means, quats, scales, opacities, colors = (torch.cat([p[i].float() for p in parts], dim=gaussians_dim)
                                               for i in range(5))
    return rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width, height, **kwargs)
