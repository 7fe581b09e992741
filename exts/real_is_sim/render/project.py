"""Projection of 3D Gaussians into pinhole cameras, as gsplat's ``fully_fused_projection`` (torch, autograd).

Semantics follow gsplat 1.6 (``gsplat/cuda/_torch_impl.py`` and ``ProjectionEWA3DGSFused.cu``):
EWA splatting with the Jacobian evaluated at the mean clamped to 1.3x the field of view, ``eps2d``
added to the 2D covariance (classic mode, no compensation), Gaussians nearer than ``near_plane`` or
with alpha below 1/255 everywhere culled, and an opacity-aware screen box of
``min(3.33, sqrt(2 ln(255 opacity)))`` standard deviations per axis: outside it alpha < 1/255, so
the box culls nothing that would be drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from real_is_sim.gaussians.cloud import quat_to_rotmat_wxyz

ALPHA_THRESHOLD = 1.0 / 255.0
MAX_ALPHA = 0.99
TRANSMITTANCE_THRESHOLD = 1e-4
GAUSSIAN_EXTEND = 3.33


@dataclass
class Projected:
    """Per camera and Gaussian ([C, N, ...]); ``radii`` is 0 where a Gaussian is culled."""

    means2d: torch.Tensor  # [C, N, 2] pixels
    conics: torch.Tensor  # [C, N, 3] inverse 2D covariance (a, b, c): upper triangle
    depths: torch.Tensor  # [C, N] camera z
    radii: torch.Tensor  # [C, N, 2] int32 half extent of the screen box, pixels


def covariances(quats: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """World covariances [N, 3, 3] = R diag(s^2) R^T."""
    M = quat_to_rotmat_wxyz(quats) * scales[:, None, :]
    return M @ M.transpose(-1, -2)


def project(means, quats, scales, opacities, viewmats, Ks, width: int, height: int,
            eps2d: float = 0.3, near_plane: float = 0.01, far_plane: float = 1e10) -> Projected:
    R = viewmats[:, :3, :3]
    t = viewmats[:, :3, 3]
    means_c = torch.einsum("cij,nj->cni", R, means) + t[:, None, :]
    cov_c = R[:, None] @ covariances(quats, scales)[None] @ R[:, None].transpose(-1, -2)
    x, y, z = means_c.unbind(-1)
    in_depth = (z > near_plane) & (z < far_plane)
    z = torch.where(in_depth, z, torch.ones_like(z))  # keeps culled Gaussians' maths (and gradients) finite
    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    tan_fovx, tan_fovy = 0.5 * width / fx, 0.5 * height / fy
    tx = z * torch.clamp(x / z, min=-(cx / fx + 0.3 * tan_fovx), max=(width - cx) / fx + 0.3 * tan_fovx)
    ty = z * torch.clamp(y / z, min=-(cy / fy + 0.3 * tan_fovy), max=(height - cy) / fy + 0.3 * tan_fovy)
    zero = torch.zeros_like(z)
    J = torch.stack([fx / z, zero, -fx * tx / z**2, zero, fy / z, -fy * ty / z**2], dim=-1).reshape(z.shape + (2, 3))
    cov2d = J @ cov_c @ J.transpose(-1, -2)
    a = cov2d[..., 0, 0] + eps2d
    b = 0.5 * (cov2d[..., 0, 1] + cov2d[..., 1, 0])
    c = cov2d[..., 1, 1] + eps2d
    det = a * c - b * b
    positive = det > 0
    det = torch.where(positive, det, torch.ones_like(det))
    conics = torch.stack([c / det, -b / det, a / det], dim=-1)
    means2d = torch.stack([fx * x / z + cx, fy * y / z + cy], dim=-1)
    with torch.no_grad():
        opac = opacities.detach().expand_as(z)
        drawable = opac >= ALPHA_THRESHOLD
        extend = torch.clamp(torch.sqrt(2.0 * torch.log(torch.clamp(opac, min=ALPHA_THRESHOLD) / ALPHA_THRESHOLD)), max=GAUSSIAN_EXTEND)
        radius = torch.stack([torch.ceil(extend * torch.sqrt(a.clamp(min=0))), torch.ceil(extend * torch.sqrt(c.clamp(min=0)))], dim=-1)
        m = means2d.detach()
        inside = ((m[..., 0] + radius[..., 0] > 0) & (m[..., 0] - radius[..., 0] < width)
                  & (m[..., 1] + radius[..., 1] > 0) & (m[..., 1] - radius[..., 1] < height))
        keep = in_depth & positive & drawable & inside & (radius > 0).all(-1) & torch.isfinite(m).all(-1)
        radii = torch.where(keep[..., None], radius, torch.zeros_like(radius)).to(torch.int32)
    return Projected(means2d, conics, means_c[..., 2], radii)
