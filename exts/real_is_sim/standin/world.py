"""The stand-in real world: a separate Newton simulation that plays reality for the twin.

Same objects as the twin, but physical parameters drawn from ranges the twin does not know (friction, mass,
centre of mass, damping, optionally block size). Its robot is the bridge's follower of the twin robot's actual
joints (a lagging :class:`SimulatedFollower`, or a Franka simulator behind franky), behind the safety layer. It renders camera frames from its own Gaussians,
with the robot in view, sensor noise, exposure change, latency and dropped frames. The twin only ever sees
those frames; the stand-in's block pose is the ground truth that the sync error is measured against.

``StandInCfg.appearance`` (:class:`HiddenAppearance`, off by default) makes it *look* different from the twin's
model too: its block's Gaussians, its table, its true camera calibration, exposure drift, motion blur, the arm's
shadow and its robot's appearance (:mod:`real_is_sim.standin.appearance`). ``sensor_backgrounds`` is then the
twin's own estimate of the empty cell, not the image the stand-in renders over.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.cameras.rendered import RenderedSource
from real_is_sim.cell import CellCfg
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.render.clouds import render_clouds
from real_is_sim.robot.appearance import RobotAppearance
from real_is_sim.robot.safety import SafeFollower
from real_is_sim.standin.appearance import (ColourDrift, HiddenAppearance, appearance_rng, perturb_camera, perturb_cloud,
                                             perturb_robot, real_table_texture, shadow_mask, textured_table_background)
from real_is_sim.standin.params import HiddenParamRanges, draw_hidden_params
from real_is_sim.correction.background import table_background
from real_is_sim.errors import DataError
from real_is_sim.paths import shared_data_dir
from real_is_sim.transforms import matrix_to_pose, pose_to_matrix
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim.twin.tblock import table_plane


@dataclass
class StandInCfg:
    seed: int = 0
    hidden: HiddenParamRanges = field(default_factory=HiddenParamRanges)
    noise_std: float = 0.01  # pixel noise, [0, 1] units
    exposure: float = 1.0  # gain at start; set_exposure() changes it during a run
    latency_s: float = 1.0 / 30.0  # camera frames reach the loop two ticks late
    drop_probability: float = 0.02
    render_robot: bool = True
    render_backend: str = "auto"
    # appearance the twin does not know (default: none, the stand-in renders the twin's model exactly)
    appearance: HiddenAppearance = field(default_factory=HiddenAppearance)


class StandInWorld:
    def __init__(self, task: CellCfg, cfg: StandInCfg, cameras: list[CameraInfo], cloud: GaussianCloud,
                 backgrounds: dict[str, np.ndarray], twin_cfg: TwinCfg | None, follower: SafeFollower):
        """``cloud``: the objects' Gaussians (body frames) as reality looks; ``backgrounds``: the empty cell per
        camera serial, (H, W, 3) float; ``follower``: reality's robot (not started yet), stepped with this world's
        clock when it is steppable, on its own clock when it runs in real time."""
        self.cfg = cfg
        rng = np.random.default_rng(cfg.seed)
        self.params = draw_hidden_params(cfg.hidden, task.physical, rng)
        self.task = dataclasses.replace(task, physical=self.params)
        self.twin = Twin(self.task, 1, twin_cfg)
        look = cfg.appearance
        self.model_cloud = cloud  # the twin's model: never modified
        if look.on("block"):
            cloud = perturb_cloud(cloud, look, appearance_rng(cfg.seed, "block"))
        self.cloud = _scaled(cloud, self.params.block_scale)
        self.follower = follower
        self.appearance = RobotAppearance(base_pose=np.asarray(task.robot.base_pose)) if cfg.render_robot else None
        self._robot_look = {"rng": appearance_rng(cfg.seed, "robot")} if look.on("robot") else None
        rng = appearance_rng(cfg.seed, "calibration")
        self.true_cameras = {c.serial: perturb_camera(c, look, rng) if look.on("calibration") else c for c in cameras}
        self.plane = table_plane(task.table)
        backgrounds = self._own_backgrounds(cameras, backgrounds)
        self._backgrounds = {s: torch.as_tensor(np.asarray(b), dtype=torch.float32) for s, b in backgrounds.items()}
        self._drift = ColourDrift(look, appearance_rng(cfg.seed, "exposure")) if look.on("exposure") else None
        self._previous = None  # (object poses, robot q) at the previous capture: motion blur interpolates from it
        self.sensor_backgrounds = self._estimated_backgrounds(cameras, backgrounds) if look.on("background") else backgrounds
        self.source = RenderedSource(cameras, self._render, latency=cfg.latency_s, noise_std=cfg.noise_std,
                                     exposure=cfg.exposure, drop_probability=cfg.drop_probability, seed=cfg.seed + 1)
        self._board = None  # (cloud, X_TB, kinematics) while a calibration board is on the hand
        self.t = 0.0
        if not self.follower.realtime:  # a real-time arm starts with the session (its watchdog runs from start())
            self.follower.start()

    def reset(self, object_poses: np.ndarray) -> None:
        """Put reality's objects at ``object_poses (n_obj, 7)``, the robot at the task's start."""
        self.twin.reset(object_poses=np.asarray(object_poses)[None])
        self._previous = None  # no motion blur across a reset

    def advance(self) -> None:
        """One control period: the follower tracks what the twin sent, physics steps, the cameras expose."""
        self.t += self.twin.control_dt
        if not self.follower.realtime:
            self.follower.step_to(self.t)
        self.twin.step(self.follower.read_state().q[None])
        self.source.capture(self.t)

    def object_poses(self) -> np.ndarray:
        """Ground truth ``(n_obj, 7)``."""
        return self.twin.object_poses()[0]

    def teleport(self, object_poses: np.ndarray) -> None:
        """Move reality's objects instantly (a person picks the block up): the twin must notice."""
        q = self.twin.robot_q()
        self.twin.reset(object_poses=np.asarray(object_poses)[None], robot_q=q)
        self._previous = None

    def mount_board(self, board: GaussianCloud, X_TB: np.ndarray) -> None:
        """Put a calibration board (``board``: one body) on the robot's hand, meant to sit at ``X_TB`` in the TCP
        frame; it really sits 2 mm / 0.5 deg off that (hidden, drawn from the seed), as a hand-mounted board does.
        The cameras see it from the next capture on."""
        from real_is_sim.cameras.hand_eye import perturbed_mount
        from real_is_sim.robot.kinematics import PandaKinematics

        X_TB_true = perturbed_mount(X_TB, np.random.default_rng([int(self.cfg.seed), 17, 100]))
        self._board = (board, X_TB_true, PandaKinematics())

    def calibration_views(self, poses: list[np.ndarray], max_joint_speed: float = 0.6,
                          settle_s: float = 0.5) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Move the robot through the joint ``poses`` (straight lines in joint space at ``max_joint_speed`` rad/s,
        sent through the safety layer at the control rate), hold still ``settle_s`` at each and take one frame per
        camera: ``(measured q, {serial: image})`` per pose (a dropped frame leaves its camera out). Physics does
        not step: the objects stay where they are."""
        dt = self.twin.control_dt
        q = np.asarray(self.follower.read_state().q, dtype=np.float64)
        shots = []
        for target in poses:
            target = np.asarray(target, dtype=np.float64)
            moving = max(1, int(np.ceil(np.max(np.abs(target - q)) / (max_joint_speed * dt))))
            for k in range(1, moving + int(np.ceil(settle_s / dt)) + 1):
                self.t += dt
                decision = self.follower.send(q + (target - q) * min(1.0, k / moving), self.t)
                if decision is not None and not decision.accepted:
                    raise DataError(f"calibration motion: the safety layer refused the target at pose {len(shots)}: "
                                    f"{decision.refusal} {decision.detail}")
                if not self.follower.realtime:
                    self.follower.step_to(self.t)
            still = np.array(self.follower.read_state().q, dtype=np.float64)
            # the exposure starts a tick back (motion blur): the robot was as still then as it is now
            self._previous = (self.object_poses().copy(), still)
            self.source.capture(self.t)
            frames = [f for f in self.source.poll(self.t + self.source.latency) if f.timestamp == self.t]
            shots.append((still, {f.serial: f.image for f in frames}))
            q = target
        return shots

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

    def _render(self, cameras: dict[str, CameraInfo], t: float) -> dict[str, np.ndarray]:
        look = self.cfg.appearance
        poses_now, q_now = self.object_poses().copy(), np.asarray(self.follower.read_state().q, dtype=np.float64).copy()
        previous, self._previous = self._previous, (poses_now, q_now)
        infos = [self.true_cameras[s] for s in cameras]
        bg = torch.stack([self._backgrounds[i.serial] for i in infos])
        if look.on("arm_shadow") and self.appearance is not None:
            means = self.appearance.means(q_now).numpy().astype(np.float64)
            masks = np.stack([shadow_mask(means, self.plane, look.light_tilt_deg, i, look.shadow_blur_m) for i in infos])
            bg = bg * (1.0 - look.arm_shadow * torch.as_tensor(masks)[..., None])
        samples = [(poses_now, q_now)]
        if look.on("motion_blur") and previous is not None and look.blur_samples > 1:
            dt = self.twin.control_dt
            fractions = np.linspace(0.0, min(1.0, look.motion_blur_s / dt), look.blur_samples)[1:]  # back in time
            samples += [(_lerp_poses(poses_now, previous[0], f), (1 - f) * q_now + f * previous[1]) for f in fractions]
        images = sum(self._render_at(poses, q, infos, bg) for poses, q in samples) / len(samples)
        if self._drift is not None:
            images = images * torch.as_tensor(self._drift.gains(t))
        return {s: images[k].clamp(0, 1).numpy() for k, s in enumerate(cameras)}

    def _render_at(self, object_poses: np.ndarray, q: np.ndarray, infos: list[CameraInfo], bg: torch.Tensor) -> torch.Tensor:
        clouds, poses = [self.cloud], [torch.as_tensor(object_poses, dtype=torch.float32)]
        if self.appearance is not None:
            robot = self.appearance.cloud(q)
            if self._robot_look is not None:
                robot = perturb_robot(robot, self.cfg.appearance, self._robot_look)
            clouds.append(robot)
            poses.append(None)
        if self._board is not None:
            board, X_TB, kinematics = self._board
            X_WB = pose_to_matrix(np.asarray(self.task.robot.base_pose)) @ kinematics.tool_pose(q).homogeneous @ X_TB
            clouds.append(board)
            poses.append(torch.as_tensor(matrix_to_pose(X_WB)[None], dtype=torch.float32))
        viewmats = torch.as_tensor(np.stack([i.viewmat_opencv() for i in infos]), dtype=torch.float32)
        Ks = torch.as_tensor(np.stack([i.K for i in infos]), dtype=torch.float32)
        with torch.no_grad():
            images, _, _ = render_clouds(clouds, poses, viewmats, Ks, infos[0].width, infos[0].height,
                                         backgrounds=bg, backend=self.cfg.render_backend)
        return images.cpu()  # gsplat renders on CUDA


def _lerp_poses(a: np.ndarray, b: np.ndarray, f: float) -> np.ndarray:
    """Poses ``(n, 7)`` a fraction ``f`` of the way from ``a`` to ``b`` (positions linear, quaternions nlerp)."""
    qb = np.where((np.sum(a[:, 3:7] * b[:, 3:7], axis=1) < 0)[:, None], -b[:, 3:7], b[:, 3:7])
    q = (1 - f) * a[:, 3:7] + f * qb
    return np.concatenate([(1 - f) * a[:, :3] + f * b[:, :3], q / np.linalg.norm(q, axis=1, keepdims=True)], axis=1)


def _scaled(cloud: GaussianCloud, scale: float) -> GaussianCloud:
    if scale == 1.0:
        return cloud
    return GaussianCloud(cloud.means * scale, cloud.quats, cloud.scales * scale, cloud.opacities, cloud.colors, cloud.body_ids)
