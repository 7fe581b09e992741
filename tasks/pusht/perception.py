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


# A re-localised block must be plausible: where a hand could have put it on the table.
MAX_JUMP_M = 0.25  # in-plane distance from the tracked pose (the cell's table is ~0.5 m across; a wrong find: ~0.4 m)
MAX_HEIGHT_CHANGE_M = 0.02  # off the table plane by more than the tracked pose is: not resting on the table


def plausibility(candidate: np.ndarray, tracked: np.ndarray, plane: np.ndarray) -> tuple[float, float]:
    """(in-plane distance, change of height above ``plane`` = (n, d)) from the tracked pose (7,) to the candidate (7,)."""
    normal = np.asarray(plane[:3], dtype=np.float64)
    normal = normal / np.linalg.norm(normal)
    offset = np.asarray(candidate[:3], dtype=np.float64) - np.asarray(tracked[:3], dtype=np.float64)
    rise = float(offset @ normal)
    return float(np.linalg.norm(offset - rise * normal)), rise


def plausible(candidate: np.ndarray, tracked: np.ndarray, plane: np.ndarray) -> bool:
    """A candidate pose ``(7,)`` the loop may compare with the tracked one ``(7,)``: on the table (height above
    ``plane`` = (n, d) within MAX_HEIGHT_CHANGE_M of the tracked pose's) and within MAX_JUMP_M of it in the plane.
    The loop then still accepts it only if it explains the frames better than the tracked pose
    (OnlineLoop._recover). No silhouette-IoU gate: while the arm pushes the block the right candidate's mean IoU
    was 0.2 (perfect appearance, scanned block, bench_sync draw 3)."""
    sideways, rise = plausibility(candidate, tracked, plane)
    return bool(np.all(np.isfinite(candidate)) and abs(rise) <= MAX_HEIGHT_CHANGE_M and sideways <= MAX_JUMP_M
)


def relocalizer(cloud: GaussianCloud, cameras: list[CameraInfo], plane: np.ndarray) -> Relocalize:
    def relocalize(images: list, poses: np.ndarray) -> np.ndarray | None:
        """Search the whole turn and the table around the red-orange pixels for the block (one object), in the views
        that show it (the arm may hide it from some); None when none does, or when the pose found is implausible
        (:func:`plausible`)."""
        views = [k for k, image in enumerate(images) if image is not None and object_mask(image).any()]
        if not views:
            return None
        # Pushing does not turn the block over: search with the face it has now up.
        found = estimate_initial_pose(
            cloud, [images[k] for k in views], np.stack([cameras[k].viewmat_opencv() for k in views]),
            np.stack([cameras[k].K for k in views]), poses[0], plane, InitialPoseCfg(both_faces=False),
            object_mask=object_mask,
        )
        iou = float(np.mean(found.ious)) if len(found.ious) else 0.0
        sideways, rise = plausibility(found.pose, poses[0], plane)
        relocalize.last = {"sideways_m": round(sideways, 4), "rise_m": round(rise, 4), "mean_iou": round(iou, 3)}
        if not plausible(np.asarray(found.pose, dtype=np.float64), np.asarray(poses[0], dtype=np.float64), plane):
            return None
        return found.pose[None]

    relocalize.last = None  # the last candidate's plausibility figures (diagnostics)
    return relocalize
