"""RenderedSource with a synthetic renderer (a time-dependent gradient), and RealSenseSource without a device."""

import numpy as np
import pytest

from real_is_sim.cameras import (
    CameraInfo,
    CameraUnavailableError,
    FrameSynchronizer,
    RealSenseSource,
    RenderedSource,
    list_realsense_devices,
)
from real_is_sim.errors import DataError, RealIsSimError

W, H = 32, 24
K = np.array([[30.0, 0.0, 16.0], [0.0, 30.0, 12.0], [0.0, 0.0, 1.0]])
CAMS = [CameraInfo("a", K, W, H, np.eye(4)), CameraInfo("b", K, W, H, np.eye(4))]


def gradient(cameras, t):
    """A float image per camera: a horizontal ramp whose brightness follows t (and the camera)."""
    ramp = np.linspace(0.1, 0.7, W)[None, :, None] * np.ones((H, 1, 3))
    return {serial: ramp + 0.2 * np.sin(t) + 0.05 * i for i, serial in enumerate(cameras)}


def expected_uint8(serial, t):
    return np.round(np.clip(gradient([c.serial for c in CAMS], t)[serial], 0, 1) * 255).astype(np.uint8)


def test_frames_are_released_after_the_latency_with_their_capture_time():
    src = RenderedSource(CAMS, gradient, latency=0.03)
    released, captures = [], [k / 90 for k in range(1, 46)]
    for tick in range(1, 31):
        t = tick / 60
        while captures and captures[0] <= t:
            src.capture(captures.pop(0))
        frames = src.poll(t)
        assert all(f.timestamp <= t - 0.03 + 1e-9 for f in frames)
        released += frames
    # Everything captured at least 30 ms before the last tick has come out, once, in order.
    due = [k / 90 for k in range(1, 46) if k / 90 <= 30 / 60 - 0.03 + 1e-9]
    assert [f.timestamp for f in released if f.serial == "a"] == pytest.approx(due)
    assert [f.index for f in released if f.serial == "b"] == list(range(len(due)))
    for f in released[:6]:
        np.testing.assert_array_equal(f.image, expected_uint8(f.serial, f.timestamp))


def test_synchronizer_sees_the_latency_as_age():
    src = RenderedSource(CAMS, gradient, latency=0.04)
    sync = FrameSynchronizer(src.serials, stale_after=0.05)
    for k in range(1, 30):
        src.capture(k / 90)
        sync.push(src.poll(k / 90))
        tick = sync.tick(k / 90)
        for sample in tick.samples.values():
            assert sample.missing or sample.age >= 0.04 - 1e-9
    assert tick.complete


def test_noise_is_seeded_and_of_the_requested_size():
    def frames(seed):
        src = RenderedSource(CAMS, gradient, noise_std=0.02, seed=seed)
        src.capture(0.5)
        return src.poll(0.5)

    first, again, other = frames(1), frames(1), frames(2)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.image, b.image)
    assert np.any(first[0].image != other[0].image)
    residual = first[0].image.astype(float) - expected_uint8("a", 0.5)
    assert abs(residual.mean()) < 1.0 and 4.0 < residual.std() < 6.2  # 0.02 * 255 = 5.1, plus rounding


def test_exposure_change_scales_later_images_of_one_camera():
    src = RenderedSource(CAMS, gradient)
    src.capture(0.1)
    src.set_exposure(0.5, "a")
    src.capture(0.2)
    images = {(f.serial, f.timestamp): f.image.astype(float) for f in src.poll(0.2)}
    np.testing.assert_array_equal(images["a", 0.1], expected_uint8("a", 0.1))
    np.testing.assert_allclose(images["a", 0.2], expected_uint8("a", 0.2) * 0.5, atol=1.0)
    np.testing.assert_array_equal(images["b", 0.2], expected_uint8("b", 0.2))
    assert src.exposure("a") == 0.5 and src.exposure("b") == 1.0


def test_drops_are_seeded_and_leave_gaps_in_the_index():
    def kept(seed):
        src = RenderedSource(CAMS[:1], gradient, drop_probability=0.3, seed=seed)
        for k in range(1, 301):
            src.capture(k / 90)
        return [f.index for f in src.poll(10.0)]

    indices = kept(3)
    assert indices == kept(3) and indices != kept(4)
    assert 0.2 < 1 - len(indices) / 300 < 0.4
    assert indices == sorted(set(indices)) and indices[-1] < 300


def test_uint8_renders_pass_through_unchanged():
    image = np.random.default_rng(0).integers(0, 256, (H, W, 3), dtype=np.uint8)
    src = RenderedSource(CAMS[:1], lambda cams, t: {"a": image})
    src.capture(0.0)
    np.testing.assert_array_equal(src.poll()[0].image, image)


@pytest.mark.parametrize(
    "render, message",
    [
        (lambda cams, t: {"a": np.zeros((H, W, 3))}, "no image for camera b"),
        (lambda cams, t: {s: np.zeros((H, W + 1, 3)) for s in cams}, "shape"),
        (lambda cams, t: {s: np.full((H, W, 3), np.nan) for s in cams}, "NaN"),
        (lambda cams, t: {s: np.zeros((H, W, 3), np.int32) for s in cams}, "dtype"),
    ],
)
def test_bad_renders_are_one_data_error(render, message):
    src = RenderedSource(CAMS, render)
    with pytest.raises(DataError, match=message):
        src.capture(0.0)


def test_bad_settings_and_time_going_backwards_raise():
    with pytest.raises(DataError, match="drop_probability"):
        RenderedSource(CAMS, gradient, drop_probability=1.0)
    with pytest.raises(DataError, match="latency"):
        RenderedSource(CAMS, gradient, latency=-0.01)
    src = RenderedSource(CAMS, gradient)
    src.capture(1.0)
    with pytest.raises(DataError, match="after the previous capture"):
        src.capture(1.0)
    with pytest.raises(DataError, match="camera z"):
        src.set_exposure(2.0, "z")


def test_realsense_without_device_names_the_missing_serials():
    assert "000000000001" not in list_realsense_devices()
    src = RealSenseSource({"000000000001": np.eye(4), "000000000002": np.eye(4)})
    assert src.serials == ["000000000001", "000000000002"]
    with pytest.raises(RealIsSimError, match="not been started"):
        src.cameras
    with pytest.raises(CameraUnavailableError, match="000000000001, 000000000002"):
        src.start()
    with pytest.raises(DataError, match="X_WC of camera 7"):
        RealSenseSource({"7": np.zeros((4, 4))})
