"""Reading and writing GaussianClouds: the Embodied Gaussians object file, 3DGS ``.ply``, USD.

Every format is converted to the renderer's conventions (see :mod:`.cloud`) here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import STATIC_WORLD, GaussianCloud
from real_is_sim.objectfile import load_object_file
from real_is_sim.transforms import matrix_to_pose


def _cloud_from_numpy(means, quats, scales, opacities, colors, body_ids) -> GaussianCloud:
    as_float = lambda a: torch.as_tensor(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    return GaussianCloud(as_float(means), as_float(quats), as_float(scales), as_float(opacities),
                         as_float(colors), torch.as_tensor(np.asarray(body_ids, dtype=np.int64)))


def load_object_cloud(path: str | Path, body_id: int = 0) -> tuple[GaussianCloud, np.ndarray]:
    """The Gaussians of an object file (e.g. ``objects/tblock.json``) attached to ``body_id``.

    Returns ``(cloud, scan_pose)``: ``scan_pose`` is X_WB as a 7-vector (px,py,pz,qx,qy,qz,qw), the
    body's pose when it was scanned (not its pose in a recording). The file's colours are stored in
    BGR order (checked against the footage: the real block is red-orange) and are flipped to RGB here;
    its quaternions are already (w, x, y, z), its scales and opacities linear.
    """
    obj = load_object_file(path)
    g = obj.gaussians
    missing = [k for k in ("means", "quats", "scales", "opacities", "colors") if k not in g]
    if missing:
        raise DataError(f"object file {path} has no gaussians.{missing[0]}")
    cloud = _cloud_from_numpy(g["means"], g["quats"], g["scales"], g["opacities"], g["colors"][:, ::-1],
                              np.full(len(g["means"]), body_id))
    return cloud, matrix_to_pose(obj.X_WB)


SH_C0 = 0.28209479177387814  # degree-0 spherical harmonic: colour = 0.5 + SH_C0 * f_dc
_PLY_TYPES = {"char": "i1", "uchar": "u1", "short": "i2", "ushort": "u2", "int": "i4", "uint": "u4",
              "float": "f4", "double": "f8", "int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2",
              "int32": "i4", "uint32": "u4", "float32": "f4", "float64": "f8"}
_PLY_REQUIRED = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
                 "rot_0", "rot_1", "rot_2", "rot_3"]


def write_ply(cloud: GaussianCloud, path: str | Path) -> None:
    """Standard 3DGS ``.ply`` (binary little endian): log scales, logit opacities, SH DC colours, rot = w,x,y,z.

    Means/quats are written as stored (body frame for attached Gaussians); an extra ``body_id``
    property keeps the attachment (other 3DGS tools ignore it). Scales of 0 are written as 1e-12
    and opacities are clipped to [1e-6, 1 - 1e-6] so that their log/logit stay finite.
    """
    n = len(cloud)
    fields = [(name, "<f4") for name in ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
                                         "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]]
    data = np.zeros(n, dtype=fields + [("body_id", "<i4")])
    means, quats, scales, opacities, colors = (t.detach().cpu().double().numpy() for t in
                                               (cloud.means, cloud.quats, cloud.scales, cloud.opacities, cloud.colors))
    for i, axis in enumerate("xyz"):
        data[axis] = means[:, i]
        data[f"scale_{i}"] = np.log(np.maximum(scales[:, i], 1e-12))
        data[f"f_dc_{i}"] = (colors[:, i] - 0.5) / SH_C0
    p = np.clip(opacities, 1e-6, 1 - 1e-6)
    data["opacity"] = np.log(p / (1 - p))
    for i in range(4):
        data[f"rot_{i}"] = quats[:, i]
    data["body_id"] = cloud.body_ids.cpu().numpy()
    header = ["ply", "format binary_little_endian 1.0", f"element vertex {n}"]
    header += [f"property {'int' if dt == '<i4' else 'float'} {name}" for name, dt in data.dtype.descr]
    Path(path).write_bytes(("\n".join(header + ["end_header"]) + "\n").encode("ascii") + data.tobytes())


def read_ply(path: str | Path) -> GaussianCloud:
    """A 3DGS ``.ply`` (binary little endian; extra properties such as f_rest_* are ignored)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"ply file not found: {path}")
    raw = path.read_bytes()
    end = raw.find(b"end_header\n")
    if not raw.startswith(b"ply") or end < 0:
        raise DataError(f"{path} is not a ply file (no 'ply' magic or no end_header)")
    lines = raw[:end].decode("ascii", errors="replace").splitlines()
    if "format binary_little_endian 1.0" not in lines:
        raise DataError(f"{path}: only binary_little_endian ply files are supported")
    count, fields, in_vertex = None, [], False
    for line in lines:
        words = line.split()
        if words[:1] == ["element"]:
            in_vertex = words[1] == "vertex"
            if in_vertex:
                count = int(words[2])
            elif count is not None:
                break  # vertex data comes first; later elements are not needed
            else:
                raise DataError(f"{path}: the vertex element must come first")
        elif words[:1] == ["property"] and in_vertex:
            if words[1] == "list" or words[1] not in _PLY_TYPES:
                raise DataError(f"{path}: unsupported vertex property {' '.join(words[1:])}")
            fields.append((words[2], "<" + _PLY_TYPES[words[1]]))
    missing = [f for f in _PLY_REQUIRED if f not in {name for name, _ in fields}]
    if count is None or missing:
        raise DataError(f"{path} is not a 3DGS ply: {'no vertex element' if count is None else f'missing {missing}'}")
    dtype = np.dtype(fields)
    body = raw[end + len(b"end_header\n"):]
    if len(body) < count * dtype.itemsize:
        raise DataError(f"{path} is truncated: {count} vertices need {count * dtype.itemsize} bytes, found {len(body)}")
    v = np.frombuffer(body, dtype=dtype, count=count)
    col = lambda *names: np.stack([v[name].astype(np.float64) for name in names], axis=-1)  # noqa: E731
    colors = np.clip(0.5 + SH_C0 * col("f_dc_0", "f_dc_1", "f_dc_2"), 0.0, 1.0)
    opacities = 1.0 / (1.0 + np.exp(-v["opacity"].astype(np.float64)))
    body_ids = v["body_id"] if "body_id" in dtype.names else np.full(count, STATIC_WORLD)
    return _cloud_from_numpy(col("x", "y", "z"), col("rot_0", "rot_1", "rot_2", "rot_3"),
                             np.exp(col("scale_0", "scale_1", "scale_2")), opacities, colors, body_ids)


_USD_BODY_IDS = "realIsSim:bodyIds"  # custom attribute: the body each Gaussian is attached to


def write_usd(cloud: GaussianCloud, path: str | Path, prim_path: str = "/Gaussians") -> None:
    """A ``UsdVol.ParticleField3DGaussianSplat`` prim: positions, orientations (quatf, w + xyz), linear
    scales and opacities, colours as degree-0 SH coefficients ``(rgb - 0.5) / SH_C0``, and the body ids."""
    from pxr import Gf, Sdf, Usd, UsdVol, Vt

    stage = Usd.Stage.CreateNew(str(path))
    splat = UsdVol.ParticleField3DGaussianSplat.Define(stage, prim_path)
    means, quats, scales, opacities, colors = (t.detach().cpu().double().numpy() for t in
                                               (cloud.means, cloud.quats, cloud.scales, cloud.opacities, cloud.colors))
    splat.CreatePositionsAttr(Vt.Vec3fArray.FromNumpy(means.astype(np.float32)))
    splat.CreateOrientationsAttr(Vt.QuatfArray([Gf.Quatf(float(q[0]), Gf.Vec3f(*map(float, q[1:]))) for q in quats]))
    splat.CreateScalesAttr(Vt.Vec3fArray.FromNumpy(scales.astype(np.float32)))
    splat.CreateOpacitiesAttr(Vt.FloatArray.FromNumpy(opacities.astype(np.float32)))
    splat.CreateRadianceSphericalHarmonicsDegreeAttr(0)
    splat.CreateRadianceSphericalHarmonicsCoefficientsAttr(Vt.Vec3fArray.FromNumpy(((colors - 0.5) / SH_C0).astype(np.float32)))
    splat.GetPrim().CreateAttribute(_USD_BODY_IDS, Sdf.ValueTypeNames.IntArray).Set(
        Vt.IntArray.FromNumpy(cloud.body_ids.cpu().numpy().astype(np.int32)))
    stage.SetDefaultPrim(splat.GetPrim())
    stage.GetRootLayer().Save()


def read_usd(path: str | Path, prim_path: str | None = None) -> GaussianCloud:
    """The Gaussians of a ``ParticleField3DGaussianSplat`` prim (the default prim, or the first one found).

    Values are read as authored, in the prim's own frame. Only the degree-0 SH coefficients (the
    base colour) are used; without the body-id attribute every Gaussian is static (-1).
    """
    from pxr import Usd, UsdVol

    path = Path(path)
    if not path.is_file():
        raise DataError(f"USD file not found: {path}")
    stage = Usd.Stage.Open(str(path))
    if stage is None:
        raise DataError(f"{path} cannot be opened as a USD stage")
    if prim_path is not None:
        prim = stage.GetPrimAtPath(prim_path)
    else:
        prim = stage.GetDefaultPrim()
        if not prim or not prim.IsA(UsdVol.ParticleField3DGaussianSplat):
            prim = next((p for p in stage.Traverse() if p.IsA(UsdVol.ParticleField3DGaussianSplat)), None)
    if not prim or not prim.IsA(UsdVol.ParticleField3DGaussianSplat):
        raise DataError(f"{path} has no ParticleField3DGaussianSplat prim{f' at {prim_path}' if prim_path else ''}")
    splat = UsdVol.ParticleField3DGaussianSplat(prim)

    def get(attr, what):
        value = attr.Get()
        if value is None:
            raise DataError(f"{path}: {prim.GetPath()} has no {what}")
        return value

    means = np.asarray(get(splat.GetPositionsAttr(), "positions"), dtype=np.float64).reshape(-1, 3)
    quats = np.array([[q.GetReal(), *q.GetImaginary()] for q in get(splat.GetOrientationsAttr(), "orientations")],
                     dtype=np.float64).reshape(-1, 4)
    scales = np.asarray(get(splat.GetScalesAttr(), "scales"), dtype=np.float64).reshape(-1, 3)
    opacities = np.asarray(get(splat.GetOpacitiesAttr(), "opacities"), dtype=np.float64)
    degree = splat.GetRadianceSphericalHarmonicsDegreeAttr().Get()
    coefficients = np.asarray(get(splat.GetRadianceSphericalHarmonicsCoefficientsAttr(), "SH coefficients"),
                              dtype=np.float64).reshape(-1, 3)
    per_gaussian = (int(degree if degree is not None else 3) + 1) ** 2
    n = len(means)
    if len(coefficients) != n * per_gaussian:
        raise DataError(f"{path}: {len(coefficients)} SH coefficients for {n} Gaussians of degree {degree}")
    colors = np.clip(0.5 + SH_C0 * coefficients[::per_gaussian], 0.0, 1.0)
    ids_attr = prim.GetAttribute(_USD_BODY_IDS)
    body_ids = np.asarray(ids_attr.Get(), dtype=np.int64) if ids_attr and ids_attr.Get() is not None else np.full(n, STATIC_WORLD)
    try:
        return _cloud_from_numpy(means, quats, scales, opacities, colors, body_ids)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None
