"""The online loop wired to a stand-in real world by the composition root (small images to keep it quick)."""

import numpy as np
import pytest

from real_is_sim.correction.sensor import VisualForceSensorCfg
from real_is_sim.errors import ConfigError
from real_is_sim.loop import LoopCfg, OnlineLoop
from real_is_sim.cell import PhysicalParams
from real_is_sim.standin.params import HiddenParamRanges, draw_hidden_params
from real_is_sim.bridge import BridgeCfg, build_bridge
from real_is_sim.bridge.config import CamerasCfg
from real_is_sim.standin.world import StandInCfg
from real_is_sim.twin import Twin
from real_is_sim_tasks.pusht.config import load_pusht_cfg


def _session(visual_forces=True, offset=(0.015, -0.01, 0.08), **standin):
    cfg = BridgeCfg(
        loop=LoopCfg(visual_forces=visual_forces), cameras=CamerasCfg(num_cameras=2, width=160, height=90),
        initial_offset=list(offset), standin=StandInCfg(seed=3, drop_probability=0.0, **standin),
        sensor=VisualForceSensorCfg(kp=10.0, lost_after_ticks=5),
    )
    return build_bridge(cfg, load_pusht_cfg())


@pytest.fixture(scope="module")
def corrected():
    session = _session()
    errors = [session.sync_error()]
    for _ in range(45):
        session.tick()
        errors.append(session.sync_error())
    return session, np.array(errors)


def test_visual_forces_close_the_gap_to_the_stand_in(corrected):
    _, errors = corrected
    assert errors[0, 0] > 0.015
    assert errors[-5:, 0].max() < 0.5 * errors[0, 0], errors[:, 0]


def test_without_visual_forces_the_gap_stays(corrected):
    session = _session(visual_forces=False)
    start = session.sync_error()
    for _ in range(15):
        report = session.tick()
    assert report.reading is None and report.frames_used == []  # nothing rendered, nothing read
    assert np.count_nonzero(session.twin.object_wrench) == 0
    assert session.sync_error()[0] == pytest.approx(start[0], abs=2e-3)


def test_stand_in_hides_its_parameters_from_the_twin(corrected):
    session, _ = corrected
    assert session.standin.params != session.twin.task.physical
    assert session.standin.twin is not session.twin


def test_teleported_block_is_flagged_lost_then_recovered(corrected):
    session, _ = corrected
    pose = session.standin.object_poses().copy()
    pose[0, 1] += 0.12  # a person moves the block by hand, far beyond what visual forces can pull it
    session.standin.teleport(pose)
    reports = [session.tick() for _ in range(12)]
    lost_at = next(k for k, r in enumerate(reports) if r.reading.lost[0])
    assert reports[lost_at].reading.confidence[0] < 0.5 and not reports[lost_at].reading.ok
    assert reports[lost_at].recovered == [0]  # re-localised from the frames in the same tick
    assert session.sync_error()[0] < 0.01, session.sync_error()


def test_switches_off_is_a_plain_virtual_environment():
    twin = Twin(load_pusht_cfg(), 2)
    loop = OnlineLoop(LoopCfg(visual_forces=False, follow_real=False), twin)
    for _ in range(5):
        report = loop.tick()
    assert report.reading is None and "sensor" not in report.seconds


def test_robot_links_never_receive_visual_forces():
    task = load_pusht_cfg()
    pushed, reference = Twin(task, 1), Twin(task, 1)
    from real_is_sim.correction.actuator import VisualForceActuator, VisualForceActuatorCfg

    actuator = VisualForceActuator(VisualForceActuatorCfg(), pushed)
    for _ in range(20):
        actuator.apply(np.array([[3.0, 0.0, 0.0, 0.0, 0.0, 0.5]]))
        pushed.step()
        reference.step()
    assert np.allclose(pushed.robot_link_poses(), reference.robot_link_poses(), atol=1e-9)
    moved = pushed.object_poses()[0, 0, :3] - reference.object_poses()[0, 0, :3]
    assert moved[0] > 0.005  # the block took the force
    with pytest.raises(ValueError, match="shape"):
        actuator.apply(np.zeros((2, 6)))


def test_hidden_parameters_are_drawn_inside_their_ranges():
    ranges = HiddenParamRanges()
    draws = [draw_hidden_params(ranges, PhysicalParams(), np.random.default_rng(s)) for s in range(20)]
    frictions = [d.friction_table for d in draws]
    assert min(frictions) >= 0.3 and max(frictions) <= 0.8 and np.std(frictions) > 0.05
    assert all(np.hypot(*d.com_offset[:2]) <= ranges.com_offset + 1e-12 for d in draws)
    with pytest.raises(ValueError, match="friction_table"):
        HiddenParamRanges(friction_table=[0.9, 0.1])


@pytest.mark.parametrize("lead", [0, 1])
def test_the_sensor_compares_the_frames_with_the_twin_lead_ticks_after_their_exposure(lead):
    cfg = BridgeCfg(
        loop=LoopCfg(exposure_lead_ticks=lead), cameras=CamerasCfg(num_cameras=2, width=160, height=90),
        initial_offset=[0.015, -0.01, 0.08], standin=StandInCfg(seed=3, drop_probability=0.0),
    )
    session = build_bridge(cfg, load_pusht_cfg())
    compared = []
    update = session.loop.sensor.update
    session.loop.sensor.update = lambda poses, *args: (compared.append(np.array(poses)), update(poses, *args))[1]
    twin_at = {0: session.twin.object_poses()[0].copy()}  # tick -> the twin's poses then
    for _ in range(8):
        report = session.tick()
        twin_at[session.loop.ticks] = session.twin.object_poses()[0].copy()
    dt = session.twin.control_dt
    exposure_tick = int(np.floor((report.t - report.correction_age) / dt + 1e-9))  # the last tick at or before the exposure
    assert report.correction_age > dt  # the frames are older than one tick: a lead of 1 is not simply "now"
    assert not np.allclose(twin_at[exposure_tick], twin_at[exposure_tick + 1])  # the twin moved: the check can fail
    assert np.array_equal(compared[-1], twin_at[min(exposure_tick + lead, session.loop.ticks - 1)])


def test_a_negative_or_fractional_exposure_lead_is_refused():
    for bad in (-1, 0.5):
        with pytest.raises(ConfigError, match="exposure_lead_ticks"):
            LoopCfg(exposure_lead_ticks=bad)
