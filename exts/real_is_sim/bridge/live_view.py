"""The session's rerun view: the twin's block, reality's (stand-in only), the pusher, camera frames with the twin's
silhouette outlined, and the sensor's per-object confidence. Saved to a .rrd file (open with ``rerun FILE``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rerun as rr

from real_is_sim.bridge.compose import Bridge
from real_is_sim.loop import TickReport
from real_is_sim.replay import Silhouettes, overlay


class LiveView:
    def __init__(self, bridge: Bridge, path: Path, image_every: int):
        self.bridge, self.image_every, self.ticks = bridge, image_every, 0
        self.rec = rr.RecordingStream("real_is_sim_deploy")
        self.rec.save(str(path))
        geometry = bridge.twin.geometry
        for name in ("twin", "reality"):
            color = [230, 90, 40] if name == "twin" else [60, 160, 60]
            self.rec.log(f"world/{name}/block", rr.Points3D(geometry.centers, radii=geometry.radius, colors=color),
                         static=True)
        sensor = bridge.loop.sensor
        self.silhouettes = Silhouettes(sensor.cloud, sensor.cameras, "auto") if sensor is not None else None
        for cam in sensor.cameras if sensor is not None else []:
            X_WC = np.linalg.inv(cam.viewmat)  # OpenCV axes: rerun's RDF camera
            self.rec.log(f"world/{cam.name}", rr.Transform3D(translation=X_WC[:3, 3], mat3x3=X_WC[:3, :3]), static=True)
            self.rec.log(f"world/{cam.name}/image", rr.Pinhole(image_from_camera=cam.K, resolution=[cam.width, cam.height]),
                         static=True)

    def log(self, report: TickReport) -> None:
        bridge, rec = self.bridge, self.rec
        rec.set_time("t", duration=bridge.loop.t)
        pose = bridge.twin.object_poses()[0, 0]
        rec.log("world/twin/block", rr.Transform3D(translation=pose[:3], quaternion=rr.Quaternion(xyzw=pose[3:7])))
        truth = bridge.ground_truth()
        if truth is not None:
            rec.log("world/reality/block", rr.Transform3D(translation=truth[0, :3], quaternion=rr.Quaternion(xyzw=truth[0, 3:7])))
        rec.log("world/twin/pusher", rr.Points3D(bridge.twin.tool_position()[:1], radii=bridge.twin.task.robot.pusher_radius))
        if report.reading is not None:
            rec.log("confidence/block", rr.Scalars(float(report.reading.confidence[0])))
        if self.silhouettes is not None and self.ticks % self.image_every == 0:
            synced = bridge.loop.sync.tick(bridge.loop.t)  # the frames the sensor just used
            cameras = bridge.loop.sensor.cameras
            views = [k for k, cam in enumerate(cameras) if cam.name in synced.fresh]
            for k, alpha in zip(views, self.silhouettes(pose, views) if views else []):
                image = synced.fresh[cameras[k].name].image
                rec.log(f"world/{cameras[k].name}/image", rr.Image(overlay(image, alpha)).compress(jpeg_quality=80))
        self.ticks += 1

    def close(self) -> None:
        self.rec.flush()
