"""FrankyFollower end to end against franky-sim (pip package ``franky-sim``: a Franka simulator, MuJoCo inside, that
speaks the libfranka network protocol on 127.0.0.1), through the product's path: make_follower -> SafeFollower.

1. connect: wall time of ``FrankyFollower.connect()`` (connection, impedance and collision settings);
2. tracking: the twin sends ``twin_sweep`` at 60 Hz for 2 periods; RMS / max joint error and the lag;
3. watchdog: the twin goes silent mid-sweep; time from the hold command until the joints rest;
4. server killed (SIGTERM) mid-stream: time until the follower reports the lost connection.

    python scripts/bench_franky_sim.py

The last stdout line is one JSON object. tests/test_franky_sim.py uses the helpers below.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from real_is_sim.robot import franka
from real_is_sim.robot.follower import HealthStatus, RobotConnectionError
from real_is_sim.robot.follower_factory import FollowerCfg, make_follower
from real_is_sim.robot.franky_follower import FrankyCfg, FrankyFollower

LOOPBACK = "127.0.0.1"
FCI_PORT = 1337  # libfranka's command port
TWIN_RATE_HZ = 60.0
# The sweep moves the tool ~0.2 m over the table, level (joints 2/4/6 as in tracking.pusht_sweep). Joint 1 only
# moves down from Q_START: franky-sim simulates an FR3, whose joint 1 ends at 2.7437 rad, 0.09 rad above Q_START.
SWEEP_DIRECTION = np.array([-0.3, 0.1, 0.0, -0.2, 0.0, 0.1, 0.0])
SWEEP_PERIOD_S = 4.0


def twin_sweep(t):
    """Twin joints at ``t`` (s, or an array of times: one row each): from Q_START out along SWEEP_DIRECTION and
    back, smoothly (zero velocity at t = 0)."""
    out = 0.5 * (1.0 - np.cos(2.0 * np.pi * np.asarray(t) / SWEEP_PERIOD_S))
    return franka.Q_START + np.multiply.outer(out, SWEEP_DIRECTION)


def port_accepts(host: str = LOOPBACK, port: int = FCI_PORT) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


class FrankySimServer:
    """franky-sim (MuJoCo) as a child process on 127.0.0.1. ``--hostname`` pins the address: without it the
    server moves to 127.0.0.2 when the port is busy."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout_s: float = 30.0) -> float:
        """Start it and wait until its FCI port accepts connections; returns the seconds that took."""
        if port_accepts():
            raise RuntimeError(f"something already listens on {LOOPBACK}:{FCI_PORT}: another franky-sim or robot server")
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            # "-s mujoco": the default simulator choice tries genesis first and crashes without it.
            self.process = subprocess.Popen(
                [sys.executable, "-m", "franky_sim.run_server", "-s", "mujoco", "--hostname", LOOPBACK],
                stdout=log, stderr=subprocess.STDOUT,
            )
        while not port_accepts():
            if self.process.poll() is not None or time.monotonic() - started > timeout_s:
                self.stop()
                raise RuntimeError(f"franky-sim did not open {LOOPBACK}:{FCI_PORT} within {timeout_s} s; "
                                   f"its log:\n{self.log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        return time.monotonic() - started

    def stop(self) -> None:
        """SIGTERM (it stops at once), SIGKILL if it has not after 5 s."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def franky_sim_follower_cfg() -> FollowerCfg:
    """The product's franky follower config, aimed at franky-sim: loopback, no real-time kernel here."""
    return FollowerCfg(kind="franky", franky=FrankyCfg(address=LOOPBACK, require_realtime_kernel=False))


def move_arm_to(q_target: np.ndarray, tolerance_rad: float = 2e-3, timeout_s: float = 15.0) -> None:
    """Put franky-sim's arm (it starts at its own home pose) at ``q_target``, then release the connection. Set-up
    only, not the product path: the joint-space path from home leaves the safety layer's workspace box."""
    robot = FrankyFollower(franky_sim_follower_cfg().franky)
    try:
        robot.move_to(q_target, tolerance_rad, timeout_s)
    finally:
        robot.close()


def stream(follower, trajectory, duration_s: float, rate_hz: float = TWIN_RATE_HZ) -> dict[str, np.ndarray]:
    """Send ``trajectory(t)`` at ``rate_hz`` in real time (stamped ``follower.now()``) for ``duration_s``; after
    each target, read the arm. Returns arrays ``t`` [N], ``q_twin`` [N, 7], ``q_real`` [N, 7]."""
    t0 = follower.now()
    next_send = t0
    t_log, twin_log, real_log = [], [], []
    while (now := follower.now()) - t0 < duration_s:
        q_twin = trajectory(now - t0)
        decision = follower.send(q_twin, now)
        if not decision.accepted:
            raise RuntimeError(f"the safety layer refused a twin target: {decision.refusal} {decision.detail}")
        state = follower.read_state()
        t_log.append(state.stamp - t0)
        twin_log.append(q_twin)
        real_log.append(state.q)
        next_send += 1.0 / rate_hz
        time.sleep(max(0.0, next_send - follower.now()))
    return {"t": np.array(t_log), "q_twin": np.array(twin_log), "q_real": np.array(real_log)}


def tracking_figures(log: dict[str, np.ndarray], trajectory, max_lag_s: float = 0.5) -> dict[str, float]:
    """RMS / max joint error (rad) of the arm against the twin at the same time, the lag (s, 1 ms steps) that best
    aligns them (argmin over lags of the RMS of q_real(t) - trajectory(t - lag)) and the RMS left at that lag.
    ``trajectory`` takes an array of times (like ``twin_sweep``)."""
    error = log["q_real"] - log["q_twin"]
    lags = np.arange(0.0, max_lag_s + 1e-9, 0.001)
    rms_at_lag = [np.sqrt(np.mean((log["q_real"] - trajectory(log["t"] - lag)) ** 2)) for lag in lags]
    best = int(np.argmin(rms_at_lag))
    return {
        "rms_error_rad": float(np.sqrt(np.mean(error**2))),
        "max_error_rad": float(np.max(np.abs(error))),
        "lag_s": float(lags[best]),
        "rms_error_at_lag_rad": float(rms_at_lag[best]),
    }


def wait_for(condition, timeout_s: float, poll_s: float = 0.005) -> float:
    """Seconds until ``condition()`` is true; TimeoutError after ``timeout_s``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"not within {timeout_s} s")
        time.sleep(poll_s)
    return time.monotonic() - started


def seconds_until_still(follower, timeout_s: float, window_s: float = 0.2, tolerance_rad: float = 1e-3) -> float:
    """Seconds until the joints stay within ``tolerance_rad`` for ``window_s`` (counted from the start of that
    window)."""
    started = time.monotonic()
    window_start, q_window = started, follower.read_state().q
    while time.monotonic() - window_start < window_s:
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"the joints did not come to rest within {timeout_s} s")
        time.sleep(0.005)
        q = follower.read_state().q
        if np.max(np.abs(q - q_window)) > tolerance_rad:
            window_start, q_window = time.monotonic(), q
    return window_start - started


def main() -> None:
    server = FrankySimServer(Path(tempfile.mkdtemp(prefix="franky-sim-")) / "server.log")
    figures: dict[str, float] = {}
    try:
        figures["server_start_s"] = server.start()
        move_arm_to(franka.Q_START)
        follower = make_follower(franky_sim_follower_cfg())
        started = time.monotonic()
        follower.inner.connect()
        figures["connect_s"] = time.monotonic() - started
        follower.start()

        log = stream(follower, twin_sweep, 2 * SWEEP_PERIOD_S)
        figures.update(tracking_figures(log, twin_sweep))
        figures["targets"] = len(log["t"])

        follower.cfg.watchdog_stop_after_s = 2.0  # time to see the arm at rest before the watchdog stops it
        stream(follower, twin_sweep, SWEEP_PERIOD_S / 4)  # the twin goes silent at the sweep's fastest point
        wait_for(lambda: follower.health().status is HealthStatus.WATCHDOG_HOLD, timeout_s=1.0)
        figures["watchdog_hold_to_rest_s"] = seconds_until_still(follower, timeout_s=1.5)
        follower.start()  # resume after the hold

        t0 = follower.now()
        killed_at = None
        while True:
            now = follower.now()
            if killed_at is None and now - t0 > 1.0:
                server.stop()
                killed_at = time.monotonic()
            try:
                follower.send(twin_sweep(now - t0), now)
            except RobotConnectionError as exc:
                figures["kill_to_error_s"] = time.monotonic() - killed_at
                figures["error"] = str(exc)
                break
            time.sleep(1.0 / TWIN_RATE_HZ)
        follower.close()
    finally:
        server.stop()
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
