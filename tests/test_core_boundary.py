"""The core finds a task by name (real_is_sim.task); that it never imports one is checked in test_isaac_boundary.py."""

import pytest

from real_is_sim.errors import ConfigError
from real_is_sim.task import DEFAULT_TASK, import_task


def test_the_default_task_is_found_by_name_and_a_non_task_is_refused():
    task = import_task(DEFAULT_TASK)
    cfg = task.load_cfg("pusht.yaml")
    assert task.success(cfg, [cfg.goal.pose]) is True
    with pytest.raises(ConfigError, match="cannot import 'no_such_task'"):
        import_task("no_such_task")
    with pytest.raises(ConfigError, match="is not a task"):
        import_task("real_is_sim.transforms")
