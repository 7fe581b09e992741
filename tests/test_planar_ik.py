"""Pink planar IK: the pusher stays on the plane and upright while tracking; limits hold; bad targets are clear."""

import dataclasses

import numpy as np
import pytest

from real_is_sim.cell import CellCfg, RobotCfg, TableCfg
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.robot import franka
from real_is_sim.robot.kinematics import PandaKinematics
from real_is_sim.robot.planar_ik import PlanarIK
from real_is_sim.transforms import quat_from_yaw, quat_rotate, quat_to_matrix

HZ = 60.0


def world_tool(cell: CellCfg, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pusher centre and tool z axis in the world, by the project's own FK (not the IK's model)."""
    pose = PandaKinematics(cell.robot.pusher_offset).tool_pose(q)
    base = np.asarray(cell.robot.base_pose)
    return base[:3] + quat_rotate(base[3:7], pose.translation), quat_to_matrix(base[3:7]) @ pose.rotation[:, 2]


def track(ik: PlanarIK, targets: np.ndarray) -> list:
    ik.reset(np.asarray(ik.cell.robot.q_start))
    return [ik.step(target) for target in targets]


def circle(center, radius, seconds, period) -> np.ndarray:
    phase = 2 * np.pi * np.arange(int(seconds * HZ)) / HZ / period
    return np.asarray(center) + radius * np.stack([np.cos(phase), np.sin(phase)], axis=1)


@pytest.mark.parametrize("tilted", [False, True], ids=["flat table, base at origin", "tilted table, moved base"])
def test_pusher_stays_on_the_plane_and_upright_while_tracking_a_path(tilted):
    cell = CellCfg()
    if tilted:  # a scanned table is a little tilted; the robot base is not at the world origin
        base = np.concatenate([[0.05, -0.03, 0.01], quat_from_yaw(0.3)])
        cell = dataclasses.replace(cell, table=TableCfg(plane=[-0.0097, -0.0047, 0.99994, 0.009]),
                                   robot=RobotCfg(base_pose=base.tolist()))
    ik = PlanarIK(cell, height=0.035)
    # 1 s to come down from q_start, then a 12 cm circle at ~0.25 m/s target speed
    targets = np.concatenate([np.repeat([[0.4, 0.2]], int(HZ), axis=0), circle([0.45, 0.0], 0.12, 6.0, 3.0)])
    results = track(ik, targets)
    plane = np.asarray(ik.plane_world)
    normal = plane[:3] / np.linalg.norm(plane[:3])
    tracking = results[int(HZ) + 30:]  # after the descent and the jump onto the circle
    for r in tracking:
        p, z_axis = world_tool(cell, r.q)
        assert abs(normal @ p + plane[3] / np.linalg.norm(plane[:3]) - 0.035) <= 1e-3
        assert np.degrees(np.arccos(np.clip(-normal @ z_axis, -1, 1))) <= 1.0
        assert r.tracking_error_m < 0.01 and r.feasible
    q = np.array([cell.robot.q_start] + [r.q for r in results])
    assert np.all(q >= franka.Q_MIN) and np.all(q <= franka.Q_MAX)
    assert np.all(np.abs(np.diff(q, axis=0)) * HZ <= franka.QD_MAX + 1e-9)


def test_the_descent_onto_the_plane_is_rate_limited():
    ik = PlanarIK(CellCfg(), height=0.035, max_tool_speed=0.4)
    ik.reset(np.asarray(CellCfg().robot.q_start))
    start = ik.tool_position()
    heights = [ik.step(start[:2]).tool_position[2] for _ in range(int(HZ))]
    assert np.all(np.abs(np.diff(np.concatenate([[start[2]], heights]))) <= 0.4 / HZ + 1e-4)
    assert abs(heights[-1] - 0.035) < 1e-4


def test_an_unreachable_target_leaves_the_pusher_at_the_edge_of_reach_on_the_plane():
    ik = PlanarIK(CellCfg())
    results = track(ik, np.repeat([[1.5, 0.0]], int(4 * HZ), axis=0))
    last = results[-1]
    assert np.all(np.isfinite(last.q)) and last.feasible
    assert np.all(last.q >= franka.Q_MIN) and np.all(last.q <= franka.Q_MAX)
    assert 0.6 < last.tool_position[0] < 0.9  # as far as the arm reaches towards x = 1.5
    assert last.tracking_error_m > 0.5  # reported, not hidden
    assert abs(last.plane_error_m) < 1e-3 and last.tilt_deg < 1.0


def test_bad_input_is_one_clear_error():
    ik = PlanarIK(CellCfg())
    with pytest.raises(DataError, match="target"):
        ik.step([np.nan, 0.0])
    with pytest.raises(DataError, match="target"):
        ik.step([0.4, 0.0, 0.1])
    with pytest.raises(DataError, match="7 finite"):
        ik.reset(np.zeros(6))
    with pytest.raises(ConfigError, match="height"):
        PlanarIK(CellCfg(), height=-0.01)
