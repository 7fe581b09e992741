"""upside_down_pose: the twin pose of a mirror-symmetric body, other face up (synthetic T, no data needed)."""

import numpy as np
import pytest
import torch
from scipy.spatial import cKDTree

from real_is_sim.errors import DataError
from real_is_sim.gaussians import GaussianCloud, pose_cloud
from real_is_sim.render.pose_fit import upside_down_pose
from real_is_sim.transforms import quat_from_axis_angle, quat_multiply, quat_to_matrix

PLANE = np.array([-0.0097, -0.0047, 0.99994, 0.009])  # the real table's, slightly tilted
NORMAL = PLANE[:3] / np.linalg.norm(PLANE[:3])


def t_block_cloud(spacing=0.01):
    """A T (crossbar 20 x 5 cm, stem 5 x 15 cm) 3 cm thick, its thickness centred on the body origin."""
    xs, ys = np.meshgrid(np.arange(-0.1, 0.1001, spacing), np.arange(-0.1, 0.1001, spacing))
    xs, ys = xs.ravel(), ys.ravel()
    in_t = ((ys >= 0.05) & (np.abs(xs) <= 0.1)) | ((ys < 0.05) & (np.abs(xs) <= 0.025))
    top = np.stack([xs[in_t], ys[in_t], np.full(in_t.sum(), 0.015)], axis=-1)
    means = np.concatenate([top, top * [1, 1, -1]])
    n = len(means)
    return GaussianCloud(torch.tensor(means, dtype=torch.float32), torch.tensor([[1.0, 0, 0, 0]]).repeat(n, 1),
                         torch.full((n, 3), 0.004), torch.full((n,), 0.5), torch.full((n, 3), 0.5),
                         torch.zeros(n, dtype=torch.int64))


def world_means(cloud, pose):
    return pose_cloud(cloud, torch.tensor(pose[None], dtype=torch.float32))[0].double().numpy()


@pytest.fixture
def resting_t():
    cloud = t_block_cloud()
    yaw = quat_from_axis_angle(NORMAL, 0.7)
    tilt = quat_from_axis_angle(np.cross([0, 0, 1.0], NORMAL), np.arccos(NORMAL[2]))  # body z along the normal
    q = quat_multiply(yaw, tilt)
    return cloud, np.concatenate([[0.45, 0.32, 0.02], q])


def test_upside_down_keeps_the_footprint_and_height_and_flips_the_faces(resting_t):
    cloud, pose = resting_t
    flipped = upside_down_pose(cloud, pose, PLANE)
    before, after = world_means(cloud, pose), world_means(cloud, flipped)
    # the same set of points (the T maps onto itself), each face now where the other was
    assert cKDTree(before).query(after)[0].max() < 1e-4
    top = cloud.means[:, 2].numpy() > 0
    assert np.allclose(after[top] @ NORMAL, before[~top].mean(0) @ NORMAL, atol=1e-4)
    # the body z axis points the other way; the origin keeps its height above the table
    z_before, z_after = quat_to_matrix(pose[3:])[:, 2], quat_to_matrix(flipped[3:])[:, 2]
    assert z_before @ z_after == pytest.approx(-1.0, abs=1e-6)
    assert flipped[:3] @ NORMAL == pytest.approx(pose[:3] @ NORMAL, abs=1e-6)
    # twice upside down is where it started
    again = upside_down_pose(cloud, flipped, PLANE)
    assert np.abs(world_means(cloud, again) - before).max() < 1e-4


def test_upside_down_rejects_bad_input(resting_t):
    cloud, pose = resting_t
    with pytest.raises(DataError, match="7 finite numbers"):
        upside_down_pose(cloud, pose[:6], PLANE)
    with pytest.raises(DataError, match="7 finite numbers"):
        upside_down_pose(cloud, np.full(7, np.nan), PLANE)
    with pytest.raises(DataError, match="plane"):
        upside_down_pose(cloud, pose, [0, 0, 0, 1])
