"""Build the follower a config asks for, always behind the safety layer."""

from __future__ import annotations

from dataclasses import dataclass, field

from real_is_sim.robot.franky_follower import FrankyCfg, FrankyFollower
from real_is_sim.robot.safety import SafeFollower, SafetyCfg
from real_is_sim.robot.simulated_follower import SimulatedFollower, SimulatedFollowerCfg

FOLLOWER_KINDS = ("simulated", "franky")


@dataclass
class FollowerCfg:
    kind: str = "simulated"  # "simulated" (model of the arm) or "franky" (the real Franka)
    safety: SafetyCfg = field(default_factory=SafetyCfg)
    simulated: SimulatedFollowerCfg = field(default_factory=SimulatedFollowerCfg)
    franky: FrankyCfg = field(default_factory=FrankyCfg)

    def __post_init__(self):
        if self.kind not in FOLLOWER_KINDS:
            raise ValueError(f"kind must be one of {FOLLOWER_KINDS}, got {self.kind!r}")


def make_follower(cfg: FollowerCfg | None = None) -> SafeFollower:
    """The configured follower wrapped in a :class:`SafeFollower` (not started yet)."""
    cfg = cfg or FollowerCfg()
    inner = SimulatedFollower(cfg.simulated) if cfg.kind == "simulated" else FrankyFollower(cfg.franky)
    return SafeFollower(inner, cfg.safety)
