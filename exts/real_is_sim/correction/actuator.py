"""The visual-force actuator: writes the sensor's wrenches into the twin's object bodies (step 4).

The twin adds its ``object_wrench`` buffer to the object bodies' forces in every physics substep of the
next control step; robot links have no entry in that buffer, so they can never receive a visual force.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class VisualForceActuatorCfg:
    # Scales the sensor's wrench; 0 disables the correction while keeping the wiring.
    gain: float = 1.0
    # The spring of the visual force gets a damper on the object's own motion: -c m v and -c I w (1/s).
    # It keeps the corrected twin from ringing around the observed pose, and is applied only with the wrench.
    linear_damping: float = 20.0
    angular_damping: float = 60.0

    def __post_init__(self):
        for name in ("gain", "linear_damping", "angular_damping"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")


class VisualForceActuator:
    def __init__(self, cfg: VisualForceActuatorCfg, twin):
        self.cfg = cfg
        self.twin = twin

    def apply(self, wrench: np.ndarray, world: int = 0) -> None:
        """Set world ``world``'s object wrenches ``(n_objects, 6)``; non-finite rows are written as zero."""
        wrench = np.asarray(wrench, dtype=np.float64)
        expected = (len(self.twin.object_names), 6)
        if wrench.shape != expected:
            raise ValueError(f"wrench must have shape {expected}, got {wrench.shape}")
        wrench = np.where(np.isfinite(wrench).all(axis=1, keepdims=True), wrench, 0.0) * self.cfg.gain
        if self.cfg.linear_damping or self.cfg.angular_damping:
            velocity = self.twin.object_velocities()[world]  # (n_obj, 6): linear, angular (world)
            wrench = wrench.copy()
            wrench[:, :3] -= self.cfg.linear_damping * self.twin.object_mass()[:, None] * velocity[:, :3]
            wrench[:, 3:] -= self.cfg.angular_damping * np.einsum("bij,bj->bi", self._world_inertia(world), velocity[:, 3:])
        self.twin.object_wrench[world] = wrench

    def _world_inertia(self, world: int) -> np.ndarray:
        from real_is_sim.transforms import quat_to_matrix

        R = quat_to_matrix(self.twin.object_poses()[world][:, 3:7])
        return R @ self.twin.object_inertia() @ np.swapaxes(R, -1, -2)

    def clear(self, world: int | None = None) -> None:
        if world is None:
            self.twin.object_wrench[:] = 0.0
        else:
            self.twin.object_wrench[world] = 0.0
