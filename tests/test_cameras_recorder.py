"""Recorder: recordings round-trip through VideoReplaySource, and a killed recording stays replayable."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from real_is_sim.cameras import CameraInfo, Frame, Recorder, VideoReader, VideoReplaySource
from real_is_sim.errors import ConfigError, DataError, RealIsSimError
from real_is_sim.transforms import pose_to_matrix

W, H = 160, 96
K = np.array([[120.0, 0.0, 80.0], [0.0, 119.0, 48.0], [0.0, 0.0, 1.0]])


def cameras():
    return [
        CameraInfo("cam0", K, W, H, pose_to_matrix(np.array([0.5, 0.0, 0.6, 0.0, 0.0, 0.0, 1.0]))),
        CameraInfo("cam1", K * [[1.01], [1.0], [1.0]], W, H, pose_to_matrix(np.array([0.0, 0.5, 0.6, 0.0, 0.0, 0.3826834, 0.9238795]))),
    ]


def synthetic_image(index: int, cam: int) -> np.ndarray:
    """Smooth gradients plus a square that moves with ``index``: easy to compress, easy to tell apart."""
    y, x = np.mgrid[0:H, 0:W]
    image = np.stack([x * 255 // W, y * 255 // H, np.full_like(x, 60 + 80 * cam)], axis=-1).astype(np.uint8)
    left = (index * 3) % (W - 20)
    image[30:50, left : left + 20] = [250, 250, 40]
    return image


def timestamp(index: int, cam: int) -> float:
    return 0.011 * index + 0.004 * cam + 1e-5 * (index % 7)  # irregular on purpose


def test_recording_round_trips_through_replay(tmp_path):
    n = 25
    with Recorder(tmp_path / "rec", cameras()) as recorder:
        for i in range(n):
            for c, info in enumerate(cameras()):
                recorder.write(Frame(info.serial, synthetic_image(i, c), timestamp(i, c), i))
    with VideoReplaySource(tmp_path / "rec") as src:
        for c, info in enumerate(cameras()):
            replayed = src.cameras[info.serial]
            np.testing.assert_array_equal(replayed.K, info.K)
            np.testing.assert_array_equal(replayed.X_WC, info.X_WC)
            assert replayed.resolution == (W, H)
            assert src.num_frames(info.serial) == n
            np.testing.assert_array_equal(src.timestamps(info.serial), [timestamp(i, c) for i in range(n)])
        frames = list(src.frames())
    assert len(frames) == 2 * n
    for f in frames:
        error = np.abs(f.image.astype(int) - synthetic_image(f.index, int(f.serial[-1])).astype(int))
        assert error.mean() < 2.0 and np.percentile(error, 99) < 20  # lossy H.264, crf 18
    assert json.loads((tmp_path / "rec" / "videos" / "cam0.json").read_text())["complete"] is True


def test_lossless_recording_replays_the_exact_pixels(tmp_path):
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (H, W, 3), dtype=np.uint8) for _ in range(5)]  # noise: nothing to compress away
    info = cameras()[0]
    with Recorder(tmp_path / "rec", [info], lossless=True) as recorder:
        for i, image in enumerate(images):
            recorder.write(Frame(info.serial, image, timestamp(i, 0), i))
    with VideoReplaySource(tmp_path / "rec") as src:
        for i, image in enumerate(images):
            np.testing.assert_array_equal(src.frame(info.serial, i).image, image)


def test_real_footage_rerecorded_replays_the_same(shared_data, tmp_path):
    demo = shared_data / "sample_demos" / "0"
    with VideoReplaySource(demo) as src, Recorder(tmp_path / "again", src.cameras) as recorder:
        originals = [f for f in (src.poll(0.25))]
        recorder.write_all(originals)
    with VideoReplaySource(tmp_path / "again") as again:
        copies = list(again.frames())
        assert again.cameras["220422302296"].viewmat_opencv() == pytest.approx(src.cameras["220422302296"].viewmat_opencv())
    assert [(f.serial, f.index, f.timestamp) for f in copies] == [(f.serial, f.index, f.timestamp) for f in originals]
    for a, b in zip(originals, copies):
        assert np.abs(a.image.astype(int) - b.image.astype(int)).mean() < 3.0


def test_every_flush_lists_only_frames_already_in_the_file(tmp_path):
    """The metadata must never run ahead of the video: a kill right after a flush would leave it so."""
    info = cameras()[0]
    recorder = Recorder(tmp_path / "rec", [info], flush_interval=1e9)
    meta_path = tmp_path / "rec" / "videos" / "cam0.json"
    for i in range(6):
        recorder.write(Frame(info.serial, synthetic_image(i, 0), timestamp(i, 0), i))
        recorder.flush()
        listed = len(json.loads(meta_path.read_text())["timestamps"])
        if listed:
            video = VideoReader(tmp_path / "rec" / "videos" / "cam0.mp4", allow_partial=True)
            assert video.num_frames >= listed
            video.close()
        assert listed >= i  # and it lags the writes by at most the frame the muxer still holds
    recorder.close()
    assert len(json.loads(meta_path.read_text())["timestamps"]) == 6


CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from test_cameras_recorder import cameras, synthetic_image, timestamp
from real_is_sim.cameras import Frame, Recorder
recorder = Recorder({out!r}, cameras(), flush_interval=0.25)  # the video runs ahead of the JSON between flushes
i = 0
while True:  # until killed
    for c, info in enumerate(cameras()):
        recorder.write(Frame(info.serial, synthetic_image(i, c), timestamp(i, c), i))
    i += 1
    time.sleep(0.002)
"""


def test_recording_killed_mid_way_replays_up_to_its_last_flushed_frame(tmp_path):
    out = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(tests=str(Path(__file__).parent), out=str(out))])
    meta_path = out / "videos" / "cam1.json"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if meta_path.exists() and len(json.loads(meta_path.read_text())["timestamps"]) >= 30:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the recording subprocess did not flush 30 frames (exit code {child.poll()})")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with VideoReplaySource(out) as src:
        for c, info in enumerate(cameras()):
            n = src.num_frames(info.serial)
            meta = json.loads((out / "videos" / f"{info.serial}.json").read_text())
            assert meta["complete"] is False and n == len(meta["timestamps"]) >= 30
            video = VideoReader(out / "videos" / f"{info.serial}.mp4", allow_partial=True)
            assert video.num_frames >= n  # frames muxed after the last flush are in the file, not listed
            video.close()
            np.testing.assert_array_equal(src.timestamps(info.serial), [timestamp(i, c) for i in range(n)])
            last = src.frame(info.serial, n - 1)
            assert np.abs(last.image.astype(int) - synthetic_image(n - 1, c).astype(int)).mean() < 2.0


def test_recorder_rejects_bad_frames_and_overwrites(tmp_path):
    recorder = Recorder(tmp_path / "rec", cameras())
    with pytest.raises(DataError, match="camera nope"):
        recorder.write(Frame("nope", synthetic_image(0, 0), 0.0, 0))
    with pytest.raises(DataError, match="shape"):
        recorder.write(Frame("cam0", np.zeros((H, W + 2, 3), np.uint8), 0.0, 0))
    recorder.write(Frame("cam0", synthetic_image(0, 0), 1.0, 0))
    with pytest.raises(DataError, match="not after"):
        recorder.write(Frame("cam0", synthetic_image(1, 0), 1.0, 1))
    recorder.close()
    with pytest.raises(RealIsSimError, match="closed"):
        recorder.write(Frame("cam0", synthetic_image(2, 0), 2.0, 2))
    with pytest.raises(DataError, match="overwrite"):
        Recorder(tmp_path / "rec", cameras())
    with pytest.raises(ConfigError, match="preset"):
        Recorder(tmp_path / "slow", cameras(), preset="glacial")
    Recorder(tmp_path / "slow", cameras()).close()  # a failed start leaves no recording behind to refuse
    odd = CameraInfo("odd", K, W + 1, H, np.eye(4))
    with pytest.raises(DataError, match="even"):
        Recorder(tmp_path / "odd", [odd])
