"""Build the follower a config asks for, always behind the safety layer."""

from __future__ import annotations

from dataclasses import dataclass, field

from real_is_sim.robot.franky_follower import FrankyCfg, FrankyFollower
from real_is_sim.robot.recorded_follower import RecordedFollower, RecordedFollowerCfg
from real_is_sim.robot.safety import SafeFollower, SafetyCfg
from real_is_sim.robot.simulated_follower import SimulatedFollower, SimulatedFollowerCfg

FOLLOWER_KINDS = ("simulated", "franky", "recorded")


@dataclass
class FollowerCfg:
    # "simulated" (model of the arm), "franky" (the real Franka) or "recorded" (a session's arm, played back)
    kind: str = "simulated"
    safety: SafetyCfg = field(default_factory=SafetyCfg)
    simulated: SimulatedFollowerCfg = field(default_factory=SimulatedFollowerCfg)
    franky: FrankyCfg = field(default_factory=FrankyCfg)
    recorded: RecordedFollowerCfg = field(default_factory=RecordedFollowerCfg)
    # A session starts only with the arm this close to the twin robot's start pose on every joint (rad): the first
    # target would otherwise be a jump (`real-is-sim home` brings a Franka there).
    start_tolerance_rad: float = 0.05

    def __post_init__(self):
        if self.kind not in FOLLOWER_KINDS:
            raise ValueError(f"kind must be one of {FOLLOWER_KINDS}, got {self.kind!r}")


def make_follower(cfg: FollowerCfg | None = None) -> SafeFollower:
    """The configured follower wrapped in a :class:`SafeFollower` (not started yet)."""
    cfg = cfg or FollowerCfg()
    if cfg.kind == "simulated":
        inner = SimulatedFollower(cfg.simulated)
    elif cfg.kind == "franky":
        inner = FrankyFollower(cfg.franky)
    else:
        inner = RecordedFollower(cfg.recorded)
    return SafeFollower(inner, cfg.safety)
