"""The task interface: what the core asks of a task package, which it finds by module name.

A task package (``real_is_sim_tasks.pusht``) imports the core; the core never imports it. The bridge and the replay
name the task in their configs (``task_module``) and :func:`import_task` loads it, so a new task needs no change here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from real_is_sim.errors import ConfigError

if TYPE_CHECKING:
    from real_is_sim.bridge.config import PolicyCfg
    from real_is_sim.cameras.base import CameraInfo
    from real_is_sim.cell import CellCfg
    from real_is_sim.gaussians.cloud import GaussianCloud
    from real_is_sim.twin import Twin

DEFAULT_TASK = "real_is_sim_tasks.pusht"

# t -> arm joint targets (1, 7), or None: the twin robot keeps its last ones.
Policy = Callable[[float], "np.ndarray | None"]
# (images, object poses (n_obj, 7)) -> object poses found in the images, or None; see OnlineLoop.
Relocalize = Callable[[list, np.ndarray], "np.ndarray | None"]


class Task(Protocol):
    def load_cfg(self, name: str) -> CellCfg:
        """The task's config (the cell and the task's own settings) from ``name``: a YAML beside the task or a path."""

    def success(self, cfg: CellCfg, object_poses: np.ndarray) -> bool:
        """Whether objects at ``object_poses`` (n_obj, 7) solve the task."""

    def object_mask(self, image: np.ndarray) -> np.ndarray:
        """H x W bool: the task's objects' pixels in an RGB frame (to find them: initial pose, relocalisation)."""

    def relocalizer(self, cloud: GaussianCloud, cameras: list[CameraInfo], plane: np.ndarray) -> Relocalize:
        """Finds lost objects again in the frames of ``cameras``; ``cloud`` their Gaussians, ``plane`` the table."""

    def scripted_policy(self, twin: Twin, cfg: PolicyCfg) -> Policy:
        """The task's scripted policy on ``twin`` (until a learned one exists)."""


def import_task(module: str) -> Task:
    """The task module ``module`` (e.g. ``real_is_sim_tasks.pusht``), checked for the :class:`Task` functions."""
    try:
        task = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"task_module: cannot import {module!r}: {exc}") from None
    missing = [name for name in ("load_cfg", "success", "object_mask", "relocalizer", "scripted_policy") if not hasattr(task, name)]
    if missing:
        raise ConfigError(f"task_module: {module!r} is not a task (it lacks {', '.join(missing)})")
    return task

