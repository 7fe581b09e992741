"""Min-max scaling to [-1, 1] from dataset statistics (stored in every checkpoint)."""

from __future__ import annotations

import torch

# A dimension that hardly varies in the data (a joint the demonstrations never move) would be blown up by its
# tiny range; this floor keeps its scaled noise small instead.
MIN_RANGE = 1e-2


class Normalizer:
    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        self.low = low.float()
        self.high = high.float()
        self.center = (self.high + self.low) / 2
        self.half_range = torch.clamp((self.high - self.low) / 2, min=MIN_RANGE / 2)

    @classmethod
    def fit(cls, data: torch.Tensor, keep_dims: int = 1) -> "Normalizer":
        """Statistics over every axis of ``data`` but the last ``keep_dims`` (1: per feature, as for waypoints;
        2: per row and feature, as for DCT coefficients, whose scales differ by orders of magnitude)."""
        flat = data.float().reshape(-1, *data.shape[data.dim() - keep_dims:])
        return cls(flat.min(dim=0).values, flat.max(dim=0).values)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.center) / self.half_range

    def unnormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.half_range + self.center

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"low": self.low.clone(), "high": self.high.clone()}

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> "Normalizer":
        return cls(state["low"], state["high"])
