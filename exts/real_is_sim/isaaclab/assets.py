"""Local USD assets of the PushT cell for Isaac Lab: the table plane and the T-block rigid body of spheres.

Both are generated from the core's geometry (:func:`real_is_sim.twin.tblock.block_geometry`, the same spheres,
mass, COM and inertia as the twin's block) and written next to each other. Isaac Lab references them by path:
a referenced file that is missing makes kit-less loading fall back to omni.client and crash, so the env config
asks :func:`pusht_asset_paths` for them, which writes them first when they are not on disk. File names carry a
hash of their content, so a changed task config never reuses a stale block.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import numpy as np
from pxr import Usd, UsdGeom, UsdPhysics, UsdShade

from real_is_sim.paths import REPO_ROOT
from real_is_sim.twin.tblock import block_geometry
from real_is_sim.twin.usd_scene import new_stage, write_block
from real_is_sim_tasks.pusht.config import PushTCfg

BLOCK_PRIM = "/TBlock"
TABLE_PRIM = "/Table"


def default_asset_dir() -> Path:
    """Where generated assets go: ``$REAL_IS_SIM_ASSET_CACHE`` or ``~/.cache/real_is_sim/usd``."""
    override = os.environ.get("REAL_IS_SIM_ASSET_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "real_is_sim" / "usd"


def _bind_friction(stage: Usd.Stage, prims: list[Usd.Prim], path: str, friction: float) -> None:
    """One physics material (static = dynamic friction) bound to the colliders."""
    material = UsdShade.Material.Define(stage, path)
    api = UsdPhysics.MaterialAPI.Apply(material.GetPrim())
    api.CreateStaticFrictionAttr(float(friction))
    api.CreateDynamicFrictionAttr(float(friction))
    api.CreateRestitutionAttr(0.0)
    for prim in prims:
        UsdShade.MaterialBindingAPI.Apply(prim).Bind(material, UsdShade.Tokens.weakerThanDescendants, "physics")


def tblock_layer(task: PushTCfg) -> str:
    """The T-block as USD text: a rigid body at the identity (Isaac Lab's init_state places it), its spheres."""
    geometry = dataclasses.replace(block_geometry(task), start_pose=np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]))
    stage, _ = new_stage(BLOCK_PRIM)
    body = write_block(stage, geometry, BLOCK_PRIM)
    spheres = [p for p in Usd.PrimRange(body) if p.IsA(UsdGeom.Sphere)]
    _bind_friction(stage, spheres, f"{BLOCK_PRIM}/PhysicsMaterial", task.physical.friction_table)
    return stage.GetRootLayer().ExportToString()


def table_layer() -> str:
    """A z = 0 collision plane under an Xform: the shape Isaac Lab's ground-plane spawner expects (a ``Plane``
    child it binds its physics material to). Its pose comes from the env config (the task's table plane)."""
    stage, _ = new_stage(TABLE_PRIM)
    plane = UsdGeom.Plane.Define(stage, f"{TABLE_PRIM}/CollisionPlane")
    plane.CreateAxisAttr(UsdGeom.Tokens.z)
    plane.CreateWidthAttr(4.0)
    plane.CreateLengthAttr(4.0)
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())
    return stage.GetRootLayer().ExportToString()


def _write_once(directory: Path, stem: str, text: str) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = directory / f"{stem}_{digest}.usda"
    if not path.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(path)  # atomic: parallel writers never leave a half-written asset
    return path


def pusht_asset_paths(task: PushTCfg, directory: str | Path | None = None) -> tuple[Path, Path]:
    """``(table, block)`` USD files for ``task``, written into ``directory`` (default :func:`default_asset_dir`)
    unless already there."""
    directory = Path(directory) if directory is not None else default_asset_dir()
    return _write_once(directory, "pusht_table", table_layer()), _write_once(directory, "pusht_tblock", tblock_layer(task))


def write_repo_assets(task: PushTCfg) -> tuple[Path, Path]:
    """The default task's assets under ``usd/`` with plain names (``scripts/build_isaaclab_assets.py``)."""
    out = REPO_ROOT / "usd"
    paths = (out / "pusht_table.usda", out / "pusht_tblock.usda")
    for path, text in zip(paths, (table_layer(), tblock_layer(task))):
        path.write_text(text)
    return paths
