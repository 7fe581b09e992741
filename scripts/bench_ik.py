"""Pink planar IK (real_is_sim.robot.planar_ik) tracking an operator-like target path at the 60 Hz control rate.

    python scripts/bench_ik.py                # IK alone, then the twin robot following the IK's joints
    python scripts/bench_ik.py --no-twin      # IK alone (no Newton model)

The path: 1 s to come down from q_start onto the plane (left out of the plane figures), a figure eight over the
table (0.15 x 0.2 m, period 6 s, peak target speed ~0.25 m/s) for 12 s, then the target jumping between the
corners of the PushT workspace every 1.5 s (the IK rate-limits it to max_tool_speed). Prints one JSON object on
its last line: ticks, plane_error_mm (max, p95), tilt_deg (max, p95), tracking_error_mm (median while following
the figure eight), solve_ms (median, p95, max), the largest joint velocity as a fraction of the Panda's limit,
the smallest distance to a joint limit, and with the twin the same plane figures for the twin's actual joints.
"""

import argparse
import json

import numpy as np

from real_is_sim.robot import franka
from real_is_sim.robot.planar_ik import PlanarIK
from real_is_sim_tasks.pusht import load_pusht_cfg

HZ = 60
DESCENT_S = 1.0
EIGHT_S = 12.0
CORNERS = np.array([[0.35, -0.2], [0.6, 0.2], [0.6, -0.2], [0.35, 0.2], [0.5, 0.0], [0.3, 0.3]])
JUMP_S = 1.5


def target_path(start_xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Targets [T, 2] at 60 Hz and a mask of the figure-eight ticks."""
    descent = np.repeat(start_xy[None], int(DESCENT_S * HZ), axis=0)
    t = np.arange(int(EIGHT_S * HZ)) / HZ
    phase = 2 * np.pi * t / 6.0
    eight = np.stack([0.45 + 0.075 * np.sin(2 * phase), 0.1 * np.sin(phase)], axis=1)
    # glide from the start to the eight's first point first, so the eight itself is followed from its start
    glide = np.linspace(start_xy, eight[0], int(1.5 * HZ))
    jumps = np.repeat(CORNERS, int(JUMP_S * HZ), axis=0)
    targets = np.concatenate([descent, glide, eight, jumps])
    is_eight = np.zeros(len(targets), bool)
    is_eight[len(descent) + len(glide) + HZ: len(descent) + len(glide) + len(eight)] = True  # after 1 s of settling
    return targets, is_eight


def percentiles(values, *qs) -> list[float]:
    return [round(float(np.percentile(values, q)), 4) for q in qs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-twin", action="store_true", help="time the IK alone, without the twin following it")
    args = parser.parse_args()

    task = load_pusht_cfg()
    ik = PlanarIK(task)
    q_start = np.asarray(task.robot.q_start)
    ik.reset(q_start)
    targets, is_eight = target_path(ik.tool_position()[:2])
    on_plane = np.arange(len(targets)) >= int(DESCENT_S * HZ)
    results = [ik.step(target) for target in targets]
    q = np.array([q_start] + [r.q for r in results])
    plane_mm = 1e3 * np.abs([r.plane_error_m for r in results])[on_plane]
    tilt = np.array([r.tilt_deg for r in results])[on_plane]
    solve_ms = [r.solve_ms for r in results]
    summary = {
        "ticks": len(results),
        "plane_error_mm": {"max": round(float(plane_mm.max()), 4), "p95": percentiles(plane_mm, 95)[0]},
        "tilt_deg": {"max": round(float(tilt.max()), 4), "p95": percentiles(tilt, 95)[0]},
        "tracking_error_mm_median_eight": round(1e3 * float(np.median([r.tracking_error_m for r, e in zip(results, is_eight) if e])), 3),
        "solve_ms": dict(zip(("median", "p95", "max"), percentiles(solve_ms, 50, 95, 100))),
        "max_joint_speed_fraction": round(float(np.max(np.abs(np.diff(q, axis=0)) * HZ / franka.QD_MAX)), 4),
        "min_joint_limit_distance_rad": round(float(np.min(np.minimum(q - franka.Q_MIN, franka.Q_MAX - q))), 4),
        "all_feasible": all(r.feasible for r in results),
    }
    if not args.no_twin:
        from real_is_sim.cli import quiet_warp
        from real_is_sim.twin import Twin

        quiet_warp()
        twin = Twin(task, 1)
        actual = []
        for r in results:
            twin.step(r.q[None])
            actual.append(ik.plane_errors(twin.robot_q()[0]))
        actual = np.array(actual)[on_plane]
        twin_plane_mm = 1e3 * np.abs(actual[:, 0])
        summary["twin"] = {"plane_error_mm": {"max": round(float(twin_plane_mm.max()), 4), "p95": percentiles(twin_plane_mm, 95)[0]},
                           "tilt_deg": {"max": round(float(actual[:, 1].max()), 4), "p95": percentiles(actual[:, 1], 95)[0]}}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
