"""docs/experiments.json from the committed result files of the experiments (docs/experiments.md says what each is).

    python scripts/experiments_report.py [--out docs/experiments.json]

Every number is read from a result file in docs/results/ (written by ``real-is-sim eval``, or by the former
``scripts/eval_policy_offline.py`` for the older rows); a file that is absent makes its entry ``null`` with the
reason, so the report never invents a row. The last stdout line is the document.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"

# the checkpoint sweep: one training run (60 stratified demonstrations, the later recipe, seed 1), six checkpoints,
# the 20 fixed start poses x 1 online and offline; the earlier one (30 random + 30 targeted, seed 0) had 4 online
# episodes per checkpoint
SWEEP = ("sweep_strat60_s1_offline.json", "sweep_strat60_s1_online.json")
EARLIER_SWEEP = ("sweep_mined30_s0_offline.json", "sweep_mined30_s0_online.json")
# Fig. 8a, our version: offline demonstrations only, judged offline (the online rows were not run: docs/experiments.md)
DATASETS = [
    ("30 random demonstrations", "policy_first30_ema_50k_exec16.json"),
    ("60 random demonstrations", "policy_goal_ema_100k_exec16.json"),
    ("30 random + 30 targeted (failure mining), training seed 0", "policy_mined30_ema_100k_s0_exec16.json"),
    ("30 random + 30 targeted (failure mining), training seed 1", "policy_mined30_ema_100k_s1_exec16.json"),
    ("60 random, expert grid turned with the block", "policy_blockgrid_ema_100k_exec16.json"),
    ("60 random + 30 targeted (90, beyond the issue's 60), 60k steps", "policy_random60_mined30_ema_60k_exec16.json"),
    ("the same 90, 60k steps, training seed 1", "policy_random60_mined30_ema_60k_s1_exec16.json"),
    # the later recipe (tool features, relative actions, state noise, 60k steps; docs/policy.md)
    ("later recipe: 60 random, training seed 0", "policy_rel_tool_ema_60k_s0_exec16.json"),
    ("later recipe: 60 random, training seed 1", "policy_rel_tool_ema_60k_s1_exec16.json"),
    ("later recipe: 30 random + 30 handover, training seed 0", "policy_handover_rel_tool_60k_s0_exec16.json"),
    ("later recipe: 30 random + 30 handover, training seed 1", "policy_handover_rel_tool_60k_s1_exec16.json"),
    ("later recipe: 30 random + 30 handover, tempo 1.5, training seed 0", "policy_handover_rel_tool_60k_s0_exec16_tempo15.json"),
    ("later recipe: 30 random + 30 handover, tempo 1.5, training seed 1", "policy_handover_rel_tool_60k_s1_exec16_tempo15.json"),
    ("later recipe: 60 stratified start poses, training seed 0", "policy_strat60_rel_tool_60k_s0_exec16.json"),
    ("later recipe: 60 stratified start poses, training seed 1", "policy_strat60_rel_tool_60k_s1_exec16.json"),
] + [(f"later recipe: 60 stratified start poses, tempo 1.5, training seed {seed}",
      f"policy_strat60_rel_tool_60k_s{seed}_exec16_tempo15.json") for seed in range(4)] + [
    ("later recipe, 30k steps, tempo 1.5: 30 online demonstrations (stratified, seed 100), training seed 0",
     "policy_online30_rel_tool_30k_s0_exec16_tempo15.json"),
    ("the same, 30 sim-only demonstrations from the same start poses", "policy_sim30_rel_tool_30k_s0_exec16_tempo15.json"),
    ("the same, the 30 online + 30 targeted (sim-only, failure mining of the 30-online policy)",
     "policy_online30_mined30_rel_tool_30k_s0_exec16_tempo15.json"),
    ("its control: the 30 online + 30 sim-only from other stratified start poses (seed 401, not targeted)",
     "policy_online30_strat30b_rel_tool_30k_s0_exec16_tempo15.json"),
    ("60 online: the 30 online + 30 more online from the control's start poses and expert seeds",
     "policy_online60_rel_tool_30k_s0_exec16_tempo15.json"),
]
# Fig. 8b: the observation variants at one training budget (the 30 sim-only stratified demonstrations, relative
# actions, EMA, 30k steps of batch 64, seed 0; the cameras at 32 px), then the earlier rows: the 2000-step camera
# policies of the former script (not learnt: docs/policy.md) beside a 100k-step pose policy
REPRESENTATIONS = [
    ("pose, equal budget", "policy_repr_pose_b64_30k_s0_exec16_tempo15.json"),
    ("wrist_camera (32 px), equal budget", "policy_repr_wrist32_b64_30k_s0_exec16_tempo15.json"),
    ("static_camera (32 px), equal budget", "policy_repr_static32_b64_30k_s0_exec16_tempo15.json"),
    ("real_image (32 px: the stand-in's own look, realistic), equal budget",
     "policy_repr_real32_b64_30k_s0_exec16_tempo15.json"),
    ("wrist_camera (32 px), equal budget, trained again (session 32, same command)",
     "policy_repr_wrist32_b64_30k_s0_rerun_exec16_tempo15.json"),
    ("pose, equal budget, trained again (session 33, same command)", "policy_repr_pose_b64_30k_s0_rerun_exec16_tempo15.json"),
    ("static_camera (32 px), equal budget, trained again (session 33, same command)",
     "policy_repr_static32_b64_30k_s0_rerun_exec16_tempo15.json"),
    ("pose, equal budget, training seed 1 (session 33)", "policy_repr_pose_b64_30k_s1_exec16_tempo15.json"),
    ("wrist_camera (32 px), equal budget, training seed 1 (session 33)", "policy_repr_wrist32_b64_30k_s1_exec16_tempo15.json"),
    ("static_camera (32 px), equal budget, training seed 1 (session 33)",
     "policy_repr_static32_b64_30k_s1_exec16_tempo15.json"),
    ("real_image (32 px), equal budget, training seed 1 (session 33)", "policy_repr_real32_b64_30k_s1_exec16_tempo15.json"),
    ("pose", "policy_goal_ema_100k_exec16.json"),
    ("wrist_camera", "policy_wrist_camera.json"),
    ("static_camera", "policy_static_camera.json"),
    ("real_image (its former definition: the twin's static render + pixel noise)", "policy_real_image.json"),
]
# online evaluations (the quick one of pose_10k repeats the sweep's step_010000 episodes: counted once, in the sweep;
# the handover policy's quick run repeats 4 episodes of its 20-pose run, same starts and seeds, 20 s: not counted)
ONLINE = ["eval_pose_10k_sweep_quick_online.json", "sweep_mined30_s0_online.json",
          "eval_handover_rel_tool_60k_s1_tempo15_fixed20_online.json", "eval_strat60_s1_fixed20_online.json",
          "sweep_strat60_s1_online.json"]
# the same episodes (checkpoints, start poses, seeds, settings) in two settings, (label, file) each: against the
# stand-in as modelled ("twin" appearance, a best case for the sensor) and with every HiddenAppearance knob on
# ("realistic": the honest online setting); realistic, and the cameras hand-eye calibrated before each episode
APPEARANCE_PAIRS = [(("twin", "eval_strat60_s1_fixed20_online.json"), ("realistic", "eval_strat60_s1_fixed20_online_realistic.json")),
                    (("realistic", "eval_strat60_s1_fixed20_online_realistic.json"),
                     ("realistic_calibrated", "eval_strat60_s1_fixed20_online_realistic_calibrated.json"))]
# Fig. 8a online and appendix Fig. 2: the same recipe trained on 30 demonstrations collected online (the expert against
# the realistic stand-in, cameras hand-eye calibrated: the twin's corrected state recorded) and on the 30 sim-only ones
# from the same start poses; and on those 30 online + 30 targeted (sim-only demonstrations from where failure mining
# found the 30-online policy stalling), + 30 untargeted sim-only or + 30 more online; all evaluated online on the same
# episodes (realistic, calibrated)
DEMONSTRATION_RUNS = {label: f"eval_{run}_s0_fixed_online_realistic_calibrated.json" for label, run in (
    ("online", "online30"), ("sim_only", "sim30"), ("online_targeted", "online30_mined30"),
    # the targeting's control: 30 sim-only demonstrations from untargeted (stratified) start poses
    ("online_untargeted", "online30_strat30b"),
    # the 30 online + the control's 30 collected online (same start poses, same expert seeds)
    ("online60", "online60"))}
# Fig. 8a's question is targeted against online60; online60 against online_untargeted tells online from sim-only
# collection of the same 30 episodes
DEMONSTRATION_PAIRS = [tuple((label, DEMONSTRATION_RUNS[label]) for label in pair)
                       for pair in (("online", "sim_only"), ("online_targeted", "online"),
                                    ("online_targeted", "online_untargeted"), ("online_targeted", "online60"),
                                    ("online60", "online_untargeted"))]
# Fig. 8b online: the four equal-budget policies on the same episodes (realistic, calibrated; the pose and static
# camera networks are session 33's, trained again), the pose policy once more with the twin's targets guarded
# (robot.safety.WorkspaceGuard, which its first run lacked), and the pose policy trained on the same 30
# demonstrations with goal and tool features, batch 256 (the sim-only row of Fig. 8a)
REPRESENTATION_RUNS = {"wrist_camera": "eval_repr_wrist32_b64_30k_s0_fixed_online_realistic_calibrated.json",
                       "real_image": "eval_repr_real32_b64_30k_s0_fixed_online_realistic_calibrated.json",
                       "static_camera": "eval_repr_static32_b64_30k_s0_fixed_online_realistic_calibrated.json",
                       "pose": "eval_repr_pose_b64_30k_s0_fixed_online_realistic_calibrated.json",
                       "pose_guarded": "eval_repr_pose_b64_30k_s0_fixed_online_realistic_calibrated_guard.json",
                       "pose_sim_only": DEMONSTRATION_RUNS["sim_only"]}
REPRESENTATION_PAIRS = [tuple((label, REPRESENTATION_RUNS[label]) for label in pair)
                        for pair in (("wrist_camera", "real_image"), ("wrist_camera", "pose_sim_only"),
                                     ("real_image", "pose_sim_only"), ("static_camera", "wrist_camera"),
                                     ("static_camera", "real_image"), ("pose_guarded", "pose"),
                                     ("pose_guarded", "wrist_camera"), ("pose_guarded", "static_camera"),
                                     ("pose_guarded", "real_image"))]
REALISTIC = ("realistic", "realistic_calibrated")  # the settings whose stand-in looks other than the twin's model
# checkpoints of a file whose episodes another file of ONLINE holds too (the sweep's first 10 start poses of 10k and
# 60k are in the 20-pose file): counted there only
COUNTED_ELSEWHERE = {"sweep_strat60_s1_online.json": ("step_010000.pt", "step_060000.pt")}


def read(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.is_file() else None


def ground_truth_row(label: str, name: str) -> dict:
    """One row from a result file of either runner: rate, Wilson 95 %, successes, n, and the paper's progress rule."""
    result = read(name)
    if result is None:
        return {"label": label, "file": name, "missing": "result file not committed (run not made)"}
    if "checkpoints" in result:  # real-is-sim eval
        c = result["checkpoints"][0]
        gt, progress = c["ground_truth"], c["progress"]
        return {"label": label, "file": name, "checkpoint": c["checkpoint"], "mode": result["mode"],
                "protocol": result["protocol"], "rate": gt["rate"], "wilson95": gt["wilson95"],
                "successes": gt["successes"], "n": gt["n"], "progress_rule_rate": progress["rate"]}
    n = result["episodes"]  # the former scripts/eval_policy_offline.py
    return {"label": label, "file": name, "checkpoint": result["checkpoint"], "mode": "offline", "protocol": "custom",
            "rate": result["success_rate"], "wilson95": result["success_wilson95"],
            "successes": round(result["success_rate"] * n), "n": n,
            "progress_rule_rate": result["progress_success_rate"]}


def sweep(files: tuple[str, str] = SWEEP) -> dict | None:
    from real_is_sim.evaluation.agreement import sweep_agreement

    offline, online = (read(name) for name in files)
    if offline is None or online is None:
        return {"missing": f"{files} not both committed"}
    return {"files": list(files), **sweep_agreement(offline, online)}


def tracking_failure_rate() -> dict:
    """Episodes with a tracking failure over every committed online evaluation (checkpoints pooled)."""
    episodes = failures = recovered = 0
    files = []
    for name in ONLINE:
        result = read(name)
        if result is None:
            continue
        files.append(name)
        for c in result["checkpoints"]:
            if c["checkpoint"].endswith(COUNTED_ELSEWHERE.get(name, ())):
                continue
            episodes += c["episodes"]
            failures += c["tracking"]["episodes_with_failure"]["successes"]
            recovered += c["tracking"]["recovered"]
    from real_is_sim.evaluation.stats import rate_summary

    return {"files": files, "episodes": episodes, "episodes_with_failure": failures, "recovered_failures": recovered,
            **{k: v for k, v in rate_summary(failures, episodes).items() if k in ("rate", "wilson95")},
            "demonstrations": "offline (sim-only) scripted demonstrations; policies trained on online ones against "
                              "sim-only ones, the same episodes: demonstrations_online"}


def rows_of(name: str) -> list[dict]:
    """The finished episodes of a result file (its ``.jsonl``), as ``real-is-sim eval`` reads them back."""
    from real_is_sim.evaluation.spec import read_rows

    return list(read_rows((RESULTS / name).with_suffix(".jsonl")).values())


def episode_of(row: dict) -> tuple:
    """What pairs a row with the same episode under other settings: start pose, trial, seed."""
    return row["start"], row["trial"], row["seed"]


def paired(label_a: str, rows_a: list[dict], label_b: str, rows_b: list[dict]) -> dict:
    """The episodes both sides ran (same start pose, trial and seed) side by side: per side ground truth, episodes with
    a tracking failure, median largest sync error; the exact McNemar test of the success difference and of the
    tracking-failure difference."""
    import numpy as np

    from real_is_sim.evaluation.stats import mcnemar_exact, rate_summary

    by_episode_b = {episode_of(r): r for r in rows_b}
    pairs = [(r, by_episode_b[episode_of(r)]) for r in rows_a if episode_of(r) in by_episode_b]
    out = {"episodes": len(pairs)}
    for label, index in ((label_a, 0), (label_b, 1)):
        rows = [p[index] for p in pairs]
        out[label] = {"ground_truth": rate_summary(sum(r["ground_truth"] for r in rows), len(rows)),
                      "episodes_with_tracking_failure": rate_summary(sum(r["tracking_failures"] > 0 for r in rows),
                                                                     len(rows)),
                      "median_max_sync_error_m": round(float(np.median([r["max_sync_error_m"] for r in rows])), 4)
                      if rows else None}
        if rows and all("follower_refusals" in r for r in rows):  # run with the refusals recorded (session 33 on)
            out[label]["episodes_with_follower_refusals"] = sum(r["follower_refusals"] > 0 for r in rows)
    for what, won in (("ground_truth", lambda r: r["ground_truth"]), ("tracking_failure", lambda r: r["tracking_failures"] > 0)):
        only_a = sum(won(a) and not won(b) for a, b in pairs)
        only_b = sum(won(b) and not won(a) for a, b in pairs)
        out[f"{what}_only_{label_a}"], out[f"{what}_only_{label_b}"] = only_a, only_b
        out[f"{what}_p_mcnemar"] = round(mcnemar_exact(only_a, only_b), 6)
    return out


def appearance_pairs() -> list[dict]:
    """Per pair of settings and checkpoint: the same online episodes under both settings (``paired``)."""
    out = []
    for (label_a, name_a), (label_b, name_b) in APPEARANCE_PAIRS:
        rows_a, rows_b = rows_of(name_a), rows_of(name_b)
        if not rows_a or not rows_b:
            out.append({"files": [name_a, name_b], "missing": "both result files are needed"})
            continue
        for checkpoint in dict.fromkeys(r["checkpoint"] for r in rows_b):
            out.append({"files": [name_a, name_b], "checkpoint": checkpoint,
                        **paired(label_a, [r for r in rows_a if r["checkpoint"] == checkpoint],
                                 label_b, [r for r in rows_b if r["checkpoint"] == checkpoint])})
    return out


def policy_pairs(pairs) -> list[dict]:
    """Two policies on the same online episodes (``paired``), per pair of (label, result file)."""
    out = []
    for (label_a, name_a), (label_b, name_b) in pairs:
        rows_a, rows_b = rows_of(name_a), rows_of(name_b)
        if not rows_a or not rows_b:
            out.append({"files": [name_a, name_b], "missing": "both result files are needed"})
            continue
        out.append({"files": [name_a, name_b], **paired(label_a, rows_a, label_b, rows_b)})
    return out


def realistic_files() -> list[str]:
    """The paired online result files whose run recorded a realistic stand-in (their ``settings.appearance``)."""
    pairs = APPEARANCE_PAIRS + DEMONSTRATION_PAIRS + REPRESENTATION_PAIRS
    names = dict.fromkeys(name for pair in pairs for _, name in pair)
    return [name for name in names if ((read(name) or {}).get("settings") or {}).get("appearance") in REALISTIC]


def best_online(files: list[str], min_episodes: int = 20) -> dict | None:
    """The highest online ground-truth rate among checkpoints evaluated on at least ``min_episodes`` episodes (the 20
    fixed start poses): 4 or 10 episodes cannot single out a best."""
    best = None
    for name in files:
        result = read(name)
        for c in (result or {}).get("checkpoints", []):
            if c["episodes"] < min_episodes:
                continue
            row = {"file": name, "checkpoint": c["checkpoint"], "rate": c["ground_truth"]["rate"],
                   "wilson95": c["ground_truth"]["wilson95"], "n": c["episodes"], "protocol": result["protocol"]}
            if best is None or (row["rate"], row["n"]) > (best["rate"], best["n"]):
                best = row
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "experiments.json")
    args = parser.parse_args()
    document = {
        "protocol": {"offline": "custom: the expert benchmark's 40 start poses (20 fixed + 20 random, seed 0) x 2 "
                                "trials, 30 s, execute 16, ground truth (docs/policy.md)",
                     "online": "quick: 4 of the fixed start poses x 1 trial, 20 s, whole chunks, 2 cameras 240x135 "
                               "(docs/evaluation.md)",
                     "sweep": "the 20 fixed start poses x 1 trial, 30 s, execute 16, tempo 1.5, online (2 cameras "
                              "240x135) and offline, the same episode seeds (docs/experiments.md, section 1)",
                     "appearance": "online, the same episodes with the stand-in rendering the twin's own model "
                                   "(twin) and with every HiddenAppearance knob on (realistic): the 20 fixed start "
                                   "poses x 1 trial, 30 s, execute 16, tempo 1.5, 2 cameras 240x135; "
                                   "realistic_calibrated: realistic, the cameras hand-eye calibrated before each "
                                   "episode (calibrated at 480x270, scaled)",
                     "demonstrations_online": "online, realistic_calibrated, the 20 fixed start poses x 1 trial, 30 s, "
                                              "execute 16, tempo 1.5, 2 cameras 240x135: policies trained (30k steps, "
                                              "seed 0) on 30 online and on 30 sim-only demonstrations from the same "
                                              "start poses, and on the 30 online + 30 targeted (sim-only, failure "
                                              "mining) or + 30 untargeted (sim-only, stratified) or + those 30 "
                                              "collected online (60 online), paired by episode",
                     "representations_online": "online, realistic_calibrated, fixed start poses x 1 trial, 30 s, "
                                               "execute 16, tempo 1.5, 2 cameras 240x135: the equal-budget wrist "
                                               "camera and real image policies (section 3) and the pose policy of the "
                                               "same 30 sim-only demonstrations, paired by episode",
                     "earlier_sweep": "online quick (4 episodes); offline 40 x 2 trials, 20 s, whole chunks; agreement "
                                      "counted on the online run's 4 start poses"},
        "sweep": sweep(),
        "earlier_sweep": sweep(EARLIER_SWEEP),
        "datasets": [ground_truth_row(label, name) for label, name in DATASETS],
        "representations": [ground_truth_row(label, name) for label, name in REPRESENTATIONS],
        "tracking_failure_rate": tracking_failure_rate(),
        "appearance": appearance_pairs(),
        "demonstrations_online": policy_pairs(DEMONSTRATION_PAIRS),
        "representations_online": policy_pairs(REPRESENTATION_PAIRS),
        # the headline: the realistic setting; the best case beside it, named as such
        "best_online_success": best_online(realistic_files()),
        "best_online_success_twin_appearance": best_online(ONLINE),
    }
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
