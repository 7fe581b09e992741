"""The composition root: :func:`build_bridge` turns a :class:`BridgeCfg` into the running system.

Cameras -> synchroniser -> visual-force sensor -> actuator -> twin physics -> policy commands the twin robot ->
the follower tracks the twin robot's *actual* joints. Nothing else in the project wires these parts: the deploy
script, the stand-in benchmarks and the tests all build through here.

With ``cameras.source == "standin"`` the stand-in world plays the cell: it renders the frames, and its robot is the
configured follower (the simulated one, or a Franka simulator such as franky-sim behind franky).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from real_is_sim.bridge.config import BridgeCfg
from real_is_sim.cameras.base import CameraInfo, CameraSource
from real_is_sim.cameras.hand_eye import HandEyeResult, board_cloud, calibrate
from real_is_sim.cell import CellCfg
from real_is_sim.correction.actuator import VisualForceActuator
from real_is_sim.correction.background import table_background
from real_is_sim.correction.sensor import SensorCamera, VisualForceSensor
from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.loop import OnlineLoop, TickReport
from real_is_sim.render.virtual_cameras import scaled_intrinsics
from real_is_sim.robot.appearance import RobotAppearance
from real_is_sim.robot.follower_factory import make_follower
from real_is_sim.robot.safety import SafeFollower, WorkspaceGuard
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.standin.world import StandInWorld
from real_is_sim.task import Policy, Task, import_task
from real_is_sim.transforms import pose_to_matrix, quat_from_yaw, quat_multiply, rotation_angle_between
from real_is_sim.twin import Twin
from real_is_sim.twin.tblock import block_cloud, table_plane

logger = logging.getLogger(__name__)


@dataclass
class Bridge:
    """The running system :func:`build_bridge` wired. ``standin`` is None on real hardware and on replays."""

    cfg: BridgeCfg
    task: Task  # the task interface (cfg.task_module); its config is twin.task
    twin: Twin
    loop: OnlineLoop
    policy: Policy
    policy_name: str
    cameras: list[CameraInfo]
    source: CameraSource | None
    follower: SafeFollower | None
    standin: StandInWorld | None = None
    hand_eye: HandEyeResult | None = None  # the cameras' calibration, when cameras.hand_eye
    closed: bool = field(default=False, repr=False)

    def tick(self, robot_q_target: np.ndarray | None = None) -> TickReport:
        """One 1/60 s tick with explicit targets ``(1, 7)`` (None: the twin keeps its last ones), then reality
        advances to the same time."""
        if self.loop.ticks == 0:
            self.start()
        report = self.loop.tick(robot_q_target)
        self.advance_reality()
        return report

    def advance_reality(self) -> None:
        """Bring what plays reality to the loop's time: the stand-in world (it steps its robot, the follower), or a
        steppable follower on its own (a recorded arm, a simulated one); a real robot runs on its own clock."""
        if self.standin is not None:
            self.standin.advance()
        elif self.follower is not None and not self.follower.realtime:
            self.follower.step_to(self.loop.t)

    def start(self) -> None:
        """Start a real-time follower (a real arm): at the first tick, not at build time, because its watchdog counts
        from start() and building the rest of the system takes seconds. Steppable followers start when built."""
        if self.follower is not None and self.follower.realtime and not self.follower.health().ok:
            self.follower.start()

    def step(self) -> TickReport:
        """One tick commanded by the configured policy."""
        return self.tick(self.policy(self.loop.t))

    def reset_twin(self, object_poses: np.ndarray) -> None:
        """Put the twin's objects at ``object_poses (n_obj, 7)``, its robot where it is, and forget the loop's past
        (pose history, pending wrench, lost flags): a new episode whose start pose is known, e.g. after the
        stand-in's block was placed there (``standin.teleport``)."""
        w = self.loop.cfg.world
        self.twin.reset(world_ids=[w], object_poses=np.asarray(object_poses)[None], robot_q=self.twin.robot_q()[w][None])
        self.loop.reset_history()
        if self.loop.actuator is not None:
            self.loop.actuator.clear(world=w)
        if self.loop.sensor is not None:
            self.loop.reset_sensor_health()

    def ground_truth(self) -> np.ndarray | None:
        """Reality's object poses ``(n_obj, 7)`` where reality is simulated (the stand-in), else None."""
        return self.standin.object_poses() if self.standin is not None else None

    def sync_error(self) -> tuple[float, float]:
        """Twin-to-real block error against the stand-in's ground truth: position in the table plane (m), rotation (rad)."""
        real = self.ground_truth()
        if real is None:
            raise DataError("sync_error needs ground truth: only the stand-in source has it")
        twin = self.twin.object_poses()[0, 0]
        return float(np.linalg.norm(twin[:2] - real[0, :2])), float(rotation_angle_between(twin[3:7], real[0, 3:7]))

    def hold_and_stop(self) -> None:
        """The robot holds where it is, then stops; the loop's sensor thread (pipelined) and the cameras close. Safe
        to call more than once."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.follower is not None and self.follower.health().ok:
                self.follower.send(self.follower.read_state().q, self.follower.now())
        finally:
            try:
                if self.follower is not None:
                    self.follower.close()
            finally:
                try:
                    self.loop.close()
                finally:
                    if self.source is not None:
                        self.source.close()


SourceWrapper = Callable[[CameraSource, list[CameraInfo]], CameraSource]


def build_bridge(cfg: BridgeCfg, task: CellCfg | None = None, wrap_source: SourceWrapper | None = None) -> Bridge:
    """Wire the system ``cfg`` describes (``task``, a config of ``cfg.task_module``, overrides ``cfg.task``;
    ``wrap_source(source, cameras)`` may put a recorder in the camera stream). Opens the camera devices and starts
    the follower; a missing device fails here with one error naming it, with nothing left open."""
    task_module = import_task(cfg.task_module)
    task = task or task_module.load_cfg(cfg.task)
    twin = Twin(task, 1, cfg.twin)
    cloud = block_cloud(task)  # the sensor's model of the block, and (stand-in) how reality looks
    plane = tuple(float(v) for v in table_plane(task.table))
    needs_follower = cfg.loop.follow_real or cfg.cameras.source == "standin"
    follower = _make_follower(cfg, task) if needs_follower else None
    standin, source, hand_eye = None, None, None
    try:
        if cfg.cameras.source == "standin":
            standin, cameras, backgrounds, hand_eye = _standin(cfg, twin, cloud, follower, plane)
            source = standin.source
        elif cfg.cameras.source == "realsense":
            source, cameras = _realsense(cfg)
            backgrounds = _recorded_backgrounds(cfg, cameras) or _table_backgrounds(cameras, plane)
        else:
            source, cameras = _replay(cfg)
            backgrounds = _recorded_backgrounds(cfg, cameras) or _median_backgrounds(source, cfg.cameras.background_stride)
        if wrap_source is not None:
            source = wrap_source(source, cameras)
        if follower is not None and standin is None and not follower.realtime:
            follower.start()
        loop = _loop(cfg, task_module, twin, cloud, source, follower, cameras, backgrounds, plane)
    except BaseException:
        if follower is not None:
            follower.close()
        if source is not None:
            source.close()
        raise
    policy, name = _policy(cfg, task_module, twin)
    return Bridge(cfg, task_module, twin, loop, policy, name, cameras, source, follower, standin, hand_eye)


def _make_follower(cfg: BridgeCfg, task: CellCfg) -> SafeFollower:
    follower_cfg = cfg.follower
    if follower_cfg.kind == "simulated":
        simulated = dataclasses.replace(follower_cfg.simulated, q_initial=list(task.robot.q_start))
        follower_cfg = dataclasses.replace(follower_cfg, simulated=simulated)
    return make_follower(follower_cfg)


def _standin(cfg: BridgeCfg, twin: Twin, cloud: GaussianCloud, follower: SafeFollower, plane):
    start = twin.object_poses()[0]
    c = cfg.cameras
    cameras = ring_cameras(start[0, :3], c.num_cameras, width=c.width, height=c.height)
    backgrounds = _table_backgrounds(cameras, plane)
    standin = StandInWorld(twin.task, cfg.standin, cameras, cloud, backgrounds, cfg.twin, follower=follower)
    dx, dy, dyaw = cfg.initial_offset
    real_start = start.copy()
    real_start[0, :2] += (dx, dy)
    real_start[0, 3:7] = quat_multiply(quat_from_yaw(dyaw), start[0, 3:7])  # about world z, at the body origin
    standin.reset(real_start)
    hand_eye = _hand_eye(cfg, twin, cloud, plane, cameras, start[0, :3]) if c.hand_eye else None
    if hand_eye is not None:
        cameras = [hand_eye.cameras[camera.serial] for camera in cameras]
    # the twin's empty cell: its estimate where reality differs
    return standin, cameras, standin.sensor_backgrounds, hand_eye


def _hand_eye(cfg: BridgeCfg, twin: Twin, cloud: GaussianCloud, plane, nominal: list[CameraInfo], target) -> HandEyeResult:
    """The cell's cameras calibrated before the session, as on the day the cell was set up: a stand-in world of the
    same seed (the same true cameras) whose robot shows a checkerboard to every camera; the session's own world is
    left untouched (its clock, its robot). Streams narrower than ``hand_eye.min_width`` are calibrated at an integer
    multiple of their size (the same cameras, as a RealSense is calibrated at full resolution), and the result
    scaled back; the returned cameras are the session's size."""
    factor = max(1, int(np.ceil(cfg.hand_eye.min_width / nominal[0].width)))
    at = [_resized(camera, camera.width * factor, camera.height * factor) for camera in nominal]
    follower = _make_follower(cfg, twin.task)
    try:
        world = StandInWorld(twin.task, cfg.standin, at, cloud, _table_backgrounds(at, plane), cfg.twin, follower=follower)
        world.mount_board(board_cloud(cfg.hand_eye.board), cfg.hand_eye.board.X_TB())
        robot = twin.task.robot
        result = calibrate(at, np.asarray(target), pose_to_matrix(np.asarray(robot.base_pose)), np.asarray(robot.q_start),
                           lambda poses: world.calibration_views(poses, cfg.hand_eye.max_joint_speed, cfg.hand_eye.settle_s),
                           cfg.hand_eye)
    finally:
        follower.close()
    logger.info("hand-eye calibration: %s", result.summary())
    result.cameras = {c.serial: _resized(result.cameras[c.serial], c.width, c.height) for c in nominal}
    return result


def _resized(camera: CameraInfo, width: int, height: int) -> CameraInfo:
    """The same camera streaming ``width`` x ``height`` images."""
    return CameraInfo(camera.serial, scaled_intrinsics(camera.K, camera.resolution, width, height), width, height, camera.X_WC)


def _realsense(cfg: BridgeCfg):
    from real_is_sim.cameras.calibration import load_cameras_json
    from real_is_sim.cameras.realsense import RealSenseSource

    c = cfg.cameras
    if not Path(c.calibration).is_file():
        raise DataError(f"cameras.calibration: no calibration file at {c.calibration} (cameras.json: serial -> X_WC)")
    X_WC = {serial: files.X_WC for serial, files in load_cameras_json(c.calibration).items()}
    source = RealSenseSource(X_WC, c.width, c.height, c.fps, c.hardware_sync)
    source.start()  # no device here: CameraUnavailableError naming the missing serials
    return source, list(source.cameras.values())


def _replay(cfg: BridgeCfg):
    from real_is_sim.bridge.arrivals import ArrivalReplaySource
    from real_is_sim.cameras.replay import VideoReplaySource

    source = VideoReplaySource(cfg.cameras.recording, serials=cfg.cameras.serials or None)
    if cfg.cameras.arrivals:
        source = ArrivalReplaySource(source, cfg.cameras.arrivals)
    return source, list(source.cameras.values())


def _table_backgrounds(cameras: list[CameraInfo], plane) -> dict[str, np.ndarray]:
    return {c.serial: table_background(c.K, c.viewmat_opencv(), c.width, c.height, plane) for c in cameras}


def _median_backgrounds(source, stride: int) -> dict[str, np.ndarray]:
    from real_is_sim.correction.background import median_backgrounds

    return median_backgrounds(source, stride)


def _recorded_backgrounds(cfg: BridgeCfg, cameras: list[CameraInfo]) -> dict[str, np.ndarray] | None:
    """The backgrounds a session recorded (``cameras.backgrounds``), or None when none is configured."""
    if not cfg.cameras.backgrounds:
        return None
    folder = Path(cfg.cameras.backgrounds)
    backgrounds = {}
    for c in cameras:
        path = folder / f"{c.serial}.npy"
        if not path.is_file():
            raise DataError(f"cameras.backgrounds: no background for camera {c.serial} ({path})")
        image = np.load(path)
        if image.shape != (c.height, c.width, 3):
            raise DataError(f"cameras.backgrounds: {path} has shape {image.shape}, camera {c.serial} is {c.width}x{c.height}")
        backgrounds[c.serial] = image
    return backgrounds


def _loop(cfg: BridgeCfg, task: Task, twin: Twin, cloud: GaussianCloud, source, follower, cameras, backgrounds,
          plane) -> OnlineLoop:
    sensor = actuator = None
    if cfg.loop.visual_forces:
        sensor_cfg = cfg.sensor
        if cfg.planar_wrench:
            sensor_cfg = dataclasses.replace(sensor_cfg, plane_normal=list(plane[:3]))
        sensor_cams = [SensorCamera.from_info(c, backgrounds[c.serial]) for c in cameras]
        sensor = VisualForceSensor(sensor_cfg, cloud, sensor_cams, twin.object_body_com())
        actuator = VisualForceActuator(cfg.actuator, twin)
    appearance = RobotAppearance(base_pose=np.asarray(twin.task.robot.base_pose)) if cfg.render_robot else None
    relocalize = task.relocalizer(cloud, cameras, np.asarray(plane)) if cfg.recover_lost else None
    guard = WorkspaceGuard(follower.cfg) if cfg.loop.follow_real and cfg.loop.guard_targets else None
    return OnlineLoop(cfg.loop, twin, sensor, actuator, source, follower if cfg.loop.follow_real else None,
                      occluders=appearance.cloud if appearance is not None else None, relocalize=relocalize,
                      target_guard=guard)


def _policy(cfg: BridgeCfg, task: Task, twin: Twin) -> tuple[Policy, str]:
    if cfg.policy.kind == "hold":
        return (lambda t: None), "hold"
    return task.scripted_policy(twin, cfg.policy), "scripted_push"
