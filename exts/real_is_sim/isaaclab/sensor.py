"""The visual-force sensor as an Isaac Lab sensor: one core :class:`real_is_sim.correction.sensor.VisualForceSensor`
per env, fed with the object's pose from the Newton state and with the camera frames handed to :meth:`set_frames`.

Each env's cameras, Gaussians and poses live in that env's own frame (the frame of the core twin and of the
calibration files): the sensor subtracts the env origin from the simulated pose before rendering. The wrench is
a world-frame vector, the same in both frames. Frames are evidence for one reading only: once used they are
dropped, and an env without new frames reads as "no camera delivered" (zero wrench, health degrading), exactly
as the core sensor reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, field

import numpy as np
import torch
import warp as wp
from isaaclab.sensors import SensorBase, SensorBaseCfg
from isaaclab.sim import SimulationContext
from isaaclab.sim.utils.queries import path_expr_to_glob, resolve_matching_prims_from_source
from isaaclab.utils import configclass
from isaaclab_newton.physics import NewtonManager
from newton.selection import ArticulationView
from pxr import UsdPhysics

from real_is_sim.correction import sensor as core
from real_is_sim.errors import ConfigError
from real_is_sim.gaussians.cloud import GaussianCloud


@dataclass
class VisualForceSensorData:
    """Latest reading of every env; ``n_obj`` objects per env (the bodies the sensor's prim path matches)."""

    wrench: torch.Tensor  # [num_envs, n_obj, 6] force, torque (world frame, about each object's COM)
    loss_before: torch.Tensor  # [num_envs] photometric loss at the twin's pose (nan: no frames)
    loss_after: torch.Tensor  # [num_envs] after the Adam iterations
    residual: torch.Tensor  # [num_envs, n_obj] mean colour error under each object's Gaussians (nan: not in view)
    confidence: torch.Tensor  # [num_envs, n_obj] in [0, 1]
    lost: torch.Tensor  # [num_envs, n_obj] bool
    readings: list = field(default_factory=list)  # the core SensorReading of each env (cameras used / rejected)


class VisualForceSensor(SensorBase):
    cfg: VisualForceSensorCfg

    def __init__(self, cfg: VisualForceSensorCfg):
        super().__init__(cfg)  # validates: no MISSING field
        if len(self.cfg.body_com) != 1:
            raise ConfigError(f"VisualForceSensorCfg.body_com: one object per env is supported, got {len(self.cfg.body_com)}")
        if not self.cfg.cameras:
            raise ConfigError("VisualForceSensorCfg.cameras: the sensor needs at least one camera")
        self._data: VisualForceSensorData | None = None

    def __str__(self) -> str:
        return f"VisualForceSensor @ '{self.cfg.prim_path}': {len(self.cfg.cameras)} cameras, {self._num_envs} envs"

    @property
    def data(self) -> VisualForceSensorData:
        self._update_outdated_buffers()
        return self._data

    @property
    def core_sensors(self) -> list[core.VisualForceSensor]:
        """The per-env core sensors (one each: their health counters are per env)."""
        return self._sensors

    def set_frames(self, frames: Sequence[Sequence[np.ndarray | None]], env_ids: Sequence[int] | None = None,
                   occluders: Sequence[GaussianCloud | None] | None = None) -> None:
        """Hand over the latest camera frames: ``frames[i]`` has one image per camera (``HxWx3``, uint8 or float in
        [0, 1], None where a camera delivered nothing) for env ``env_ids[i]`` (default: all envs in order).
        ``occluders[i]``: a static cloud in that env's frame (e.g. the robot's Gaussians) rendered but never moved."""
        ids = list(range(self._num_envs)) if env_ids is None else [int(i) for i in env_ids]
        if len(frames) != len(ids) or (occluders is not None and len(occluders) != len(ids)):
            raise ValueError(f"set_frames: {len(ids)} envs need {len(ids)} frame lists (and occluders), got {len(frames)}")
        for k, env in enumerate(ids):
            if not 0 <= env < self._num_envs:
                raise ValueError(f"set_frames: env id {env} outside [0, {self._num_envs})")
            self._frames[env] = list(frames[k])
            self._occluders[env] = None if occluders is None else occluders[k]
        self._data_dirty = True  # the next read of .data uses them

    def reset(self, env_ids: Sequence[int] | None = None, env_mask: wp.array | None = None) -> None:
        super().reset(env_ids, env_mask)
        if not self._is_initialized:
            return
        ids = range(self._num_envs) if env_ids is None else env_ids
        for env in ids:
            env = int(env)
            self._sensors[env].reset_health()
            self._frames[env] = None
            self._occluders[env] = None
            self._write(env, None)

    # ------------------------------------------------------------------ SensorBase
    def _initialize_impl(self):
        super()._initialize_impl()
        _, expr = resolve_matching_prims_from_source(
            self.cfg.prim_path, predicate=lambda prim: prim.HasAPI(UsdPhysics.RigidBodyAPI), expected_num_matches=1
        )[0]
        self._view = ArticulationView(NewtonManager.get_model(), path_expr_to_glob(expr), verbose=False)
        if self._view.count != self._num_envs:
            raise RuntimeError(f"VisualForceSensor: '{self.cfg.prim_path}' matched {self._view.count} bodies for {self._num_envs} envs")
        plan = SimulationContext.instance().get_clone_plan()
        origins = np.zeros((self._num_envs, 3)) if plan is None or plan.positions is None else np.asarray(plan.positions)
        self._env_origins = np.asarray(origins, dtype=np.float64).reshape(self._num_envs, 3)
        com = np.asarray(self.cfg.body_com, dtype=np.float64)
        self.cloud = self.cfg.cloud()
        self._sensors = [core.VisualForceSensor(self.cfg.correction, self.cloud, list(self.cfg.cameras), com)
                         for _ in range(self._num_envs)]
        self._frames: list[list | None] = [None] * self._num_envs
        self._occluders: list[GaussianCloud | None] = [None] * self._num_envs
        n, n_obj, dev = self._num_envs, len(com), self._device
        self._data = VisualForceSensorData(
            wrench=torch.zeros(n, n_obj, 6, device=dev),
            loss_before=torch.full((n,), float("nan"), device=dev),
            loss_after=torch.full((n,), float("nan"), device=dev),
            residual=torch.full((n, n_obj), float("nan"), device=dev),
            confidence=torch.zeros(n, n_obj, device=dev),
            lost=torch.zeros(n, n_obj, dtype=torch.bool, device=dev),
            readings=[None] * n,
        )

    def object_poses(self) -> np.ndarray:
        """``(num_envs, 7)`` object body poses in each env's frame (xyzw), as the sensor renders them."""
        poses = self._view.get_root_transforms(NewtonManager.get_state_0()).numpy().reshape(self._num_envs, 7)
        poses = poses.astype(np.float64)
        poses[:, :3] -= self._env_origins
        return poses

    def _update_buffers_impl(self, env_mask: wp.array):
        envs = np.flatnonzero(env_mask.numpy())
        if len(envs) == 0:
            return
        poses = self.object_poses()
        for env in envs:
            frames = self._frames[env] if self._frames[env] is not None else [None] * len(self.cfg.cameras)
            reading = self._sensors[env].update(poses[env][None], frames, self._occluders[env])
            self._frames[env] = None  # a frame set is evidence for one reading only
            self._write(env, reading)

    def _write(self, env: int, reading: core.SensorReading | None) -> None:
        d = self._data
        d.readings[env] = reading
        if reading is None:
            d.wrench[env] = 0.0
            d.loss_before[env] = d.loss_after[env] = float("nan")
            d.residual[env] = float("nan")
            d.confidence[env] = 0.0
            d.lost[env] = False
            return
        d.wrench[env] = torch.as_tensor(reading.wrench, dtype=torch.float32)
        d.loss_before[env] = reading.loss_before
        d.loss_after[env] = reading.loss_after
        d.residual[env] = torch.as_tensor(reading.residual, dtype=torch.float32)
        d.confidence[env] = torch.as_tensor(reading.confidence, dtype=torch.float32)
        d.lost[env] = torch.as_tensor(reading.lost)

    def _invalidate_initialize_callback(self, event):
        super()._invalidate_initialize_callback(event)
        self._view = None


@configclass
class VisualForceSensorCfg(SensorBaseCfg):
    """The visual-force sensor of one rigid object per env (``prim_path``: its rigid body, e.g.
    ``{ENV_REGEX_NS}/TBlock``)."""

    class_type: type = VisualForceSensor
    correction: core.VisualForceSensorCfg = core.VisualForceSensorCfg()
    """Render / optimise / wrench settings of the core sensor."""
    cameras: list = MISSING
    """``real_is_sim.correction.sensor.SensorCamera`` views, in the env's frame (OpenCV axes)."""
    cloud: Callable[[], GaussianCloud] = MISSING
    """Makes the object's Gaussians in its body frame (``body_ids`` 0), e.g. a ``functools.partial`` of
    ``cloud_from_spheres``: a callable because configclass walks (and would write into) a frozen cloud's fields."""
    body_com: list = MISSING
    """``[[x, y, z]]``: the object's centre of mass in its body frame."""
