"""The stand-in real world: a separate Newton simulation that plays reality for the twin.

Same objects as the twin, but physical parameters drawn from ranges the twin does not know (friction, mass,
centre of mass, damping, optionally block size). Its robot is the bridge's follower of the twin robot's actual
joints (a lagging :class:`SimulatedFollower`, or a Franka simulator behind franky), behind the safety layer. It renders camera frames from its own Gaussians,
with the robot in view, sensor noise, exposure change, latency and dropped frames. The twin only ever sees
those frames; the stand-in's block pose is the ground truth that the sync error is measured against.

``StandInCfg.appearance`` (:class:`HiddenAppearance`, off by default) makes it *look* different from the twin's
model too: its block's Gaussians, its table, its true camera calibration, exposure drift, motion blur, the arm's
shadow and its robot's appearance (:mod:`real_is_sim.standin.appearance`; the world is a
:class:`~real_is_sim.standin.look.StandInLook` with physics). ``sensor_backgrounds`` is then the
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
from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.robot.safety import SafeFollower
from real_is_sim.standin.appearance import HiddenAppearance
from real_is_sim.standin.look import StandInLook
from real_is_sim.standin.params import HiddenParamRanges, draw_hidden_params
from real_is_sim.transforms import matrix_to_pose, pose_to_matrix
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
    # appearance the twin does not know (default: none, the stand-in renders the twin's model exactly)
    appearance: HiddenAppearance = field(default_factory=HiddenAppearance)


class StandInWorld(StandInLook):
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
        super().__init__(self.task, cfg, cameras, cloud, backgrounds, self.params.block_scale, self.twin.control_dt)
        self.follower = follower
        self._previous = None  # (object poses, robot q) at the previous capture: motion blur interpolates from it
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

    def _render(self, cameras: dict[str, CameraInfo], t: float) -> dict[str, np.ndarray]:
        poses_now, q_now = self.object_poses().copy(), np.asarray(self.follower.read_state().q, dtype=np.float64).copy()
        previous, self._previous = self._previous, (poses_now, q_now)
        return self.render_state(poses_now, q_now, list(cameras), t, previous, self._board_in_view)

    def _board_in_view(self, q: np.ndarray) -> list[tuple[GaussianCloud, torch.Tensor]]:
        if self._board is None:
            return []
        board, X_TB, kinematics = self._board
        X_WB = pose_to_matrix(np.asarray(self.task.robot.base_pose)) @ kinematics.tool_pose(q).homogeneous @ X_TB
        return [(board, torch.as_tensor(matrix_to_pose(X_WB)[None], dtype=torch.float32))]
