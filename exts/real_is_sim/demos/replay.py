"""Recorded episodes seen again: any frame re-rendered from a virtual camera, an episode replayed through the twin.

Images are never stored: a frame's state (object poses, robot joints) and the dataset's initial full state (cell
config, cameras) are enough to render it from any virtual camera. The open-loop replay drives a fresh twin with the
recorded commands from the recorded first state and measures how far its block ends from the recorded one: zero
for a deterministic offline twin, the work the visual forces did for an online episode (docs/dataset.md).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real_is_sim.cell import CellCfg
from real_is_sim.config import load_config
from real_is_sim.demos.dataset import Dataset, Episode
from real_is_sim.errors import DataError
from real_is_sim.render.virtual_cameras import VirtualCameras, cameras_from_static
from real_is_sim.task import DEFAULT_TASK, import_task
from real_is_sim.transforms import rotation_angle_between


def dataset_cell(ds: Dataset) -> CellCfg:
    """The cell config the dataset was recorded with (its stored YAML, read by the task that wrote it)."""
    task = import_task(ds.static.get("task_module", DEFAULT_TASK))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cell.yaml"
        path.write_text(ds.cell_yaml)
        return task.load_cfg(str(path))


def dataset_cameras(ds: Dataset) -> VirtualCameras:
    """Virtual cameras of the dataset's cell at its recorded static cameras (the stand-in's or the cell's)."""
    cameras = cameras_from_static(ds.static) if ds.static.get("cameras") else None
    return VirtualCameras(dataset_cell(ds), cameras)


def _episode(ds: Dataset, episode: int) -> Episode:
    if not 0 <= episode < len(ds.episodes):
        raise DataError(f"episode {episode} is not in the dataset ({len(ds.episodes)} episodes)")
    return ds.episodes[episode]


def render_frames(ds: Dataset, episode: int, frames, kind: str, width: int, height: int, camera: str | None = None,
                  cameras: VirtualCameras | None = None) -> np.ndarray:
    """uint8 ``[len(frames), H, W, 3]``: recorded frames of ``episode`` from the ``kind`` camera ("static": the stored
    camera ``camera`` (serial; default the first), "wrist"). Pass ``cameras`` (:func:`dataset_cameras`) to reuse them."""
    ep = _episode(ds, episode)
    frames = np.atleast_1d(np.asarray(frames, dtype=np.int64))
    if np.any(frames < 0) or np.any(frames >= len(ep)):
        raise DataError(f"frames {frames.tolist()} out of range: episode {episode} has {len(ep)} frames")
    cameras = cameras or dataset_cameras(ds)
    return cameras.render(kind, ep.object_poses[frames], ep.q[frames], width, height, camera=camera)


@dataclass
class ReplayResult:
    episode: int
    frames: int
    final_position_error_mm: float  # block, in the table plane, replayed vs recorded at the last frame
    final_rotation_error_deg: float
    max_position_error_mm: float  # over the whole episode
    max_rotation_error_deg: float


def replay_open_loop(ds: Dataset, episode: int) -> ReplayResult:
    """Drive a fresh twin (the dataset's cell and physics settings) from the episode's first recorded state with its
    recorded commands q', frame by frame, and compare its block with the recorded one at every frame."""
    from real_is_sim.twin import Twin, TwinCfg

    ep = _episode(ds, episode)
    twin_cfg = load_config(TwinCfg, ds.static["twin"]) if "twin" in ds.static else TwinCfg()
    twin = Twin(dataset_cell(ds), 1, twin_cfg)
    twin.reset(object_poses=ep.object_poses[:1], robot_q=ep.q[:1])
    position, rotation = [], []
    for k in range(len(ep)):
        block, recorded = twin.object_poses()[0, 0], ep.object_poses[k, 0]
        position.append(np.linalg.norm(block[:2] - recorded[:2]))
        rotation.append(rotation_angle_between(block[3:7], recorded[3:7]))
        if k + 1 < len(ep):
            twin.step(ep.q_cmd[k][None])
    position_mm, rotation_deg = np.asarray(position) * 1e3, np.degrees(np.asarray(rotation, dtype=np.float64))
    return ReplayResult(episode, len(ep), float(position_mm[-1]), float(rotation_deg[-1]),
                        float(position_mm.max()), float(rotation_deg.max()))


def main(argv: list[str] | None = None) -> int:
    """``python -m real_is_sim.demos.replay DATASET [--episodes 0 1] [--images DIR]``: replay episodes open loop (one
    JSON line each, then a summary line); ``--images``: their first, middle and last frames from every virtual camera
    as PNG files."""
    import argparse
    import json
    from dataclasses import asdict

    from PIL import Image

    from real_is_sim.cli import quiet_warp
    from real_is_sim.demos.dataset import load_dataset

    parser = argparse.ArgumentParser(prog="python -m real_is_sim.demos.replay", description=main.__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--episodes", type=int, nargs="*", help="default: all")
    parser.add_argument("--images", help="write re-rendered frames here")
    parser.add_argument("--size", type=int, nargs=2, default=(320, 240), metavar=("W", "H"))
    args = parser.parse_args(argv)
    quiet_warp()
    ds = load_dataset(args.dataset)
    episodes = range(len(ds.episodes)) if args.episodes is None else args.episodes
    results = [replay_open_loop(ds, k) for k in episodes]
    for result in results:
        print(json.dumps(asdict(result)))
    if args.images:
        out = Path(args.images)
        out.mkdir(parents=True, exist_ok=True)
        cameras = dataset_cameras(ds)
        for k in episodes:
            frames = [0, len(ds.episodes[k]) // 2, len(ds.episodes[k]) - 1]
            views = [("wrist", None)] + [("static", c.serial) for c in cameras.cameras]
            for kind, serial in views:
                images = render_frames(ds, k, frames, kind, *args.size, camera=serial, cameras=cameras)
                name = serial or kind
                for frame, image in zip(frames, images):
                    Image.fromarray(image).save(out / f"episode{k:03d}_{name}_frame{frame:05d}.png")
    print(json.dumps({
        "episodes": len(results),
        "final_position_error_mm_median": round(float(np.median([r.final_position_error_mm for r in results])), 3),
        "final_position_error_mm_max": round(max(r.final_position_error_mm for r in results), 3),
        "final_rotation_error_deg_median": round(float(np.median([r.final_rotation_error_deg for r in results])), 3),
        "final_rotation_error_deg_max": round(max(r.final_rotation_error_deg for r in results), 3),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
