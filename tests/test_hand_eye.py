"""Hand-eye calibration: corners found to a fraction of a pixel, the solve recovering cameras that are off their
nominal calibration, and the whole routine in the stand-in putting the block where the true cameras see it."""

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from real_is_sim.bridge import build_bridge, load_bridge_cfg
from real_is_sim.cameras.base import CameraInfo
from real_is_sim.cameras.hand_eye import (BoardView, CheckerboardCfg, board_cloud, board_corners, project,
                                          refine_corners, corner_window, solve_hand_eye)
from real_is_sim.errors import ConfigError
from real_is_sim.render.clouds import render_clouds
from real_is_sim.standin.appearance import HiddenAppearance, perturb_camera
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.transforms import look_at_X_WC, matrix_to_pose, opengl_to_opencv, pose_to_matrix

BOARD = CheckerboardCfg()
TARGET = np.array([0.5, 0.0, 0.02])


def _board_facing(camera: CameraInfo, centre, roll_deg: float = 0.0) -> np.ndarray:
    """A board pose ``X_WB`` at ``centre`` whose face looks at ``camera``."""
    normal = camera.X_WC[:3, 3] - centre
    normal /= np.linalg.norm(normal)
    down = np.array([0.0, 0.0, -1.0]) + normal[2] * normal
    down /= np.linalg.norm(down)
    R = Rotation.from_rotvec(np.radians(roll_deg) * normal).as_matrix() @ np.stack([np.cross(down, normal), down, normal], axis=1)
    X = np.eye(4)
    X[:3, :3], X[:3, 3] = R, centre
    return X


def _towards(camera: CameraInfo, point, distance: float) -> np.ndarray:
    """The point ``distance`` from the camera on its line to ``point``."""
    eye = camera.X_WC[:3, 3]
    return eye + distance * (np.asarray(point) - eye) / np.linalg.norm(np.asarray(point) - eye)


def _render_board(camera: CameraInfo, X_WB: np.ndarray) -> np.ndarray:
    pose = torch.as_tensor(matrix_to_pose(X_WB)[None], dtype=torch.float32)
    viewmats = torch.as_tensor(camera.viewmat_opencv()[None], dtype=torch.float32)
    Ks = torch.as_tensor(camera.K[None], dtype=torch.float32)
    background = torch.full((1, camera.height, camera.width, 3), 0.4)
    with torch.no_grad():
        image, _, _ = render_clouds([board_cloud(BOARD)], [pose], viewmats, Ks, camera.width, camera.height,
                                    backgrounds=background, backend="cpu")
    return image[0].numpy()


def test_corners_are_found_to_a_fraction_of_a_pixel_from_predictions_pixels_off():
    camera = ring_cameras(TARGET, 3)[1]
    X_WB = _board_facing(camera, _towards(camera, TARGET + [0.0, 0.0, 0.1], 0.45), roll_deg=20.0)
    image = _render_board(camera, X_WB)
    truth, _ = project(camera.K, camera.X_WC, X_WB, board_corners(BOARD))
    rng = np.random.default_rng(0)
    predicted = truth + rng.uniform(-2.5, 2.5, truth.shape)
    window = corner_window(truth, BOARD, 4)
    assert window == 4  # squares of about 16 px here
    far = _board_facing(camera, _towards(camera, TARGET, 1.5))
    assert corner_window(project(camera.K, camera.X_WC, far, board_corners(BOARD))[0], BOARD, 4) is None  # 5 px squares
    found_uv, found = refine_corners(image, predicted, window)
    assert found.all()
    error = np.linalg.norm(found_uv - truth, axis=1)
    assert error.max() < 0.05, error.max()
    assert np.linalg.norm(predicted - truth, axis=1).mean() > 1.0  # the control: the predictions themselves
    # no corner where the image is flat (the plain background) or an edge (a square's side)
    flat, ok = refine_corners(image, np.array([[5.0, 5.0]]))
    assert not ok.any()
    side = (truth[0] + truth[1]) / 2  # halfway between two neighbouring corners: on an edge
    _, ok = refine_corners(image, side[None], window_px=3)
    assert not ok.any()


def _true_and_nominal(seed: int):
    nominal = ring_cameras(TARGET, 3)
    rng = np.random.default_rng(seed)
    hidden = HiddenAppearance.realistic(["calibration"])
    return nominal, [perturb_camera(c, hidden, rng) for c in nominal]


def _block_px(belief: CameraInfo, true: CameraInfo, centre=TARGET) -> float:
    """Where points of a block-sized patch at ``centre`` land in ``belief`` vs ``true`` (mean px)."""
    points = np.asarray(centre) + np.stack(np.meshgrid(np.linspace(-0.08, 0.08, 5), np.linspace(-0.08, 0.08, 5), [0.0, 0.03]), -1).reshape(-1, 3)
    a, _ = project(belief.K, belief.X_WC, np.eye(4), points)
    b, _ = project(true.K, true.X_WC, np.eye(4), points)
    return float(np.linalg.norm(a - b, axis=1).mean())


def test_the_solve_recovers_cameras_off_their_calibration_and_the_boards_mount():
    nominal, true = _true_and_nominal(seed=3)
    rng = np.random.default_rng(1)
    X_TB_true = BOARD.X_TB() @ pose_to_matrix(np.array([0.002, -0.001, 0.0015, *Rotation.from_rotvec([0.005, -0.004, 0.006]).as_quat()]))
    views = []
    corners = board_corners(BOARD)
    for camera, real in zip(nominal, true):
        for _ in range(5):
            centre = TARGET + [0.0, 0.0, rng.uniform(0.08, 0.25)] + rng.uniform(-0.08, 0.08, 3) * [1, 1, 0]
            X_WB = _board_facing(camera, centre, roll_deg=rng.uniform(-30, 30))
            X_WB[:3, :3] = Rotation.from_rotvec(rng.uniform(-0.3, 0.3, 3)).as_matrix() @ X_WB[:3, :3]
            X_WT = X_WB @ np.linalg.inv(X_TB_true)  # where the hand was (forward kinematics in the cell)
            uv, _ = project(real.K, real.X_WC, X_WT @ X_TB_true, corners)
            views.append(BoardView(camera.serial, X_WT, uv + rng.normal(0, 0.1, uv.shape), np.ones(len(uv), bool)))
    result = solve_hand_eye(views, {c.serial: c for c in nominal}, BOARD)
    assert result.rms_px < 0.2 < 1.0 < result.rms_px_nominal
    for camera, real in zip(nominal, true):
        before, after = _block_px(camera, real), _block_px(result.cameras[camera.serial], real)
        assert after < 0.15 and before > 0.5, (camera.serial, before, after)
    assert np.linalg.norm(result.X_TB[:3, 3] - X_TB_true[:3, 3]) < 1e-3


def test_hand_eye_runs_only_in_the_standin():
    with pytest.raises(ConfigError, match="cameras.hand_eye"):
        load_bridge_cfg("standin", overrides=["cameras.source=replay", "cameras.recording=/nowhere", "cameras.hand_eye=true"])


def test_the_standins_cameras_calibrated_by_a_board_on_its_robot():
    """The whole routine through the composition root: the stand-in's cameras are 2 mm / 0.3 deg (0.5 %) off the
    nominal calibration, its board 2 mm / 0.5 deg off its nominal mount, and every knob of its appearance is on.
    The evaluation's reduced cameras (240x135) are calibrated at twice their size and scaled back."""
    overrides = ["cameras.hand_eye=true", "standin.seed=1", "loop.visual_forces=true", "cameras.num_cameras=2",
                 "cameras.width=240", "cameras.height=135"]
    cfg = load_bridge_cfg("standin", overrides=overrides)
    cfg.standin.appearance = HiddenAppearance.realistic()
    bridge = build_bridge(cfg)
    try:
        assert bridge.hand_eye is not None and bridge.hand_eye.rms_px < 0.6
        assert bridge.hand_eye.views_used and min(bridge.hand_eye.views_used.values()) >= 3
        block = bridge.twin.object_poses()[0, 0, :3]
        nominal = ring_cameras(block, len(bridge.cameras), width=240, height=135)
        for camera, before in zip(bridge.cameras, nominal):
            assert camera.resolution == (240, 135)
            true = bridge.standin.true_cameras[camera.serial]
            assert _block_px(camera, true, block) < 0.6 * _block_px(before, true, block), camera.serial
        # the sensor compares the frames with renders through the calibrated cameras
        sensor = bridge.loop.sensor
        np.testing.assert_allclose(sensor._viewmats[0].numpy(), bridge.cameras[0].viewmat_opencv(), atol=1e-5)
    finally:
        bridge.hold_and_stop()
