"""Displacement of Gaussians -> one wrench per body."""

import torch

from real_is_sim.correction.wrench import clamp_norm, displacement_wrench


def _square(n=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    positions = torch.rand(n, 3, generator=g) * 0.1
    positions[:, 2] = 0.0
    return positions


def test_uniform_shift_gives_force_along_shift_and_no_torque_about_centroid():
    positions = _square()
    com = positions.mean(0, keepdim=True)
    shift = torch.tensor([0.002, -0.001, 0.0])
    w = displacement_wrench(positions, positions + shift, torch.zeros(len(positions), dtype=torch.long), com, 4.0, 1e9, 1e9)
    assert torch.allclose(w[0, :3], 4.0 * len(positions) * shift, rtol=1e-5)
    assert w[0, 3:].abs().max() < 1e-6


def test_rotation_about_z_gives_torque_about_z_with_its_sign():
    positions = _square() - _square().mean(0)
    angle = 0.01
    c, s = torch.cos(torch.tensor(angle)), torch.sin(torch.tensor(angle))
    R = torch.tensor([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    w = displacement_wrench(positions, positions @ R.T, torch.zeros(len(positions), dtype=torch.long), torch.zeros(1, 3), 4.0, 1e9, 1e9)
    assert w[0, 5] > 0 and w[0, 3:5].abs().max() < 1e-3 * w[0, 5]


def test_zero_displacement_gives_zero_wrench():
    positions = _square()
    w = displacement_wrench(positions, positions.clone(), torch.zeros(len(positions), dtype=torch.long), torch.zeros(1, 3), 4.0, 5.0, 1.0)
    assert torch.count_nonzero(w) == 0


def test_only_attached_gaussians_push_and_each_body_gets_its_own():
    positions = _square(60)
    body_ids = torch.tensor([0] * 20 + [1] * 20 + [-1] * 20)  # -1: static scene / robot occluder
    displaced = positions.clone()
    displaced[20:40, 0] += 0.001  # body 1 only
    displaced[40:, 1] += 0.5  # the occluders "moved" a lot: must not matter
    w = displacement_wrench(positions, displaced, body_ids, torch.zeros(2, 3), 4.0, 1e9, 1e9)
    assert torch.count_nonzero(w[0]) == 0
    assert torch.isclose(w[1, 0], torch.tensor(4.0 * 20 * 0.001))


def test_clamp_keeps_direction_and_limits_norm():
    v = torch.tensor([[3.0, 4.0, 0.0], [0.3, 0.4, 0.0]])
    out = clamp_norm(v, 1.0)
    assert torch.allclose(out[0], torch.tensor([0.6, 0.8, 0.0]))
    assert torch.allclose(out[1], v[1])
    positions = _square()
    w = displacement_wrench(positions, positions + 1.0, torch.zeros(len(positions), dtype=torch.long), torch.zeros(1, 3), 4.0, 2.0, 0.1)
    assert torch.isclose(w[0, :3].norm(), torch.tensor(2.0)) and w[0, 3:].norm() <= 0.1 + 1e-6
