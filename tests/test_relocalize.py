"""Loss of track and recovery: the relative lost rule, the photometric check of a re-localiser's candidate, and the
plausibility gate of PushT's re-localiser (docs/fidelity.md, "Loss of track and recovery")."""

import numpy as np
import pytest

from real_is_sim.bridge import BridgeCfg, build_bridge
from real_is_sim.bridge.config import CamerasCfg
from real_is_sim.correction.sensor import VisualForceSensor, VisualForceSensorCfg
from real_is_sim.loop import LoopCfg
from real_is_sim.standin.appearance import KNOBS, HiddenAppearance
from real_is_sim.standin.world import StandInCfg
from real_is_sim_tasks.pusht.config import load_pusht_cfg
from real_is_sim_tasks.pusht.perception import plausible
from test_correction_sensor import _cameras, _observe, _pose, _t_block_cloud


@pytest.fixture(scope="module")
def scene():
    cloud, com = _t_block_cloud()
    return cloud, com, _cameras()


def _exposed(frames, gain, white=(1.0, 1.0, 1.0)):
    """The frames as a camera whose exposure (gain) and white balance drifted shows them."""
    return [np.clip(f.astype(np.float32) / 255.0 * gain * np.asarray(white, dtype=np.float32), 0.0, 1.0) for f in frames]


def test_exposure_change_does_not_flag_a_well_tracked_block(scene):
    cloud, com, cams = scene
    truth = _observe(cloud, cams, _pose(0.004, 0.0))  # tracked, a few mm off as under a real appearance gap
    relative = VisualForceSensor(VisualForceSensorCfg(lost_after_ticks=5, lost_residual=0.03), cloud, cams, com)
    absolute = VisualForceSensor(VisualForceSensorCfg(lost_after_ticks=5, lost_ratio=None, lost_residual=0.03,
                                                     residual_exposure_gain=False), cloud,
                                 cams, com)
    # tracked in the first frames, then the exposure drifts to +15 % (the stand-in's: +-6 % over 5 s) with a warmer white balance over 2 s
    gains = [1.0] * 10 + list(np.linspace(1.0, 1.15, 120)) + [1.15] * 10
    residuals, lost_relative, lost_absolute = [], [], []
    for gain in gains:
        frames = _exposed(truth, gain, (1.0, 0.97, 0.92) if gain > 1.0 else (1.0, 1.0, 1.0))
        lost_relative.append(relative.update(_pose()[None], frames).lost[0])
        raw = absolute.update(_pose()[None], frames)
        residuals.append(raw.residual[0])
        lost_absolute.append(raw.lost[0])
    assert residuals[-1] > 1.5 * residuals[0], residuals  # the exposure change raises the raw colour error ...
    assert not any(lost_relative), (residuals, relative.residual_baseline)  # ... which the health rule absorbs
    assert any(lost_absolute)  # an absolute threshold below the drifted residual would have flagged it
    # the same sensor still flags a block that is not where the twin has it
    gone = _exposed(_observe(cloud, cams, _pose(0.06, 0.05)), 1.15, (1.0, 0.97, 0.92))
    flags = [relative.update(_pose()[None], gone).lost[0] for _ in range(8)]
    assert flags[-1], relative.residual_baseline


def test_photometric_losses_prefer_the_pose_the_frames_show(scene):
    cloud, com, cams = scene
    frames = _observe(cloud, cams, _pose(0.05, 0.0))
    sensor = VisualForceSensor(VisualForceSensorCfg(), cloud, cams, com)
    right, near, wrong = sensor.photometric_losses([_pose(0.05, 0.0)[None], _pose(0.045, 0.0)[None], _pose()[None]],
                                                   frames)
    assert right < near < wrong, (right, near, wrong)
    assert np.isnan(sensor.photometric_losses([_pose()[None]], [None] * len(cams))).all()


def test_plausibility_gate():
    plane = np.array([0.0, 0.0, 1.0, 0.0])
    tracked = _pose()
    assert plausible(_pose(0.10, 0.0), tracked, plane)  # a block moved 10 cm by hand
    assert not plausible(_pose(0.40, 0.0), tracked, plane)  # far outside the workspace
    lifted = _pose(0.02, 0.0)
    lifted[2] += 0.05
    assert not plausible(lifted, tracked, plane)  # not on the table


def _session(**standin):
    cfg = BridgeCfg(
        loop=LoopCfg(), cameras=CamerasCfg(num_cameras=2, width=160, height=90),
        initial_offset=[0.015, -0.01, 0.08], standin=StandInCfg(seed=3, drop_probability=0.0, **standin),
        sensor=VisualForceSensorCfg(kp=10.0, lost_after_ticks=5),
    )
    return build_bridge(cfg, load_pusht_cfg())


def test_wrong_relocalisation_candidate_is_rejected():
    session = _session()
    for _ in range(45):
        session.tick()
    before = session.sync_error()[0]
    assert before < 0.01
    wrong = session.twin.object_poses()[0].copy()
    wrong[0, 0] += 0.06  # on the table, plausible, but not where the frames show the block
    calls = []
    session.loop.relocalize = lambda images, poses: calls.append(1) or wrong
    session.loop.sensor.cfg.lost_ratio, session.loop.sensor.cfg.lost_residual = None, 0.0  # every tick "lost"
    reports = [session.tick() for _ in range(10)]
    assert calls, "the loop never asked the re-localiser"
    assert all(r.recovered == [] for r in reports)
    assert session.loop.last_recovery["accepted"] is False
    assert session.loop.last_recovery["candidate_loss"] > session.loop.last_recovery["tracked_loss"]
    assert session.sync_error()[0] < 0.01, session.sync_error()  # kept tracking, not moved 6 cm
    assert len(calls) == 1  # and did not re-localise again every tick (retry after RECOVER_RETRY_TICKS)


@pytest.mark.parametrize("knobs", [("exposure",), ("background",), ("block",), KNOBS])
def test_block_lost_in_earnest_is_recovered_under_an_appearance_gap(knobs):
    session = _session(appearance=HiddenAppearance.realistic(list(knobs)))
    for _ in range(30):
        session.tick()
    pose = session.standin.object_poses().copy()
    pose[0, 1] += 0.10  # moved 10 cm by hand
    session.standin.teleport(pose)
    reports = [session.tick() for _ in range(15)]
    assert any(r.recovered == [0] for r in reports), [r.reading.residual[0] for r in reports]
    assert session.sync_error()[0] < 0.01, session.sync_error()
