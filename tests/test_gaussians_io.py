import numpy as np
import pytest
import torch

from real_is_sim.errors import DataError
from real_is_sim.gaussians import GaussianCloud, load_object_cloud, read_ply, read_usd, write_ply, write_usd
from real_is_sim.gaussians.io import SH_C0


def sample_cloud(n=7):
    g = torch.Generator().manual_seed(0)
    return GaussianCloud(torch.randn(n, 3, generator=g), torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1),
                         torch.rand(n, 3, generator=g) * 0.01 + 0.001, torch.rand(n, generator=g) * 0.9 + 0.05,
                         torch.rand(n, 3, generator=g), torch.tensor([0, 0, 1, -1, 1, 0, -1]))


def assert_same(a, b):
    for field in ("means", "quats", "scales", "opacities", "colors"):
        assert torch.allclose(getattr(a, field), getattr(b, field), atol=1e-5), field
    assert torch.equal(a.body_ids, b.body_ids)


def test_ply_round_trip_and_standard_layout(tmp_path):
    cloud = sample_cloud()
    write_ply(cloud, tmp_path / "c.ply")
    assert_same(read_ply(tmp_path / "c.ply"), cloud)
    header = (tmp_path / "c.ply").read_bytes().split(b"end_header")[0].decode()
    for name in ("f_dc_0", "opacity", "scale_0", "rot_0"):
        assert f"property float {name}" in header
    body = np.frombuffer((tmp_path / "c.ply").read_bytes().split(b"end_header\n", 1)[1], dtype=np.uint8)
    row = body[: 17 * 4].view("<f4")  # first vertex: x y z nx ny nz f_dc(3) opacity scale(3) rot(4)
    assert np.allclose(row[6:9], (cloud.colors[0].numpy() - 0.5) / SH_C0, atol=1e-5)
    p = float(cloud.opacities[0])
    assert np.isclose(row[9], np.log(p / (1 - p)), atol=1e-5)
    assert np.allclose(row[10:13], np.log(cloud.scales[0].numpy()), atol=1e-5)


def test_ply_without_body_ids_is_static(tmp_path):
    cloud = sample_cloud()
    write_ply(cloud, tmp_path / "c.ply")
    raw = (tmp_path / "c.ply").read_bytes()
    head, body = raw.split(b"end_header\n", 1)
    data = np.frombuffer(body, dtype=[(f"f{i}", "<f4") for i in range(17)] + [("b", "<i4")])
    stripped = np.ascontiguousarray(np.stack([data[f"f{i}"] for i in range(17)], axis=1).astype("<f4"))
    head = head.replace(b"property int body_id\n", b"")
    (tmp_path / "s.ply").write_bytes(head + b"end_header\n" + stripped.tobytes())
    assert (read_ply(tmp_path / "s.ply").body_ids == -1).all()


def test_ply_bad_files_raise(tmp_path):
    (tmp_path / "bad.ply").write_bytes(b"hello")
    with pytest.raises(DataError, match="not a ply"):
        read_ply(tmp_path / "bad.ply")
    write_ply(sample_cloud(), tmp_path / "c.ply")
    (tmp_path / "t.ply").write_bytes((tmp_path / "c.ply").read_bytes()[:-10])
    with pytest.raises(DataError, match="truncated"):
        read_ply(tmp_path / "t.ply")
    with pytest.raises(DataError, match="not found"):
        read_ply(tmp_path / "missing.ply")


def test_usd_round_trip_uses_the_gaussian_splat_schema(tmp_path):
    from pxr import Usd, UsdVol

    cloud = sample_cloud()
    write_usd(cloud, tmp_path / "c.usda")
    stage = Usd.Stage.Open(str(tmp_path / "c.usda"))
    prim = stage.GetPrimAtPath("/Gaussians")
    assert prim.IsA(UsdVol.ParticleField3DGaussianSplat)
    assert_same(read_usd(tmp_path / "c.usda"), cloud)


def test_usd_without_splat_raises(tmp_path):
    from pxr import Usd, UsdGeom

    stage = Usd.Stage.CreateNew(str(tmp_path / "empty.usda"))
    UsdGeom.Xform.Define(stage, "/World")
    stage.GetRootLayer().Save()
    with pytest.raises(DataError, match="ParticleField3DGaussianSplat"):
        read_usd(tmp_path / "empty.usda")


def test_tblock_survives_ply_and_usd(shared_data, tmp_path):
    cloud, _ = load_object_cloud(shared_data / "objects" / "tblock.json")
    write_ply(cloud, tmp_path / "t.ply")
    write_usd(cloud, tmp_path / "t.usd")
    assert_same(read_ply(tmp_path / "t.ply"), cloud)
    assert_same(read_usd(tmp_path / "t.usd"), cloud)
