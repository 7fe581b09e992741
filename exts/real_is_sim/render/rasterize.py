"""``rasterization``: gsplat's call shape for the subset this project uses, with two backends.

``backend="cpu"`` is ours (:mod:`.cpu_backend`, rules in :mod:`.semantics`), ``"gsplat"`` calls
``gsplat.rasterization`` (needs CUDA), ``"auto"`` picks gsplat when CUDA and gsplat are importable.
Both follow gsplat's classic mode, so they are interchangeable.
"""

from __future__ import annotations

import torch

from real_is_sim.errors import RealIsSimError
from real_is_sim.render.semantics import EPS2D

BACKENDS = ("auto", "cpu", "gsplat")


class RenderError(RealIsSimError, ValueError):
    """Bad input to the renderer (shape, non-finite value, unknown or unavailable backend)."""


def gsplat_available() -> bool:
    if not torch.cuda.is_available():
        return False
    try:
        import gsplat  # noqa: F401
    except ImportError:
        return False
    return True


def _check(name: str, t, shape: tuple) -> None:
    if not isinstance(t, torch.Tensor):
        raise RenderError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.ndim != len(shape) or any(s is not None and d != s for d, s in zip(t.shape, shape)):
        want = "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"
        raise RenderError(f"{name} has shape {list(t.shape)}, expected {want}")
    if not torch.isfinite(t).all():
        raise RenderError(f"{name} has non-finite values")


def rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width: int, height: int,
                  backgrounds=None, backend: str = "auto", near_plane: float = 0.01, far_plane: float = 1e10,
                  eps2d: float = EPS2D, tile_size: int | None = None, threads: int = 1, layer=None):
    """Render N Gaussians into C pinhole cameras.

    means [N,3], quats [N,4] (w,x,y,z, any norm), scales [N,3] (linear), opacities [N] (linear),
    colors [N,3], viewmats [C,4,4] world-to-camera (OpenCV axes: +Z forward, +Y down), Ks [C,3,3].
    ``backgrounds``: None (black), [C,3] colours, or [C,H,W,3] images.
    Returns ``(colors [C,H,W,3], alphas [C,H,W,1], meta)``; differentiable in every Gaussian input
    (and the background). ``meta`` has means2d, conics, depths, radii [C,N,...] and the backend used.
    A camera that sees nothing (all behind it, off-screen) renders the background with alpha 0.
    As gsplat, one leading batch dimension B is accepted on every input (means [B,N,3], ..., viewmats
    [B,C,4,4], Ks [B,C,3,3], backgrounds [B,C,...]): scene b is seen by its own C cameras only, and the
    outputs are [B,C,...]. One call for B scenes saves the per-call work of B calls (the cpu backend).
    cpu backend only: ``tile_size`` (pixels; None: the backend's default), ``threads`` (tiles composited
    in parallel threads) and ``layer``: a :class:`~real_is_sim.render.cpu_backend.StaticLayer` of Gaussians rendered
    once (``render_layer``) for the same cameras and size, composited per pixel at its depth.
    """
    if backend not in BACKENDS:
        raise RenderError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if not (isinstance(width, int) and isinstance(height, int)) or width <= 0 or height <= 0:
        raise RenderError(f"width and height must be positive integers, got {width!r} x {height!r}")
    if not isinstance(means, torch.Tensor) or means.ndim not in (2, 3):
        raise RenderError(f"means must be a torch.Tensor [N, 3] or [B, N, 3], got "
                          f"{list(means.shape) if isinstance(means, torch.Tensor) else type(means).__name__}")
    batch = tuple(means.shape[:-2])  # () or (B,)
    _check("means", means, (*batch, None, 3))
    N = means.shape[-2]
    _check("quats", quats, (*batch, N, 4))
    _check("scales", scales, (*batch, N, 3))
    _check("opacities", opacities, (*batch, N))
    _check("colors", colors, (*batch, N, 3))
    _check("viewmats", viewmats, (*batch, None, 4, 4))
    C = viewmats.shape[-3]
    _check("Ks", Ks, (*batch, C, 3, 3))
    if N and bool((torch.linalg.norm(quats, dim=-1) == 0).any()):
        raise RenderError("quats has a zero quaternion")
    if N and bool((scales < 0).any()):
        raise RenderError("scales must be >= 0")
    if bool((Ks[..., 0, 0] <= 0).any() or (Ks[..., 1, 1] <= 0).any()):
        raise RenderError("Ks must have positive focal lengths fx, fy")
    if backgrounds is not None:
        if backgrounds.ndim == len(batch) + 2:
            _check("backgrounds", backgrounds, (*batch, C, 3))
        else:
            _check("backgrounds", backgrounds, (*batch, C, height, width, 3))
    if backend == "gsplat" and not gsplat_available():
        raise RenderError("backend='gsplat' needs CUDA and the gsplat package (pip install 'real-is-sim[gsplat]'); "
                          "use backend='cpu' or 'auto'")
    use_gsplat = backend == "gsplat" or (backend == "auto" and gsplat_available())
    cameras = C * (batch[0] if batch else 1)
    if layer is not None:
        if use_gsplat:
            raise RenderError("a static layer is composited by the cpu backend only; with gsplat render its Gaussians")
        if layer.T.shape != (cameras * height * width,) or layer.rgb.shape != (cameras * height * width, 3):
            raise RenderError(f"the static layer has {layer.T.shape[0]} pixels, the render {cameras} x {height} x "
                              f"{width}")
    if N == 0 and layer is None:  # nothing to draw; gsplat 1.5.3 never returned on an empty scene (seen on an H200)
        return _background_only(batch, C, width, height, backgrounds, "gsplat" if use_gsplat else "cpu")
    if use_gsplat:  # gsplat takes the batch dimension itself
        from real_is_sim.render.gsplat_backend import rasterize_gsplat

        return rasterize_gsplat(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                                backgrounds, near_plane, far_plane, eps2d)
    return _rasterize_cpu(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                          backgrounds, near_plane, far_plane, eps2d, tile_size, threads, layer)


def _background_only(batch: tuple, C: int, width: int, height: int, backgrounds, backend: str):
    """What any backend renders without Gaussians: the background (black if None), alpha 0, empty meta."""
    device = torch.device("cuda" if backend == "gsplat" else "cpu")
    shape = (*batch, C, height, width)
    alpha = torch.zeros(*shape, 1, device=device)
    if backgrounds is None:
        rgb = torch.zeros(*shape, 3, device=device)
    else:
        bg = backgrounds.float().to(device)
        rgb = (bg[..., None, None, :] if bg.ndim == len(batch) + 2 else bg).expand(*shape, 3).clone()
    meta = {"backend": backend, "means2d": torch.zeros(*batch, C, 0, 2, device=device),
            "conics": torch.zeros(*batch, C, 0, 3, device=device), "depths": torch.zeros(*batch, C, 0, device=device),
            "radii": torch.zeros(*batch, C, 0, 2, dtype=torch.int32, device=device), "width": width, "height": height}
    return rgb, alpha, meta


def _rasterize_cpu(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                   backgrounds, near_plane, far_plane, eps2d, tile_size, threads, layer=None):
    # imported here so that the gsplat path runs where Warp is not installed (a bare GPU machine)
    from real_is_sim.render import cpu_backend

    tile_size = cpu_backend.TILE_SIZE if tile_size is None else tile_size
    batch, N, C = tuple(means.shape[:-2]), means.shape[-2], viewmats.shape[-3]
    # the backend takes the B scenes' Gaussians one after another, each seen by its C cameras; the Warp kernels run on
    # the CPU: move (differentiably) whatever lives elsewhere
    flat = [t.cpu().reshape(-1, *t.shape[len(batch) + 1:]) for t in (means, quats, scales, opacities, colors)]
    viewmats, Ks = viewmats.cpu().reshape(-1, 4, 4), Ks.cpu().reshape(-1, 3, 3)
    settings = (width, height, float(eps2d), float(near_plane), float(far_plane), int(tile_size), int(threads), C)
    rgb, alpha, means2d, conics, depths, radii = cpu_backend.RasterizeCPU.apply(*flat, viewmats, Ks, settings, layer)
    rgb, alpha = rgb.reshape(*batch, C, height, width, 3), alpha.reshape(*batch, C, height, width, 1)
    if backgrounds is not None:
        bg = backgrounds.float().cpu()
        rgb = rgb + (1.0 - alpha) * (bg[..., None, None, :] if bg.ndim == len(batch) + 2 else bg)
    meta = {"backend": "cpu", "means2d": means2d.reshape(*batch, C, N, 2), "conics": conics.reshape(*batch, C, N, 3),
            "depths": depths.reshape(*batch, C, N), "radii": radii.reshape(*batch, C, N, 2), "width": width,
            "height": height, "tile_size": tile_size}
    return rgb, alpha, meta
