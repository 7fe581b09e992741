"""Training samples from a demonstration dataset: observation at frame i, the action chunk that follows it.

The chunk at frame i holds the commanded joints q' and the progress label at t_i + k H/m, k = 0..m-1 (every
1/32 s for m = 32 over H = 1 s; the 60 Hz frames are linearly interpolated on t, the last frame repeats past the
episode's end, so a policy learns to hold still when the demonstration is over).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real_is_sim.errors import DataError


@dataclass
class TrainingSet:
    object_poses: np.ndarray  # [N, n_obj, 7] float32, the twin's object poses at each sample's frame
    q: np.ndarray  # [N, 7] float32, the robot's measured joints
    chunks: np.ndarray  # [N, m, 8] float32, q' (7) + progress per waypoint
    episode: np.ndarray  # [N] int, the episode each sample comes from
    previous_object_poses: np.ndarray  # [N, n_obj, 7] at frame i - history_frames (before the episode: its first)
    previous_q: np.ndarray  # [N, 7] likewise

    @property
    def previous(self) -> tuple[np.ndarray, np.ndarray]:
        return self.previous_object_poses, self.previous_q

    def __len__(self) -> int:
        return len(self.q)


def action_chunks(t: np.ndarray, q_cmd: np.ndarray, progress: np.ndarray, frames: np.ndarray, waypoints: int,
                  horizon_s: float) -> np.ndarray:
    """[len(frames), m, 8]: q_cmd and progress interpolated at t[frames] + k horizon_s / m, held after t[-1]."""
    offsets = np.arange(waypoints) * (horizon_s / waypoints)
    times = np.minimum(t[frames][:, None] + offsets[None, :], t[-1])  # [F, m]
    values = np.concatenate([q_cmd, progress[:, None]], axis=1)  # [T, 8]
    chunk = np.stack([np.interp(times, t, values[:, d]) for d in range(values.shape[1])], axis=-1)
    return chunk.astype(np.float32)


def _check_episode(episode, num_objects: int) -> None:
    """One DataError naming the episode and the field that does not fit the policy's layout."""
    name = f"episode {getattr(episode, 'index', '?')}"
    try:
        t, poses, q, q_cmd, progress = (np.asarray(getattr(episode, f), dtype=np.float64)
                                        for f in ("t", "object_poses", "q", "q_cmd", "progress"))
    except AttributeError as exc:
        raise DataError(f"{name} lacks a field the policy trains on: {exc}") from None
    T = len(t)
    if T < 2:
        raise DataError(f"{name} has {T} frames; a chunk needs at least 2")
    expected = {"object_poses": (T, num_objects, 7), "q": (T, 7), "q_cmd": (T, 7), "progress": (T,)}
    for field, array in zip(expected, (poses, q, q_cmd, progress)):
        if array.shape != expected[field]:
            raise DataError(f"{name}: {field} has shape {array.shape}, expected {expected[field]}")
    for field, array in zip(("t", *expected), (t, poses, q, q_cmd, progress)):
        if not np.all(np.isfinite(array)):
            raise DataError(f"{name}: {field} holds NaN or infinite values")
    if np.any(np.diff(t) <= 0):
        raise DataError(f"{name}: time t is not strictly increasing")
    if progress.min() < 0 or progress.max() > 1:
        raise DataError(f"{name}: progress labels leave [0, 1] ({progress.min():.3f}..{progress.max():.3f})")


def sample_frames(num_frames: int, stride: int) -> np.ndarray:
    return np.arange(0, num_frames, stride)


def build_training_set(episodes, waypoints: int, horizon_s: float, num_objects: int, frame_stride: int = 1,
                       history_frames: int = 0) -> TrainingSet:
    """Samples at every ``frame_stride``-th frame of every episode; ``previous_*`` hold the frame
    ``history_frames`` earlier, the first frame where the episode has none (as at the start of a rollout)."""
    if not episodes:
        raise DataError("the dataset has no episodes to train on")
    parts = {"object_poses": [], "q": [], "chunks": [], "episode": [], "previous_object_poses": [], "previous_q": []}
    for episode in episodes:
        _check_episode(episode, num_objects)
        t = np.asarray(episode.t, dtype=np.float64)
        frames = sample_frames(len(t), frame_stride)
        parts["object_poses"].append(np.asarray(episode.object_poses, dtype=np.float32)[frames])
        parts["q"].append(np.asarray(episode.q, dtype=np.float32)[frames])
        parts["chunks"].append(action_chunks(t, np.asarray(episode.q_cmd, dtype=np.float64),
                                             np.asarray(episode.progress, dtype=np.float64), frames, waypoints, horizon_s))
        parts["episode"].append(np.full(len(frames), int(episode.index)))
        earlier = np.maximum(frames - history_frames, 0)
        parts["previous_object_poses"].append(np.asarray(episode.object_poses, dtype=np.float32)[earlier])
        parts["previous_q"].append(np.asarray(episode.q, dtype=np.float32)[earlier])
    return TrainingSet(**{k: np.concatenate(v) for k, v in parts.items()})
