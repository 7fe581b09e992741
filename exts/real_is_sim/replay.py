"""Replay recorded RealSense footage through the Real-is-Sim loop: the block is tracked by visual forces alone.

Pipeline (see docs/replay.md):
1. the clip's per-pixel temporal median is each camera's background (the empty table is never seen);
2. :func:`~real_is_sim.correction.initial_pose.estimate_initial_pose` finds the block in the first frames;
3. the twin (real table plane, scanned T-block) starts there with its robot parked at ``Q_START``, well
   clear of the block: the recording's joints are unknown, so the twin robot must never touch it;
4. :class:`~real_is_sim.loop.OnlineLoop` ticks at 60 Hz as fast as possible (``follow_real=False``), the
   frames delivered by their recorded timestamps; the robot is not rendered, and the truncated L1 loss keeps
   the real robot's pixels from pulling the block;
5. every tick the block's silhouette (alpha > 0.5) at the twin pose is compared with the frame's red-orange
   pixels (IoU), and the pose, overlays and a rerun recording are written.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage

from real_is_sim.bridge.compose import build_bridge
from real_is_sim.bridge.config import BridgeCfg, CamerasCfg, PolicyCfg
from real_is_sim.correction.actuator import VisualForceActuatorCfg
from real_is_sim.correction.initial_pose import InitialPoseCfg, estimate_initial_pose
from real_is_sim.correction.sensor import SensorCamera, VisualForceSensorCfg
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.gaussians.cloud import pose_cloud
from real_is_sim.gaussians.io import load_object_cloud
from real_is_sim.loop import LoopCfg
from real_is_sim.paths import shared_data_dir
from real_is_sim.render import rasterization
from real_is_sim.render.pose_fit import silhouette_iou
from real_is_sim.task import DEFAULT_TASK, import_task
from real_is_sim.transforms import quat_rotate
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim.twin.tblock import rest_on_table, table_plane

TRAJECTORY_COLUMNS = ("t", "x", "y", "z", "qx", "qy", "qz", "qw")


def tuned_sensor_cfg() -> VisualForceSensorCfg:
    """The visual-force settings the real clip needs (docs/replay.md explains each change from the defaults).

    ``outlier_threshold`` makes the loss robust (truncated): pixels the twin cannot explain, the real robot
    over the block, give no gradient. ``plane_normal`` is filled in with the table's normal by :func:`replay_real`.
    """
    return VisualForceSensorCfg(iterations=3, lr_means=0.0015, lr_quats=0.001, kp=4.0, max_force=5.0, max_torque=0.2,
                                loss="l2", outlier_threshold=0.35)


@dataclass
class ReplayCfg:
    recording: str = "sample_demos/0"  # relative to the shared data directory, or absolute
    # The cell of the recording: a task module (real_is_sim.task.Task) and its YAML (the real table plane and
    # scanned T-block), as in BridgeCfg.
    task_module: str = DEFAULT_TASK
    task: str = "pusht_real.yaml"
    max_frames: int | None = None  # replay up to this frame index per camera (None: the whole clip)
    # The real block is pushed by a robot the twin cannot see: the twin's motion since a frame's exposure is it
    # following a moving block, not its own overshoot (LoopCfg.pull_from_current).
    pull_from_current: bool = False
    sensor: VisualForceSensorCfg = field(default_factory=tuned_sensor_cfg)
    actuator: VisualForceActuatorCfg = field(default_factory=VisualForceActuatorCfg)
    initial_pose: InitialPoseCfg = field(default_factory=InitialPoseCfg)
    twin: TwinCfg = field(default_factory=TwinCfg)
    background_stride: int = 4  # the median background uses every k-th frame of the whole clip
    min_tool_clearance: float = 0.05  # m between the parked pusher and the block's spheres, checked at the start
    overlays: int = 6  # overlay PNGs, evenly spread over the replay
    rerun_image_every: int = 6  # log the camera images to rerun every k-th tick (poses every tick)

    def __post_init__(self):
        if self.max_frames is not None and int(self.max_frames) < 1:
            raise ConfigError(f"max_frames must be at least 1, got {self.max_frames}")
        if int(self.background_stride) < 1 or int(self.rerun_image_every) < 1 or int(self.overlays) < 0:
            raise ConfigError("background_stride and rerun_image_every must be >= 1, overlays >= 0")


@dataclass
class ReplayResult:
    mean_iou: float  # over ticks and views with a fresh frame
    iou_per_view: dict[str, float]
    initial_iou_per_view: dict[str, float]  # the initial pose estimate on the first frames
    scan_pose_iou_per_view: dict[str, float]  # the object file's X_WB on the first frames, for comparison
    ticks: int
    frames: dict[str, int]  # frames replayed per camera
    seconds: dict[str, float]  # wall time per stage
    ticks_per_second: float
    initial_pose: list[float]
    outputs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def _recording_dir(cfg: ReplayCfg) -> Path:
    path = Path(cfg.recording) if Path(cfg.recording).is_absolute() else shared_data_dir() / cfg.recording
    if not (path / "cameras.json").is_file():
        raise DataError(f"no recording at {path} (expected {path / 'cameras.json'}; set REAL_IS_SIM_DATA or --recording)")
    return path


class Silhouettes:
    """Renders the block's alpha at a pose into every camera (no gradients), for IoU and overlays."""

    def __init__(self, cloud, cameras: list[SensorCamera], backend: str):
        self.cloud = cloud
        self.viewmats = torch.tensor(np.stack([c.viewmat for c in cameras]), dtype=torch.float32)
        self.Ks = torch.tensor(np.stack([c.K for c in cameras]), dtype=torch.float32)
        self.width, self.height = cameras[0].width, cameras[0].height
        self.backend = backend

    def __call__(self, pose: np.ndarray, views: list[int]) -> np.ndarray:
        with torch.no_grad():
            means, quats = pose_cloud(self.cloud, torch.tensor(np.asarray(pose)[None], dtype=torch.float32))
            _, alpha, _ = rasterization(means, quats, self.cloud.scales, self.cloud.opacities, self.cloud.colors,
                                        self.viewmats[views], self.Ks[views], self.width, self.height, backend=self.backend)
        return alpha[..., 0].cpu().numpy()  # gsplat renders on CUDA


def overlay(image: np.ndarray, alpha: np.ndarray, color=(0, 255, 255)) -> np.ndarray:
    """``image`` with the outline of the silhouette ``alpha > 0.5`` painted in ``color``."""
    silhouette = alpha > 0.5
    outline = silhouette & ~ndimage.binary_erosion(silhouette, iterations=2)
    out = np.array(image, dtype=np.uint8, copy=True)
    out[outline] = color
    return out


def _tool_clearance(twin: Twin) -> float:
    """Distance (m) between the pusher's centre and the nearest block sphere surface, world 0."""
    pose = twin.object_poses()[0, 0]
    spheres = pose[:3] + quat_rotate(pose[3:7], twin.geometry.centers)
    return float(np.min(np.linalg.norm(spheres - twin.tool_position()[0], axis=1)) - twin.geometry.radius)


def replay_real(out_dir: str | Path, cfg: ReplayCfg | None = None, log=print) -> ReplayResult:
    """Replay ``cfg.recording`` through the loop; writes trajectory.csv, overlay PNGs and replay.rrd to ``out_dir``."""
    import matplotlib.image
    import rerun as rr

    cfg = cfg or ReplayCfg()
    clock = time.perf_counter()
    seconds: dict[str, float] = {}
    recording = _recording_dir(cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    task_module = import_task(cfg.task_module)
    task = task_module.load_cfg(cfg.task)
    cloud, scan_pose = load_object_cloud(task.block.object_file_path())
    # The composition root wires cameras (the clip, its per-pixel median as the empty cell), sensor (planar wrench),
    # actuator and twin. No follower (the recording's arm is not ours to drive), no robot occluder (its joints are
    # unknown), no relocalisation.
    bridge = build_bridge(BridgeCfg(
        task_module=cfg.task_module, task=cfg.task, twin=cfg.twin, sensor=cfg.sensor, actuator=cfg.actuator,
        cameras=CamerasCfg(source="replay", recording=str(recording), background_stride=cfg.background_stride),
        loop=LoopCfg(visual_forces=True, follow_real=False, realtime=False, pull_from_current=cfg.pull_from_current),
        policy=PolicyCfg(kind="hold"), render_robot=False, recover_lost=False,
    ))
    twin, loop, source = bridge.twin, bridge.loop, bridge.source
    try:
        serials = source.serials
        cameras = loop.sensor.cameras
        seconds["background"] = time.perf_counter() - clock

        clock = time.perf_counter()
        plane = table_plane(task.table)
        first = [source.frame(s, 0).image for s in serials]
        viewmats, Ks = np.stack([c.viewmat for c in cameras]), np.stack([c.K for c in cameras])
        estimate = estimate_initial_pose(cloud, first, viewmats, Ks, scan_pose, plane, cfg.initial_pose,
                                         object_mask=task_module.object_mask)
        silhouettes = Silhouettes(cloud, cameras, cfg.sensor.backend)
        first_masks = [task_module.object_mask(im) for im in first]
        scan_alpha = silhouettes(scan_pose, list(range(len(cameras))))
        scan_ious = {s: silhouette_iou(a, m) for s, a, m in zip(serials, scan_alpha, first_masks)}
        seconds["initial_pose"] = time.perf_counter() - clock
        log(f"initial pose IoU {dict(zip(serials, np.round(estimate.ious, 3).tolist()))} (scan pose X_WB: "
            f"{ {s: round(v, 3) for s, v in scan_ious.items()} }) in {seconds['initial_pose']:.1f} s")

        start = rest_on_table(estimate.pose, twin.geometry.centers, twin.geometry.radius, plane)
        twin.reset(object_poses=start[None, None])
        loop.reset_history()
        clearance = _tool_clearance(twin)
        if not clearance >= cfg.min_tool_clearance:
            raise ConfigError(f"the parked twin robot's pusher is {clearance:.3f} m from the block "
                              f"(need >= {cfg.min_tool_clearance} m): it could push the block in the replay")

        last_index = {s: source.num_frames(s) - 1 if cfg.max_frames is None else min(cfg.max_frames, source.num_frames(s)) - 1
                      for s in serials}
        end_time = max(float(source.timestamps(s)[i]) for s, i in last_index.items())
        num_ticks = int(np.floor(end_time / twin.control_dt)) + 1
        # Overlays at evenly spread ticks (the first tick at or after each one that has a fresh frame).
        overlay_ticks = sorted(set(np.linspace(0, num_ticks - 1, cfg.overlays).round().astype(int).tolist()))

        rec = rr.RecordingStream("real_is_sim_replay")
        rec.save(str(out / "replay.rrd"))
        rec.log("world/tblock/spheres", rr.Points3D(twin.geometry.centers, radii=twin.geometry.radius), static=True)
        for cam in cameras:
            X_WC = np.linalg.inv(cam.viewmat)  # OpenCV axes: rerun's RDF camera
            rec.log(f"world/{cam.name}", rr.Transform3D(translation=X_WC[:3, 3], mat3x3=X_WC[:3, :3]), static=True)
            rec.log(f"world/{cam.name}/image", rr.Pinhole(image_from_camera=cam.K, resolution=[cam.width, cam.height]), static=True)

        rows, ious = [], {s: [] for s in serials}
        frames_used = {s: set() for s in serials}
        clock = time.perf_counter()
        for tick in range(num_ticks):
            report = loop.tick()
            pose = twin.object_poses()[0, 0]
            if not np.isfinite(pose).all():
                raise DataError(f"the twin block's pose became non-finite at tick {tick} (t = {report.t:.3f} s)")
            rows.append([report.t, *pose])
            synced = loop.sync.tick(report.t)  # the same frames the sensor just used (no new frames at this t)
            views = [i for i, s in enumerate(serials) if s in synced.fresh and synced.fresh[s].index <= last_index[s]]
            alpha = silhouettes(pose, views) if views else []
            rec.set_time("t", duration=report.t)
            rec.log("world/tblock", rr.Transform3D(translation=pose[:3], quaternion=rr.Quaternion(xyzw=pose[3:7])))
            for i, a in zip(views, alpha):
                serial, frame = serials[i], synced.fresh[serials[i]]
                iou = silhouette_iou(a, task_module.object_mask(frame.image))
                ious[serial].append(iou)
                frames_used[serial].add(frame.index)
                rec.log(f"iou/{serial}", rr.Scalars(iou))
                if tick % cfg.rerun_image_every == 0:
                    rec.log(f"world/{serial}/image", rr.Image(overlay(frame.image, a)).compress(jpeg_quality=80))
            if overlay_ticks and tick >= overlay_ticks[0] and views:
                overlay_ticks.pop(0)
                panel = np.concatenate([overlay(synced.fresh[serials[i]].image, a) for i, a in zip(views, alpha)], axis=1)
                matplotlib.image.imsave(out / f"overlay_{tick:04d}.png", panel)
            if tick % 60 == 0:
                recent = [v[-1] for v in ious.values() if v]
                log(f"tick {tick}/{num_ticks} t={report.t:.2f}s IoU {np.round(recent, 3).tolist()} "
                    f"{(time.perf_counter() - clock) / (tick + 1):.2f} s/tick")
        seconds["loop"] = time.perf_counter() - clock
        rec.flush()
    finally:
        source.close()

    with open(out / "trajectory.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(TRAJECTORY_COLUMNS)
        writer.writerows([[f"{v:.6f}" for v in row] for row in rows])
    all_ious = [v for per_view in ious.values() for v in per_view]
    return ReplayResult(
        mean_iou=float(np.mean(all_ious)) if all_ious else float("nan"),
        iou_per_view={s: float(np.mean(v)) if v else float("nan") for s, v in ious.items()},
        initial_iou_per_view=dict(zip(serials, estimate.ious)),
        scan_pose_iou_per_view=scan_ious,
        ticks=num_ticks,
        frames={s: len(v) for s, v in frames_used.items()},
        seconds=seconds,
        ticks_per_second=num_ticks / seconds["loop"],
        initial_pose=[float(v) for v in start],
        outputs={"trajectory": str(out / "trajectory.csv"), "rerun": str(out / "replay.rrd"), "overlays": str(out)},
    )
