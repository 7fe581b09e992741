"""The arm fitted to silhouettes when a recording has no joint log (robot.arm_fit), on synthetic frames of a known arm."""

import numpy as np
import pytest

from real_is_sim.errors import DataError
from real_is_sim.robot.appearance import RobotAppearance, RobotAppearanceCfg
from real_is_sim.robot.arm_fit import ArmFitCfg, ArmSilhouettes, ArmTrack, fit_arm_track, foreground_mask
from real_is_sim.robot.franka import Q_START
from real_is_sim.robot.recorded_follower import load_follower_csv

WIDTH, HEIGHT = 160, 120
BACKGROUND = 0.2


def look_at(eye, target) -> np.ndarray:
    """OpenCV world-to-camera matrix (x right, y down, z forward) of a camera at ``eye`` looking at ``target``."""
    forward = np.asarray(target, float) - eye
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    R = np.stack([right, down, forward])
    viewmat = np.eye(4)
    viewmat[:3, :3], viewmat[:3, 3] = R, -R @ eye
    return viewmat


@pytest.fixture(scope="module")
def scene():
    hand = RobotAppearance().means(Q_START).numpy().mean(axis=0)
    viewmats = np.stack([look_at(hand + [0.6, 0.3, 0.4], hand), look_at(hand + [-0.2, 0.7, 0.3], hand)])
    Ks = np.array([[[120.0, 0, WIDTH / 2], [0, 120.0, HEIGHT / 2], [0, 0, 1]]] * 2)
    # The "camera" draws the true arm at full resolution, denser than the fit's model (another sampling of the links).
    truth = ArmSilhouettes(viewmats, Ks, WIDTH, HEIGHT, ArmFitCfg(downscale=1, splat_px=2, spacing=0.006))
    path = [Q_START + np.array([0.0, 0.01, 0.0, 0.015, 0.0, -0.01, 0.0]) * k for k in range(8)]
    frames = []
    for k, q in enumerate(path):
        images = []
        for mask in truth.render(q):
            image = np.full((HEIGHT, WIDTH, 3), BACKGROUND, dtype=np.float32)
            image[mask] = 0.9
            image[HEIGHT - 20:, :30] = 0.05  # a shadow on the table: darker, not the arm
            images.append((image * 255).astype(np.uint8))
        frames.append((k / 30.0, images))
    backgrounds = [np.full((HEIGHT, WIDTH, 3), BACKGROUND, dtype=np.float32)] * 2
    return viewmats, Ks, path, frames, backgrounds


def no_object(image):
    return np.zeros(image.shape[:2], dtype=bool)


def test_fit_follows_a_moving_arm(scene):
    viewmats, Ks, path, frames, backgrounds = scene
    cfg = ArmFitCfg(downscale=2, first_search_seeds=40, first_search_spread=0.2)
    seed = Q_START + np.array([0.12, -0.1, 0.08, 0.1, -0.1, 0.1, 0.0])  # the first frame starts from a search
    track = fit_arm_track(frames, backgrounds, no_object, viewmats, Ks, cfg, q_seed=seed)
    assert track.q.shape == (len(path), 7) and np.allclose(track.t, [t for t, _ in frames])
    # Scored against the true silhouettes at the fit's resolution; the control holds the seed (what the search
    # started from) for every frame and must do clearly worse.
    model = ArmSilhouettes(viewmats, Ks, WIDTH, HEIGHT, cfg)
    truth_masks = [model.render(q) for q in path]
    valid = np.ones((2, HEIGHT // 2, WIDTH // 2), dtype=bool)
    fitted = [model.iou(q, t, valid) for q, t in zip(track.q, truth_masks)]
    held = [model.iou(seed, t, valid) for t in truth_masks]
    assert min(fitted) > 0.9, fitted
    assert np.mean(fitted) > np.mean(held) + 0.2, (fitted, held)
    assert np.all(track.iou > 0.6), track.iou


def test_foreground_is_brighter_pixels_that_are_not_the_object():
    background = np.full((12, 12, 3), 0.4, dtype=np.float32)
    image = background.copy()
    image[1:5, 1:5] = 0.9  # the arm
    image[7:11, 1:5] = 0.1  # its shadow
    image[1:5, 7:11] = [1.0, 0.2, 0.1]  # the object (brighter in red)
    image[8, 8] = 0.9  # one bright speck: noise, removed
    obj = np.zeros((12, 12), dtype=bool)
    obj[1:5, 7:11] = True
    mask = foreground_mask((image * 255).astype(np.uint8), background, obj, 0.15)
    expected = np.zeros((12, 12), dtype=bool)
    expected[1:5, 1:5] = True
    expected[[1, 1, 4, 4], [1, 4, 1, 4]] = False  # the opening's cross rounds the patch's corners
    assert np.array_equal(mask, expected)
    with pytest.raises(DataError, match="differ in shape"):
        foreground_mask(image[:2], background, obj, 0.15)


def test_track_is_a_follower_log(tmp_path):
    track = ArmTrack(np.array([0.0, 0.1, 0.2]), np.stack([Q_START + k * 0.01 for k in range(3)]), np.array([0.5, 0.6, 0.7]))
    assert np.allclose(track.at(-1.0), track.q[0]) and np.allclose(track.at(0.15), track.q[1])
    assert np.allclose(track.at(0.2), track.q[2]) and np.allclose(track.at(5.0), track.q[2])
    track.write_csv(tmp_path / "arm.csv")
    t, q = load_follower_csv(tmp_path / "arm.csv")  # what a replay of a session's arm reads
    assert np.allclose(t, track.t) and np.allclose(q, track.q, atol=1e-6)


def test_hand_stick_hangs_below_the_hand():
    plain = RobotAppearance()
    stick = RobotAppearance(RobotAppearanceCfg(hand_stick=(0.07, 0.2, 0.008)))
    extra = stick.means(Q_START).numpy()[len(plain):]
    assert len(extra) > 0 and np.allclose(stick.means(Q_START).numpy()[:len(plain)], plain.means(Q_START).numpy())
    hand = stick.data.oMf[stick.model.getFrameId("panda_hand")]
    local = (extra - hand.translation) @ hand.rotation  # in the hand's frame
    assert local[:, 2].min() == pytest.approx(0.07, abs=1e-6) and local[:, 2].max() == pytest.approx(0.2, abs=1e-6)
    assert np.allclose(np.linalg.norm(local[:, :2], axis=1), 0.008, atol=1e-6)
