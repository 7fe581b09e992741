"""The renderer against the real PushT footage: first frames, silhouettes, overlays.

``python -m real_is_sim_tasks.pusht.real_check docs/img`` renders the T-block at its scan pose X_WB and
at the pose fitted to the first frame, and writes ``render_scan_pose_<serial>.png`` and
``render_fit_<serial>.png``: the frame with the red-orange mask only (green), the silhouette only
(blue) and both (yellow), beside the rendered block. The fit starts twice, from X_WB and from X_WB
upside down (:func:`~real_is_sim.render.pose_fit.upside_down_pose`: the T's outline is the same either
face up), and keeps the one with the lower final loss.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from real_is_sim.cameras import VideoReplaySource
from real_is_sim.errors import DataError
from real_is_sim.gaussians import GaussianCloud, load_object_cloud, pose_cloud
from real_is_sim.paths import shared_data_dir
from real_is_sim_tasks.pusht.masks import red_orange_mask
from real_is_sim.render.pose_fit import PoseFit, fit_body_pose, upside_down_pose
from real_is_sim.render.rasterize import rasterization
from real_is_sim.transforms import pose_to_matrix, quat_from_yaw


@dataclass(frozen=True)
class DemoViews:
    serials: list[str]
    images: list[np.ndarray]  # H x W x 3 uint8 RGB, frame ``index`` of each camera
    viewmats: torch.Tensor  # [C, 4, 4] world-to-camera, OpenCV axes
    Ks: torch.Tensor  # [C, 3, 3]
    width: int
    height: int


def load_demo_views(demo_dir: str | Path, index: int = 0) -> DemoViews:
    source = VideoReplaySource(demo_dir)
    try:
        cameras = source.cameras
        serials = list(cameras)
        images = [source.frame(s, index).image for s in serials]
    finally:
        source.close()
    sizes = {(cameras[s].width, cameras[s].height) for s in serials}
    if len(sizes) != 1:
        raise DataError(f"cameras of {demo_dir} differ in resolution: {sorted(sizes)}")
    width, height = sizes.pop()
    viewmats = torch.tensor(np.stack([cameras[s].viewmat_opencv() for s in serials]), dtype=torch.float32)
    Ks = torch.tensor(np.stack([cameras[s].K for s in serials]), dtype=torch.float32)
    return DemoViews(serials, images, viewmats, Ks, width, height)


def orbited_viewmat(viewmat: torch.Tensor, centre: np.ndarray, yaw: float) -> torch.Tensor:
    """``viewmat`` [4,4] of a camera orbited by ``yaw`` about the vertical through ``centre`` (3,).

    The benchmarks' third camera: the correction runs on 3 cameras and the footage has 2.
    """
    orbit = pose_to_matrix(np.concatenate([centre, quat_from_yaw(yaw)])) @ pose_to_matrix(
        np.concatenate([-np.asarray(centre, dtype=np.float64), [0, 0, 0, 1.0]]))
    return torch.tensor(viewmat.double().numpy() @ np.linalg.inv(orbit), dtype=torch.float32)


def window_intrinsics(viewmats: torch.Tensor, Ks: torch.Tensor, centre: np.ndarray, width: int, height: int) -> torch.Tensor:
    """``Ks`` with principal points shifted so ``centre`` (3,) projects to the middle of a width x height window."""
    centre_cam = torch.einsum("cij,j->ci", viewmats[:, :3, :3], torch.tensor(centre, dtype=torch.float32)) + viewmats[:, :3, 3]
    shifted = Ks.clone()
    shifted[:, 0, 2] += width / 2 - (Ks[:, 0, 0] * centre_cam[:, 0] / centre_cam[:, 2] + Ks[:, 0, 2])
    shifted[:, 1, 2] += height / 2 - (Ks[:, 1, 1] * centre_cam[:, 1] / centre_cam[:, 2] + Ks[:, 1, 2])
    return shifted


def load_table_plane(data_dir: str | Path) -> np.ndarray:
    return np.asarray(json.loads((Path(data_dir) / "environment" / "ground_plane.json").read_text())["plane"])


def render_body(cloud: GaussianCloud, pose, views: DemoViews, **kwargs):
    """rgb [C,H,W,3] and alpha [C,H,W] (numpy) of single-body ``cloud`` at ``pose`` (7,)."""
    means, quats = pose_cloud(cloud, torch.as_tensor(np.asarray(pose), dtype=torch.float32)[None])
    with torch.no_grad():
        rgb, alpha, _ = rasterization(means, quats, cloud.scales, cloud.opacities, cloud.colors, views.viewmats,
                                      views.Ks, views.width, views.height, **kwargs)
    return rgb.cpu().numpy(), alpha[..., 0].cpu().numpy()  # gsplat renders on CUDA


def mean_block_colours(rgb: np.ndarray, alpha: np.ndarray, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean colour of the rendered block (un-premultiplied, where alpha > 0.5) and of the real block (its mask)."""
    silhouette = alpha > 0.5
    rendered = (rgb[silhouette] / alpha[silhouette, None]).mean(0)
    return rendered, image[red_orange_mask(image)].mean(0) / 255.0


def overlay(image: np.ndarray, alpha: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    mask, silhouette = red_orange_mask(image), alpha > 0.5
    out = image.copy()
    out[mask & ~silhouette] = (0, 255, 0)
    out[silhouette & ~mask] = (0, 0, 255)
    out[silhouette & mask] = (255, 255, 0)
    return np.concatenate([out, (np.clip(rgb, 0, 1) * 255).astype(np.uint8)], axis=1)


@dataclass(frozen=True)
class FirstFrameFit:
    cloud: GaussianCloud
    scan_pose: np.ndarray
    views: DemoViews
    fits: dict[str, PoseFit]  # by start: "as scanned" (X_WB), "upside down"

    @property
    def best(self) -> PoseFit:
        return min(self.fits.values(), key=lambda fit: fit.losses[-1])


def fit_first_frame(data_dir: str | Path, iters: int = 120) -> FirstFrameFit:
    """The T-block's pose in the first frame of sample_demos/0, fitted from X_WB and from X_WB upside down."""
    cloud, scan_pose = load_object_cloud(Path(data_dir) / "objects" / "tblock.json")
    views = load_demo_views(Path(data_dir) / "sample_demos" / "0")
    plane = load_table_plane(data_dir)
    starts = {"as scanned": scan_pose, "upside down": upside_down_pose(cloud, scan_pose, plane)}
    masks = [red_orange_mask(image) for image in views.images]
    fits = {name: fit_body_pose(cloud, views.images, views.viewmats, views.Ks, start, plane, masks=masks, iters=iters)
            for name, start in starts.items()}
    return FirstFrameFit(cloud, scan_pose, views, fits)


def main(out_dir: str) -> None:
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    first = fit_first_frame(shared_data_dir())
    cloud, views, best = first.cloud, first.views, first.best
    for start, fit in first.fits.items():
        rgb, alpha = render_body(cloud, fit.pose, views)
        print(f"fit from {start}: final loss {fit.losses[-1]:.5f}, IoU per view {np.round(fit.ious, 3).tolist()}")
        for c, serial in enumerate(views.serials):
            rendered, real = mean_block_colours(rgb[c], alpha[c], views.images[c])
            print(f"  {serial}: mean colour rendered {[round(float(v), 3) for v in rendered]}, real {[round(float(v), 3) for v in real]}")
    for label, pose in (("scan_pose", first.scan_pose), ("fit", best.pose)):
        rgb, alpha = render_body(cloud, pose, views)
        for c, serial in enumerate(views.serials):
            Image.fromarray(overlay(views.images[c], alpha[c], rgb[c])).save(out / f"render_{label}_{serial}.png")
    print(f"kept the fit from {next(k for k, v in first.fits.items() if v is best)}: pose {np.round(best.pose, 4)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
