"""Virtual cameras: the block where its pose says, from a static camera and from the hand, batched like single renders."""

import numpy as np
import pytest

from real_is_sim.errors import DataError
from real_is_sim.render.virtual_cameras import VirtualCameras, render_virtual
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.transforms import pose_to_matrix, viewmat_from_opengl
from real_is_sim.twin.tblock import block_geometry
from real_is_sim_tasks.pusht import load_pusht_cfg, object_mask
from real_is_sim_tasks.pusht.scripted import ScriptedPusher

W, H = 96, 72


@pytest.fixture(scope="module")
def scene():
    cell = load_pusht_cfg()
    cameras = VirtualCameras(cell)
    pusher = ScriptedPusher(cell)
    block = np.array([[0.45, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    # the pusher 12 cm above the block's bar: the wrist camera looks down on it
    q_above = pusher.joint_path(np.array([pusher.start_tool_position(), [0.45, 0.0, 0.12]]), 0.5, 1 / 60)[-1]
    return cell, cameras, block, np.asarray(cell.robot.q_start, dtype=np.float64), q_above


def _block_centroid(image):
    mask = object_mask(image)
    assert mask.sum() > 10, "the block is not in view"
    v, u = np.nonzero(mask)
    return np.array([u.mean(), v.mean()])


def test_the_static_camera_sees_the_block_where_its_pose_projects(scene):
    cell, cameras, block, q_start, _ = scene
    K = ring_cameras(block_geometry(cell).start_pose[:3], width=W, height=H)[0].K  # the same camera built at W x H

    def projected(pose):
        centre = pose_to_matrix(pose) @ np.append(cameras.cloud.means.numpy().mean(0), 1.0)
        p = viewmat_from_opengl(cameras.cameras[0].X_WC) @ centre
        return (K @ (p[:3] / p[2]))[:2]

    moved = block.copy()
    moved[0, 0] += 0.12  # across the first camera's view
    assert np.linalg.norm(projected(moved[0]) - projected(block[0])) > 5.0
    for pose in (block, moved):
        image = cameras.render("static", pose, q_start, W, H)
        assert image.shape == (H, W, 3) and image.dtype == np.uint8
        assert np.linalg.norm(_block_centroid(image) - projected(pose[0])) < 2.0  # pixels


def test_the_wrist_camera_rides_on_the_hand(scene):
    _, cameras, block, q_start, q_above = scene
    assert not object_mask(cameras.render("wrist", block, q_start, W, H)).any()  # at home the block is out of view
    centroid = _block_centroid(cameras.render("wrist", block, q_above, W, H))
    assert 0 < centroid[0] < W and 0 < centroid[1] < H
    # the static view does not depend on where the wrist is, except for the arm it shows
    assert not np.array_equal(cameras.render("static", block, q_start, W, H), cameras.render("static", block, q_above, W, H))


def test_a_batch_renders_like_one_state_at_a_time(scene):
    cell, cameras, block, q_start, q_above = scene
    poses = np.repeat(block[None], 3, axis=0)
    poses[:, 0, 0] += [-0.04, 0.0, 0.04]
    qs = np.stack([q_start, q_above, q_above])
    for kind in ("static", "wrist"):
        batch = cameras.render(kind, poses, qs, W, H)
        assert batch.shape == (3, H, W, 3)
        for b in range(3):
            assert np.array_equal(batch[b], cameras.render(kind, poses[b], qs[b], W, H))
    assert np.array_equal(render_virtual("static", poses, qs, W, H, cell=cell), cameras.render("static", poses, qs, W, H))


def test_bad_input_is_one_clear_error(scene):
    _, cameras, block, q_start, _ = scene
    with pytest.raises(DataError, match="kind must be one of"):
        cameras.render("top", block, q_start, W, H)
    with pytest.raises(DataError, match=r"\(n_obj, 7\)"):
        cameras.render("static", block[0], q_start, W, H)
    with pytest.raises(DataError, match="no static camera"):
        cameras.render("static", block, q_start, W, H, camera="nope")


def test_scenes_side_by_side_in_one_call_match_state_by_state(scene):
    # the gsplat path (scenes 100 m apart in one call), run here on the CPU backend
    cell, cameras, block, q_start, q_above = scene
    spaced = VirtualCameras(cell, spaced=True)
    poses = np.repeat(block[None], 3, axis=0)
    poses[:, 0, 1] += [-0.03, 0.0, 0.03]
    qs = np.stack([q_start, q_above, q_start])
    for kind in ("static", "wrist"):
        batch = spaced.render(kind, poses, qs, W, H).astype(int)
        single = np.stack([cameras.render(kind, poses[b], qs[b], W, H) for b in range(3)]).astype(int)
        assert np.abs(batch - single).max() <= 2  # float32 rounding of the shifted positions
        assert np.abs(batch - single).mean() < 0.05
