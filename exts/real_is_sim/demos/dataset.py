"""Demonstration datasets in the LeRobot v3.0 layout, written and read with pyarrow (docs/dataset.md).

    root/
      meta/info.json                          codebase_version "v3.0", fps, features, totals, path templates
      meta/episodes/chunk-000/file-000.parquet one row per finished episode: where its frames are, its task, stats
      meta/tasks.parquet                      task strings (the pandas index LeRobot reads) -> task_index
      meta/stats.json                         per-feature min / max / mean / std / count / quantiles
      meta/real_is_sim.json                   the initial full state, once: cell YAML, Gaussians reference, cameras
      data/chunk-000/file-NNN.parquet         one file per episode (file_index = episode index)

One data file per episode keeps every finished episode durable: its frames are written to a temporary file and
renamed into place, then the episodes table (the commit point) is rewritten the same way, then the tasks, stats
and info derived from it. A session killed at any moment leaves the finished episodes readable; a data file with
no row in the episodes table (killed between the two renames) is removed when the dataset is opened again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from real_is_sim.errors import DataError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # LeRobot's DEFAULT_CHUNK_SIZE: files per chunk directory
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
TASKS_PATH = "meta/tasks.parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
STATIC_PATH = "meta/real_is_sim.json"
JOINT_NAMES = [f"panda_joint{i}" for i in range(1, 8)]
POSE_FIELDS = ("px", "py", "pz", "qx", "qy", "qz", "qw")
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)  # LeRobot's DEFAULT_QUANTILES, stored as q01 .. q99
STAT_FEATURES = ("observation.state", "observation.environment_state", "action", "progress", "timestamp",
                 "frame_index", "episode_index", "index", "task_index")
# 1/fps spacing tolerance: LeRobot's check_timestamps_sync default (tolerance_s = 1e-4)
TIMESTAMP_TOLERANCE_S = 1e-4


@dataclass
class Episode:
    index: int
    task: str
    t: np.ndarray  # [T] s from the episode's start, 1/fps apart
    object_poses: np.ndarray  # [T, n_obj, 7] twin object poses (px py pz qx qy qz qw)
    q: np.ndarray  # [T, 7] robot actual joints
    q_cmd: np.ndarray  # [T, 7] commanded joints (the action)
    progress: np.ndarray  # [T] elapsed fraction of the episode, 0 .. 1
    success: bool
    extra: dict = field(default_factory=dict)  # end_episode(**extra)

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class Dataset:
    root: Path
    info: dict
    episodes: list[Episode]
    static: dict  # what the writer was given as ``static`` (object names, cameras, Gaussians reference, ...)
    cell_yaml: str
    stats: dict


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _atomic_write_json(path: Path, obj) -> None:
    _atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode())


def _atomic_write_table(path: Path, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    _atomic_write_bytes(path, sink.getvalue().to_pybytes())


def _read_table(path: Path) -> pa.Table:
    if not path.is_file():
        raise DataError(f"dataset file missing: {path}")
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"dataset file {path} is truncated or corrupt: {exc}") from None


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise DataError(f"dataset file missing: {path}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"dataset file {path} is not valid JSON: {exc}") from None


def data_file(episode_index: int) -> str:
    """The data file of an episode, relative to the root: one file per episode, chunks of CHUNKS_SIZE files."""
    return DATA_PATH.format(chunk_index=episode_index // CHUNKS_SIZE, file_index=episode_index % CHUNKS_SIZE)


def _features(n_obj: int, object_names: list[str]) -> dict:
    def vector(n, names):
        return {"dtype": "float32", "shape": [n], "names": names}

    env_names = [f"{name}.{f}" for name in object_names for f in POSE_FIELDS]
    scalar_int = {"dtype": "int64", "shape": [1], "names": None}
    return {
        "observation.state": vector(7, JOINT_NAMES),
        "observation.environment_state": vector(7 * n_obj, env_names),
        "action": vector(7, JOINT_NAMES),
        "progress": {"dtype": "float32", "shape": [1], "names": None},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": dict(scalar_int),
        "episode_index": dict(scalar_int),
        "index": dict(scalar_int),
        "task_index": dict(scalar_int),
    }


def _feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """LeRobot's per-feature stats over frames (axis 0); scalars are kept as 1-vectors like LeRobot's."""
    x = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    stats = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([len(x)])}
    for q in QUANTILES:
        stats[f"q{int(q * 100):02d}"] = np.quantile(x, q, axis=0)
    return stats


def _aggregate_stats(per_episode: list[dict[str, dict[str, np.ndarray]]]) -> dict:
    """Dataset stats from episode stats the way LeRobot's aggregate_feature_stats combines them: count-weighted mean
    and pooled variance, min of mins, max of maxes, quantiles as an envelope (min below q50, max above)."""
    out = {}
    for key in per_episode[0]:
        s = [ep[key] for ep in per_episode]
        counts = np.array([float(x["count"][0]) for x in s])[:, None]
        means = np.stack([x["mean"] for x in s])
        total = counts.sum()
        mean = (means * counts).sum(0) / total
        var = ((np.stack([x["std"] for x in s]) ** 2 + (means - mean) ** 2) * counts).sum(0) / total
        agg = {"min": np.stack([x["min"] for x in s]).min(0), "max": np.stack([x["max"] for x in s]).max(0),
               "mean": mean, "std": np.sqrt(var), "count": np.array([int(total)])}
        for q in QUANTILES:
            name = f"q{int(q * 100):02d}"
            stacked = np.stack([x[name] for x in s])
            agg[name] = stacked.min(0) if q <= 0.5 else stacked.max(0)
        out[key] = {k: v.tolist() for k, v in agg.items()}
    return out


class DatasetWriter:
    """Appends episodes to the dataset at ``root`` (created if absent; an existing one is resumed).

    ``cell_yaml`` (the cell config the twin was built from) and ``static`` (JSON-able: object names, Gaussians
    reference, camera calibration, ...) are stored once in ``meta/real_is_sim.json``; resuming a dataset recorded
    with another cell YAML or fps is refused."""

    def __init__(self, root, *, fps: float, cell_yaml: str, static: dict | None = None):
        if not fps > 0 or float(fps) != int(fps):
            raise DataError(f"fps must be a positive integer (LeRobot stores an int), got {fps}")
        self.root = Path(root)
        self.fps = int(fps)
        self.cell_yaml = cell_yaml
        self.static = dict(static or {})
        self._episodes = self._open()
        self._frames: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] | None = None
        self._task: str | None = None

    def _open(self) -> list[dict]:
        static_path = self.root / STATIC_PATH
        if static_path.is_file():
            stored = _read_json(static_path)
            if stored.get("fps") != self.fps:
                raise DataError(f"dataset {self.root} was recorded at {stored.get('fps')} fps, not {self.fps}")
            if stored.get("cell_yaml") != self.cell_yaml:
                raise DataError(f"dataset {self.root} was recorded with another cell config ({static_path}): "
                                f"resume it with the same task config or write to a new directory")
            self.static = stored.get("static", {})
        else:
            _atomic_write_json(static_path, {"fps": self.fps, "cell_yaml": self.cell_yaml, "static": self.static})
        episodes = _read_table(self.root / EPISODES_PATH).to_pylist() if (self.root / EPISODES_PATH).is_file() else []
        self._remove_orphans(len(episodes))
        info_path = self.root / INFO_PATH
        if episodes and (not info_path.is_file() or _read_json(info_path).get("total_episodes") != len(episodes)):
            # killed after the episodes table was committed, before info/stats followed it
            self._episodes = episodes
            n_obj = len(episodes[0]["stats/observation.environment_state/mean"]) // 7
            self._write_stats_and_info(self._info_base(n_obj), self._tasks())
        return episodes

    def _remove_orphans(self, num_episodes: int) -> None:
        """Data files of episodes the episodes table never committed (a kill between the two renames), temp files."""
        for path in self.root.glob("**/*.tmp"):
            path.unlink()
        data = self.root / "data"
        for path in data.glob("chunk-*/file-*.parquet"):
            index = int(path.parent.name[6:]) * CHUNKS_SIZE + int(path.stem[5:])
            if index >= num_episodes:
                path.unlink()

    @property
    def num_episodes(self) -> int:
        return len(self._episodes)

    def start_episode(self, task: str) -> None:
        if self._frames is not None:
            raise DataError("start_episode: an episode is already being recorded (end or discard it first)")
        if not isinstance(task, str) or not task:
            raise DataError(f"task must be a non-empty string, got {task!r}")
        self._frames, self._task = [], task

    def add_frame(self, *, t: float, object_poses: np.ndarray, q: np.ndarray, q_cmd: np.ndarray) -> None:
        """One frame: time ``t`` (s from the episode start, frames 1/fps apart), object poses (n_obj, 7), robot
        actual joints q (7,) and the commanded ones q_cmd (7,), all observed/sent at ``t``."""
        if self._frames is None:
            raise DataError("add_frame: no episode started (call start_episode first)")
        poses = np.asarray(object_poses, dtype=np.float64)
        q, q_cmd = np.asarray(q, dtype=np.float64).reshape(-1), np.asarray(q_cmd, dtype=np.float64).reshape(-1)
        if poses.ndim != 2 or poses.shape[1] != 7 or q.shape != (7,) or q_cmd.shape != (7,):
            raise DataError(f"add_frame: object_poses must be (n_obj, 7), q and q_cmd (7,); got {poses.shape}, "
                            f"{q.shape}, {q_cmd.shape}")
        if not (np.all(np.isfinite(poses)) and np.all(np.isfinite(q)) and np.all(np.isfinite(q_cmd)) and np.isfinite(t)):
            raise DataError("add_frame: non-finite values")
        if self._frames:
            last_t, last_poses = self._frames[-1][0], self._frames[-1][1]
            if abs(t - last_t - 1.0 / self.fps) > TIMESTAMP_TOLERANCE_S:
                raise DataError(f"add_frame: frames must be 1/{self.fps} s apart (LeRobot checks it); got t={t} after {last_t}")
            if poses.shape != last_poses.shape:
                raise DataError(f"add_frame: {poses.shape[0]} objects, the episode started with {last_poses.shape[0]}")
        self._frames.append((float(t), poses, q, q_cmd))

    def discard_episode(self) -> None:
        self._frames, self._task = None, None

    def end_episode(self, success: bool, **extra) -> int:
        """Write the episode durably; returns its episode_index. ``extra`` (JSON-able values) is stored in its row of
        the episodes table."""
        if not self._frames:
            raise DataError("end_episode: no frames recorded in this episode")
        frames, task = self._frames, self._task
        n_obj = frames[0][1].shape[0]
        info = self._info_base(n_obj)
        if self._episodes:
            recorded = len(self._episodes[0]["stats/observation.environment_state/mean"]) // 7
            if recorded != n_obj:
                raise DataError(f"end_episode: {n_obj} objects, the dataset's episodes have {recorded}")
        episode_index = len(self._episodes)
        tasks = self._tasks()
        task_index = tasks.setdefault(task, len(tasks))
        start = self._episodes[-1]["dataset_to_index"] if self._episodes else 0
        columns = self._columns(frames, episode_index, task_index, start)
        path = data_file(episode_index)
        _atomic_write_table(self.root / path, pa.table(columns))
        stats = {k: _feature_stats(_column_values(columns[k])) for k in STAT_FEATURES}
        row = {
            "episode_index": episode_index, "tasks": [task], "length": len(frames),
            "data/chunk_index": episode_index // CHUNKS_SIZE, "data/file_index": episode_index % CHUNKS_SIZE,
            "dataset_from_index": start, "dataset_to_index": start + len(frames),
            "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
            "success": bool(success),
        }
        for key, value in extra.items():
            row[f"real_is_sim/{key}"] = json.dumps(value)  # JSON text: any extra value, one column type per key
        for key, s in stats.items():
            for name, value in s.items():
                row[f"stats/{key}/{name}"] = value.tolist()
        self._write_tasks(tasks)
        _atomic_write_table(self.root / EPISODES_PATH, _rows_table(self._episodes + [row]))  # the commit
        self._episodes.append(row)
        self._write_stats_and_info(info, tasks)
        self.discard_episode()
        return episode_index

    def close(self) -> None:
        """Drop an unfinished episode (everything finished is already on disk)."""
        self.discard_episode()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _columns(self, frames, episode_index: int, task_index: int, start: int) -> dict[str, pa.Array]:
        T = len(frames)
        t = np.array([f[0] for f in frames])
        n7 = frames[0][1].size

        def vectors(values: np.ndarray, n: int) -> pa.Array:
            flat = pa.array(np.asarray(values, dtype=np.float32).reshape(-1))
            return pa.FixedSizeListArray.from_arrays(flat, n)  # datasets.Sequence(length=n) in LeRobot's features

        return {
            "observation.state": vectors(np.stack([f[2] for f in frames]), 7),
            "observation.environment_state": vectors(np.stack([f[1].reshape(-1) for f in frames]), n7),
            "action": vectors(np.stack([f[3] for f in frames]), 7),
            "progress": pa.array(np.arange(T, dtype=np.float32) / max(T - 1, 1)),
            "timestamp": pa.array((t - t[0]).astype(np.float32)),
            "frame_index": pa.array(np.arange(T, dtype=np.int64)),
            "episode_index": pa.array(np.full(T, episode_index, dtype=np.int64)),
            "index": pa.array(np.arange(start, start + T, dtype=np.int64)),
            "task_index": pa.array(np.full(T, task_index, dtype=np.int64)),
        }

    def _info_base(self, n_obj: int) -> dict:
        names = self.static.get("object_names") or [f"object{i}" for i in range(n_obj)]
        if len(names) != n_obj:
            raise DataError(f"static['object_names'] names {len(names)} objects, the frames have {n_obj}")
        return {"codebase_version": CODEBASE_VERSION, "robot_type": "franka_panda", "fps": self.fps,
                "features": _features(n_obj, list(names))}

    def _tasks(self) -> dict[str, int]:
        path = self.root / TASKS_PATH
        if not path.is_file():
            return {}
        table = _read_table(path)
        return dict(zip(table.column("task").to_pylist(), table.column("task_index").to_pylist()))

    def _write_tasks(self, tasks: dict[str, int]) -> None:
        # LeRobot reads it with pandas (pd.read_parquet, index named "task"): store the task strings as the pandas
        # index through the schema's pandas metadata, which is what DataFrame.to_parquet writes.
        table = pa.table({"task_index": pa.array(list(tasks.values()), pa.int64()), "task": pa.array(list(tasks), pa.string())})
        pandas_meta = {
            "index_columns": ["task"], "column_indexes": [], "creator": {"library": "pyarrow", "version": pa.__version__},
            "pandas_version": "2.2.3",
            "columns": [
                {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": None},
                {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
            ],
        }
        table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
        _atomic_write_table(self.root / TASKS_PATH, table)

    def _write_stats_and_info(self, info: dict, tasks: dict[str, int]) -> None:
        per_episode = [{k: {name: np.asarray(ep[f"stats/{k}/{name}"]) for name in ("min", "max", "mean", "std", "count",
                                                                                  *(f"q{int(q * 100):02d}" for q in QUANTILES))}
                        for k in STAT_FEATURES} for ep in self._episodes]
        _atomic_write_json(self.root / STATS_PATH, _aggregate_stats(per_episode))
        total_frames = self._episodes[-1]["dataset_to_index"]
        info.update({
            "total_episodes": len(self._episodes), "total_frames": total_frames, "total_tasks": len(tasks),
            "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200,
            "data_path": DATA_PATH, "video_path": None, "splits": {"train": f"0:{len(self._episodes)}"},
        })
        _atomic_write_json(self.root / INFO_PATH, info)


def _rows_table(rows: list[dict]) -> pa.Table:
    """Rows to a table with the union of their keys (a key an earlier episode lacks is null there)."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return pa.table({k: [row.get(k) for row in rows] for k in keys})


def _column_values(array: pa.Array) -> np.ndarray:
    if pa.types.is_fixed_size_list(array.type):
        return array.flatten().to_numpy().reshape(len(array), array.type.list_size)
    return array.to_numpy()


def load_dataset(root) -> Dataset:
    """Every committed episode of the dataset at ``root``. A missing, truncated or inconsistent file raises one
    DataError naming it."""
    root = Path(root)
    info = _read_json(root / INFO_PATH)
    if info.get("codebase_version") != CODEBASE_VERSION:
        raise DataError(f"{root / INFO_PATH}: codebase_version {info.get('codebase_version')!r}, expected {CODEBASE_VERSION!r}")
    static = _read_json(root / STATIC_PATH)
    n7 = info["features"]["observation.environment_state"]["shape"][0]
    rows = _read_table(root / EPISODES_PATH).to_pylist()
    tasks_table = _read_table(root / TASKS_PATH)
    tasks = dict(zip(tasks_table.column("task_index").to_pylist(), tasks_table.column("task").to_pylist()))
    episodes = []
    for row in rows:
        path = root / info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
        table = _read_table(path)
        if table.num_rows != row["length"]:
            raise DataError(f"dataset file {path} has {table.num_rows} frames, meta/episodes says {row['length']}")
        try:
            t = table.column("timestamp").to_numpy().astype(np.float64)
            poses = _column_values(table.column("observation.environment_state").combine_chunks())
            q = _column_values(table.column("observation.state").combine_chunks())
            q_cmd = _column_values(table.column("action").combine_chunks())
            progress = table.column("progress").to_numpy().astype(np.float64)
            task_index = int(table.column("task_index")[0].as_py())
        except KeyError as exc:
            raise DataError(f"dataset file {path} lacks a column: {exc}") from None
        if poses.shape[1] != n7:
            raise DataError(f"dataset file {path}: environment_state has {poses.shape[1]} values, info.json says {n7}")
        extra = {k[len("real_is_sim/"):]: json.loads(v) for k, v in row.items()
                 if k.startswith("real_is_sim/") and v is not None}
        episodes.append(Episode(
            index=row["episode_index"], task=tasks.get(task_index, row["tasks"][0]), t=t,
            object_poses=poses.reshape(len(t), -1, 7).astype(np.float64), q=q.astype(np.float64),
            q_cmd=q_cmd.astype(np.float64), progress=progress, success=bool(row["success"]), extra=extra))
    stats = _read_json(root / STATS_PATH) if (root / STATS_PATH).is_file() else {}
    return Dataset(root, info, episodes, static.get("static", {}), static.get("cell_yaml", ""), stats)


def copy_episodes(source, destination, indices) -> int:
    """Append the episodes ``indices`` of the dataset at ``source`` to the one at ``destination`` (created with the
    source's fps, cell and static data; an existing one must match them), frames and per-episode extras unchanged:
    how a mixed dataset starts (e.g. 30 demonstrations of one set, then targeted ones collected into it). Each copy
    records ``copied_from`` (``source#index``; a copy of a copy keeps the first). Returns the destination's
    episode count."""
    src = load_dataset(source)
    chosen = [src.episodes[i] for i in indices] if all(0 <= i < len(src.episodes) for i in indices) else None
    if chosen is None:
        raise DataError(f"copy_episodes: indices {list(indices)} outside the {len(src.episodes)} episodes of {source}")
    writer = DatasetWriter(destination, fps=src.info["fps"], cell_yaml=src.cell_yaml, static=src.static)
    for episode in chosen:
        writer.start_episode(episode.task)
        for k in range(len(episode)):
            writer.add_frame(t=float(episode.t[k]), object_poses=episode.object_poses[k], q=episode.q[k],
                             q_cmd=episode.q_cmd[k])
        # a copy of a copy keeps the episode's first origin: where it was recorded
        extra = {"copied_from": f"{source}#{episode.index}", **episode.extra}
        writer.end_episode(episode.success, **extra)
    return writer.num_episodes
