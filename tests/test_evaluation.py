"""Evaluation (real_is_sim.evaluation): statistics against known values, the success rules on crafted poses, gym-pusht
coverage, tracking failures, a tiny offline and online evaluation (resumable, CLI), agreement files and plot.
Ray: tests/test_evaluation_ray.py."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.evaluation.agreement import compare_checkpoints, load_result, plot_sweep, sweep_agreement
from real_is_sim.evaluation.online import tracking_failures
from real_is_sim.evaluation.spec import EvalSpec, episode_seed, episodes, plan_units
from real_is_sim.evaluation.stats import (agreement, compare_rates, fisher_exact, kendall_tau, mcnemar_exact, mmrv,
                                          pearson, two_proportion_z, wilson_interval)
from real_is_sim.transforms import quat_from_yaw, quat_multiply, quat_rotate
from real_is_sim_tasks.pusht import goal_errors, is_success, load_pusht_cfg
from real_is_sim_tasks.pusht import coverage as coverage_module
from real_is_sim_tasks.pusht.coverage import coverage, coverages

CFG = load_pusht_cfg()
GOAL = np.asarray(CFG.goal.pose, dtype=np.float64)
T_AREA = 0.2 * 0.05 + 0.05 * 0.15  # bar + stem of pusht.yaml


def moved(dx_body=0.0, dy_body=0.0, dyaw=0.0) -> np.ndarray:
    """The goal pose shifted along its own body axes and turned about its body origin."""
    pose = GOAL.copy()
    pose[:3] += quat_rotate(GOAL[3:7], np.array([dx_body, dy_body, 0.0]))
    pose[3:7] = quat_multiply(quat_from_yaw(dyaw), GOAL[3:7])
    return pose


# -- statistics -----------------------------------------------------------------------------------------------------


def test_wilson_interval_known_values():
    low, high = wilson_interval(3, 40)  # docs/policy.md: 7.5 % [2.6, 19.9]
    assert (round(low, 3), round(high, 3)) == (0.026, 0.199)
    assert wilson_interval(0, 20) == (0.0, pytest.approx(3.8415 / 23.8415, abs=1e-4))  # z^2 / (n + z^2)
    low, high = wilson_interval(10, 20)
    assert low == pytest.approx(1 - high) and (round(low, 4), round(high, 4)) == (0.2993, 0.7007)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(DataError):
        wilson_interval(5, 4)


def test_significance_two_proportion_and_fisher_against_hand_values():
    z, p = two_proportion_z(15, 20, 5, 20)  # pooled 0.5, se sqrt(0.25 * 0.1) = 0.1581, z = 0.5 / 0.1581
    assert z == pytest.approx(math.sqrt(10), rel=1e-9) and p == pytest.approx(0.0015654, abs=1e-6)
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(34 / 70)  # Fisher's tea tasting: 1 + 16 + 16 + 1 of 70
    assert fisher_exact(4, 4, 0, 4) == pytest.approx(2 / 70)
    assert two_proportion_z(0, 10, 0, 10) == (0.0, 1.0)
    result = compare_rates(48, 60, 46, 60)  # the paper's Fig. 8a: 80.0 % vs 76.7 % over 60 trials each
    assert result["difference"] == pytest.approx(0.0333, abs=1e-4) and not result["significant_fisher"]
    scipy_stats = pytest.importorskip("scipy.stats")
    for table in ((15, 20, 5, 20), (48, 60, 46, 60), (3, 20, 0, 20), (7, 9, 2, 11)):
        k1, n1, k2, n2 = table
        expected = scipy_stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
        assert fisher_exact(*table) == pytest.approx(expected, rel=1e-9)
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # 6 discordant pairs all one way: 2 x 0.5^6
    assert mcnemar_exact(1, 6) == pytest.approx(2 * 8 / 128)  # 2 x (1 + 7) / 2^7
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    for a, b in ((2, 9), (5, 1), (4, 12)):
        assert mcnemar_exact(a, b) == pytest.approx(scipy_stats.binomtest(a, a + b, 0.5).pvalue, rel=1e-9)


def test_pearson_kendall_and_mmrv_against_hand_computed_cases():
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)  # 2 concordant, 1 discordant pair
    assert kendall_tau([0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.5, 0.9]) == 1.0
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    # MMRV: identical order -> 0; fully reversed (R 0.3, 0.2, 0.1): max violations 0.2, 0.1, 0.2 -> 0.5 / 3
    assert mmrv([0.1, 0.2, 0.3], [0.1, 0.25, 0.9]) == 0.0
    assert mmrv([0.1, 0.2, 0.3], [0.3, 0.2, 0.1]) == pytest.approx(0.5 / 3)
    # one swapped pair (1, 2) with online gap 0.1, counted for i = 1 and i = 2 of 4
    assert mmrv([0.1, 0.3, 0.2, 0.4], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(0.05)
    # a tie offline: (S_1 > S_0) is False, (R_1 > R_0) True: a violation of 0.2 for i = 1 only
    assert mmrv([0.2, 0.2], [0.1, 0.3]) == pytest.approx(0.1)
    stats = agreement([0.1, 0.3, 0.2, 0.4], [0.1, 0.2, 0.3, 0.4])
    assert stats["kendall_tau"] == pytest.approx(4 / 6) and stats["max_abs_gap"] == pytest.approx(0.1)
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for _ in range(5):
        x, y = rng.integers(0, 6, 8) / 5, rng.integers(0, 6, 8) / 5  # ties on purpose
        assert kendall_tau(x, y) == pytest.approx(scipy_stats.kendalltau(x, y).statistic)
        assert pearson(x, y) == pytest.approx(scipy_stats.pearsonr(x, y).statistic)
    with pytest.raises(DataError):
        mmrv([0.1], [0.2])


# -- success rules --------------------------------------------------------------------------------------------------


def test_coverage_identical_shifted_turned_and_far():
    assert coverage(CFG, GOAL) == pytest.approx(1.0)
    # 1 cm along the bar: bar (0.19 x 0.05) + stem (0.04 x 0.15) still overlap
    assert coverage(CFG, moved(dx_body=0.01)) == pytest.approx((0.19 * 0.05 + 0.04 * 0.15) / T_AREA)
    # 1 cm along the stem's axis: bar 0.2 x 0.04, stem 0.05 x 0.14, and 1 cm of stem inside the goal's bar
    assert coverage(CFG, moved(dy_body=0.01)) == pytest.approx((0.2 * 0.04 + 0.05 * 0.14 + 0.05 * 0.01) / T_AREA)
    # turned 180 deg about the bar's centre: the bar covers itself, the stem points the other way
    assert coverage(CFG, moved(dyaw=math.pi)) == pytest.approx(0.2 * 0.05 / T_AREA)
    assert coverage(CFG, moved(dx_body=0.3)) == 0.0
    values = coverages(CFG, np.stack([GOAL, moved(dx_body=0.01), moved(dx_body=0.06)]))
    assert values[0] == pytest.approx(1.0) and values[1] == pytest.approx(0.8857, abs=1e-4) and values[2] == 0.0


def test_coverage_raster_of_sphere_discs_for_object_file_blocks(monkeypatch):
    monkeypatch.setattr(coverage_module, "footprint_polygons", lambda cfg: None)  # as for a scanned block
    assert coverage(CFG, GOAL) == pytest.approx(1.0)
    assert coverage(CFG, moved(dx_body=0.01)) == pytest.approx(0.8857, abs=0.03)  # discs approximate the T


def test_rules_on_crafted_poses():
    from real_is_sim.evaluation.offline import RuleClock

    assert is_success(moved(dx_body=0.019), CFG.goal) and not is_success(moved(dx_body=0.021), CFG.goal)
    assert is_success(moved(dyaw=0.14), CFG.goal) and not is_success(moved(dyaw=0.16), CFG.goal)
    clock = RuleClock(3, CFG)
    poses = np.stack([moved(dx_body=0.002), moved(dx_body=0.015), moved(dx_body=0.1)])  # coverage 0.98, 0.83, 0
    clock.update(0.5, poses, np.array([0.95, 0.5, 0.91]), check_coverage=True)
    rows = [clock.row(i, poses[i]) for i in range(3)]
    assert [r["ground_truth"] for r in rows] == [True, True, False]
    assert [r["coverage"] for r in rows] == [True, False, False]
    assert [r["progress"] for r in rows] == [True, False, True]
    assert rows[0]["coverage_time_s"] == 0.5 and rows[1]["final_coverage"] == pytest.approx(0.8286, abs=1e-4)


def test_tracking_failures_need_half_a_second_and_say_whether_they_recovered():
    dt = 1 / 60
    position = np.r_[np.zeros(30), np.full(40, 0.03), np.zeros(10), np.zeros(20), np.zeros(5), np.full(40, 0.05)]
    angle = np.r_[np.zeros(80), np.full(20, 0.2), np.zeros(45)]  # 11.5 deg for 1/3 s: too short
    events = tracking_failures(position, angle, dt)
    assert [(e["start_s"], e["recovered"]) for e in events] == [(0.5, True), (round(105 * dt, 3), False)]
    assert events[0]["duration_s"] == pytest.approx(40 * dt, abs=1e-3)
    assert tracking_failures(np.full(30, 0.1), np.zeros(30), dt) == []  # exactly 0.5 s is not more than 0.5 s


# -- protocols and episodes -----------------------------------------------------------------------------------------


def test_protocols_seeds_and_units():
    quick = EvalSpec.for_protocol("quick", ["a.pt", "b.pt"])
    assert quick.protocol_label() == "quick" and quick.trials == 1
    paper = EvalSpec.for_protocol("paper", ["a.pt"], mode="online", overrides=["sensor.kp=3"])
    assert (paper.trials, paper.protocol_label()) == (3, "paper") and paper.overrides == ["sensor.kp=3"]
    online_quick = EvalSpec.for_protocol("quick", ["a.pt"], mode="online")
    assert online_quick.poses == [0, 6, 13, 19] and "cameras.num_cameras=2" in online_quick.overrides
    quick.trials = 2
    assert quick.protocol_label() == "custom"
    assert episode_seed(0, 0, 0) == 821328062  # fixed forever: results of earlier runs stay comparable
    eps = episodes(EvalSpec.for_protocol("paper", ["a.pt", "b.pt"]), CFG)
    assert len(eps) == 2 * 20 * 3 and len({e.seed for e in eps}) == 60  # seeds: (start pose, trial), not checkpoint
    units = plan_units(EvalSpec(["a.pt"], worlds=8), eps[:60])
    assert [len(u.episodes) for u in units] == [8] * 7 + [4]
    cooler = EvalSpec(["a.pt"], worlds=8, noise_scale=0.5)  # another sampling temperature: other episodes
    assert plan_units(cooler, eps[:8])[0].noise_scale == 0.5
    assert cooler.key(eps[0]) == EvalSpec(["a.pt"]).key(eps[0]) + "|n0.5"
    faster = EvalSpec(["a.pt"], worlds=8, noise_scale=0.5, tempo=2.0)  # another execution speed: other episodes
    assert plan_units(faster, eps[:8])[0].tempo == 2.0 and faster.key(eps[0]) == cooler.key(eps[0]) + "|T2"
    honest = EvalSpec(["a.pt"], mode="online", appearance="realistic", overrides=["standin.appearance.arm_shadow=0"])
    (unit,) = plan_units(honest, eps[:1])
    assert honest.key(eps[0]) == EvalSpec(["a.pt"], mode="online").key(eps[0]) + "|Arealistic"  # other episodes
    assert unit.appearance == "realistic" and unit.overrides[-1] == "standin.appearance.arm_shadow=0"  # the user's win
    from real_is_sim.bridge.config import load_bridge_cfg
    from real_is_sim.standin.appearance import KNOBS, HiddenAppearance

    assert load_bridge_cfg("standin", overrides=unit.overrides[:-1]).standin.appearance == HiddenAppearance.realistic()
    assert load_bridge_cfg("standin", overrides=unit.overrides).standin.appearance.knobs_on() == [
        k for k in KNOBS if k != "arm_shadow"]
    assert plan_units(EvalSpec(["a.pt"], mode="online"), eps[:1])[0].overrides == []  # "twin": the stand-in as modelled
    calibrated = EvalSpec(["a.pt"], mode="online", appearance="realistic_calibrated")  # and the cameras hand-eye calibrated
    (unit,) = plan_units(calibrated, eps[:1])
    assert calibrated.key(eps[0]).endswith("|Arealistic_calibrated") and calibrated.key(eps[0]) != honest.key(eps[0])
    cfg = load_bridge_cfg("standin", overrides=unit.overrides)
    assert cfg.cameras.hand_eye and cfg.standin.appearance == HiddenAppearance.realistic()
    with pytest.raises(ConfigError, match="online runs only"):
        EvalSpec(["a.pt"], appearance="realistic")
    with pytest.raises(ConfigError, match="appearance"):
        EvalSpec(["a.pt"], mode="online", appearance="glossy")
    with pytest.raises(ConfigError):
        EvalSpec(["a.pt"], mode="sideways")
    with pytest.raises(ConfigError, match="noise_scale"):
        EvalSpec(["a.pt"], noise_scale=-1.0)
    with pytest.raises(ConfigError, match="tempo"):
        EvalSpec(["a.pt"], tempo=0.0)


# -- runs -----------------------------------------------------------------------------------------------------------


def write_tiny_checkpoint(root, frame_stride: int = 1, **policy) -> str:
    """A policy (pose unless ``policy`` says otherwise) trained 5 steps on 2 synthetic episodes in the default PushT
    cell."""
    import torch

    from real_is_sim.demos.dataset import DatasetWriter
    from real_is_sim.policy.config import PolicyCfg, TrainCfg
    from real_is_sim.policy.train import train

    torch.set_num_threads(1)
    q0 = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.785])
    writer = DatasetWriter(root / "dataset", fps=60, cell_yaml="")
    for x in (0.42, 0.5):
        writer.start_episode("push")
        for i in range(90):
            cmd = q0 + np.array([(x - 0.45) * i / 60, 0.1 * i / 60, 0, 0, 0, 0, 0])
            writer.add_frame(t=i / 60, object_poses=[[x, 0.0, 0.0, 0, 0, 0, 1.0]], q=cmd - 0.01, q_cmd=cmd)
        writer.end_episode(True)
    result = train(root / "dataset", PolicyCfg(hidden=64, cond_dim=64, **policy),
                   TrainCfg(steps=5, batch_size=16, warmup_steps=1, checkpoint_every=5, frame_stride=frame_stride), root / "run",
                   progress=False)
    return str(result.checkpoint)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    from real_is_sim_tasks.pusht.start_poses import load_start_poses

    (root / "two.json").write_text(json.dumps({"poses": load_start_poses()[[0, 13]].tolist()}))
    return write_tiny_checkpoint(root), root


def test_offline_evaluation_is_resumable_and_the_command_ends_in_json(tiny, monkeypatch, capsys):
    from real_is_sim.cli import main as cli_main
    from real_is_sim.evaluation import run

    checkpoint, root = tiny
    out = root / "offline.json"
    args = ["eval", "--checkpoint", checkpoint, "--out", str(out), "--start-poses", str(root / "two.json"),
            "--seconds", "1", "--worlds", "2"]
    assert cli_main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["protocol"] == "custom" and result["mode"] == "offline"
    summary = result["checkpoints"][0]
    assert summary["episodes"] == 2 and summary["training_steps"] == 5
    for rule in ("ground_truth", "coverage", "progress"):
        assert summary[rule]["n"] == 2 and len(summary[rule]["wilson95"]) == 2
    rows = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    assert [r["start"] for r in rows] == ["two_00", "two_01"] and rows[0]["seconds_limit"] == 1.0
    assert json.loads(out.read_text())["checkpoints"][0]["per_start_pose"][1] == {
        "start": "two_01", "trials": 1, "ground_truth": int(rows[1]["ground_truth"]),
        "coverage": int(rows[1]["coverage"]), "progress": int(rows[1]["progress"])}

    def must_not_run(*a, **k):
        raise AssertionError("a finished episode ran again")

    monkeypatch.setattr(run, "run_unit", must_not_run)
    assert cli_main(args) == 0  # everything is in offline.jsonl: nothing runs
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["checkpoints"] == result["checkpoints"]
    assert cli_main(["eval", "--checkpoint", str(root / "missing.pt"), "--out", str(root / "x.json")]) == 2


def test_controls_replace_the_policy_and_the_progress_rule_calls_a_blind_replay_a_success(tiny):
    from real_is_sim.demos.dataset import load_dataset
    from real_is_sim.evaluation.controls import HoldControl, ReplayControl
    from real_is_sim.evaluation.run import evaluate
    from real_is_sim.policy.checkpoint import load_checkpoint
    from real_is_sim.policy.data import action_chunks

    checkpoint, root = tiny
    policy, state = load_checkpoint(checkpoint)
    demos = load_dataset(state["dataset"]).episodes
    replay = ReplayControl(policy.cfg, state["dataset"], pose_indices=[0, 1, 2], execute=16)
    replay.chunks([0, 1, 2])
    second = replay.chunks([2])  # start pose 2 replays demonstration 0, its second call from 0.5 s on
    expected = action_chunks(demos[0].t, demos[0].q_cmd, demos[0].progress, np.array([30]), 32, 1.0)
    np.testing.assert_allclose(second, expected)
    hold = HoldControl(policy.cfg, CFG.robot.q_start).chunks([0, 1])
    assert hold.shape == (2, 32, 8) and np.all(hold[..., :7] == CFG.robot.q_start) and np.all(hold[..., 7] == 0)

    summaries = {}
    for control in ("replay", "hold"):
        spec = EvalSpec([checkpoint], protocol=None, start_poses=str(root / "two.json"), seconds=2.0, worlds=2,
                        control=control)
        result = evaluate(spec, root / f"control_{control}.json", log=None)
        summaries[control] = result["checkpoints"][0]
        rows = [json.loads(line) for line in (root / f"control_{control}.jsonl").read_text().splitlines()]
        assert {r["control"] for r in rows} == {control} and all(r["key"].endswith(f"|c{control}") for r in rows)
    assert summaries["replay"]["control"] == "replay"
    assert summaries["replay"]["progress"]["rate"] == 1.0 and summaries["replay"]["ground_truth"]["rate"] == 0.0
    assert summaries["hold"]["progress"]["rate"] == 0.0 and summaries["hold"]["ground_truth"]["rate"] == 0.0
    with pytest.raises(ConfigError, match="control"):
        EvalSpec([checkpoint], mode="online", control="hold")


def test_four_expert_worlds_evaluated_together_give_what_four_single_world_runs_give(tiny):
    from real_is_sim.evaluation.run import run_unit

    checkpoint, _ = tiny
    spec = EvalSpec([checkpoint], protocol=None, poses=[0, 6, 13, 19], seconds=3.0, worlds=4, control="expert")
    eps = episodes(spec, CFG)
    (together,) = plan_units(spec, eps)
    batched = run_unit(together)
    single = [run_unit(dataclasses.replace(together, episodes=[e]))[0] for e in eps]
    fields = ("ground_truth", "coverage", "final_distance_m", "final_yaw_error_rad", "max_coverage")
    assert [[r[f] for f in fields] for r in batched] == [[r[f] for f in fields] for r in single]
    start_distance = goal_errors(np.array([e.start_pose for e in eps]), CFG.goal)[0]
    moved = np.abs(np.array([r["final_distance_m"] for r in batched]) - start_distance) > 0.005
    assert moved.sum() >= 2  # the expert pushed blocks within 3 s


def test_failure_mining_finds_the_stall_and_one_pose_per_cluster():
    from real_is_sim.evaluation.mining import cluster_features, kmeans_representatives, stall_index

    dt = 0.5
    moving = [moved(dx_body=0.2 - 0.01 * k) for k in range(10)]  # 1 cm per step towards the goal
    stuck = [moved(dx_body=0.1, dyaw=2.0)] * 8  # then still, 10 cm and 2 rad off
    trace = np.array(moving + stuck)
    at_goal = is_success(trace, CFG.goal)
    assert stall_index(trace, dt, at_goal) == 10 + 6  # still for 3 s (6 samples) after it stopped moving
    assert stall_index(np.array([GOAL] * 12), dt, np.ones(12, bool)) is None  # still at the goal is no stall
    assert stall_index(trace[:12], dt, at_goal[:12]) is None
    waiting = np.array([trace[0]] * 8 + list(trace))  # 4 s untouched before the push: not a stall
    assert stall_index(waiting, dt, is_success(waiting, CFG.goal)) == 8 + 10 + 6

    rng = np.random.default_rng(0)
    centres = [moved(dx_body=0.1), moved(dy_body=0.1, dyaw=1.5), moved(dx_body=-0.1, dyaw=3.0)]
    group = np.repeat(np.arange(3), 5)
    poses = np.array([centres[g] for g in group])
    poses[:, :2] += rng.normal(0, 0.003, (15, 2))
    chosen = kmeans_representatives(cluster_features(poses), 3, seed=1)
    assert sorted(group[chosen]) == [0, 1, 2]  # one per cluster
    assert list(kmeans_representatives(cluster_features(poses[:2]), 3)) == [0, 1]  # fewer points than clusters: all


def test_mining_run_writes_start_poses_the_expert_accepts(tiny):
    from real_is_sim.evaluation.mining import mine, write_start_poses
    from real_is_sim_tasks.pusht.start_poses import StartPoseCheck, load_start_poses

    checkpoint, root = tiny
    spec = EvalSpec([checkpoint], protocol=None, random_poses=3, random_seed=200, poses=[20, 21, 22], seconds=1.0,
                    worlds=3)
    result = mine(spec, clusters=2, log=None)
    assert (result["episodes"], result["failures"]) == (3, 3)  # 5 training steps: nothing reaches the goal
    assert result["candidates"] == 3 and result["clusters"] == 2 and result["stalled"] == 0  # 1 s: too short to stall
    path = write_start_poses(root / "mined.json", result["start_poses"], {"mined_from": checkpoint})
    poses = load_start_poses(path)
    check = StartPoseCheck(CFG)
    assert len(poses) == 2 and all(check.problem(p) is None for p in poses)
    finals = np.array([r["pose"] for r in result["rows"]])
    assert all(np.any(np.all(np.isclose(finals, p, atol=1e-6), axis=1)) for p in poses)


def test_a_handover_demonstration_starts_where_the_policy_left_block_and_arm(tiny, tmp_path):
    from real_is_sim.demos.collect import HANDOVER_ATTEMPTS, collect
    from real_is_sim.demos.dataset import load_dataset
    from real_is_sim.demos.handover import PolicyHandover
    from real_is_sim_tasks.pusht.start_poses import load_start_poses

    checkpoint, root = tiny
    handover = PolicyHandover(checkpoint, after_s=(0.5, 0.5), seed=0)
    state = handover.state_after(load_start_poses()[0], 0)
    assert state.after_s == pytest.approx(0.5, abs=1e-3)
    assert np.abs(state.robot_q - np.asarray(CFG.robot.q_start)).max() > 1e-3  # the policy moved the arm
    np.testing.assert_array_equal(handover.state_after(load_start_poses()[0], 0).robot_q, state.robot_q)  # seeded

    result = collect("scripted", "offline", 1, str(root / "two.json"), tmp_path / "demos", handover=checkpoint,
                     handover_after_s=(0.5, 0.5), time_limit_s=0.25, progress=False)
    episode = load_dataset(tmp_path / "demos").episodes[0]
    assert result.recorded == result.handed_over == 1
    # the expert's first frame is where the policy left block and arm, in one of the attempts (an arm pose the
    # expert's IK cannot leave is drawn again)
    states = [handover.state_after(load_start_poses()[0], 0, attempt) for attempt in range(HANDOVER_ATTEMPTS)]
    assert any(np.allclose(episode.q[0], s.robot_q, atol=1e-6) and np.allclose(episode.object_poses[0, 0], s.object_pose, atol=1e-6)
               for s in states)
    assert not np.allclose(episode.q[0], CFG.robot.q_start, atol=1e-3)
    with pytest.raises(ConfigError, match="handover"):
        collect("teleop", "offline", 1, "random", tmp_path / "other", handover=checkpoint)
    with pytest.raises(ConfigError, match="handover times"):
        PolicyHandover(checkpoint, after_s=(3.0, 1.0))


def test_online_episode_against_the_standin_counts_tracking(tiny):
    from real_is_sim.evaluation.run import run_unit
    from real_is_sim.evaluation.spec import Unit

    checkpoint, root = tiny
    spec = EvalSpec([checkpoint], mode="online", protocol=None, start_poses=str(root / "two.json"), poses=[1],
                    seconds=0.25, overrides=["cameras.num_cameras=1", "cameras.width=160", "cameras.height=90"])
    (episode,) = episodes(spec, CFG)
    (row,) = run_unit(Unit("online", checkpoint, [episode], spec.seconds, spec.overrides))
    assert row["mode"] == "online" and row["standin_seed"] == episode.seed and row["start"] == "two_01"
    assert row["appearance"] == "twin"
    assert row["tracking_failures"] == 0 and row["tracking_events"] == []  # 0.25 s is too short for a failure
    assert 0.0 <= row["max_sync_error_m"] < 0.02 and row["ground_truth"] is False
    assert row["follower_refusals"] == 0 and row["targets_moved"] == 0  # the guard is on, nothing to move


def test_a_real_image_policy_online_sees_the_standin_not_the_twin(tmp_path, monkeypatch):
    from real_is_sim.evaluation import online
    from real_is_sim.evaluation.run import run_unit
    from real_is_sim.evaluation.spec import Unit

    checkpoint = write_tiny_checkpoint(tmp_path, frame_stride=10, variant="real_image", image_size=16)
    seen, cameras, real_camera = [], [], online.real_camera

    def recording_camera(policy, cell, bridge, seed):  # the episode's real camera, its inputs beside the twin's state
        camera = real_camera(policy, cell, bridge, seed)
        render = camera.render
        camera.render = lambda poses, q, t=None: seen.append((poses.copy(), bridge.twin.object_poses()[0].copy(),
                                                               bridge.standin.object_poses().copy())) or render(poses, q, t)
        cameras.append(camera)
        return camera

    monkeypatch.setattr(online, "real_camera", recording_camera)
    spec = EvalSpec([checkpoint], mode="online", protocol=None, seconds=0.1, poses=[0],
                    overrides=["cameras.num_cameras=1", "cameras.width=160", "cameras.height=90",
                               "initial_offset=[0.03,0.0,0.0]"])  # reality's block 3 cm from the twin's
    (episode,) = episodes(spec, CFG)
    (row,) = run_unit(Unit("online", checkpoint, [episode], spec.seconds, spec.overrides))
    assert row["mode"] == "online" and len(seen) >= 1
    assert cameras[0].reality.seed == episode.seed  # the episode's stand-in, its look drawn from its seed
    rendered, twin, real = seen[0]
    np.testing.assert_array_equal(rendered[0], real)
    assert np.linalg.norm(rendered[0, 0, :2] - twin[0, :2]) > 0.02


def test_agreement_from_two_result_files_and_the_plot(tmp_path):
    def result(rates, protocol):
        return {"protocol": protocol, "checkpoints": [
            {"checkpoint": f"step_{s}.pt", "training_steps": s,
             **{rule: {"successes": k, "n": 20, "rate": k / 20, "wilson95": list(wilson_interval(k, 20))}
                for rule in ("ground_truth", "coverage", "progress")},
             "per_start_pose": [{"start": f"fixed_{i:02d}", "trials": 1, **{rule: int(i < k) for rule in
                                 ("ground_truth", "coverage", "progress")}} for i in range(20)]}
            for s, k in zip((1000, 2000, 3000, 4000), rates)]}

    (tmp_path / "off.json").write_text(json.dumps(result([2, 6, 4, 12], "quick")))
    (tmp_path / "on.json").write_text(json.dumps(result([1, 4, 5, 10], "quick")))
    table = sweep_agreement(load_result(tmp_path / "off.json"), load_result(tmp_path / "on.json"))
    assert table["kendall_tau"] == pytest.approx(4 / 6, abs=1e-4)
    assert table["mmrv"] == pytest.approx((0.05 + 0.05) / 4)  # steps 2000 / 3000 swapped, online gap 0.05
    assert table["max_abs_gap"] == pytest.approx(0.1)
    assert plot_sweep(table, tmp_path / "fig7.png").stat().st_size > 10_000
    (tmp_path / "flat.json").write_text(json.dumps(result([5, 5, 5, 5], "quick")))
    flat = sweep_agreement(load_result(tmp_path / "off.json"), load_result(tmp_path / "flat.json"))
    assert flat["pearson"] is None and flat["kendall_tau"] is None and flat["mmrv"] == 0.0  # undefined, not NaN
    online = load_result(tmp_path / "on.json")
    for c in online["checkpoints"]:  # online on 4 start poses only: offline is counted on the same 4
        c["per_start_pose"] = c["per_start_pose"][:4]
    few = sweep_agreement(load_result(tmp_path / "off.json"), online)
    assert [r["offline"]["n"] for r in few["checkpoints"]] == [4] * 4
    assert [r["offline"]["successes"] for r in few["checkpoints"]] == [2, 4, 4, 4]  # min(k, 4) of fixed_00..03
    diff = compare_checkpoints(table_result := load_result(tmp_path / "off.json")["checkpoints"][3],
                               load_result(tmp_path / "on.json")["checkpoints"][0])
    assert diff["difference"] == pytest.approx(table_result["ground_truth"]["rate"] - 0.05)
    assert diff["p_fisher"] < 0.01
    with pytest.raises(DataError):
        load_result(tmp_path / "nothing.json")


def test_an_episode_runs_again_alone_from_its_row_and_is_recorded(tiny, tmp_path):
    """The row's episode, run again in one world, ends where it ended in its batch of two; bad rows are one error."""
    from real_is_sim.cli import main as cli_main
    from real_is_sim.errors import ConfigError, DataError
    from real_is_sim.evaluation.episode_view import load_rows, record_episode

    checkpoint, root = tiny
    out = tmp_path / "two.json"
    assert cli_main(["eval", "--checkpoint", checkpoint, "--out", str(out), "--start-poses", str(root / "two.json"),
                     "--seconds", "1", "--worlds", "2"]) == 0
    rows = load_rows(out)
    result = record_episode(rows[1], tmp_path / "episodes", image_every=30, image_size=32)
    assert result["reproduced"] and result["final_distance_m"] == rows[1]["final_distance_m"], (result, rows[1])
    assert (tmp_path / "episodes" / "two_01_t0.rrd").stat().st_size > 1000
    # A row that starts elsewhere ends elsewhere: the comparison is not true by construction.
    moved_row = dict(rows[1], start_pose=list(np.add(rows[1]["start_pose"], [0.05, 0, 0, 0, 0, 0, 0])))
    assert not record_episode(moved_row, tmp_path / "moved", image_every=30, image_size=32)["reproduced"]
    with pytest.raises(ConfigError, match="only offline"):
        record_episode(dict(rows[1], mode="online"), tmp_path / "x")
    with pytest.raises(DataError, match="lacks a field"):
        record_episode({k: v for k, v in rows[1].items() if k != "seed"}, tmp_path / "x")
    (tmp_path / "bad.jsonl").write_text('{"key": 1}\nnot json\n')
    with pytest.raises(DataError, match="bad.jsonl:2"):
        load_rows(tmp_path / "bad.jsonl")
