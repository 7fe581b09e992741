"""Rate of the online loop (frames -> sensor -> actuator -> physics -> follower) on this machine.

    python scripts/bench_loop.py            # 3 cameras at 480x270, EG settings, + a sweep for what holds 60 Hz
    python scripts/bench_loop.py --no-sweep --sync-draws 1    # quicker: main setting, 2 pushes serial vs pipelined

Frames come from a stand-in real world (its own rendering and physics are reality's cost, not the loop's, and
are not timed). Reports the loop's ticks per second, the per-stage profile, and, over a sweep of camera count and
Adam iterations, the largest setting that holds 60 Hz.

Serial vs pipelined (``serial``, ``pipelined``, ``pipelined_thread``): bench_sync's scripted pushes, 3 cameras at
480x270. The serial loop runs each push against the live stand-in, and its frames, arm joints and ground truth are
kept per tick; the pipelined loop (the sensor in its worker process, or in a thread) then runs the same push on
exactly those, paced at 60 Hz of wall clock. The twin's robot is kinematic, so it moves the same in both runs and reality is the same run. ``thread_scaling``:
how much of two cores the sensor gets beside itself and beside the physics step (the GIL). Last stdout line: one
JSON object.
"""

import argparse
import dataclasses
import json
import os
import threading
import time
from types import SimpleNamespace

import numpy as np
import torch

from bench_sync import parse_override, pose_error, push_targets, run_cfg
from real_is_sim.bridge import BridgeCfg, build_bridge
from real_is_sim.bridge.config import CamerasCfg
from real_is_sim.loop import HELD_READING_RULES, LoopCfg
from real_is_sim.cameras.base import CameraSource
from real_is_sim.correction.sensor import VisualForceSensor
from real_is_sim_tasks.pusht.config import load_pusht_cfg
from real_is_sim.cli import quiet_warp


def measure(task, cameras: int, iterations: int, ticks: int, render_threads: int, render_downscale: int = 1, width=480,
            height=270) -> dict:
    base = BridgeCfg()
    sensor = dataclasses.replace(base.sensor, iterations=iterations, render_threads=render_threads,
                                 render_downscale=render_downscale)
    cfg = dataclasses.replace(base, cameras=CamerasCfg(num_cameras=cameras, width=width, height=height),
                              initial_offset=[0.01, 0.0, 0.05],
                              sensor=sensor)
    session = build_bridge(cfg, task)
    for _ in range(5):  # warm up (kernel loads, first allocations)
        session.tick()
    loop_s, stages = [], {}
    for _ in range(ticks):
        begin = time.perf_counter()
        report = session.loop.tick()
        loop_s.append(time.perf_counter() - begin)
        for stage, seconds in report.seconds.items():
            stages.setdefault(stage, []).append(seconds)
        session.standin.advance()
    median = float(np.median(loop_s))
    return {
        "cameras": cameras, "iterations": iterations, "render_threads": render_threads,
        "render_downscale": render_downscale, "width": width, "height": height,
        "hz": round(1.0 / median, 1), "tick_ms_median": round(median * 1e3, 2),
        "tick_ms_p95": round(float(np.percentile(loop_s, 95)) * 1e3, 2),
        "stage_ms_median": {k: round(float(np.median(v)) * 1e3, 2) for k, v in stages.items()},
    }


class TeeFrames(CameraSource):
    """The stand-in's camera stream, each tick's poll kept (for the pipelined run of the same push)."""

    def __init__(self, inner: CameraSource, polls: list):
        self.inner, self.polls = inner, polls

    @property
    def cameras(self):
        return self.inner.cameras

    def now(self) -> float:
        return self.inner.now()

    def poll(self, t=None):
        frames = self.inner.poll(t)
        self.polls.append(frames)
        return frames


class ReplayedFrames(CameraSource):
    """What :class:`TeeFrames` kept, delivered at the same ticks."""

    def __init__(self, inner: CameraSource, polls: list, dt: float):
        self.inner, self.polls, self.dt, self._now = inner, polls, dt, 0.0

    @property
    def cameras(self):
        return self.inner.cameras

    def now(self) -> float:
        return self._now

    def poll(self, t=None):
        self._now = t
        return self.polls[int(round(t / self.dt))]


class RecordedArm:
    """Reality's arm as the serial run measured it at each tick; what the loop sends it goes nowhere."""

    def __init__(self, q_per_tick: list, loop):
        self.q_per_tick, self.loop = q_per_tick, loop

    def read_state(self):
        return SimpleNamespace(q=self.q_per_tick[self.loop.ticks])

    def send(self, q, t) -> None:
        pass

    def now(self) -> float:
        return self.loop.t


def serial_run(task, cfg: BridgeCfg, lateral: float) -> tuple[dict, dict]:
    """One push with the serial loop against the live stand-in: its per-tick figures, and reality as it ran (with
    the robot targets of the push)."""
    reality = {"polls": [], "arm_q": [], "truth": []}
    bridge = build_bridge(cfg, task, wrap_source=lambda source, cameras: TeeFrames(source, reality["polls"]))
    reality["targets"] = targets = push_targets(bridge, lateral)
    tick_s, ages, errors = [], [], []
    try:
        for q in targets:
            reality["arm_q"].append(bridge.follower.read_state().q)  # what the loop reads during the tick
            begin = time.perf_counter()
            report = bridge.loop.tick(q[None])
            tick_s.append(time.perf_counter() - begin)
            ages.append(report.correction_age)
            bridge.advance_reality()
            reality["truth"].append(bridge.standin.object_poses()[0].copy())
            errors.append(pose_error(bridge.twin.object_poses()[0, 0], reality["truth"][-1]))
    finally:
        bridge.hold_and_stop()
    return {"tick_s": tick_s, "readings": len(tick_s), "wall_s": sum(tick_s), "ages": ages, "errors": errors}, reality


def pipelined_run(task, cfg: BridgeCfg, reality: dict, worker: str = "process", delay_ticks: int | None = None) -> dict:
    """The same push with the pipelined loop on the serial run's reality, ticks paced at 60 Hz of wall clock, the
    sensor in a ``worker`` process or thread (``delay_ticks``: without a worker, each reading applied that many
    ticks later)."""
    cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, correction="pipelined", sensor_worker=worker,
                                                            pipeline_delay_ticks=delay_ticks))
    dt = 1.0 / task.control_hz
    bridge = build_bridge(cfg, task, wrap_source=lambda source, cameras: ReplayedFrames(source, reality["polls"], dt))
    loop = bridge.loop
    loop.follower = RecordedArm(reality["arm_q"], loop)  # reality replayed: the stand-in does not run again
    tick_s, ages, errors, readings = [], [], [], 0
    try:
        start = time.perf_counter()
        for k, q in enumerate(reality["targets"]):
            delay = start + loop.t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            begin = time.perf_counter()
            report = loop.tick(q[None])
            tick_s.append(time.perf_counter() - begin)
            readings += report.reading is not None
            ages.append(report.correction_age)
            errors.append(pose_error(bridge.twin.object_poses()[0, 0], reality["truth"][k]))
        wall = time.perf_counter() - start
    finally:
        bridge.hold_and_stop()
    return {"tick_s": tick_s, "readings": readings, "wall_s": wall, "ages": ages, "errors": errors}


def loop_figures(runs: list[dict]) -> dict:
    ticks = np.concatenate([r["tick_s"] for r in runs])
    wall = sum(r["wall_s"] for r in runs)
    ages = [a for r in runs for a in r["ages"] if a is not None]
    errors = np.concatenate([r["errors"] for r in runs])
    return {
        "hz": round(len(ticks) / wall, 1),  # the serial loop: back to back, 1 / mean tick; pipelined: paced
        "tick_ms_median": round(float(np.median(ticks)) * 1e3, 2),
        "tick_ms_p99": round(float(np.percentile(ticks, 99)) * 1e3, 2),
        "correction_hz": round(sum(r["readings"] for r in runs) / wall, 1),
        "correction_age_ms_median": round(float(np.median(ages)) * 1e3, 1),
        "sync_pos_mm_median": round(float(np.median(errors[:, 0])) * 1e3, 2),
        "sync_pos_mm_p95": round(float(np.percentile(errors[:, 0], 95)) * 1e3, 2),
        "sync_yaw_deg_median": round(float(np.degrees(np.median(errors[:, 1]))), 2),
    }


def serial_vs_pipelined(task, draws: int, laterals: list[float], delays: list[int], render_downscale: int,
                        held_reading: str = LoopCfg.held_reading, sensor_set: dict | None = None) -> dict:
    """``delays``: also on each run's reality, the sensor's reading every k ticks applied k ticks later (no
    thread): what the delay alone costs, whatever the CPU. ``sensor_set``: VisualForceSensorCfg overrides."""
    serial, pipelined, threaded, delayed = [], [], [], {k: [] for k in delays}
    for draw in range(draws):
        for lateral in laterals:
            sensor = {"render_downscale": render_downscale, **(sensor_set or {})}
            cfg = run_cfg(draw, visual_forces=True, overrides={"sensor": sensor})
            cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, held_reading=held_reading))  # pipelined only
            run, reality = serial_run(task, cfg, lateral)
            serial.append(run)
            pipelined.append(pipelined_run(task, cfg, reality, worker="process"))
            threaded.append(pipelined_run(task, cfg, reality, worker="thread"))
            print(f"draw {draw} lateral {lateral}: serial {loop_figures(serial[-1:])} "
                  f"pipelined (process) {loop_figures(pipelined[-1:])} (thread) {loop_figures(threaded[-1:])}",
                  flush=True)
            for k in delays:
                delayed[k].append(pipelined_run(task, cfg, reality, delay_ticks=k))
    result = {"runs": len(serial), "serial": loop_figures(serial), "pipelined": loop_figures(pipelined),
              "pipelined_thread": loop_figures(threaded)}
    if delays:
        result["fixed_delay"] = [{"delay_ticks": k, **{key: value for key, value in loop_figures(runs).items()
                                                      if key.startswith(("sync", "correction_age"))}}
                                 for k, runs in delayed.items()]
    for name in ("pipelined", "pipelined_thread"):
        result[f"{name}_over_serial_sync"] = round(
            result[name]["sync_pos_mm_median"] / max(result["serial"]["sync_pos_mm_median"], 1e-9), 2)
    return result


def thread_scaling(task, updates: int = 6) -> dict:
    """Work done per second by two threads over one: sensor beside sensor, sensor beside the physics step (2.0:
    the GIL is released throughout; 1.0: never), and the CPU cores the process used meanwhile (CPU time / wall: on
    a loaded machine a thread gets less than a core, so the cores used say more than the speed-ups)."""
    cfg = dataclasses.replace(BridgeCfg(), cameras=CamerasCfg(num_cameras=3, width=480, height=270),
                              initial_offset=[0.01, 0.0, 0.05])
    bridge = build_bridge(cfg, task)
    for _ in range(4):
        bridge.tick()
    loop, twin = bridge.loop, bridge.twin
    synced = loop.sync.tick(loop.t)
    images = [synced.fresh[c.name].image if c.name in synced.fresh else None for c in loop.sensor.cameras]
    poses = twin.object_poses()[0]
    sensors = [loop.sensor, VisualForceSensor(loop.sensor.cfg, loop.sensor.cloud, loop.sensor.cameras,
                                              twin.object_body_com())]
    physics_steps = 3 * updates

    def sensing(sensor, n):
        for _ in range(n):
            sensor.update(poses, images, None, poses)

    def physics(n):
        for _ in range(n):
            twin.step()

    cores = {}

    def timed(name, *work) -> float:
        threads = [threading.Thread(target=fn, args=args) for fn, args in work]
        begin, cpu = time.perf_counter(), time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - begin
        cores[name] = round((time.process_time() - cpu) / wall, 2)
        return wall

    sensor_alone = timed("one_sensor", (sensing, (sensors[0], updates)))
    physics_alone = timed("physics", (physics, (physics_steps,)))
    two_sensors = timed("two_sensors", (sensing, (sensors[0], updates)), (sensing, (sensors[1], updates)))
    sensor_and_physics = timed("sensor_and_physics", (sensing, (sensors[0], updates)), (physics, (physics_steps,)))
    bridge.hold_and_stop()
    return {
        "sensor_update_ms": round(sensor_alone / updates * 1e3, 1),
        "physics_step_ms": round(physics_alone / physics_steps * 1e3, 1),
        "two_sensors_speedup": round(2 * sensor_alone / two_sensors, 2),
        "sensor_beside_physics_speedup": round((sensor_alone + physics_alone) / sensor_and_physics, 2),
        "cores_used": cores,
    }


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=60)
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--render-threads", type=int, default=1, help="the sensor's rasterizer threads")
    parser.add_argument("--render-downscale", type=int, default=1,
                        help="the sensor renders at 1/N resolution (also in the serial vs pipelined runs)")
    parser.add_argument("--sync-draws", type=int, default=2, help="serial vs pipelined: hidden-parameter draws")
    parser.add_argument("--sync-laterals", type=float, nargs="+", default=[0.0, 0.02], help="push offsets (m)")
    parser.add_argument("--delay-sweep", type=int, nargs="*", default=[],
                        help="also run each push with the sensor's reading applied k ticks late (no thread)")
    parser.add_argument("--held-reading", choices=HELD_READING_RULES, default=LoopCfg.held_reading,
                        help="the pipelined loop's rule for a reading between arrivals (loop.held_reading)")
    parser.add_argument("--sensor-set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="serial vs pipelined: VisualForceSensorCfg overrides, e.g. kp=10.0 (a baseline "
                             "in the same run)")
    args = parser.parse_args()
    sensor_set = dict(parse_override(item) for item in args.sensor_set)
    torch.set_num_threads(1)  # small tensors: thread start-up costs more than it saves on 2 cores
    task = load_pusht_cfg()
    load_before = os.getloadavg()[0]
    result = measure(task, 3, 3, args.ticks, args.render_threads, args.render_downscale)
    print("main setting", result, flush=True)
    if not args.no_sweep:
        sweep = []
        for cameras, iterations in ((1, 1), (2, 1), (3, 1), (1, 3), (2, 2)):
            sweep.append(measure(task, cameras, iterations, max(20, args.ticks // 2), args.render_threads,
                                 args.render_downscale))
            print("sweep", sweep[-1], flush=True)
        holding = [s for s in sweep + [result] if s["hz"] >= 60.0]
        result["sweep"] = sweep
        result["largest_setting_at_60hz"] = (
            max(holding, key=lambda s: s["cameras"] * s["iterations"]) if holding else None
        )
    result["thread_scaling"] = thread_scaling(task)
    print("thread scaling", result["thread_scaling"], flush=True)
    result.update(serial_vs_pipelined(task, args.sync_draws, args.sync_laterals, args.delay_sweep,
                                      args.render_downscale, args.held_reading, sensor_set))
    result["held_reading"] = args.held_reading
    if sensor_set:
        result["sensor_set"] = sensor_set
    result["load_average_1min"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]  # other work on 2 cores
    print(json.dumps(result))


if __name__ == "__main__":
    main()
