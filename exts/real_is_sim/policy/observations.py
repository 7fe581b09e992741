"""Camera observations of the policy's image variants, rendered from states, and their cache for training.

- ``static_camera`` / ``wrist_camera``: the twin's virtual cameras (:func:`real_is_sim.render.virtual_cameras.render_virtual`;
  the static one is the stand-in's first ring camera, where a real camera stands).
- ``real_image``: the frame the stand-in world's first camera exposes at that state. The stand-in renders with the
  twin's own appearance model from that same camera pose (real_is_sim.standin.world), so its frame is the static
  render plus the stand-in's sensor noise (``StandInCfg.noise_std``, seeded). Offline data hold the twin's poses, so
  the frame is rendered at those; the stand-in's latency, exposure changes and dropped frames are left out.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from real_is_sim.cell import CellCfg
from real_is_sim.errors import ConfigError
from real_is_sim.task import DEFAULT_TASK, import_task

DEFAULT_TASK_YAML = "pusht.yaml"  # the default task's default cell, as render_virtual uses it

RENDER_BATCH = 32  # images per renderer call while filling a cache


class ObservationRenderer:
    """``render(object_poses [B, n_obj, 7], robot_q [B, 7]) -> uint8 [B, size, size, 3]`` for an image variant."""

    def __init__(self, variant: str, size: int, cell: CellCfg | None = None, seed: int = 0) -> None:
        from real_is_sim.standin.world import StandInCfg

        if variant not in ("static_camera", "wrist_camera", "real_image"):
            raise ConfigError(f"variant {variant!r} has no camera observation")
        self.variant, self.size, self.cell = variant, size, cell
        self.noise_std = StandInCfg().noise_std if variant == "real_image" else 0.0
        self._rng = np.random.default_rng(seed)
        self._cameras = None  # built at the first call

    def render(self, object_poses, robot_q) -> np.ndarray:
        from real_is_sim.render.virtual_cameras import VirtualCameras

        # this renderer's own cameras: render_virtual finds a cell's cameras by serialising the cell to YAML on
        # every call
        if self._cameras is None:
            self._cameras = VirtualCameras(self.cell if self.cell is not None else cell_from_yaml(""))
        kind = "wrist" if self.variant == "wrist_camera" else "static"
        images = self._cameras.render(kind, np.asarray(object_poses), np.asarray(robot_q), self.size, self.size)
        if not self.noise_std:
            return images
        noisy = images / 255.0 + self._rng.normal(0.0, self.noise_std, images.shape)
        return np.round(np.clip(noisy, 0.0, 1.0) * 255.0).astype(np.uint8)


def renderer_for(variant: str, size: int, cell_yaml: str, seed: int = 0) -> ObservationRenderer:
    """The renderer of a policy's observations in the cell its data was recorded in (``cell_yaml``: the dataset's
    cell config, kept in the policy's config; empty: the default PushT cell)."""
    return ObservationRenderer(variant, size, cell_from_yaml(cell_yaml), seed)


def cell_from_yaml(cell_yaml: str, task_module: str = DEFAULT_TASK) -> CellCfg:
    """The cell a dataset stored (``Dataset.cell_yaml``), read by its task's loader; empty: the task's default."""
    task = import_task(task_module)
    if not cell_yaml:
        return task.load_cfg(DEFAULT_TASK_YAML)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cell.yaml"
        path.write_text(cell_yaml)
        return task.load_cfg(str(path))


def _digest(object_poses: np.ndarray, robot_q: np.ndarray) -> str:
    h = hashlib.sha256()
    for array in (object_poses, robot_q):
        h.update(np.ascontiguousarray(array, dtype=np.float32).tobytes())
    return h.hexdigest()


def cached_images(cache_dir: str | Path, renderer: ObservationRenderer, object_poses: np.ndarray, robot_q: np.ndarray,
                  progress: bool = True) -> np.ndarray:
    """Images of these states, rendered once and kept in ``cache_dir/<variant>_<size>px.npy``; a cache of other
    states (the dataset grew, another frame stride) is rendered anew. Filled in batches, so an interrupted fill
    starts over (the .npy is written only when complete)."""
    from tqdm import tqdm

    cache_dir = Path(cache_dir)
    stem = cache_dir / f"{renderer.variant}_{renderer.size}px"
    images_path, key_path = stem.with_suffix(".npy"), stem.with_suffix(".json")
    digest = _digest(object_poses, robot_q)
    if images_path.is_file() and key_path.is_file() and json.loads(key_path.read_text()).get("states") == digest:
        return np.load(images_path)
    images = np.empty((len(robot_q), renderer.size, renderer.size, 3), dtype=np.uint8)
    starts = range(0, len(robot_q), RENDER_BATCH)
    for start in tqdm(starts, desc=f"render {renderer.variant}", disable=not progress):
        images[start:start + RENDER_BATCH] = renderer.render(object_poses[start:start + RENDER_BATCH],
                                                             robot_q[start:start + RENDER_BATCH])
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = images_path.with_name(images_path.name + ".tmp.npy")
    np.save(tmp, images)
    tmp.replace(images_path)
    key_path.write_text(json.dumps({"states": digest, "samples": len(images)}))
    return images
