"""The stand-in's hidden appearance: each knob changes the frames it renders, and never the twin's model."""

import dataclasses

import numpy as np
import pytest
import torch

from real_is_sim.bridge import BridgeCfg, build_bridge
from real_is_sim.bridge.config import CamerasCfg
from real_is_sim.loop import LoopCfg
from real_is_sim.standin.appearance import KNOBS, HiddenAppearance, perturb_cloud, appearance_rng
from real_is_sim.standin.world import StandInCfg
from real_is_sim.twin.tblock import block_cloud
from real_is_sim_tasks.pusht.config import load_pusht_cfg


def _bridge(appearance: HiddenAppearance):
    cfg = BridgeCfg(loop=LoopCfg(visual_forces=True), cameras=CamerasCfg(num_cameras=2, width=160, height=90),
                    standin=StandInCfg(seed=4, noise_std=0.0, drop_probability=0.0, appearance=appearance))
    return build_bridge(cfg, load_pusht_cfg())


def _frames(bridge, move=False):
    standin = bridge.standin
    if move:  # the block moved 5 mm since the previous frame: what motion blur smears
        poses = standin.object_poses().copy()
        poses[:, 0] -= 0.005
        standin._previous = (poses, np.asarray(standin.follower.read_state().q, dtype=np.float64))
    images = standin._render(standin.source.cameras, 0.5)
    return np.stack([images[s] for s in standin.source.cameras])


@pytest.fixture(scope="module")
def perfect():
    bridge = _bridge(HiddenAppearance())
    return bridge, _frames(bridge), _frames(bridge, move=True)


def _model_state(bridge):
    sensor = bridge.loop.sensor
    return ([t.clone() for t in (sensor.cloud.means, sensor.cloud.quats, sensor.cloud.scales, sensor.cloud.opacities,
                                 sensor.cloud.colors)],
            sensor._viewmats.clone(), sensor._Ks.clone())


def test_perfect_appearance_renders_the_twins_model(perfect):
    bridge, frames, _ = perfect
    sensor = bridge.loop.sensor
    assert bridge.standin.cloud is bridge.standin.model_cloud  # the very cloud the sensor renders
    assert sensor.cloud is bridge.standin.model_cloud
    for k, serial in enumerate(bridge.standin.source.cameras):
        np.testing.assert_array_equal(sensor._backgrounds[k], bridge.standin._backgrounds[serial].numpy())


@pytest.mark.parametrize("knob", KNOBS)
def test_each_knob_changes_the_frames_and_not_the_twin(perfect, knob):
    base, frames, moving = perfect
    bridge = _bridge(HiddenAppearance.realistic([knob]))
    assert bridge.standin.cfg.appearance.knobs_on() == [knob]
    changed = _frames(bridge, move=(knob == "motion_blur"))
    reference = moving if knob == "motion_blur" else frames
    difference = np.abs(changed - reference).mean(axis=-1)
    assert difference.max() > 0.02, knob  # visibly different somewhere
    # the twin's model: the same Gaussians (a fresh load), the nominal cameras, and the standin's perturbation
    # did not write into the cloud they share
    fresh = block_cloud(bridge.twin.task)
    cloud = bridge.loop.sensor.cloud
    for mine, ref in zip((cloud.means, cloud.quats, cloud.scales, cloud.opacities, cloud.colors),
                         (fresh.means, fresh.quats, fresh.scales, fresh.opacities, fresh.colors)):
        assert torch.equal(mine, ref), knob
    (_, viewmats, Ks), (_, viewmats0, Ks0) = _model_state(bridge), _model_state(base)
    assert torch.equal(viewmats, viewmats0) and torch.equal(Ks, Ks0), knob
    assert bridge.standin.params == base.standin.params  # appearance draws leave the hidden physics alone


def test_the_sensor_estimates_its_own_background_when_the_table_differs():
    bridge = _bridge(HiddenAppearance.realistic(["background"]))
    standin, sensor = bridge.standin, bridge.loop.sensor
    for k, serial in enumerate(standin.source.cameras):
        own = standin._backgrounds[serial].numpy()
        estimate = sensor._backgrounds[k]
        assert not np.array_equal(own, estimate)
        assert np.abs(own - estimate).mean() < 0.01  # a good estimate: the median of noisy empty-cell frames


def test_calibration_is_off_by_the_hidden_amounts():
    bridge = _bridge(HiddenAppearance.realistic(["calibration"]))
    standin = bridge.standin
    for serial, nominal in standin.source.cameras.items():
        true = standin.true_cameras[serial]
        shift = np.linalg.norm(true.X_WC[:3, 3] - nominal.X_WC[:3, 3])
        cos = (np.trace(true.X_WC[:3, :3] @ nominal.X_WC[:3, :3].T) - 1) / 2
        assert shift == pytest.approx(0.002, abs=1e-9)
        assert np.degrees(np.arccos(np.clip(cos, -1, 1))) == pytest.approx(0.3, abs=1e-4)
        ratio = np.abs(true.K[[0, 1, 0, 1], [0, 1, 2, 2]] / nominal.K[[0, 1, 0, 1], [0, 1, 2, 2]] - 1)
        assert ratio.max() <= 0.005 + 1e-12 and ratio.max() > 0


def test_exposure_drifts_over_the_episode():
    bridge = _bridge(HiddenAppearance.realistic(["exposure"]))
    drift = bridge.standin._drift
    gains = np.array([drift.gains(t) for t in np.linspace(0, 5, 11)])
    assert np.ptp(gains, axis=0).min() > 0.02  # every channel drifts
    assert np.abs(gains - 1).max() <= 0.06 + 0.03 + 0.06 * 0.03 + 1e-6


def test_block_perturbation_is_seeded_and_leaves_the_input_alone():
    cloud = block_cloud(load_pusht_cfg())
    means = cloud.means.clone()
    look = HiddenAppearance.realistic(["block"])
    a = perturb_cloud(cloud, look, appearance_rng(1, "block"))
    b = perturb_cloud(cloud, look, appearance_rng(1, "block"))
    c = perturb_cloud(cloud, look, appearance_rng(2, "block"))
    assert torch.equal(cloud.means, means)
    assert torch.equal(a.means, b.means) and not (len(a.means) == len(c.means) and torch.equal(a.means, c.means))
    assert len(a.means) <= len(cloud.means)


def test_bad_appearance_values_are_one_clear_error():
    with pytest.raises(ValueError, match="block_drop_fraction"):
        HiddenAppearance(block_drop_fraction=1.5)
    with pytest.raises(ValueError, match="extrinsics_m"):
        HiddenAppearance(extrinsics_m=-1.0)
    with pytest.raises(ValueError, match="unknown appearance knob"):
        HiddenAppearance.realistic(["glare"])
    with pytest.raises(ValueError, match="blur_samples"):
        dataclasses.replace(HiddenAppearance(), blur_samples=0)


def test_real_table_texture_from_the_footage(shared_data):
    from real_is_sim.standin.appearance import real_table_texture

    texture, x0, y0, cell = real_table_texture(str(shared_data / "sample_demos" / "0"), (0.0, 0.0, 1.0, 0.0))
    assert texture.ndim == 3 and texture.shape[-1] == 3 and np.isfinite(texture).all()
    assert 0.05 < float(texture.mean()) < 0.95 and float(texture.std()) > 0.01


def test_looks_rendered_together_equal_each_looks_own_render():
    from real_is_sim.policy.observations import REAL_IMAGE_SERIAL, ObservationRenderer
    from real_is_sim.standin.look import render_looks

    cell = load_pusht_cfg()
    looks = ObservationRenderer("real_image", 32, cell)._build_looks()[:3]  # three realities, one robot between them
    assert len({id(look.appearance) for look in looks}) == 1 and len({look.cfg.seed for look in looks}) == 3
    rng = np.random.default_rng(0)
    picked = [looks[0], looks[2], looks[0], looks[1]]
    poses = np.tile([0.5, 0.0, 0.02, 0.0, 0.0, 0.0, 1.0], (4, 1, 1))
    poses[:, 0, :2] += rng.uniform(-0.08, 0.08, (4, 2))
    qs = np.asarray(cell.robot.q_start) + rng.normal(0, 0.1, (4, 7))
    times = [0.0, 1.0, 2.0, 3.0]
    together = render_looks(picked, poses, qs, REAL_IMAGE_SERIAL, times)
    for b, look in enumerate(picked):  # bit-identical: the cache and the evaluations rest on it
        alone = look.render_state(poses[b], qs[b], [REAL_IMAGE_SERIAL], times[b])[REAL_IMAGE_SERIAL]
        np.testing.assert_array_equal(together[b], alone)
    assert np.abs(together[0] - together[2]).mean() > 1e-3  # the arm and the block moved between them
