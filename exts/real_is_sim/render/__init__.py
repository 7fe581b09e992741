"""Differentiable Gaussian rendering: ``rasterization`` (gsplat's call shape), cpu and gsplat backends."""

from real_is_sim.render.rasterize import RenderError, gsplat_available, rasterization

__all__ = ["RenderError", "gsplat_available", "rasterization"]
