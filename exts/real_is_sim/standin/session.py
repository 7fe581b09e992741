"""Wire a twin to a stand-in real world through the online loop: what the sync benchmark and tests run.

The twin and the stand-in start from the same nominal state (the stand-in's block optionally displaced,
an initial error the twin must close); the twin sees the stand-in only through its rendered frames, and the
stand-in's robot follows the twin robot through a lagging simulated follower.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from real_is_sim.correction.actuator import VisualForceActuator, VisualForceActuatorCfg
from real_is_sim.correction.background import table_background
from real_is_sim.correction.initial_pose import InitialPoseCfg, estimate_initial_pose
from real_is_sim.correction.sensor import SensorCamera, VisualForceSensor, VisualForceSensorCfg
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.gaussians.spheres import cloud_from_spheres
from real_is_sim.loop import LoopCfg, OnlineLoop
from real_is_sim.render.masks import red_orange_mask
from real_is_sim.robot.appearance import RobotAppearance
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.standin.world import StandInCfg, StandInWorld
from real_is_sim.transforms import quat_from_yaw, quat_multiply, rotation_angle_between
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim.twin.tblock import table_plane
from real_is_sim_tasks.pusht.config import PushTCfg


@dataclass
class SyncSessionCfg:
    # kp 10 (not Embodied Gaussians' 4): with the L2 loss and the actuator's damping it closes a 2 cm error
    # in ~0.3 s without ringing (ablation in docs/correction.md).
    sensor: VisualForceSensorCfg = field(default_factory=lambda: VisualForceSensorCfg(kp=10.0))
    actuator: VisualForceActuatorCfg = field(default_factory=VisualForceActuatorCfg)
    standin: StandInCfg = field(default_factory=StandInCfg)
    twin: TwinCfg = field(default_factory=TwinCfg)
    visual_forces: bool = True
    num_cameras: int = 3
    width: int = 480
    height: int = 270
    # The stand-in block starts displaced from the twin's by (dx, dy, dyaw): an error to close.
    initial_offset: list = field(default_factory=lambda: [0.0, 0.0, 0.0])
    render_robot_in_twin: bool = True
    planar_wrench: bool = True  # the block slides on the table: keep the visual force in the table plane
    recover_lost: bool = True  # re-localise a lost block from the frames (correction.initial_pose)


def block_cloud(twin: Twin) -> GaussianCloud:
    """The twin's block seen by cameras: the object file's Gaussians when it came from one, else one per sphere."""
    task = twin.task
    if task.block.source == "file":
        from real_is_sim.gaussians.io import load_object_cloud

        return load_object_cloud(task.block.object_file_path())[0]
    g = twin.geometry
    return cloud_from_spheres(g.centers, np.full(len(g.centers), g.radius))


class SyncSession:
    def __init__(self, task: PushTCfg, cfg: SyncSessionCfg):
        self.cfg = cfg
        self.twin = Twin(task, 1, cfg.twin)
        start = self.twin.object_poses()[0]
        self.cameras = ring_cameras(start[0, :3], cfg.num_cameras, width=cfg.width, height=cfg.height)
        plane = tuple(table_plane(task.table))
        backgrounds = {c.serial: table_background(c.K, c.viewmat_opencv(), c.width, c.height, plane) for c in self.cameras}
        cloud = block_cloud(self.twin)
        self.standin = StandInWorld(task, cfg.standin, self.cameras, cloud, backgrounds, cfg.twin)
        dx, dy, dyaw = cfg.initial_offset
        real_start = start.copy()
        real_start[0, :2] += (dx, dy)
        real_start[0, 3:7] = quat_multiply(quat_from_yaw(dyaw), start[0, 3:7])  # about world z, at the body origin
        self.standin.reset(real_start)
        sensor_cams = [SensorCamera.from_info(c, backgrounds[c.serial]) for c in self.cameras]
        sensor_cfg = cfg.sensor
        if cfg.planar_wrench:
            sensor_cfg = dataclasses.replace(sensor_cfg, plane_normal=[float(v) for v in plane[:3]])
        sensor = VisualForceSensor(sensor_cfg, cloud, sensor_cams, self.twin.object_body_com())
        actuator = VisualForceActuator(cfg.actuator, self.twin)
        self._cloud, self._plane = cloud, np.asarray(plane)
        appearance = RobotAppearance(base_pose=np.asarray(task.robot.base_pose)) if cfg.render_robot_in_twin else None
        self.loop = OnlineLoop(
            LoopCfg(visual_forces=cfg.visual_forces, follow_real=True),
            self.twin, sensor, actuator, self.standin.source, self.standin.follower,
            occluders=appearance.cloud if appearance is not None else None,
            relocalize=self._relocalize if cfg.recover_lost else None,
        )

    def _relocalize(self, images: list, poses: np.ndarray) -> np.ndarray | None:
        """Search the whole turn and the table around the red-orange pixels for the block (one object), in the
        views that show it (the arm may hide it from some); None when none does."""
        views = [k for k, image in enumerate(images) if image is not None and red_orange_mask(image).any()]
        if not views:
            return None
        # Pushing does not turn the block over: search with the face it has now up.
        found = estimate_initial_pose(
            self._cloud, [images[k] for k in views], np.stack([self.cameras[k].viewmat_opencv() for k in views]),
            np.stack([self.cameras[k].K for k in views]), poses[0], self._plane, InitialPoseCfg(both_faces=False),
        )
        return found.pose[None]

    def tick(self, robot_q_target=None):
        report = self.loop.tick(robot_q_target)
        self.standin.advance()
        return report

    def sync_error(self) -> tuple[float, float]:
        """Twin-to-real block error: position (m, in the table plane) and rotation (rad)."""
        twin, real = self.twin.object_poses()[0, 0], self.standin.object_poses()[0]
        return float(np.linalg.norm(twin[:2] - real[:2])), float(rotation_angle_between(twin[3:7], real[3:7]))
