"""Our CPU rasterizer (gsplat's classic-mode semantics, see :mod:`.semantics`), as Warp CPU kernels.

Pipeline, one torch autograd Function: project every (camera, Gaussian) in a Warp kernel (its
backward is Warp's generated adjoint) -> bin the screen boxes into tiles, depth-sorted per tile
(numpy, no gradient) -> alpha-composite only the tiles some Gaussian touches (Warp kernel) -> a
hand-written backward kernel walks each pixel's list back to front. The rest of the image is
background and costs nothing. Cameras can be composited in parallel threads: Warp's CPU launches
release the GIL.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import warp as wp

from real_is_sim.render.semantics import ALPHA_THRESHOLD, GAUSSIAN_EXTEND, MAX_ALPHA, TRANSMITTANCE_THRESHOLD

TILE_SIZE = 8  # measured on the T-block views: 8 px beats 4 px (binning cost) and 16 px (longer lists)


@wp.kernel
def _project(
    means: wp.array(dtype=wp.vec3), quats: wp.array(dtype=wp.vec4), scales: wp.array(dtype=wp.vec3),
    opacities: wp.array(dtype=float), viewmats: wp.array(dtype=wp.mat44), Ks: wp.array(dtype=wp.mat33),
    n_gaussians: int, width: int, height: int, eps2d: float, near_plane: float, far_plane: float,
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), depths: wp.array(dtype=float),
    radii: wp.array(dtype=wp.vec2i),
):
    tid = wp.tid()
    cam = tid // n_gaussians
    n = tid - cam * n_gaussians
    V = viewmats[cam]
    Rv = wp.mat33(V[0, 0], V[0, 1], V[0, 2], V[1, 0], V[1, 1], V[1, 2], V[2, 0], V[2, 1], V[2, 2])
    p = Rv * means[n] + wp.vec3(V[0, 3], V[1, 3], V[2, 3])
    q = wp.normalize(quats[n])
    w = q[0]
    x = q[1]
    y = q[2]
    z = q[3]
    R = wp.mat33(1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y),
                 2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x),
                 2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y))
    M = R * wp.diag(scales[n])
    cov_c = Rv * (M * wp.transpose(M)) * wp.transpose(Rv)
    K = Ks[cam]
    fx = K[0, 0]
    fy = K[1, 1]
    cx = K[0, 2]
    cy = K[1, 2]
    depth = p[2]
    in_depth = depth > near_plane and depth < far_plane
    zs = wp.where(in_depth, depth, 1.0)  # keeps culled Gaussians' maths (and adjoints) finite
    tan_fovx = 0.5 * float(width) / fx
    tan_fovy = 0.5 * float(height) / fy
    tx = zs * wp.clamp(p[0] / zs, -(cx / fx + 0.3 * tan_fovx), (float(width) - cx) / fx + 0.3 * tan_fovx)
    ty = zs * wp.clamp(p[1] / zs, -(cy / fy + 0.3 * tan_fovy), (float(height) - cy) / fy + 0.3 * tan_fovy)
    j0 = wp.vec3(fx / zs, 0.0, -fx * tx / (zs * zs))
    j1 = wp.vec3(0.0, fy / zs, -fy * ty / (zs * zs))
    a = wp.dot(j0, cov_c * j0) + eps2d
    b = wp.dot(j0, cov_c * j1)
    c = wp.dot(j1, cov_c * j1) + eps2d
    det = a * c - b * b
    positive = det > 0.0
    det_s = wp.where(positive, det, 1.0)
    conics[tid] = wp.vec3(c / det_s, -b / det_s, a / det_s)
    m2 = wp.vec2(fx * p[0] / zs + cx, fy * p[1] / zs + cy)
    means2d[tid] = m2
    depths[tid] = depth
    # opacity-aware screen box, as gsplat: outside it alpha < 1/255
    opac = opacities[n]
    extend = wp.min(GAUSSIAN_EXTEND, wp.sqrt(2.0 * wp.log(wp.max(opac, ALPHA_THRESHOLD) / ALPHA_THRESHOLD)))
    rx = wp.ceil(extend * wp.sqrt(wp.max(a, 0.0)))
    ry = wp.ceil(extend * wp.sqrt(wp.max(c, 0.0)))
    inside = m2[0] + rx > 0.0 and m2[0] - rx < float(width) and m2[1] + ry > 0.0 and m2[1] - ry < float(height)
    keep = in_depth and positive and opac >= ALPHA_THRESHOLD and inside and rx > 0.0 and ry > 0.0
    radii[tid] = wp.where(keep, wp.vec2i(int(rx), int(ry)), wp.vec2i(0, 0))


@wp.func
def _pixel_of(active: int, local: int, tile_keys: wp.array(dtype=wp.int32), tiles_x: int, tiles_per_camera: int,
              tile_size: int):
    key = tile_keys[active]
    cam = key // tiles_per_camera
    tile = key - cam * tiles_per_camera
    return wp.vec3i(cam, (tile % tiles_x) * tile_size + local % tile_size, (tile // tiles_x) * tile_size + local // tile_size)


@wp.kernel(enable_backward=False)
def _composite_forward(
    # per entry of the tile lists (gathered in list order, so the inner loop reads memory in sequence)
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), opacities: wp.array(dtype=float),
    colors: wp.array(dtype=wp.vec3), log_opacity_limits: wp.array(dtype=float),
    tile_keys: wp.array(dtype=wp.int32), tile_starts: wp.array(dtype=wp.int32), tile_ends: wp.array(dtype=wp.int32),
    first_tile: int, width: int, height: int, tiles_x: int, tiles_per_camera: int, tile_size: int,
    out_rgb: wp.array(dtype=wp.vec3), out_T: wp.array(dtype=float), out_count: wp.array(dtype=wp.int32),
):
    tid = wp.tid()
    active = first_tile + tid // (tile_size * tile_size)
    where = _pixel_of(active, tid % (tile_size * tile_size), tile_keys, tiles_x, tiles_per_camera, tile_size)
    x = where[1]
    y = where[2]
    if x >= width or y >= height:
        return
    px = float(x) + 0.5
    py = float(y) + 0.5
    T = float(1.0)
    rgb = wp.vec3(0.0)
    count = int(0)
    start = tile_starts[active]
    for i in range(start, tile_ends[active]):
        m = means2d[i]
        q = conics[i]
        dx = m[0] - px
        dy = m[1] - py
        sigma = 0.5 * (q[0] * dx * dx + q[2] * dy * dy) + q[1] * dx * dy
        if sigma < 0.0 or sigma > log_opacity_limits[i]:  # alpha < 1/255 for sure: skip the exp
            continue
        alpha = wp.min(MAX_ALPHA, opacities[i] * wp.exp(-sigma))
        if alpha < ALPHA_THRESHOLD:
            continue
        next_T = T * (1.0 - alpha)
        if next_T <= TRANSMITTANCE_THRESHOLD:
            break
        rgb = rgb + colors[i] * (alpha * T)
        T = next_T
        count = i - start + 1
    pixel = (where[0] * height + y) * width + x
    out_rgb[pixel] = rgb
    out_T[pixel] = T
    out_count[pixel] = count


@wp.kernel(enable_backward=False)
def _composite_backward(
    # list-ordered like the forward's; gradients go to flatten_ids[i] = camera * N + Gaussian
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), opacities: wp.array(dtype=float),
    colors: wp.array(dtype=wp.vec3), log_opacity_limits: wp.array(dtype=float), flatten_ids: wp.array(dtype=wp.int32),
    tile_keys: wp.array(dtype=wp.int32), tile_starts: wp.array(dtype=wp.int32),
    first_tile: int, width: int, height: int, tiles_x: int, tiles_per_camera: int, tile_size: int,
    final_T: wp.array(dtype=float), counts: wp.array(dtype=wp.int32),
    v_rgb: wp.array(dtype=wp.vec3), v_alpha: wp.array(dtype=float),
    v_means2d: wp.array(dtype=wp.vec2), v_conics: wp.array(dtype=wp.vec3), v_opacities: wp.array(dtype=float),
    v_colors: wp.array(dtype=wp.vec3),
):
    # v_opacities, v_colors are per (camera, Gaussian) like v_means2d: threads of different cameras never share an entry
    tid = wp.tid()
    active = first_tile + tid // (tile_size * tile_size)
    where = _pixel_of(active, tid % (tile_size * tile_size), tile_keys, tiles_x, tiles_per_camera, tile_size)
    x = where[1]
    y = where[2]
    if x >= width or y >= height:
        return
    pixel = (where[0] * height + y) * width + x
    count = counts[pixel]
    if count == 0:
        return
    px = float(x) + 0.5
    py = float(y) + 0.5
    T_final = final_T[pixel]
    T = T_final
    behind = wp.vec3(0.0)  # colour composited behind the current Gaussian
    g_rgb = v_rgb[pixel]
    g_alpha = v_alpha[pixel]
    start = tile_starts[active]
    for j in range(count):  # back to front over the Gaussians the forward pass blended
        i = start + count - 1 - j
        m = means2d[i]
        q = conics[i]
        dx = m[0] - px
        dy = m[1] - py
        sigma = 0.5 * (q[0] * dx * dx + q[2] * dy * dy) + q[1] * dx * dy
        if sigma < 0.0 or sigma > log_opacity_limits[i]:
            continue
        vis = wp.exp(-sigma)
        raw_alpha = opacities[i] * vis
        alpha = wp.min(MAX_ALPHA, raw_alpha)
        if sigma < 0.0 or alpha < ALPHA_THRESHOLD:
            continue
        one_minus = 1.0 - alpha
        T = T / one_minus  # transmittance in front of this Gaussian
        weight = alpha * T
        c = colors[i]
        g = flatten_ids[i]
        v_colors[g] = v_colors[g] + g_rgb * weight
        v_a = wp.dot(g_rgb, c * T - behind / one_minus) + g_alpha * T_final / one_minus
        behind = behind + c * weight
        if raw_alpha <= MAX_ALPHA:
            v_opacities[g] = v_opacities[g] + vis * v_a
            v_sigma = -alpha * v_a
            v_conics[g] = v_conics[g] + wp.vec3(0.5 * dx * dx * v_sigma, dx * dy * v_sigma, 0.5 * dy * dy * v_sigma)
            v_means2d[g] = v_means2d[g] + wp.vec2(v_sigma * (q[0] * dx + q[1] * dy), v_sigma * (q[1] * dx + q[2] * dy))


@dataclass
class TileLists:
    """Which Gaussians (flattened camera * N + index, front to back) touch each active tile."""

    flatten_ids: np.ndarray  # [M] int32
    tile_keys: np.ndarray  # [A] int32, sorted: camera * tiles_per_camera + tile_y * tiles_x + tile_x
    tile_starts: np.ndarray  # [A] int32
    tile_ends: np.ndarray  # [A] int32
    camera_tiles: np.ndarray  # [C + 1] int64: active tiles of camera c are camera_tiles[c]:camera_tiles[c+1]
    tiles_x: int
    tiles_y: int
    tile_size: int


def _min_sigma_over_tiles(means2d, conics, tile_x, tile_y, tile_size):
    """Smallest sigma = 0.5 d^T conic d of each Gaussian over the pixel centres of its tile (float64)."""
    lo_x, lo_y = tile_x * tile_size + 0.5 - means2d[:, 0], tile_y * tile_size + 0.5 - means2d[:, 1]
    hi_x, hi_y = lo_x + tile_size - 1, lo_y + tile_size - 1
    a, b, c = conics[:, 0], conics[:, 1], conics[:, 2]
    sigma = lambda dx, dy: 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy  # noqa: E731
    inside = (lo_x <= 0) & (hi_x >= 0) & (lo_y <= 0) & (hi_y >= 0)
    best = np.full(len(a), np.inf)
    for dx in (lo_x, hi_x):  # vertical edges: best dy for this dx, clamped to the edge
        best = np.minimum(best, sigma(dx, np.clip(-b * dx / c, lo_y, hi_y)))
    for dy in (lo_y, hi_y):
        best = np.minimum(best, sigma(np.clip(-b * dy / a, lo_x, hi_x), dy))
    return np.where(inside, 0.0, best)


def bin_into_tiles(means2d: np.ndarray, radii: np.ndarray, depths: np.ndarray, n_cameras: int, n_gaussians: int,
                   width: int, height: int, tile_size: int, conics: np.ndarray | None = None,
                   sigma_limits: np.ndarray | None = None) -> TileLists:
    """Tile lists; with ``conics`` and ``sigma_limits`` (ln(255 opacity) per camera * N + index), a
    Gaussian is also dropped from the tiles of its box where its ellipse misses every pixel centre."""
    tiles_x = (width + tile_size - 1) // tile_size
    tiles_y = (height + tile_size - 1) // tile_size
    tiles_per_camera = tiles_x * tiles_y
    visible = np.flatnonzero((radii > 0).all(axis=1))
    order = visible[np.argsort(depths[visible], kind="stable")]  # front to back
    m = means2d[order] / tile_size
    r = radii[order] / tile_size
    x0 = np.clip(np.floor(m[:, 0] - r[:, 0]), 0, tiles_x).astype(np.int64)
    x1 = np.clip(np.ceil(m[:, 0] + r[:, 0]), 0, tiles_x).astype(np.int64)
    y0 = np.clip(np.floor(m[:, 1] - r[:, 1]), 0, tiles_y).astype(np.int64)
    y1 = np.clip(np.ceil(m[:, 1] + r[:, 1]), 0, tiles_y).astype(np.int64)
    span_x = x1 - x0
    per_gaussian = span_x * (y1 - y0)
    owner = np.repeat(np.arange(len(order)), per_gaussian)
    local = np.arange(len(owner)) - np.repeat(np.cumsum(per_gaussian) - per_gaussian, per_gaussian)
    tile_x = x0[owner] + local % span_x[owner]
    tile_y = y0[owner] + local // span_x[owner]
    if conics is not None and len(owner):
        g = order[owner]
        touches = _min_sigma_over_tiles(means2d[g].astype(np.float64), conics[g].astype(np.float64), tile_x, tile_y,
                                        tile_size) <= sigma_limits[g]
        owner, tile_x, tile_y = owner[touches], tile_x[touches], tile_y[touches]
    keys = (order[owner] // n_gaussians) * tiles_per_camera + tile_y * tiles_x + tile_x
    by_tile = np.argsort(keys, kind="stable")  # stable: stays front to back within a tile
    keys = keys[by_tile]
    tile_keys, tile_starts, tile_counts = np.unique(keys, return_index=True, return_counts=True)
    camera_tiles = np.searchsorted(tile_keys, np.arange(n_cameras + 1) * tiles_per_camera)
    return TileLists(order[owner[by_tile]].astype(np.int32), tile_keys.astype(np.int32), tile_starts.astype(np.int32),
                     (tile_starts + tile_counts).astype(np.int32), camera_tiles, tiles_x, tiles_y, tile_size)


def _per_view_arrays(opacities: torch.Tensor, colors: torch.Tensor, n_cameras: int):
    """Opacities [C*N], colours [C*N, 3] and the sigma beyond which alpha < 1/255, ln(255 opacity) [C*N]."""
    opacities = opacities.repeat(n_cameras).contiguous()
    limits = torch.log(opacities / ALPHA_THRESHOLD) + 1e-3  # margin: the exact alpha test decides near the edge
    return opacities, colors.repeat(n_cameras, 1).contiguous(), limits


def _gather_records(tiles: TileLists, means2d, conics, per_view) -> list[torch.Tensor]:
    """means2d, conics, opacities, colours, sigma limits of every tile-list entry, in list order."""
    index = torch.from_numpy(tiles.flatten_ids).long()
    opacities, colors, limits = per_view
    return [means2d[index].contiguous(), conics[index].contiguous(), opacities[index].contiguous(),
            colors[index].contiguous(), limits[index].contiguous()]


_pool: ThreadPoolExecutor | None = None


def _composite_tile_ranges(work, tiles: TileLists, threads: int) -> None:
    """Run work(first, last) over the active tiles: one launch for all cameras, or one per camera in up to
    ``threads`` threads (Warp CPU launches release the GIL)."""
    global _pool
    bounds = tiles.camera_tiles
    n_cameras = len(bounds) - 1
    if threads <= 1 or n_cameras <= 1:
        work(0, int(bounds[-1]))  # tiles of all cameras are consecutive: one launch saves the per-launch cost
        return
    if _pool is None or _pool._max_workers < threads:
        _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="real_is_sim_render")
    for future in [_pool.submit(work, int(bounds[c]), int(bounds[c + 1])) for c in range(n_cameras)]:
        future.result()


def _wp(t, dtype=wp.float32):
    wp.init()  # idempotent; Warp needs it before wrapping memory
    if isinstance(t, np.ndarray):
        return wp.array(t, dtype=dtype, device="cpu", copy=False)
    return wp.from_torch(t, dtype=dtype, requires_grad=False)


class RasterizeCPU(torch.autograd.Function):
    """(means, quats, scales, opacities, colors) -> (rgb [C,H,W,3] without background, alpha [C,H,W,1])."""

    @staticmethod
    def forward(ctx, means, quats, scales, opacities, colors, viewmats, Ks, settings):
        width, height, eps2d, near_plane, far_plane, tile_size, threads = settings
        C, N = viewmats.shape[0], means.shape[0]
        inputs = [t.detach().float().contiguous() for t in (means, quats, scales, opacities, colors, viewmats, Ks)]
        means2d, conics = torch.zeros(C * N, 2), torch.zeros(C * N, 3)
        depths, radii = torch.zeros(C * N), torch.zeros(C * N, 2, dtype=torch.int32)
        project_args = [_wp(inputs[0], wp.vec3), _wp(inputs[1], wp.vec4), _wp(inputs[2], wp.vec3), _wp(inputs[3]),
                        _wp(inputs[5], wp.mat44), _wp(inputs[6], wp.mat33), N, width, height, eps2d, near_plane, far_plane]
        projected = [_wp(means2d, wp.vec2), _wp(conics, wp.vec3), _wp(depths), _wp(radii, wp.vec2i)]
        wp.launch(_project, dim=C * N, inputs=project_args, outputs=projected, device="cpu")
        per_view = _per_view_arrays(inputs[3], inputs[4], C)
        tiles = bin_into_tiles(means2d.numpy(), radii.numpy(), depths.numpy(), C, N, width, height, tile_size,
                               conics.numpy(), per_view[2].numpy())
        rgb, T = torch.zeros(C * height * width, 3), torch.ones(C * height * width)
        counts = torch.zeros(C * height * width, dtype=torch.int32)
        records = _gather_records(tiles, means2d, conics, per_view)
        gaussians = [_wp(t, d) for t, d in zip(records, (wp.vec2, wp.vec3, wp.float32, wp.vec3, wp.float32))]
        tile_args = [_wp(tiles.tile_keys, wp.int32), _wp(tiles.tile_starts, wp.int32)]
        geometry = [width, height, tiles.tiles_x, tiles.tiles_x * tiles.tiles_y, tile_size]
        outputs = [_wp(rgb, wp.vec3), _wp(T), _wp(counts, wp.int32)]

        def composite(first, last):
            wp.launch(_composite_forward, dim=(last - first) * tile_size**2, device="cpu",
                      inputs=[*gaussians, *tile_args, _wp(tiles.tile_ends, wp.int32), first, *geometry], outputs=outputs)

        _composite_tile_ranges(composite, tiles, threads)
        ctx.save_for_backward(*inputs, means2d, conics, depths, radii, T, counts, *records)
        ctx.tiles, ctx.settings = tiles, settings
        ctx.mark_non_differentiable(means2d, conics, depths, radii)
        return rgb.reshape(C, height, width, 3), (1.0 - T).reshape(C, height, width, 1), means2d, conics, depths, radii

    @staticmethod
    def backward(ctx, v_rgb, v_alpha, *unused):
        (means, quats, scales, opacities, colors, viewmats, Ks, means2d, conics, depths, radii, T, counts,
         *records) = ctx.saved_tensors
        width, height, eps2d, near_plane, far_plane, tile_size, threads = ctx.settings
        tiles = ctx.tiles
        C, N = viewmats.shape[0], means.shape[0]
        v_means2d, v_conics = torch.zeros(C * N, 2), torch.zeros(C * N, 3)
        v_opacities, v_colors = torch.zeros(C * N), torch.zeros(C * N, 3)
        v_rgb = torch.zeros(T.shape[0], 3) if v_rgb is None else v_rgb.reshape(-1, 3).float().contiguous()
        v_alpha = torch.zeros(T.shape[0]) if v_alpha is None else v_alpha.reshape(-1).float().contiguous()
        tile_args = [_wp(tiles.tile_keys, wp.int32), _wp(tiles.tile_starts, wp.int32)]
        geometry = [width, height, tiles.tiles_x, tiles.tiles_x * tiles.tiles_y, tile_size]
        gaussians = [_wp(t, d) for t, d in zip(records, (wp.vec2, wp.vec3, wp.float32, wp.vec3, wp.float32))]
        gaussians.append(_wp(tiles.flatten_ids, wp.int32))
        per_pixel = [_wp(T), _wp(counts, wp.int32), _wp(v_rgb, wp.vec3), _wp(v_alpha)]
        grads = [_wp(v_means2d, wp.vec2), _wp(v_conics, wp.vec3), _wp(v_opacities), _wp(v_colors, wp.vec3)]

        def composite_backward(first, last):
            wp.launch(_composite_backward, dim=(last - first) * tile_size**2, device="cpu",
                      inputs=[*gaussians, *tile_args, first, *geometry, *per_pixel], outputs=grads)

        _composite_tile_ranges(composite_backward, tiles, threads)
        v_means, v_quats, v_scales = torch.zeros(N, 3), torch.zeros(N, 4), torch.zeros(N, 3)
        wp.launch(_project, dim=C * N, device="cpu", adjoint=True,
                  inputs=[_wp(means, wp.vec3), _wp(quats, wp.vec4), _wp(scales, wp.vec3), _wp(opacities),
                          _wp(viewmats, wp.mat44), _wp(Ks, wp.mat33), N, width, height, eps2d, near_plane, far_plane],
                  outputs=[_wp(means2d, wp.vec2), _wp(conics, wp.vec3), _wp(depths), _wp(radii, wp.vec2i)],
                  adj_inputs=[_wp(v_means, wp.vec3), _wp(v_quats, wp.vec4), _wp(v_scales, wp.vec3), None, None, None,
                              0, 0, 0, 0.0, 0.0, 0.0],
                  adj_outputs=[grads[0], grads[1], None, None])
        return (v_means, v_quats, v_scales, v_opacities.reshape(C, N).sum(0), v_colors.reshape(C, N, 3).sum(0),
                None, None, None)
