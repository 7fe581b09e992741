"""Twin-to-real sync error with and without visual forces, against a stand-in real world that looks different.

    python scripts/bench_sync.py                 # scanned block (shared data), realistic appearance: the headline,
                                                 # + perfect appearance, + procedural block, + one row per knob
    python scripts/bench_sync.py --quick         # 1 draw x 1 push, headline only (a smoke run)
    python scripts/bench_sync.py --sections headline knobs --json-out out/a.json   # some rows (run in parallel)
    python scripts/bench_sync.py --merge out/a.json out/b.json                     # one JSON of the parts

Each run: the stand-in world draws hidden physical parameters (friction, mass, COM, damping) and starts its block
displaced from the twin's (up to 1.5 cm, 6 deg); the twin robot runs a scripted push (real_is_sim_tasks.pusht.scripted.push_plan); the stand-in robot follows
it through the lagging simulated follower; the twin sees only the stand-in's rendered frames (3 cameras,
480x270, noise, 33 ms latency, 2 % dropped frames). Error = twin block vs stand-in block, every tick.

Appearance (real_is_sim.standin.appearance.HiddenAppearance): "realistic" = every knob on (the stand-in's block
Gaussians, table, true calibration, exposure drift, motion blur, arm shadow, robot differ from the twin's model);
"perfect" = the stand-in renders the twin's own model (the setting of the figures before issue #17). Block: the
scanned T-block of the shared object file when the shared data is present, else the procedural one. Forces-off runs
never look at the frames, so one set of them (per block, draw and push) is the control of every appearance row.
Before each forces-on run the cell's cameras are calibrated by the hand-eye routine (a checkerboard on the stand-in
robot's hand, real_is_sim.cameras.hand_eye), as a real cell is calibrated before use; --nominal-calibration keeps
the nominal cameras instead (the setting before 2026-12-07). Each calibration is reported under "hand_eye".
Writes a plot of the headline's error over time to --out. Last stdout line: one JSON object.
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from real_is_sim.bridge import Bridge, BridgeCfg, build_bridge
from real_is_sim.cameras.hand_eye import project
from real_is_sim.loop import LoopCfg
from real_is_sim.paths import shared_data_dir
from real_is_sim.standin.appearance import KNOBS, HiddenAppearance
from real_is_sim.standin.cameras import ring_cameras
from real_is_sim.standin.world import StandInCfg
from real_is_sim.transforms import pose_to_matrix, quat_rotate, yaw_of
from real_is_sim_tasks.pusht.config import load_pusht_cfg
from real_is_sim_tasks.pusht.scripted import ScriptedPusher, push_plan
from real_is_sim.cli import quiet_warp

def push_targets(session: Bridge, lateral: float) -> np.ndarray:
    """A push away from the robot through the block, offset sideways by ``lateral``; then the pusher holds still."""
    twin = session.twin
    pose = twin.object_poses()[0, 0]
    center = pose[:3] + quat_rotate(pose[3:7], twin.geometry.centers.mean(axis=0))
    push = push_plan(ScriptedPusher(twin.task), center, lateral, twin.control_dt, approach_speed=0.3,
                     settle_steps=0, retreat=False)
    return np.concatenate([push, np.repeat(push[-1:], 30, axis=0)])


def parse_override(item: str) -> tuple[str, bool | int | float]:
    """``KEY=VALUE`` -> (key, bool, int or float): counts such as ``iterations=6`` stay integers, true/false are
    switches such as ``occluder_layer=false``."""
    key, value = item.split("=", 1)
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    return key, int(value) if value.lstrip("-").isdigit() else float(value)


def run_cfg(draw: int, visual_forces: bool, appearance: HiddenAppearance | None = None, recover_lost: bool = True,
            overrides: dict | None = None, hand_eye: bool = False) -> BridgeCfg:
    """The bridge of one run: hidden parameters and the stand-in block's start offset drawn from ``draw``;
    ``appearance`` None: perfect (the stand-in renders the twin's model); ``overrides``: {"sensor" | "actuator" |
    "loop": {field: value}} on the defaults; ``hand_eye``: the twin's cameras calibrated by the hand-eye routine
    first (else it keeps the nominal calibration)."""
    rng = np.random.default_rng(1000 + draw)
    offset = [*rng.uniform(-0.015, 0.015, 2), np.radians(rng.uniform(-6, 6))]
    base, overrides = BridgeCfg(), overrides or {}
    sensor = dataclasses.replace(base.sensor, **overrides.get("sensor", {}))
    actuator = dataclasses.replace(base.actuator, **overrides.get("actuator", {}))
    loop = dataclasses.replace(LoopCfg(visual_forces=visual_forces), **overrides.get("loop", {}))
    standin = StandInCfg(seed=draw, appearance=appearance or HiddenAppearance())
    cameras = dataclasses.replace(base.cameras, hand_eye=hand_eye)
    return dataclasses.replace(base, loop=loop, initial_offset=offset, sensor=sensor, actuator=actuator,
                               standin=standin, recover_lost=recover_lost, cameras=cameras)


def run(task, draw: int, lateral: float, visual_forces: bool, appearance: HiddenAppearance | None = None,
        recover_lost: bool = True, overrides: dict | None = None, hand_eye: bool = False,
        calibrations: list | None = None) -> np.ndarray:
    """Per-tick (position error m, yaw error rad) of one scripted push; with ``hand_eye``, the calibration's report
    is appended to ``calibrations``."""
    session = build_bridge(run_cfg(draw, visual_forces, appearance, recover_lost, overrides, hand_eye), task)
    if session.hand_eye is not None and calibrations is not None:
        calibrations.append({"draw": draw, "lateral": lateral, "appearance": "perfect" if appearance is None else
                             ",".join(appearance.knobs_on()), **session.hand_eye.summary(), **calibration_check(session)})
    errors, lost_ticks, decisions = [], 0, []
    for q in push_targets(session, lateral):
        report = session.tick(q[None])
        errors.append(pose_error(session.twin.object_poses()[0, 0], session.standin.object_poses()[0]))
        if report.reading is not None and report.reading.lost.any():
            lost_ticks += 1
        decision = getattr(session.loop, "last_recovery", None)
        if decision is not None and (not decisions or decisions[-1]["tick"] != decision["tick"]):
            decisions.append({**decision, "candidate": getattr(session.loop.relocalize, "last", None)})
    if visual_forces:  # how often the block was flagged lost, and what became of each re-localisation
        print(f"  draw {draw} lateral {lateral}: flagged lost {lost_ticks} ticks; re-localisations "
              f"{decisions}", flush=True)
    return np.array(errors)


def calibration_check(session: Bridge) -> dict:
    """How far the stand-in's block, at its start, lands in each camera's image from where the true camera sees
    it: with the nominal calibration and with the hand-eye one (mean over the block's Gaussians, px)."""
    world = session.standin
    points = world.cloud.means.numpy().astype(np.float64)
    X_WO = pose_to_matrix(world.object_poses()[0])
    nominal = {c.serial: c for c in ring_cameras(session.twin.object_poses()[0, 0, :3], len(session.cameras),
                                                 width=session.cameras[0].width, height=session.cameras[0].height)}
    out = {"block_px_nominal": {}, "block_px_calibrated": {}}
    for camera in session.cameras:
        true = world.true_cameras[camera.serial]
        seen, _ = project(true.K, true.X_WC, X_WO, points)
        for key, belief in (("block_px_nominal", nominal[camera.serial]), ("block_px_calibrated", camera)):
            uv, _ = project(belief.K, belief.X_WC, X_WO, points)
            out[key][camera.serial] = round(float(np.linalg.norm(uv - seen, axis=1).mean()), 3)
    return out


def pose_error(twin: np.ndarray, real: np.ndarray) -> tuple[float, float]:
    """Block pose error (7,) vs (7,): position in the table plane (m), |yaw difference| (rad)."""
    yaw = np.angle(np.exp(1j * (yaw_of(twin[3:7]) - yaw_of(real[3:7]))))
    return float(np.linalg.norm(twin[:2] - real[:2])), abs(float(yaw))


def summary(errors: list[np.ndarray]) -> dict:
    e = np.concatenate(errors)
    return {
        "pos_mm_median": round(float(np.median(e[:, 0]) * 1e3), 2),
        "pos_mm_p95": round(float(np.percentile(e[:, 0], 95) * 1e3), 2),
        "yaw_deg_median": round(float(np.degrees(np.median(e[:, 1]))), 2),
        "yaw_deg_p95": round(float(np.degrees(np.percentile(e[:, 1], 95))), 2),
    }


def plot(on: list[np.ndarray], off: list[np.ndarray], dt: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for runs, label, color in ((on, "visual forces on", "tab:green"), (off, "off", "tab:red")):
        n = min(len(r) for r in runs)
        stack = np.stack([r[:n] for r in runs])
        t = np.arange(n) * dt
        for k, (ax, scale, unit) in enumerate(zip(axes, (1e3, np.degrees(1.0)), ("position error (mm)", "yaw error (deg)"))):
            ax.plot(t, np.median(stack[:, :, k], axis=0) * scale, color=color, label=label)
            ax.fill_between(t, stack[:, :, k].min(0) * scale, stack[:, :, k].max(0) * scale, color=color, alpha=0.15)
            ax.set_xlabel("time (s)")
            ax.set_ylabel(unit)
    axes[0].legend()
    fig.suptitle("twin vs stand-in real world: median and range over runs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


SECTIONS = ("headline", "perfect", "procedural", "knobs")
TARGETS = {"pos_mm_median": 2.0, "yaw_deg_median": 1.0, "pos_mm_p95": 6.0}


def compare(on: dict, off: dict) -> dict:
    return {"on": on, "off": off,
            "off_over_on_pos_median": round(off["pos_mm_median"] / max(on["pos_mm_median"], 1e-9), 2),
            "off_over_on_yaw_median": round(off["yaw_deg_median"] / max(on["yaw_deg_median"], 1e-9), 2)}


class Runs:
    """The runs of one benchmark, forces-off runs shared by every appearance row of a block (they read no frame)."""

    def __init__(self, tasks: dict, draws: list[int], laterals: list[float], control: bool = True, save: Path | None = None):
        self.tasks, self.draws, self.laterals, self.control, self.save = tasks, draws, laterals, control, save
        self._off: dict = {}
        self.errors: dict = {}
        self.recover_lost = True
        self.overrides: dict = {}  # --sensor-set, --actuator-set, --loop-set: applied to every forces-on run
        self.hand_eye = True  # forces-on runs calibrate the cameras first (--nominal-calibration: not)
        self.calibrations: list = []  # the hand-eye reports of the runs

    def off(self, block: str, draw: int, lateral: float) -> np.ndarray:
        key = (block, draw, lateral)
        if key not in self._off:
            self._off[key] = self._run(f"{block} off", block, draw, lateral, False, None)
        return self._off[key]

    def _run(self, label, block, draw, lateral, forces, appearance):
        begin = time.perf_counter()
        e = run(self.tasks[block], draw, lateral, forces, appearance, self.recover_lost, self.overrides if forces else None,
                hand_eye=self.hand_eye and forces, calibrations=self.calibrations)
        if self.save is not None:
            self.save.mkdir(parents=True, exist_ok=True)
            np.save(self.save / f"{label.replace(' ', '_')}_d{draw}_l{lateral:g}.npy", e)
        print(f"{label} draw {draw} lateral {lateral}: {summary([e])} ({time.perf_counter() - begin:.0f} s)", flush=True)
        return e

    def row(self, label: str, block: str, appearance, draws=None, laterals=None) -> dict:
        """Forces on under ``appearance`` beside the forces-off control, over the draws x pushes."""
        cases = [(d, lat) for d in (self.draws if draws is None else draws) for lat in (self.laterals if laterals is None else laterals)]
        on = [self._run(f"{label} on", block, d, lat, True, appearance) for d, lat in cases]  # the figures first
        meta = {"runs": len(on), "ticks_per_run": int(np.mean([len(r) for r in on]))}
        if not self.control:  # --no-control: the merge takes the forces-off figures of the headline (same draws)
            return {"on": summary(on), **meta}
        off = [self.off(block, d, lat) for d, lat in cases]
        self.errors[label] = (on, off)
        return {**compare(summary(on), summary(off)), **meta}


def merge(paths: list[str]) -> dict:
    """One result of several partial runs (``--sections`` in parallel): their keys, the later file winning."""
    result: dict = {}
    for path in paths:
        part = json.loads(Path(path).read_text())
        for key, value in part.items():
            if key == "by_knob" and key in result:
                result[key].update(value)
            elif key == "hand_eye" and key in result:
                result[key] = result[key] + value
            elif key == "wall_s":
                result[key] = round(result.get(key, 0.0) + value, 1)
            else:
                result[key] = value
    rows = [result.get("perfect_appearance"), *result.get("by_knob", {}).values()]
    for row in rows:  # rows run with --no-control: forces off reads no frame, so the headline's off is their control
        if row is not None and "off" not in row and "off" in result:
            row.update(compare(row["on"], result["off"]), off_from="headline (same block, draws and pushes)")
    if "on" in result:
        result["targets_met"] = targets_met(result)
    return result


def targets_met(result: dict) -> dict:
    on, off = result["on"], result["off"]
    met = {f"on_{k}<={v}": on[k] <= v for k, v in TARGETS.items()}
    met["off_over_on_pos_median>=3"] = result["off_over_on_pos_median"] >= 3
    return met


def main() -> None:
    quiet_warp()
    torch.set_num_threads(1)  # small tensors: on a loaded 2-core machine torch's thread pool costs more than it saves
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, nargs="+", default=[1, 3],
                        help="hidden-parameter draws (seeds); 1 and 3 start the stand-in's block 15 and 12 mm away (draw 0: "
                             "3 mm, too close for the forces-off control to show a gap)")
    parser.add_argument("--laterals", type=float, nargs="+", default=[0.0, 0.02], help="push offsets from the stem axis (m)")
    parser.add_argument("--block", choices=("auto", "scanned", "procedural"), default="auto",
                        help="the headline's block; auto: scanned when the shared data is present")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="headline: realistic appearance; perfect: the old setting; procedural: realistic, procedural "
                             "block; knobs: one row per appearance knob on alone (first draw, first push)")
    parser.add_argument("--knobs", nargs="+", choices=KNOBS, default=list(KNOBS), help="the by_knob rows to run")
    parser.add_argument("--without", nargs="+", choices=KNOBS, default=[],
                        help="knobs left off in the realistic rows (headline, procedural): what the rest costs")
    parser.add_argument("--quick", action="store_true", help="1 draw, 1 push, headline only")
    parser.add_argument("--out", default="docs/img", help="where the plot goes")
    parser.add_argument("--json-out", default=None, help="also write the JSON here")
    parser.add_argument("--merge", nargs="+", default=None, help="print one JSON of these partial results and exit")
    parser.add_argument("--no-control", action="store_true",
                        help="rows other than the headline without their own forces-off runs (--merge fills them in)")
    parser.add_argument("--no-recover", action="store_true",
                        help="the loop never re-localises a block the sensor flags lost (BridgeCfg.recover_lost=false)")
    parser.add_argument("--sensor-set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="VisualForceSensorCfg overrides for every forces-on run, e.g. max_force=10.0 or iterations=6")
    parser.add_argument("--actuator-set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="VisualForceActuatorCfg overrides for every forces-on run, e.g. linear_damping=10.0")
    parser.add_argument("--loop-set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="LoopCfg overrides for every forces-on run, e.g. exposure_lead_ticks=1")
    parser.add_argument("--nominal-calibration", action="store_true",
                        help="the twin keeps the nominal camera calibration (cameras.hand_eye=false): no hand-eye "
                             "calibration before each forces-on run (the setting before 2026-12-07)")
    parser.add_argument("--save-errors", default=None, help="a folder for each run's per-tick errors (.npy)")
    args = parser.parse_args()
    if args.merge:
        result = merge(args.merge)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=1))
        print(json.dumps(result))
        return
    if min(args.draws) < 0:
        parser.error("--draws are seeds >= 0")
    draws, laterals = (args.draws[:1], args.laterals[:1]) if args.quick else (args.draws, args.laterals)
    sections = ["headline"] if args.quick else args.sections
    scanned_ok = (shared_data_dir() / "objects" / "tblock.json").is_file()
    if args.block == "scanned" and not scanned_ok:
        parser.error(f"--block scanned needs the shared object file at {shared_data_dir() / 'objects' / 'tblock.json'}")
    block = "scanned" if (args.block == "scanned" or (args.block == "auto" and scanned_ok)) else "procedural"
    tasks = {"procedural": load_pusht_cfg()}
    if block == "scanned":
        tasks["scanned"] = load_pusht_cfg(Path(__file__).resolve().parents[1] / "tasks" / "pusht" / "pusht_real.yaml")
    realistic_knobs = [knob for knob in KNOBS if knob not in args.without]
    realistic = HiddenAppearance.realistic(realistic_knobs)
    runs = Runs(tasks, draws, laterals, control=not args.no_control, save=Path(args.save_errors) if args.save_errors else None)
    runs.recover_lost = not args.no_recover
    runs.hand_eye = not args.nominal_calibration
    runs.overrides = {section: dict(parse_override(item) for item in items) for section, items in
                      (("sensor", args.sensor_set), ("actuator", args.actuator_set), ("loop", args.loop_set)) if items}
    begin = time.perf_counter()
    result: dict = {"block": block, "draws": draws, "laterals": laterals, "recover_lost": runs.recover_lost,
                    "calibration": "hand-eye" if runs.hand_eye else "nominal"}
    for section, values in runs.overrides.items():
        result[f"{section}_overrides"] = values
    if "headline" in sections:
        runs.control = True
        headline = runs.row("headline", block, realistic)
        runs.control = not args.no_control
        result.update(headline, setting=f"realistic appearance ({', '.join(realistic_knobs)}), {block} block")
        result["targets_met"] = targets_met(result)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        plot(*runs.errors["headline"], 1.0 / tasks[block].control_hz, out / f"sync_error_{block}_realistic.png")
    if "perfect" in sections:
        result["perfect_appearance"] = runs.row("perfect", block, None)
    if "procedural" in sections:
        result["procedural"] = runs.row("procedural", "procedural", realistic)
    if "knobs" in sections:
        result["by_knob"] = {knob: runs.row(f"knob {knob}", block, HiddenAppearance.realistic([knob]), draws=draws[:1],
                                            laterals=laterals[:1]) for knob in args.knobs}
    if runs.calibrations:
        result["hand_eye"] = runs.calibrations
    result["wall_s"] = round(time.perf_counter() - begin, 1)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
