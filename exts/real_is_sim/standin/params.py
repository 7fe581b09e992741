"""The stand-in real world's hidden physical parameters: drawn from ranges the twin does not know."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import List

import numpy as np

from real_is_sim.cell import PhysicalParams


def _check_range(name: str, bounds, lower_limit: float) -> None:
    if len(bounds) != 2 or not all(math.isfinite(b) for b in bounds) or bounds[0] > bounds[1] or bounds[0] < lower_limit:
        raise ValueError(f"{name} must be [low, high] with {lower_limit} <= low <= high, got {list(bounds)}")


@dataclass
class HiddenParamRanges:
    friction_table: List[float] = field(default_factory=lambda: [0.3, 0.8])
    mass_scale: List[float] = field(default_factory=lambda: [0.7, 1.4])
    com_offset: float = 0.01  # m, uniform in a horizontal disc of this radius
    linear_damping: List[float] = field(default_factory=lambda: [0.0, 2.0])
    angular_damping: List[float] = field(default_factory=lambda: [0.0, 2.0])
    block_scale: List[float] = field(default_factory=lambda: [1.0, 1.0])  # e.g. [0.97, 1.03]

    def __post_init__(self):
        _check_range("friction_table", self.friction_table, 0.0)
        _check_range("mass_scale", self.mass_scale, 1e-6)
        _check_range("linear_damping", self.linear_damping, 0.0)
        _check_range("angular_damping", self.angular_damping, 0.0)
        _check_range("block_scale", self.block_scale, 1e-6)
        if not (math.isfinite(self.com_offset) and self.com_offset >= 0):
            raise ValueError(f"com_offset must be >= 0, got {self.com_offset}")


def draw_hidden_params(ranges: HiddenParamRanges, nominal: PhysicalParams, rng: np.random.Generator) -> PhysicalParams:
    """A reality the twin does not know: each parameter uniform in its range (the pusher keeps its friction
    ratio valid: Newton averages the two shapes' coefficients)."""
    friction = float(rng.uniform(*ranges.friction_table))
    radius, angle = ranges.com_offset * math.sqrt(rng.uniform()), rng.uniform(0, 2 * math.pi)
    return dataclasses.replace(
        nominal,
        friction_table=friction,
        friction_pusher=max(nominal.friction_pusher, 0.5 * friction),
        mass_scale=float(rng.uniform(*ranges.mass_scale)),
        com_offset=[radius * math.cos(angle), radius * math.sin(angle), 0.0],
        linear_damping=float(rng.uniform(*ranges.linear_damping)),
        angular_damping=float(rng.uniform(*ranges.angular_damping)),
        block_scale=float(rng.uniform(*ranges.block_scale)),
    )
