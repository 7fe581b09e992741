"""The arm as a deploy session recorded it: a follower that plays back ``follower.csv`` (t, q1..q7).

Replaying a session through the loop needs the robot the cameras saw where it really was: the loop renders the
arm at the follower's measured joints. This follower is stepped by the replay's clock; what it is sent is checked
by the safety layer as usual and then dropped (the recording already says where the arm went).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real_is_sim.errors import DataError
from real_is_sim.robot.follower import Follower, Health, HealthStatus, JointState

JOINT_COLUMNS = tuple(f"q{k}" for k in range(1, 8))


@dataclass
class RecordedFollowerCfg:
    path: str = ""  # a session's follower.csv
    control_dt_s: float = 0.001  # the step of step_to (the rows' times decide what is read)


def load_follower_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(t [T], q [T, 7])`` from a session's follower.csv; one DataError naming the problem otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no follower recording at {path}")
    rows = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    names = rows.dtype.names or ()
    missing = [c for c in ("t", *JOINT_COLUMNS) if c not in names]
    if missing:
        raise DataError(f"{path} lacks the column(s) {', '.join(missing)}")
    rows = np.atleast_1d(rows)
    t = np.asarray(rows["t"], dtype=float)
    q = np.stack([np.asarray(rows[c], dtype=float) for c in JOINT_COLUMNS], axis=1)
    if len(t) == 0 or not (np.all(np.isfinite(t)) and np.all(np.isfinite(q))) or np.any(np.diff(t) <= 0):
        raise DataError(f"{path} must hold finite rows in increasing time")
    return t, q


class RecordedFollower(Follower):
    def __init__(self, cfg: RecordedFollowerCfg):
        self.cfg = cfg
        self._t, self._q = load_follower_csv(cfg.path)
        self._now = 0.0
        self._running = False

    @property
    def realtime(self) -> bool:
        return False

    @property
    def control_dt_s(self) -> float:
        return self.cfg.control_dt_s

    def now(self) -> float:
        return self._now

    def step_to(self, t: float) -> None:
        self._now = max(self._now, float(t))

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        self._running = False

    def send(self, q: np.ndarray, stamp: float) -> None:
        pass  # the recording says where the arm went

    def read_state(self) -> JointState:
        # The newest row at or before now; before the first row, the first (the arm's start).
        k = max(int(np.searchsorted(self._t, self._now + 1e-9, side="right")) - 1, 0)
        return JointState(self._q[k].copy(), np.zeros(7), self._now)

    def health(self) -> Health:
        return Health(HealthStatus.OK) if self._running else Health(HealthStatus.STOPPED, "not started")

    def recover(self) -> None:
        pass
