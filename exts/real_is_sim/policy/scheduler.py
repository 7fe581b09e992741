"""Waypoint scheduler: action chunks -> joint targets at the control rate, for N environments at once.

Waypoint k of a chunk is the target during [k H/m, (k+1) H/m) after the chunk arrived (one switch every
1/32 s = 1.875 ticks of 60 Hz, so a tick targets the waypoint whose slot it falls in). Receding horizon: only the
first ``execute`` waypoints of each chunk are run (all m by default); after ``execute`` H/m seconds the chunk is
done and the environment asks for a new one (:meth:`needs_chunk`), the rest of the chunk is dropped.
"""

from __future__ import annotations

import numpy as np

from real_is_sim.errors import ConfigError, DataError


class WaypointScheduler:
    def __init__(self, num_envs: int, waypoints: int = 32, horizon_s: float = 1.0, control_hz: float = 60.0,
                 execute: int | None = None) -> None:
        ticks = horizon_s * control_hz
        execute = waypoints if execute is None else execute
        if num_envs < 1 or waypoints < 1 or ticks < 1:
            raise ConfigError(f"scheduler needs num_envs, waypoints >= 1 and horizon_s * control_hz >= 1, got "
                              f"{num_envs}, {waypoints}, {horizon_s} s * {control_hz} Hz")
        if not 1 <= execute <= waypoints or execute * ticks / waypoints < 1:
            raise ConfigError(f"scheduler execute must be in [1, waypoints={waypoints}] and last >= 1 tick, "
                              f"got {execute}")
        self.num_envs, self.waypoints, self.execute = num_envs, waypoints, execute
        self.horizon_ticks = int(round(ticks))  # ticks over all m waypoints (60 for 1 s at 60 Hz)
        self.ticks_per_chunk = int(round(execute * ticks / waypoints))  # ticks until a new chunk is needed
        self.chunks = np.zeros((num_envs, waypoints, 8))
        self.tick = np.full(num_envs, self.ticks_per_chunk)  # no chunk yet: every env needs one
        self.progress = np.zeros(num_envs)  # the progress of the waypoint now targeted

    def needs_chunk(self) -> np.ndarray:
        """Indices of the environments whose chunk is done (or that never had one)."""
        return np.flatnonzero(self.tick >= self.ticks_per_chunk)

    def set_chunks(self, env_ids, chunks) -> None:
        """Start ``chunks`` [len(env_ids), m, 8] in those environments from their first waypoint."""
        env_ids = np.asarray(env_ids, dtype=int).reshape(-1)
        chunks = np.asarray(chunks, dtype=np.float64)
        if chunks.shape != (len(env_ids), self.waypoints, 8):
            raise DataError(f"chunks must be [{len(env_ids)}, {self.waypoints}, 8], got {chunks.shape}")
        self.chunks[env_ids] = chunks
        self.tick[env_ids] = 0

    def step(self) -> np.ndarray:
        """Joint targets [N, 7] for this control tick (every env must hold a running chunk); updates ``progress``."""
        if len(self.needs_chunk()):
            raise DataError(f"environments {self.needs_chunk().tolist()} have no running chunk: set_chunks first")
        index = np.minimum(self.tick * self.waypoints // self.horizon_ticks, self.execute - 1)
        waypoint = self.chunks[np.arange(self.num_envs), index]
        self.progress = waypoint[:, 7].copy()
        self.tick += 1
        return waypoint[:, :7].copy()
