"""Visual force: from the displacement of an object's optimised Gaussians to one wrench per body.

Embodied Gaussians attaches every Gaussian to its body with a spring of stiffness ``kp`` (N/m): after the
photometric optimisation has moved a Gaussian by ``d_i``, it pulls on its body with ``f_i = kp * d_i`` at its
position ``p_i``. Summed about the body's centre of mass ``c``:

    F = sum_i kp * d_i            tau = sum_i (p_i - c) x (kp * d_i)

The body's total stiffness therefore grows with its Gaussian count (498 for the T-block); friction with the
table damps the resulting motion. Both parts are clamped in norm (direction kept) so that one bad frame
cannot throw the twin's block across the table.

For an object that slides on a surface (the PushT block on the table) the wrench can be made *planar*: the
force is projected into the surface and the torque onto its normal. Without that, the photometric gradient's
vertical part lifts the block off the table (measured: the block then loses its friction and flies off).
"""

from __future__ import annotations

import torch


def displacement_wrench(
    positions: torch.Tensor,
    displaced: torch.Tensor,
    body_ids: torch.Tensor,
    body_com: torch.Tensor,
    kp: float,
    max_force: float,
    max_torque: float,
    plane_normal: torch.Tensor | None = None,
) -> torch.Tensor:
    """Wrenches ``[B, 6]`` (force xyz, torque xyz; world frame, about each body's COM).

    ``positions``/``displaced``: ``[N, 3]`` Gaussian centres before and after the optimisation (world);
    ``body_ids``: ``[N]`` index into ``body_com [B, 3]`` (world COM positions); ids outside ``[0, B)``
    (static scene, robot occluders) exert nothing. ``kp``: one stiffness, or ``[N]`` per Gaussian.
    ``plane_normal`` (3,): keep the wrench planar (see above).
    """
    num_bodies = body_com.shape[0]
    attached = (body_ids >= 0) & (body_ids < num_bodies)
    ids = body_ids[attached].long()
    if torch.is_tensor(kp):
        kp = kp[attached, None].to(body_com.dtype)
    forces = kp * (displaced[attached] - positions[attached]).to(body_com.dtype)
    lever = positions[attached].to(body_com.dtype) - body_com[ids]
    torques = torch.linalg.cross(lever, forces, dim=-1)
    wrench = torch.zeros(num_bodies, 6, dtype=body_com.dtype, device=body_com.device)
    wrench[:, :3].index_add_(0, ids, forces)
    wrench[:, 3:].index_add_(0, ids, torques)
    force, torque = wrench[:, :3], wrench[:, 3:]
    if plane_normal is not None:
        n = torch.nn.functional.normalize(plane_normal.to(wrench.dtype), dim=0)
        force = force - (force @ n)[:, None] * n
        torque = (torque @ n)[:, None] * n
    return torch.cat([clamp_norm(force, max_force), clamp_norm(torque, max_torque)], dim=1)


def clamp_norm(vectors: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Scale each row down to ``max_norm`` where it is longer; direction is kept."""
    norms = vectors.norm(dim=-1, keepdim=True)
    scale = torch.clamp(max_norm / norms.clamp_min(1e-12), max=1.0)
    return vectors * scale
