"""Offline vs online over a checkpoint sweep, from two evaluation result files, and the paper's Fig. 7.

``sweep_agreement(offline, online, rule)``: the checkpoints both files evaluated (matched by path), their success
rates with Wilson intervals, and Pearson r, Kendall tau-b and MMRV of offline (S) vs online (R).
``compare_checkpoints(a, b, rule)``: the difference between two checkpoints' success rates (z test, Fisher exact).
``plot_sweep(table, path)``: success vs training step, offline and online, with their Wilson intervals.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from real_is_sim.errors import DataError
from real_is_sim.evaluation.spec import RULES
from real_is_sim.evaluation.stats import agreement, compare_rates, rate_summary


def load_result(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"evaluation result not found: {path}")
    try:
        result = json.loads(path.read_text())
        result["checkpoints"][0]["ground_truth"]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise DataError(f"{path} is not an evaluation result (real-is-sim eval --out): {exc}") from None
    return result


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise DataError(f"rule must be one of {RULES}, got {rule!r}")


def _restricted(summary: dict, rule: str, starts: set[str] | None) -> dict:
    """A checkpoint's successes by ``rule``, over the start poses ``starts`` only (None: all), from its per-start-pose
    outcomes."""
    if starts is None:
        return {k: summary[rule][k] for k in ("rate", "wilson95", "successes", "n")}
    entries = [e for e in summary["per_start_pose"] if e["start"] in starts]
    k, n = sum(e[rule] for e in entries), sum(e["trials"] for e in entries)
    return {k_: v for k_, v in rate_summary(k, n).items() if k_ in ("rate", "wilson95", "successes", "n")}


def sweep_agreement(offline: dict, online: dict, rule: str = "ground_truth", offline_rule: str | None = None,
                    same_starts: bool = True) -> dict:
    """Checkpoints in both results (offline order), rates + intervals, agreement of offline (``offline_rule``, default
    ``rule``) against online (``rule``); Pearson r and Kendall tau are None when either side is constant.
    ``same_starts``: offline counted over the start poses the online run had (the quick online protocol has 4 of the
    20), so both sides judge the same starts."""
    offline_rule = offline_rule or rule
    _check_rule(rule)
    _check_rule(offline_rule)
    online_by = {c["checkpoint"]: c for c in online["checkpoints"]}
    rows = []
    for c in offline["checkpoints"]:
        o = online_by.get(c["checkpoint"])
        if o is None:
            continue
        starts = {e["start"] for e in o["per_start_pose"]} if same_starts else None
        rows.append({"checkpoint": c["checkpoint"], "training_steps": c["training_steps"],
                     "offline": _restricted(c, offline_rule, starts), "online": _restricted(o, rule, None)})
    if len(rows) < 2:
        raise DataError(f"agreement needs >= 2 checkpoints evaluated both offline and online, found {len(rows)}")
    stats = agreement([r["offline"]["rate"] for r in rows], [r["online"]["rate"] for r in rows])
    return {"rule_online": rule, "rule_offline": offline_rule, "same_starts": same_starts,
            "protocol_offline": offline.get("protocol"),
            "protocol_online": online.get("protocol"), "checkpoints": rows,
            **{k: (_finite(v) if isinstance(v, float) else v) for k, v in stats.items()}}


def _finite(x: float) -> float | None:
    """Rounded, or None where undefined (Pearson r and Kendall tau of a constant sequence): JSON has no NaN."""
    return round(x, 4) if math.isfinite(x) else None


def compare_checkpoints(a: dict, b: dict, rule: str = "ground_truth") -> dict:
    """Success of summary ``a`` vs summary ``b`` (one checkpoint each) by ``rule``."""
    _check_rule(rule)
    ra, rb = a[rule], b[rule]
    return {"a_checkpoint": a["checkpoint"], "b_checkpoint": b["checkpoint"], "rule": rule,
            **compare_rates(ra["successes"], ra["n"], rb["successes"], rb["n"])}


def plot_sweep(table: dict, path: str | Path, title: str = "", labels: tuple[str, str] | None = None) -> Path:
    """Success rate vs training step: offline and online curves, Wilson 95 % intervals as bands and bars
    (``labels``: the two curves' legend entries)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(table["checkpoints"], key=lambda r: r["training_steps"])
    steps = [r["training_steps"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    labels = labels or (f"offline ({table['rule_offline']})", f"online, stand-in ({table['rule_online']})")
    for side, color, label in (("offline", "tab:blue", labels[0]), ("online", "tab:red", labels[1])):
        rate = [100 * r[side]["rate"] for r in rows]
        low = [100 * r[side]["wilson95"][0] for r in rows]
        high = [100 * r[side]["wilson95"][1] for r in rows]
        ax.fill_between(steps, low, high, color=color, alpha=0.15, lw=0)
        ax.errorbar(steps, rate, yerr=[[m - lo for m, lo in zip(rate, low)], [hi - m for m, hi in zip(rate, high)]],
                    color=color, marker="o", capsize=3, label=label)
    ax.set_xlabel("training step (checkpoint)")
    ax.set_ylabel("success rate [%] (Wilson 95 %)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    def shown(x):
        return "undefined" if x is None else x

    ax.set_title(title or f"Pearson r {shown(table['pearson'])}, Kendall tau {shown(table['kendall_tau'])}, "
                          f"MMRV {table['mmrv']}", fontsize=9)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
