"""A recorded deploy session exported as a time-sampled USD stage: what it holds matches the recording."""

import json
import shutil

import numpy as np
import pytest
from pxr import Usd, UsdGeom, UsdValidation, UsdVol

from real_is_sim.bridge import load_bridge_cfg
from real_is_sim.bridge.session import DeploySession
from real_is_sim.bridge.usd_export import export_session_usd
from real_is_sim.cli import main
from real_is_sim.errors import DataError
from real_is_sim.gaussians.io import read_usd
from real_is_sim.robot.kinematics import PandaKinematics
from real_is_sim.task import import_task
from real_is_sim.transforms import pose_to_matrix
from real_is_sim.twin.tblock import block_geometry

OFFSET = [0.015, 0.0, 0.1]  # reality's block starts 1.5 cm / 5.7 deg away from the twin's


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    out = tmp_path_factory.mktemp("usd") / "session"
    cfg = load_bridge_cfg("standin", overrides=["cameras.num_cameras=2", "cameras.width=160", "cameras.height=90",
                                                "loop.realtime=false", "recording.cameras=false",
                                                f"initial_offset={OFFSET}", f"recording.out={out}"])
    DeploySession(cfg).run(duration_s=0.5)
    twin = np.genfromtxt(out / "twin.csv", delimiter=",", names=True)
    truth = np.genfromtxt(out / "ground_truth.csv", delimiter=",", names=True)
    path = export_session_usd(out)
    return out, cfg, twin, truth, path


def _pose(row, names=("x", "y", "z", "qx", "qy", "qz", "qw")):
    return np.array([row[n] for n in names])


def _sampled_pose(prim, time):
    xform = UsdGeom.Xformable(prim)
    translate, orient = xform.GetOrderedXformOps()
    q = orient.Get(time)
    return np.array([*translate.Get(time), *q.GetImaginary(), q.GetReal()])


def test_the_block_follows_the_recorded_ticks(session):
    out, _, twin, _, path = session
    assert path == out / "session.usda" and path.read_text().startswith("#usda")
    stage = Usd.Stage.Open(str(path))
    assert stage.GetTimeCodesPerSecond() == 60 and UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    ticks = np.rint(twin["t"] * 60)
    assert len(twin) == 30 and (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (ticks[0], ticks[-1]) == (1, 30)
    block = stage.GetPrimAtPath("/World/TBlock")
    ops = UsdGeom.Xformable(block).GetOrderedXformOps()
    assert [op.GetOpName() for op in ops] == ["xformOp:translate", "xformOp:orient"]
    assert ops[0].GetTimeSamples() == ops[1].GetTimeSamples() == list(ticks)
    for k in (0, 7, 18, 29):  # each tick's sample is that row of twin.csv, to double precision
        np.testing.assert_allclose(_sampled_pose(block, ticks[k]), _pose(twin[k]), rtol=0, atol=1e-12)
    assert np.linalg.norm(_pose(twin[-1])[:3] - _pose(twin[0])[:3]) > 0.005  # so the samples are told apart


def test_the_block_carries_its_gaussians_in_the_body_frame(session):
    _, cfg, _, _, path = session
    stage = Usd.Stage.Open(str(path))
    prim = stage.GetPrimAtPath("/World/TBlock/Gaussians")
    assert prim.IsA(UsdVol.ParticleField3DGaussianSplat)
    cloud = read_usd(path, "/World/TBlock/Gaussians")  # the project's own reader takes it back
    # the procedural block: one Gaussian per sphere, on the sphere centres, in the block's frame (not the world)
    geometry = block_geometry(import_task(cfg.task_module).load_cfg(cfg.task))
    assert len(cloud) == len(geometry.centers) > 50
    np.testing.assert_allclose(cloud.means.numpy(), geometry.centers, atol=1e-6)
    spheres = [p for p in stage.GetPrimAtPath("/World/TBlock/Spheres").GetChildren() if p.IsA(UsdGeom.Sphere)]
    assert len(spheres) == len(geometry.centers)


def test_the_robot_links_move_as_forward_kinematics_of_the_recorded_q(session):
    _, cfg, twin, _, path = session
    stage = Usd.Stage.Open(str(path))
    tcp = stage.GetPrimAtPath("/World/Robot/panda_hand_tcp")
    base = pose_to_matrix(np.asarray(import_task(cfg.task_module).load_cfg(cfg.task).robot.base_pose))
    kinematics = PandaKinematics()
    positions = []
    for k in (0, len(twin) - 1):
        q = np.array([twin[k][f"q{j}"] for j in range(1, 8)])
        expected = base @ kinematics.tool_pose(q).homogeneous
        world = np.array(UsdGeom.XformCache(float(np.rint(twin["t"][k] * 60))).GetLocalToWorldTransform(tcp)).T
        np.testing.assert_allclose(world, expected, atol=1e-9)
        positions.append(world[:3, 3])
    assert np.linalg.norm(positions[1] - positions[0]) > 0.01  # the hand really moved during the push
    assert stage.GetPrimAtPath("/World/Robot/panda_hand_tcp/Pusher").IsA(UsdGeom.Capsule)


def test_reality_is_a_second_block_away_from_the_twin_at_the_start(session):
    _, _, twin, truth, path = session
    stage = Usd.Stage.Open(str(path))
    reality = stage.GetPrimAtPath("/World/Reality/TBlock")
    start = float(np.rint(truth["t"][0] * 60))
    np.testing.assert_allclose(_sampled_pose(reality, start), _pose(truth[0]), rtol=0, atol=1e-12)
    twin_start = _sampled_pose(stage.GetPrimAtPath("/World/TBlock"), start)
    assert np.linalg.norm(_sampled_pose(reality, start)[:2] - twin_start[:2]) > 0.01
    color = UsdGeom.PrimvarsAPI(reality).GetPrimvar("displayColor").Get()
    assert color != UsdGeom.PrimvarsAPI(stage.GetPrimAtPath("/World/TBlock/Spheres")).GetPrimvar("displayColor").Get()


def test_the_stage_is_self_contained_and_valid(session):
    path = session[-1]
    stage = Usd.Stage.Open(str(path))
    assert stage.GetRootLayer().GetExternalReferences() == () and stage.GetCompositionErrors() == []
    validators = UsdValidation.ValidationRegistry().GetOrLoadAllValidators()  # usd 26: ComplianceChecker's successor
    assert len(validators) > 20
    errors = UsdValidation.ValidationContext(validators).Validate(stage)
    assert [e.GetMessage() for e in errors] == []


def test_command_line_prints_path_frames_bodies(session, tmp_path, capsys):
    out = session[0]
    target = tmp_path / "copy.usda"
    assert main(["export-usd", str(out), "--out", str(target)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["path"] == str(target) and summary["frames"] == 30
    assert {"/World/TBlock", "/World/Robot/panda_hand_tcp", "/World/Reality/TBlock"} <= set(summary["bodies"])
    assert "/World/Table" not in summary["bodies"]


def test_bad_sessions_are_one_data_error_naming_the_file(session, tmp_path):
    with pytest.raises(DataError, match="config.yaml"):
        export_session_usd(tmp_path / "nothing_here")
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(session[0] / "config.yaml", broken)
    with pytest.raises(DataError, match="twin.csv is missing"):
        export_session_usd(broken)
    lines = (session[0] / "twin.csv").read_text().splitlines()
    (broken / "twin.csv").write_text("\n".join(lines[:3] + [lines[3].replace(",", ",x", 1)]) + "\n")
    with pytest.raises(DataError, match="twin.csv is malformed"):
        export_session_usd(broken)
    assert not (broken / "session.usda").exists()
