"""The core's virtual cameras against the Isaac Lab env's cameras (kit-less) for the same state (docs/dataset.md).

    python scripts/parity_virtual_cameras.py

One PushT env with its static and wrist cameras; the arm is driven above the block (two heights), then the env's
images are compared with ``VirtualCameras.render`` of the env's block pose and arm joints: the block's pixels (the env
renders them on black, the core over the table model, so each is masked its own way), their IoU and centroid
distance. The core's static view is rendered without the arm here, as the env's is. Prints one JSON line.
"""

from __future__ import annotations

import json
import tempfile

import numpy as np
import torch

from real_is_sim.cli import quiet_warp

WIDTH, HEIGHT = 128, 96


def main() -> int:
    quiet_warp()
    from isaaclab.sim import SimulationContext

    from real_is_sim.isaaclab.tasks.pusht_env import PushTEnv
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import PushTEnvCfg
    from real_is_sim.render.virtual_cameras import VirtualCameras
    from real_is_sim.transforms import quat_rotate
    from real_is_sim.twin.tblock import block_geometry
    from real_is_sim_tasks.pusht import object_mask
    from real_is_sim_tasks.pusht.scripted import ScriptedPusher

    cfg = PushTEnvCfg(asset_dir=tempfile.mkdtemp())
    cfg.cameras = ("static", "wrist")
    cfg.camera_width, cfg.camera_height = WIDTH, HEIGHT
    cfg.scene.num_envs = 1
    cfg.seed = 0
    env = PushTEnv(cfg)
    try:
        env.reset()
        virtual = VirtualCameras(env.task, render_robot=False)
        pusher, geometry = ScriptedPusher(env.task), block_geometry(env.task)
        centre = geometry.start_pose[:3] + quat_rotate(geometry.start_pose[3:7], geometry.centers.mean(axis=0))
        result = {}
        for height in (0.15, 0.08):
            above = centre + np.array([0.02, 0.03, height])
            q_target = pusher.kinematics.solve(pusher.to_base(above), pusher.rotation, pusher.q_start)
            for _ in range(60):  # 1 s: the env's drives settle
                obs, *_ = env.step(torch.as_tensor(q_target, dtype=torch.float32)[None])
            q = env.robot.data.joint_pos.torch[0, env.arm_joint_ids].double().numpy()
            pose = env.block_pose()[0].double().numpy()
            for kind in ("static", "wrist"):
                theirs = obs[f"{kind}_rgb"][0].numpy().max(axis=-1) > 60
                ours = object_mask(virtual.render(kind, pose[None], q, WIDTH, HEIGHT))
                iou = (theirs & ours).sum() / max((theirs | ours).sum(), 1)
                shift = np.linalg.norm(np.argwhere(theirs).mean(0) - np.argwhere(ours).mean(0))
                result[f"{kind}_{int(height * 100)}cm"] = {"iou": round(float(iou), 3), "centroid_px": round(float(shift), 2)}
    finally:
        env.close()
        SimulationContext.clear_instance()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
