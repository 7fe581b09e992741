"""Handover demonstrations: a policy drives from the start pose, the expert takes over (DAgger's idea, offline).

A policy trained by imitation drifts into states its demonstrations never visited (the arm somewhere mid-air, the
block half turned) and does not know how to go on from there. A handover episode shows the expert going on from
exactly such a state: the policy runs in its own offline twin for a drawn time, and the recorded demonstration starts
where it left the block and the arm. Only the expert's part is recorded; the policy's part only chooses the start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real_is_sim.errors import ConfigError


@dataclass
class HandoverState:
    object_pose: np.ndarray  # (7,) the block where the policy left it
    robot_q: np.ndarray  # (7,) the arm where the policy left it
    after_s: float  # how long the policy drove (less when it settled the block earlier)


class PolicyHandover:
    """``state_after(start_pose, episode)``: run ``checkpoint``'s policy from ``start_pose`` (the arm at its start)
    for a time drawn uniformly from ``after_s`` = (min, max) seconds with the episode's own seed, as the offline
    evaluation runs it (``execute`` waypoints per call), and return where it left block and arm."""

    def __init__(self, checkpoint: str, after_s=(2.0, 12.0), seed: int = 0, execute: int | None = 16):
        low, high = (float(v) for v in after_s)
        if not 0 < low <= high:
            raise ConfigError(f"handover times must satisfy 0 < min <= max, got {after_s}")
        self.checkpoint, self.after_s, self.seed, self.execute = checkpoint, (low, high), seed, execute

    def state_after(self, start_pose: np.ndarray, episode: int, attempt: int = 0) -> HandoverState:
        """Each (episode, attempt) draws its own time and flow noise."""
        from real_is_sim.evaluation.offline import simulate_unit
        from real_is_sim.evaluation.spec import Episode, Unit, episode_seed

        seed = episode_seed(self.seed, episode, attempt)
        seconds = float(np.random.default_rng(seed).uniform(*self.after_s))
        pose = tuple(float(v) for v in np.asarray(start_pose, dtype=np.float64).reshape(7))
        unit = Unit("offline", self.checkpoint, [Episode(self.checkpoint, f"handover_{episode:02d}", episode, 0, seed, pose)],
                    seconds, execute=self.execute)
        last = {}

        def remember(tick: int, twin) -> None:
            last.update(pose=twin.object_poses()[0, 0].copy(), q=twin.robot_q()[0].copy(), t=(tick + 1) * twin.control_dt)

        simulate_unit(unit, on_tick=remember)
        return HandoverState(last["pose"], last["q"], round(last["t"], 4))
