"""The twin robot runs a scripted PushT-like sweep; a SimulatedFollower (behind the safety layer) follows it.

Prints the tracking error and lag, writes follower_tracking.png to --out. The last stdout line is one JSON object.

    python scripts/follow_demo.py --out outputs/follow_demo --duration 16
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from real_is_sim.config import load_config  # noqa: E402
from real_is_sim.robot import franka  # noqa: E402
from real_is_sim.robot.follower_factory import FollowerCfg, make_follower  # noqa: E402
from real_is_sim.robot.kinematics import PandaKinematics  # noqa: E402
from real_is_sim.robot.tracking import estimate_lag_s, follow_trajectory, pusht_sweep, tracking_error  # noqa: E402
from real_is_sim.cli import quiet_warp


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("outputs/follow_demo"), help="folder for the plot")
    parser.add_argument("--duration", type=float, default=16.0, help="seconds of simulated time")
    parser.add_argument("--twin-rate", type=float, default=60.0, help="Hz at which the twin sends its joints")
    parser.add_argument("--config", type=Path, default=None, help="FollowerCfg YAML (kind must be simulated)")
    parser.add_argument("overrides", nargs="*", help="FollowerCfg overrides, e.g. simulated.tau_s=0.03")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    cfg = load_config(FollowerCfg, args.config, args.overrides)
    if cfg.kind != "simulated":
        parser.error("the demo drives a simulated follower in simulated time; use kind=simulated")
    follower = make_follower(cfg)
    log = follow_trajectory(follower, pusht_sweep, args.duration, args.twin_rate)
    rms, worst = tracking_error(log)
    lag = estimate_lag_s(log)
    print(f"tracking error: rms {rms:.4f} rad, max {worst:.4f} rad; lag {lag * 1000:.0f} ms")
    print(f"refused {dict(follower.refusals)}, clamped {dict(follower.filter.clamps)}")

    args.out.mkdir(parents=True, exist_ok=True)
    plot_path = args.out / "follower_tracking.png"
    plot(log, plot_path)
    print(f"wrote {plot_path}")
    result = {
        "rms_tracking_rad": rms,
        "max_tracking_rad": worst,
        "lag_ms": lag * 1000.0,
        "refusals": sum(follower.refusals.values()),
        "plot": str(plot_path),
    }
    print(json.dumps(result))


def plot(log, path: Path) -> None:
    kinematics = PandaKinematics()
    every = 10  # 100 Hz is plenty for the tool path
    tool_twin = np.array([kinematics.tool_position(q) for q in log.q_twin[::every]])
    tool_real = np.array([kinematics.tool_position(q) for q in log.q_real[::every]])
    figure, (joints, error, path_axes) = plt.subplots(1, 3, figsize=(16, 4.5))
    for joint, colour in zip((0, 1, 3), ("tab:blue", "tab:orange", "tab:green")):
        home = franka.Q_START[joint]
        joints.plot(log.t, log.q_twin[:, joint] - home, color=colour, linestyle="--", label=f"twin joint {joint + 1}")
        joints.plot(log.t, log.q_real[:, joint] - home, color=colour, label=f"follower joint {joint + 1}")
    joints.set(xlabel="time (s)", ylabel="q - Q_START (rad)", title="joints: twin (dashed) and follower")
    joints.legend(fontsize=7)
    error.plot(log.t, np.degrees(np.abs(log.q_real - log.q_twin)), label=[f"joint {j + 1}" for j in range(7)])
    error.legend(fontsize=7, ncol=2)
    error.set(xlabel="time (s)", ylabel="|error| (deg)", title="per-joint tracking error")
    path_axes.plot(tool_twin[:, 0], tool_twin[:, 1], "--", label="twin tool")
    path_axes.plot(tool_real[:, 0], tool_real[:, 1], label="follower tool")
    path_axes.set(xlabel="x (m, base)", ylabel="y (m, base)", title="tool path over the table", aspect="equal")
    path_axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
