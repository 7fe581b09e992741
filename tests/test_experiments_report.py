"""scripts/experiments_report.py pairs online episodes of two settings by start pose, trial and seed."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "experiments_report.py"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("experiments_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(start: str, seed: int, success: bool, failures: int, sync_m: float) -> dict:
    return {"start": start, "trial": 0, "seed": seed, "ground_truth": success, "tracking_failures": failures,
            "max_sync_error_m": sync_m}


def test_paired_counts_only_the_episodes_both_sides_ran(report):
    online = [row("fixed_00", 1, True, 0, 0.01), row("fixed_01", 2, True, 1, 0.05), row("fixed_02", 3, False, 0, 0.02),
              row("fixed_03", 4, True, 0, 0.01)]  # fixed_03 has no partner
    sim = [row("fixed_00", 1, False, 2, 0.09), row("fixed_01", 2, True, 0, 0.01), row("fixed_02", 3, False, 1, 0.04),
           row("fixed_02", 99, True, 0, 0.0)]  # another seed: another episode
    out = report.paired("online", online, "sim_only", sim)
    assert out["episodes"] == 3
    assert out["online"]["ground_truth"]["successes"] == 2 and out["sim_only"]["ground_truth"]["successes"] == 1
    assert out["online"]["episodes_with_tracking_failure"]["successes"] == 1
    assert out["sim_only"]["episodes_with_tracking_failure"]["successes"] == 2
    assert out["online"]["median_max_sync_error_m"] == 0.02 and out["sim_only"]["median_max_sync_error_m"] == 0.04
    assert (out["ground_truth_only_online"], out["ground_truth_only_sim_only"]) == (1, 0)
    assert (out["tracking_failure_only_online"], out["tracking_failure_only_sim_only"]) == (1, 2)
    assert out["ground_truth_p_mcnemar"] == 1.0  # one discordant pair: a fair coin either way
