"""PushT perception: the T-block's pixels (its red-orange colour) and finding the lost block again in the frames."""

from __future__ import annotations

import numpy as np

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.correction.initial_pose import InitialPoseCfg, estimate_initial_pose
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim_tasks.pusht.masks import red_orange_mask
from real_is_sim.task import Relocalize


def object_mask(image: np.ndarray) -> np.ndarray:
    """H x W bool: the T-block's pixels in an RGB frame (the task interface's name for :func:`red_orange_mask`)."""
    return red_orange_mask(image)


def relocalizer(cloud: GaussianCloud, cameras: list[CameraInfo], plane: np.ndarray) -> Relocalize:
    def relocalize(images: list, poses: np.ndarray) -> np.ndarray | None:
        """Search the whole turn and the table around the red-orange pixels for the block (one object), in the views
        that show it (the arm may hide it from some); None when none does."""
        views = [k for k, image in enumerate(images) if image is not None and object_mask(image).any()]
        if not views:
            return None
        # Pushing does not turn the block over: search with the face it has now up.
        found = estimate_initial_pose(
            cloud, [images[k] for k in views], np.stack([cameras[k].viewmat_opencv() for k in views]),
            np.stack([cameras[k].K for k in views]), poses[0], plane, InitialPoseCfg(both_faces=False),
            object_mask=object_mask,
        )
        return found.pose[None]

    return relocalize
