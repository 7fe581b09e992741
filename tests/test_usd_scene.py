"""The USD scene's T-block, loaded by Newton's USD importer, equals the programmatically built one."""

import newton
import numpy as np
import pytest
from pxr import Usd, UsdVol

from real_is_sim.twin.scene import ContactSettings, add_block
from real_is_sim.twin.tblock import block_geometry
from real_is_sim.twin.usd_scene import BLOCK_PATH, write_scene
from real_is_sim_tasks.pusht import REAL_YAML, load_pusht_cfg


def _sphere_shapes(builder, body):
    return [s for s in range(builder.shape_count) if builder.shape_body[s] == body and builder.shape_type[s] == newton.GeoType.SPHERE]


def _assert_same_block(usd_path, task):
    imported = newton.ModelBuilder()
    imported.add_usd(str(usd_path))
    body = imported.body_label.index(BLOCK_PATH)
    reference = newton.ModelBuilder()
    ref_body = add_block(reference, block_geometry(task), task.physical, ContactSettings(gap=0.005, margin=0.0))
    spheres, ref_spheres = _sphere_shapes(imported, body), _sphere_shapes(reference, ref_body)
    assert len(spheres) == len(ref_spheres)
    np.testing.assert_allclose([imported.shape_scale[s][0] for s in spheres], reference.shape_scale[ref_spheres[0]][0], atol=1e-7)
    assert imported.body_mass[body] == pytest.approx(reference.body_mass[ref_body], abs=1e-6)
    np.testing.assert_allclose(np.array(imported.body_inertia[body]), np.array(reference.body_inertia[ref_body]), atol=1e-6)
    np.testing.assert_allclose(np.array(imported.body_com[body]), np.array(reference.body_com[ref_body]), atol=1e-6)
    centers = np.sort(np.array([imported.shape_transform[s].p for s in spheres]), axis=0)
    ref_centers = np.sort(np.array([reference.shape_transform[s].p for s in ref_spheres]), axis=0)
    np.testing.assert_allclose(centers, ref_centers, atol=1e-6)


def test_procedural_scene_round_trip(tmp_path):
    task = load_pusht_cfg(overrides=["physical.com_offset=[0.01,-0.02,0.0]"])  # off-centre COM: principal axes matter
    _assert_same_block(write_scene(tmp_path / "scene.usda", task), task)


def test_real_scene_round_trip_with_gaussians(tmp_path, shared_data):
    task = load_pusht_cfg(REAL_YAML)
    path = write_scene(tmp_path / "scene.usda", task)
    _assert_same_block(path, task)
    stage = Usd.Stage.Open(str(path))
    splat = UsdVol.ParticleField3DGaussianSplat(stage.GetPrimAtPath(BLOCK_PATH + "/Gaussians"))
    n = len(splat.GetPositionsAttr().Get())
    assert n == 498
    assert len(splat.GetOrientationsAttr().Get()) == n and len(splat.GetScalesAttr().Get()) == n
    assert len(splat.GetOpacitiesAttr().Get()) == n and len(splat.GetRadianceSphericalHarmonicsCoefficientsAttr().Get()) == n
