"""What an evaluation runs: protocols, the episode list (checkpoints x start poses x trials), seeds, the units of
work (one batch of worlds offline, one episode online), the per-episode JSONL file and the summaries.

An episode is named by its key ``mode|checkpoint|start|t<trial>|s<seed>|<seconds>s``: a rerun with the same
settings skips the keys already in the JSONL file (resumable); changed settings make new keys. Its seed is drawn
from (spec seed, start-pose index, trial) alone, never from how episodes are batched, so the policy's noise (and, online,
the stand-in's hidden physics) is the same whichever worker or batch runs it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from real_is_sim.errors import ConfigError
from real_is_sim.evaluation.controls import CONTROLS
from real_is_sim.evaluation.stats import rate_summary

MODES = ("offline", "online")
# online: the stand-in renders the twin's own model ("twin", a best case) or every HiddenAppearance knob on
# ("realistic"); "realistic_calibrated": the same stand-in, the cell's cameras hand-eye calibrated before each episode
APPEARANCES = ("twin", "realistic", "realistic_calibrated")
RULES = ("ground_truth", "coverage", "progress")
RULE_TEXT = {
    "ground_truth": "the block (ground truth: the twin offline, the stand-in online) within the goal tolerances "
                    "(position and yaw) at some tick",
    "coverage": "gym-pusht's rule: the block's T footprint covers >= 0.95 of the goal's footprint at some 10 Hz check",
    "progress": "the paper's offline rule: the policy's own progress output > 0.9 at some tick",
}
PROGRESS_DONE = 0.9


# Reduced stand-in cameras for online runs on this CPU (as scripts/bench_expert.py): the preset's 3 at 480x270 ran
# the loop at 0.7-2 ticks/s here, 2 at 240x135 at about 3-4.
REDUCED_CAMERAS = ("cameras.num_cameras=2", "cameras.width=240", "cameras.height=135")


@dataclass(frozen=True)
class Protocol:
    name: str
    trials: int  # per start pose
    seconds: float  # time limit per episode (twin time)
    min_checkpoints: int  # an agreement sweep under this protocol needs at least this many
    random_poses: int = 0  # random start poses after the file's
    poses: tuple | None = None  # indices into the start-pose list (None: all)
    overrides: tuple = ()  # online: BridgeCfg overrides the protocol sets


PROTOCOLS = {
    # quick: offline the 20 fixed start poses x 1 trial (about 1 minute per checkpoint on the shared 2-core CPU);
    # online 4 of them (spread over the grid), 20 s, reduced cameras: about 25 minutes per checkpoint (docs/evaluation.md)
    "quick": {"offline": Protocol("quick", trials=1, seconds=30.0, min_checkpoints=1),
              "online": Protocol("quick", trials=1, seconds=20.0, min_checkpoints=1, poses=(0, 6, 13, 19),
                                 overrides=REDUCED_CAMERAS)},
    # the paper's: 20 start poses x 3 trials, >= 6 checkpoints for the agreement sweep; online with the preset's cameras
    "paper": {"offline": Protocol("paper", trials=3, seconds=30.0, min_checkpoints=6),
              "online": Protocol("paper", trials=3, seconds=30.0, min_checkpoints=6)},
}


@dataclass
class EvalSpec:
    checkpoints: list[str]
    mode: str = "offline"
    protocol: str | None = "quick"  # None: custom settings (the result says so)
    start_poses: str = ""  # a start-pose file; "": tasks/pusht/start_poses.json (the 20 fixed ones)
    random_poses: int = 0  # random_start_poses(cell, n, random_seed) after the file's poses
    random_seed: int = 0
    trials: int = 1
    seconds: float = 30.0
    seed: int = 0
    poses: list[int] | None = None  # indices into the start-pose list (None: all of them)
    worlds: int = 20  # offline: worlds per batch (one Twin)
    execute: int | None = None  # waypoints of each chunk run before the next policy call (None: all; receding horizon)
    overrides: list[str] = field(default_factory=list)  # online: BridgeCfg overrides (cameras, stand-in)
    control: str | None = None  # offline: a control instead of the policy (evaluation.controls; the checkpoint gives the cell and dataset)
    noise_scale: float | None = None  # the flow's start noise x this (None: the checkpoint's PolicyCfg.noise_scale)
    tempo: float | None = None  # chunks run this many times faster than demonstrated (None: the checkpoint's PolicyCfg.tempo)
    appearance: str = "twin"  # online: how the stand-in looks (APPEARANCES); "realistic" is the honest setting

    def __post_init__(self):
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not self.checkpoints:
            raise ConfigError("evaluation needs at least one checkpoint")
        if self.trials < 1 or self.worlds < 1 or self.seconds <= 0 or self.random_poses < 0:
            raise ConfigError(f"trials, worlds >= 1, seconds > 0, random poses >= 0, got {self.trials}, "
                              f"{self.worlds}, {self.seconds}, {self.random_poses}")
        if self.control is not None and (self.control not in CONTROLS or self.mode != "offline"):
            raise ConfigError(f"control must be one of {CONTROLS} and runs offline only, got {self.control!r} ({self.mode})")
        if self.noise_scale is not None and not self.noise_scale >= 0:
            raise ConfigError(f"noise_scale must be >= 0, got {self.noise_scale}")
        if self.tempo is not None and not self.tempo > 0:
            raise ConfigError(f"tempo must be > 0, got {self.tempo}")
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            raise ConfigError(f"protocol must be one of {tuple(PROTOCOLS)}, got {self.protocol!r}")
        if self.appearance not in APPEARANCES:
            raise ConfigError(f"appearance must be one of {APPEARANCES}, got {self.appearance!r}")
        if self.appearance != "twin" and self.mode != "online":
            raise ConfigError(f"appearance {self.appearance!r} is the stand-in's: online runs only ({self.mode})")

    @classmethod
    def for_protocol(cls, name: str, checkpoints: list[str], mode: str = "offline", overrides=(), **kwargs) -> "EvalSpec":
        """The protocol's settings for ``mode``; ``overrides`` come after the protocol's own."""
        if name not in PROTOCOLS:
            raise ConfigError(f"protocol must be one of {tuple(PROTOCOLS)}, got {name!r}")
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
        p = PROTOCOLS[name][mode]
        return cls(checkpoints=list(checkpoints), mode=mode, protocol=name, trials=p.trials, seconds=p.seconds,
                   random_poses=p.random_poses, poses=None if p.poses is None else list(p.poses),
                   overrides=[*p.overrides, *overrides], **kwargs)

    def key(self, e: Episode) -> str:
        return e.key(self.mode, self.seconds, self.execute, self.control, self.noise_scale, self.tempo, self.appearance)

    def protocol_label(self) -> str:
        """The protocol name when the settings are the protocol's, else 'custom'."""
        p = PROTOCOLS.get(self.protocol or "", {}).get(self.mode)
        if p is None:
            return "custom"
        poses = None if self.poses is None else tuple(self.poses)
        if (self.trials, self.seconds, self.random_poses, self.start_poses, poses) != (p.trials, p.seconds, p.random_poses, "", p.poses):
            return "custom"
        return p.name


@dataclass(frozen=True)
class Episode:
    checkpoint: str
    start: str  # start-pose name, e.g. fixed_03
    pose_index: int
    trial: int
    seed: int  # the episode's own seed (policy noise; online: the stand-in's hidden physics)
    start_pose: tuple  # (7,)

    def key(self, mode: str, seconds: float, execute: int | None = None, control: str | None = None,
            noise_scale: float | None = None, tempo: float | None = None, appearance: str = "twin") -> str:
        tail = ("" if execute is None else f"|x{execute}") + ("" if control is None else f"|c{control}")
        tail += ("" if noise_scale is None else f"|n{noise_scale:g}") + ("" if tempo is None else f"|T{tempo:g}")
        tail += "" if appearance == "twin" else f"|A{appearance}"
        return f"{mode}|{self.checkpoint}|{self.start}|t{self.trial}|s{self.seed}|{seconds:g}s{tail}"


@dataclass
class Unit:
    """One piece of work: offline a batch of episodes of one checkpoint in one Twin, online one episode."""
    mode: str
    checkpoint: str
    episodes: list[Episode]
    seconds: float
    overrides: list[str] = field(default_factory=list)
    execute: int | None = None
    control: str | None = None
    noise_scale: float | None = None
    tempo: float | None = None
    appearance: str = "twin"

    def key(self, e: Episode) -> str:
        return e.key(self.mode, self.seconds, self.execute, self.control, self.noise_scale, self.tempo, self.appearance)


def appearance_overrides(appearance: str) -> list[str]:
    """BridgeCfg overrides that make the stand-in look ``appearance``: "twin" none (it renders the twin's own model,
    a best case for the sensor); "realistic" every ``HiddenAppearance`` knob on; "realistic_calibrated" that, and
    the cameras hand-eye calibrated before the episode (``cameras.hand_eye``), as the sync benchmark's headline."""
    from real_is_sim.standin.appearance import HiddenAppearance

    if appearance == "twin":
        return []
    default = asdict(HiddenAppearance())
    knobs = [f"standin.appearance.{k}={v}" for k, v in asdict(HiddenAppearance.realistic()).items() if v != default[k]]
    return knobs + (["cameras.hand_eye=true"] if appearance == "realistic_calibrated" else [])


def episode_seed(seed: int, pose_index: int, trial: int) -> int:
    """A 31-bit seed from (spec seed, start pose, trial) alone."""
    return int(np.random.SeedSequence([seed, pose_index, trial]).generate_state(1)[0] & 0x7FFFFFFF)


def start_poses(spec: EvalSpec, cell) -> tuple[list[str], np.ndarray]:
    """(names, poses [K, 7]): the file's poses (``fixed_NN`` for the default file, ``<stem>_NN`` otherwise), then the
    random ones (``random_NN``)."""
    from real_is_sim_tasks.pusht.start_poses import FIXED_START_POSES, load_start_poses, random_start_poses

    path = Path(spec.start_poses) if spec.start_poses else FIXED_START_POSES
    poses = load_start_poses(path)
    prefix = "fixed" if path.resolve() == FIXED_START_POSES.resolve() else path.stem
    names = [f"{prefix}_{i:02d}" for i in range(len(poses))]
    if spec.random_poses:
        poses = np.concatenate([poses, random_start_poses(cell, spec.random_poses, spec.random_seed)])
        names += [f"random_{i:02d}" for i in range(spec.random_poses)]
    return names, poses


def episodes(spec: EvalSpec, cell) -> list[Episode]:
    """Every episode of the spec: checkpoint-major, then start pose, then trial."""
    names, poses = start_poses(spec, cell)
    chosen = range(len(names)) if spec.poses is None else spec.poses
    bad = [i for i in chosen if not 0 <= i < len(names)]
    if bad:
        raise ConfigError(f"start pose indices {bad} outside the {len(names)} start poses")
    return [Episode(str(ckpt), names[i], i, t, episode_seed(spec.seed, i, t), tuple(float(v) for v in poses[i]))
            for ckpt in spec.checkpoints for t in range(spec.trials) for i in chosen]


def plan_units(spec: EvalSpec, todo: list[Episode]) -> list[Unit]:
    """Offline: each checkpoint's episodes in batches of ``spec.worlds``; online: one unit per episode."""
    units = []
    for ckpt in dict.fromkeys(e.checkpoint for e in todo):
        mine = [e for e in todo if e.checkpoint == ckpt]
        size = spec.worlds if spec.mode == "offline" else 1
        overrides = [*appearance_overrides(spec.appearance), *spec.overrides]  # the user's overrides win
        units += [Unit(spec.mode, ckpt, mine[k:k + size], spec.seconds, overrides, spec.execute, spec.control,
                       spec.noise_scale, spec.tempo, spec.appearance)
                  for k in range(0, len(mine), size)]
    return units


# -- per-episode file ----------------------------------------------------------------------------------------------


def read_rows(path: Path) -> dict[str, dict]:
    """Finished episodes by key (a line cut by a killed run is skipped: that episode runs again)."""
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and "key" in row:
                rows[row["key"]] = row
    return rows


def append_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


# -- summaries ------------------------------------------------------------------------------------------------------


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(float(np.median(values)), 3) if values else None


def summarize_checkpoint(rows: list[dict], meta: dict) -> dict:
    """Success by each rule (rate, Wilson 95 %, median time to success), per-start-pose outcomes, final errors;
    online also tracking failures."""
    n = len(rows)
    out = {**meta, "episodes": n}
    for rule in RULES:
        wins = [r for r in rows if r[rule]]
        out[rule] = {**rate_summary(len(wins), n), "median_time_s": _median(r[f"{rule}_time_s"] for r in wins)}
    out["median_final_distance_m"] = _median(r["final_distance_m"] for r in rows)
    out["median_final_yaw_error_rad"] = _median(r["final_yaw_error_rad"] for r in rows)
    out["median_max_coverage"] = _median(r["max_coverage"] for r in rows)
    per_start = {}
    for r in rows:
        entry = per_start.setdefault(r["start"], {"start": r["start"], "trials": 0, **{rule: 0 for rule in RULES}})
        entry["trials"] += 1
        for rule in RULES:
            entry[rule] += int(r[rule])
    out["per_start_pose"] = list(per_start.values())
    if rows and "tracking_failures" in rows[0]:
        with_failure = sum(r["tracking_failures"] > 0 for r in rows)
        out["tracking"] = {"episodes_with_failure": rate_summary(with_failure, n),
                           "failures": sum(r["tracking_failures"] for r in rows),
                           "recovered": sum(r["tracking_recovered"] for r in rows),
                           "median_max_sync_error_m": _median(r["max_sync_error_m"] for r in rows)}
        if "follower_refusals" in rows[0]:  # rows since the twin's targets were guarded (robot.safety.WorkspaceGuard)
            out["tracking"]["episodes_with_follower_refusals"] = sum(r["follower_refusals"] > 0 for r in rows)
            out["tracking"]["episodes_with_targets_moved"] = sum((r["targets_moved"] or 0) > 0 for r in rows)
    return out


def result_document(spec: EvalSpec, checkpoints: list[dict], wall_s: float) -> dict:
    """The summary file: protocol, settings, rules, one summary per checkpoint."""
    label = spec.protocol_label()
    return {"protocol": label, "mode": spec.mode, "settings": {k: v for k, v in asdict(spec).items() if k != "checkpoints"},
            "paper_protocol_sweep": label == "paper" and len(checkpoints) >= PROTOCOLS["paper"][spec.mode].min_checkpoints,
            "rules": RULE_TEXT, "checkpoints": checkpoints, "wall_s": round(wall_s, 1)}


def headline(result: dict) -> dict:
    """The last stdout line: the result without per-start-pose lists."""
    return {**{k: v for k, v in result.items() if k not in ("checkpoints", "rules", "settings")},
            "checkpoints": [{k: v for k, v in c.items() if k != "per_start_pose"} for c in result["checkpoints"]]}
