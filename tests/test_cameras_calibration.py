"""cameras.json, extrinsics.json and per-video metadata: round trips and clear errors."""

import json

import numpy as np
import pytest

from real_is_sim.cameras import (
    VideoMetadata,
    load_cameras_json,
    load_extrinsics,
    load_video_metadata,
    save_cameras_json,
    save_extrinsics,
    save_video_metadata,
)
from real_is_sim.errors import DataError
from real_is_sim.transforms import pose_to_matrix, quat_from_axis_angle


def pose(angle, p):
    return pose_to_matrix(np.concatenate([p, quat_from_axis_angle([0.3, -1.0, 0.5], angle)]))


def test_cameras_json_round_trip(tmp_path):
    poses = {"111": pose(0.4, [1.0, 0.2, 0.5]), "222": pose(-1.2, [0.1, 0.6, 0.7])}
    save_cameras_json(tmp_path / "cameras.json", poses)
    loaded = load_cameras_json(tmp_path / "cameras.json")
    assert list(loaded) == ["111", "222"]
    for serial, entry in loaded.items():
        np.testing.assert_allclose(entry.X_WC, poses[serial])
        assert entry.video_path == (tmp_path / "videos" / f"{serial}.mp4").resolve()
        assert entry.metadata_path == (tmp_path / "videos" / f"{serial}.json").resolve()


def test_extrinsics_round_trip(tmp_path):
    poses = {"111": pose(0.4, [1.0, 0.2, 0.5])}
    save_extrinsics(tmp_path / "extrinsics.json", poses)
    assert json.loads((tmp_path / "extrinsics.json").read_text())["111"]["X_WT"] == poses["111"].tolist()
    np.testing.assert_allclose(load_extrinsics(tmp_path / "extrinsics.json")["111"], poses["111"])


def test_video_metadata_round_trip(tmp_path):
    K = np.array([[240.0, 0, 241], [0, 239.5, 137], [0, 0, 1]])
    meta = VideoMetadata("111", K, 480, 270, np.array([0.01, 0.03, 0.05]), complete=False)
    save_video_metadata(tmp_path / "111.json", meta)
    back = load_video_metadata(tmp_path / "111.json", "111")
    np.testing.assert_array_equal(back.K, K)
    np.testing.assert_array_equal(back.timestamps, meta.timestamps)
    assert (back.width, back.height, back.complete) == (480, 270, False)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.pop("K"), "no 'K'"),
        (lambda m: m.update(K="[[1, 0"), "not a JSON list"),
        (lambda m: m.update(resolution=[480]), "resolution"),
        (lambda m: m.update(timestamps=[0.0, 0.2, 0.1]), "not increasing"),
        (lambda m: m.update(timestamps=[0.0, None]), "timestamps"),
        (lambda m: m.update(serial="999"), "expected 111"),
    ],
)
def test_bad_video_metadata_is_one_data_error(tmp_path, edit, message):
    meta = {"serial": "111", "K": [[240.0, 0, 241], [0, 239.5, 137], [0, 0, 1]], "resolution": [480, 270], "timestamps": [0.0, 0.1]}
    edit(meta)
    (tmp_path / "111.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match=message):
        load_video_metadata(tmp_path / "111.json", "111")


def test_bad_calibration_files_are_one_data_error(tmp_path):
    path = tmp_path / "cameras.json"
    with pytest.raises(DataError, match="not found"):
        load_cameras_json(path)
    path.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_cameras_json(path)
    path.write_text(json.dumps({"111": {"X_WC": np.eye(4).tolist(), "video_path": "videos/111.mp4"}}))
    with pytest.raises(DataError, match="metadata_path"):
        load_cameras_json(path)
    path.write_text(json.dumps({"111": {"X_WT": np.eye(3).tolist()}}))
    with pytest.raises(DataError, match="4x4"):
        load_extrinsics(path)
