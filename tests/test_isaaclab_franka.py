"""FRANKA_PUSHER_CFG kit-less on Newton (MJWarp, CPU): the committed USD loads offline and the joints hold and track.

One simulation for the module (gravity on, 120 Hz): 2 s holding the home pose, then a 0.2 rad step of every arm
joint towards the middle of its range, held 1.5 s; the tests read that recorded run.
"""

import importlib.util
import math
import re
import socket
import sys

import numpy as np
import pytest

pytest.importorskip("isaaclab", reason="Isaac Lab 3.0 is not installed (kit-less: pip install --no-deps isaaclab==3.0.0)")

pytestmark = pytest.mark.kitless

from pxr import Usd, UsdPhysics, UsdUtils  # noqa: E402

from real_is_sim.isaaclab.franka import (  # noqa: E402
    FRANKA_PUSHER_CFG,
    FRANKA_PUSHER_SOLVER_CFG,
    FRANKA_PUSHER_USD,
    HOME_JOINT_POS,
    JOINT_NAMES,
    PUSHER_BODY,
)
from real_is_sim.paths import REPO_ROOT  # noqa: E402
from real_is_sim.robot import franka  # noqa: E402

DT = 1.0 / 120.0
HOLD_STEPS = 240  # 2 s
STEP_STEPS = 180  # 1.5 s
SETTLED_STEPS = 60  # the last 0.5 s of the step
STEP = 0.2 * np.sign((franka.Q_MIN + franka.Q_MAX) / 2.0 - franka.Q_START)  # rad, towards mid-range
TOLERANCE = 0.01  # rad


def _no_network(*args, **kwargs):
    raise AssertionError("loading the Franka asset tried to open a network connection")


@pytest.fixture(scope="module")
def run():
    """Build the scene with the network cut, hold the home pose, step the targets; the recorded joint positions."""
    import torch
    from isaaclab.assets import ArticulationCfg
    from isaaclab.scene import InteractiveScene, InteractiveSceneCfg
    from isaaclab.sim import SimulationCfg, build_simulation_context
    from isaaclab.utils import configclass
    from isaaclab_newton.physics import NewtonCfg

    @configclass
    class SceneCfg(InteractiveSceneCfg):
        robot: ArticulationCfg = FRANKA_PUSHER_CFG.replace(prim_path="{ENV_REGEX_NS}/Robot")

    sim_cfg = SimulationCfg(dt=DT, device="cpu", physics=NewtonCfg(solver_cfg=FRANKA_PUSHER_SOLVER_CFG))
    with pytest.MonkeyPatch.context() as patch, build_simulation_context(sim_cfg=sim_cfg) as sim:
        patch.setattr(socket.socket, "connect", _no_network)
        scene = InteractiveScene(SceneCfg(num_envs=1, env_spacing=2.0))
        robot = scene["robot"]
        sim.reset()
        patch.undo()
        loaded = {
            "joint_names": list(robot.joint_names),
            "body_names": list(robot.body_names),
            "omni_modules": sorted(name for name in sys.modules if name.split(".")[0] == "omni"),
            "limits": robot.data.joint_pos_limits.torch[0].numpy().copy(),
            "pusher_pose": robot.data.body_pose_w.torch[0, robot.body_names.index(PUSHER_BODY)].numpy().copy(),
        }
        home = robot.data.default_joint_pos.torch.clone()
        robot.write_joint_position_to_sim_index(position=home)
        robot.write_joint_velocity_to_sim_index(velocity=torch.zeros_like(home))
        step = home.clone()
        step[0, :7] += torch.as_tensor(STEP, dtype=step.dtype)
        history = []
        for target, steps in ((home, HOLD_STEPS), (step, STEP_STEPS)):
            robot.actuators.target_command.set_position_index(value=target)
            for _ in range(steps):
                scene.write_data_to_sim()
                sim.step()
                scene.update(DT)
                history.append(robot.data.joint_pos.torch[0].numpy().copy())
    return {**loaded, "home": home[0].numpy(), "step": step[0].numpy(), "q": np.array(history)}


def test_asset_loads_offline_with_the_documented_names(run):
    assert run["joint_names"] == list(JOINT_NAMES)
    assert PUSHER_BODY in run["body_names"]
    # A reference Isaac Lab cannot resolve on disk sends it to omni.client (Kit only): nothing of omni may load.
    assert run["omni_modules"] == []
    layers, assets, unresolved = UsdUtils.ComputeAllDependencies(str(FRANKA_PUSHER_USD))
    assert (len(layers), assets, unresolved) == (1, [], []), "the USD must reference no other file"
    assert FRANKA_PUSHER_USD.stat().st_size < 2_000_000


def test_only_the_pusher_collides():
    stage = Usd.Stage.Open(str(FRANKA_PUSHER_USD))
    colliders = [str(p.GetPath()) for p in stage.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert colliders == [f"/panda/{PUSHER_BODY}/pusher"]


def test_pusher_body_is_the_urdf_tcp_at_home(run):
    from real_is_sim.robot.kinematics import PandaKinematics

    assert np.allclose(run["home"], [HOME_JOINT_POS[name] for name in JOINT_NAMES])
    expected = PandaKinematics().tool_position(franka.Q_START)
    assert np.linalg.norm(run["pusher_pose"][:3] - expected) < 1e-4


def test_joints_hold_the_home_pose(run):
    error = np.abs(run["q"][:HOLD_STEPS] - run["home"]).max(axis=0)
    assert error.max() < TOLERANCE, f"hold error per joint {np.round(error, 4)}"


def test_joints_track_a_step_target(run):
    moved = np.abs(run["q"][HOLD_STEPS + 5] - run["home"])[:7]
    assert moved.min() > 0.01, "the arm did not start towards the step target"
    error = np.abs(run["q"][-SETTLED_STEPS:] - run["step"]).max(axis=0)
    assert error.max() < TOLERANCE, f"settled step error per joint {np.round(error, 4)}"


def test_fingers_stay_within_their_limits(run):
    fingers = run["q"][:, 7:]
    lower, upper = run["limits"][7:, 0], run["limits"][7:, 1]
    assert np.all(fingers >= lower - 1e-4) and np.all(fingers <= upper + 1e-4), (
        f"finger range {fingers.min(axis=0)} .. {fingers.max(axis=0)}, limits {lower} .. {upper}"
    )


def test_usd_drives_match_the_config_gains():
    """The USD's own drives (for importers that read the file alone) carry the config's gains, in USD units."""
    stage = Usd.Stage.Open(str(FRANKA_PUSHER_USD))
    for actuator in FRANKA_PUSHER_CFG.actuators.values():
        pattern = actuator.joint_names_expr[0]
        for name in (n for n in JOINT_NAMES if re.fullmatch(pattern, n)):
            prim = stage.GetPrimAtPath(f"/panda/joints/{name}")
            kind = "angular" if prim.IsA(UsdPhysics.RevoluteJoint) else "linear"
            drive = UsdPhysics.DriveAPI(prim, kind)
            per_unit = math.radians(1.0) if kind == "angular" else 1.0  # USD angular gains are per degree
            assert drive.GetStiffnessAttr().Get() == pytest.approx(actuator.stiffness * per_unit, rel=1e-6), name
            assert drive.GetDampingAttr().Get() == pytest.approx(actuator.damping * per_unit, rel=1e-6), name
            assert drive.GetMaxForceAttr().Get() == pytest.approx(actuator.joint_effort_limit), name


def test_committed_usd_is_what_the_build_script_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("build_franka_usd", REPO_ROOT / "scripts" / "build_franka_usd.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rebuilt = script.build(tmp_path / "franka_pusher.usda")
    assert rebuilt.read_bytes() == FRANKA_PUSHER_USD.read_bytes(), "usd/franka_pusher.usda is stale: python scripts/build_franka_usd.py"
