"""The arm the cameras saw when nobody logged its joints: 7 joints per frame fitted to the views' silhouettes.

A recording without a joint log still shows the arm: the pixels brighter than the empty cell that are not the object
(:func:`foreground_mask`; the arm's shadow is darker, so it is left out). :func:`fit_arm_track` poses the Franka's
surface points (the links near the table, and the pusher stick the gripper holds) by forward kinematics, projects
them into the views at a low resolution and minimises the chamfer distance between their silhouettes and those
pixels, one frame after another: a pattern search over the 7 joints warm-started from the previous frame (the first
frame from a wider search around a seed). The result is a joint log in the deploy session's ``follower.csv`` layout;
the replay renders the arm from it as the sensor's occluder (``OnlineLoop.arm_in_view``) and leaves its pixels out
of the scores.

Only the arm's silhouette in the given views is constrained: joints that move the arm outside every view, or along
a camera's rays, are not, so the log is good for occlusion (where the arm covers the views) and not as a
measurement of the arm's joints.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage

from real_is_sim.errors import DataError
from real_is_sim.robot.appearance import RobotAppearance, RobotAppearanceCfg
from real_is_sim.robot.franka import ARM_DOF, Q_MAX, Q_MIN, Q_START
from real_is_sim.robot.recorded_follower import JOINT_COLUMNS

# The real PushT cell's pusher: a white stick between the fingers, reaching ~10 cm below them (from the footage).
PUSHT_HAND_STICK = (0.07, 0.20, 0.008)

# The links a camera over the table sees move with the arm's joints; link0-2 sit at the base, mostly in the
# clip's median background (the robot stays there), so they are not foreground.
FIT_LINKS = ("panda_link3", "panda_link4", "panda_link5", "panda_link6", "panda_link7", "panda_hand",
             "panda_leftfinger", "panda_rightfinger")


@dataclass
class ArmFitCfg:
    downscale: int = 4  # silhouettes at 1/downscale of the camera resolution
    foreground_threshold: float = 0.15  # frame brighter than the background by this in some channel (colours in [0, 1])
    spacing: float = 0.01  # m between the model's surface points
    splat_px: int = 1  # each projected point covers a (2k+1)^2 square at the fit resolution
    # The pusher stick held between the fingers (RobotAppearanceCfg.hand_stick): start, end, radius (m).
    hand_stick: tuple[float, float, float] = PUSHT_HAND_STICK
    # Pattern search: joint steps (rad) tried in turn, each until no single-joint move improves the score.
    search_steps: tuple[float, ...] = (0.06, 0.02, 0.008)
    first_search_steps: tuple[float, ...] = (0.3, 0.15, 0.08, 0.04, 0.02, 0.008)
    first_search_seeds: int = 400  # random starts around the seed for the first frame (the best 4 are refined)
    first_search_spread: float = 1.0  # rad, uniform around the seed
    max_rounds: int = 20  # per step
    chamfer_cap_px: float = 15.0  # distances beyond this (fit resolution) count as this


@dataclass
class ArmTrack:
    t: np.ndarray  # (T,) s, the frames' times
    q: np.ndarray  # (T, 7) the fitted joints
    iou: np.ndarray  # (T,) mean silhouette IoU over the views at the fitted joints

    def at(self, t: float) -> np.ndarray:
        """The joints fitted to the newest frame at or before ``t`` (the first frame's before it)."""
        k = max(int(np.searchsorted(self.t, t + 1e-9, side="right")) - 1, 0)
        return self.q[k]

    def write_csv(self, path: str | Path) -> None:
        """``t,q1..q7,iou`` rows: a deploy session's follower.csv layout (:func:`load_follower_csv` reads it)."""
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(("t", *JOINT_COLUMNS, "iou"))
            for t, q, iou in zip(self.t, self.q, self.iou):
                writer.writerow([f"{t:.6f}", *(f"{v:.6f}" for v in q), f"{iou:.4f}"])


def foreground_mask(image: np.ndarray, background: np.ndarray, object_mask: np.ndarray, threshold: float) -> np.ndarray:
    """H x W bool: pixels of ``image`` (uint8 or float) brighter than the empty ``background`` in some channel by more
    than ``threshold``, that are not the object. Brighter, not just different: the arm's shadow on the table darkens
    every channel and must not count as the arm (the white arm over the dark table, or over the red block in green
    and blue, is brighter)."""
    frame = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else np.asarray(image, dtype=np.float32)
    if frame.shape != background.shape:
        raise DataError(f"frame {frame.shape} and background {background.shape} differ in shape")
    moving = (frame - background).max(axis=-1) > threshold
    return ndimage.binary_opening(moving & ~object_mask, iterations=1)


def downsample_mask(mask: np.ndarray, factor: int) -> np.ndarray:
    """A pixel of the coarse mask is set when at least half of its ``factor x factor`` block is."""
    h, w = (mask.shape[0] // factor) * factor, (mask.shape[1] // factor) * factor
    blocks = mask[:h, :w].reshape(h // factor, factor, w // factor, factor)
    return blocks.mean(axis=(1, 3)) >= 0.5


class ArmSilhouettes:
    """The arm's silhouette in each view at given joints: surface points by FK, projected and splatted."""

    def __init__(self, viewmats: np.ndarray, Ks: np.ndarray, width: int, height: int, cfg: ArmFitCfg | None = None,
                 base_pose: np.ndarray | None = None):
        self.cfg = cfg or ArmFitCfg()
        c = self.cfg
        self.appearance = RobotAppearance(RobotAppearanceCfg(links=FIT_LINKS, spacing=c.spacing, hand_stick=c.hand_stick),
                                          base_pose)
        self.viewmats = np.asarray(viewmats, dtype=np.float64)
        scale = np.diag([1.0 / c.downscale, 1.0 / c.downscale, 1.0])
        self.Ks = np.einsum("ij,vjk->vik", scale, np.asarray(Ks, dtype=np.float64))
        self.width, self.height = width // c.downscale, height // c.downscale

    def render(self, q: np.ndarray) -> np.ndarray:
        """``(V, h, w)`` bool silhouettes at the fit resolution."""
        points = self.appearance.means(q).numpy()
        out = np.zeros((len(self.viewmats), self.height, self.width), dtype=bool)
        k = self.cfg.splat_px
        for v, (viewmat, K) in enumerate(zip(self.viewmats, self.Ks)):
            cam = points @ viewmat[:3, :3].T + viewmat[:3, 3]
            cam = cam[cam[:, 2] > 0.05]
            u = np.floor(cam[:, 0] / cam[:, 2] * K[0, 0] + K[0, 2]).astype(np.int64)
            w = np.floor(cam[:, 1] / cam[:, 2] * K[1, 1] + K[1, 2]).astype(np.int64)
            for du in range(-k, k + 1):
                for dw in range(-k, k + 1):
                    uu, ww = u + du, w + dw
                    inside = (uu >= 0) & (uu < self.width) & (ww >= 0) & (ww < self.height)
                    out[v, ww[inside], uu[inside]] = True
        return out

    def full_resolution(self, q: np.ndarray, view: int, shape: tuple[int, int]) -> np.ndarray:
        """The silhouette in ``view`` at joints ``q``, upsampled to the camera's ``shape`` (H, W)."""
        coarse = self.render(q)[view]
        d = self.cfg.downscale
        full = np.zeros(shape, dtype=bool)
        up = coarse.repeat(d, axis=0).repeat(d, axis=1)
        full[:up.shape[0], :up.shape[1]] = up
        return full

    def iou(self, q: np.ndarray, targets: np.ndarray, valid: np.ndarray) -> float:
        """Mean IoU over the views between the silhouettes at ``q`` and ``targets (V, h, w)``, on ``valid`` pixels."""
        model = self.render(q) & valid
        inter = (model & targets).sum(axis=(1, 2))
        union = (model | targets).sum(axis=(1, 2))
        return float(np.mean(np.where(union > 0, inter / np.maximum(union, 1), 1.0)))


class ChamferScore:
    """Minus the symmetric chamfer distance (pixels, truncated) between the arm's silhouettes and the target masks.

    IoU is flat once a thin stick misses its image by two pixels; distances keep pulling from further away."""

    def __init__(self, silhouettes: ArmSilhouettes, targets: np.ndarray, valid: np.ndarray, cap: float):
        self.silhouettes, self.targets, self.valid, self.cap = silhouettes, targets, valid, cap
        self.to_target = np.stack([np.minimum(ndimage.distance_transform_edt(~t), cap) if t.any() else np.full(t.shape, cap)
                                   for t in targets])

    def __call__(self, q: np.ndarray) -> float:
        model = self.silhouettes.render(q) & self.valid
        total = 0.0
        for m, t, d in zip(model, self.targets, self.to_target):
            if not m.any() and not t.any():
                continue
            if not m.any() or not t.any():
                total += 2 * self.cap
                continue
            to_model = np.minimum(ndimage.distance_transform_edt(~m), self.cap)
            total += d[m].mean() + to_model[t].mean()
        return -total / len(model)


def pattern_search(score, q0: np.ndarray, steps: tuple[float, ...], max_rounds: int) -> tuple[np.ndarray, float]:
    """Maximise ``score(q)`` by single-joint moves of each step size in turn, inside the joint limits."""
    q, best = np.clip(np.asarray(q0, dtype=np.float64), Q_MIN, Q_MAX), score(q0)
    for step in steps:
        for _ in range(max_rounds):
            improved = False
            for j in range(ARM_DOF):
                for sign in (1.0, -1.0):
                    candidate = q.copy()
                    candidate[j] = np.clip(candidate[j] + sign * step, Q_MIN[j], Q_MAX[j])
                    value = score(candidate)
                    if value > best:
                        q, best, improved = candidate, value, True
                        break
            if not improved:
                break
    return q, best


def fit_arm_frame(silhouettes: ArmSilhouettes, targets: np.ndarray, valid: np.ndarray, q_init: np.ndarray,
                  cfg: ArmFitCfg, first: bool = False, seed: int = 0) -> tuple[np.ndarray, float]:
    """Joints that best explain ``targets (V, h, w)`` on the ``valid`` pixels: a local search from ``q_init``, or a
    wider one on the first frame."""
    score = ChamferScore(silhouettes, targets, valid, cfg.chamfer_cap_px)
    if not first:
        return pattern_search(score, q_init, cfg.search_steps, cfg.max_rounds)
    rng = np.random.default_rng(seed)
    starts = [np.asarray(q_init, dtype=np.float64)]
    starts += [np.clip(q_init + rng.uniform(-cfg.first_search_spread, cfg.first_search_spread, ARM_DOF), Q_MIN, Q_MAX)
               for _ in range(cfg.first_search_seeds)]
    ranked = sorted(starts, key=score, reverse=True)[:4]
    results = [pattern_search(score, q, cfg.first_search_steps, cfg.max_rounds) for q in ranked]
    return max(results, key=lambda r: r[1])


def fit_arm_track(frames: Iterable[tuple[float, list[np.ndarray]]], backgrounds: list[np.ndarray], object_mask,
                  viewmats: np.ndarray, Ks: np.ndarray, cfg: ArmFitCfg | None = None, q_seed: np.ndarray | None = None,
                  base_pose: np.ndarray | None = None, log=None) -> ArmTrack:
    """Fit the arm to ``frames``: ``(t, [one image per view])`` in time order, each frame warm-started from the last.

    ``object_mask(image) -> H x W bool`` is the object's pixels (not the robot); ``backgrounds[v]`` the empty cell
    (H, W, 3 floats in [0, 1]); ``q_seed`` centres the first frame's search (default ``Q_START``)."""
    cfg = cfg or ArmFitCfg()
    height, width = backgrounds[0].shape[:2]
    silhouettes = ArmSilhouettes(viewmats, Ks, width, height, cfg, base_pose)
    # Where the empty cell itself shows the object (it rested there for most of the clip, so the median kept it),
    # a changed pixel is the object gone, not the arm: those pixels say nothing about the arm.
    valid = np.stack([~downsample_mask(ndimage.binary_dilation(object_mask(bg), iterations=cfg.downscale),
                                       cfg.downscale) for bg in backgrounds])
    q = np.asarray(Q_START if q_seed is None else q_seed, dtype=np.float64)
    times, qs, ious = [], [], []
    for k, (t, views) in enumerate(frames):
        if len(views) != len(backgrounds):
            raise DataError(f"arm fit: frame {k} has {len(views)} views, expected {len(backgrounds)}")
        targets = np.stack([downsample_mask(foreground_mask(im, bg, object_mask(im), cfg.foreground_threshold),
                                            cfg.downscale) for im, bg in zip(views, backgrounds)]) & valid
        q, _ = fit_arm_frame(silhouettes, targets, valid, q, cfg, first=(k == 0))
        times.append(float(t))
        qs.append(q)
        ious.append(silhouettes.iou(q, targets, valid))
        if log is not None and k % 200 == 0:
            log(f"arm fit frame {k}: IoU {ious[-1]:.3f}")
    if not qs:
        raise DataError("arm fit: no frames")
    return ArmTrack(np.asarray(times), np.stack(qs), np.asarray(ious))
