"""The bridge's configuration tree: every setting of a deploy session in one dataclass, loaded from a preset.

    cfg = load_bridge_cfg("standin", overrides=["follower.kind=franky", "follower.franky.address=127.0.0.1"])

A preset is a YAML file in ``presets/``; a user file (``path=...``) is merged over the preset, then the
dotlist overrides. A typo, a wrong type or a bad value raises one :class:`ConfigError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

from omegaconf import OmegaConf

from real_is_sim.cameras.hand_eye import HandEyeCfg
from real_is_sim.config import load_config
from real_is_sim.correction.actuator import VisualForceActuatorCfg
from real_is_sim.correction.sensor import VisualForceSensorCfg
from real_is_sim.errors import ConfigError
from real_is_sim.loop import LoopCfg
from real_is_sim.robot.follower_factory import FollowerCfg
from real_is_sim.robot.simulated_follower import SimulatedFollowerCfg
from real_is_sim.standin.world import StandInCfg
from real_is_sim.task import DEFAULT_TASK
from real_is_sim.twin import TwinCfg

PRESET_DIR = Path(__file__).parent / "presets"
PRESETS = tuple(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
CAMERA_SOURCES = ("standin", "replay", "realsense")
POLICY_KINDS = ("scripted_push", "hold")


@dataclass
class CamerasCfg:
    source: str = "standin"  # "standin" (rendered by the stand-in world) | "replay" (a recording) | "realsense"
    # standin: cameras on an arc around the block, like the real three
    num_cameras: int = 3
    width: int = 480
    height: int = 270
    # replay: a recording directory in the replay layout (cameras.json + videos/)
    recording: str = ""
    serials: list[str] = field(default_factory=list)  # replay: the recording's cameras the loop sees (empty: all)
    # replay of a deploy session: its frames.csv, so each frame reaches the loop when it did then (not at exposure)
    arrivals: str = ""
    # the empty cell per camera: a directory of <serial>.npy (H, W, 3 float) as a session records them; empty: the
    # table model (stand-in, realsense) or the clip's per-pixel median (replay)
    backgrounds: str = ""
    background_stride: int = 4  # replay: the median background uses every k-th frame of the whole clip
    # realsense: the cell's calibration, cameras.json in the replay layout (serial -> X_WC); the serials are its keys
    calibration: str = ""
    fps: int = 90
    hardware_sync: bool = True
    # stand-in: calibrate the cameras first with the hand-eye routine (a checkerboard on the robot's hand, settings in
    # BridgeCfg.hand_eye); the twin then keeps the calibrated cameras instead of the nominal ones
    hand_eye: bool = False

    def __post_init__(self):
        if self.source not in CAMERA_SOURCES:
            raise ConfigError(f"cameras.source must be one of {CAMERA_SOURCES}, got {self.source!r}")
        if self.num_cameras < 1 or self.width < 2 or self.height < 2:
            raise ConfigError("cameras.num_cameras must be >= 1 and width, height >= 2")
        if self.background_stride < 1:
            raise ConfigError(f"cameras.background_stride must be >= 1, got {self.background_stride}")
        if self.source == "replay" and not self.recording:
            raise ConfigError("cameras.recording: the replay source needs a recording directory")
        if self.source == "realsense" and not self.calibration:
            raise ConfigError("cameras.calibration: the realsense source needs the cell's cameras.json")
        if self.hand_eye and self.source != "standin":
            raise ConfigError(f"cameras.hand_eye: the hand-eye routine runs in the stand-in only (source {self.source!r}); "
                              "calibrate a real cell into cameras.calibration")


@dataclass
class PolicyCfg:
    # "scripted_push": one push through the block's centre, offset sideways by lateral_offset (until the
    # flow-matching policy exists); "hold": the twin robot stays at its start.
    kind: str = "scripted_push"
    lateral_offset: float = 0.0  # m
    push_distance: float = 0.2  # m

    def __post_init__(self):
        if self.kind not in POLICY_KINDS:
            raise ConfigError(f"policy.kind must be one of {POLICY_KINDS}, got {self.kind!r}")


@dataclass
class RecordingCfg:
    out: str = "out/deploy"  # every session is recorded here (a new directory; never overwritten)
    cameras: bool = True  # camera streams in the replay layout (out/cameras/)
    # exact pixels (~10x larger files): a replay of the session then reproduces its twin exactly; H.264 at crf 18
    # moves the replayed twin by up to ~1 mm (docs/bridge.md)
    lossless: bool = False
    rerun: bool = False  # a rerun recording (out/session.rrd): twin, frames with the twin overlaid, confidence
    rerun_image_every: int = 6  # log camera images every k-th tick

    def __post_init__(self):
        if self.rerun_image_every < 1:
            raise ConfigError(f"recording.rerun_image_every must be >= 1, got {self.rerun_image_every}")


@dataclass
class BridgeCfg:
    # The task: a module with the task interface (real_is_sim.task.Task), and its YAML: a file name beside that
    # module (e.g. "pusht_real.yaml") or a path.
    task_module: str = DEFAULT_TASK
    task: str = "pusht.yaml"
    duration_s: float = 10.0
    twin: TwinCfg = field(default_factory=TwinCfg)
    cameras: CamerasCfg = field(default_factory=CamerasCfg)
    # kp 15 (not Embodied Gaussians' 4): with the L2 loss, the actuator's damping and the sensor starting one tick
    # after the exposure (LoopCfg.exposure_lead_ticks) it keeps up with a pushed block without ringing; kp 10 lags,
    # kp 20 turns the yaw median up (docs/fidelity.md, docs/correction.md). Per Gaussian of a 108-Gaussian body
    # (the procedural block): a body modelled by more Gaussians gets weaker springs each, the same total.
    # lr_means 0.009 (6x Embodied Gaussians'): the per-tick reach that keeps up with a pushed block (the scanned
    # block's realistic push error halves; the best cases rest a little less still: docs/fidelity.md).
    sensor: VisualForceSensorCfg = field(default_factory=lambda: VisualForceSensorCfg(kp=15.0, kp_reference_count=108,
                                                                                      lr_means=0.009))
    actuator: VisualForceActuatorCfg = field(default_factory=VisualForceActuatorCfg)
    loop: LoopCfg = field(default_factory=LoopCfg)
    # The simulated follower lags like the real arm (20 ms latency, 30 ms time constant): the stand-in's robot.
    follower: FollowerCfg = field(default_factory=lambda: FollowerCfg(simulated=SimulatedFollowerCfg(latency_s=0.02, tau_s=0.03)))
    standin: StandInCfg = field(default_factory=StandInCfg)
    hand_eye: HandEyeCfg = field(default_factory=HandEyeCfg)  # used when cameras.hand_eye
    policy: PolicyCfg = field(default_factory=PolicyCfg)
    recording: RecordingCfg = field(default_factory=RecordingCfg)
    planar_wrench: bool = True  # the block slides on the table: keep the visual force in the table plane
    render_robot: bool = True  # render the robot's Gaussians as occluders in the sensor's views
    recover_lost: bool = True  # re-localise a lost block from the frames
    # stand-in only: reality's block starts displaced from the twin's by (dx, dy, dyaw), an error to close
    initial_offset: List[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def __post_init__(self):
        if not self.duration_s > 0:
            raise ConfigError(f"duration_s must be positive, got {self.duration_s}")
        if len(self.initial_offset) != 3:
            raise ConfigError(f"initial_offset must be [dx, dy, dyaw], got {self.initial_offset}")
        if self.cameras.source == "standin" and self.loop.follow_real and self.follower.kind == "simulated":
            # The stand-in's robot is the follower: it must be steppable with the stand-in's clock.
            if self.follower.simulated.realtime:
                raise ConfigError("follower.simulated.realtime must be false with the stand-in (it steps the follower)")


def session_replay_overrides(session_dir: str | Path) -> list[str]:
    """Overrides that replay a recorded deploy session through the loop: its camera streams, each frame at the tick it
    reached the loop, the sensor's backgrounds, and its arm where it really was (a recorded follower). Merged over
    the session's own config.yaml they rebuild its loop on the recording."""
    d = Path(session_dir)
    if not (d / "config.yaml").is_file():
        raise ConfigError(f"no recorded deploy session in {d} (config.yaml missing)")
    return [f"cameras.source=replay", f"cameras.recording={d / 'cameras'}", f"cameras.arrivals={d / 'frames.csv'}",
            f"cameras.backgrounds={d / 'backgrounds'}", "follower.kind=recorded", f"follower.recorded.path={d / 'follower.csv'}",
            "loop.realtime=false", "recording.rerun=false"]


def preset_path(name: str) -> Path:
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown preset {name!r}: choose one of {PRESETS}")
    return path


def load_bridge_cfg(preset: str = "standin", path: str | Path | None = None, overrides: Sequence[str] = ()) -> BridgeCfg:
    """The preset, then the YAML file ``path`` (optional), then ``key=value`` overrides."""
    layers = [OmegaConf.load(preset_path(preset))]
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            layers.append(OmegaConf.load(path))
        except Exception as exc:  # yaml errors
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    merged = OmegaConf.to_container(OmegaConf.merge(*layers))
    return load_config(BridgeCfg, merged, overrides)
