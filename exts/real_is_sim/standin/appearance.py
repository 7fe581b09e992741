"""How the stand-in real world *looks*, where the twin's model of it is wrong: appearance the twin does not know.

Each knob is a magnitude (0 turns it off; ``HiddenAppearance()`` is the perfect-appearance setting, the stand-in
rendering exactly the twin's model) and each is drawn from the stand-in's seed, on a random stream of its own (the
hidden physical parameters are drawn as before). ``HiddenAppearance.realistic()`` turns all of them on:

| knob (``KNOBS``) | the stand-in | the twin keeps |
|---|---|---|
| ``block`` | its block Gaussians jittered (``block_jitter_m``), rescaled (``block_scale_std``, log-normal), opacities changed (``block_opacity_std``), per-channel colour gain / offset, a fraction dropped | the object file's (or procedural) Gaussians |
| ``background`` | a table textured from the real footage (shared data) or, without it, another checker | its own estimate: the median of a few empty-cell frames captured through the stand-in's cameras |
| ``calibration`` | each camera's true pose off by ``extrinsics_m`` / ``extrinsics_deg`` (random directions), focal lengths and principal point off by ``intrinsics_rel`` | the nominal calibration |
| ``exposure`` | a gain and a per-channel white balance drifting slowly (sinusoids of random phase) over the episode | nothing: it compares raw pixels |
| ``motion_blur`` | every frame the average of ``blur_samples`` renders over the last ``motion_blur_s`` | sharp renders |
| ``arm_shadow`` | the table darkened under the arm (the arm's Gaussians projected along a light direction, blurred) | no shadow |
| ``robot`` | its robot's Gaussians jittered, wider, another colour | the occluder model (``RobotAppearanceCfg()``) |
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from real_is_sim.gaussians.cloud import GaussianCloud

KNOBS = ("block", "background", "calibration", "exposure", "motion_blur", "arm_shadow", "robot")

# the knobs' fields: a knob is on when any of its magnitudes is non-zero
_FIELDS = {
    "block": ("block_jitter_m", "block_scale_std", "block_opacity_std", "block_color_gain", "block_color_offset", "block_drop_fraction"),
    "background": ("background",),
    "calibration": ("extrinsics_m", "extrinsics_deg", "intrinsics_rel"),
    "exposure": ("exposure_drift", "white_balance_drift"),
    "motion_blur": ("motion_blur_s",),
    "arm_shadow": ("arm_shadow",),
    "robot": ("robot_jitter_m", "robot_scale_gain", "robot_color_gain"),
}


@dataclass
class HiddenAppearance:
    # block: position jitter (m, std), log-normal scale change (std), opacity change (std, then clipped), per-channel
    # colour gain (uniform +-) and offset (uniform +-), fraction of Gaussians dropped
    block_jitter_m: float = 0.0
    block_scale_std: float = 0.0
    block_opacity_std: float = 0.0
    block_color_gain: float = 0.0
    block_color_offset: float = 0.0
    block_drop_fraction: float = 0.0
    # background: 0 the twin's table model, exactly; 1 the real table (or another checker), the twin estimating its own
    background: float = 0.0
    empty_cell_frames: int = 5  # frames the twin's background estimate is the median of
    # calibration: the true camera poses off by this translation (m) and rotation (deg), random directions per
    # camera; fx, fy, cx, cy scaled by (1 + uniform +- intrinsics_rel)
    extrinsics_m: float = 0.0
    extrinsics_deg: float = 0.0
    intrinsics_rel: float = 0.0
    # exposure: gain 1 + exposure_drift * sin(...), per channel 1 + white_balance_drift * sin(...), period drift_period_s
    exposure_drift: float = 0.0
    white_balance_drift: float = 0.0
    drift_period_s: float = 5.0
    # motion blur: exposure time (s) averaged over blur_samples renders (the poses interpolated between ticks)
    motion_blur_s: float = 0.0
    blur_samples: int = 2
    # arm shadow: darkening of the table under the arm (0..1), light this many degrees off vertical
    arm_shadow: float = 0.0
    light_tilt_deg: float = 20.0
    shadow_blur_m: float = 0.02
    # robot: Gaussians jittered (m, std), wider (x (1 + gain)), colour gain per channel (uniform +-)
    robot_jitter_m: float = 0.0
    robot_scale_gain: float = 0.0
    robot_color_gain: float = 0.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"HiddenAppearance.{f.name} must be a finite number >= 0, got {value!r}")
        for name in ("block_drop_fraction", "background", "arm_shadow"):
            if getattr(self, name) > 1:
                raise ValueError(f"HiddenAppearance.{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("empty_cell_frames", "blur_samples"):
            if int(getattr(self, name)) != getattr(self, name) or getattr(self, name) < 1:
                raise ValueError(f"HiddenAppearance.{name} must be an integer >= 1, got {getattr(self, name)!r}")
        if not self.drift_period_s > 0:
            raise ValueError(f"HiddenAppearance.drift_period_s must be > 0, got {self.drift_period_s}")

    @classmethod
    def realistic(cls, knobs=KNOBS) -> "HiddenAppearance":
        """The benchmark's setting: the ``knobs`` named on (all by default), each small."""
        unknown = set(knobs) - set(KNOBS)
        if unknown:
            raise ValueError(f"unknown appearance knob(s) {sorted(unknown)}; choose from {KNOBS}")
        values = {
            "block": dict(block_jitter_m=0.001, block_scale_std=0.1, block_opacity_std=0.1, block_color_gain=0.08,
                          block_color_offset=0.03, block_drop_fraction=0.03),
            "background": dict(background=1.0),
            "calibration": dict(extrinsics_m=0.002, extrinsics_deg=0.3, intrinsics_rel=0.005),
            "exposure": dict(exposure_drift=0.06, white_balance_drift=0.03),
            "motion_blur": dict(motion_blur_s=0.012),
            "arm_shadow": dict(arm_shadow=0.3),
            "robot": dict(robot_jitter_m=0.003, robot_scale_gain=0.25, robot_color_gain=0.1),
        }
        return cls(**{k: v for knob in knobs for k, v in values[knob].items()})

    def on(self, knob: str) -> bool:
        return any(getattr(self, name) for name in _FIELDS[knob])

    def knobs_on(self) -> list[str]:
        return [k for k in KNOBS if self.on(k)]


def appearance_rng(seed: int, knob: str) -> np.random.Generator:
    """The knob's own random stream of the stand-in seed: turning one knob on changes no other draw."""
    return np.random.default_rng([int(seed), 17, KNOBS.index(knob)])


def perturb_cloud(cloud: GaussianCloud, cfg: HiddenAppearance, rng: np.random.Generator) -> GaussianCloud:
    """The block as the stand-in draws it: a new cloud, ``cloud`` untouched."""
    n = len(cloud.means)
    keep = rng.uniform(size=n) >= cfg.block_drop_fraction
    if not keep.any():
        keep[0] = True
    means = cloud.means.detach().numpy().astype(np.float64) + rng.normal(0.0, cfg.block_jitter_m, (n, 3))
    scales = cloud.scales.detach().numpy() * np.exp(rng.normal(0.0, cfg.block_scale_std, (n, 1)))
    opacities = np.clip(cloud.opacities.detach().numpy() * (1.0 + rng.normal(0.0, cfg.block_opacity_std, n)), 0.02, 0.99)
    gain = 1.0 + rng.uniform(-cfg.block_color_gain, cfg.block_color_gain, 3)
    offset = rng.uniform(-cfg.block_color_offset, cfg.block_color_offset, 3)
    colors = np.clip(cloud.colors.detach().numpy() * gain + offset, 0.0, 1.0)
    t = lambda a: torch.as_tensor(np.asarray(a)[keep], dtype=torch.float32).contiguous()  # noqa: E731
    return GaussianCloud(t(means), cloud.quats.detach()[torch.as_tensor(keep)].clone(), t(scales), t(opacities), t(colors),
                         cloud.body_ids[torch.as_tensor(keep)].clone())


def perturb_robot(cloud: GaussianCloud, cfg: HiddenAppearance, rng_state: dict) -> GaussianCloud:
    """The stand-in's robot: its occluder cloud jittered (fixed per Gaussian: ``rng_state`` keeps the draw), wider,
    recoloured."""
    n = len(cloud.means)
    if rng_state.get("n") != n:
        rng = rng_state["rng"]
        rng_state.update(n=n, jitter=torch.as_tensor(rng.normal(0.0, cfg.robot_jitter_m, (n, 3)), dtype=torch.float32),
                         gain=torch.as_tensor(1.0 + rng.uniform(-cfg.robot_color_gain, cfg.robot_color_gain, 3), dtype=torch.float32))
    return GaussianCloud(cloud.means + rng_state["jitter"], cloud.quats, cloud.scales * (1.0 + cfg.robot_scale_gain),
                         cloud.opacities, (cloud.colors * rng_state["gain"]).clamp(0, 1), cloud.body_ids)


def perturb_camera(info, cfg: HiddenAppearance, rng: np.random.Generator):
    """The camera as it really is: ``info`` (the calibration the twin keeps) off by a hidden pose and intrinsics."""
    from real_is_sim.cameras.base import CameraInfo

    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = np.radians(cfg.extrinsics_deg)
    K_ = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    R = np.eye(3) + np.sin(angle) * K_ + (1 - np.cos(angle)) * K_ @ K_
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    X_WC = np.array(info.X_WC, dtype=np.float64).copy()
    X_WC[:3, :3] = R @ X_WC[:3, :3]  # rotated about the camera centre
    X_WC[:3, 3] += cfg.extrinsics_m * direction
    K = np.array(info.K, dtype=np.float64).copy()
    fx, fy, cx, cy = 1.0 + rng.uniform(-cfg.intrinsics_rel, cfg.intrinsics_rel, 4)
    K[0, 0] *= fx
    K[1, 1] *= fy
    K[0, 2] *= cx
    K[1, 2] *= cy
    return CameraInfo(info.serial, K, info.width, info.height, X_WC)


class ColourDrift:
    """Exposure and white balance drifting over the episode: per-channel gains at time ``t``."""

    def __init__(self, cfg: HiddenAppearance, rng: np.random.Generator):
        self.cfg = cfg
        self.phase = rng.uniform(0, 2 * np.pi)
        self.channel_phase = rng.uniform(0, 2 * np.pi, 3)

    def gains(self, t: float) -> np.ndarray:
        w = 2 * np.pi * t / self.cfg.drift_period_s
        return ((1.0 + self.cfg.exposure_drift * np.sin(w + self.phase))
                * (1.0 + self.cfg.white_balance_drift * np.sin(w + self.channel_phase))).astype(np.float32)


def shadow_mask(robot_means: np.ndarray, plane: np.ndarray, light_tilt_deg: float, info, blur_m: float) -> np.ndarray:
    """``(H, W)`` in [0, 1]: where the arm's shadow falls on the table ``plane`` (a, b, c, d), seen from ``info``
    (a :class:`CameraInfo`). The arm's Gaussians are projected along a light tilted ``light_tilt_deg`` from the
    plane's normal (towards +x), splatted into the image and blurred by ``blur_m`` (about, at the table)."""
    from scipy.ndimage import gaussian_filter

    normal, d = np.asarray(plane[:3], dtype=np.float64), float(plane[3])
    tilt = np.radians(light_tilt_deg)
    light = -(np.cos(tilt) * normal + np.sin(tilt) * np.array([1.0, 0.0, 0.0]))  # direction the light travels
    height = robot_means @ normal + d
    above = height > 0
    points = robot_means[above] - (height[above] / (light @ normal))[:, None] * light
    mask = np.zeros((info.height, info.width), dtype=np.float32)
    if len(points):
        viewmat = info.viewmat_opencv()
        cam = points @ viewmat[:3, :3].T + viewmat[:3, 3]
        front = cam[:, 2] > 0.05
        u = info.K[0, 0] * cam[front, 0] / cam[front, 2] + info.K[0, 2]
        v = info.K[1, 1] * cam[front, 1] / cam[front, 2] + info.K[1, 2]
        inside = (u >= 0) & (u < info.width) & (v >= 0) & (v < info.height)
        hits = v[inside].astype(int) * info.width + u[inside].astype(int)
        mask = np.bincount(hits, minlength=info.height * info.width).reshape(mask.shape).astype(np.float32)
        depth = float(np.median(cam[front, 2])) if front.any() else 1.0
        sigma = max(1.0, blur_m * info.K[0, 0] / depth)
        mask = gaussian_filter(mask, sigma)
        mask = np.clip(mask / max(1e-6, 0.5 / (2 * np.pi * sigma**2)), 0.0, 1.0)  # one splat per half a blur disc: full
    return mask


# ---------------------------------------------------------------------------------------------- the table
def _block_pixels(image: np.ndarray) -> np.ndarray:
    """Red-orange pixels of ``(H, W, 3)`` uint8 frames: the T-block."""
    im = image.astype(np.int16)
    r, g, b = im[..., 0], im[..., 1], im[..., 2]
    return (r > 110) & (r - g > 45) & (r - b > 60)


@functools.lru_cache(maxsize=2)
def real_table_texture(recording: str, plane: tuple[float, float, float, float], stride: int = 8, cell: float = 0.002):
    """The real table from the shared footage (``recording`` in the replay layout): per camera the per-pixel median
    of every ``stride``-th frame with the block's pixels masked, back-projected onto ``plane``, averaged over the
    views on a ``cell`` grid in world x, y. Returns ``(texture (Ny, Nx, 3) float32, x0, y0, cell)``."""
    from scipy.ndimage import distance_transform_edt

    from real_is_sim.cameras.replay import VideoReplaySource

    source = VideoReplaySource(recording)
    try:
        kept: dict[str, list[np.ndarray]] = {s: [] for s in source.serials}
        for frame in source.frames():
            if frame.index % stride == 0:
                image = frame.image.astype(np.float32)
                image[_block_pixels(frame.image)] = np.nan
                kept[frame.serial].append(image)
        cameras = source.cameras
    finally:
        source.close()
    x0, x1, y0, y1 = -0.2, 1.2, -0.7, 0.7
    nx, ny = int(round((x1 - x0) / cell)), int(round((y1 - y0) / cell))
    total, count = np.zeros((ny, nx, 3)), np.zeros((ny, nx))
    for serial, images in kept.items():
        with warnings.catch_warnings():  # pixels the block covered in every kept frame: nan, filled below
            warnings.simplefilter("ignore", RuntimeWarning)
            median = np.nanmedian(np.stack(images), axis=0) / 255.0
        info = cameras[serial]
        points, hit = _plane_points(info.K, info.viewmat_opencv(), info.width, info.height, plane)
        ok = hit & np.isfinite(median).all(-1)
        ix = ((points[..., 0] - x0) / cell).astype(int)
        iy = ((points[..., 1] - y0) / cell).astype(int)
        ok &= (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny)
        np.add.at(total, (iy[ok], ix[ok]), median[ok])
        np.add.at(count, (iy[ok], ix[ok]), 1.0)
    if not count.any():
        raise ValueError(f"{recording}: no frame pixel lands on the table plane")
    seen = count > 0
    texture = np.where(seen[..., None], total / np.maximum(count, 1)[..., None], 0.0)
    _, (iy, ix) = distance_transform_edt(~seen, return_indices=True)  # holes: the nearest seen cell
    return texture[iy, ix].astype(np.float32), x0, y0, cell


def _plane_points(K, viewmat, width, height, plane):
    X_WC = np.linalg.inv(np.asarray(viewmat, dtype=np.float64))
    u, v = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    rays = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], axis=-1) @ X_WC[:3, :3].T
    origin = X_WC[:3, 3]
    normal, d = np.asarray(plane[:3], dtype=np.float64), float(plane[3])
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = -(origin @ normal + d) / (rays @ normal)
    hit = np.isfinite(depth) & (depth > 0)
    return origin + rays * np.where(hit, depth, 0.0)[..., None], hit


def textured_table_background(info, plane, texture, far_color=(0.3, 0.3, 0.32)) -> np.ndarray:
    """``(H, W, 3)`` float32: the table ``plane`` with ``texture`` (from :func:`real_table_texture`) seen from
    ``info``; beyond the texture, its nearest edge."""
    image_tex, x0, y0, cell = texture
    points, hit = _plane_points(info.K, info.viewmat_opencv(), info.width, info.height, plane)
    ny, nx = image_tex.shape[:2]
    ix = np.clip(((points[..., 0] - x0) / cell).astype(int), 0, nx - 1)
    iy = np.clip(((points[..., 1] - y0) / cell).astype(int), 0, ny - 1)
    return np.where(hit[..., None], image_tex[iy, ix], np.asarray(far_color)).astype(np.float32)
