"""One demonstration episode at a time, in either collection mode, recorded at 60 Hz.

- ``offline``: the twin alone (no cameras, no correction): a plain virtual environment.
- ``online``: the bridge against the stand-in real world (``load_bridge_cfg("standin")``): each tick the visual
  forces correct the twin, the twin robot is commanded, the stand-in's robot follows the twin robot's actual joints
  and the stand-in advances (``Bridge.tick``). Ground truth (success) is the stand-in's block.

Each recorded frame holds what was observed at tick time ``t`` (the twin's object poses, its robot's actual q) and
what was commanded then (q_target), LeRobot's observation/action convention.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from pathlib import Path

import numpy as np

from real_is_sim.bridge.config import load_bridge_cfg
from real_is_sim.config import to_yaml
from real_is_sim.demos import MODES
from real_is_sim.demos.dataset import DatasetWriter
from real_is_sim.errors import ConfigError, DataError
from real_is_sim.loop import TickReport
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.task import import_task

DEFAULT_TASK_TEXT = "push the T onto the goal"
HOME_TOLERANCE_RAD = 0.01  # online: the stand-in's arm is home when every joint is this close to q_start
HOME_TIMEOUT_S = 5.0


class EpisodeRunner:
    def __init__(self, mode: str, *, task: str = "pusht.yaml", writer: DatasetWriter | None = None, overrides=()):
        """``task``: the task YAML (beside the task module, or a path); ``overrides``: BridgeCfg dotlist overrides
        (both modes read the twin settings from it, online everything else too). ``writer``: where episodes go (None:
        not recorded); usually assigned after construction, ``runner.writer = dataset_writer_for(runner, root)``,
        because the dataset stores the runner's cell config and static state."""
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.writer = writer
        self.cfg = load_bridge_cfg("standin", overrides=[f"task={task}", "loop.realtime=false", *overrides])
        self.bridge = None
        if mode == "online":
            from real_is_sim.bridge.compose import build_bridge

            if self.cfg.cameras.source != "standin":
                raise ConfigError("online collection runs against the stand-in (cameras.source=standin)")
            self.bridge = build_bridge(self.cfg)
            self.task_module, self.twin = self.bridge.task, self.bridge.twin
            self.cameras = self.bridge.cameras
        else:
            from real_is_sim.twin import Twin

            self.task_module = import_task(self.cfg.task_module)
            self.twin = Twin(self.task_module.load_cfg(self.cfg.task), 1, self.cfg.twin)
            # the cameras the stand-in would have: static virtual cameras at the same poses in both modes
            c = self.cfg.cameras
            self.cameras = ring_cameras(self.twin.object_poses()[0, 0, :3], c.num_cameras, width=c.width, height=c.height)
        self.default_start = self.twin.object_poses()[0].copy()
        self.q_start = np.asarray(self.twin.task.robot.q_start, dtype=np.float64)
        self._t = None  # episode time; None between episodes
        self._start_pose = None
        self._wall_start = 0.0

    # -- what the dataset stores once ------------------------------------------------------------------------

    def cell_yaml(self) -> str:
        return to_yaml(self.twin.task)

    def static(self) -> dict:
        """The initial full state besides the cell YAML: objects, Gaussians reference, cameras, collection mode."""
        block = self.twin.task.block
        gaussians = {"source": block.source}
        if block.source == "file":
            path = block.object_file_path()
            gaussians.update(path=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest())
        static = {
            "object_names": list(self.twin.object_names), "mode": self.mode, "task_module": self.cfg.task_module,
            "task": self.cfg.task, "control_hz": 1.0 / self.twin.control_dt, "gaussians": gaussians,
            "twin": dataclasses.asdict(self.cfg.twin),  # the physics settings, for an exact replay
            "cameras": [{"serial": c.serial, "width": c.width, "height": c.height, "K": c.K.tolist(),
                         "X_WC": c.X_WC.tolist()} for c in self.cameras],
        }
        if self.bridge is not None and self.bridge.standin is not None:
            static["standin_physical"] = dataclasses.asdict(self.bridge.standin.params)  # reality's hidden physics
        return static

    # -- episodes ----------------------------------------------------------------------------------------------

    def begin(self, start_pose: np.ndarray | None = None, task: str = DEFAULT_TASK_TEXT,
              robot_q: np.ndarray | None = None) -> None:
        """Reset the twin (online: and the stand-in's block, after its arm went home) with the block at
        ``start_pose`` ((7,) or (n_obj, 7); None: the task's start) and the robot at ``robot_q`` (offline only;
        None: its start); start an episode."""
        if self._t is not None:
            raise DataError("begin: an episode is running (end or discard it first)")
        if robot_q is not None and self.mode == "online":
            raise ConfigError("begin: an online episode starts with the arm at its start (robot_q is offline only)")
        q = self.q_start if robot_q is None else np.asarray(robot_q, dtype=np.float64).reshape(7)
        poses = self.default_start.copy() if start_pose is None else np.asarray(start_pose, dtype=np.float64).reshape(-1, 7)
        if poses.shape != self.default_start.shape or not np.all(np.isfinite(poses)):
            raise DataError(f"start_pose must be finite ({len(self.default_start)}, 7) poses, got shape {poses.shape}")
        if self.mode == "online":
            self._home()
            self.bridge.standin.teleport(poses)
            self._settle()
            self.bridge.reset_twin(poses)
        else:
            self.twin.reset(object_poses=poses[None], robot_q=q[None])
        if self.writer is not None:
            self.writer.start_episode(task)
        self._start_pose = poses
        self._t = 0.0
        self._wall_start = time.perf_counter()

    def step(self, q_target: np.ndarray) -> TickReport | None:
        """One 60 Hz tick towards joint targets ``q_target`` (7,); the frame recorded is the state before it.
        Online returns the bridge's tick report (sensor reading: confidence, loss), offline None."""
        if self._t is None:
            raise DataError("step: no episode (call begin first)")
        q_target = np.asarray(q_target, dtype=np.float64).reshape(7)
        if self.writer is not None:
            self.writer.add_frame(t=self._t, object_poses=self.twin.object_poses()[0], q=self.robot_q(), q_cmd=q_target)
        report = self._tick(q_target[None])
        self._t += self.twin.control_dt
        return report

    @property
    def t(self) -> float:
        """Episode time (s) of the next step."""
        return 0.0 if self._t is None else self._t

    def object_pose(self) -> np.ndarray:
        return self.twin.object_poses()[0, 0].copy()

    def robot_q(self) -> np.ndarray:
        return self.twin.robot_q()[0].copy()

    def ground_truth_pose(self) -> np.ndarray:
        """The block where it really is: the stand-in's online, the twin's offline."""
        if self.bridge is not None:
            return self.bridge.ground_truth()[0].copy()
        return self.object_pose()

    def success(self) -> bool:
        poses = self.bridge.ground_truth() if self.bridge is not None else self.twin.object_poses()[0]
        return bool(self.task_module.success(self.twin.task, poses))

    def end(self) -> dict:
        """End the episode; with a writer it is written durably. ``{"episode_index", "success", "seconds"}``
        (episode_index None without a writer; seconds of twin time)."""
        if self._t is None:
            raise DataError("end: no episode (call begin first)")
        success, seconds = self.success(), round(self._t, 4)
        index = None
        if self.writer is not None:
            index = self.writer.end_episode(success, start_pose=self._start_pose.tolist(), mode=self.mode,
                                            seconds=seconds, wall_s=round(time.perf_counter() - self._wall_start, 2))
        self._t = None
        return {"episode_index": index, "success": success, "seconds": seconds}

    def discard(self) -> None:
        if self.writer is not None:
            self.writer.discard_episode()
        self._t = None

    def close(self) -> None:
        """Hold and stop the stand-in's arm and close the cameras (online); drop an unfinished episode."""
        self.discard()
        if self.bridge is not None:
            self.bridge.hold_and_stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals -----------------------------------------------------------------------------------------------

    def _tick(self, q_target: np.ndarray | None) -> TickReport | None:
        if self.bridge is not None:
            return self.bridge.tick(q_target)
        self.twin.step(q_target)
        return None

    def _home(self) -> None:
        """Bring the twin robot, and the stand-in's arm following it, back to the start (the way a real arm goes
        home between episodes: through the loop and the safety layer, not teleported)."""
        follower = self.bridge.follower
        for _ in range(int(math.ceil(HOME_TIMEOUT_S / self.twin.control_dt))):
            if np.abs(follower.read_state().q - self.q_start).max() < HOME_TOLERANCE_RAD:
                return
            self._tick(self.q_start[None])
        raise DataError(f"the stand-in's arm did not get home within {HOME_TIMEOUT_S} s "
                        f"(at {np.round(follower.read_state().q, 3).tolist()})")

    def _settle(self) -> None:
        """Hold a few ticks after the stand-in's block was placed, so the frames still in flight (camera latency)
        that show it at its old place are consumed before the twin is reset to the start pose."""
        ticks = int(math.ceil(self.cfg.standin.latency_s / self.twin.control_dt)) + 1
        for _ in range(ticks):
            self._tick(self.q_start[None])


def dataset_writer_for(runner: EpisodeRunner, root: str | Path) -> DatasetWriter:
    """A writer at ``root`` (new or resumed) holding the runner's cell and static state."""
    return DatasetWriter(root, fps=round(1.0 / runner.twin.control_dt), cell_yaml=runner.cell_yaml(), static=runner.static())
