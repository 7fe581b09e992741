"""Differentiable Gaussian rendering: ``rasterization`` (gsplat's call shape), cpu and gsplat backends.

See docs/render.md. ``render_clouds`` renders several clouds with only some differentiable;
``fit_body_pose`` fits a body's planar pose to images and target masks (a task finds its objects' pixels).
"""

from real_is_sim.render.clouds import render_clouds
from real_is_sim.render.pose_fit import PoseFit, fit_body_pose, silhouette_iou
from real_is_sim.render.rasterize import RenderError, gsplat_available, rasterization

__all__ = ["PoseFit", "RenderError", "fit_body_pose", "gsplat_available", "rasterization", "render_clouds",
           "silhouette_iou"]
