"""What the Franka looks like to a camera: Gaussians on its links' collision surfaces, posed by FK.

The robot hides the block in the real views, so the visual-force sensor renders it as a non-optimised
occluder, and the stand-in real world renders it into its camera frames. Its pose comes from the known
joint positions (pinocchio forward kinematics on the same example-robot-data URDF as the twin).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from real_is_sim.gaussians.cloud import STATIC_WORLD, GaussianCloud
from real_is_sim.robot.franka import ARM_DOF, description_share_dir, panda_urdf_path
from real_is_sim.transforms import pose_to_matrix

# Links near the table: the ones that can come between a camera and the block in PushT.
DEFAULT_LINKS = ("panda_link5", "panda_link6", "panda_link7", "panda_hand", "panda_leftfinger", "panda_rightfinger")


@dataclass
class RobotAppearanceCfg:
    links: tuple[str, ...] = DEFAULT_LINKS
    spacing: float = 0.012  # m between neighbouring Gaussians on a link surface
    scale: float = 0.008  # isotropic standard deviation, m
    opacity: float = 0.95
    color: tuple[float, float, float] = (0.85, 0.85, 0.83)  # Franka white
    seed: int = 0
    # A tool the gripper holds that the URDF lacks (the real PushT cell's pusher stick): a cylinder along the hand's
    # z axis, (start, end, radius) in m from the panda_hand frame; None: no tool.
    hand_stick: tuple[float, float, float] | None = None


def cylinder_surface(start: float, end: float, radius: float, spacing: float) -> np.ndarray:
    """Points ``(N, 3)`` about ``spacing`` apart on a cylinder of ``radius`` along z from ``start`` to ``end``."""
    rings = max(2, int(np.ceil((end - start) / spacing)) + 1)
    around = max(6, int(np.ceil(2 * np.pi * radius / spacing)))
    z, angle = np.meshgrid(np.linspace(start, end, rings), np.linspace(0, 2 * np.pi, around, endpoint=False), indexing="ij")
    return np.stack([radius * np.cos(angle).ravel(), radius * np.sin(angle).ravel(), z.ravel()], axis=1)


class RobotAppearance:
    def __init__(self, cfg: RobotAppearanceCfg | None = None, base_pose: np.ndarray | None = None):
        import pinocchio as pin
        import trimesh

        self.cfg = cfg or RobotAppearanceCfg()
        urdf = str(panda_urdf_path())
        self._pin = pin
        self.model = pin.buildModelFromUrdf(urdf)
        geom = pin.buildGeomFromUrdf(self.model, urdf, pin.GeometryType.COLLISION, package_dirs=[str(description_share_dir())])
        self.data = self.model.createData()
        self.X_WBase = pose_to_matrix(np.array([0, 0, 0, 0, 0, 0, 1.0]) if base_pose is None else base_pose)
        rng = np.random.default_rng(self.cfg.seed)
        points, frames = [], []
        for obj in geom.geometryObjects:
            link = self.model.frames[obj.parentFrame].name
            if link not in self.cfg.links:
                continue
            if obj.meshPath and obj.meshPath.endswith((".stl", ".dae", ".obj")):
                mesh = trimesh.load(obj.meshPath, force="mesh")
                mesh.apply_scale(np.asarray(obj.meshScale))
            else:
                mesh = trimesh.creation.box(extents=2 * np.asarray(obj.geometry.halfSide))
            count = max(8, int(mesh.area / self.cfg.spacing**2))
            local, _ = trimesh.sample.sample_surface(mesh, count, seed=int(rng.integers(1 << 31)))
            placement = obj.placement.homogeneous  # geometry in its parent frame
            local_h = np.c_[local, np.ones(len(local))] @ placement.T
            points.append(local_h[:, :3])
            frames.append(np.full(len(local), obj.parentFrame))
        if self.cfg.hand_stick is not None:
            stick = cylinder_surface(*self.cfg.hand_stick, spacing=self.cfg.spacing)
            points.append(stick)
            frames.append(np.full(len(stick), self.model.getFrameId("panda_hand")))
        self._local = np.concatenate(points)
        frame_ids = np.concatenate(frames)
        # each link frame and which Gaussians ride on it, found once: means() runs every tick
        self._frames = [(int(f), frame_ids == f) for f in np.unique(frame_ids)]
        n = len(self._local)
        c = self.cfg
        self.scales = torch.full((n, 3), c.scale)
        self.opacities = torch.full((n,), c.opacity)
        self.colors = torch.tensor(c.color, dtype=torch.float32).expand(n, 3).contiguous()
        self.quats = torch.tensor([1.0, 0.0, 0.0, 0.0]).expand(n, 4).contiguous()

    def __getstate__(self) -> dict:
        # pinocchio's model does not pickle: a copy (e.g. for the sensor's worker process) rebuilds it from the URDF
        return {k: v for k, v in self.__dict__.items() if k not in ("_pin", "model", "data")}

    def __setstate__(self, state: dict) -> None:
        import pinocchio as pin

        self.__dict__.update(state)
        self._pin = pin
        self.model = pin.buildModelFromUrdf(str(panda_urdf_path()))
        self.data = self.model.createData()

    def __len__(self) -> int:
        return len(self._local)

    def means(self, q_arm: np.ndarray, finger_width: float = 0.0) -> torch.Tensor:
        """World positions ``(N, 3)`` of the robot's Gaussians at arm joints ``q_arm (7,)``; for joints ``(B, 7)``,
        ``(B, N, 3)`` (one FK per state, the Gaussians of all states posed at once)."""
        pin = self._pin
        q_arm = np.asarray(q_arm, dtype=np.float64)
        qs = np.atleast_2d(q_arm)  # [B, 7]
        X_W_frames = np.empty((len(qs), len(self._frames), 4, 4))  # [B, F, 4, 4]
        for b, q_b in enumerate(qs):
            q = np.zeros(self.model.nq)
            q[:ARM_DOF] = q_b
            q[ARM_DOF:] = finger_width / 2
            pin.forwardKinematics(self.model, self.data, q)
            pin.updateFramePlacements(self.model, self.data)
            for k, (frame_id, _) in enumerate(self._frames):
                X_W_frames[b, k] = self.X_WBase @ self.data.oMf[frame_id].homogeneous
        out = np.empty((len(X_W_frames), *self._local.shape))
        for k, (_, sel) in enumerate(self._frames):
            out[:, sel] = self._local[sel] @ X_W_frames[:, k, :3, :3].transpose(0, 2, 1) + X_W_frames[:, k, None, :3, 3]
        return torch.as_tensor(out if q_arm.ndim == 2 else out[0], dtype=torch.float32)

    def cloud(self, q_arm: np.ndarray) -> GaussianCloud:
        """The robot at ``q_arm`` as a static (world-frame, ``body_ids == -1``) cloud: an occluder."""
        body_ids = torch.full((len(self),), STATIC_WORLD, dtype=torch.int64)
        return GaussianCloud(self.means(q_arm), self.quats, self.scales, self.opacities, self.colors, body_ids)
