"""Running an evaluation: the units of work in this process or as Ray tasks, rows appended as units finish.

``evaluate(spec, out)`` writes ``out`` (the summary JSON) and ``out.jsonl`` (one row per finished episode; a rerun
skips them) and returns the summary. ``executor="ray"`` sends every unit to a Ray task: a local Ray started with
``num_cpus`` on the loopback address (dashboard and usage reporting off), or the cluster at ``address``. A unit
computes the same thing wherever it runs (its episodes' seeds are its own), so Ray and in-process runs of one spec
agree.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Iterator

from real_is_sim.errors import ConfigError
from real_is_sim.evaluation.spec import (EvalSpec, Unit, append_rows, episodes, plan_units, read_rows, result_document,
                                         summarize_checkpoint)

EXECUTORS = ("local", "ray")


def run_unit(unit: Unit, threads: int = 1) -> list[dict]:
    """The rows of one unit (what a Ray task runs)."""
    import torch

    torch.set_num_threads(threads)
    try:
        import warp as wp

        wp.config.log_level = wp.LOG_WARNING
    except ImportError:
        pass
    if unit.mode == "offline":
        from real_is_sim.evaluation.offline import run_offline_unit

        return run_offline_unit(unit)
    from real_is_sim.evaluation.online import run_online_unit

    return run_online_unit(unit)


def run_local(units: list[Unit], threads: int = 1) -> Iterator[tuple[Unit, list[dict]]]:
    for unit in units:
        yield unit, run_unit(unit, threads)


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def init_ray(address: str | None = None, num_cpus: int | None = None):
    """Ray started here (loopback only, no dashboard, no usage reporting) or joined at ``address``."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise ConfigError("executor ray: the ray package is not installed (pip install -e '.[eval]')") from None
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, _node_ip_address="127.0.0.1",
                     log_to_driver=False)
    return ray


def run_ray(units: list[Unit], threads: int = 1, address: str | None = None,
            num_cpus: int | None = None) -> Iterator[tuple[Unit, list[dict]]]:
    """Every unit as one Ray task (1 CPU each); results yielded as tasks finish."""
    ray = init_ray(address, num_cpus)
    task = ray.remote(num_cpus=1, max_retries=0)(run_unit)
    pending = {task.remote(unit, threads): unit for unit in units}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            yield pending.pop(ref), ray.get(ref)


def evaluate(spec: EvalSpec, out: str | Path, executor: str = "local", threads: int = 1, address: str | None = None,
             num_cpus: int | None = None, log: Callable[[str], None] | None = print) -> dict:
    """Run the spec's unfinished episodes, then summarise every checkpoint; ``out`` and ``out.jsonl`` written."""
    from real_is_sim.evaluation.offline import cached_policy, checkpoint_meta

    if executor not in EXECUTORS:
        raise ConfigError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    out = Path(out)
    rows_path = out.with_suffix(".jsonl")
    started = time.perf_counter()
    _, _, cell = cached_policy(str(spec.checkpoints[0]))  # every checkpoint's cell gives the same start poses
    wanted = episodes(spec, cell)
    done = read_rows(rows_path)
    todo = [e for e in wanted if spec.key(e) not in done]
    units = plan_units(spec, todo)
    if log and todo:
        log(f"{len(todo)} of {len(wanted)} episodes to run ({len(units)} units, {executor})")
    runner = run_local(units, threads) if executor == "local" else run_ray(units, threads, address, num_cpus)
    for unit, rows in runner:
        append_rows(rows_path, rows)
        done.update({r["key"]: r for r in rows})
        if log:
            wins = sum(r["ground_truth"] for r in rows)
            log(f"{unit.checkpoint}: {wins}/{len(rows)} at the goal ({', '.join(r['start'] for r in rows[:4])}"
                f"{', ...' if len(rows) > 4 else ''}; {time.perf_counter() - started:.0f} s)")
    summaries = []
    for ckpt in spec.checkpoints:
        rows = [done[spec.key(e)] for e in wanted if e.checkpoint == str(ckpt)]
        summaries.append(summarize_checkpoint(rows, {**checkpoint_meta(str(ckpt)), "control": spec.control}))
    result = result_document(spec, summaries, time.perf_counter() - started)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result
