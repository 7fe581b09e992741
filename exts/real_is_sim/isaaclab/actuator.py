"""The visual-force actuator, the Isaac Lab way: the sensor's wrench goes into the object ``RigidObject``'s
permanent wrench composer (world frame, at the COM), which Isaac Lab writes into the simulation before every
physics step until it is replaced. It takes a ``RigidObject`` only: a robot (an ``Articulation``) is refused,
so a visual force can never reach a robot link.

Same rule as the core actuator (:mod:`real_is_sim.correction.actuator`): the wrench is scaled by ``gain``,
non-finite rows are dropped, and the spring gets a damper on the object's own motion (-c m v, -c I w).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from isaaclab.assets import BaseRigidObject
from isaaclab.utils import configclass
from isaaclab.utils.math import matrix_from_quat

from real_is_sim.errors import ConfigError


class VisualForceActuator:
    cfg: VisualForceActuatorCfg

    def __init__(self, cfg: VisualForceActuatorCfg, target: BaseRigidObject):
        for name in ("gain", "linear_damping", "angular_damping"):
            value = getattr(cfg, name)
            if not (isinstance(value, (int, float)) and value >= 0 and value < float("inf")):
                raise ConfigError(f"VisualForceActuatorCfg.{name} must be finite and >= 0, got {value!r}")
        # An Articulation is no BaseRigidObject in Isaac Lab: the robot cannot be passed here.
        if not isinstance(target, BaseRigidObject):
            raise ConfigError(f"VisualForceActuator pushes object bodies only (a RigidObject), got {type(target).__name__}")
        self.cfg = cfg
        self.target = target

    def apply(self, wrench: torch.Tensor, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Replace the visual force of ``env_ids`` (default all) by ``wrench`` ``[len(env_ids), n_obj, 6]``
        (force, torque; world frame, about the COM)."""
        obj = self.target
        ids = torch.arange(obj.num_instances, device=obj.device) if env_ids is None else torch.as_tensor(env_ids, device=obj.device).long()
        wrench = torch.as_tensor(wrench, dtype=torch.float32, device=obj.device)
        if wrench.shape != (len(ids), obj.num_bodies, 6):
            raise ValueError(f"wrench must have shape {(len(ids), obj.num_bodies, 6)}, got {tuple(wrench.shape)}")
        wrench = torch.where(torch.isfinite(wrench).all(dim=-1, keepdim=True), wrench, 0.0) * self.cfg.gain
        force, torque = wrench[..., :3].clone(), wrench[..., 3:].clone()
        if self.cfg.linear_damping or self.cfg.angular_damping:
            data = obj.data
            velocity = data.body_com_vel_w.torch[ids]  # [n, n_obj, 6] linear, angular (world)
            mass = data.body_mass.torch[ids]  # [n, n_obj]
            R = matrix_from_quat(data.body_link_quat_w.torch[ids])  # body -> world (quaternions xyzw)
            inertia = R @ data.body_inertia.torch[ids].reshape(*R.shape) @ R.transpose(-1, -2)
            force -= self.cfg.linear_damping * mass[..., None] * velocity[..., :3]
            torque -= self.cfg.angular_damping * torch.einsum("nbij,nbj->nbi", inertia, velocity[..., 3:])
        obj.permanent_wrench_composer.set_forces_and_torques_index(forces=force, torques=torque, env_ids=ids, is_global=True)

    def clear(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        ids = None if env_ids is None else torch.as_tensor(env_ids, device=self.target.device).long()
        self.target.permanent_wrench_composer.reset(ids)


@configclass
class VisualForceActuatorCfg:
    class_type: type = VisualForceActuator
    gain: float = 1.0
    """Scales the sensor's wrench; 0 disables the correction while keeping the wiring."""
    linear_damping: float = 20.0
    """1/s: the damper -c m v on the object, applied with the wrench (keeps the twin from ringing)."""
    angular_damping: float = 60.0
    """1/s: the damper -c I w."""
