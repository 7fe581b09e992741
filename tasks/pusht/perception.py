"""PushT perception for the bridge: finding the lost T-block again in the frames (by its red-orange pixels)."""

from __future__ import annotations

import numpy as np

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.correction.initial_pose import InitialPoseCfg, estimate_initial_pose
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.render.masks import red_orange_mask
from real_is_sim.task import Relocalize


def relocalizer(cloud: GaussianCloud, cameras: list[CameraInfo], plane: np.ndarray) -> Relocalize:
    def relocalize(images: list, poses: np.ndarray) -> np.ndarray | None:
        """Search the whole turn and the table around the red-orange pixels for the block (one object), in the views
        that show it (the arm may hide it from some); None when none does."""
        views = [k for k, image in enumerate(images) if image is not None and red_orange_mask(image).any()]
        if not views:
            return None
        # Pushing does not turn the block over: search with the face it has now up.
        found = estimate_initial_pose(
            cloud, [images[k] for k in views], np.stack([cameras[k].viewmat_opencv() for k in views]),
            np.stack([cameras[k].K for k in views]), poses[0], plane, InitialPoseCfg(both_faces=False),
        )
        return found.pose[None]

    return relocalize
