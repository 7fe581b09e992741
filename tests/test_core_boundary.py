"""The core never imports a task package: tasks import the core, the core finds a task by name (real_is_sim.task)."""

import subprocess
import sys

import pytest

from real_is_sim.errors import ConfigError
from real_is_sim.task import DEFAULT_TASK, import_task


def test_core_modules_import_without_the_task_package():
    # A fresh interpreter: import every core module (Isaac Lab's, which is the PushT Isaac Lab task, aside) and check
    # no real_is_sim_tasks module came along.
    code = (
        "import importlib, pkgutil, sys, real_is_sim\n"
        "for top in pkgutil.iter_modules(real_is_sim.__path__, 'real_is_sim.'):\n"
        "    if top.name == 'real_is_sim.isaaclab':\n"
        "        continue\n"
        "    module = importlib.import_module(top.name)\n"
        "    for m in pkgutil.walk_packages(getattr(module, '__path__', []), top.name + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] == 'real_is_sim_tasks')\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_default_task_is_found_by_name_and_a_non_task_is_refused():
    task = import_task(DEFAULT_TASK)
    cfg = task.load_cfg("pusht.yaml")
    assert task.success(cfg, [cfg.goal.pose]) is True
    with pytest.raises(ConfigError, match="cannot import 'no_such_task'"):
        import_task("no_such_task")
    with pytest.raises(ConfigError, match="is not a task"):
        import_task("real_is_sim.transforms")
