"""The gsplat backend: ``gsplat.rasterization`` on CUDA in classic mode, with our background handling."""

from __future__ import annotations

import torch


def rasterize_gsplat(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                     backgrounds, near_plane, far_plane, eps2d):
    import gsplat

    device = torch.device("cuda")
    moved = [t.to(device=device, dtype=torch.float32) for t in (means, quats, scales, opacities, colors, viewmats, Ks)]
    image_background = backgrounds is not None and backgrounds.ndim == 4
    flat_background = None if backgrounds is None or image_background else backgrounds.to(device, torch.float32)
    rgb, alpha, meta = gsplat.rasterization(
        *moved, width, height, near_plane=near_plane, far_plane=far_plane, eps2d=eps2d, packed=False,
        tile_size=16, backgrounds=flat_background, render_mode="RGB", rasterize_mode="classic",
    )
    if image_background:
        rgb = rgb + (1.0 - alpha) * backgrounds.to(device, torch.float32)
    meta = dict(meta, backend="gsplat")
    return rgb, alpha, meta
