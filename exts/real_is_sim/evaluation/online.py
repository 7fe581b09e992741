"""Online evaluation: one episode through the full loop against the stand-in real world.

The bridge's ``standin`` preset (cameras rendered by the stand-in, visual forces on, the stand-in's simulated arm
following the twin robot), one bridge per episode with its cameras ringing the start pose (as
``scripts/bench_expert.py`` does), the stand-in's hidden physics drawn with ``standin.seed`` = the episode's seed
(so each trial of a start pose meets other physics). The policy reads the twin (corrected by the visual forces);
a ``real_image`` policy's image is the real camera's instead: the stand-in's own look at its true state, through a
camera where the static one stands (:func:`real_camera`). Success is judged on the stand-in's block (ground truth),
by the same rules as offline.

Tracking failures: the twin's block more than ``TRACK_POSITION_M`` (2 cm) or ``TRACK_ANGLE_RAD`` (10 deg) from the
stand-in's for longer than ``TRACK_MIN_S`` (0.5 s); one failure per such stretch, recovered when the error came back
within both tolerances before the episode ended.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from real_is_sim.evaluation.offline import (COVERAGE_EVERY, ChunkSource, RuleClock, cached_policy, episode_row,
                                            make_scheduler, renderer_of)
from real_is_sim.evaluation.spec import Unit

TRACK_POSITION_M = 0.02
TRACK_ANGLE_RAD = math.radians(10.0)
TRACK_MIN_S = 0.5


def tracking_failures(position_error, angle_error, dt: float, position_m: float = TRACK_POSITION_M,
                      angle_rad: float = TRACK_ANGLE_RAD, min_s: float = TRACK_MIN_S) -> list[dict]:
    """Stretches of ticks (``dt`` apart) where the twin was off by more than either tolerance for longer than ``min_s``:
    ``[{"start_s", "duration_s", "recovered"}]`` (recovered: back within both before the trace ended)."""
    off = (np.asarray(position_error) > position_m) | (np.asarray(angle_error) > angle_rad)
    events, k, n = [], 0, len(off)
    while k < n:
        if not off[k]:
            k += 1
            continue
        end = k
        while end < n and off[end]:
            end += 1
        if (end - k) * dt > min_s:
            events.append({"start_s": round(k * dt, 3), "duration_s": round((end - k) * dt, 3), "recovered": end < n})
        k = end
    return events


def build_online_world(cell, start_pose, seed: int, overrides: list[str]):
    """A bridge against the stand-in with the block (twin and stand-in) at ``start_pose`` and hidden physics drawn from
    ``seed``."""
    from real_is_sim.bridge import build_bridge
    from real_is_sim.bridge.config import load_bridge_cfg

    block = dataclasses.replace(cell.block, start_pose=[float(v) for v in start_pose])
    task = dataclasses.replace(cell, block=block)
    cfg = load_bridge_cfg("standin", overrides=["loop.realtime=false", "recording.cameras=false", "policy.kind=hold",
                                                f"standin.seed={seed}", *overrides])
    return build_bridge(cfg, task)


def real_camera(policy, cell, bridge, seed: int):
    """The ``real_image`` policy's camera in this episode: the stand-in's own look (its seed, appearance and block
    size), fixed where the static camera stands in the policy's ``cell``."""
    from real_is_sim.policy.observations import ObservationRenderer

    return ObservationRenderer("real_image", policy.cfg.image_size, cell, seed=seed, reality=bridge.cfg.standin,
                               block_scale=bridge.standin.params.block_scale)


def run_online_unit(unit: Unit) -> list[dict]:
    """Each episode of the unit (usually one) in its own bridge."""
    return [run_online_episode(unit, e) for e in unit.episodes]


def run_online_episode(unit: Unit, e) -> dict:
    wall = time.perf_counter()
    policy, _, cell = cached_policy(unit.checkpoint)
    bridge = build_online_world(cell, e.start_pose, e.seed, unit.overrides)
    twin = bridge.twin
    try:
        scheduler = make_scheduler(policy, 1, twin.control_dt, unit.execute, unit.tempo)
        real_image = policy.cfg.variant == "real_image"
        renderer = real_camera(policy, cell, bridge, e.seed) if real_image else renderer_of(policy, e.seed)
        source = ChunkSource(policy, [e.seed], renderer, unit.noise_scale)
        clock = RuleClock(1, cell)
        position_error, angle_error = [], []
        ticks = int(round(unit.seconds / twin.control_dt))
        for tick in range(ticks):
            seen = None
            if real_image:  # the real camera sees the real world (the stand-in's block and arm)
                standin = bridge.standin
                seen = (standin.object_poses()[None], np.asarray(standin.follower.read_state().q)[None], standin.t)
            source.observe(twin.object_poses()[:1], twin.robot_q()[:1], seen)
            if len(scheduler.needs_chunk()):
                scheduler.set_chunks([0], source.chunks([0]))
            bridge.tick(scheduler.step())
            p, a = bridge.sync_error()
            position_error.append(p)
            angle_error.append(a)
            clock.update((tick + 1) * twin.control_dt, bridge.ground_truth()[:1], scheduler.progress,
                         check_coverage=(tick + 1) % COVERAGE_EVERY == 0 or tick == ticks - 1)
            if clock.settled():
                break
        truth = bridge.ground_truth()[0]
        guard = bridge.loop.target_guard
        targets = {"targets_moved": guard.moved if guard is not None else None,
                   "follower_refusals": sum(bridge.follower.filter.refusals.values())}
    finally:
        bridge.hold_and_stop()
    events = tracking_failures(position_error, angle_error, twin.control_dt)
    outcome = clock.row(0, truth)
    outcome.update(tracking_failures=len(events), tracking_recovered=sum(ev["recovered"] for ev in events),
                   tracking_events=events, max_sync_error_m=round(float(np.max(position_error)), 4),
                   max_sync_error_rad=round(float(np.max(angle_error)), 4), standin_seed=e.seed, **targets)
    return episode_row(e, unit, outcome, time.perf_counter() - wall)
