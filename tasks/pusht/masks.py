"""Pixel masks by colour: the red-orange T-block in the real footage (HSV threshold)."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from real_is_sim.errors import DataError


def rgb_to_hsv(image: np.ndarray) -> np.ndarray:
    """HSV [..., 3] (hue in degrees [0, 360), saturation and value in [0, 1]) of an RGB image.

    ``image`` is uint8 (0..255) or float in [0, 1].
    """
    rgb = _as_float_rgb(image)
    value = rgb.max(-1)
    spread = value - rgb.min(-1)
    saturation = np.where(value > 0, spread / np.maximum(value, 1e-12), 0.0)
    r, g, b = np.moveaxis(rgb, -1, 0)
    safe = np.maximum(spread, 1e-12)
    hue = np.select([value == r, value == g], [(g - b) / safe % 6.0, (b - r) / safe + 2.0], (r - g) / safe + 4.0) * 60.0
    hue = np.where(spread > 0, hue, 0.0)
    return np.stack([hue, saturation, value], axis=-1)


def red_orange_mask(image: np.ndarray, max_hue: float = 25.0, min_saturation: float = 0.55,
                    min_value: float = 0.3, min_blob_pixels: int = 40) -> np.ndarray:
    """Boolean H x W mask of saturated red-orange pixels (hue within [-15, max_hue] degrees).

    Defaults pick the T-block in the PushT footage and leave out the blue goal outline, the grey
    table and the white robot; the thresholds are arguments for other lighting. Connected blobs
    smaller than ``min_blob_pixels`` (reflections in the table's holes) are dropped; a block split
    by an occluder keeps both halves.
    """
    hsv = rgb_to_hsv(image)
    hue, saturation, value = np.moveaxis(hsv, -1, 0)
    reddish = (hue <= max_hue) | (hue >= 345.0)
    mask = reddish & (saturation >= min_saturation) & (value >= min_value)
    if min_blob_pixels > 1 and mask.ndim == 2:
        labels, count = ndimage.label(mask)
        sizes = np.bincount(labels.ravel(), minlength=count + 1)
        keep = sizes >= min_blob_pixels
        keep[0] = False
        mask = keep[labels]
    return mask


def _as_float_rgb(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim < 1 or image.shape[-1] != 3:
        raise DataError(f"expected an RGB image [..., 3], got shape {image.shape}")
    if image.dtype == np.uint8:
        return image.astype(np.float64) / 255.0
    if not np.issubdtype(image.dtype, np.floating):
        raise DataError(f"expected a uint8 or float RGB image, got dtype {image.dtype}")
    if not np.isfinite(image).all():
        raise DataError("RGB image has non-finite values")
    return image.astype(np.float64)
