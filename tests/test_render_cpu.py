"""The cpu backend against a plain dense reference written here: every pixel against every Gaussian,
sorted by depth, alpha-composited with gsplat's rules, differentiated by autograd (float64)."""

import pytest
import torch

from real_is_sim.render import RenderError, rasterization
from real_is_sim.render import cpu_backend


def dense_reference(means, quats, scales, opacities, colors, viewmat, K, width, height, background):
    """One camera, float64, no tiles, no boxes: gsplat's classic-mode semantics spelt out."""
    w, x, y, z = torch.nn.functional.normalize(quats, dim=-1).unbind(-1)
    R = torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                     2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                     2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1).reshape(-1, 3, 3)
    M = R * scales[:, None, :]
    cov = viewmat[:3, :3] @ (M @ M.transpose(1, 2)) @ viewmat[:3, :3].T
    p = means @ viewmat[:3, :3].T + viewmat[:3, 3]
    front = p[:, 2] > 0.01  # near plane
    p, cov, opacities, colors = p[front], cov[front], opacities[front], colors[front]
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    u = fx * p[:, 0] / p[:, 2] + cx
    v = fy * p[:, 1] / p[:, 2] + cy
    # EWA Jacobian at the mean clamped to 1.3x the field of view, as gsplat
    lim_x = (cx / fx + 0.15 * width / fx, (width - cx) / fx + 0.15 * width / fx)
    lim_y = (cy / fy + 0.15 * height / fy, (height - cy) / fy + 0.15 * height / fy)
    tx = p[:, 2] * torch.clamp(p[:, 0] / p[:, 2], -lim_x[0], lim_x[1])
    ty = p[:, 2] * torch.clamp(p[:, 1] / p[:, 2], -lim_y[0], lim_y[1])
    J = torch.zeros(len(p), 2, 3, dtype=p.dtype)
    J[:, 0, 0] = fx / p[:, 2]
    J[:, 0, 2] = -fx * tx / p[:, 2] ** 2
    J[:, 1, 1] = fy / p[:, 2]
    J[:, 1, 2] = -fy * ty / p[:, 2] ** 2
    cov2d = J @ cov @ J.transpose(1, 2) + 0.3 * torch.eye(2, dtype=p.dtype)
    conic = torch.linalg.inv(cov2d)
    order = torch.argsort(p[:, 2], stable=True)
    ys, xs = torch.meshgrid(torch.arange(height, dtype=p.dtype) + 0.5, torch.arange(width, dtype=p.dtype) + 0.5, indexing="ij")
    rgb = torch.zeros(height, width, 3, dtype=p.dtype)
    T = torch.ones(height, width, dtype=p.dtype)
    done = torch.zeros(height, width, dtype=torch.bool)
    for i in order.tolist():
        dx, dy = u[i] - xs, v[i] - ys
        q = conic[i]
        sigma = 0.5 * (q[0, 0] * dx * dx + q[1, 1] * dy * dy) + q[0, 1] * dx * dy
        alpha = torch.clamp(opacities[i] * torch.exp(-sigma), max=0.99)
        use = (sigma >= 0) & (alpha >= 1.0 / 255.0) & ~done
        next_T = T * (1 - alpha)
        done = done | (use & (next_T <= 1e-4))
        use = use & ~done
        rgb = rgb + torch.where(use[..., None], colors[i] * (alpha * T)[..., None], 0.0)
        T = torch.where(use, next_T, T)
    return rgb + T[..., None] * background, 1 - T


def random_scene(seed, n=40):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n, 3, generator=g, dtype=torch.float64) * torch.tensor([0.5, 0.4, 0.3], dtype=torch.float64)
    means[:, 2] += 2.0
    quats = torch.randn(n, 4, generator=g, dtype=torch.float64)
    scales = torch.rand(n, 3, generator=g, dtype=torch.float64) * 0.08 + 0.005
    opacities = torch.rand(n, generator=g, dtype=torch.float64) * 0.9 + 0.05
    colors = torch.rand(n, 3, generator=g, dtype=torch.float64)
    viewmat = torch.eye(4, dtype=torch.float64)
    K = torch.tensor([[60.0, 0, 33.0], [0, 55.0, 23.0], [0, 0, 1]], dtype=torch.float64)
    return [means, quats, scales, opacities, colors], viewmat, K


W, H = 64, 48
BACKGROUND = torch.tensor([0.2, 0.3, 0.4], dtype=torch.float64)


def compare(params, viewmat, K):
    """Images within 1e-4 and gradients of an image loss within 1e-3 (relative to the largest)."""
    weights = torch.rand(H, W, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    ref_params = [p.clone().requires_grad_() for p in params]
    rgb_ref, alpha_ref = dense_reference(*ref_params, viewmat, K, W, H, BACKGROUND)
    ((rgb_ref * weights).sum() + alpha_ref.sum()).backward()
    ours = [p.float().clone().requires_grad_() for p in params]
    rgb, alpha, _ = rasterization(*ours, viewmat[None].float(), K[None].float(), W, H,
                                  backgrounds=BACKGROUND[None].float(), backend="cpu")
    ((rgb[0] * weights.float()).sum() + alpha[0, ..., 0].sum()).backward()
    assert (rgb[0].double() - rgb_ref).abs().max() < 1e-4
    assert (alpha[0, ..., 0].double() - alpha_ref).abs().max() < 1e-4
    for name, ref, mine in zip(["means", "quats", "scales", "opacities", "colors"], ref_params, ours):
        scale = ref.grad.abs().max().clamp(min=1e-12)
        err = (mine.grad.double() - ref.grad).abs().max() / scale
        assert err < 1e-3, f"gradient of {name} off by {err:.2e} (relative to its largest entry)"
    return rgb_ref, alpha_ref


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_scenes_match_dense_reference(seed):
    params, viewmat, K = random_scene(seed)
    _, alpha_ref = compare(params, viewmat, K)
    assert alpha_ref.max() > 0.5  # the scene is actually visible


def test_edge_cases_match_dense_reference():
    params, viewmat, K = random_scene(3, n=12)
    means, quats, scales, opacities, colors = params
    means[0] = torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64)  # behind the camera
    means[1] = torch.tensor([-1.15, 0.0, 2.0], dtype=torch.float64)  # partly off-screen, left
    scales[1] = 0.1
    means[2] = torch.tensor([0.1, 1.0, 2.5], dtype=torch.float64)  # partly off-screen, bottom
    scales[3] = torch.tensor([0.05, 0.0, 0.0], dtype=torch.float64)  # degenerate: a needle
    scales[4] = 0.0  # a point: only the 0.3 px low-pass remains
    opacities[5] = 0.0  # invisible
    means[6] = torch.tensor([0.0, 0.0, 0.005], dtype=torch.float64)  # nearer than the near plane
    compare(params, viewmat, K)


def test_all_behind_camera_renders_background():
    params, viewmat, K = random_scene(4)
    params[0][:, 2] -= 10.0
    rgb, alpha, _ = rasterization(*[p.float() for p in params], viewmat[None].float(), K[None].float(), W, H,
                                  backgrounds=BACKGROUND[None].float(), backend="cpu")
    assert torch.allclose(rgb[0], BACKGROUND.float().expand(H, W, 3))
    assert alpha.abs().max() == 0


def test_background_image_and_several_cameras():
    params, viewmat, K = random_scene(5)
    shifted = viewmat.clone()
    shifted[0, 3] = 0.2
    views = torch.stack([viewmat, shifted]).float()
    bg = torch.rand(2, H, W, 3)
    rgb, alpha, _ = rasterization(*[p.float() for p in params], views, K.expand(2, 3, 3).float(), W, H,
                                  backgrounds=bg, backend="cpu")
    for c in range(2):
        ref_rgb, ref_alpha = dense_reference(*params, views[c].double(), K, W, H, bg[c].double())
        assert (rgb[c].double() - ref_rgb).abs().max() < 1e-4
        assert (alpha[c, ..., 0].double() - ref_alpha).abs().max() < 1e-4


@pytest.mark.parametrize("change, message", [
    (lambda p: p.__setitem__(0, torch.zeros(40, 2)), "means"),
    (lambda p: p.__setitem__(1, torch.zeros(40, 3)), "quats"),
    (lambda p: p[2].__setitem__((0, 0), float("nan")), "non-finite"),
    (lambda p: p.__setitem__(3, torch.zeros(40, 1)), "opacities"),
])
def test_bad_input_raises_one_clear_error(change, message):
    params, viewmat, K = random_scene(6)
    params = [p.float() for p in params]
    change(params)
    with pytest.raises(RenderError, match=message):
        rasterization(*params, viewmat[None].float(), K[None].float(), W, H, backend="cpu")


def test_bad_size_and_backend_raise():
    params, viewmat, K = random_scene(6)
    params = [p.float() for p in params]
    with pytest.raises(RenderError, match="width and height"):
        rasterization(*params, viewmat[None].float(), K[None].float(), 0, H, backend="cpu")
    with pytest.raises(RenderError, match="unknown backend"):
        rasterization(*params, viewmat[None].float(), K[None].float(), W, H, backend="opengl")
    if not torch.cuda.is_available():
        with pytest.raises(RenderError, match="CUDA"):
            rasterization(*params, viewmat[None].float(), K[None].float(), W, H, backend="gsplat")


def test_empty_cloud_renders_background():
    empty = [torch.zeros(0, 3), torch.zeros(0, 4), torch.zeros(0, 3), torch.zeros(0), torch.zeros(0, 3)]
    K = torch.tensor([[60.0, 0, 32.0], [0, 60.0, 24.0], [0, 0, 1]])[None]
    rgb, alpha, meta = rasterization(*empty, torch.eye(4)[None], K, W, H, backgrounds=torch.ones(1, 3), backend="cpu")
    assert rgb.shape == (1, H, W, 3) and torch.all(rgb == 1) and torch.all(alpha == 0)
    assert meta["means2d"].shape == (1, 0, 2) and meta["radii"].shape == (1, 0, 2)
    # an image background passes through, differentiably, and no backend kernel runs (gsplat hangs on N = 0)
    image = torch.rand(1, H, W, 3, requires_grad=True)
    rgb, _, _ = rasterization(*empty, torch.eye(4)[None], K, W, H, backgrounds=image, backend="auto")
    rgb.sum().backward()
    assert torch.equal(rgb.detach().cpu(), image.detach()) and torch.all(image.grad == 1)


def test_threads_give_the_same_images_and_gradients():
    params, viewmat, K = random_scene(8)
    views = torch.stack([viewmat, viewmat, viewmat]).float()
    views[1, 0, 3], views[2, 1, 3] = 0.3, -0.2
    results = []
    for threads in (1, 2, 3):
        leaves = [p.float().clone().requires_grad_() for p in params]
        # 8 px tiles: many tiles per camera, so the split cuts through cameras and their shared Gaussians
        rgb, alpha, _ = rasterization(*leaves, views, K.expand(3, 3, 3).float(), W, H, backend="cpu", threads=threads,
                                      tile_size=8)
        (rgb.square().sum() + alpha.sum()).backward()
        results.append([rgb.detach(), alpha.detach()] + [p.grad for p in leaves])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            # float32 partial sums per thread: the gradients differ by summation order only
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (a - b).abs().max()


def test_batch_of_scenes_equals_one_call_per_scene():
    """gsplat's batch dimension: scene b is seen by its own cameras only, exactly as rendering it alone, and each
    scene's Gaussians get the gradients of its own images."""
    scenes = [random_scene(seed)[0] for seed in (10, 11, 12)]
    _, viewmat, K = random_scene(10)
    views = torch.stack([viewmat, viewmat]).float()
    views[1, 0, 3] = 0.25  # two cameras per scene
    Ks = K.expand(2, 3, 3).float()
    bg = torch.rand(3, 2, H, W, 3, generator=torch.Generator().manual_seed(3))
    weights = torch.rand(3, 2, H, W, 3, generator=torch.Generator().manual_seed(4))
    batched = [torch.stack([scene[i] for scene in scenes]).float().requires_grad_() for i in range(5)]
    rgb, alpha, meta = rasterization(*batched, views.expand(3, 2, 4, 4), Ks.expand(3, 2, 3, 3), W, H, backgrounds=bg,
                                     backend="cpu")
    assert rgb.shape == (3, 2, H, W, 3) and alpha.shape == (3, 2, H, W, 1) and meta["means2d"].shape == (3, 2, 40, 2)
    ((rgb * weights).sum() + alpha.sum()).backward()
    for b, scene in enumerate(scenes):
        alone = [p.float().clone().requires_grad_() for p in scene]
        rgb_b, alpha_b, _ = rasterization(*alone, views, Ks, W, H, backgrounds=bg[b], backend="cpu")
        ((rgb_b * weights[b]).sum() + alpha_b.sum()).backward()
        assert torch.equal(rgb[b].detach(), rgb_b.detach()) and torch.equal(alpha[b].detach(), alpha_b.detach())
        assert alpha_b.max() > 0.5  # the scene is visible
        for leaf, mine in zip(alone, batched):
            assert torch.allclose(mine.grad[b], leaf.grad, atol=1e-6, rtol=1e-5)
    with pytest.raises(RenderError, match="viewmats"):  # one batch dimension on every input
        rasterization(*[p.detach() for p in batched], views, Ks, W, H, backend="cpu")


def test_tile_split_covers_every_tile_once_with_balanced_work():
    params, viewmat, K = random_scene(40)
    _, _, meta = rasterization(*[p.float() for p in params], viewmat[None].float(), K[None].float(), W, H, backend="cpu")
    tiles = cpu_backend.bin_into_tiles(meta["means2d"][0].numpy(), meta["radii"][0].numpy(), meta["depths"][0].numpy(),
                                       40, W, H, 8)
    entries = tiles.tile_ends - tiles.tile_starts
    assert len(entries) > 3
    for threads in (1, 2, 3):
        ranges = cpu_backend.split_tiles(tiles, threads)
        assert ranges[0][0] == 0 and ranges[-1][1] == len(entries) and len(ranges) == threads
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # consecutive, no gap, no overlap
        work = [entries[a:b].sum() for a, b in ranges]
        assert max(work) - min(work) <= 2 * entries.max()


def _layer_scene(seed, n, z0, z1):
    g = torch.Generator().manual_seed(seed)
    means = torch.rand(n, 3, generator=g) * torch.tensor([0.2, 0.2, z1 - z0]) + torch.tensor([-0.1, -0.1, z0])
    return [means, torch.randn(n, 4, generator=g), torch.rand(n, 3, generator=g) * 0.01 + 0.003,
            torch.rand(n, generator=g) * 0.8 + 0.2, torch.rand(n, 3, generator=g)]


@pytest.mark.parametrize("occluder_depth", [(0.30, 0.35), (0.70, 0.80), (0.49, 0.51)], ids=["front", "behind", "between"])
def test_static_layer_equals_rendering_its_gaussians(occluder_depth):
    # Occluders rendered once into a layer and composited at their depth give the joint render's image and gradients
    # wherever they do not interleave in depth with the rendered Gaussians: in front, behind, or between two groups
    # (the layer then goes in mid-list, and the backward pass must undo it there).
    viewmats = torch.eye(4)[None].repeat(2, 1, 1)
    viewmats[1, 0, 3] = 0.02
    Ks = torch.tensor([[300.0, 0, 80], [0, 300.0, 60], [0, 0, 1]])[None].repeat(2, 1, 1)
    width, height, weights = 160, 120, torch.linspace(0.2, 1.0, 3)
    background = torch.rand(2, height, width, 3, generator=torch.Generator().manual_seed(9))
    near, far = _layer_scene(1, 30, 0.38, 0.42), _layer_scene(3, 30, 0.58, 0.62)
    objects = [torch.cat([a, b]) for a, b in zip(near, far)]
    occluders = _layer_scene(2, 150, *occluder_depth)
    results = []
    for joint in (True, False):
        fields = [f.clone().requires_grad_(k in (0, 3)) for k, f in enumerate(objects)]
        if joint:
            image = rasterization(*[torch.cat([f, o]) for f, o in zip(fields, occluders)], viewmats, Ks, width, height,
                                  backgrounds=background, backend="cpu")[0]
        else:
            layer = cpu_backend.render_layer(*occluders, viewmats, Ks, width, height, eps2d=0.3)
            image = rasterization(*fields, viewmats, Ks, width, height, backgrounds=background, backend="cpu", layer=layer)[0]
        (image * weights).sum().backward()
        results.append((image.detach(), fields[0].grad, fields[3].grad))
    (joint_image, joint_means, joint_opacities), (layer_image, layer_means, layer_opacities) = results
    assert (joint_image - background).abs().amax() > 0.1  # the Gaussians are in the picture
    torch.testing.assert_close(layer_image, joint_image, atol=1e-5, rtol=0)
    torch.testing.assert_close(layer_means, joint_means, atol=1e-5 * joint_means.abs().max().item(), rtol=1e-4)
    torch.testing.assert_close(layer_opacities, joint_opacities, atol=1e-5 * joint_opacities.abs().max().item(), rtol=1e-4)


def test_static_layer_alone_and_bad_layers():
    viewmats, Ks = torch.eye(4)[None], torch.tensor([[[300.0, 0, 80], [0, 300.0, 60], [0, 0, 1]]])
    occluders = _layer_scene(2, 50, 0.4, 0.5)
    background = torch.full((1, 3), 0.25)
    layer = cpu_backend.render_layer(*occluders, viewmats, Ks, 160, 120, eps2d=0.3)
    joint = rasterization(*occluders, viewmats, Ks, 160, 120, backgrounds=background, backend="cpu")[0]
    empty = [torch.zeros(0, 3), torch.zeros(0, 4), torch.zeros(0, 3), torch.zeros(0), torch.zeros(0, 3)]
    alone = rasterization(*empty, viewmats, Ks, 160, 120, backgrounds=background, backend="cpu", layer=layer)[0]
    torch.testing.assert_close(alone, joint, atol=1e-6, rtol=0)  # no Gaussians: the layer over the background
    with pytest.raises(RenderError, match="static layer has 19200 pixels"):
        rasterization(*occluders, viewmats, Ks, 80, 60, backend="cpu", layer=layer)
