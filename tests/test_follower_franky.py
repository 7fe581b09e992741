"""FrankyFollower without a robot: config validation, real franky motion objects, loopback connection failures.

No test connects anywhere but 127.0.0.1."""

import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from real_is_sim.config import load_config
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.robot import franka
from real_is_sim.robot.follower import DynamicsFactorCfg, FollowerError, HealthStatus, RobotConnectionError
from real_is_sim.robot.franky_follower import FrankyCfg, FrankyFollower, joint_motion, relative_dynamics_factor

franky = pytest.importorskip("franky", reason="franky-control (the hardware extra) is not installed")

LOOPBACK = "127.0.0.1"
FCI_PORT = 1337  # libfranka's command port


def nothing_listens_on_the_fci_port() -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((LOOPBACK, FCI_PORT)) != 0


def test_targets_become_absolute_held_joint_motions_with_our_dynamics():
    dynamics = DynamicsFactorCfg(velocity=0.4, acceleration=0.2, jerk=0.1)
    motion = joint_motion(franka.Q_START, dynamics)
    assert isinstance(motion, franky.JointMotion)
    assert np.allclose(motion.target.position, franka.Q_START)
    assert np.allclose(motion.target.velocity, 0.0)
    assert motion.reference_type == franky.ReferenceType.Absolute
    assert motion.return_when_finished is False  # keeps holding the target until the next one takes over
    factor = motion.relative_dynamics_factor
    assert (factor.velocity, factor.acceleration, factor.jerk) == pytest.approx((0.4, 0.2, 0.1))
    factor = relative_dynamics_factor(dynamics)
    assert isinstance(factor, franky.RelativeDynamicsFactor) and factor.jerk == pytest.approx(0.1)


def test_non_finite_or_misshapen_targets_never_become_motions():
    with pytest.raises(DataError, match="finite"):
        joint_motion(np.full(7, np.nan), DynamicsFactorCfg())
    with pytest.raises(DataError, match=r"shape \(7,\)"):
        joint_motion(np.zeros(6), DynamicsFactorCfg())


def test_settings_from_yaml(tmp_path):
    path = tmp_path / "franky.yaml"
    path.write_text("address: 192.168.1.7\njoint_impedance: [1000, 1000, 1000, 800, 800, 500, 500]\n"
                    "dynamics:\n  velocity: 0.2\n")
    cfg = load_config(FrankyCfg, path)
    assert cfg.address == "192.168.1.7" and cfg.joint_impedance[3] == 800 and cfg.dynamics.velocity == 0.2


@pytest.mark.parametrize(
    "source, message",
    [
        ({"address": " "}, "address"),
        ({"connect_timeout_s": 0.0}, "connect_timeout_s"),
        ({"joint_impedance": [3000.0] * 6}, "joint_impedance"),
        ({"joint_impedance": [20000.0] * 7}, r"\[0, 14250\]"),
        ({"collision_torque_thresholds_nm": [-1.0] * 7}, "collision_torque_thresholds_nm"),
        ({"collision_force_thresholds_n": [30.0] * 7}, "collision_force_thresholds_n"),
        ({"dynamics": {"acceleration": 2.0}}, "acceleration"),
        ({"ip": LOOPBACK}, "ip"),
    ],
)
def test_malformed_franky_config_gives_one_clear_error(source, message):
    with pytest.raises(ConfigError, match=message):
        load_config(FrankyCfg, source)


def test_a_follower_that_is_not_connected_says_so():
    follower = FrankyFollower(FrankyCfg(address=LOOPBACK))
    assert follower.health().status is HealthStatus.STOPPED
    with pytest.raises(FollowerError, match="start"):
        follower.send(franka.Q_START, follower.now())
    with pytest.raises(FollowerError, match="not connected"):
        follower.read_state()


@pytest.mark.skipif(not nothing_listens_on_the_fci_port(), reason="something listens on 127.0.0.1:1337")
def test_a_refused_connection_is_one_clear_error():
    follower = FrankyFollower(FrankyCfg(address=LOOPBACK, require_realtime_kernel=False, connect_timeout_s=5.0))
    started = time.monotonic()
    with pytest.raises(RobotConnectionError, match=f"cannot connect to the Franka at {LOOPBACK}: .*refused"):
        follower.start()
    assert time.monotonic() - started < 5.0


# A loopback server that accepts the FCI connection and never answers: libfranka then blocks (tens of seconds
# or more), so it runs in a child process that ends itself with os._exit once the follower has given up.
SILENT_ROBOT = textwrap.dedent(
    f"""
    import os, socket, threading, time
    from real_is_sim.robot.follower import RobotConnectionError
    from real_is_sim.robot.franky_follower import FrankyCfg, FrankyFollower
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("{LOOPBACK}", {FCI_PORT}))
    server.listen(4)
    held = []
    threading.Thread(target=lambda: [held.append(server.accept()) for _ in iter(int, 1)], daemon=True).start()
    follower = FrankyFollower(FrankyCfg(address="{LOOPBACK}", require_realtime_kernel=False, connect_timeout_s=1.0))
    started = time.monotonic()
    try:
        follower.start()
        print("CONNECTED")
    except RobotConnectionError as exc:
        print(f"ERROR after {{time.monotonic() - started:.2f}} s: {{exc}}", flush=True)
    os._exit(0)
    """
)


@pytest.mark.skipif(not nothing_listens_on_the_fci_port(), reason="something listens on 127.0.0.1:1337")
def test_a_robot_that_never_answers_gives_one_clear_error_within_the_timeout():
    child = subprocess.run([sys.executable, "-c", SILENT_ROBOT], capture_output=True, text=True, timeout=60)
    lines = child.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("ERROR after"), child.stdout + child.stderr
    seconds = float(lines[-1].split()[2])
    assert 1.0 <= seconds < 2.0
    assert "did not answer within 1.0 s" in lines[-1]
