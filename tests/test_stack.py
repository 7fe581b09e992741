"""The installed stack follows Isaac Lab 3.0's pins, so real-is-sim installs into a stock Isaac Lab environment.

Isaac Lab is installed kit-less with --no-deps: its Kit, GPU and training requirements (torchvision, onnx,
usd-exchange, ...) are deliberately absent, and torch is the 2.13 CPU wheel instead of its 2.11 CUDA build.
Everything else pip knows of must be consistent.
"""

import importlib.metadata as metadata
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# Isaac Lab's requirements we knowingly replace: torch 2.13.0 CPU is the wheel these machines have on disk.
REPLACED_BY_US = {"torch"}


def _requirements(dist: str) -> list[Requirement]:
    reqs = [Requirement(r) for r in metadata.requires(dist) or []]
    # Only the base requirements (no extras); markers evaluated for this interpreter and platform.
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _isaaclab_requirements() -> list[Requirement]:
    try:
        return _requirements("isaaclab")
    except metadata.PackageNotFoundError:
        pytest.skip("isaaclab is not installed (make setup installs isaaclab==3.0.0 kit-less)")


def _installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_isaaclab_is_3_0_on_its_newton_and_warp():
    _isaaclab_requirements()
    assert metadata.version("isaaclab") == "3.0.0"
    assert metadata.version("newton") == "1.6.1"
    assert metadata.version("warp-lang") == "1.17.0"


def test_every_installed_package_satisfies_isaaclab():
    broken = []
    for req in _isaaclab_requirements():
        name = canonicalize_name(req.name)
        version = _installed_version(name)
        if name in REPLACED_BY_US or version is None:
            continue
        if not req.specifier.contains(version, prereleases=True):
            broken.append(f"{name} {version} (isaaclab wants {req.specifier})")
    assert not broken, broken


def test_our_requirements_admit_isaaclabs_pinned_versions():
    # Checked on the declared ranges, not on what happens to be installed: `pip install -e .` into a stock
    # Isaac Lab 3.0 environment must be satisfied by the versions Isaac Lab pins.
    ours = {canonicalize_name(r.name): r for r in _requirements("real-is-sim")}
    conflicts = []
    for req in _isaaclab_requirements():
        pins = [s.version for s in req.specifier if s.operator == "=="]
        name = canonicalize_name(req.name)
        if pins and name in ours and not ours[name].specifier.contains(pins[0], prereleases=True):
            conflicts.append(f"{name}: isaaclab pins {pins[0]}, we require {ours[name].specifier}")
    assert not conflicts, conflicts
    # Newton's mujoco pins come through newton[sim]; ours must admit them too.
    for req in _requirements("newton"):
        name = canonicalize_name(req.name)
        if name in ours and _installed_version(name):
            assert ours[name].specifier.contains(_installed_version(name)), name


def test_pip_check_reports_only_isaaclabs_omitted_requirements():
    _isaaclab_requirements()
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    problems = [line for line in out.stdout.splitlines() if line.strip()]
    not_isaaclab = [line for line in problems if not line.startswith("isaaclab 3.0.0 ")]
    assert not not_isaaclab, not_isaaclab
    omitted = {canonicalize_name(r.name) for r in _isaaclab_requirements() if _installed_version(r.name) is None}
    for line in problems:
        # "isaaclab 3.0.0 requires NAME, which is not installed." | "... has requirement NAME==V, but you have ..."
        words = line.split()
        named = words[3] if words[2] == "requires" else words[4]
        name = canonicalize_name(Requirement(named.rstrip(",")).name)
        assert name in omitted | REPLACED_BY_US, line
