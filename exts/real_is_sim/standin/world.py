"""The stand-in real world: a separate Newton simulation that plays reality for the twin.

Same objects as the twin, but physical parameters drawn from ranges the twin does not know (friction, mass,
centre of mass, damping, optionally block size). Its robot is the bridge's follower of the twin robot's actual
joints (a lagging :class:`SimulatedFollower`, or a Franka simulator behind franky), behind the safety layer. It renders camera frames from its own Gaussians,
with the robot in view, sensor noise, exposure change, latency and dropped frames. The twin only ever sees
those frames; the stand-in's block pose is the ground truth that the sync error is measured against.
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
from real_is_sim.standin.params import HiddenParamRanges, draw_hidden_params
from real_is_sim.twin import Twin, TwinCfg


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
        self.cloud = _scaled(cloud, self.params.block_scale)
        self.follower = follower
        self.appearance = RobotAppearance(base_pose=np.asarray(task.robot.base_pose)) if cfg.render_robot else None
        self._backgrounds = {s: torch.as_tensor(np.asarray(b), dtype=torch.float32) for s, b in backgrounds.items()}
        self.source = RenderedSource(cameras, self._render, latency=cfg.latency_s, noise_std=cfg.noise_std,
                                     exposure=cfg.exposure, drop_probability=cfg.drop_probability, seed=cfg.seed + 1)
        self.t = 0.0
        if not self.follower.realtime:  # a real-time arm starts with the session (its watchdog runs from start())
            self.follower.start()

    def reset(self, object_poses: np.ndarray) -> None:
        """Put reality's objects at ``object_poses (n_obj, 7)``, the robot at the task's start."""
        self.twin.reset(object_poses=np.asarray(object_poses)[None])

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

    def _render(self, cameras: dict[str, CameraInfo], t: float) -> dict[str, np.ndarray]:
        clouds, poses = [self.cloud], [torch.as_tensor(self.object_poses(), dtype=torch.float32)]
        if self.appearance is not None:
            clouds.append(self.appearance.cloud(self.follower.read_state().q))
            poses.append(None)
        infos = list(cameras.values())
        viewmats = torch.as_tensor(np.stack([i.viewmat_opencv() for i in infos]), dtype=torch.float32)
        Ks = torch.as_tensor(np.stack([i.K for i in infos]), dtype=torch.float32)
        bg = torch.stack([self._backgrounds[i.serial] for i in infos])
        with torch.no_grad():
            images, _, _ = render_clouds(clouds, poses, viewmats, Ks, infos[0].width, infos[0].height,
                                         backgrounds=bg, backend=self.cfg.render_backend)
        images = images.cpu()  # gsplat renders on CUDA
        return {info.serial: images[k].clamp(0, 1).numpy() for k, info in enumerate(infos)}


def _scaled(cloud: GaussianCloud, scale: float) -> GaussianCloud:
    if scale == 1.0:
        return cloud
    return GaussianCloud(cloud.means * scale, cloud.quats, cloud.scales * scale, cloud.opacities, cloud.colors, cloud.body_ids)
