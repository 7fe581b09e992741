import numpy as np
import torch

from real_is_sim.gaussians import GaussianCloud
from real_is_sim.render.clouds import render_clouds
from real_is_sim_tasks.pusht.masks import red_orange_mask


def square_cloud(z, color, body_id, n=16):
    xs, ys = np.meshgrid(np.linspace(-0.3, 0.3, 4), np.linspace(-0.3, 0.3, 4))
    means = torch.tensor(np.stack([xs.ravel(), ys.ravel(), np.full(n, z)], 1), dtype=torch.float32)
    return GaussianCloud(means, torch.tensor([[1.0, 0, 0, 0]]).repeat(n, 1), torch.full((n, 3), 0.12),
                         torch.full((n,), 0.9), torch.tensor([color] * n, dtype=torch.float32),
                         torch.full((n,), body_id, dtype=torch.int64))


def test_only_the_differentiable_cloud_gets_gradients_and_the_other_occludes():
    viewmats = torch.eye(4)[None]
    Ks = torch.tensor([[40.0, 0, 24], [0, 40.0, 24], [0, 0, 1]])[None]
    obj = square_cloud(0.0, [1.0, 0.2, 0.1], body_id=0)
    occluder = square_cloud(1.5, [0.1, 0.2, 1.0], body_id=-1)  # static world Gaussians in front of the object
    occluder = GaussianCloud(occluder.means + torch.tensor([0.2, 0.0, 0.0]), occluder.quats, occluder.scales,
                             occluder.opacities, occluder.colors.clone().requires_grad_(), occluder.body_ids)
    pose = torch.tensor([[0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 1.0]], requires_grad=True)
    rgb, alpha, _ = render_clouds([obj, occluder], [pose, None], viewmats, Ks, 48, 48,
                                  requires_grad=[True, False], backend="cpu")
    alone, _, _ = render_clouds([obj], [pose], viewmats, Ks, 48, 48, backend="cpu")
    assert (rgb - alone).abs().max() > 0.3  # the occluder covers part of the object
    rgb.sum().backward()
    assert pose.grad is not None and pose.grad.abs().sum() > 0
    assert occluder.colors.grad is None


def test_a_batch_of_scenes_renders_as_each_scene_alone():
    """Body poses [B, n_bodies, 7]: B scenes in one call, scene b seen by its own camera, the static cloud in each."""
    import pytest

    from real_is_sim.errors import DataError

    viewmats = torch.eye(4)[None].repeat(3, 1, 1)
    viewmats[1, 0, 3] = 0.1  # each scene its own camera
    Ks = torch.tensor([[40.0, 0, 24], [0, 40.0, 24], [0, 0, 1]])[None]
    obj = square_cloud(0.0, [1.0, 0.2, 0.1], body_id=0)
    occluder = square_cloud(1.5, [0.1, 0.2, 1.0], body_id=-1)
    poses = torch.tensor([[[0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 1.0]], [[0.2, 0.0, 3.0, 0.0, 0.0, 0.38, 0.92]],
                          [[-0.1, 0.1, 2.5, 0.0, 0.0, 0.0, 1.0]]])
    rgb, alpha, _ = render_clouds([obj, occluder], [poses, None], viewmats[:, None], Ks[None].expand(3, 1, 3, 3),
                                  48, 48, backend="cpu")
    assert rgb.shape == (3, 1, 48, 48, 3)
    for b in range(3):
        alone_rgb, alone_alpha, _ = render_clouds([obj, occluder], [poses[b], None], viewmats[b:b + 1], Ks, 48, 48,
                                                  backend="cpu")
        assert torch.equal(rgb[b], alone_rgb) and torch.equal(alpha[b], alone_alpha)
    assert not torch.equal(rgb[0], rgb[1])  # the scenes differ
    with pytest.raises(DataError, match="one scene"):
        render_clouds([obj, obj], [poses, poses[0]], viewmats[:, None], Ks[None].expand(3, 1, 3, 3), 48, 48)


def test_red_orange_mask_picks_the_block_colour_and_drops_specks():
    image = np.full((40, 40, 3), 90, dtype=np.uint8)  # grey table
    image[5:25, 5:25] = (220, 80, 50)  # the red-orange block
    image[30:36, 5:25] = (80, 110, 200)  # blue goal outline
    image[30:36, 28:36] = (240, 240, 240)  # white robot
    image[2, 35] = (220, 80, 50)  # a one-pixel reflection
    mask = red_orange_mask(image)
    expected = np.zeros((40, 40), dtype=bool)
    expected[5:25, 5:25] = True
    assert np.array_equal(mask, expected)
