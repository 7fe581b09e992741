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

    def __post_init__(self):
        if not np.isfinite(self.gain) or self.gain < 0:
            raise ValueError(f"gain must be finite and >= 0, got {self.gain}")


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
        self.twin.set_object_wrench(wrench, world=world)

    def clear(self, world: int | None = None) -> None:
        zero = np.zeros((len(self.twin.object_names), 6))
        for w in range(self.twin.num_worlds) if world is None else [world]:
            self.twin.set_object_wrench(zero, world=w)
