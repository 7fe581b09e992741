"""Controls: the same evaluation with the policy replaced by something that does not read the block, so a success
rule that calls them successful is measuring something else (docs/policy.md, Learning proof).

``replay``: a demonstration's commanded joints and progress, open loop: start pose k gets the dataset's successful
demonstration k mod D, from its start, chunk by chunk at the time reached (the progress labels run to 1 whatever the
block does). ``hold``: the arm kept at ``q_start``, progress 0. Both answer ``observe`` / ``chunks`` as
``offline.ChunkSource`` does. ``expert``: the scripted expert (the demonstrations' teacher) in each world, its own
60 Hz targets, no progress output: the reference a policy is measured against, and, being per world, the check that
N worlds evaluated together give what N single-world runs give.
"""

from __future__ import annotations

import numpy as np

CONTROLS = ("replay", "hold", "expert")
EXPERT_PLANNER_WORLDS = 16  # as the demonstrations were collected (demos.collect)


class ReplayControl:
    def __init__(self, policy_cfg, dataset_root: str, pose_indices: list[int], execute: int | None) -> None:
        from real_is_sim.demos.dataset import load_dataset

        demos = [e for e in load_dataset(dataset_root).episodes if e.success]
        self.cfg = policy_cfg
        self.demos = [demos[i % len(demos)] for i in pose_indices]
        self.calls = np.zeros(len(pose_indices), dtype=int)
        self.call_s = (execute or policy_cfg.waypoints) * policy_cfg.horizon_s / policy_cfg.waypoints

    def observe(self, object_poses: np.ndarray, robot_q: np.ndarray) -> None:
        pass  # blind by design

    def chunks(self, env_ids) -> np.ndarray:
        from real_is_sim.policy.data import action_chunks

        out = []
        for i in np.asarray(env_ids, dtype=int):
            demo = self.demos[i]
            frame = np.searchsorted(demo.t, min(self.calls[i] * self.call_s, demo.t[-1]))
            out.append(action_chunks(demo.t, demo.q_cmd, demo.progress, np.array([frame]), self.cfg.waypoints,
                                     self.cfg.horizon_s)[0])
            self.calls[i] += 1
        return np.stack(out)


class HoldControl:
    def __init__(self, policy_cfg, q_start) -> None:
        self.chunk = np.concatenate([np.asarray(q_start, dtype=np.float64), [0.0]])
        self.waypoints = policy_cfg.waypoints

    def observe(self, object_poses: np.ndarray, robot_q: np.ndarray) -> None:
        pass

    def chunks(self, env_ids) -> np.ndarray:
        return np.tile(self.chunk, (len(env_ids), self.waypoints, 1))


class ExpertControl:
    """One ``PushTExpert`` per world, seeded by its episode, reset at the world's start pose."""

    def __init__(self, cell, seeds: list[int], start_poses: np.ndarray, q_start) -> None:
        from real_is_sim_tasks.pusht.expert import PushTExpert

        self.experts = [PushTExpert(cell, planner_worlds=EXPERT_PLANNER_WORLDS, seed=int(s)) for s in seeds]
        for expert, pose in zip(self.experts, start_poses):
            expert.reset(pose, q_start)

    def targets(self, t: float, object_poses: np.ndarray, robot_q: np.ndarray) -> np.ndarray:
        """Joint targets [N, 7] for this tick from the block poses [N, n_obj, 7] and joints [N, 7]."""
        return np.stack([e.act(t, object_poses[i, 0], robot_q[i]) for i, e in enumerate(self.experts)])


def control_source(control: str, policy_cfg, dataset_root: str, pose_indices: list[int], execute: int | None, q_start):
    if control == "replay":
        return ReplayControl(policy_cfg, dataset_root, pose_indices, execute)
    return HoldControl(policy_cfg, q_start)
