"""Replay recorded RealSense footage through the Real-is-Sim loop: the block is tracked by visual forces alone.

Pipeline (see docs/replay.md):
1. the clip's per-pixel temporal median is each camera's background (the empty table is never seen);
2. the recording has no joint log: the arm is fitted to the views' silhouettes frame by frame
   (:mod:`real_is_sim.robot.arm_fit`), so the scoring can leave its pixels out (and the sensor can render it as
   an occluder);
3. :func:`~real_is_sim.correction.initial_pose.estimate_initial_pose` finds the block in the first frames;
4. the twin (real table plane, scanned T-block) starts there with its robot parked at ``Q_START``, well
   clear of the block: the twin robot must never touch it;
5. :class:`~real_is_sim.loop.OnlineLoop` ticks at 60 Hz as fast as possible (``follow_real=False``), the
   frames delivered by their recorded timestamps; the truncated loss keeps the real robot's pixels (those the
   optional occluder, ``ReplayCfg.occlude_arm``, does not cover) from pulling the block;
6. every tick the block's silhouette (alpha > 0.5) at the twin pose is compared in every view with the frame's
   red-orange pixels (IoU), also with the arm's pixels left out of both, and the pose, overlays and a rerun
   recording are written;
7. the checks (``ReplayCfg.checks``): the same replay tracking with one view only, scored in the other
   (leave-one-view-out), and the forces-off control (the block held at its initial pose estimate).
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
from real_is_sim.cameras.replay import VideoReplaySource
from real_is_sim.cameras.sync import FrameSynchronizer
from real_is_sim.correction.actuator import VisualForceActuatorCfg
from real_is_sim.correction.background import median_backgrounds
from real_is_sim.correction.initial_pose import InitialPoseCfg, estimate_initial_pose
from real_is_sim.correction.sensor import SensorCamera, VisualForceSensorCfg
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.gaussians.cloud import pose_cloud
from real_is_sim.gaussians.io import load_object_cloud
from real_is_sim.loop import LoopCfg
from real_is_sim.paths import shared_data_dir
from real_is_sim.render import rasterization
from real_is_sim.render.pose_fit import silhouette_iou
from real_is_sim.robot.appearance import RobotAppearance, RobotAppearanceCfg
from real_is_sim.robot.arm_fit import ArmFitCfg, ArmSilhouettes, ArmTrack, fit_arm_track, foreground_mask
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
    # True: the arm fitted to the views the twin tracks with is rendered as the sensor's occluder. False: the
    # truncated loss alone keeps its pixels out, which tracked as well or better on the shared clip (docs/replay.md).
    occlude_arm: bool = False
    arm_fit: ArmFitCfg = field(default_factory=ArmFitCfg)
    arm_margin_px: int = 4  # the arm's pixels left out of the arm-excluded IoU, grown by this much
    stale_after: float = 0.05  # s: a frame older than this is neither used nor scored
    # Leave-one-view-out runs (track with one view, score the others) and the forces-off control.
    checks: bool = True

    def __post_init__(self):
        if self.max_frames is not None and int(self.max_frames) < 1:
            raise ConfigError(f"max_frames must be at least 1, got {self.max_frames}")
        if int(self.background_stride) < 1 or int(self.rerun_image_every) < 1 or int(self.overlays) < 0:
            raise ConfigError("background_stride and rerun_image_every must be >= 1, overlays >= 0")
        if int(self.arm_margin_px) < 0:
            raise ConfigError(f"arm_margin_px must be >= 0, got {self.arm_margin_px}")


@dataclass
class ReplayResult:
    mean_iou: float  # over ticks and views with a fresh frame
    iou_per_view: dict[str, float]
    iou_arm_excluded: dict[str, float]  # the same with the arm's pixels left out of both silhouettes
    initial_iou_per_view: dict[str, float]  # the initial pose estimate on the first frames
    scan_pose_iou_per_view: dict[str, float]  # the object file's X_WB on the first frames, for comparison
    ticks: int
    frames: dict[str, int]  # frames replayed per camera
    seconds: dict[str, float]  # wall time per stage
    ticks_per_second: float
    initial_pose: list[float]
    arm_fit_iou: float  # mean silhouette IoU of the fitted arm over the frames (fit resolution)
    # tracking view -> the arm-excluded IoU in the other views (the twin never saw them); empty without checks
    leave_one_view_out_iou: dict[str, float] = field(default_factory=dict)
    # the block held at its initial pose estimate: "per_view" (estimated from all views) and "leave_one_view_out"
    # (estimated from the tracking view, scored in the others), arm excluded; empty without checks
    forces_off_iou: dict[str, dict[str, float]] = field(default_factory=dict)
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

    def __init__(self, cloud, cameras: list, backend: str):
        self.cloud = cloud
        self.viewmats = torch.tensor(np.stack([_viewmat(c) for c in cameras]), dtype=torch.float32)
        self.Ks = torch.tensor(np.stack([c.K for c in cameras]), dtype=torch.float32)
        self.width, self.height = cameras[0].width, cameras[0].height
        self.backend = backend

    def __call__(self, pose: np.ndarray, views: list[int]) -> np.ndarray:
        with torch.no_grad():
            means, quats = pose_cloud(self.cloud, torch.tensor(np.asarray(pose)[None], dtype=torch.float32))
            _, alpha, _ = rasterization(means, quats, self.cloud.scales, self.cloud.opacities, self.cloud.colors,
                                        self.viewmats[views], self.Ks[views], self.width, self.height, backend=self.backend)
        return alpha[..., 0].cpu().numpy()  # gsplat renders on CUDA


def _viewmat(camera) -> np.ndarray:
    return camera.viewmat if isinstance(camera, SensorCamera) else camera.viewmat_opencv()


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


class NewestFrames:
    """The newest frame of each camera at a time (the loop's :class:`FrameSynchronizer` over a source of its own, so
    a view the sensor does not see is scored all the same); frames after ``last_index`` are never delivered."""

    def __init__(self, recording: Path, serials: list[str], last_index: dict[str, int], stale_after: float):
        self.source = VideoReplaySource(recording, serials=serials)
        self.sync = FrameSynchronizer(serials, stale_after)
        self.last_index = last_index

    def at(self, t: float) -> dict:
        """serial -> the newest frame with timestamp <= t, left out when older than the synchroniser's stale_after."""
        self.sync.push(f for f in self.source.poll(t) if f.index <= self.last_index[f.serial])
        return self.sync.tick(t).fresh

    def close(self) -> None:
        self.source.close()


def frames_for_arm_fit(recording: Path, serials: list[str], last_index: dict[str, int]):
    """``(t, [newest image per view])`` at each frame of the first view once every view has one, in time order."""
    newest = {}
    with VideoReplaySource(recording, serials=serials) as source:
        for frame in source.frames():
            if frame.index > last_index[frame.serial]:
                continue
            newest[frame.serial] = frame.image
            if frame.serial == serials[0] and len(newest) == len(serials):
                yield frame.timestamp, [newest[s] for s in serials]


class Scorer:
    """Per tick and view: the silhouette IoU of the twin block against the frame's object pixels, plain and with the
    arm's pixels (the fitted arm's silhouette and the pixels brighter than the empty cell, grown) left out of both."""

    def __init__(self, recording: Path, cameras: list, backgrounds: dict[str, np.ndarray], silhouettes: Silhouettes,
                 arm: ArmTrack, arm_silhouettes: ArmSilhouettes, object_mask, last_index: dict[str, int], cfg: ReplayCfg):
        self.serials = [c.serial for c in cameras]
        self.frames = NewestFrames(recording, self.serials, last_index, cfg.stale_after)
        self.backgrounds, self.silhouettes, self.object_mask, self.cfg = backgrounds, silhouettes, object_mask, cfg
        self.arm, self.arm_silhouettes = arm, arm_silhouettes
        self.plain: dict[str, list[float]] = {s: [] for s in self.serials}
        self.arm_excluded: dict[str, list[float]] = {s: [] for s in self.serials}
        self.used: dict[str, set[int]] = {s: set() for s in self.serials}
        self.times: dict[str, list[float]] = {s: [] for s in self.serials}
        self.last_arm_pixels: dict[str, np.ndarray] = {}  # per view, those of the latest scored frame (overlays)

    def arm_pixels(self, view: int, frame, block: np.ndarray) -> np.ndarray:
        """The arm's pixels in ``frame`` (of camera ``view``, whose object pixels are ``block``), grown."""
        image = frame.image
        arm = self.arm_silhouettes.full_resolution(self.arm.at(frame.timestamp), view, image.shape[:2])
        bright = foreground_mask(image, self.backgrounds[frame.serial], block, self.cfg.arm_fit.foreground_threshold)
        return ndimage.binary_dilation(arm | bright, iterations=self.cfg.arm_margin_px) if self.cfg.arm_margin_px else arm | bright

    def score(self, t: float, pose: np.ndarray) -> tuple[list[int], np.ndarray, dict]:
        """Scores the views with a fresh frame at ``t``; returns (views, their alphas, serial -> frame)."""
        fresh = self.frames.at(t)
        views = [i for i, s in enumerate(self.serials) if s in fresh]
        alpha = self.silhouettes(pose, views) if views else []
        for i, a in zip(views, alpha):
            serial, frame = self.serials[i], fresh[self.serials[i]]
            block = self.object_mask(frame.image)
            self.last_arm_pixels[serial] = arm = self.arm_pixels(i, frame, block)
            keep = ~arm
            self.plain[serial].append(silhouette_iou(a, block))
            self.arm_excluded[serial].append(silhouette_iou(np.where(keep, a, 0.0), block & keep))
            self.used[serial].add(frame.index)
            self.times[serial].append(t)
        return views, alpha, fresh

    def means(self, per_view: dict[str, list[float]]) -> dict[str, float]:
        return {s: float(np.mean(v)) if v else float("nan") for s, v in per_view.items()}

    def close(self) -> None:
        self.frames.close()


@dataclass
class _Run:
    name: str  # "main", "forces_off", "only_<serial>", "only_<serial>_forces_off"
    tracked: list[str]
    rows: list
    scorer: Scorer
    initial_ious: list[float]
    start: np.ndarray
    ticks: int
    loop_seconds: float


class _Replay:
    """What every run of one replay shares: the recording, its backgrounds, the block model, the scoring arm."""

    def __init__(self, cfg: ReplayCfg, out: Path, log):
        self.cfg, self.out, self.log = cfg, out, log
        self.recording = _recording_dir(cfg)
        self.task_module = import_task(cfg.task_module)
        self.task = self.task_module.load_cfg(cfg.task)
        self.cloud, self.scan_pose = load_object_cloud(self.task.block.object_file_path())
        self.plane = table_plane(self.task.table)
        with VideoReplaySource(self.recording) as source:
            self.serials = source.serials
            self.cameras = [source.cameras[s] for s in self.serials]
            self.last_index = {s: source.num_frames(s) - 1 if cfg.max_frames is None
                               else min(cfg.max_frames, source.num_frames(s)) - 1 for s in self.serials}
            self.end_time = max(float(source.timestamps(s)[i]) for s, i in self.last_index.items())
            self.first = [source.frame(s, 0).image for s in self.serials]
            self.backgrounds = median_backgrounds(source, cfg.background_stride)
        # Saved once, read back by every run's bridge (cameras.backgrounds) instead of decoding the clip again.
        self.backgrounds_dir = out / "backgrounds"
        self.backgrounds_dir.mkdir(exist_ok=True)
        for serial, image in self.backgrounds.items():
            np.save(self.backgrounds_dir / f"{serial}.npy", image)
        self.silhouettes = Silhouettes(self.cloud, self.cameras, cfg.sensor.backend)
        self._initial_poses: dict[tuple[str, ...], object] = {}

    def fit_arm(self, serials: list[str]) -> tuple[ArmTrack, ArmSilhouettes]:
        views = [self.serials.index(s) for s in serials]
        viewmats = np.stack([_viewmat(self.cameras[v]) for v in views])
        Ks = np.stack([self.cameras[v].K for v in views])
        track = fit_arm_track(frames_for_arm_fit(self.recording, serials, self.last_index),
                              [self.backgrounds[s] for s in serials], self.task_module.object_mask, viewmats, Ks,
                              self.cfg.arm_fit, base_pose=np.asarray(self.task.robot.base_pose), log=self.log)
        height, width = self.backgrounds[serials[0]].shape[:2]
        return track, ArmSilhouettes(viewmats, Ks, width, height, self.cfg.arm_fit, np.asarray(self.task.robot.base_pose))

    def initial_pose(self, serials: list[str]):
        """The block's pose in the first frames of ``serials``: estimated once, shared by the forces-on run and its
        forces-off control."""
        key = tuple(serials)
        if key not in self._initial_poses:
            views = [self.serials.index(s) for s in serials]
            self._initial_poses[key] = estimate_initial_pose(
                self.cloud, [self.first[v] for v in views], np.stack([_viewmat(self.cameras[v]) for v in views]),
                np.stack([self.cameras[v].K for v in views]), self.scan_pose, self.plane, self.cfg.initial_pose,
                object_mask=self.task_module.object_mask)
        return self._initial_poses[key]

    def run(self, serials: list[str], visual_forces: bool, occluder: ArmTrack | None, scoring_arm: tuple,
            outputs: bool = False) -> _Run:
        """Track with the views ``serials`` (forces on or off) and score every view of the recording."""
        cfg = self.cfg
        estimate = self.initial_pose(serials)
        bridge = build_bridge(BridgeCfg(
            task_module=cfg.task_module, task=cfg.task, twin=cfg.twin, sensor=cfg.sensor, actuator=cfg.actuator,
            cameras=CamerasCfg(source="replay", recording=str(self.recording), serials=list(serials),
                               backgrounds=str(self.backgrounds_dir)),
            # exposure_lead_ticks 0: the lead answers springs pulled from the current pose; a replay whose springs
            # pull from the exposure pose compares each frame with the twin at its exposure
            loop=LoopCfg(visual_forces=visual_forces, follow_real=False, realtime=False,
                         pull_from_current=cfg.pull_from_current, stale_after=cfg.stale_after,
                         exposure_lead_ticks=0 if not cfg.pull_from_current else LoopCfg.exposure_lead_ticks),
            policy=PolicyCfg(kind="hold"), render_robot=False, recover_lost=False,
        ))
        twin, loop = bridge.twin, bridge.loop
        if occluder is not None and visual_forces:
            # The arm the cameras saw, fitted to these views: the sensor renders it in front of the block.
            appearance = RobotAppearance(RobotAppearanceCfg(hand_stick=cfg.arm_fit.hand_stick),
                                         base_pose=np.asarray(self.task.robot.base_pose))
            loop.occluders, loop.arm_in_view = appearance.cloud, occluder.at
        scorer = Scorer(self.recording, self.cameras, self.backgrounds, self.silhouettes, *scoring_arm,
                        self.task_module.object_mask, self.last_index, cfg)
        try:
            start = rest_on_table(estimate.pose, twin.geometry.centers, twin.geometry.radius, self.plane)
            twin.reset(object_poses=start[None, None])
            loop.reset_history()
            clearance = _tool_clearance(twin)
            if not clearance >= cfg.min_tool_clearance:
                raise ConfigError(f"the parked twin robot's pusher is {clearance:.3f} m from the block "
                                  f"(need >= {cfg.min_tool_clearance} m): it could push the block in the replay")
            num_ticks = int(np.floor(self.end_time / twin.control_dt)) + 1
            recorder = _Outputs(self, twin, num_ticks) if outputs else None
            rows, clock = [], time.perf_counter()
            for tick in range(num_ticks):
                report = loop.tick()
                pose = twin.object_poses()[0, 0]
                if not np.isfinite(pose).all():
                    raise DataError(f"the twin block's pose became non-finite at tick {tick} (t = {report.t:.3f} s)")
                rows.append([report.t, *pose])
                views, alpha, fresh = scorer.score(report.t, pose)
                if recorder is not None:
                    recorder.tick(tick, report.t, pose, views, alpha, fresh, scorer)
                if tick % 120 == 0:
                    recent = {s: round(v[-1], 3) for s, v in scorer.arm_excluded.items() if v}
                    self.log(f"[{'+'.join(serials)} forces {'on' if visual_forces else 'off'}] tick {tick}/{num_ticks} "
                             f"t={report.t:.2f}s IoU arm excluded {recent} {(time.perf_counter() - clock) / (tick + 1):.2f} s/tick")
            seconds = time.perf_counter() - clock
            if recorder is not None:
                recorder.close()
        finally:
            scorer.close()
            bridge.source.close()
        name = ("main" if len(serials) == len(self.serials) else f"only_{serials[0]}") + ("" if visual_forces else "_forces_off")
        name = "forces_off" if name == "main_forces_off" else name
        return _Run(name, list(serials), rows, scorer, list(estimate.ious), start, num_ticks, seconds)


class _Outputs:
    """The main run's overlays and rerun recording."""

    def __init__(self, replay: _Replay, twin: Twin, num_ticks: int):
        import rerun as rr

        self.rr, self.out, self.cfg = rr, replay.out, replay.cfg
        self.serials = replay.serials
        # Overlays at evenly spread ticks (the first tick at or after each one that has a fresh frame).
        self.overlay_ticks = sorted(set(np.linspace(0, num_ticks - 1, self.cfg.overlays).round().astype(int).tolist()))
        self.rec = rr.RecordingStream("real_is_sim_replay")
        self.rec.save(str(self.out / "replay.rrd"))
        self.rec.log("world/tblock/spheres", rr.Points3D(twin.geometry.centers, radii=twin.geometry.radius), static=True)
        for cam in replay.cameras:
            X_WC = np.linalg.inv(_viewmat(cam))  # OpenCV axes: rerun's RDF camera
            self.rec.log(f"world/{cam.serial}", rr.Transform3D(translation=X_WC[:3, 3], mat3x3=X_WC[:3, :3]), static=True)
            self.rec.log(f"world/{cam.serial}/image", rr.Pinhole(image_from_camera=cam.K, resolution=[cam.width, cam.height]),
                         static=True)

    def tick(self, tick: int, t: float, pose: np.ndarray, views: list[int], alpha, fresh: dict, scorer: Scorer) -> None:
        import matplotlib.image

        rr, rec = self.rr, self.rec
        rec.set_time("t", duration=t)
        rec.log("world/tblock", rr.Transform3D(translation=pose[:3], quaternion=rr.Quaternion(xyzw=pose[3:7])))
        for i, a in zip(views, alpha):
            serial = self.serials[i]
            rec.log(f"iou/{serial}", rr.Scalars(scorer.plain[serial][-1]))
            rec.log(f"iou_arm_excluded/{serial}", rr.Scalars(scorer.arm_excluded[serial][-1]))
            if tick % self.cfg.rerun_image_every == 0:
                rec.log(f"world/{serial}/image", rr.Image(overlay(fresh[serial].image, a)).compress(jpeg_quality=80))
        if self.overlay_ticks and tick >= self.overlay_ticks[0] and views:
            self.overlay_ticks.pop(0)
            panels = []
            for i, a in zip(views, alpha):
                frame, arm = fresh[self.serials[i]], scorer.last_arm_pixels[self.serials[i]]
                panel = overlay(frame.image, a)
                panel[arm & ~ndimage.binary_erosion(arm, iterations=2)] = (255, 0, 255)  # the pixels left out: magenta
                panels.append(panel)
            matplotlib.image.imsave(self.out / f"overlay_{tick:04d}.png", np.concatenate(panels, axis=1))

    def close(self) -> None:
        self.rec.flush()


def write_iou_table(path: Path, runs: list[_Run]) -> None:
    """``run,tracked_views,scored_view,t,iou,iou_arm_excluded``: every scored (tick, view) of every run."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("run", "tracked_views", "scored_view", "t", "iou", "iou_arm_excluded"))
        for run in runs:
            for serial, times in run.scorer.times.items():
                for t, plain, excluded in zip(times, run.scorer.plain[serial], run.scorer.arm_excluded[serial]):
                    writer.writerow((run.name, "+".join(run.tracked), serial, f"{t:.4f}", f"{plain:.4f}", f"{excluded:.4f}"))


def plot_iou_over_time(path: Path, runs: list[_Run], serials: list[str], window_s: float = 0.5) -> None:
    """One panel per scored view: the arm-excluded IoU over the clip (running mean over ``window_s``) of every run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(serials), 1, figsize=(9, 3 * len(serials)), sharex=True, squeeze=False)
    colours = {}  # one colour per set of tracking views: forces on solid, off dotted
    for run in runs:
        colours.setdefault("+".join(run.tracked), f"C{len(colours)}")
    for ax, serial in zip(axes[:, 0], serials):
        for run in runs:
            t, v = np.asarray(run.scorer.times[serial]), np.asarray(run.scorer.arm_excluded[serial])
            if len(t) == 0:
                continue
            k = min(len(v), max(1, int(round(window_s / max(np.median(np.diff(t)) if len(t) > 1 else 1.0, 1e-3)))))
            # running mean; at the clip's ends over the samples there are (no zero padding)
            smooth = np.convolve(v, np.ones(k), mode="same") / np.convolve(np.ones_like(v), np.ones(k), mode="same")
            seen = serial in run.tracked
            style = "-" if "forces_off" not in run.name else ":"
            label = f"tracked with {'+'.join(run.tracked)}" + (", forces off" if "forces_off" in run.name else "")
            ax.plot(t, smooth, style, color=colours["+".join(run.tracked)], lw=1.8 if seen else 1.2,
                    label=label + ("" if seen else " (never saw this view)"))
        ax.set_ylabel(f"IoU in {serial}\n(arm excluded)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    axes[-1, 0].set_xlabel("t (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _mean_other_views(scorer: Scorer, tracked: list[str]) -> float:
    others = [v for s, per in scorer.arm_excluded.items() if s not in tracked for v in per]
    return float(np.mean(others)) if others else float("nan")


def replay_real(out_dir: str | Path, cfg: ReplayCfg | None = None, log=print) -> ReplayResult:
    """Replay ``cfg.recording`` through the loop; writes trajectory.csv, arm.csv, overlay PNGs and replay.rrd to
    ``out_dir``; with ``cfg.checks`` also the leave-one-view-out runs and the forces-off control."""
    cfg = cfg or ReplayCfg()
    _recording_dir(cfg)  # one clear error before anything is written
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    replay = _Replay(cfg, out, log)
    serials = replay.serials
    seconds["background"] = time.perf_counter() - clock

    clock = time.perf_counter()
    arm, arm_silhouettes = replay.fit_arm(serials)  # all views: the scoring's arm, and the main run's occluder
    arm.write_csv(out / "arm.csv")
    seconds["arm_fit"] = time.perf_counter() - clock
    log(f"arm fitted to {len(arm.t)} frames: mean silhouette IoU {np.mean(arm.iou):.3f} in {seconds['arm_fit']:.1f} s")
    scoring_arm = (arm, arm_silhouettes)

    main = replay.run(serials, True, arm if cfg.occlude_arm else None, scoring_arm, outputs=True)
    seconds["loop"] = main.loop_seconds
    first_masks = [replay.task_module.object_mask(im) for im in replay.first]
    scan_alpha = replay.silhouettes(replay.scan_pose, list(range(len(serials))))
    scan_ious = {s: silhouette_iou(a, m) for s, a, m in zip(serials, scan_alpha, first_masks)}
    log(f"initial pose IoU {dict(zip(serials, np.round(main.initial_ious, 3).tolist()))} (scan pose X_WB: "
        f"{ {s: round(v, 3) for s, v in scan_ious.items()} })")

    leave_one_out, forces_off, runs = {}, {}, [main]
    if cfg.checks:
        clock = time.perf_counter()
        held = replay.run(serials, False, None, scoring_arm)
        runs.append(held)
        forces_off["per_view"] = held.scorer.means(held.scorer.arm_excluded)
        forces_off["leave_one_view_out"] = {}
        for serial in serials if len(serials) > 1 else []:
            occluder = replay.fit_arm([serial])[0] if cfg.occlude_arm else None
            alone = replay.run([serial], True, occluder, scoring_arm)
            leave_one_out[serial] = _mean_other_views(alone.scorer, [serial])
            held_alone = replay.run([serial], False, None, scoring_arm)
            runs += [alone, held_alone]
            forces_off["leave_one_view_out"][serial] = _mean_other_views(held_alone.scorer, [serial])
            log(f"tracked with {serial} only: IoU in the other views (arm excluded) {leave_one_out[serial]:.3f}, "
                f"forces off {forces_off['leave_one_view_out'][serial]:.3f}")
        seconds["checks"] = time.perf_counter() - clock

    with open(out / "trajectory.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(TRAJECTORY_COLUMNS)
        writer.writerows([[f"{v:.6f}" for v in row] for row in main.rows])
    write_iou_table(out / "iou.csv", runs)
    plot_iou_over_time(out / "iou_over_time.png", runs, serials)
    all_ious = [v for per_view in main.scorer.plain.values() for v in per_view]
    return ReplayResult(
        mean_iou=float(np.mean(all_ious)) if all_ious else float("nan"),
        iou_per_view=main.scorer.means(main.scorer.plain),
        iou_arm_excluded=main.scorer.means(main.scorer.arm_excluded),
        initial_iou_per_view=dict(zip(serials, main.initial_ious)),
        scan_pose_iou_per_view=scan_ious,
        ticks=main.ticks,
        frames={s: len(v) for s, v in main.scorer.used.items()},
        seconds=seconds,
        ticks_per_second=main.ticks / main.loop_seconds,
        initial_pose=[float(v) for v in main.start],
        arm_fit_iou=float(np.mean(arm.iou)),
        leave_one_view_out_iou=leave_one_out,
        forces_off_iou=forces_off,
        outputs={"trajectory": str(out / "trajectory.csv"), "arm": str(out / "arm.csv"), "iou": str(out / "iou.csv"),
                 "plot": str(out / "iou_over_time.png"), "rerun": str(out / "replay.rrd"), "overlays": str(out)},
    )
