"""What one camera shows the operator, with the twin's block outlined on it (``replay.overlay``).

Online the picture is the stand-in's newest frame of that camera (what the visual-force sensor compares against);
offline there is no camera, so it is the twin's block rendered over the empty table with the project's renderer
(the view the sensor would predict). Rendered at most ``max_width`` pixels wide: the page needs a preview, and the
CPU renderer's cost grows with the pixel count.
"""

from __future__ import annotations

import numpy as np
import torch

from real_is_sim.correction.background import table_background
from real_is_sim.errors import ConfigError
from real_is_sim.render.clouds import render_clouds
from real_is_sim.replay import overlay
from real_is_sim.twin.tblock import block_cloud, table_plane


class CameraView:
    def __init__(self, runner, serial: str, max_width: int = 320):
        cameras = {c.serial: c for c in runner.cameras}
        if serial not in cameras:
            raise ConfigError(f"camera {serial!r} is not one of the runner's cameras {sorted(cameras)}")
        self.runner, self.camera = runner, cameras[serial]
        self.stride = max(1, int(np.ceil(self.camera.width / max_width)))  # frames are subsampled by this stride
        self.width, self.height = self.camera.width // self.stride, self.camera.height // self.stride
        K = self.camera.K.copy()
        K[:2] /= self.stride
        viewmat = self.camera.viewmat_opencv()
        self.viewmats = torch.as_tensor(viewmat[None], dtype=torch.float32)
        self.Ks = torch.as_tensor(K[None], dtype=torch.float32)
        self.cloud = block_cloud(runner.twin.task)
        background = table_background(K, viewmat, self.width, self.height, table_plane(runner.twin.task.table))
        self.background = torch.as_tensor(background[None], dtype=torch.float32)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray | None]:
        """What the picture needs from the running system, taken in the loop thread: the twin's object poses
        (n_obj, 7) and, online, the newest frame of this camera that reached the loop (subsampled)."""
        poses = self.runner.twin.object_poses()[0].copy()
        bridge = self.runner.bridge
        if bridge is None or bridge.loop.sync is None:
            return poses, None
        sample = bridge.loop.sync.tick(bridge.loop.t).samples.get(self.camera.serial)
        if sample is None or sample.frame is None:
            return poses, None
        return poses, sample.frame.image[:: self.stride, :: self.stride][: self.height, : self.width].copy()

    def image(self, poses: np.ndarray, frame: np.ndarray | None) -> np.ndarray:
        """(H, W, 3) uint8: ``frame`` (None: the twin rendered over the empty table) with the twin block's outline at
        ``poses``. Touches nothing of the running system, so it may run in another thread."""
        with torch.no_grad():
            colors, alphas, _ = render_clouds([self.cloud], [torch.as_tensor(poses, dtype=torch.float32)], self.viewmats,
                                              self.Ks, self.width, self.height, backgrounds=self.background)
        if frame is None:
            frame = (colors[0].clamp(0, 1).cpu().numpy() * 255).astype(np.uint8)
        return overlay(frame, alphas[0, ..., 0].cpu().numpy())
