"""Our CPU rasterizer: screen tiles, per-tile depth-sorted Gaussian lists, Warp CPU kernels for the
per-pixel alpha compositing and a hand-written backward (gsplat's semantics, see :mod:`.project`).

Only tiles touched by some Gaussian's screen box are rasterized and differentiated; the rest of
the image is background. Projection runs in torch (autograd); this module owns the 2D part.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import warp as wp

from real_is_sim.render.project import ALPHA_THRESHOLD, MAX_ALPHA, TRANSMITTANCE_THRESHOLD, Projected

TILE_SIZE = 16


@wp.kernel(enable_backward=False)
def _composite_forward(
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), opacities: wp.array(dtype=float),
    colors: wp.array(dtype=wp.vec3), flatten_ids: wp.array(dtype=wp.int32),
    tile_keys: wp.array(dtype=wp.int32), tile_starts: wp.array(dtype=wp.int32), tile_ends: wp.array(dtype=wp.int32),
    width: int, height: int, tiles_x: int, tiles_per_camera: int, tile_size: int,
    out_rgb: wp.array(dtype=wp.vec3), out_T: wp.array(dtype=float), out_count: wp.array(dtype=wp.int32),
):
    tid = wp.tid()
    pixels_per_tile = tile_size * tile_size
    active = tid // pixels_per_tile
    local = tid - active * pixels_per_tile
    key = tile_keys[active]
    camera = key // tiles_per_camera
    tile = key - camera * tiles_per_camera
    x = (tile % tiles_x) * tile_size + local % tile_size
    y = (tile // tiles_x) * tile_size + local // tile_size
    if x >= width or y >= height:
        return
    px = float(x) + 0.5
    py = float(y) + 0.5
    T = float(1.0)
    rgb = wp.vec3(0.0)
    count = int(0)
    start = tile_starts[active]
    for i in range(start, tile_ends[active]):
        g = flatten_ids[i]
        m = means2d[g]
        q = conics[g]
        dx = m[0] - px
        dy = m[1] - py
        sigma = 0.5 * (q[0] * dx * dx + q[2] * dy * dy) + q[1] * dx * dy
        alpha = wp.min(MAX_ALPHA, opacities[g] * wp.exp(-sigma))
        if sigma < 0.0 or alpha < ALPHA_THRESHOLD:
            continue
        next_T = T * (1.0 - alpha)
        if next_T <= TRANSMITTANCE_THRESHOLD:
            break
        rgb = rgb + colors[g] * (alpha * T)
        T = next_T
        count = i - start + 1
    pixel = (camera * height + y) * width + x
    out_rgb[pixel] = rgb
    out_T[pixel] = T
    out_count[pixel] = count


@wp.kernel(enable_backward=False)
def _composite_backward(
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), opacities: wp.array(dtype=float),
    colors: wp.array(dtype=wp.vec3), flatten_ids: wp.array(dtype=wp.int32),
    tile_keys: wp.array(dtype=wp.int32), tile_starts: wp.array(dtype=wp.int32),
    width: int, height: int, tiles_x: int, tiles_per_camera: int, tile_size: int,
    final_T: wp.array(dtype=float), counts: wp.array(dtype=wp.int32),
    v_rgb: wp.array(dtype=wp.vec3), v_alpha: wp.array(dtype=float),
    v_means2d: wp.array(dtype=wp.vec2), v_conics: wp.array(dtype=wp.vec3), v_opacities: wp.array(dtype=float),
    v_colors: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    pixels_per_tile = tile_size * tile_size
    active = tid // pixels_per_tile
    local = tid - active * pixels_per_tile
    key = tile_keys[active]
    camera = key // tiles_per_camera
    tile = key - camera * tiles_per_camera
    x = (tile % tiles_x) * tile_size + local % tile_size
    y = (tile // tiles_x) * tile_size + local // tile_size
    if x >= width or y >= height:
        return
    pixel = (camera * height + y) * width + x
    n = counts[pixel]
    if n == 0:
        return
    px = float(x) + 0.5
    py = float(y) + 0.5
    T_final = final_T[pixel]
    T = T_final
    behind = wp.vec3(0.0)  # colour composited behind the current Gaussian
    g_rgb = v_rgb[pixel]
    g_alpha = v_alpha[pixel]
    start = tile_starts[active]
    for j in range(n):  # back to front over the Gaussians the forward pass blended
        g = flatten_ids[start + n - 1 - j]
        m = means2d[g]
        q = conics[g]
        dx = m[0] - px
        dy = m[1] - py
        sigma = 0.5 * (q[0] * dx * dx + q[2] * dy * dy) + q[1] * dx * dy
        vis = wp.exp(-sigma)
        raw_alpha = opacities[g] * vis
        alpha = wp.min(MAX_ALPHA, raw_alpha)
        if sigma < 0.0 or alpha < ALPHA_THRESHOLD:
            continue
        one_minus = 1.0 - alpha
        T = T / one_minus  # transmittance in front of this Gaussian
        weight = alpha * T
        c = colors[g]
        wp.atomic_add(v_colors, g, g_rgb * weight)
        v_a = wp.dot(g_rgb, c * T - behind / one_minus) + g_alpha * T_final / one_minus
        behind = behind + c * weight
        if raw_alpha <= MAX_ALPHA:
            wp.atomic_add(v_opacities, g, vis * v_a)
            v_sigma = -alpha * v_a
            wp.atomic_add(v_conics, g, wp.vec3(0.5 * dx * dx * v_sigma, dx * dy * v_sigma, 0.5 * dy * dy * v_sigma))
            wp.atomic_add(v_means2d, g, wp.vec2(v_sigma * (q[0] * dx + q[1] * dy), v_sigma * (q[1] * dx + q[2] * dy)))


@dataclass
class TileLists:
    """Which Gaussians (flattened camera * N + index, depth-sorted) touch each active tile."""

    flatten_ids: torch.Tensor  # [M] int32
    tile_keys: torch.Tensor  # [A] int32: camera * tiles_per_camera + tile_y * tiles_x + tile_x
    tile_starts: torch.Tensor  # [A] int32
    tile_ends: torch.Tensor  # [A] int32
    tiles_x: int
    tiles_y: int
    tile_size: int


@torch.no_grad()
def bin_into_tiles(projected: Projected, width: int, height: int, tile_size: int = TILE_SIZE) -> TileLists:
    C, N = projected.depths.shape
    tiles_x = (width + tile_size - 1) // tile_size
    tiles_y = (height + tile_size - 1) // tile_size
    cam, gid = torch.nonzero((projected.radii > 0).all(-1), as_tuple=True)
    order = torch.argsort(projected.depths[cam, gid], stable=True)  # front to back
    cam, gid = cam[order], gid[order]
    m = projected.means2d.detach()[cam, gid] / tile_size
    r = projected.radii[cam, gid].to(m.dtype) / tile_size
    x0 = torch.floor(m[:, 0] - r[:, 0]).clamp(0, tiles_x).long()
    x1 = torch.ceil(m[:, 0] + r[:, 0]).clamp(0, tiles_x).long()
    y0 = torch.floor(m[:, 1] - r[:, 1]).clamp(0, tiles_y).long()
    y1 = torch.ceil(m[:, 1] + r[:, 1]).clamp(0, tiles_y).long()
    span_x = x1 - x0
    per_gaussian = span_x * (y1 - y0)
    owner = torch.repeat_interleave(torch.arange(len(cam)), per_gaussian)
    first = torch.cumsum(per_gaussian, 0) - per_gaussian
    local = torch.arange(len(owner)) - first[owner]
    tile_x = x0[owner] + local % span_x[owner]
    tile_y = y0[owner] + local // span_x[owner]
    tiles_per_camera = tiles_x * tiles_y
    keys = cam[owner] * tiles_per_camera + tile_y * tiles_x + tile_x
    keys, by_tile = torch.sort(keys, stable=True)  # stable: stays front to back within a tile
    flatten_ids = (cam * N + gid)[owner[by_tile]]
    tile_keys, tile_counts = torch.unique_consecutive(keys, return_counts=True)
    tile_ends = torch.cumsum(tile_counts, 0)
    return TileLists(flatten_ids.int(), tile_keys.int(), (tile_ends - tile_counts).int(), tile_ends.int(),
                     tiles_x, tiles_y, tile_size)


def _wp(t: torch.Tensor, dtype=wp.float32):
    wp.init()  # idempotent; Warp needs it before wrapping torch memory
    return wp.from_torch(t.detach().contiguous(), dtype=dtype, requires_grad=False)


class _Composite(torch.autograd.Function):
    """Alpha compositing of projected Gaussians: -> (rgb [C,H,W,3] without background, alpha [C,H,W])."""

    @staticmethod
    def forward(ctx, means2d, conics, opacities, colors, tiles: TileLists, width: int, height: int):
        C, N = opacities.shape
        rgb = torch.zeros(C * height * width, 3)
        T = torch.ones(C * height * width)
        counts = torch.zeros(C * height * width, dtype=torch.int32)
        flat = (means2d.reshape(-1, 2).float().contiguous(), conics.reshape(-1, 3).float().contiguous(),
                opacities.reshape(-1).float().contiguous(), colors.reshape(-1, 3).float().contiguous())
        tile_args = [_wp(tiles.flatten_ids, wp.int32), _wp(tiles.tile_keys, wp.int32), _wp(tiles.tile_starts, wp.int32)]
        geometry = [width, height, tiles.tiles_x, tiles.tiles_x * tiles.tiles_y, tiles.tile_size]
        n_threads = len(tiles.tile_keys) * tiles.tile_size**2
        if n_threads:
            wp.launch(_composite_forward, dim=n_threads, device="cpu",
                      inputs=[_wp(flat[0], wp.vec2), _wp(flat[1], wp.vec3), _wp(flat[2]), _wp(flat[3], wp.vec3),
                              *tile_args, _wp(tiles.tile_ends, wp.int32), *geometry],
                      outputs=[_wp(rgb, wp.vec3), _wp(T), _wp(counts, wp.int32)])
        ctx.save_for_backward(*flat, T, counts)
        ctx.tiles, ctx.tile_args, ctx.geometry, ctx.n_threads = tiles, tile_args, geometry, n_threads
        ctx.shapes = (means2d.shape, conics.shape, opacities.shape, colors.shape)
        return rgb.reshape(C, height, width, 3), (1.0 - T).reshape(C, height, width)

    @staticmethod
    def backward(ctx, v_rgb, v_alpha):
        means2d, conics, opacities, colors, T, counts = ctx.saved_tensors
        grads = [torch.zeros_like(means2d), torch.zeros_like(conics), torch.zeros_like(opacities), torch.zeros_like(colors)]
        if ctx.n_threads:
            v_rgb = torch.zeros(T.shape[0], 3) if v_rgb is None else v_rgb.reshape(-1, 3).float()
            v_alpha = torch.zeros(T.shape[0]) if v_alpha is None else v_alpha.reshape(-1).float()
            wp.launch(_composite_backward, dim=ctx.n_threads, device="cpu",
                      inputs=[_wp(means2d, wp.vec2), _wp(conics, wp.vec3), _wp(opacities), _wp(colors, wp.vec3),
                              *ctx.tile_args, *ctx.geometry, _wp(T), _wp(counts, wp.int32),
                              _wp(v_rgb, wp.vec3), _wp(v_alpha)],
                      outputs=[_wp(grads[0], wp.vec2), _wp(grads[1], wp.vec3), _wp(grads[2]), _wp(grads[3], wp.vec3)])
        return (*(g.reshape(s) for g, s in zip(grads, ctx.shapes)), None, None, None)


def composite(projected: Projected, opacities: torch.Tensor, colors: torch.Tensor, width: int, height: int,
              tile_size: int = TILE_SIZE):
    """rgb [C,H,W,3] (no background) and alpha [C,H,W] of the projected Gaussians.

    ``opacities`` [C, N] and ``colors`` [C, N, 3] per camera (expand shared ones: autograd sums them back).
    """
    tiles = bin_into_tiles(projected, width, height, tile_size)
    rgb, alpha = _Composite.apply(projected.means2d, projected.conics, opacities, colors, tiles, width, height)
    return rgb, alpha, tiles
