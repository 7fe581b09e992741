"""GaussianCloud: 3D Gaussians attached to bodies (or to the static world), and posing them.

Conventions (the renderer's, i.e. gsplat's): quaternions are (w, x, y, z), scales are linear
standard deviations in metres, opacities are linear in [0, 1], colours are RGB in [0, 1].
For a Gaussian attached to body ``b >= 0`` its ``means``/``quats`` are offsets in that body's frame;
``body_ids == -1`` marks static Gaussians whose means/quats are already in the world frame.
Body poses follow the project convention ``(px, py, pz, qx, qy, qz, qw)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from real_is_sim.errors import DataError

STATIC_WORLD = -1


@dataclass(frozen=True)
class GaussianCloud:
    means: torch.Tensor  # [N, 3] body frame (world frame where body_ids == -1)
    quats: torch.Tensor  # [N, 4] w, x, y, z, body frame
    scales: torch.Tensor  # [N, 3] linear, metres
    opacities: torch.Tensor  # [N] linear, [0, 1]
    colors: torch.Tensor  # [N, 3] RGB, [0, 1]
    body_ids: torch.Tensor  # [N] int64, -1 = static world

    def __post_init__(self):
        n = self.means.shape[0] if self.means.ndim == 2 else -1
        expected = {"means": (n, 3), "quats": (n, 4), "scales": (n, 3), "opacities": (n,), "colors": (n, 3), "body_ids": (n,)}
        for name, shape in expected.items():
            value = getattr(self, name)
            if not isinstance(value, torch.Tensor):
                raise DataError(f"GaussianCloud.{name} must be a torch.Tensor, got {type(value).__name__}")
            if n < 0 or tuple(value.shape) != shape:
                raise DataError(f"GaussianCloud.{name} has shape {tuple(value.shape)}, expected {shape} (N from means [N, 3])")
            if name != "body_ids" and not torch.isfinite(value).all():
                raise DataError(f"GaussianCloud.{name} has non-finite values")
        if self.body_ids.dtype != torch.int64:
            raise DataError(f"GaussianCloud.body_ids must be int64, got {self.body_ids.dtype}")
        if n and int(self.body_ids.min()) < STATIC_WORLD:
            raise DataError("GaussianCloud.body_ids must be >= -1 (-1 = static world)")
        if n and bool((self.scales < 0).any()):
            raise DataError("GaussianCloud.scales must be >= 0 (linear standard deviations)")
        if n and bool(((self.opacities < 0) | (self.opacities > 1)).any()):
            raise DataError("GaussianCloud.opacities must lie in [0, 1] (linear, not logits)")
        if n and bool((torch.linalg.norm(self.quats, dim=-1) == 0).any()):
            raise DataError("GaussianCloud.quats has a zero quaternion")

    def __len__(self) -> int:
        return self.means.shape[0]

    @property
    def num_bodies(self) -> int:
        """1 + the largest body id (0 when every Gaussian is static)."""
        return int(self.body_ids.max()) + 1 if len(self) else 0

    def detach(self) -> "GaussianCloud":
        return GaussianCloud(*(getattr(self, f).detach() for f in _FIELDS))

    def with_body_id(self, body_id: int) -> "GaussianCloud":
        """The same Gaussians, all attached to ``body_id`` (-1 = static world)."""
        return GaussianCloud(self.means, self.quats, self.scales, self.opacities, self.colors,
                             torch.full_like(self.body_ids, int(body_id)))


_FIELDS = ("means", "quats", "scales", "opacities", "colors", "body_ids")


def concat_clouds(clouds: list[GaussianCloud]) -> GaussianCloud:
    """One cloud holding all Gaussians of ``clouds`` (body ids are kept as they are)."""
    if not clouds:
        raise DataError("concat_clouds needs at least one cloud")
    return GaussianCloud(*(torch.cat([getattr(c, f) for c in clouds]) for f in _FIELDS))


def quat_multiply_wxyz(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a * b of (w, x, y, z) quaternions (torch, broadcasting)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        dim=-1,
    )


def quat_to_rotmat_wxyz(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices [..., 3, 3] from (w, x, y, z) quaternions, normalised first."""
    w, x, y, z = torch.nn.functional.normalize(q, dim=-1).unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(q.shape[:-1] + (3, 3))


def pose_cloud(cloud: GaussianCloud, body_poses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """World means [N, 3] and quats [N, 4] (w, x, y, z) of ``cloud`` with bodies at ``body_poses``.

    ``body_poses`` is [B, 7] (px, py, pz, qx, qy, qz, qw), B > every body id; static Gaussians
    (body -1) are returned as they are. Differentiable in ``body_poses`` (and in the cloud).
    """
    if not isinstance(body_poses, torch.Tensor) or body_poses.ndim != 2 or body_poses.shape[1] != 7:
        shape = tuple(body_poses.shape) if isinstance(body_poses, torch.Tensor) else type(body_poses).__name__
        raise DataError(f"body_poses must be a torch tensor [B, 7] (px,py,pz,qx,qy,qz,qw), got {shape}")
    if body_poses.shape[0] < cloud.num_bodies:
        raise DataError(f"body_poses has {body_poses.shape[0]} poses but the cloud uses body ids up to {cloud.num_bodies - 1}")
    if not torch.isfinite(body_poses).all():
        raise DataError("body_poses has non-finite values")
    if body_poses.shape[0] and bool((torch.linalg.norm(body_poses[:, 3:7], dim=-1) == 0).any()):
        raise DataError("body_poses has a zero quaternion")
    poses = body_poses.to(cloud.means.dtype)
    attached = cloud.body_ids >= 0
    index = cloud.body_ids.clamp(min=0)
    if poses.shape[0] == 0:  # every Gaussian static
        return cloud.means, cloud.quats
    q_body = torch.cat([poses[:, 6:7], poses[:, 3:6]], dim=-1)  # xyzw -> wxyz
    q_body = torch.nn.functional.normalize(q_body, dim=-1)
    R_body = quat_to_rotmat_wxyz(q_body)[index]  # per body, then gathered: the same numbers, not per Gaussian
    q_body = q_body[index]
    means_w = torch.einsum("nij,nj->ni", R_body, cloud.means) + poses[index, :3]
    quats_w = quat_multiply_wxyz(q_body, cloud.quats)
    mask = attached[:, None]
    return torch.where(mask, means_w, cloud.means), torch.where(mask, quats_w, cloud.quats)
