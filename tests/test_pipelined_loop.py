"""The pipelined loop (LoopCfg.correction="pipelined"): the sensor beside the tick, its newest reading applied.

Small stand-in sessions (2 cameras 160x90) through the composition root, as in test_standin_loop.py.
"""

import threading
import time

import numpy as np
import pytest

from real_is_sim.bridge import BridgeCfg, build_bridge
from real_is_sim.bridge.config import CamerasCfg
from real_is_sim.correction.sensor import VisualForceSensorCfg
from real_is_sim.correction.worker import CorrectionError
from real_is_sim.errors import ConfigError
from real_is_sim.loop import LoopCfg
from real_is_sim.standin.world import StandInCfg
from real_is_sim_tasks.pusht.config import load_pusht_cfg

WORKER_THREAD = "visual-force-sensor"


@pytest.fixture(scope="module")
def task():
    return load_pusht_cfg()


def _bridge(task, lost_after_ticks=10, **loop):
    cfg = BridgeCfg(
        loop=LoopCfg(**loop), cameras=CamerasCfg(num_cameras=2, width=160, height=90),
        initial_offset=[0.015, -0.01, 0.08], standin=StandInCfg(seed=3, drop_probability=0.0),
        sensor=VisualForceSensorCfg(kp=10.0, lost_after_ticks=lost_after_ticks),
    )
    return build_bridge(cfg, task)


def _spy_on_applied_wrenches(bridge) -> list:
    """(tick, wrench handed to the actuator, the twin's object poses then) for every apply."""
    applied, apply = [], bridge.loop.actuator.apply

    def spy(wrench, world=0):
        applied.append((bridge.loop.ticks, np.array(wrench), bridge.twin.object_poses()[world]))
        apply(wrench, world)

    bridge.loop.actuator.apply = spy
    return applied


def _worker_threads() -> list:
    return [t for t in threading.enumerate() if t.name == WORKER_THREAD]


def test_delay_zero_is_the_serial_loop(task):
    serial, pipelined = _bridge(task), _bridge(task, correction="pipelined", pipeline_delay_ticks=0)
    start = serial.twin.object_poses()
    for _ in range(10):
        a, b = serial.step(), pipelined.step()  # the scripted push: the arm moves in the sensor's views
        np.testing.assert_array_equal(a.reading.wrench, b.reading.wrench)
        np.testing.assert_array_equal(serial.twin.object_poses(), pipelined.twin.object_poses())
        assert a.correction_age == b.correction_age
    assert np.abs(serial.twin.object_poses() - start)[..., :2].max() > 1e-4  # the visual force moved the block


@pytest.mark.parametrize("rule, full_within", [("hold", 0.0), ("age_scaled", 0.003), ("age_scaled", 1.0), ("once", 0.0)])
def test_a_fixed_delay_applies_each_reading_later_with_springs_from_the_pose_then(task, rule, full_within):
    # loop.held_reading: "hold" applies the held springs every tick, "age_scaled" scaled by (age at submission) /
    # (age now) unless they are held_full_within or shorter, "once" only in the tick the reading arrives
    k, dt = 2, 1.0 / task.control_hz
    bridge = _bridge(task, correction="pipelined", pipeline_delay_ticks=k, held_reading=rule,
                     held_full_within=full_within)
    applied = _spy_on_applied_wrenches(bridge)
    updated, update = {}, bridge.loop.sensor.update

    def recorded_update(*args):
        reading = update(*args)
        updated[bridge.loop.ticks] = reading
        return reading

    bridge.loop.sensor.update = recorded_update
    reports = [bridge.tick() for _ in range(9)]
    assert sorted(updated) == [0, 2, 4, 6, 8]  # a new update whenever the last one was handed over
    arrivals = list(range(k, 9, k)) if rule == "once" else list(range(k, 9))  # nothing before the first reading
    assert [tick for tick, _, _ in applied] == arrivals
    scaled = 0
    for tick, wrench, poses in applied:
        source = (tick // k - 1) * k  # the update whose reading is held at this tick
        reading = updated[source]
        age = reports[tick].correction_age
        assert (tick - source) * dt - 1e-9 <= age <= (tick - source) * dt + bridge.cfg.loop.stale_after
        if reading.targets is None:  # no frame had arrived yet (33 ms camera latency): no springs, zero wrench
            np.testing.assert_array_equal(wrench, reading.wrench)
            continue
        expected, lengths = bridge.loop.sensor.held_springs(reading.targets, poses)
        short = lengths.max() <= full_within
        if rule == "age_scaled" and not short:
            at_submission = age - (tick - source) * dt  # the cameras' own latency
            expected = expected * min(1.0, max(at_submission, dt) / age)
            scaled += max(at_submission, dt) < age
        np.testing.assert_allclose(wrench, expected, rtol=1e-12, atol=0)
    # the twin starts 18 mm off: its springs are long, and older readings pull less, unless every spring counts as short
    assert (scaled > 0) == (rule == "age_scaled" and full_within < 1.0)
    assert [r.reading is not None for r in reports] == [t >= k and t % k == 0 for t in range(9)]
    bridge.loop.reset_history()  # the twin was reset: the held reading belonged to the twin before
    assert bridge.tick().correction_age is None


def test_the_worker_applies_its_newest_reading_with_its_age_and_does_not_hold_the_tick(task):
    bridge = _bridge(task, lost_after_ticks=1000, correction="pipelined", sensor_worker="thread",
                     held_reading="hold")  # no re-localisation; the held springs unscaled
    applied = _spy_on_applied_wrenches(bridge)
    update = bridge.loop.sensor.update

    def slow_update(*args):
        began, deadline = bridge.loop.ticks, time.perf_counter() + 5.0
        while bridge.loop.ticks < began + 3 and time.perf_counter() < deadline:  # an update spanning 3 ticks
            time.sleep(0.002)
        return update(*args)

    bridge.loop.sensor.update = slow_update
    reports = []
    for _ in range(60):
        reports.append(bridge.tick())
    bridge.hold_and_stop()
    arrived = [k for k, r in enumerate(reports) if r.reading is not None]
    assert 5 <= len(arrived) <= len(reports) / 3, arrived  # the tick went on while the sensor worked
    dt = 1.0 / task.control_hz
    by_tick = {tick: (wrench, poses) for tick, wrench, poses in applied}
    for k, report in enumerate(reports[arrived[0]:], start=arrived[0]):
        newest = max(a for a in arrived if a <= k)
        wrench, poses = by_tick[k]
        reading = reports[newest].reading
        expected = reading.wrench if reading.targets is None else bridge.loop.sensor.held_springs(reading.targets, poses)[0]
        np.testing.assert_array_equal(wrench, expected)
        assert report.correction_age == pytest.approx(reports[newest].correction_age + (k - newest) * dt)
    assert max(r.correction_age for r in reports if r.correction_age is not None) > 3 * dt
    # Where the twin ends is not checked: it depends on when the readings land (the tick's speed), and with readings
    # ~100 ms apart the held springs can ring (docs/realtime.md). test_delay_zero_is_the_serial_loop checks the
    # springs themselves against the serial loop.


def test_a_sensor_failure_in_the_worker_is_one_error_in_the_loop(task):
    bridge = _bridge(task, correction="pipelined", sensor_worker="thread")

    def broken_update(*args):
        raise RuntimeError("renderer exploded")

    bridge.loop.sensor.update = broken_update
    with pytest.raises(CorrectionError, match="failed in its worker thread: RuntimeError: renderer exploded") as error:
        for _ in range(20):
            bridge.tick()
            time.sleep(0.02)
    assert isinstance(error.value.__cause__, RuntimeError)
    bridge.hold_and_stop()
    assert not _worker_threads()


def test_a_sensor_that_hangs_stops_the_loop_after_the_timeout(task):
    bridge = _bridge(task, correction="pipelined", sensor_worker="thread", sensor_timeout_s=0.5)
    release = threading.Event()
    bridge.loop.sensor.update = lambda *args: release.wait(30)
    begin = time.perf_counter()
    with pytest.raises(CorrectionError, match="has not returned for 0.5 s"):
        while time.perf_counter() - begin < 5:
            bridge.tick()
            time.sleep(0.02)
    assert time.perf_counter() - begin < 2
    release.set()
    bridge.hold_and_stop()


def test_stop_joins_the_worker(task):
    bridge = _bridge(task, correction="pipelined", sensor_worker="thread")
    bridge.tick()
    assert len(_worker_threads()) == 1
    bridge.hold_and_stop()  # an update may be in flight: it ends, then the thread
    assert not _worker_threads()
    bridge.hold_and_stop()


def test_the_worker_process_gives_the_readings_of_the_sensor_in_the_loop_and_stops(task):
    """The process's sensor is a pickled copy (robot occluders included): for the same jobs its readings are the
    parent's sensor's, its health counters are its own and are reset through the loop, and stop ends the child."""
    bridge = _bridge(task, lost_after_ticks=1000, correction="pipelined", sensor_worker="process", sensor_timeout_s=120)
    worker, handed_over = bridge.loop._worker, []
    collect = worker.collect

    def recorded_collect(tick, wait=False):
        ready = collect(tick, wait)
        if ready is not None:
            handed_over.append(ready)
        return ready

    worker.collect = recorded_collect
    for _ in range(8):
        bridge.tick()
    worker.collect(bridge.loop.ticks, wait=True)  # the update in flight
    assert any(reading.cameras_used for _, reading in handed_over), "no reading from frames came back"
    for job, reading in handed_over:
        direct = bridge.loop._sensor_update(job)
        np.testing.assert_allclose(reading.wrench, direct.wrench, rtol=1e-5, atol=1e-7)
        assert reading.cameras_used == direct.cameras_used
    bridge.loop.reset_sensor_health()  # answered by the child: it is alive and its counters are reset
    process = worker._process
    bridge.hold_and_stop()
    assert not process.is_alive()
    bridge.hold_and_stop()


def test_a_sensor_failure_in_the_worker_process_is_one_error_in_the_loop(task):
    bridge = _bridge(task, correction="pipelined", sensor_worker="process", sensor_timeout_s=120)
    job = bridge.loop._job(bridge.loop._frames(bridge.loop.t))
    job.poses_at_exposure = np.full_like(job.poses_at_exposure, np.nan)  # the child's sensor refuses it
    bridge.loop._worker.submit(job)
    with pytest.raises(CorrectionError, match="failed in its worker process: ValueError: body_poses must be finite"):
        bridge.loop._worker.collect(0, wait=True)
    bridge.hold_and_stop()


@pytest.mark.parametrize("loop", [{"correction": "parallel"}, {"pipeline_delay_ticks": -1}, {"sensor_worker": "gpu"},
                                  {"pipeline_delay_ticks": 1.5}, {"sensor_timeout_s": 0}, {"held_reading": "forever"}])
def test_bad_pipeline_settings_are_one_config_error(loop):
    with pytest.raises(ConfigError, match="loop."):
        LoopCfg(**loop)
