"""PushT task config: YAML loading, validation, the real-data option, the success rule."""

import numpy as np
import pytest

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.transforms import quat_from_yaw
from real_is_sim.twin.tblock import block_geometry, procedural_t_centers, table_plane
from real_is_sim_tasks.pusht import REAL_YAML, PushTCfg, is_success, load_pusht_cfg


def test_default_yaml_needs_no_shared_data():
    task = load_pusht_cfg()
    assert task.control_hz == 60.0 and task.block.source == "procedural"
    np.testing.assert_allclose(table_plane(task.table), [0, 0, 1, 0])
    geometry = block_geometry(task)
    assert geometry.start_pose[2] == pytest.approx(0.0)  # bottom spheres touch the z = 0 table
    assert np.min(geometry.centers[:, 2]) == pytest.approx(task.block.sphere_radius)


def test_procedural_t_fills_both_boxes():
    block = load_pusht_cfg().block
    centers = procedural_t_centers(block)
    r = block.sphere_radius
    assert centers[:, 0].min() == pytest.approx(-block.bar_length / 2 + r)
    assert centers[:, 1].min() == pytest.approx(-block.bar_width / 2 - block.stem_length + r)
    assert centers[:, 2].max() == pytest.approx(block.height - r)
    coarse = procedural_t_centers(load_pusht_cfg(overrides=["block.sphere_radius=0.015"]).block)
    assert len(coarse) < len(centers)


def test_real_option_uses_plane_and_scanned_block(shared_data):
    task = load_pusht_cfg(REAL_YAML)
    plane = table_plane(task.table)
    assert plane[2] > 0.99  # normal up: the scanned block is on its positive side
    geometry = block_geometry(task)
    assert len(geometry.centers) == 466
    from real_is_sim.transforms import quat_rotate

    world = geometry.start_pose[:3] + quat_rotate(geometry.start_pose[3:7], geometry.centers)
    assert np.min(world @ plane[:3] + plane[3]) == pytest.approx(geometry.radius, abs=1e-9)
    assert quat_rotate(geometry.start_pose[3:7], [0, 0, 1.0])[2] < -0.99  # the scanned body z points down


@pytest.mark.parametrize(
    "override, message",
    [
        ("block.source=cad", "block.source must be one of"),
        ("table.plane=[0,0,-1]", "table.plane needs 4 numbers"),
        ("block.sphere_radius=0.04", "more than half the smallest"),
        ("physical.friction_pusher=0.1", "at least half of friction_table"),
        ("physical.mass_scale=0", "mass_scale must be positive"),
        ("control_hz=-60", "control_hz must be positive"),
        ("robot.q_start=[0,0]", "robot.q_start needs 7 numbers"),
        ("unknown_key=1", "invalid PushTCfg config"),
    ],
)
def test_bad_values_raise_config_error(override, message):
    with pytest.raises(ConfigError, match=message):
        load_pusht_cfg(overrides=[override])


def test_success_rule_uses_position_and_yaw():
    goal = PushTCfg().goal
    at_goal = np.array(goal.pose, dtype=float)
    assert is_success(at_goal, goal)
    shifted = at_goal.copy()
    shifted[0] += 2 * goal.position_tolerance
    turned = at_goal.copy()
    yaw = np.arctan2(2 * at_goal[5] * at_goal[6], 1 - 2 * at_goal[5] ** 2)
    turned[3:7] = quat_from_yaw(yaw + 2 * goal.yaw_tolerance)
    assert not is_success(shifted, goal) and not is_success(turned, goal)
    np.testing.assert_array_equal(is_success(np.stack([at_goal, shifted, turned]), goal), [True, False, False])
    with pytest.raises(DataError):
        is_success(np.zeros(6), goal)
