"""The core never imports Isaac Lab, Isaac Sim or a task package; real_is_sim.isaaclab needs isaaclab, its Kit module
needs Kit."""

import importlib
import subprocess
import sys

import pytest

import real_is_sim


def test_core_modules_import_without_isaac_or_the_task_package():
    # A fresh interpreter: import every core module (real_is_sim.isaaclab, the Isaac Lab classes, aside) and check no
    # omni/isaaclab module came along, nor a task package (tasks import the core; the core finds them by name).
    code = (
        "import importlib, pkgutil, sys, real_is_sim\n"
        "for top in pkgutil.iter_modules(real_is_sim.__path__, 'real_is_sim.'):\n"
        "    if top.name == 'real_is_sim.isaaclab':\n"
        "        continue\n"
        "    module = importlib.import_module(top.name)\n"
        "    for m in pkgutil.walk_packages(getattr(module, '__path__', []), top.name + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules\n"
        "             if n.split('.')[0] in ('omni', 'isaaclab', 'isaacsim', 'carb', 'real_is_sim_tasks'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_isaac_adapter_loads_only_inside_kit():
    try:
        import omni.ext  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs Isaac Sim"):
            importlib.import_module("real_is_sim.isaaclab.kit")
        pytest.skip("Isaac Sim (Kit) is not installed here: the adapter's own behaviour is checked by scripts/check_isaac.py on a GPU machine")
    module = importlib.import_module("real_is_sim.isaaclab.kit")
    assert hasattr(module, "RealIsSimExtension")


def test_extension_manifest_names_the_adapter_module():
    import tomllib

    from real_is_sim.paths import REPO_ROOT

    manifest = tomllib.loads((REPO_ROOT / "extension.toml").read_text())
    assert {"version", "title"} <= set(manifest["package"])
    assert "dependencies" in manifest
    assert [m["name"] for m in manifest["python"]["module"]] == ["real_is_sim.isaaclab.kit"]
    module_path = REPO_ROOT / manifest["python"]["module"][0]["path"] / "real_is_sim" / "isaaclab" / "kit.py"
    assert module_path.is_file()
    assert manifest["package"]["version"] == real_is_sim.__version__
    for key in ("changelog", "readme"):  # Kit's registry reads both
        assert (REPO_ROOT / manifest["package"][key]).is_file(), key
    # Kit ships its own pxr, warp, newton and torch: the extension must not pip-install them into it
    from packaging.requirements import Requirement

    names = {Requirement(r).name for r in manifest["python"]["pipapi"]["requirements"]}
    assert not names & {"usd-core", "usd-exchange", "warp-lang", "newton", "torch", "isaaclab"}, names


def test_isaaclab_package_without_isaaclab_names_what_is_missing():
    # A fresh interpreter where `import isaaclab` fails, as on an install without the [isaaclab] set-up.
    code = (
        "import sys\n"
        "sys.modules['isaaclab'] = None\n"
        "try:\n"
        "    import real_is_sim.isaaclab\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "needs Isaac Lab 3.0" in out.stdout
