"""A tiny sweep (1 checkpoint trained 5 steps here, 2 start poses, 0.5 s episodes, one unit per pose) as Ray tasks on a
local Ray (loopback, 1 CPU) gives the same rows as in this process."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[eval]')")


@pytest.fixture(scope="module")
def local_ray():
    from real_is_sim.evaluation.run import init_ray

    init_ray(num_cpus=1)  # one worker: on the shared 2-core CPU two would only compete while importing
    yield
    ray.shutdown()


def rows_of(path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(({k: v for k, v in r.items() if k != "wall_s"} for r in rows), key=lambda r: r["key"])


def test_ray_and_in_process_runs_of_a_tiny_sweep_agree(tmp_path, local_ray):
    from real_is_sim.evaluation.run import evaluate
    from real_is_sim.evaluation.spec import EvalSpec
    from real_is_sim_tasks.pusht.start_poses import load_start_poses
    from test_evaluation import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path)
    (tmp_path / "two.json").write_text(json.dumps({"poses": load_start_poses()[[2, 13]].tolist()}))
    spec = EvalSpec([checkpoint], protocol=None, start_poses=str(tmp_path / "two.json"), seconds=0.5, worlds=1)
    in_process = evaluate(spec, tmp_path / "local.json", log=None)
    on_ray = evaluate(spec, tmp_path / "ray.json", executor="ray", log=None)
    assert rows_of(tmp_path / "local.jsonl") == rows_of(tmp_path / "ray.jsonl")
    assert len(rows_of(tmp_path / "ray.jsonl")) == 2
    assert in_process["checkpoints"] == on_ray["checkpoints"]
