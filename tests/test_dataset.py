"""The demonstration dataset: LeRobot v3.0 layout, round trip, durability, clear errors."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow.parquet as pq
import pytest

from real_is_sim.demos.dataset import DatasetWriter, copy_episodes, data_file, load_dataset
from real_is_sim.errors import DataError

FPS = 60
CELL = "table: {plane: [0, 0, 1, 0]}\n"
LENGTHS = (5, 9, 7)


def _states(episode: int, k: int):
    poses = np.array([[0.4 + 0.01 * k, 0.1 * episode, 0.0, 0.0, 0.0, np.sin(0.01 * k), np.cos(0.01 * k)]])
    q = np.linspace(-1, 1, 7) + 0.001 * k + episode
    return poses, q, q + 0.01


def _record(root, lengths=LENGTHS, tasks=("push the T onto the goal", "push it again", "push the T onto the goal")):
    writer = DatasetWriter(root, fps=FPS, cell_yaml=CELL, static={"object_names": ["tblock"], "cameras": []})
    for episode, (length, task) in enumerate(zip(lengths, tasks)):
        writer.start_episode(task)
        for k in range(length):
            poses, q, q_cmd = _states(episode, k)
            writer.add_frame(t=k / FPS, object_poses=poses, q=q, q_cmd=q_cmd)
        assert writer.end_episode(success=episode != 1, seconds=length / FPS) == episode
    writer.close()


def test_three_episodes_round_trip_in_the_lerobot_v3_layout(tmp_path):
    _record(tmp_path)
    info = json.loads((tmp_path / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == FPS
    assert info["total_episodes"] == 3 and info["total_frames"] == sum(LENGTHS) and info["total_tasks"] == 2
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["splits"] == {"train": "0:3"} and info["chunks_size"] == 1000
    features = info["features"]
    assert features["observation.state"]["shape"] == [7] and features["action"]["shape"] == [7]
    assert features["observation.environment_state"]["shape"] == [7]
    assert features["observation.environment_state"]["names"][0] == "tblock.px"
    for key in ("progress", "timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert features[key]["shape"] == [1]

    data = pq.read_table(tmp_path / "data/chunk-000/file-001.parquet")
    assert data.schema.names == list(features)
    assert str(data.schema.field("observation.state").type) == "fixed_size_list<element: float>[7]"
    assert data.column("index").to_pylist() == list(range(LENGTHS[0], LENGTHS[0] + LENGTHS[1]))

    episodes = pq.read_table(tmp_path / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["episode_index"] for e in episodes] == [0, 1, 2]
    assert [e["dataset_to_index"] - e["dataset_from_index"] for e in episodes] == list(LENGTHS)
    assert [e["data/file_index"] for e in episodes] == [0, 1, 2] and episodes[1]["tasks"] == ["push it again"]
    assert episodes[2]["stats/observation.state/count"] == [LENGTHS[2]]

    tasks = pq.read_table(tmp_path / "meta/tasks.parquet")
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]  # pandas reads the task index
    assert dict(zip(tasks.column("task").to_pylist(), tasks.column("task_index").to_pylist())) == {
        "push the T onto the goal": 0, "push it again": 1}
    stats = json.loads((tmp_path / "meta/stats.json").read_text())
    assert stats["observation.state"]["count"] == [sum(LENGTHS)] and len(stats["action"]["q99"]) == 7

    ds = load_dataset(tmp_path)
    assert ds.cell_yaml == CELL and ds.static["object_names"] == ["tblock"]
    assert [e.index for e in ds.episodes] == [0, 1, 2] and [len(e) for e in ds.episodes] == list(LENGTHS)
    assert [e.success for e in ds.episodes] == [True, False, True] and ds.episodes[1].task == "push it again"
    assert ds.episodes[2].extra == {"seconds": LENGTHS[2] / FPS}
    for episode in ds.episodes:
        assert np.allclose(np.diff(episode.t), 1 / FPS, atol=1e-5) and episode.t[0] == 0
        assert episode.progress[0] == 0 and episode.progress[-1] == 1 and np.all(np.diff(episode.progress) > 0)
        k = len(episode) - 1
        poses, q, q_cmd = _states(episode.index, k)
        assert episode.object_poses.shape == (len(episode), 1, 7)
        assert np.allclose(episode.object_poses[k], poses, atol=1e-6) and np.allclose(episode.q[k], q, atol=1e-6)
        assert np.allclose(episode.q_cmd[k], q_cmd, atol=1e-6)


def test_copied_episodes_start_a_mixed_dataset_unchanged(tmp_path):
    _record(tmp_path / "a")
    assert copy_episodes(tmp_path / "a", tmp_path / "b", [2, 0]) == 2
    source, copy = load_dataset(tmp_path / "a"), load_dataset(tmp_path / "b")
    assert copy.cell_yaml == CELL and copy.static == source.static and copy.info["fps"] == FPS
    for new, old in zip(copy.episodes, [source.episodes[2], source.episodes[0]]):
        assert new.task == old.task and new.success == old.success and len(new) == len(old)
        for field in ("t", "object_poses", "q", "q_cmd", "progress"):
            np.testing.assert_array_equal(getattr(new, field), getattr(old, field))
        assert new.extra == {**old.extra, "copied_from": f"{tmp_path / 'a'}#{old.index}"}
    # a copy of the copy (how shards are merged) keeps where the episode was recorded
    assert copy_episodes(tmp_path / "b", tmp_path / "d", [1]) == 1
    assert load_dataset(tmp_path / "d").episodes[0].extra["copied_from"] == f"{tmp_path / 'a'}#0"
    with pytest.raises(DataError, match="outside"):
        copy_episodes(tmp_path / "a", tmp_path / "c", [3])


def test_a_truncated_episode_file_is_reported_naming_it(tmp_path):
    _record(tmp_path)
    path = tmp_path / data_file(1)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DataError, match="file-001.parquet is truncated or corrupt"):
        load_dataset(tmp_path)


def test_a_killed_writer_keeps_its_finished_episodes_and_is_resumed(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, numpy as np
        from real_is_sim.demos.dataset import DatasetWriter
        w = DatasetWriter({str(tmp_path)!r}, fps={FPS}, cell_yaml={CELL!r}, static={{"object_names": ["tblock"]}})
        for episode in range(3):
            w.start_episode("push")
            for k in range(4):
                w.add_frame(t=k / {FPS}, object_poses=np.eye(7)[6:7], q=np.zeros(7), q_cmd=np.zeros(7))
            if episode == 2:
                os.kill(os.getpid(), signal.SIGKILL)  # mid-episode
            w.end_episode(True)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == -9, result.stderr
    assert [len(e) for e in load_dataset(tmp_path).episodes] == [4, 4]

    # a kill between the data file's rename and the episodes table's: an uncommitted data file, dropped on resume
    (tmp_path / data_file(2)).write_bytes((tmp_path / data_file(0)).read_bytes())
    writer = DatasetWriter(tmp_path, fps=FPS, cell_yaml=CELL)
    assert not (tmp_path / data_file(2)).exists() and writer.num_episodes == 2
    writer.start_episode("push")
    for k in range(3):
        writer.add_frame(t=k / FPS, object_poses=np.eye(7)[6:7], q=np.ones(7), q_cmd=np.ones(7))
    assert writer.end_episode(False) == 2
    ds = load_dataset(tmp_path)
    assert [len(e) for e in ds.episodes] == [4, 4, 3] and ds.info["total_frames"] == 11


def test_bad_input_is_one_clear_error(tmp_path):
    writer = DatasetWriter(tmp_path, fps=FPS, cell_yaml=CELL)
    with pytest.raises(DataError, match="no episode started"):
        writer.add_frame(t=0.0, object_poses=np.zeros((1, 7)), q=np.zeros(7), q_cmd=np.zeros(7))
    writer.start_episode("push")
    writer.add_frame(t=0.0, object_poses=np.eye(7)[6:7], q=np.zeros(7), q_cmd=np.zeros(7))
    with pytest.raises(DataError, match="1/60 s apart"):
        writer.add_frame(t=0.5, object_poses=np.eye(7)[6:7], q=np.zeros(7), q_cmd=np.zeros(7))
    with pytest.raises(DataError, match=r"\(n_obj, 7\)"):
        writer.add_frame(t=1 / FPS, object_poses=np.zeros(7), q=np.zeros(7), q_cmd=np.zeros(7))
    writer.end_episode(True)
    with pytest.raises(DataError, match="another cell config"):
        DatasetWriter(tmp_path, fps=FPS, cell_yaml="other: 1\n")
    with pytest.raises(DataError, match="meta/info.json"):
        load_dataset(tmp_path / "nowhere")
