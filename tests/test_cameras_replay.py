"""Replay of the shared PushT footage: layout parsing, timestamps, decoding, play-back and synchronisation."""

import json
import shutil
import time

import numpy as np
import pytest

from real_is_sim.cameras import FrameSynchronizer, VideoReplaySource, load_cameras_json, load_extrinsics
from real_is_sim.errors import DataError, RealIsSimError


@pytest.fixture(scope="module")
def demo_dir(shared_data):
    return shared_data / "sample_demos" / "0"


@pytest.fixture(scope="module")
def raw_meta(demo_dir):
    """The per-camera JSON as stored, parsed by hand (values may be strings holding JSON lists)."""
    out = {}
    for serial in json.loads((demo_dir / "cameras.json").read_text()):
        meta = json.loads((demo_dir / "videos" / f"{serial}.json").read_text())
        out[serial] = {k: json.loads(v) if isinstance(v, str) and k != "serial" else v for k, v in meta.items()}
    return out


def test_replay_reads_counts_intrinsics_resolution_and_poses(demo_dir, raw_meta):
    raw_cameras = json.loads((demo_dir / "cameras.json").read_text())
    with VideoReplaySource(demo_dir) as src:
        assert src.serials == list(raw_cameras)
        for serial, info in src.cameras.items():
            meta = raw_meta[serial]
            assert src.num_frames(serial) == len(meta["timestamps"])
            np.testing.assert_array_equal(info.K, np.array(meta["K"]))
            assert info.resolution == tuple(meta["resolution"])
            np.testing.assert_array_equal(info.X_WC, np.array(raw_cameras[serial]["X_WC"]))
            ts = src.timestamps(serial)
            np.testing.assert_array_equal(ts, meta["timestamps"])
            assert np.all(np.diff(ts) > 0)
            # OpenCV view matrix: the camera centre maps to the origin, and the axes flip Y and Z.
            centre = np.append(info.X_WC[:3, 3], 1.0)
            np.testing.assert_allclose(info.viewmat_opencv() @ centre, [0, 0, 0, 1], atol=1e-9)
            np.testing.assert_allclose(info.X_WC_opencv()[:3, 2], -info.X_WC[:3, 2])


def test_decoded_frames_are_rgb_and_random_access_matches_sequential(demo_dir):
    serial = "220422302296"
    with VideoReplaySource(demo_dir, serials=[serial]) as src:
        sequential = [src.frame(serial, i) for i in range(248, 254)]  # crosses the keyframe at 250
    with VideoReplaySource(demo_dir, serials=[serial]) as src:
        jumped = [src.frame(serial, i) for i in (252, 249, 253)]  # seek, go back, continue
    with pytest.raises(RealIsSimError, match="closed"):
        src.frame(serial, 0)
    by_index = {f.index: f for f in sequential}
    for f in jumped:
        assert f.image.shape == (270, 480, 3) and f.image.dtype == np.uint8
        np.testing.assert_array_equal(f.image, by_index[f.index].image)
        assert f.timestamp == by_index[f.index].timestamp
    # Consecutive frames differ (real footage) but only a little.
    diff = np.abs(sequential[0].image.astype(int) - sequential[1].image.astype(int)).mean()
    assert 0 < diff < 20


def test_poll_returns_frames_in_window_in_time_order(demo_dir, raw_meta):
    with VideoReplaySource(demo_dir) as src:
        src.seek(3.0)
        frames = src.poll(3.1)
        assert src.poll(3.1) == []  # already delivered
    expected = sorted(
        (t, s, i) for s, m in raw_meta.items() for i, t in enumerate(m["timestamps"]) if 3.0 <= t <= 3.1
    )
    assert [(f.timestamp, f.serial, f.index) for f in frames] == expected


def test_as_fast_as_possible_steps_frame_by_frame(demo_dir, raw_meta):
    with VideoReplaySource(demo_dir, realtime=False) as src:
        got = [src.poll() for _ in range(4)]
    first = sorted((t, s) for s, m in raw_meta.items() for t in m["timestamps"])[:4]
    assert [(f[0].timestamp, f[0].serial) for f in got] == first
    assert all(len(f) == 1 for f in got)


def test_realtime_replay_is_paced_by_the_wall_clock(demo_dir):
    with VideoReplaySource(demo_dir, serials=["234222302164"], realtime=True, speed=4.0) as src:
        src.seek(2.0)
        begin = time.monotonic()
        frames = []
        for frame in src.frames():
            if frame.timestamp > 2.4:
                break
            frames.append(frame)
        wall = time.monotonic() - begin
    assert len(frames) > 15
    # 0.4 s of recording at 4x speed cannot be delivered in much less than 0.1 s.
    assert wall >= (frames[-1].timestamp - 2.0) / 4.0 - 0.01
    # poll() without a time reads the paced clock: after 50 ms of wall time, 0.2 s of recording is due.
    with VideoReplaySource(demo_dir, serials=["234222302164"], realtime=True, speed=4.0) as src:
        time.sleep(0.05)
        polled = src.poll()
        now = src.now()
    assert polled and all(f.timestamp <= now for f in polled)
    assert polled[-1].timestamp >= src.start_time + 0.2 - 0.02


def test_synchronizer_picks_newest_frame_per_camera_at_each_tick(demo_dir, raw_meta):
    with VideoReplaySource(demo_dir) as src:
        sync = FrameSynchronizer(src.serials, stale_after=0.05)
        src.seek(6.0)
        for k in range(1, 7):
            t = 6.0 + k / 60.0
            sync.push(src.poll(t + 0.02))  # polled ahead of the tick: frames after t must wait
            tick = sync.tick(t)
            assert tick.complete and not tick.missing and not tick.stale
            for serial, sample in tick.samples.items():
                ts = np.array(raw_meta[serial]["timestamps"])
                newest = int(np.searchsorted(ts, t, side="right")) - 1
                assert sample.frame.index == newest
                assert sample.age == pytest.approx(t - ts[newest])


def test_extrinsics_match_cameras_json(shared_data, demo_dir):
    X_WT = load_extrinsics(shared_data / "environment" / "extrinsics.json")
    cams = load_cameras_json(demo_dir / "cameras.json")
    assert set(X_WT) == set(cams)
    for serial, entry in cams.items():
        np.testing.assert_allclose(X_WT[serial], entry.X_WC)
        assert entry.video_path == (demo_dir / "videos" / f"{serial}.mp4").resolve()


@pytest.fixture
def demo_copy(demo_dir, tmp_path):
    """A writable copy of the demo recording (about 5 MB) to damage."""
    dst = tmp_path / "demo"
    shutil.copytree(demo_dir, dst)
    for p in dst.rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return dst


def test_truncated_video_is_one_data_error(demo_copy):
    video = demo_copy / "videos" / "220422302296.mp4"
    data = video.read_bytes()
    video.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="220422302296.mp4"):
        VideoReplaySource(demo_copy)


def test_corrupt_video_is_one_data_error(demo_copy):
    video = demo_copy / "videos" / "234222302164.mp4"
    video.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(DataError, match="234222302164.mp4"):
        VideoReplaySource(demo_copy)


def test_missing_metadata_json_is_one_data_error(demo_copy):
    (demo_copy / "videos" / "220422302296.json").unlink()
    with pytest.raises(DataError, match="220422302296.json"):
        VideoReplaySource(demo_copy)


def test_camera_missing_from_cameras_json_is_one_data_error(demo_copy):
    with pytest.raises(DataError, match="999999999999"):
        VideoReplaySource(demo_copy, serials=["220422302296", "999999999999"])


def test_timestamp_count_mismatch_is_one_data_error(demo_copy):
    meta_path = demo_copy / "videos" / "220422302296.json"
    meta = json.loads(meta_path.read_text())
    meta["timestamps"] = meta["timestamps"][:-5]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DataError, match="803 frames"):
        VideoReplaySource(demo_copy)


def test_string_encoded_lists_are_accepted(demo_copy, raw_meta):
    meta_path = demo_copy / "videos" / "234222302164.json"
    meta = json.loads(meta_path.read_text())
    for key in ("K", "resolution", "timestamps"):
        meta[key] = json.dumps(meta[key])
    meta_path.write_text(json.dumps(meta))
    with VideoReplaySource(demo_copy, serials=["234222302164"]) as src:
        np.testing.assert_array_equal(src.cameras["234222302164"].K, raw_meta["234222302164"]["K"])
        np.testing.assert_array_equal(src.timestamps("234222302164"), raw_meta["234222302164"]["timestamps"])
