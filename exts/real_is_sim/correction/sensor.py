"""The visual-force sensor: render, compare with the real frames, optimise Gaussian copies, output wrenches.

Each control tick (Embodied Gaussians, steps 1-3 of the loop):
1. pose the object Gaussians on the twin's current body poses and render them (with the robot and any
   other fixed Gaussians as non-optimised occluders) over each camera's background image;
2. minimise the photometric error against the latest frames for a few Adam iterations, moving *copies*
   of the object Gaussians' means and quats (the twin's bodies are not touched);
3. turn each Gaussian's displacement into a force on its body (:mod:`real_is_sim.correction.wrench`).
The copies are thrown away at the next tick: the Gaussians are re-posed on the bodies after physics
stepped (step 5). Adam starts afresh each tick: moments carried across frames overshoot (measured in
docs/correction.md).

Tracking health: the residual is the mean colour error under each object's Gaussian centres at the twin's
pose; confidence falls with it. "Lost" is judged against how well the model explains this object's frames while it
is tracked: each object keeps a running baseline of its residual (an exponential mean of the ticks it was not bad, falling in
``lost_baseline_ticks``, rising in ``lost_baseline_rise_ticks``, started at its first reading: the initial lock), and an object whose residual stays above
``max(lost_residual, lost_ratio * baseline)`` for ``lost_after_ticks`` ticks is flagged lost; the first
``lost_after_ticks`` readings after the lock are judged by ``lost_residual`` alone (a twin that starts far off gets
one re-localisation, which the loop keeps only if it explains the frames better). An appearance gap
(a background estimate, a scan's colours) raises the baseline and with it the threshold; a block that
left the twin's pose multiplies its residual. The residual is taken after one least-squares gain per camera and colour
channel (``residual_exposure_gain``): an exposure or white-balance drift does not raise it. ``lost_ratio=None``: the absolute threshold alone (the old rule).
:meth:`VisualForceSensor.photometric_losses` scores whole poses (a re-localiser's candidate against the tracked pose)
with the sensor's own renderer and loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import torch

from real_is_sim.correction.wrench import displacement_wrench
from real_is_sim.errors import ConfigError
from real_is_sim.gaussians.cloud import STATIC_WORLD, GaussianCloud, pose_cloud, quat_to_rotmat_wxyz
from real_is_sim.render.clouds import render_clouds
from real_is_sim.render.rasterize import gsplat_available
from real_is_sim.render.semantics import EPS2D

LOSSES = ("l1", "l2")


@dataclass
class VisualForceSensorCfg:
    iterations: int = 3
    lr_means: float = 0.0015
    lr_quats: float = 0.001
    kp: float = 4.0  # N/m per Gaussian (see wrench.py)
    # None: every Gaussian pulls with kp, so a body's visual stiffness grows with how many Gaussians model it. A
    # count n: each Gaussian of a body with N of them pulls with kp * n / N (the stiffness of n Gaussians at kp),
    # so a finer scan does not make a stiffer spring. The scanned T-block (498 Gaussians) at kp 10 per Gaussian
    # was 2.4x stiffer than the procedural one (108) in translation, > 2.8x in yaw, and rang at the 60 Hz tick
    # (+-5 mm, 2.4 deg from a perfect start: docs/fidelity.md).
    kp_reference_count: Optional[int] = None
    max_force: float = 5.0  # N, per body
    max_torque: float = 0.2  # N m, per body
    # Normal of the surface the objects slide on: the wrench is kept planar (force in the surface, torque about
    # the normal). None: a full 6-D wrench.
    plane_normal: Optional[List[float]] = None
    # Per-pixel colour error, averaged over the pixels of all views. "l2": its gradient grows with the pose
    # error, so the visual force does too; "l1": the gradient's size is the same for any error (a relay: the
    # twin rings around the observed pose; measured in docs/correction.md).
    loss: str = "l2"
    # Adam's epsilon sets the gradient size below which a Gaussian's step is proportional to its gradient
    # (above it, ~lr per iteration): with "l2" that makes the force proportional to small errors, saturated
    # for large ones. torch's default 1e-8 turns every gradient into a full lr step (a relay again).
    adam_eps: float = 1e-4
    # Robust loss: a pixel whose colour error exceeds outlier_threshold gets no gradient, so pixels the twin
    # cannot explain (an unmodelled robot arm, a hand) do not pull the objects. None: plain loss.
    outlier_threshold: Optional[float] = None
    backend: str = "auto"
    # cpu backend: tiles composited in this many threads. 1: on this 2-core machine 2 threads made the stand-in
    # loop's sensor tick slower (44.8 vs 42.3 ms median over 120 ticks each, interleaved), though 1.27x faster
    # on bench_render's larger windows without occluders (docs/render.md).
    render_threads: int = 1
    residual_scale: float = 0.1  # confidence = exp(-residual / residual_scale)
    lost_residual: float = 0.06  # tracked: ~0.01; a block that is not where the twin has it: ~0.12
    lost_after_ticks: int = 10
    # Relative lost rule (see the module doc): bad = residual > max(lost_residual, lost_ratio * baseline). Tracked
    # with the twin's own appearance the residual is ~0.01-0.02 (the absolute floor decides); with the realistic
    # stand-in's appearance a tracked block sits at ~0.06-0.1 (docs/fidelity.md). None: the absolute rule alone.
    lost_ratio: Optional[float] = 2.0
    # Time constants (ticks) of the residual's running baseline: it follows a falling residual (converging) in
    # lost_baseline_ticks, a rising one only in lost_baseline_rise_ticks, so a twin that slowly falls behind (a push
    # it cannot keep up with) is still flagged, and re-localised.
    lost_baseline_ticks: int = 30
    lost_baseline_rise_ticks: int = 600
    # The residual compares the frames with the render after one least-squares gain per camera and colour channel
    # (an exposure / white-balance drift is not a tracking error). Only the health residual: the loss is unchanged.
    residual_exposure_gain: bool = True
    # A re-localiser's candidate replaces the tracked pose only if its photometric loss is below
    # (1 - relocalize_min_gain) x the tracked pose's (photometric_losses; the loop's _recover).
    relocalize_min_gain: float = 0.1
    # Render only a window around the objects (their projected 3-sigma extent plus this margin, pixels): the
    # rest of the image holds no Gaussian of theirs, so it carries no gradient. None renders whole images.
    crop_margin_px: Optional[int] = 12
    # Render and compare at 1/render_downscale of the camera resolution (frames and backgrounds area-averaged,
    # intrinsics scaled): about render_downscale^2 fewer (pixel, Gaussian) pairs, for a CPU that cannot afford
    # full-resolution windows at 60 Hz. The loss stays a per-pixel mean, so kp and adam_eps keep their meaning, and
    # the 2D low-pass stays 0.3 px^2 of the camera's pixels.
    render_downscale: int = 1
    # cpu backend: the occluders (the robot) rendered once per update into a per-pixel layer that each iteration
    # composites at its depth, instead of compositing their Gaussians with the objects' in every iteration and its
    # backward pass. Exact where the robot and an object do not interleave in depth at a pixel (docs/render.md).
    occluder_layer: bool = True

    def __post_init__(self):
        if self.iterations < 0:
            raise ConfigError(f"iterations must be >= 0, got {self.iterations}")
        for name in ("lr_means", "lr_quats", "kp", "max_force", "max_torque", "residual_scale", "lost_residual", "adam_eps"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.loss not in LOSSES:
            raise ConfigError(f"unknown loss {self.loss!r}; choose one of {LOSSES}")
        if self.plane_normal is not None and (len(self.plane_normal) != 3 or not np.linalg.norm(self.plane_normal) > 0):
            raise ConfigError(f"plane_normal must be a non-zero 3-vector, got {self.plane_normal}")
        if self.kp_reference_count is not None and not (isinstance(self.kp_reference_count, int) and self.kp_reference_count >= 1):
            raise ConfigError(f"kp_reference_count must be None or an integer >= 1, got {self.kp_reference_count!r}")
        if self.lost_ratio is not None and not self.lost_ratio >= 1.0:
            raise ConfigError(f"lost_ratio must be None or >= 1, got {self.lost_ratio}")
        if self.lost_baseline_ticks < 1 or self.lost_baseline_rise_ticks < 1:
            raise ConfigError(f"lost_baseline_ticks and lost_baseline_rise_ticks must be >= 1, got "
                              f"{self.lost_baseline_ticks}, {self.lost_baseline_rise_ticks}")
        if not 0.0 <= self.relocalize_min_gain < 1.0:
            raise ConfigError(f"relocalize_min_gain must be in [0, 1), got {self.relocalize_min_gain}")
        if self.lost_after_ticks < 1:
            raise ConfigError(f"lost_after_ticks must be >= 1, got {self.lost_after_ticks}")
        if self.render_threads < 1:
            raise ConfigError(f"render_threads must be >= 1, got {self.render_threads}")
        if not isinstance(self.render_downscale, int) or self.render_downscale < 1:
            raise ConfigError(f"render_downscale must be an integer >= 1, got {self.render_downscale!r}")


@dataclass
class SensorCamera:
    """One calibrated view as the renderer needs it (OpenCV axes) and the empty scene seen from it."""

    name: str
    viewmat: np.ndarray  # (4, 4) world -> camera, OpenCV axes
    K: np.ndarray  # (3, 3)
    width: int
    height: int
    background: np.ndarray  # (H, W, 3) float in [0, 1], or (3,) constant colour

    @classmethod
    def from_info(cls, info, background) -> "SensorCamera":
        """From a :class:`real_is_sim.cameras.CameraInfo` (OpenGL ``X_WC``) and the empty scene's image."""
        return cls(info.serial, info.viewmat_opencv(), info.K, info.width, info.height, np.asarray(background))


def _project(viewmats: torch.Tensor, Ks: torch.Tensor, points: torch.Tensor):
    """Pixel coordinates ``u, v`` and depths ``(C, N)`` of world points in pinhole cameras (OpenCV axes)."""
    cam = torch.einsum("cij,nj->cni", viewmats[:, :3, :3], points) + viewmats[:, None, :3, 3]
    depth = cam[..., 2]
    z = depth.clamp_min(1e-3)
    return Ks[:, None, 0, 0] * cam[..., 0] / z + Ks[:, None, 0, 2], Ks[:, None, 1, 1] * cam[..., 1] / z + Ks[:, None, 1, 2], depth


@dataclass
class _Views:
    """The cameras of one tick as rendered: possibly cropped windows of the full images, possibly downscaled."""

    viewmats: torch.Tensor
    Ks: torch.Tensor  # principal points shifted into the windows, scaled by 1 / downscale
    backgrounds: torch.Tensor | None
    offsets: list[tuple[int, int]]  # (x0, y0) of each window in its full image
    size: tuple[int, int]  # window (width, height) in full-resolution pixels, multiples of downscale
    downscale: int = 1
    device: torch.device = torch.device("cpu")  # where the renderer's images live

    @property
    def render_size(self) -> tuple[int, int]:
        return self.size[0] // self.downscale, self.size[1] // self.downscale

    def crop(self, images) -> torch.Tensor:
        """Full-resolution images (HxWx3 numpy arrays, uint8 or float in [0, 1]) -> the windows as rendered,
        float32 (C, h, w, 3) on the render device. Only the windows are converted and moved: the rest of a frame
        is never touched."""
        w, h = self.size
        windows = np.stack([im[y0:y0 + h, x0:x0 + w] for im, (x0, y0) in zip(images, self.offsets)])
        windows = windows.astype(np.float32) / np.float32(255.0) if windows.dtype == np.uint8 else windows.astype(np.float32)
        windows = torch.from_numpy(windows).to(self.device)
        if self.downscale == 1:
            return windows
        pooled = torch.nn.functional.avg_pool2d(windows.permute(0, 3, 1, 2), self.downscale)
        return pooled.permute(0, 2, 3, 1).contiguous()


@dataclass
class SensorReading:
    wrench: np.ndarray  # (B, 6) force, torque in world frame about each body's COM
    loss_before: float
    loss_after: float
    residual: np.ndarray  # (B,) mean colour error under each object's Gaussians; nan where none is in view
    confidence: np.ndarray  # (B,) in [0, 1]
    lost: np.ndarray  # (B,) bool
    cameras_used: list[str] = field(default_factory=list)
    cameras_rejected: dict[str, str] = field(default_factory=dict)  # name -> reason (missing, non-finite, shape)
    # (N, 3) the optimised Gaussian means (world) the springs pull towards; None when no frame was usable. A loop
    # that applies the reading later recomputes the springs from the twin's pose then (held_springs).
    targets: torch.Tensor | None = None

    @property
    def ok(self) -> bool:
        return bool(self.cameras_used) and not self.lost.any()


class VisualForceSensor:
    def __init__(self, cfg: VisualForceSensorCfg, cloud: GaussianCloud, cameras: list[SensorCamera], body_com: np.ndarray):
        """``cloud``: the objects' Gaussians in their body frames (``body_ids`` index the twin's objects);
        ``body_com``: ``(B, 3)`` centres of mass in the body frames."""
        if not cameras:
            raise ConfigError("VisualForceSensor needs at least one camera")
        sizes = {(c.width, c.height) for c in cameras}
        if len(sizes) != 1:
            raise ConfigError(f"all cameras must share one resolution, got {sorted(sizes)}")
        self.cfg = cfg
        self.cloud = cloud
        self.cameras = cameras
        self.width, self.height = sizes.pop()
        self.body_com = torch.as_tensor(np.asarray(body_com), dtype=torch.float32)
        self.num_bodies = self.body_com.shape[0]
        self._viewmats = torch.as_tensor(np.stack([c.viewmat for c in cameras]), dtype=torch.float32)
        self._Ks = torch.as_tensor(np.stack([c.K for c in cameras]), dtype=torch.float32)
        self._backgrounds = np.stack([self._background_image(c) for c in cameras])  # (C, H, W, 3) float32
        self._max_scales = self.cloud.scales.detach().max(dim=1).values.numpy()  # window reach of each Gaussian
        self._plane_normal = None if cfg.plane_normal is None else torch.tensor(cfg.plane_normal, dtype=torch.float32)
        self._kp = self._spring_stiffness()
        self._bad_ticks = np.zeros(self.num_bodies, dtype=int)
        self._baseline = np.full(self.num_bodies, np.nan)  # running residual while tracked; nan: no reading yet
        self._readings = np.zeros(self.num_bodies, dtype=int)  # visible readings since the baseline was set
        if cfg.backend == "gsplat" and not gsplat_available():
            raise ConfigError("VisualForceSensor backend 'gsplat' needs CUDA and the gsplat package; use 'cpu' or 'auto'")
        # gsplat renders on CUDA: the frames' windows and backgrounds go there once per tick, not per iteration
        on_gpu = cfg.backend == "gsplat" or (cfg.backend == "auto" and gsplat_available())
        self._device = torch.device("cuda" if on_gpu else "cpu")

    def _background_image(self, camera: SensorCamera) -> np.ndarray:
        bg = np.asarray(camera.background, dtype=np.float32)
        if bg.shape == (3,):
            bg = np.broadcast_to(bg, (self.height, self.width, 3))
        if bg.shape != (self.height, self.width, 3):
            raise ConfigError(f"camera {camera.name}: background must be (3,) or ({self.height}, {self.width}, 3), got {tuple(bg.shape)}")
        return bg

    # ------------------------------------------------------------------ the tick
    def update(self, body_poses: np.ndarray, frames: list[np.ndarray | None], occluders: GaussianCloud | None = None,
               current_poses: np.ndarray | None = None) -> SensorReading:
        """One tick. ``body_poses``: ``(B, 7)`` twin poses (xyzw) when the frames were exposed; ``frames``: one
        image per camera (``HxWx3`` uint8 or float in [0, 1]) or None where the camera delivered nothing;
        ``occluders``: a static (world-frame) cloud rendered with the objects but never optimised, e.g. the robot
        at its joints; ``current_poses``: the twin's poses now, if it moved since the exposure. The optimised
        Gaussians say where the objects were *then*; each Gaussian's spring pulls from where it is *now*, so the
        twin's motion since the exposure is not corrected twice (without it, camera latency makes the
        correction overshoot and ring: measured in docs/correction.md)."""
        poses = self._checked_poses(body_poses, "body_poses")
        now = poses if current_poses is None else self._checked_poses(current_poses, "current_poses")
        targets, used, rejected = self._accept_frames(frames)
        zero = np.zeros((self.num_bodies, 6))
        if not used:
            self._bad_ticks += 1  # no evidence: the twin runs on physics alone and health degrades
            lost = self._bad_ticks >= self.cfg.lost_after_ticks
            return SensorReading(zero, np.nan, np.nan, np.full(self.num_bodies, np.nan), np.zeros(self.num_bodies), lost, [], rejected)

        means0, quats0 = pose_cloud(self.cloud, poses)
        view = self._views([i for i, c in enumerate(self.cameras) if c.name in used], means0.detach())
        targets = view.crop(targets)
        means = means0.detach().clone().requires_grad_(True)
        quats = quats0.detach().clone().requires_grad_(True)
        adam = torch.optim.Adam([{"params": [means], "lr": self.cfg.lr_means}, {"params": [quats], "lr": self.cfg.lr_quats}],
                                eps=self.cfg.adam_eps)
        occluders = self._occluders_for(occluders, view)
        losses = []
        for it in range(max(self.cfg.iterations, 1)):
            image = self._render(means, quats, occluders, view)
            loss = self._photometric_loss(image, targets)
            losses.append(float(loss.detach()))
            if it == 0:
                residual = self._residual(image.detach(), targets, means0.detach(), view)
            if self.cfg.iterations == 0:
                break
            adam.zero_grad()
            loss.backward()
            adam.step()
        means_now = means0.detach() if current_poses is None else pose_cloud(self.cloud, now)[0].detach()
        wrench = self._springs(means_now, means.detach(), now)
        visible = np.isfinite(residual)
        lock = visible & ~np.isfinite(self._baseline)
        self._baseline[lock] = residual[lock]  # the initial lock sets it
        self._readings = np.where(lock, 0, self._readings + visible)
        bad = visible & (residual > self.lost_threshold())
        self._update_baseline(residual, visible & ~bad & ~lock)
        self._bad_ticks = np.where(bad, self._bad_ticks + 1, np.where(visible, 0, self._bad_ticks))
        confidence = np.where(visible, np.exp(-np.nan_to_num(residual) / max(self.cfg.residual_scale, 1e-9)), 0.0)
        lost = self._bad_ticks >= self.cfg.lost_after_ticks
        return SensorReading(wrench.double().numpy(), losses[0], losses[-1], residual, confidence, lost, used, rejected,
                             means.detach())

    def held_springs(self, targets: torch.Tensor, current_poses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A reading applied after the twin moved on (the pipelined loop): ``(B, 6)`` the springs from the Gaussians on
        the bodies at ``current_poses (B, 7)`` to the reading's ``targets``, as :meth:`update` computes its wrench
        (identical for the same poses), and ``(B,)`` metres: each body's mean spring length (0 for a body without
        Gaussians); one posing of the cloud for both."""
        now = self._checked_poses(current_poses, "current_poses")
        means_now = pose_cloud(self.cloud, now)[0].detach()
        lengths = (targets - means_now).double().norm(dim=1)
        ids = self.cloud.body_ids.long()
        mean_lengths = np.array([lengths[ids == b].mean().item() if (ids == b).any() else 0.0
                                 for b in range(self.num_bodies)])
        return self._springs(means_now, targets, now).double().numpy(), mean_lengths

    def _springs(self, means_now: torch.Tensor, targets: torch.Tensor, poses_now: torch.Tensor) -> torch.Tensor:
        return displacement_wrench(means_now, targets, self.cloud.body_ids, self._com_world(poses_now),
                                   self._kp, self.cfg.max_force, self.cfg.max_torque, self._plane_normal)

    def _spring_stiffness(self):
        """``kp``, or with ``kp_reference_count`` ``(N,)``: kp * n / (Gaussians of each one's body)."""
        if self.cfg.kp_reference_count is None:
            return self.cfg.kp
        ids = self.cloud.body_ids.long()
        attached = (ids >= 0) & (ids < self.num_bodies)
        counts = torch.bincount(ids[attached], minlength=self.num_bodies).clamp_min(1).to(torch.float32)
        kp = torch.zeros(len(ids), dtype=torch.float32)
        kp[attached] = self.cfg.kp * self.cfg.kp_reference_count / counts[ids[attached]]
        return kp

    def lost_threshold(self) -> np.ndarray:
        """``(B,)``: the residual above which a tick counts as bad for each object (module doc)."""
        floor = np.full(self.num_bodies, self.cfg.lost_residual)
        if self.cfg.lost_ratio is None:
            return floor
        relative = np.fmax(floor, self.cfg.lost_ratio * self._baseline)  # fmax: a nan baseline leaves the floor
        # the first lost_after_ticks readings after the lock are judged by the floor alone: a twin that starts far off
        # is flagged once and re-localised (the loop keeps the candidate only if it explains the frames better)
        return np.where(self._readings < self.cfg.lost_after_ticks, floor, relative)

    def _update_baseline(self, residual: np.ndarray, tracked: np.ndarray) -> None:
        rate = np.where(residual < self._baseline, 1.0 / self.cfg.lost_baseline_ticks, 1.0 / self.cfg.lost_baseline_rise_ticks)
        self._baseline[tracked] = ((1.0 - rate) * self._baseline + rate * residual)[tracked]

    @property
    def residual_baseline(self) -> np.ndarray:
        return self._baseline.copy()

    def warm_up(self) -> None:
        """One render, backward pass and Adam step of the objects in the first camera, nothing kept: the renderer's
        kernels load and torch's autograd and optimiser start here, not in the first update (a fresh worker process
        otherwise spends 1.4 s on its first update, most of it torch's imports at the first Adam step;
        docs/realtime.md). Changes no state."""
        rotation, translation = self._viewmats[0, :3, :3], self._viewmats[0, :3, 3]
        ahead = rotation.T @ (torch.tensor([0.0, 0.0, 0.5]) - translation)  # 0.5 m in front of the first camera
        means = (self.cloud.means - self.cloud.means.mean(dim=0) + ahead).detach().requires_grad_(True)
        view = self._views([0], means.detach())
        view.backgrounds = None
        adam = torch.optim.Adam([means], lr=self.cfg.lr_means, eps=self.cfg.adam_eps)
        self._render(means, self.cloud.quats, None, view).sum().backward()
        adam.step()

    def reset_health(self) -> None:
        """Forget the bad ticks counted so far (after the twin was reset or re-localised). The residual's baseline
        is the object's in this session and stays: a re-localised pose that explains the frames worse than the
        object was explained while tracked is flagged lost again."""
        self._bad_ticks[:] = 0

    @torch.no_grad()
    def photometric_losses(self, candidates: list[np.ndarray], frames: list[np.ndarray | None],
                           occluders: GaussianCloud | None = None) -> np.ndarray:
        """The sensor's photometric loss of each ``(B, 7)`` pose set in ``candidates`` against ``frames`` (one per
        camera, None where missing), rendered as :meth:`update` renders (same backgrounds, occluders, loss): one
        window covering every candidate's Gaussians, so the losses compare whole images. nan without a usable
        frame."""
        targets, used, _ = self._accept_frames(frames)
        if not used:
            return np.full(len(candidates), np.nan)
        posed = [pose_cloud(self.cloud, self._checked_poses(p, "candidate poses")) for p in candidates]
        view = self._views([i for i, c in enumerate(self.cameras) if c.name in used],
                           torch.cat([means for means, _ in posed]))
        targets = view.crop(targets)
        occluders = self._occluders_for(occluders, view)
        return np.array([float(self._photometric_loss(self._render(m, q, occluders, view), targets))
                         for m, q in posed])

    # ------------------------------------------------------------------ pieces
    def _accept_frames(self, frames):
        """The usable frames as they came (numpy, converted to float only in the windows later), their cameras'
        names, and why the others were rejected."""
        if len(frames) != len(self.cameras):
            raise ValueError(f"expected {len(self.cameras)} frames (one per camera, None if missing), got {len(frames)}")
        targets, used, rejected = [], [], {}
        for camera, frame in zip(self.cameras, frames):
            if frame is None:
                rejected[camera.name] = "missing"
                continue
            image = np.asarray(frame)
            if image.shape != (self.height, self.width, 3):
                rejected[camera.name] = f"shape {image.shape} != ({self.height}, {self.width}, 3)"
                continue
            if image.dtype != np.uint8 and not np.isfinite(image).all():  # uint8 is always finite
                rejected[camera.name] = "non-finite pixels"
                continue
            targets.append(image)
            used.append(camera.name)
        return targets, used, rejected

    def _checked_poses(self, poses, what: str) -> torch.Tensor:
        poses = torch.as_tensor(np.asarray(poses), dtype=torch.float32)
        if poses.shape != (self.num_bodies, 7) or not torch.isfinite(poses).all():
            raise ValueError(f"{what} must be finite with shape ({self.num_bodies}, 7), got {tuple(poses.shape)}")
        return poses

    def _com_world(self, poses: torch.Tensor) -> torch.Tensor:
        R = quat_to_rotmat_wxyz(torch.cat([poses[:, 6:7], poses[:, 3:6]], dim=-1))
        return poses[:, :3] + torch.einsum("bij,bj->bi", R, self.body_com)

    def _views(self, indices: list[int], means: torch.Tensor) -> "_Views":
        """The accepted cameras, each cropped to one window size around the objects' projection."""
        viewmats, Ks = self._viewmats[indices], self._Ks[indices].clone()
        k = self.cfg.render_downscale
        whole = (self.width - self.width % k, self.height - self.height % k)
        width, height = whole
        offsets = [(0, 0)] * len(indices)
        u, v, depth = (t.numpy() for t in _project(viewmats, Ks, means))  # (C, N) each
        in_front = depth > 0.01
        if self.cfg.crop_margin_px is not None and in_front.any():
            fx = Ks[:, 0, 0].numpy()[:, None]
            scales = self._max_scales
            if u.shape[1] != len(scales):  # several posed copies of the cloud (photometric_losses)
                scales = np.tile(scales, u.shape[1] // len(scales))
            reach = 3.0 * scales[None] * fx / np.maximum(depth, 1e-3) + self.cfg.crop_margin_px
            lo_u = np.clip(np.where(in_front, u - reach, np.inf).min(axis=1), 0, self.width)
            hi_u = np.clip(np.where(in_front, u + reach, -np.inf).max(axis=1), 0, self.width)
            lo_v = np.clip(np.where(in_front, v - reach, np.inf).min(axis=1), 0, self.height)
            hi_v = np.clip(np.where(in_front, v + reach, -np.inf).max(axis=1), 0, self.height)
            round_up = lambda n: -(-n // k) * k  # noqa: E731  (a whole number of rendered pixels)
            width = min(whole[0], round_up(max(8, int(np.ceil((hi_u - lo_u).max())))))
            height = min(whole[1], round_up(max(8, int(np.ceil((hi_v - lo_v).max())))))
            offsets = [(min(max(0, int(x)), self.width - width), min(max(0, int(y)), self.height - height))
                       for x, y in zip(lo_u, lo_v)]
        shift = torch.tensor(offsets, dtype=torch.float32)
        Ks[:, 0, 2] -= shift[:, 0]
        Ks[:, 1, 2] -= shift[:, 1]
        Ks[:, :2] /= k  # pixel centres at +0.5 in both grids: u' = u / k
        view = _Views(viewmats, Ks, None, offsets, (width, height), k, self._device)
        view.backgrounds = view.crop([self._backgrounds[i] for i in indices])
        return view

    def _occluders_for(self, occluders: GaussianCloud | None, view: "_Views"):
        """The occluders as the renders of this update take them: a layer rendered once (cpu backend,
        ``occluder_layer``), or the cloud itself, composited with the objects in every render."""
        if occluders is None or not self.cfg.occluder_layer or self._device.type != "cpu":
            return occluders
        from real_is_sim.render.cpu_backend import render_layer  # Warp: the cpu backend only

        width, height = view.render_size
        return render_layer(occluders.means, occluders.quats, occluders.scales, occluders.opacities, occluders.colors,
                            view.viewmats, view.Ks, width, height, eps2d=EPS2D / view.downscale**2,
                            threads=self.cfg.render_threads)

    def _render(self, means, quats, occluders, view: "_Views") -> torch.Tensor:
        """The objects' Gaussians at ``means``/``quats`` (world) over the backgrounds, occluders (a cloud or a
        :class:`StaticLayer`) in front where they are."""
        c = self.cloud
        objects = GaussianCloud(means, quats, c.scales, c.opacities, c.colors, torch.full_like(c.body_ids, STATIC_WORLD))
        layer = None if occluders is None or isinstance(occluders, GaussianCloud) else occluders
        clouds = [objects, occluders] if isinstance(occluders, GaussianCloud) else [objects]
        width, height = view.render_size
        # The low-pass stays EPS2D in the camera's own pixels: with 0.3 px^2 of the coarse grid, small Gaussians
        # would render wider than the area-averaged frames show them (measured: zero-error loss 25x higher).
        image, _, _ = render_clouds(
            clouds, [None] * len(clouds), view.viewmats, view.Ks, width, height,
            requires_grad=[True] + [False] * (len(clouds) - 1), backgrounds=view.backgrounds, backend=self.cfg.backend,
            threads=self.cfg.render_threads, eps2d=EPS2D / view.downscale**2, layer=layer,
        )
        return image

    def _photometric_loss(self, image: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean over the *whole* images' pixels (a crop only skips pixels without gradient), so the loss's
        scale, and with it ``adam_eps``, does not depend on the window."""
        difference = (image - targets).abs().mean(dim=-1)  # (C, H, W) mean colour error per pixel
        error = difference.square() if self.cfg.loss == "l2" else difference
        if self.cfg.outlier_threshold is not None:
            error = torch.where(difference < self.cfg.outlier_threshold, error, error.detach())
        k = self.cfg.render_downscale
        return error.sum() / (image.shape[0] * (self.width // k) * (self.height // k))

    def _residual(self, image, targets, means0, view: "_Views") -> np.ndarray:
        """Mean colour error under each body's Gaussian centres (as the twin has them) in the accepted views;
        nan where none is in view. Where the robot hides a Gaussian, the twin renders the robot there too."""
        if self.cfg.residual_exposure_gain:
            # the frames' exposure / white balance as the model renders it: one gain per camera and channel (least
            # squares over the window), so a drifting exposure does not read as a tracking error
            gain = (image * targets).sum(dim=(1, 2)) / (image * image).sum(dim=(1, 2)).clamp_min(1e-9)
            image = image * gain.clamp(0.5, 2.0)[:, None, None, :]
        error = (image - targets).abs().mean(dim=-1).cpu()  # (C, h, w)
        u, v, depth = _project(view.viewmats, view.Ks, means0)
        width, height = view.render_size
        col, row = u.floor().long(), v.floor().long()
        seen = (depth > 0.01) & (col >= 0) & (col < width) & (row >= 0) & (row < height)
        camera = torch.arange(len(view.offsets))[:, None].expand_as(col)
        sampled = error[camera[seen], row[seen], col[seen]]
        bodies = self.cloud.body_ids[None].expand_as(col)[seen]
        residual = np.full(self.num_bodies, np.nan)
        for b in range(self.num_bodies):
            if (bodies == b).any():
                residual[b] = float(sampled[bodies == b].mean())
        return residual
