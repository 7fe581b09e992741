"""Virtual cameras: images of the twin's Gaussians from a static camera at a real camera's pose or from a camera on
the Franka's hand, rendered from a state (object poses, robot joints) alone, batched over states.

The scene: the objects' Gaussians posed on their bodies, the robot's (:class:`RobotAppearance`, FK at the joints;
static cameras only: the wrist camera rides on the hand, whose links would fill its view, and the Isaac Lab env's
wrist camera renders the objects alone too) and the empty cell behind them (the checkered table model the stand-in
and the sensor use). A batch of B states is rendered in one ``rasterization`` call. On the CPU backend each state's
scene goes in as one entry of the batch dimension, seen by its own camera only. With gsplat (CUDA) state b's
Gaussians are moved ``b * BATCH_SPACING`` along world x and its camera with them, so each camera sees only its own
state (the others are off-screen or beyond the far plane): the way that was checked on a GPU, kept there.
"""

from __future__ import annotations

import numpy as np
import torch

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.cell import CellCfg
from real_is_sim.correction.background import table_background
from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import GaussianCloud, pose_cloud
from real_is_sim.render.rasterize import gsplat_available, rasterization
from real_is_sim.robot.appearance import RobotAppearance
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.transforms import look_at_X_WC, viewmat_from_opengl
from real_is_sim.twin.tblock import block_cloud, block_geometry, table_plane

KINDS = ("static", "wrist")
# The wrist camera in the panda_hand frame (z along the fingers, down when the hand points down; the pusher's TCP at
# z = 0.1034): mounted 6 cm to the hand's +x side, looking down past the pusher at a point 20 cm beyond the TCP.
# Image up is the hand's +x, so the pusher sits in the lower half of the view. The Isaac Lab env mounts its wrist
# camera with these.
WRIST_CAMERA_EYE = (0.06, 0.0, 0.03)
WRIST_CAMERA_TARGET = (0.0, 0.0, 0.3)
WRIST_CAMERA_UP = (1.0, 0.0, 0.0)
X_HAND_WRIST = look_at_X_WC(WRIST_CAMERA_EYE, WRIST_CAMERA_TARGET, up=WRIST_CAMERA_UP)  # OpenGL axes
HAND_FRAME = "panda_hand"
BATCH_SPACING = 100.0  # m between the batched states' scenes: far beyond a camera's view of its own cell
FAR_PLANE = 10.0  # m: the cell is within 2 m of every camera


def scaled_intrinsics(K: np.ndarray, from_size: tuple[int, int], width: int, height: int) -> np.ndarray:
    """``K`` of a ``from_size`` = (W, H) image for a ``width`` x ``height`` one: the image scaled to the new width
    (pixels stay square, the horizontal field of view is kept), then cropped or padded to the new height about its
    centre. For the stand-in's cameras this is the camera ``ring_cameras`` builds at that size, as the Isaac Lab env's
    cameras are."""
    s = width / from_size[0]
    scaled = np.diag([s, s, 1.0]) @ np.asarray(K, dtype=np.float64)
    scaled[1, 2] += (height - from_size[1] * s) / 2
    return scaled


class VirtualCameras:
    """Renders states of ``cell`` from its static cameras (``cameras``: the real or stand-in cameras; default the
    stand-in's ring, whose first camera the Isaac Lab env also uses) and from the wrist camera."""

    def __init__(self, cell: CellCfg, cameras: list[CameraInfo] | None = None, render_robot: bool = True,
                 backend: str = "auto", spaced: bool | None = None):
        """``spaced``: a batch's scenes side by side in space instead of in the batch dimension (None: when gsplat
        renders, see the module doc)."""
        self.cell = cell
        self.cloud: GaussianCloud = block_cloud(cell)
        self.plane = tuple(float(v) for v in table_plane(cell.table))
        self.cameras = list(cameras) if cameras else ring_cameras(block_geometry(cell).start_pose[:3])
        # the robot model: its Gaussians in the static views (``render_robot``), its FK for the wrist camera
        self.appearance = RobotAppearance(base_pose=np.asarray(cell.robot.base_pose))
        self.render_robot = render_robot
        self.backend = backend
        self._spaced = (backend == "gsplat" or (backend == "auto" and gsplat_available())) if spaced is None else spaced
        self._backgrounds: dict[tuple, np.ndarray] = {}  # static cameras' empty cell, per (serial, W, H)
        self._copies: dict[int, GaussianCloud] = {}  # the objects' cloud repeated for a batch of B states
        # the wrist camera's intrinsics: the static camera's field of view (as the Isaac Lab env's cameras)
        self.wrist = CameraInfo("wrist", self.cameras[0].K, self.cameras[0].width, self.cameras[0].height, X_HAND_WRIST)
        self._hand_id = self.appearance.model.getFrameId(HAND_FRAME)

    def camera(self, serial: str | None) -> CameraInfo:
        if serial is None:
            return self.cameras[0]
        for c in self.cameras:
            if c.serial == serial:
                return c
        raise DataError(f"no static camera {serial!r}; cameras: {[c.serial for c in self.cameras]}")

    def hand_pose(self, robot_q: np.ndarray) -> np.ndarray:
        """X_W_hand (4x4) at arm joints ``robot_q`` (7,): the URDF's panda_hand frame on the robot's base."""
        import pinocchio as pin

        model, data = self.appearance.model, self.appearance.data
        q = np.zeros(model.nq)
        q[:7] = robot_q
        pin.framesForwardKinematics(model, data, q)
        return self.appearance.X_WBase @ data.oMf[self._hand_id].homogeneous

    def render(self, kind: str, object_poses: np.ndarray, robot_q: np.ndarray, width: int, height: int,
               camera: str | None = None) -> np.ndarray:
        """uint8 images ``[..., H, W, 3]`` of states ``object_poses`` (n_obj, 7) or [B, n_obj, 7] with robot joints
        (7,) or [B, 7], from the ``kind`` camera ("static": the static camera ``camera`` (serial; default the first),
        "wrist": on the hand)."""
        if kind not in KINDS:
            raise DataError(f"kind must be one of {KINDS}, got {kind!r}")
        poses = np.asarray(object_poses, dtype=np.float64)
        qs = np.asarray(robot_q, dtype=np.float64)
        single = poses.ndim == 2
        poses, qs = (poses[None], qs[None]) if single else (poses, qs)
        if poses.ndim != 3 or poses.shape[2] != 7 or qs.shape != (len(poses), 7):
            raise DataError(f"object_poses must be (n_obj, 7) or [B, n_obj, 7] and robot_q (7,) or [B, 7] alike; got "
                            f"{np.shape(object_poses)} and {np.shape(robot_q)}")
        if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
            raise DataError(f"width and height must be positive integers, got {width!r} x {height!r}")
        if not (np.all(np.isfinite(poses)) and np.all(np.isfinite(qs))):
            raise DataError("object_poses and robot_q must be finite")
        base = self.camera(camera) if kind == "static" else self.wrist
        K = scaled_intrinsics(base.K, base.resolution, width, height)
        X_WCs = [base.X_WC if kind == "static" else self.hand_pose(q) @ base.X_WC for q in qs]
        static_serial = base.serial if kind == "static" else None
        scenes = self._scenes(poses, qs, with_robot=self.render_robot and static_serial is not None)
        backgrounds = np.stack([self._background(static_serial, X_WC, K, width, height) for X_WC in X_WCs])
        with torch.no_grad():
            if self._spaced:
                images = self._rasterize_spaced(scenes, X_WCs, K, width, height, backgrounds)
            else:  # one call, each state's scene seen by its own camera (the batch dimension)
                viewmats = np.stack([viewmat_from_opengl(X_WC)[None] for X_WC in X_WCs])  # [B, 1, 4, 4]
                images, _, _ = rasterization(
                    *scenes, torch.as_tensor(viewmats, dtype=torch.float32),
                    torch.as_tensor(np.repeat(K[None, None], len(poses), 0), dtype=torch.float32), width, height,
                    backgrounds=torch.as_tensor(backgrounds[:, None]), backend=self.backend, far_plane=FAR_PLANE)
                images = images[:, 0]
        images = (images.cpu().clamp(0, 1).numpy() * 255.0 + 0.5).astype(np.uint8)
        return images[0] if single else images

    def _scenes(self, poses: np.ndarray, qs: np.ndarray, with_robot: bool) -> list[torch.Tensor]:
        """means, quats, scales, opacities, colours ``[B, N, ...]`` of the B states: the objects' Gaussians on their
        poses (one posing of B copies of the cloud) and the robot's at its joints."""
        B, n_objects = poses.shape[:2]
        copies = self._copies.get(B)
        if copies is None:  # B copies of the objects' cloud, copy b on bodies b * n_objects + body
            cloud = self.cloud
            offsets = (torch.arange(B) * n_objects).repeat_interleave(len(cloud))
            body_ids = cloud.body_ids.repeat(B)
            copies = GaussianCloud(*(t.repeat(B, *([1] * (t.ndim - 1))) for t in (cloud.means, cloud.quats,
                                     cloud.scales, cloud.opacities, cloud.colors)),
                                   torch.where(body_ids >= 0, body_ids + offsets, body_ids))
            self._copies = {B: copies}
        means, quats = pose_cloud(copies, torch.as_tensor(poses.reshape(-1, 7), dtype=torch.float32))
        parts = [(means.reshape(B, -1, 3), quats.reshape(B, -1, 4), self.cloud)]
        if with_robot:
            robot = self.appearance
            parts.append((robot.means(qs), robot.quats.expand(B, -1, 4), robot))
        shared = [[getattr(source, field).expand(B, *getattr(source, field).shape) for _, _, source in parts]
                  for field in ("scales", "opacities", "colors")]  # the same in every state
        return [torch.cat([m for m, _, _ in parts], 1), torch.cat([q for _, q, _ in parts], 1),
                *(torch.cat(field, 1) for field in shared)]

    def _rasterize_spaced(self, scenes, X_WCs, K, width, height, backgrounds) -> torch.Tensor:
        """gsplat: the B states' scenes side by side, ``b * BATCH_SPACING`` along world x, and each camera moved with
        its scene, in one call."""
        B, N = scenes[0].shape[:2]
        shift = torch.zeros(B, 1, 3)
        shift[:, 0, 0] = torch.arange(B) * BATCH_SPACING
        viewmats = []
        for b, X_WC in enumerate(X_WCs):
            shifted = X_WC.copy()
            shifted[0, 3] += b * BATCH_SPACING
            viewmats.append(viewmat_from_opengl(shifted))
        images, _, _ = rasterization(
            (scenes[0] + shift).reshape(B * N, 3), *(t.reshape(B * N, *t.shape[2:]) for t in scenes[1:]),
            torch.as_tensor(np.stack(viewmats), dtype=torch.float32),
            torch.as_tensor(np.repeat(K[None], B, 0), dtype=torch.float32), width, height,
            backgrounds=torch.as_tensor(backgrounds), backend=self.backend, far_plane=FAR_PLANE)
        return images

    def _background(self, static_serial: str | None, X_WC: np.ndarray, K: np.ndarray, width: int, height: int) -> np.ndarray:
        """The empty cell: fixed for a static camera (cached), per state for the wrist camera."""
        key = (static_serial, width, height)
        if static_serial is not None and key in self._backgrounds:
            return self._backgrounds[key]
        image = table_background(K, viewmat_from_opengl(X_WC), width, height, self.plane)
        if static_serial is not None:
            self._backgrounds[key] = image
        return image


def cameras_from_static(static: dict) -> list[CameraInfo]:
    """The static cameras a dataset stored (``meta/real_is_sim.json``: serial, width, height, K, X_WC)."""
    try:
        return [CameraInfo(c["serial"], np.asarray(c["K"]), int(c["width"]), int(c["height"]), np.asarray(c["X_WC"]))
                for c in static["cameras"]]
    except (KeyError, TypeError) as exc:
        raise DataError(f"the dataset's static state has no usable cameras: {exc}") from None


_DEFAULT: dict[str, VirtualCameras] = {}


def render_virtual(kind: str, object_poses: np.ndarray, robot_q: np.ndarray, width: int, height: int,
                   cell: CellCfg | None = None, camera: str | None = None) -> np.ndarray:
    """:meth:`VirtualCameras.render` for ``cell`` (default: the default task's cell), its renderer kept between calls."""
    from real_is_sim.config import to_yaml
    from real_is_sim.task import DEFAULT_TASK, import_task

    if cell is None:
        cell = import_task(DEFAULT_TASK).load_cfg("pusht.yaml")
    key = to_yaml(cell)
    if key not in _DEFAULT:
        _DEFAULT[key] = VirtualCameras(cell)
    return _DEFAULT[key].render(kind, object_poses, robot_q, width, height, camera=camera)
