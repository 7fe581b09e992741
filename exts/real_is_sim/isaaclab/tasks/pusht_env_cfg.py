"""PushT as an Isaac Lab direct-workflow task: table, T-block of spheres, goal, Franka with a pusher.

Kit-less on the Newton backend: the physics is set explicitly to :class:`NewtonCfg` with the MJWarp solver on the
CPU (``SimulationCfg.physics=None`` would mean PhysX, which needs Kit). The block and the table are local USD
files generated from the core's geometry (:mod:`real_is_sim.isaaclab.assets`); the goal, the block's start pose
and its physics come from the task YAML (``tasks/pusht/pusht.yaml`` by default). The robot is
:data:`real_is_sim.isaaclab.franka.FRANKA_PUSHER_CFG` on its base pose from the task.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from isaaclab.assets import ArticulationCfg, AssetBaseCfg, RigidObjectCfg
from isaaclab.envs import DirectRLEnvCfg
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.sensors import CameraCfg
from isaaclab.sim import GroundPlaneCfg, PinholeCameraCfg, SimulationCfg, UsdFileCfg
from isaaclab.sim.spawners.materials import RigidBodyMaterialBaseCfg
from isaaclab.utils import configclass
from isaaclab_newton.physics import NewtonCfg

from real_is_sim.cameras.base import check_pose
from real_is_sim.correction.sensor import SensorCamera
from real_is_sim.correction.sensor import VisualForceSensorCfg as CoreSensorCfg
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.gaussians.spheres import cloud_from_spheres
from real_is_sim.isaaclab.actuator import VisualForceActuatorCfg
from real_is_sim.isaaclab.assets import pusht_asset_paths
from real_is_sim.isaaclab.franka import FRANKA_PUSHER_CFG, FRANKA_PUSHER_SOLVER_CFG
from real_is_sim.isaaclab.renderer import GaussianBodyCfg, GaussianRendererCfg
from real_is_sim.isaaclab.sensor import VisualForceSensorCfg
from real_is_sim.render.virtual_cameras import X_HAND_WRIST
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.transforms import matrix_to_quat
from real_is_sim.twin.tblock import block_cloud, block_geometry, table_plane
from real_is_sim_tasks.pusht.config import DEFAULT_YAML, PushTCfg, load_pusht_cfg

CONTROL_HZ = 60.0
PHYSICS_STEPS_PER_CONTROL = 4  # as the core twin's substeps: 240 Hz physics

CAMERA_NAMES = ("static", "wrist")


def _table_pose(plane: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(position, quaternion xyzw) of a frame whose z axis is the plane's normal, origin on the plane."""
    n = plane[:3]
    x = np.cross([0.0, 1.0, 0.0], n)
    x /= np.linalg.norm(x)
    rotation = np.stack([x, np.cross(n, x), n], axis=1)
    return tuple(float(v) for v in -plane[3] * n), tuple(float(v) for v in matrix_to_quat(rotation))


def block_cloud_factory(task: PushTCfg) -> Callable[[], GaussianCloud]:
    """Makes the block's Gaussians in its body frame (:func:`real_is_sim.twin.tblock.block_cloud`). A callable because
    configclass walks (and would write into) a frozen cloud's fields."""
    return functools.partial(block_cloud, task)


def _camera_offset(X_PC: np.ndarray) -> CameraCfg.OffsetCfg:
    """The offset of a camera from its prim's parent frame, given as ``X_PC`` with OpenGL axes (calibration files)."""
    return CameraCfg.OffsetCfg(pos=tuple(map(float, X_PC[:3, 3])), rot=tuple(map(float, matrix_to_quat(X_PC[:3, :3]))),
                               convention="opengl")


@configclass
class PushTSceneCfg(InteractiveSceneCfg):
    table: AssetBaseCfg | None = None
    block: RigidObjectCfg | None = None
    robot: ArticulationCfg = FRANKA_PUSHER_CFG.replace(prim_path="{ENV_REGEX_NS}/Robot")
    visual_force: VisualForceSensorCfg | None = None
    static_camera: CameraCfg | None = None
    wrist_camera: CameraCfg | None = None


@configclass
class PushTEnvCfg(DirectRLEnvCfg):
    task_yaml: str = str(DEFAULT_YAML)
    """The PushT task config (table, block, goal, robot start, physical parameters)."""
    task_overrides: list = []
    """Dotlist overrides of the task config, e.g. ``["goal.pose=[0.5,0.1,0,0,0,0,1]"]``."""
    asset_dir: str | None = None
    """Where the generated USD assets go; None: ``real_is_sim.isaaclab.assets.default_asset_dir()``."""
    cameras: tuple = ()
    """Virtual cameras rendering the block's Gaussians, any of ``CAMERA_NAMES``: "static" (at ``static_camera_pose``)
    and "wrist" (on the Franka hand); each adds ``obs["<name>_rgb"]``, uint8 ``[num_envs, H, W, 3]``."""
    camera_width: int = 160
    camera_height: int = 120
    """Image size of the cameras [px]; both have the RealSense's field of view (the stand-in cameras' focal length)."""
    static_camera_pose: list | None = None
    """4x4 camera-to-env pose ``X_WC`` of the static camera, OpenGL axes (as the calibration files); None: the stand-in's
    first camera (``real_is_sim.standin.cameras.ring_cameras``) around the block's start."""

    decimation = PHYSICS_STEPS_PER_CONTROL
    episode_length_s = 20.0
    action_space = 7  # arm joint position targets [rad], absolute (clipped to the joint limits by the drives)
    observation_space = 14  # block pose in the env frame (pos, quat xyzw), 7 arm joints
    state_space = 0

    sim: SimulationCfg = SimulationCfg(
        dt=1.0 / (CONTROL_HZ * PHYSICS_STEPS_PER_CONTROL),
        render_interval=PHYSICS_STEPS_PER_CONTROL,
        device="cpu",
        # implicitfast: the Franka's drive damping integrated implicitly (explicit Euler blows up its wrist and
        # fingers: docs/isaaclab_franka.md); njmax: room for the block's sphere-table contact rows; elliptic: the
        # isotropic Coulomb cone of the core twin (MuJoCo's default pyramid makes sliding friction depend on its
        # direction: docs/isaaclab.md, Parity).
        physics=NewtonCfg(solver_cfg=FRANKA_PUSHER_SOLVER_CFG.replace(njmax=400, cone="elliptic")),
    )
    scene: PushTSceneCfg = PushTSceneCfg(num_envs=64, env_spacing=1.5, replicate_physics=True)
    robot_arm_joints: str = "panda_joint[1-7]"
    visual_force_actuator: VisualForceActuatorCfg = VisualForceActuatorCfg()
    """Used when ``scene.visual_force`` is set (see :func:`enable_visual_forces`)."""

    # reset: the block's start pose from the task, shifted by up to these (uniform)
    reset_position_noise: float = 0.05  # m, in x and y
    reset_yaw_noise: float = 0.5  # rad
    # reward = -distance [m] - yaw_weight * |yaw error| [rad] + success_bonus on success
    yaw_weight: float = 0.1
    success_bonus: float = 10.0
    # the block fell off the table: terminate
    fall_height: float = -0.1  # m along the table normal

    def __post_init__(self):
        task = self.load_task()
        geometry = block_geometry(task)
        table_usd, block_usd = pusht_asset_paths(task, self.asset_dir)
        plane = table_plane(task.table)
        position, orientation = _table_pose(plane)
        self.scene.table = AssetBaseCfg(
            prim_path="/World/Table",
            spawn=GroundPlaneCfg(
                usd_path=str(table_usd),
                physics_material=RigidBodyMaterialBaseCfg(
                    static_friction=task.physical.friction_table, dynamic_friction=task.physical.friction_table
                ),
            ),
            init_state=AssetBaseCfg.InitialStateCfg(pos=position, rot=orientation),
        )
        start = geometry.start_pose
        self.scene.block = RigidObjectCfg(
            prim_path="{ENV_REGEX_NS}/TBlock",
            spawn=UsdFileCfg(usd_path=str(block_usd)),
            init_state=RigidObjectCfg.InitialStateCfg(pos=tuple(map(float, start[:3])), rot=tuple(map(float, start[3:7]))),
        )
        # The pusher's friction (its USD has no material: Newton's default mu = 1). MuJoCo takes the larger mu of
        # two geoms, so the pusher-block pair gets friction_pusher when it is at least friction_table.
        self.scene.robot.spawn.physics_material = RigidBodyMaterialBaseCfg(
            static_friction=task.physical.friction_pusher, dynamic_friction=task.physical.friction_pusher
        )
        self.scene.robot.init_state.pos = tuple(map(float, task.robot.base_pose[:3]))
        self.scene.robot.init_state.rot = tuple(map(float, task.robot.base_pose[3:7]))
        for name in ("reset_position_noise", "reset_yaw_noise", "yaw_weight", "success_bonus"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"PushTEnvCfg.{name} must be finite and >= 0, got {value}")
        self.set_cameras(task)

    def load_task(self) -> PushTCfg:
        return load_pusht_cfg(self.task_yaml, list(self.task_overrides))

    def set_cameras(self, task: PushTCfg) -> None:
        """Write ``scene.static_camera`` / ``scene.wrist_camera`` from ``cameras``, ``camera_width``, ``camera_height``
        and ``static_camera_pose``. Runs at construction and again when the env is built, so fields changed after
        construction (as Isaac Lab's command-line overrides do) take effect."""
        cameras = self.cameras
        names = isinstance(cameras, (tuple, list)) and all(isinstance(n, str) and n in CAMERA_NAMES for n in cameras)
        if not names or len(set(cameras)) != len(cameras):
            raise ConfigError(f"PushTEnvCfg.cameras must be distinct names from {CAMERA_NAMES}, got {cameras!r}")
        width, height = self.camera_width, self.camera_height
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (width, height)):
            raise ConfigError(
                f"PushTEnvCfg.camera_width and camera_height must be positive integers, got {width!r}, {height!r}")
        ring = ring_cameras(block_geometry(task).start_pose[:3], width=width, height=height)[0]
        try:
            X_WC = ring.X_WC if self.static_camera_pose is None else check_pose(self.static_camera_pose, "X_WC")
        except DataError as error:
            raise ConfigError(f"PushTEnvCfg.static_camera_pose: {error}") from None
        # One renderer config for both cameras: the block's Gaussians on its body, posed by the physics.
        block = GaussianBodyCfg(body_path="{ENV_REGEX_NS}/TBlock", cloud=block_cloud_factory(task))
        gaussians = GaussianRendererCfg(bodies=[block])
        camera = CameraCfg(
            prim_path="{ENV_REGEX_NS}/StaticCamera",  # parent: the env frame, the frame of the calibrations
            width=width,
            height=height,
            data_types=["rgb"],
            spawn=PinholeCameraCfg.from_intrinsic_matrix(ring.K.flatten().tolist(), width, height),
            offset=_camera_offset(X_WC),
            renderer_cfg=gaussians,
        )
        self.scene.static_camera = camera if "static" in cameras else None
        self.scene.wrist_camera = camera.replace(
            prim_path="{ENV_REGEX_NS}/Robot/panda_hand/WristCamera",
            offset=_camera_offset(X_HAND_WRIST),  # the core's wrist camera mount (render.virtual_cameras)
            update_latest_camera_pose=True,  # else Isaac Lab reads the pose once and the camera stays behind
        ) if "wrist" in cameras else None


@configclass
class PushTEnvCfg_PLAY(PushTEnvCfg):
    """Evaluation: fewer envs, every episode from the task's own start pose."""

    def __post_init__(self):
        super().__post_init__()
        self.scene.num_envs = 16
        self.reset_position_noise = 0.0
        self.reset_yaw_noise = 0.0


def enable_visual_forces(cfg: PushTEnvCfg, cameras: list[SensorCamera], correction: CoreSensorCfg | None = None) -> PushTEnvCfg:
    """Switch the visual forces on: a :class:`VisualForceSensorCfg` on the block seen by ``cameras`` (env frame),
    with the block's spheres as its Gaussians and, by default, the stand-in session's settings (kp = 10 N/m, a wrench
    planar in the table); the env then pushes the block with the sensor's wrench every control step. Frames are
    handed over with ``env.visual_force.set_frames``."""
    task = cfg.load_task()
    geometry, plane = block_geometry(task), table_plane(task.table)
    cfg.scene.visual_force = VisualForceSensorCfg(
        prim_path="{ENV_REGEX_NS}/TBlock",
        correction=correction if correction is not None else CoreSensorCfg(kp=10.0, plane_normal=[float(v) for v in plane[:3]]),
        cameras=list(cameras),
        cloud=functools.partial(cloud_from_spheres, geometry.centers, np.full(len(geometry.centers), geometry.radius)),
        body_com=[[float(v) for v in geometry.com]],
    )
    return cfg
