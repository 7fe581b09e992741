"""Calibrated colour views of one object and its silhouette in each: the input of object building.

A view is one camera (:class:`~real_is_sim.cameras.base.CameraInfo`: K, size, X_WC in OpenGL axes), its image of the
object (H x W x 3, float in [0, 1]) and the object's mask (H x W bool). The mask is either given (a mask file) or
found by background difference: pixels whose largest channel differs from the empty cell's image by more than a
threshold, cleaned of specks and holes.

On disk (``load_views``) the views are a recording in the shared data's layout (``cameras.json``,
``videos/<serial>.mp4|.json``, as :class:`~real_is_sim.cameras.Recorder` writes it): one frame index shows the object,
and the empty cell is either another frame index of the same recording or ``<serial>.npy`` images (the
``cameras.backgrounds`` format); masks, when given, are ``<serial>.png`` or ``<serial>.npy`` (non-zero = object).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
from scipy import ndimage

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.errors import DataError

MIN_VIEWS = 4


@dataclass(frozen=True)
class ObjectView:
    camera: CameraInfo
    image: np.ndarray  # (H, W, 3) float32 RGB in [0, 1]
    background: np.ndarray | None  # (H, W, 3) float32, the empty cell; None when the mask was given
    mask: np.ndarray  # (H, W) bool, the object's pixels


def as_float_image(image: np.ndarray, what: str) -> np.ndarray:
    """An (H, W, 3) image as float32 in [0, 1] (uint8 is divided by 255)."""
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3:
        raise DataError(f"{what} must be an H x W x 3 image, got shape {image.shape}")
    if image.dtype == np.uint8:
        return image.astype(np.float32) / 255.0
    image = image.astype(np.float32)
    if not np.all(np.isfinite(image)):
        raise DataError(f"{what} has non-finite values")
    return image


def segment(image: np.ndarray, background: np.ndarray, threshold: float = 0.08, edge_fraction: float = 0.5,
            min_pixels: int = 30) -> np.ndarray:
    """The object's pixels: largest channel difference to the empty cell above ``threshold`` (over camera noise) and
    above ``edge_fraction`` of the object's median difference (a blurred edge, by the lens or by splats, lies at half
    the contrast: a fixed threshold puts it outside), then an opening (isolated noisy pixels), holes filled (a face
    the colour of the table), connected parts under ``min_pixels`` dropped (reflections, a stray speck)."""
    difference = np.abs(image - background).max(axis=2)
    rough = difference > threshold
    if rough.any():
        threshold = max(threshold, edge_fraction * float(np.median(difference[rough])))
    mask = ndimage.binary_opening(difference > threshold, structure=np.ones((3, 3), dtype=bool))
    mask = ndimage.binary_fill_holes(mask)
    labels, count = ndimage.label(mask)
    if count == 0:
        return mask
    sizes = ndimage.sum(mask, labels, index=np.arange(1, count + 1))
    return np.isin(labels, 1 + np.flatnonzero(sizes >= min_pixels))


def make_views(images: Mapping[str, np.ndarray], cameras: Mapping[str, CameraInfo],
               backgrounds: Mapping[str, np.ndarray] | None = None, masks: Mapping[str, np.ndarray] | None = None,
               threshold: float = 0.08, edge_fraction: float = 0.5) -> list[ObjectView]:
    """One view per image, by camera serial. Each image needs its camera's calibration and either a mask or the empty
    cell's image; at least :data:`MIN_VIEWS` views. Any missing piece or an empty mask raises one DataError naming
    the camera."""
    backgrounds, masks = backgrounds or {}, masks or {}
    if len(images) < MIN_VIEWS:
        raise DataError(f"building an object needs at least {MIN_VIEWS} views, got {len(images)}")
    views = []
    for serial, raw in images.items():
        camera = cameras.get(serial)
        if camera is None:
            raise DataError(f"view {serial}: no calibration for this camera (have {', '.join(cameras) or 'none'})")
        image = as_float_image(raw, f"image of view {serial}")
        if image.shape[:2] != (camera.height, camera.width):
            raise DataError(f"view {serial}: image is {image.shape[1]}x{image.shape[0]}, its calibration is "
                            f"{camera.width}x{camera.height}")
        background = None
        if serial in masks:
            mask = np.asarray(masks[serial]) != 0
            if mask.shape != image.shape[:2]:
                raise DataError(f"view {serial}: mask has shape {mask.shape}, the image {image.shape[:2]}")
        elif serial in backgrounds:
            background = as_float_image(backgrounds[serial], f"background of view {serial}")
            if background.shape != image.shape:
                raise DataError(f"view {serial}: background has shape {background.shape}, the image {image.shape}")
            mask = segment(image, background, threshold, edge_fraction)
        else:
            raise DataError(f"view {serial}: neither a mask nor an image of the empty cell to segment the object with")
        if not mask.any():
            raise DataError(f"view {serial}: the object's mask is empty (no pixel differs from the empty cell by more "
                            f"than {threshold}); is the object in view?")
        views.append(ObjectView(camera, image, background, mask))
    return views


def _read_mask(folder: Path, serial: str) -> np.ndarray | None:
    for suffix in (".npy", ".png"):
        path = folder / f"{serial}{suffix}"
        if path.is_file():
            if suffix == ".npy":
                return np.load(path)
            from PIL import Image

            mask = np.asarray(Image.open(path))
            return mask if mask.ndim == 2 else mask[..., 0]
    return None


def load_views(recording_dir: str | Path, frame: int, background_frame: int | None = None,
               backgrounds_dir: str | Path | None = None, masks_dir: str | Path | None = None,
               threshold: float = 0.08) -> list[ObjectView]:
    """Views from a recording (the shared data's layout): frame ``frame`` of every camera shows the object; the empty
    cell is frame ``background_frame`` or ``backgrounds_dir/<serial>.npy``; ``masks_dir/<serial>.png|.npy`` replace
    segmentation for the cameras that have one. A mask for a camera that the recording does not calibrate is an
    error, not silently dropped."""
    from real_is_sim.cameras.replay import VideoReplaySource

    source = VideoReplaySource(recording_dir)
    try:
        cameras = source.cameras
        images = {s: _frame(source, s, frame) for s in cameras}
        backgrounds = {}
        if background_frame is not None:
            backgrounds = {s: _frame(source, s, background_frame) for s in cameras}
    finally:
        source.close()
    if backgrounds_dir is not None:
        for serial in cameras:
            path = Path(backgrounds_dir) / f"{serial}.npy"
            if path.is_file():
                backgrounds[serial] = np.load(path)
    masks = {}
    if masks_dir is not None:
        folder = Path(masks_dir)
        if not folder.is_dir():
            raise DataError(f"mask folder not found: {folder}")
        for path in sorted(folder.glob("*.png")) + sorted(folder.glob("*.npy")):
            if path.stem not in cameras:
                raise DataError(f"mask {path}: camera {path.stem} has no calibration in {Path(recording_dir) / 'cameras.json'}")
        masks = {s: m for s in cameras if (m := _read_mask(folder, s)) is not None}
    return make_views(images, cameras, backgrounds, masks, threshold)


def _frame(source, serial: str, index: int) -> np.ndarray:
    count = source.num_frames(serial)
    if not 0 <= index < count:
        raise DataError(f"frame {index} is out of range for camera {serial} ({count} frames)")
    return source.frame(serial, index).image
