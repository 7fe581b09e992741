"""How the stand-in real world looks through its cameras, rendered at any state.

Its objects' Gaussians (``HiddenAppearance.block`` changes them), its robot's, its true cameras (``calibration``), the
empty cell they see (``background``), the colour drift (``exposure``), the arm's shadow and motion blur, each drawn
from the stand-in's seed on a stream of its own (:mod:`real_is_sim.standin.appearance`). Two users:
:class:`~real_is_sim.standin.world.StandInWorld` (a look with physics and a robot arm, its cameras exposing every
tick) and the ``real_image`` policy observation (:mod:`real_is_sim.policy.observations`: what the real camera shows at
a state, for training, offline and online).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.cell import CellCfg
from real_is_sim.correction.background import table_background
from real_is_sim.gaussians.cloud import GaussianCloud, pose_cloud
from real_is_sim.paths import shared_data_dir
from real_is_sim.render.rasterize import rasterization
from real_is_sim.robot.appearance import RobotAppearance
from real_is_sim.standin.appearance import (ColourDrift, appearance_rng, perturb_camera, perturb_cloud, perturb_robot,
                                             real_table_texture, shadow_mask, textured_table_background)
from real_is_sim.twin.tblock import table_plane

# more (cloud, pose [1, 7]) in view at robot joints q: a calibration board on the hand
Extras = Callable[[np.ndarray], list[tuple[GaussianCloud, torch.Tensor]]]


class StandInLook:
    def __init__(self, task: CellCfg, cfg, cameras: list[CameraInfo], cloud: GaussianCloud,
                 backgrounds: dict[str, np.ndarray], block_scale: float = 1.0, tick_s: float = 1.0 / 60.0,
                 robot: RobotAppearance | None = None):
        """``cfg``: a :class:`~real_is_sim.standin.world.StandInCfg` (its seed, appearance, robot and backend);
        ``cameras``: the calibration the twin keeps; ``cloud``: the objects' Gaussians (body frames) of the twin's
        model; ``backgrounds``: the twin's model of the empty cell per camera serial, (H, W, 3) float;
        ``block_scale``: the hidden physics' block size; ``tick_s``: the control period (motion blur);
        ``robot``: the Franka's Gaussians at the task's base pose when the caller has them (looks that share one
        are posed together by :func:`render_looks`), None: built here."""
        self.cfg = cfg
        look = cfg.appearance
        self.tick_s = tick_s
        self.model_cloud = cloud  # the twin's model: never modified
        if look.on("block"):
            cloud = perturb_cloud(cloud, look, appearance_rng(cfg.seed, "block"))
        self.cloud = _scaled(cloud, block_scale)
        if robot is None and cfg.render_robot:
            robot = RobotAppearance(base_pose=np.asarray(task.robot.base_pose))
        self.appearance = robot if cfg.render_robot else None
        self._robot_look = {"rng": appearance_rng(cfg.seed, "robot")} if look.on("robot") else None
        self._robot_fields = None  # quats, scales, opacities, colours of the robot's Gaussians (_robot_at)
        rng = appearance_rng(cfg.seed, "calibration")
        self.true_cameras = {c.serial: perturb_camera(c, look, rng) if look.on("calibration") else c for c in cameras}
        self.plane = table_plane(task.table)
        own = self._own_backgrounds(cameras, backgrounds)
        self._backgrounds = {s: torch.as_tensor(np.asarray(b), dtype=torch.float32) for s, b in own.items()}
        self._drift = ColourDrift(look, appearance_rng(cfg.seed, "exposure")) if look.on("exposure") else None
        self.sensor_backgrounds = self._estimated_backgrounds(cameras, own) if look.on("background") else backgrounds

    def render_state(self, object_poses: np.ndarray, q: np.ndarray, serials: list[str], t: float,
                     previous: tuple[np.ndarray, np.ndarray] | None = None,
                     extras: Extras | None = None) -> dict[str, np.ndarray]:
        """``{serial: (H, W, 3) float in [0, 1]}``: the cameras ``serials`` seeing the objects at ``object_poses``
        ``(n_obj, 7)`` and the robot at ``q`` (7,), exposed at ``t`` (the colour drift's clock); ``previous``: the
        (poses, q) a tick earlier, blurred in when ``motion_blur`` is on. Sensor noise and exposure gain are the
        camera's (:class:`~real_is_sim.cameras.rendered.RenderedSource`)."""
        look = self.cfg.appearance
        infos = [self.true_cameras[s] for s in serials]
        robot_means = self.appearance.means(q) if self.appearance is not None else None  # the shadow's and the render's
        bg = self._background(infos, robot_means)
        samples = [(object_poses, q)]
        if look.on("motion_blur") and previous is not None and look.blur_samples > 1:
            fractions = np.linspace(0.0, min(1.0, look.motion_blur_s / self.tick_s), look.blur_samples)[1:]  # back in time
            samples += [(_lerp_poses(object_poses, previous[0], f), (1 - f) * q + f * previous[1]) for f in fractions]
        viewmats = torch.as_tensor(np.stack([i.viewmat_opencv() for i in infos]), dtype=torch.float32)
        Ks = torch.as_tensor(np.stack([i.K for i in infos]), dtype=torch.float32)
        images = 0
        for k, (poses, qs) in enumerate(samples):
            gaussians = self.gaussians(poses, qs, extras, robot_means if k == 0 else None)
            with torch.no_grad():
                rendered, _, _ = rasterization(*gaussians, viewmats, Ks, infos[0].width, infos[0].height,
                                               backgrounds=bg, backend=self.cfg.render_backend)
            images = images + rendered.cpu()  # gsplat renders on CUDA
        images = self._exposed(images / len(samples), t)
        return {s: images[k].numpy() for k, s in enumerate(serials)}

    def gaussians(self, object_poses: np.ndarray, q: np.ndarray, extras: Extras | None = None,
                  robot_means: torch.Tensor | None = None) -> list[torch.Tensor]:
        """means, quats, scales, opacities, colours ``[N, ...]`` of everything in view at this state: the objects
        on their poses, the robot at ``q`` (``robot_means``: its Gaussians' FK there, when the caller has it), the
        ``extras``."""
        parts = [[*pose_cloud(self.cloud, torch.as_tensor(object_poses, dtype=torch.float32)), self.cloud.scales,
                  self.cloud.opacities, self.cloud.colors]]
        if self.appearance is not None:
            parts.append(self._robot_at(q, self.appearance.means(q) if robot_means is None else robot_means))
        for cloud, pose in extras(q) if extras is not None else ():
            parts.append([*pose_cloud(cloud, pose), cloud.scales, cloud.opacities, cloud.colors])
        return [torch.cat([part[k].float() for part in parts]) for k in range(5)]

    def _robot_at(self, q: np.ndarray, means: torch.Tensor) -> list[torch.Tensor]:
        """The robot's Gaussians at ``q`` (``means``: their FK there), jittered; their other fields are fixed, built
        once."""
        if self._robot_fields is None:
            robot = self.appearance.cloud(q)
            if self._robot_look is not None:
                robot = perturb_robot(robot, self.cfg.appearance, self._robot_look)  # draws the fixed jitter
            self._robot_fields = [robot.quats, robot.scales, robot.opacities, robot.colors]
        if self._robot_look is not None:
            means = means + self._robot_look["jitter"]
        return [means, *self._robot_fields]

    def _background(self, infos: list[CameraInfo], robot_means: torch.Tensor | None) -> torch.Tensor:
        """``[C, H, W, 3]``: the empty cell each camera sees, darkened under the arm (``robot_means``: its Gaussians,
        None without a robot)."""
        look = self.cfg.appearance
        bg = torch.stack([self._backgrounds[i.serial] for i in infos])
        if look.on("arm_shadow") and robot_means is not None:
            means = robot_means.numpy().astype(np.float64)
            masks = np.stack([shadow_mask(means, self.plane, look.light_tilt_deg, i, look.shadow_blur_m) for i in infos])
            bg = bg * (1.0 - look.arm_shadow * torch.as_tensor(masks)[..., None])
        return bg

    def _exposed(self, images: torch.Tensor, t: float) -> torch.Tensor:
        if self._drift is not None:
            images = images * torch.as_tensor(self._drift.gains(t))
        return images.clamp(0, 1)

    def _own_backgrounds(self, cameras: list[CameraInfo], model: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The empty cell the stand-in renders over: the twin's model images unless the table or the calibration
        differs (then ray-cast from the true cameras: the real table's texture, or the table model)."""
        look = self.cfg.appearance
        if not (look.on("background") or look.on("calibration")):
            return model
        plane = tuple(float(v) for v in self.plane)
        texture = None
        if look.on("background"):
            recording = shared_data_dir() / "sample_demos" / "0"
            if (recording / "cameras.json").is_file():
                texture = real_table_texture(str(recording), plane)
        out = {}
        for c in cameras:
            true = self.true_cameras[c.serial]
            if texture is not None:
                image = textured_table_background(true, plane, texture)
            elif look.on("background"):  # no real footage here: another table than the twin's model
                image = table_background(true.K, true.viewmat_opencv(), true.width, true.height, plane,
                                         base_color=(0.5, 0.52, 0.48), tile=0.04)
            else:
                image = table_background(true.K, true.viewmat_opencv(), true.width, true.height, plane)
            mix = look.background if look.on("background") else 0.0
            out[c.serial] = ((1 - mix) * table_background(true.K, true.viewmat_opencv(), true.width, true.height, plane)
                             + mix * image).astype(np.float32) if 0 < mix < 1 else image
        return out

    def _estimated_backgrounds(self, cameras: list[CameraInfo], own: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """What the twin captured of the empty cell (arm out of view): the per-pixel median of a few frames of it
        through these cameras (exposure at t = 0, pixel noise, 8-bit)."""
        rng = appearance_rng(self.cfg.seed, "background")
        gains = self._drift.gains(0.0) if self._drift is not None else np.ones(3, np.float32)
        out = {}
        for c in cameras:
            image = own[c.serial] * gains * self.cfg.exposure
            shots = [np.round(np.clip(image + rng.normal(0, self.cfg.noise_std, image.shape), 0, 1) * 255)
                     for _ in range(self.cfg.appearance.empty_cell_frames)]
            out[c.serial] = (np.median(np.stack(shots), axis=0) / 255.0).astype(np.float32)
        return out


def render_looks(looks: list[StandInLook], object_poses: np.ndarray, qs: np.ndarray, serial: str,
                 times: list[float]) -> np.ndarray:
    """``[B, H, W, 3]`` float: state b (``object_poses[b]`` (n_obj, 7), ``qs[b]``) through camera ``serial`` of
    ``looks[b]`` at ``times[b]``, sharp, in one ``rasterization`` call: each image bit-identical to ``render_state``'s
    (the scenes padded to one size with transparent Gaussians, which the projection drops)."""
    robot_means = _robot_means(looks, qs)
    scenes = [look.gaussians(poses, q, robot_means=m) for look, poses, q, m in zip(looks, object_poses, qs, robot_means)]
    size = max(len(scene[0]) for scene in scenes)
    padded = []
    for scene in scenes:
        missing = size - len(scene[0])
        pad = [torch.zeros(missing, 3), torch.tensor([[1.0, 0.0, 0.0, 0.0]]).expand(missing, 4),
               torch.full((missing, 3), 1e-3), torch.zeros(missing), torch.zeros(missing, 3)]
        padded.append([torch.cat([field, extra]) for field, extra in zip(scene, pad)])
    infos = [look.true_cameras[serial] for look in looks]
    viewmats = torch.as_tensor(np.stack([[i.viewmat_opencv()] for i in infos]), dtype=torch.float32)
    Ks = torch.as_tensor(np.stack([[i.K] for i in infos]), dtype=torch.float32)
    bg = torch.stack([look._background([info], m) for look, info, m in zip(looks, infos, robot_means)])
    with torch.no_grad():
        images, _, _ = rasterization(*(torch.stack(field) for field in zip(*padded)), viewmats, Ks, infos[0].width,
                                     infos[0].height, backgrounds=bg, backend=looks[0].cfg.render_backend)
    images = images.cpu()[:, 0]
    return np.stack([look._exposed(image, t).numpy() for look, image, t in zip(looks, images, times)])


def _robot_means(looks: list[StandInLook], qs: np.ndarray) -> list[torch.Tensor | None]:
    """Each state's robot Gaussians (None for a look without a robot): the forward kinematics of the states whose
    looks share a robot appearance in one call."""
    out: list[torch.Tensor | None] = [None] * len(looks)
    groups: dict[int, list[int]] = {}
    for b, look in enumerate(looks):
        if look.appearance is not None:
            groups.setdefault(id(look.appearance), []).append(b)
    for members in groups.values():
        means = looks[members[0]].appearance.means(np.asarray(qs)[members])
        for b, m in zip(members, means):
            out[b] = m
    return out


def _lerp_poses(a: np.ndarray, b: np.ndarray, f: float) -> np.ndarray:
    """Poses ``(n, 7)`` a fraction ``f`` of the way from ``a`` to ``b`` (positions linear, quaternions nlerp)."""
    qb = np.where((np.sum(a[:, 3:7] * b[:, 3:7], axis=1) < 0)[:, None], -b[:, 3:7], b[:, 3:7])
    q = (1 - f) * a[:, 3:7] + f * qb
    return np.concatenate([(1 - f) * a[:, :3] + f * b[:, :3], q / np.linalg.norm(q, axis=1, keepdims=True)], axis=1)


def _scaled(cloud: GaussianCloud, scale: float) -> GaussianCloud:
    if scale == 1.0:
        return cloud
    return GaussianCloud(cloud.means * scale, cloud.quats, cloud.scales * scale, cloud.opacities, cloud.colors, cloud.body_ids)
