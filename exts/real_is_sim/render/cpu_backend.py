"""Our CPU rasterizer (gsplat's classic-mode semantics, see :mod:`.semantics`), as Warp CPU kernels.

Pipeline, one torch autograd Function: project every (camera, Gaussian) in a Warp kernel (its
backward is Warp's generated adjoint) -> bin the screen boxes into tiles, depth-sorted per tile
(numpy, no gradient) -> alpha-composite only the tiles some Gaussian touches (Warp kernel, one thread
per tile: each Gaussian visits only the rows/columns its ellipse may reach, a tile stops when all its
pixels are saturated) -> a hand-written backward kernel walks the lists back to front the same way.
The rest of the image is background and costs nothing. All cameras go in one launch, or the active
tiles are split into ranges of equal work composited in parallel threads (Warp's CPU launches release
the GIL), each with its own gradient buffers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import warp as wp

from real_is_sim.render.semantics import ALPHA_THRESHOLD, GAUSSIAN_EXTEND, MAX_ALPHA, TRANSMITTANCE_THRESHOLD

# pixels beyond the float64 ellipse span still visited: the float32 per-pixel test decides near the edge
SPAN_MARGIN = wp.constant(wp.float64(0.05))
TILE_SIZE = 32  # with per-row ellipse spans, on the T-block views: 32 px beats 8 px by 20-30% (fewer list entries), 16 px by 5-10%


@wp.kernel
def _project(
    means: wp.array(dtype=wp.vec3), quats: wp.array(dtype=wp.vec4), scales: wp.array(dtype=wp.vec3),
    opacities: wp.array(dtype=float), viewmats: wp.array(dtype=wp.mat44), Ks: wp.array(dtype=wp.mat33),
    n_gaussians: int, cameras_per_set: int, width: int, height: int, eps2d: float, near_plane: float, far_plane: float,
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), depths: wp.array(dtype=float),
    radii: wp.array(dtype=wp.vec2i),
):
    # camera `cam` sees Gaussian set cam // cameras_per_set (one set: every camera sees the same Gaussians)
    tid = wp.tid()
    cam = tid // n_gaussians
    n = (cam // cameras_per_set) * n_gaussians + tid - cam * n_gaussians
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
def _tile_box(active: int, tile_keys: wp.array(dtype=wp.int32), tiles_x: int, tiles_per_camera: int, tile_size: int,
              width: int, height: int):
    """(camera, x0, y0, x1, y1) of an active tile, clipped to the image (x1, y1 exclusive)."""
    key = tile_keys[active]
    cam = key // tiles_per_camera
    tile = key - cam * tiles_per_camera
    x0 = (tile % tiles_x) * tile_size
    y0 = (tile // tiles_x) * tile_size
    return cam, x0, y0, wp.min(x0 + tile_size, width), wp.min(y0 + tile_size, height)


@wp.func
def _ellipse_rows(m: wp.vec2, q: wp.vec3, limit: float, y0: int, y1: int):
    """Rows of [y0, y1) whose pixel centres the ellipse sigma <= limit may reach: a superset (float64,
    SPAN_MARGIN), so the per-pixel test still decides and only pixels it would reject are skipped."""
    a = wp.float64(q[0])
    b = wp.float64(q[1])
    c = wp.float64(q[2])
    L = wp.float64(limit)
    det = a * c - b * b
    if L < wp.float64(0.0):
        return y0, y0  # sigma >= 0 > limit: no pixel passes
    if a <= wp.float64(0.0) or det <= wp.float64(0.0):
        return y0, y1  # degenerate conic: let the per-pixel test decide everywhere
    h = wp.sqrt(wp.float64(2.0) * L * a / det)  # largest |dy| with min over dx of sigma <= limit
    margin = SPAN_MARGIN
    my = wp.float64(m[1])
    lo = wp.clamp(wp.ceil(my - h - wp.float64(0.5) - margin), wp.float64(y0), wp.float64(y1))
    hi = wp.clamp(wp.floor(my + h - wp.float64(0.5) + margin) + wp.float64(1.0), wp.float64(y0), wp.float64(y1))
    return int(lo), int(hi)


@wp.func
def _ellipse_columns(m: wp.vec2, q: wp.vec3, limit: float, y: int, x0: int, x1: int):
    """Columns of [x0, x1) in row y that the ellipse may reach, as :func:`_ellipse_rows` (call it first)."""
    a = wp.float64(q[0])
    b = wp.float64(q[1])
    c = wp.float64(q[2])
    det = a * c - b * b
    if a <= wp.float64(0.0) or det <= wp.float64(0.0):
        return x0, x1
    dy = wp.float64(m[1]) - (wp.float64(y) + wp.float64(0.5))
    centre = wp.float64(m[0]) + b * dy / a  # pixel centre of smallest sigma in this row
    half = wp.sqrt(wp.max(wp.float64(2.0) * a * wp.float64(limit) - det * dy * dy, wp.float64(0.0))) / a
    margin = SPAN_MARGIN
    lo = wp.clamp(wp.ceil(centre - half - wp.float64(0.5) - margin), wp.float64(x0), wp.float64(x1))
    hi = wp.clamp(wp.floor(centre + half - wp.float64(0.5) + margin) + wp.float64(1.0), wp.float64(x0), wp.float64(x1))
    return int(lo), int(hi)


@wp.func
def _apply_layer(pixel: int, entry: int, layer_rgb: wp.array(dtype=wp.vec3), layer_T: wp.array(dtype=float),
                 out_rgb: wp.array(dtype=wp.vec3), out_T: wp.array(dtype=float), layer_at: wp.array(dtype=wp.int32),
                 layer_T_in: wp.array(dtype=float)):
    """Composite the static layer over a pixel at list position ``entry``; True when the pixel is saturated."""
    T = out_T[pixel]
    out_rgb[pixel] = out_rgb[pixel] + layer_rgb[pixel] * T
    layer_T_in[pixel] = T
    layer_at[pixel] = entry
    next_T = T * layer_T[pixel]
    out_T[pixel] = next_T
    return next_T <= TRANSMITTANCE_THRESHOLD


@wp.kernel(enable_backward=False)
def _composite_forward(
    # per entry of the tile lists (gathered in list order, so the loop reads memory in sequence)
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), opacities: wp.array(dtype=float),
    colors: wp.array(dtype=wp.vec3), log_opacity_limits: wp.array(dtype=float), depths: wp.array(dtype=float),
    tile_keys: wp.array(dtype=wp.int32), tile_starts: wp.array(dtype=wp.int32), tile_ends: wp.array(dtype=wp.int32),
    first_tile: int, width: int, height: int, tiles_x: int, tiles_per_camera: int, tile_size: int,
    # the static layer per pixel (use_layer 0: ignored): premultiplied colour, transmittance, depth
    use_layer: int, layer_rgb: wp.array(dtype=wp.vec3), layer_T: wp.array(dtype=float), layer_depth: wp.array(dtype=float),
    done: wp.array(dtype=wp.int32),  # zeros: set where a pixel's transmittance ran out
    out_rgb: wp.array(dtype=wp.vec3), out_T: wp.array(dtype=float), out_count: wp.array(dtype=wp.int32),
    out_depth: wp.array(dtype=float),  # sum of depth * weight: the expected depth times alpha
    layer_at: wp.array(dtype=wp.int32), layer_T_in: wp.array(dtype=float),  # -1 / -: where the layer went in
):
    # One thread per tile, Gaussians front to back, each over only the pixels its ellipse may reach (the
    # same per-pixel arithmetic, in the same order, as one pixel at a time). out_rgb/out_T come as 0/1.
    # The layer goes in before the first Gaussian behind it that reaches the pixel, else after the last.
    active = first_tile + wp.tid()
    cam, x0, y0, x1, y1 = _tile_box(active, tile_keys, tiles_x, tiles_per_camera, tile_size, width, height)
    alive = (x1 - x0) * (y1 - y0)
    start = tile_starts[active]
    for i in range(start, tile_ends[active]):
        m = means2d[i]
        q = conics[i]
        limit = log_opacity_limits[i]
        opacity = opacities[i]
        depth = depths[i]
        rows = _ellipse_rows(m, q, limit, y0, y1)
        for y in range(rows[0], rows[1]):
            dy = m[1] - (float(y) + 0.5)
            columns = _ellipse_columns(m, q, limit, y, x0, x1)
            for x in range(columns[0], columns[1]):
                pixel = (cam * height + y) * width + x
                if done[pixel] != 0:
                    continue
                if use_layer != 0:  # nested: Warp evaluates every operand of an `and` (the layer arrays may be empty)
                    if layer_at[pixel] < 0:
                        if depth > layer_depth[pixel]:
                            if _apply_layer(pixel, i - start, layer_rgb, layer_T, out_rgb, out_T, layer_at, layer_T_in):
                                done[pixel] = 1
                                alive -= 1
                                continue
                dx = m[0] - (float(x) + 0.5)
                sigma = 0.5 * (q[0] * dx * dx + q[2] * dy * dy) + q[1] * dx * dy
                if sigma < 0.0 or sigma > limit:  # alpha < 1/255 for sure: skip the exp
                    continue
                alpha = wp.min(MAX_ALPHA, opacity * wp.exp(-sigma))
                if alpha < ALPHA_THRESHOLD:
                    continue
                T = out_T[pixel]
                next_T = T * (1.0 - alpha)
                if next_T <= TRANSMITTANCE_THRESHOLD:
                    done[pixel] = 1
                    alive -= 1
                    continue
                out_rgb[pixel] = out_rgb[pixel] + colors[i] * (alpha * T)
                out_depth[pixel] = out_depth[pixel] + depth * (alpha * T)
                out_T[pixel] = next_T
                out_count[pixel] = i - start + 1
        if alive == 0:  # every pixel of the tile is saturated
            break
    if use_layer != 0 and alive > 0:
        for y in range(y0, y1):
            for x in range(x0, x1):
                pixel = (cam * height + y) * width + x
                if done[pixel] == 0 and layer_at[pixel] < 0:
                    if _apply_layer(pixel, tile_ends[active] - start, layer_rgb, layer_T, out_rgb, out_T, layer_at, layer_T_in):
                        done[pixel] = 1


@wp.kernel(enable_backward=False)
def _composite_backward(
    # list-ordered like the forward's; gradients go to flatten_ids[i] = camera * N + Gaussian
    means2d: wp.array(dtype=wp.vec2), conics: wp.array(dtype=wp.vec3), opacities: wp.array(dtype=float),
    colors: wp.array(dtype=wp.vec3), log_opacity_limits: wp.array(dtype=float), flatten_ids: wp.array(dtype=wp.int32),
    tile_keys: wp.array(dtype=wp.int32), tile_starts: wp.array(dtype=wp.int32),
    first_tile: int, width: int, height: int, tiles_x: int, tiles_per_camera: int, tile_size: int,
    final_T: wp.array(dtype=float), counts: wp.array(dtype=wp.int32),
    use_layer: int, layer_rgb: wp.array(dtype=wp.vec3), layer_at: wp.array(dtype=wp.int32), layer_T_in: wp.array(dtype=float),
    v_rgb: wp.array(dtype=wp.vec3), v_alpha: wp.array(dtype=float),
    T_now: wp.array(dtype=float), behind: wp.array(dtype=wp.vec3), pending: wp.array(dtype=wp.int32),  # per-pixel scratch
    v_means2d: wp.array(dtype=wp.vec2), v_conics: wp.array(dtype=wp.vec3), v_opacities: wp.array(dtype=float),
    v_colors: wp.array(dtype=wp.vec3),
):
    # One thread per tile, Gaussians back to front over the pixels their ellipse may reach, each pixel only
    # over the Gaussians its forward pass walked. Per flatten id, the gradient sums run over the pixels in the
    # same order as one pixel at a time, so the result is the same. Threads of different cameras never share
    # an entry of v_* (they are per camera and Gaussian). The static layer is undone where the walk passes it: the
    # transmittance in front of it restored, its colour added to what lies behind.
    active = first_tile + wp.tid()
    cam, x0, y0, x1, y1 = _tile_box(active, tile_keys, tiles_x, tiles_per_camera, tile_size, width, height)
    longest = int(0)
    for y in range(y0, y1):
        for x in range(x0, x1):
            pixel = (cam * height + y) * width + x
            T_now[pixel] = final_T[pixel]
            behind[pixel] = wp.vec3(0.0)  # colour composited behind the current Gaussian
            pending[pixel] = wp.where(use_layer != 0 and layer_at[pixel] >= 0, 1, 0)
            longest = wp.max(longest, counts[pixel])
    start = tile_starts[active]
    for j in range(longest):
        i = start + longest - 1 - j
        m = means2d[i]
        q = conics[i]
        limit = log_opacity_limits[i]
        opacity = opacities[i]
        c = colors[i]
        g = flatten_ids[i]
        rows = _ellipse_rows(m, q, limit, y0, y1)
        for y in range(rows[0], rows[1]):
            dy = m[1] - (float(y) + 0.5)
            columns = _ellipse_columns(m, q, limit, y, x0, x1)
            for x in range(columns[0], columns[1]):
                pixel = (cam * height + y) * width + x
                if i - start >= counts[pixel]:  # the forward pass stopped before this Gaussian
                    continue
                if pending[pixel] != 0 and i - start < layer_at[pixel]:  # this Gaussian is in front of the layer
                    T_now[pixel] = layer_T_in[pixel]
                    behind[pixel] = behind[pixel] + layer_rgb[pixel] * layer_T_in[pixel]
                    pending[pixel] = 0
                dx = m[0] - (float(x) + 0.5)
                sigma = 0.5 * (q[0] * dx * dx + q[2] * dy * dy) + q[1] * dx * dy
                if sigma < 0.0 or sigma > limit:
                    continue
                vis = wp.exp(-sigma)
                raw_alpha = opacity * vis
                alpha = wp.min(MAX_ALPHA, raw_alpha)
                if alpha < ALPHA_THRESHOLD:
                    continue
                one_minus = 1.0 - alpha
                T = T_now[pixel] / one_minus  # transmittance in front of this Gaussian
                T_now[pixel] = T
                weight = alpha * T
                g_rgb = v_rgb[pixel]
                v_colors[g] = v_colors[g] + g_rgb * weight
                b = behind[pixel]
                v_a = wp.dot(g_rgb, c * T - b / one_minus) + v_alpha[pixel] * final_T[pixel] / one_minus
                behind[pixel] = b + c * weight
                if raw_alpha <= MAX_ALPHA:
                    v_opacities[g] = v_opacities[g] + vis * v_a
                    v_sigma = -alpha * v_a
                    v_conics[g] = v_conics[g] + wp.vec3(0.5 * dx * dx * v_sigma, dx * dy * v_sigma,
                                                        0.5 * dy * dy * v_sigma)
                    v_means2d[g] = v_means2d[g] + wp.vec2(v_sigma * (q[0] * dx + q[1] * dy),
                                                          v_sigma * (q[1] * dx + q[2] * dy))


@dataclass
class TileLists:
    """Which Gaussians (flattened camera * N + index, front to back) touch each active tile."""

    flatten_ids: np.ndarray  # [M] int32
    tile_keys: np.ndarray  # [A] int32, sorted: camera * tiles_per_camera + tile_y * tiles_x + tile_x
    tile_starts: np.ndarray  # [A] int32
    tile_ends: np.ndarray  # [A] int32
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


def bin_into_tiles(means2d: np.ndarray, radii: np.ndarray, depths: np.ndarray, n_gaussians: int, width: int, height: int,
                   tile_size: int, conics: np.ndarray | None = None, sigma_limits: np.ndarray | None = None) -> TileLists:
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
    return TileLists(order[owner[by_tile]].astype(np.int32), tile_keys.astype(np.int32), tile_starts.astype(np.int32),
                     (tile_starts + tile_counts).astype(np.int32), tiles_x, tiles_y, tile_size)


def _per_view_arrays(opacities: torch.Tensor, colors: torch.Tensor, n_gaussians: int, cameras_per_set: int):
    """Opacities [C*N], colours [C*N, 3] and the sigma beyond which alpha < 1/255, ln(255 opacity) [C*N], from the
    S sets' opacities [S*N] and colours [S*N, 3], each set seen by ``cameras_per_set`` cameras."""
    sets = opacities.shape[0] // max(n_gaussians, 1)  # no Gaussians: no sets, empty arrays
    opacities = opacities.reshape(sets, 1, n_gaussians).expand(sets, cameras_per_set, n_gaussians).reshape(-1)
    colors = colors.reshape(sets, 1, n_gaussians, 3).expand(sets, cameras_per_set, n_gaussians, 3).reshape(-1, 3)
    limits = torch.log(opacities / ALPHA_THRESHOLD) + 1e-3  # margin: the exact alpha test decides near the edge
    return opacities.contiguous(), colors.contiguous(), limits


def _gather_records(tiles: TileLists, means2d, conics, per_view, depths) -> list[torch.Tensor]:
    """means2d, conics, opacities, colours, sigma limits, depths of every tile-list entry, in list order."""
    index = torch.from_numpy(tiles.flatten_ids).long()
    opacities, colors, limits = per_view
    return [means2d[index].contiguous(), conics[index].contiguous(), opacities[index].contiguous(),
            colors[index].contiguous(), limits[index].contiguous(), depths[index].contiguous()]


_pool: ThreadPoolExecutor | None = None


def split_tiles(tiles: TileLists, threads: int) -> list[tuple[int, int]]:
    """Consecutive ranges of the active tiles, one per thread, with about equal list entries each (a tile's
    cost grows with its list). Fewer ranges than ``threads`` when there are fewer tiles."""
    n_tiles = len(tiles.tile_keys)
    if threads <= 1 or n_tiles <= 1:
        return [(0, n_tiles)]
    work = np.cumsum(tiles.tile_ends - tiles.tile_starts)
    cuts = np.searchsorted(work, work[-1] * np.arange(1, threads) / threads, side="right")
    bounds = np.unique(np.concatenate([[0], cuts, [n_tiles]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _run_ranges(work, ranges: list[tuple[int, int]]) -> None:
    """work(first, last, k) for the k-th range, in parallel threads when there are several (Warp's CPU
    launches release the GIL)."""
    global _pool
    if len(ranges) == 1:
        work(*ranges[0], 0)
        return
    if _pool is None or _pool._max_workers < len(ranges):
        _pool = ThreadPoolExecutor(max_workers=len(ranges), thread_name_prefix="real_is_sim_render")
    for future in [_pool.submit(work, first, last, k) for k, (first, last) in enumerate(ranges)]:
        future.result()


_SCALAR_BYTES = {torch.float32: 4, torch.int32: 4, np.dtype(np.float32): 4, np.dtype(np.int32): 4}


def _wp(t, dtype=wp.float32):
    """A 1D Warp view of a contiguous float32/int32 torch tensor or numpy array (no copy). Built from the
    pointer: wp.from_torch's checks cost more than the small launches they feed."""
    wp.init()  # idempotent; Warp needs it before wrapping memory
    contiguous = t.is_contiguous() if isinstance(t, torch.Tensor) else t.flags.c_contiguous
    if t.dtype not in _SCALAR_BYTES or not contiguous:
        raise TypeError(f"expected a contiguous float32/int32 array, got {t.dtype}")
    pointer = t.data_ptr() if isinstance(t, torch.Tensor) else t.ctypes.data
    length = t.numel() if isinstance(t, torch.Tensor) else t.size
    array = wp.array(ptr=pointer, dtype=dtype, shape=(length * 4 // wp.types.type_size_in_bytes(dtype),),
                     device="cpu", copy=False)
    array.owner = t  # the memory must outlive the view
    return array


@dataclass
class StaticLayer:
    """Gaussians that never move during a render loop (e.g. the robot while the sensor optimises the objects),
    composited once per pixel: ``rgb`` [C*H*W, 3] premultiplied colour, ``T`` [C*H*W] transmittance, ``depth``
    [C*H*W] expected depth (inf where they cover nothing). A render with the layer inserts it, per pixel, before the
    first Gaussian deeper than its depth: exact where the static Gaussians and the rendered ones do not interleave
    in depth at a pixel (docs/render.md)."""

    rgb: torch.Tensor
    T: torch.Tensor
    depth: torch.Tensor


def _no_layer(pixels: int) -> StaticLayer:
    return StaticLayer(torch.zeros(pixels, 3), torch.ones(pixels), torch.full((pixels,), float("inf")))


def _composite(inputs, settings, layer: StaticLayer | None):
    """Project, bin and composite front to back; every array the backward pass needs."""
    width, height, eps2d, near_plane, far_plane, tile_size, threads, cameras_per_set = settings
    C = inputs[5].shape[0]
    N = inputs[0].shape[0] * cameras_per_set // C  # Gaussians per set
    pixels = C * height * width
    means2d, conics = torch.zeros(C * N, 2), torch.zeros(C * N, 3)
    depths, radii = torch.zeros(C * N), torch.zeros(C * N, 2, dtype=torch.int32)
    project_args = [_wp(inputs[0], wp.vec3), _wp(inputs[1], wp.vec4), _wp(inputs[2], wp.vec3), _wp(inputs[3]),
                    _wp(inputs[5], wp.mat44), _wp(inputs[6], wp.mat33), N, cameras_per_set, width, height, eps2d,
                    near_plane, far_plane]
    projected = [_wp(means2d, wp.vec2), _wp(conics, wp.vec3), _wp(depths), _wp(radii, wp.vec2i)]
    wp.launch(_project, dim=C * N, inputs=project_args, outputs=projected, device="cpu")
    per_view = _per_view_arrays(inputs[3], inputs[4], N, cameras_per_set)
    tiles = bin_into_tiles(means2d.numpy(), radii.numpy(), depths.numpy(), N, width, height, tile_size,
                           conics.numpy(), per_view[2].numpy())
    if layer is not None:  # the layer's pixels need tiles even where no Gaussian reaches
        tiles = _with_layer_tiles(tiles, layer, C, width, height)
    rgb, T = torch.zeros(pixels, 3), torch.ones(pixels)
    counts, depth_sum = torch.zeros(pixels, dtype=torch.int32), torch.zeros(pixels)
    layer_at, layer_T_in = torch.full((pixels,), -1, dtype=torch.int32), torch.zeros(pixels)
    used = layer if layer is not None else _no_layer(1)
    layer_args = [int(layer is not None), _wp(used.rgb.contiguous(), wp.vec3), _wp(used.T.contiguous()),
                  _wp(used.depth.contiguous())]
    records = _gather_records(tiles, means2d, conics, per_view, depths)
    gaussians = [_wp(t, d) for t, d in zip(records, (wp.vec2, wp.vec3, wp.float32, wp.vec3, wp.float32, wp.float32))]
    tile_args = [_wp(tiles.tile_keys, wp.int32), _wp(tiles.tile_starts, wp.int32)]
    geometry = [width, height, tiles.tiles_x, tiles.tiles_x * tiles.tiles_y, tile_size]
    done = torch.zeros(pixels, dtype=torch.int32)
    outputs = [_wp(done, wp.int32), _wp(rgb, wp.vec3), _wp(T), _wp(counts, wp.int32), _wp(depth_sum),
               _wp(layer_at, wp.int32), _wp(layer_T_in)]
    ranges = split_tiles(tiles, threads)

    def composite(first, last, _):  # tiles own disjoint pixels: the threads write disjoint memory
        wp.launch(_composite_forward, dim=last - first, device="cpu",
                  inputs=[*gaussians, *tile_args, _wp(tiles.tile_ends, wp.int32), first, *geometry, *layer_args],
                  outputs=outputs)

    _run_ranges(composite, ranges)
    return dict(rgb=rgb, T=T, counts=counts, depth_sum=depth_sum, layer_at=layer_at, layer_T_in=layer_T_in,
                means2d=means2d, conics=conics, depths=depths, radii=radii, records=records, tiles=tiles, ranges=ranges,
                project_args=project_args, projected=projected, gaussians=gaussians[:5], tile_args=tile_args,
                layer_args=layer_args)


def _with_layer_tiles(tiles: TileLists, layer: StaticLayer, C: int, width: int, height: int) -> TileLists:
    """The tile lists plus an empty list for every tile the layer covers and no Gaussian reaches."""
    covered = (layer.T.reshape(C, height, width) < 1.0).numpy()
    pad_y, pad_x = tiles.tiles_y * tiles.tile_size - height, tiles.tiles_x * tiles.tile_size - width
    covered = np.pad(covered, ((0, 0), (0, pad_y), (0, pad_x)))
    per_tile = covered.reshape(C, tiles.tiles_y, tiles.tile_size, tiles.tiles_x, tiles.tile_size).any(axis=(2, 4))
    layer_keys = np.flatnonzero(per_tile.ravel()).astype(np.int32)
    extra = np.setdiff1d(layer_keys, tiles.tile_keys)
    if len(extra) == 0:
        return tiles
    keys = np.concatenate([tiles.tile_keys, extra])
    ends = np.concatenate([tiles.tile_ends, np.zeros(len(extra), np.int32)])
    starts = np.concatenate([tiles.tile_starts, np.zeros(len(extra), np.int32)])
    order = np.argsort(keys, kind="stable")
    return TileLists(tiles.flatten_ids, keys[order], starts[order], ends[order], tiles.tiles_x, tiles.tiles_y,
                     tiles.tile_size)


@torch.no_grad()
def render_layer(means, quats, scales, opacities, colors, viewmats, Ks, width: int, height: int, eps2d: float,
                 near_plane: float = 0.01, far_plane: float = 1e10, tile_size: int = TILE_SIZE, threads: int = 1) -> StaticLayer:
    """A :class:`StaticLayer` of these Gaussians (the cameras and image size of the renders it will go into)."""
    inputs = [t.detach().float().contiguous().cpu() for t in (means, quats, scales, opacities, colors, viewmats, Ks)]
    settings = (width, height, float(eps2d), near_plane, far_plane, tile_size, threads, viewmats.shape[0])
    out = _composite(inputs, settings, None)
    alpha = 1.0 - out["T"]
    depth = torch.where(alpha > 1e-6, out["depth_sum"] / alpha.clamp_min(1e-6), torch.full_like(alpha, float("inf")))
    return StaticLayer(out["rgb"], out["T"], depth)


class RasterizeCPU(torch.autograd.Function):
    """(means, quats, scales, opacities, colors) -> (rgb [C,H,W,3] without background, alpha [C,H,W,1]); with a
    :class:`StaticLayer`, composited with it. The Gaussian inputs hold S sets of N ([S*N, ...]); camera c sees set
    c // cameras_per_set (``settings[-1]``; S = 1: every camera sees all)."""

    @staticmethod
    def forward(ctx, means, quats, scales, opacities, colors, viewmats, Ks, settings, layer=None):
        width, height = settings[0], settings[1]
        C = viewmats.shape[0]
        inputs = [t.detach().float().contiguous() for t in (means, quats, scales, opacities, colors, viewmats, Ks)]
        out = _composite(inputs, settings, layer)
        T = out["T"]
        ctx.save_for_backward(T, *inputs, out["means2d"], out["conics"], out["depths"], out["radii"], out["counts"],
                              out["layer_at"], out["layer_T_in"], *out["records"])
        ctx.out, ctx.settings = out, settings
        ctx.mark_non_differentiable(out["means2d"], out["conics"], out["depths"], out["radii"])
        return (out["rgb"].reshape(C, height, width, 3), (1.0 - T).reshape(C, height, width, 1), out["means2d"],
                out["conics"], out["depths"], out["radii"])

    @staticmethod
    def backward(ctx, v_rgb, v_alpha, *unused):
        T = ctx.saved_tensors[0]  # saved_tensors also checks that none was modified in place since
        out = ctx.out
        project_inputs, projected = out["project_args"][:6], out["projected"]
        width, height, eps2d, near_plane, far_plane, tile_size, threads, cameras_per_set = ctx.settings
        tiles = out["tiles"]
        C = project_inputs[4].shape[0]
        S = C // cameras_per_set  # Gaussian sets
        N = project_inputs[0].shape[0] // S
        # one gradient buffer per thread (tiles of one camera share Gaussians), summed in a fixed order
        K = len(out["ranges"])
        per_thread = [torch.zeros(K, C * N, 2), torch.zeros(K, C * N, 3), torch.zeros(K, C * N), torch.zeros(K, C * N, 3)]
        v_rgb = torch.zeros(T.shape[0], 3) if v_rgb is None else v_rgb.reshape(-1, 3).float().contiguous()
        v_alpha = torch.zeros(T.shape[0]) if v_alpha is None else v_alpha.reshape(-1).float().contiguous()
        geometry = [width, height, tiles.tiles_x, tiles.tiles_x * tiles.tiles_y, tile_size]
        gaussians = [*out["gaussians"], _wp(tiles.flatten_ids, wp.int32)]
        use_layer, layer_rgb = out["layer_args"][:2]
        layer = [use_layer, layer_rgb, _wp(out["layer_at"], wp.int32), _wp(out["layer_T_in"])]
        T_now, behind = torch.empty_like(T), torch.empty(T.shape[0], 3)
        pending = torch.empty(T.shape[0], dtype=torch.int32)
        per_pixel = [_wp(T), _wp(out["counts"], wp.int32), *layer, _wp(v_rgb, wp.vec3), _wp(v_alpha), _wp(T_now),
                     _wp(behind, wp.vec3), _wp(pending, wp.int32)]
        dtypes = (wp.vec2, wp.vec3, wp.float32, wp.vec3)

        def composite_backward(first, last, k):
            grads_k = [_wp(g[k], d) for g, d in zip(per_thread, dtypes)]
            wp.launch(_composite_backward, dim=last - first, device="cpu",
                      inputs=[*gaussians, *out["tile_args"], first, *geometry, *per_pixel], outputs=grads_k)

        _run_ranges(composite_backward, out["ranges"])
        v_means2d, v_conics, v_opacities, v_colors = (g[0] if K == 1 else g.sum(0) for g in per_thread)
        grads = [_wp(v_means2d, wp.vec2), _wp(v_conics, wp.vec3), _wp(v_opacities), _wp(v_colors, wp.vec3)]
        v_means, v_quats, v_scales = torch.zeros(S * N, 3), torch.zeros(S * N, 4), torch.zeros(S * N, 3)
        wp.launch(_project, dim=C * N, device="cpu", adjoint=True,
                  inputs=[*project_inputs, N, cameras_per_set, width, height, eps2d, near_plane, far_plane],
                  outputs=projected,
                  adj_inputs=[_wp(v_means, wp.vec3), _wp(v_quats, wp.vec4), _wp(v_scales, wp.vec3), None, None, None,
                              0, 0, 0, 0, 0.0, 0.0, 0.0],
                  adj_outputs=[grads[0], grads[1], None, None])
        # a set's Gaussians collect the gradients of the cameras that see them
        return (v_means, v_quats, v_scales, v_opacities.reshape(S, cameras_per_set, N).sum(1).reshape(S * N),
                v_colors.reshape(S, cameras_per_set, N, 3).sum(1).reshape(S * N, 3), None, None, None, None)
