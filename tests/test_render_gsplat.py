"""cpu backend vs gsplat: only where CUDA and gsplat exist (scripts/check_gsplat.py does the full check)."""

import pytest
import torch

from real_is_sim.render import gsplat_available, rasterization

pytestmark = pytest.mark.skipif(not gsplat_available(), reason="needs a CUDA GPU and the gsplat package")


def test_cpu_backend_matches_gsplat():
    g = torch.Generator().manual_seed(0)
    n = 200
    params = [torch.randn(n, 3, generator=g) * 0.4 + torch.tensor([0.0, 0.0, 2.5]), torch.randn(n, 4, generator=g),
              torch.rand(n, 3, generator=g) * 0.05 + 0.003, torch.rand(n, generator=g), torch.rand(n, 3, generator=g)]
    K = torch.tensor([[70.0, 0, 40.0], [0, 70.0, 30.0], [0, 0, 1]])[None]
    grads = {}
    for backend, device in (("cpu", "cpu"), ("gsplat", "cuda")):
        leaves = [p.to(device).requires_grad_() for p in params]
        rgb, alpha, _ = rasterization(*leaves, torch.eye(4, device=device)[None], K.to(device), 80, 60, backend=backend)
        (rgb.square().sum() + alpha.sum()).backward()
        grads[backend] = (rgb.detach().cpu(), [p.grad.cpu() for p in leaves])
    assert (grads["cpu"][0] - grads["gsplat"][0]).abs().max() < 1e-3
    for a, b in zip(grads["cpu"][1], grads["gsplat"][1]):
        assert (a - b).abs().max() / b.abs().max() < 1e-2
