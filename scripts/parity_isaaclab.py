"""The same scripted pushes on the core twin and on the Isaac Lab PushT env; prints one JSON object on its last line.

    .venv/bin/python scripts/parity_isaaclab.py

Two pushes, each run on the core twin (XPBD, its default; and MuJoCo with Newton's contacts) and on the Isaac Lab
env (Newton MJWarp with MuJoCo's own contacts, 240 Hz, one env):
- ``robot``: the Franka's pusher moves 12 cm along +y from 16 cm behind the block's centre of spheres at 0.1 m/s
  (the joint path of ``real_is_sim.twin.scripted.ScriptedPusher``, as in scripts/bench_twin.py), then 0.5 s of rest;
  the env is given the same joint targets every control step (needs ``real_is_sim.isaaclab.franka``).
- ``wrench``: a force and torque at the block's COM, 0.5 s on then 0.5 s of free sliding, written into the twin's
  ``object_wrench`` and, in Isaac Lab, through ``VisualForceActuator`` (no damping) into the block's wrench composer:
  the paths a visual force takes. No robot contact: this compares the block's dynamics on the table alone.
Targets (issue #12): final block poses within 5 mm and 3 deg of each other.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from real_is_sim.transforms import quat_rotate, yaw_of
from real_is_sim.twin import Twin, TwinCfg
from real_is_sim.twin.scripted import ScriptedPusher
from real_is_sim.twin.tblock import block_geometry
from real_is_sim_tasks.pusht import load_pusht_cfg

CONTROL_DT = 1.0 / 60.0
PUSH_TICKS, SLIDE_TICKS = 30, 30
WRENCH = np.array([1.5, 0.4, 0.0, 0.0, 0.0, 0.01])  # N, N m: beats the 0.98 N static friction and turns the block
PUSH_Z = 0.035  # m: pusher centre height (scripts/bench_twin.py)
SETTLE_TICKS, REST_TICKS = 30, 30


def robot_plan(task) -> list[np.ndarray]:
    """Joint targets: ``SETTLE_TICKS`` at the start of the push, the push, ``REST_TICKS`` at its end."""
    pusher = ScriptedPusher(task)
    geometry = block_geometry(task)
    center = geometry.start_pose[:3] + quat_rotate(geometry.start_pose[3:7], geometry.centers.mean(axis=0))
    direction = np.array([0.0, 1.0, 0.0])
    begin = center - 0.16 * direction
    begin[2] = PUSH_Z
    q0 = pusher.kinematics.solve(pusher.to_base(begin), pusher.rotation, pusher.q_start)
    path = list(pusher.joint_path(np.array([begin, begin + 0.12 * direction]), 0.1, CONTROL_DT, q0))
    return [q0] * SETTLE_TICKS + path + [path[-1]] * REST_TICKS


def wrench_at(tick: int) -> np.ndarray:
    return WRENCH if tick < PUSH_TICKS else np.zeros(6)


def core_runs(solver: str, plan: list[np.ndarray]) -> dict[str, np.ndarray]:
    task = load_pusht_cfg()
    results = {}
    twin = Twin(task, 1, TwinCfg(solver=solver))
    for tick in range(PUSH_TICKS + SLIDE_TICKS):
        twin.object_wrench[:] = wrench_at(tick)
        twin.step()
    results["wrench"] = twin.object_poses()[0, 0]
    twin.object_wrench[:] = 0.0
    twin.reset(robot_q=plan[0][None])
    for q in plan:
        twin.step(q[None])
    results["robot"] = twin.object_poses()[0, 0]
    return results


def isaaclab_runs(plan: list[np.ndarray]) -> dict[str, np.ndarray]:
    from isaaclab.sim import SimulationContext

    from real_is_sim.isaaclab.actuator import VisualForceActuator, VisualForceActuatorCfg
    from real_is_sim.isaaclab.tasks.pusht_env import PushTEnv
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import PushTEnvCfg_PLAY

    cfg = PushTEnvCfg_PLAY()
    cfg.scene.num_envs = 1
    env = PushTEnv(cfg)
    results = {}
    try:
        env.reset()
        actuator = VisualForceActuator(VisualForceActuatorCfg(linear_damping=0.0, angular_damping=0.0), env.block)
        hold = env.arm_targets.clone()
        for tick in range(PUSH_TICKS + SLIDE_TICKS):
            actuator.apply(torch.as_tensor(wrench_at(tick), dtype=torch.float32)[None, None])
            env.step(hold)
        results["wrench"] = env.block_pose()[0].double().numpy()
        actuator.clear()
        env.reset()
        joints = env.robot.data.default_joint_pos.torch.clone()
        joints[:, env.arm_joint_ids] = torch.as_tensor(plan[0], dtype=torch.float32)
        env.robot.write_joint_position_to_sim_index(position=joints)
        for q in plan:
            env.step(torch.as_tensor(q, dtype=torch.float32)[None])
        results["robot"] = env.block_pose()[0].double().numpy()
    finally:
        env.close()
        SimulationContext.clear_instance()
    return results


def difference(a: np.ndarray, b: np.ndarray) -> dict:
    yaw = np.degrees(yaw_of(a[3:7]) - yaw_of(b[3:7]))
    return {"position_mm": round(float(np.linalg.norm(a[:3] - b[:3]) * 1000), 2),
            "yaw_deg": round(float(abs((yaw + 180.0) % 360.0 - 180.0)), 2)}


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    task = load_pusht_cfg()
    plan = robot_plan(task)
    runs, seconds = {}, {}
    for name, run in (("core_xpbd", lambda: core_runs("xpbd", plan)), ("core_mujoco", lambda: core_runs("mujoco", plan)),
                      ("isaaclab_mjwarp", lambda: isaaclab_runs(plan))):
        clock = time.perf_counter()
        runs[name] = run()
        seconds[name] = round(time.perf_counter() - clock, 1)
    start = block_geometry(task).start_pose
    summary = {"wrench": WRENCH.tolist(), "seconds": seconds}
    for push in ("robot", "wrench"):
        poses = {name: result[push] for name, result in runs.items()}
        summary[push] = {
            "travel_mm": {k: round(float(np.linalg.norm(v[:2] - start[:2]) * 1000), 2) for k, v in poses.items()},
            "yaw_deg": {k: round(float(np.degrees(yaw_of(v[3:7]))), 2) for k, v in poses.items()},
            "isaaclab_vs_core_xpbd": difference(poses["isaaclab_mjwarp"], poses["core_xpbd"]),
            "isaaclab_vs_core_mujoco": difference(poses["isaaclab_mjwarp"], poses["core_mujoco"]),
            "core_mujoco_vs_core_xpbd": difference(poses["core_mujoco"], poses["core_xpbd"]),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
