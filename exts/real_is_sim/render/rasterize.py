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
    cpu backend only: ``tile_size`` (pixels; None: the backend's default), ``threads`` (tiles composited
    in parallel threads) and ``layer``: a :class:`~real_is_sim.render.cpu_backend.StaticLayer` of Gaussians rendered
    once (``render_layer``) for the same cameras and size, composited per pixel at its depth.
    """
    if backend not in BACKENDS:
        raise RenderError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if not (isinstance(width, int) and isinstance(height, int)) or width <= 0 or height <= 0:
        raise RenderError(f"width and height must be positive integers, got {width!r} x {height!r}")
    _check("means", means, (None, 3))
    N = means.shape[0]
    _check("quats", quats, (N, 4))
    _check("scales", scales, (N, 3))
    _check("opacities", opacities, (N,))
    _check("colors", colors, (N, 3))
    _check("viewmats", viewmats, (None, 4, 4))
    C = viewmats.shape[0]
    _check("Ks", Ks, (C, 3, 3))
    if N and bool((torch.linalg.norm(quats, dim=-1) == 0).any()):
        raise RenderError("quats has a zero quaternion")
    if N and bool((scales < 0).any()):
        raise RenderError("scales must be >= 0")
    if bool((Ks[:, 0, 0] <= 0).any() or (Ks[:, 1, 1] <= 0).any()):
        raise RenderError("Ks must have positive focal lengths fx, fy")
    if backgrounds is not None:
        if backgrounds.ndim == 2:
            _check("backgrounds", backgrounds, (C, 3))
        else:
            _check("backgrounds", backgrounds, (C, height, width, 3))
    if backend == "gsplat" and not gsplat_available():
        raise RenderError("backend='gsplat' needs CUDA and the gsplat package (pip install 'real-is-sim[gsplat]'); "
                          "use backend='cpu' or 'auto'")
    use_gsplat = backend == "gsplat" or (backend == "auto" and gsplat_available())
    if layer is not None:
        if use_gsplat:
            raise RenderError("a static layer is composited by the cpu backend only; with gsplat render its Gaussians")
        if layer.T.shape != (C * height * width,) or layer.rgb.shape != (C * height * width, 3):
            raise RenderError(f"the static layer has {layer.T.shape[0]} pixels, the render {C} x {height} x {width}")
    if N == 0 and layer is None:  # nothing to draw; gsplat 1.5.3 never returned on an empty scene (seen on an H200)
        return _background_only(C, width, height, backgrounds, "gsplat" if use_gsplat else "cpu")
    if use_gsplat:
        from real_is_sim.render.gsplat_backend import rasterize_gsplat

        return rasterize_gsplat(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                                backgrounds, near_plane, far_plane, eps2d)
    return _rasterize_cpu(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                          backgrounds, near_plane, far_plane, eps2d, tile_size, threads, layer)


def _background_only(C: int, width: int, height: int, backgrounds, backend: str):
    """What any backend renders without Gaussians: the background (black if None), alpha 0, empty meta."""
    device = torch.device("cuda" if backend == "gsplat" else "cpu")
    alpha = torch.zeros(C, height, width, 1, device=device)
    if backgrounds is None:
        rgb = torch.zeros(C, height, width, 3, device=device)
    else:
        bg = backgrounds.float().to(device)
        rgb = (bg[:, None, None, :] if bg.ndim == 2 else bg).expand(C, height, width, 3).clone()
    meta = {"backend": backend, "means2d": torch.zeros(C, 0, 2, device=device), "conics": torch.zeros(C, 0, 3, device=device),
            "depths": torch.zeros(C, 0, device=device), "radii": torch.zeros(C, 0, 2, dtype=torch.int32, device=device),
            "width": width, "height": height}
    return rgb, alpha, meta


def _rasterize_cpu(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                   backgrounds, near_plane, far_plane, eps2d, tile_size, threads, layer=None):
    # imported here so that the gsplat path runs where Warp is not installed (a bare GPU machine)
    from real_is_sim.render import cpu_backend

    tile_size = cpu_backend.TILE_SIZE if tile_size is None else tile_size
    # the Warp kernels run on the CPU: move (differentiably) whatever lives elsewhere
    means, quats, scales, opacities, colors, viewmats, Ks = (t.cpu() for t in (means, quats, scales, opacities, colors,
                                                                                 viewmats, Ks))
    settings = (width, height, float(eps2d), float(near_plane), float(far_plane), int(tile_size), int(threads))
    rgb, alpha, means2d, conics, depths, radii = cpu_backend.RasterizeCPU.apply(
        means, quats, scales, opacities, colors, viewmats, Ks, settings, layer)
    if backgrounds is not None:
        bg = backgrounds.float().cpu()
        rgb = rgb + (1.0 - alpha) * (bg[:, None, None, :] if bg.ndim == 2 else bg)
    C, N = viewmats.shape[0], means.shape[0]
    meta = {"backend": "cpu", "means2d": means2d.reshape(C, N, 2), "conics": conics.reshape(C, N, 3),
            "depths": depths.reshape(C, N), "radii": radii.reshape(C, N, 2), "width": width, "height": height,
            "tile_size": tile_size}
    return rgb, alpha, meta
