"""Camera observations of the policy's image variants, rendered from states, and their cache for training.

- ``static_camera`` / ``wrist_camera``: the twin's virtual cameras (:func:`real_is_sim.render.virtual_cameras.render_virtual`;
  the static one is the stand-in's first ring camera, where a real camera stands).
- ``real_image``: the real camera's frame: the stand-in world's look (:class:`~real_is_sim.standin.look.StandInLook`:
  its own block Gaussians, the real table, its true calibration, exposure drift, the arm's shadow, its robot's
  appearance, sensor noise) through a camera fixed where the static one stands, with the same framing. Online the
  episode's stand-in is rendered at its true state (``reality``); for training and offline, where no stand-in runs,
  each image shows the state through one of ``REAL_IMAGE_LOOKS`` realities drawn with the realistic appearance
  (``HiddenAppearance.realistic()``), at a random point of the colour drift: what the camera of a reality like the
  evaluation's would have shown there. Offline evaluation draws other realities than training
  (``EVALUATION_REALITIES``), as online episodes meet their own. Motion blur, latency and dropped frames are left out.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from real_is_sim.cell import CellCfg
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.task import DEFAULT_TASK, import_task

DEFAULT_TASK_YAML = "pusht.yaml"  # the default task's default cell, as render_virtual uses it

RENDER_BATCH = 32  # images per renderer call while filling a cache
REAL_IMAGE_LOOKS = 16  # realities the real_image training (or offline) frames are drawn from
# their stand-in seeds: first + k, apart from each other and from episode seeds
TRAINING_REALITIES, EVALUATION_REALITIES = 1_000_000, 2_000_000
REAL_IMAGE_SERIAL = "policy"


class ObservationRenderer:
    """``render(object_poses [B, n_obj, 7], robot_q [B, 7]) -> uint8 [B, size, size, 3]`` for an image variant."""

    def __init__(self, variant: str, size: int, cell: CellCfg | None = None, seed: int = 0, reality=None,
                 block_scale: float = 1.0, realities: int = TRAINING_REALITIES) -> None:
        """``seed``: the random draws of ``real_image`` (which reality, when in the drift, sensor noise);
        ``reality``: the :class:`~real_is_sim.standin.world.StandInCfg` of the one stand-in ``real_image`` shows
        (online; its hidden ``block_scale`` beside it), None: ``REAL_IMAGE_LOOKS`` realistic ones, stand-in seeds
        ``realities + k``."""
        if variant not in ("static_camera", "wrist_camera", "real_image"):
            raise ConfigError(f"variant {variant!r} has no camera observation")
        self.variant, self.size, self.cell = variant, size, cell
        self.reality, self.block_scale, self.realities = reality, block_scale, realities
        self._rng = np.random.default_rng(seed)
        self._cameras = None  # built at the first call
        self._looks = None

    @property
    def key(self) -> str:
        """What the images depend on besides the states (a training cache's key)."""
        return f"{self.variant}:{self.size}px:" + (f"realistic-looks-{self.realities}" if self.variant == "real_image"
                                                   else "twin")

    def render(self, object_poses, robot_q, t: float | None = None) -> np.ndarray:
        """``t``: the reality's clock (its colour drift; ``real_image`` online), None: a random point of it."""
        if self.variant == "real_image":
            return self._render_real(np.asarray(object_poses, dtype=np.float64), np.asarray(robot_q, dtype=np.float64), t)
        from real_is_sim.render.virtual_cameras import VirtualCameras

        # this renderer's own cameras: render_virtual finds a cell's cameras by serialising the cell to YAML on
        # every call
        if self._cameras is None:
            self._cameras = VirtualCameras(self._cell())
        kind = "wrist" if self.variant == "wrist_camera" else "static"
        return self._cameras.render(kind, np.asarray(object_poses), np.asarray(robot_q), self.size, self.size)

    def _cell(self) -> CellCfg:
        return self.cell if self.cell is not None else cell_from_yaml("")

    def _render_real(self, poses: np.ndarray, qs: np.ndarray, t: float | None) -> np.ndarray:
        if poses.ndim != 3 or poses.shape[2] != 7 or qs.shape != (len(poses), 7):
            raise DataError(f"object_poses must be [B, n_obj, 7] and robot_q [B, 7]; got {poses.shape} and {qs.shape}")
        from real_is_sim.standin.look import render_looks

        looks = self._looks if self._looks is not None else self._build_looks()
        picked, times, noise = [], [], []
        for _ in range(len(poses)):  # per image: which reality, when in its drift, its pixel noise
            look = looks[0] if len(looks) == 1 else looks[self._rng.integers(len(looks))]
            picked.append(look)
            times.append(t if t is not None else self._rng.uniform(0.0, look.cfg.appearance.drift_period_s))
            noise.append(self._rng.normal(0.0, look.cfg.noise_std, (self.size, self.size, 3)))
        images = render_looks(picked, poses, qs, REAL_IMAGE_SERIAL, times)
        exposure = np.array([look.cfg.exposure for look in picked])[:, None, None, None]
        return np.round(np.clip(images * exposure + np.stack(noise), 0.0, 1.0) * 255.0).astype(np.uint8)

    def _build_looks(self) -> list:
        from real_is_sim.cameras.base import CameraInfo
        from real_is_sim.correction.background import table_background
        from real_is_sim.render.virtual_cameras import scaled_intrinsics
        from real_is_sim.robot.appearance import RobotAppearance
        from real_is_sim.standin.appearance import HiddenAppearance
        from real_is_sim.standin.cameras import ring_cameras
        from real_is_sim.standin.look import StandInLook
        from real_is_sim.standin.world import StandInCfg
        from real_is_sim.twin.tblock import block_cloud, block_geometry, table_plane

        cell = self._cell()
        ring = ring_cameras(block_geometry(cell).start_pose[:3])[0]  # the static camera (VirtualCameras' first)
        K = scaled_intrinsics(ring.K, ring.resolution, self.size, self.size)
        camera = CameraInfo(REAL_IMAGE_SERIAL, K, self.size, self.size, ring.X_WC)
        model_table = {REAL_IMAGE_SERIAL: table_background(K, camera.viewmat_opencv(), self.size, self.size,
                                                           table_plane(cell.table))}
        robot = RobotAppearance(base_pose=np.asarray(cell.robot.base_pose))  # one Franka for every reality
        realities = [self.reality] if self.reality is not None else [
            StandInCfg(seed=self.realities + k, appearance=HiddenAppearance.realistic()) for k in range(REAL_IMAGE_LOOKS)]
        self._looks = [StandInLook(cell, r, [camera], block_cloud(cell), model_table, self.block_scale,
                                  robot=robot) for r in realities]
        return self._looks


def renderer_for(variant: str, size: int, cell_yaml: str, seed: int = 0,
                 realities: int = TRAINING_REALITIES) -> ObservationRenderer:
    """The renderer of a policy's observations in the cell its data was recorded in (``cell_yaml``: the dataset's
    cell config, kept in the policy's config; empty: the default PushT cell)."""
    return ObservationRenderer(variant, size, cell_from_yaml(cell_yaml), seed, realities=realities)


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
    states (the dataset grew, another frame stride) or of another renderer (``ObservationRenderer.key``) is rendered
    anew. Filled in batches, so an interrupted fill starts over (the .npy is written only when complete)."""
    from tqdm import tqdm

    cache_dir = Path(cache_dir)
    stem = cache_dir / f"{renderer.variant}_{renderer.size}px"
    images_path, key_path = stem.with_suffix(".npy"), stem.with_suffix(".json")
    digest = _digest(object_poses, robot_q)
    key = {"states": digest, "renderer": renderer.key}
    if images_path.is_file() and key_path.is_file() and json.loads(key_path.read_text()).items() >= key.items():
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
    key_path.write_text(json.dumps({**key, "samples": len(images)}))
    return images
