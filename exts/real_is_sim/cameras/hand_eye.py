"""Hand-eye calibration of the cell's cameras: a checkerboard held by the robot, moved through poses that face each
camera, its corners found in the frames and every camera's pose (and, optionally, intrinsics) solved for together
with the board's mount on the hand.

Why: the visual force pulls the twin's block towards where the frames put it, so a camera that is 2 mm / 0.3 deg
off its calibration puts the block 1-2.5 px off in its image, and nothing in the loop can see that (docs/fidelity.md).
The robot's measured joints give the board's pose through forward kinematics; the cameras are what is left.

The pieces, each usable alone:

- :class:`CheckerboardCfg`, :func:`board_cloud`, :func:`board_corners`: the target, as Gaussians to render and as
  corner points (board frame: corners in its x-y plane, the printed face towards +z);
- :func:`calibration_poses`: joint configurations presenting the board to each camera (IK from the nominal
  calibration), in an order that keeps the motion short;
- :func:`refine_corners`: sub-pixel corners near their predictions (the saddle point of a quadratic fitted to
  the blurred image, in numpy: no OpenCV);
- :func:`solve_hand_eye`: robust least squares of the reprojection error over every camera's correction and the
  board's mount.

:func:`calibrate` runs the whole routine against anything that can move a follower and capture frames (the
stand-in world here: :meth:`real_is_sim.standin.world.StandInWorld.calibration_views`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Sequence

import numpy as np
import torch
from scipy.ndimage import gaussian_filter, map_coordinates
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from real_is_sim.cameras.base import CameraInfo
from real_is_sim.errors import DataError
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.transforms import OPENGL_TO_OPENCV, opengl_to_opencv


@dataclass
class CheckerboardCfg:
    inner_corners: List[int] = field(default_factory=lambda: [6, 4])  # columns x rows of inner corners: 7 x 5 squares
    square_m: float = 0.03
    border_squares: int = 1  # white margin around the pattern, in squares (the outer corners need contrast)
    gaussian_spacing_m: float = 0.002  # the rendered board's Gaussians on a grid this fine
    # where the board sits on the hand: the TCP frame's x axis is the board's normal (the printed face looks along
    # +x_tcp), the board's columns run along y_tcp and its rows along z_tcp (the fingers' direction), its near edge
    # this far past the TCP, the face this far in front of the fingers
    edge_beyond_tcp_m: float = 0.02
    face_offset_m: float = 0.01

    def __post_init__(self):
        if len(self.inner_corners) != 2:
            raise ValueError(f"CheckerboardCfg.inner_corners must be [columns, rows], got {self.inner_corners}")
        cols, rows = self.inner_corners
        if cols < 2 or rows < 2 or self.square_m <= 0 or self.gaussian_spacing_m <= 0 or self.border_squares < 0:
            raise ValueError(f"CheckerboardCfg: need >= 2 x 2 inner corners and positive sizes, got {self}")

    @property
    def size_m(self) -> tuple[float, float]:
        """Board width (along its x) and height (along y), border included."""
        cols, rows = self.inner_corners
        return ((cols + 1 + 2 * self.border_squares) * self.square_m, (rows + 1 + 2 * self.border_squares) * self.square_m)

    def X_TB(self) -> np.ndarray:
        """The nominal mount: board frame in the TCP frame, 4x4."""
        X = np.eye(4)
        X[:3, :3] = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # columns: x_B=y_T, y_B=z_T, z_B=x_T
        X[:3, 3] = (self.face_offset_m, 0.0, self.edge_beyond_tcp_m + self.size_m[1] / 2)
        return X


def board_corners(cfg: CheckerboardCfg) -> np.ndarray:
    """Inner corners ``(cols * rows, 3)`` in the board frame (centred, z = 0), row by row."""
    cols, rows = cfg.inner_corners
    x = (np.arange(cols) - (cols - 1) / 2) * cfg.square_m
    y = (np.arange(rows) - (rows - 1) / 2) * cfg.square_m
    X, Y = np.meshgrid(x, y)
    return np.stack([X.ravel(), Y.ravel(), np.zeros(X.size)], axis=1)


def board_cloud(cfg: CheckerboardCfg, white: float = 0.9, black: float = 0.08) -> GaussianCloud:
    """The printed board as flat Gaussians on body 0 (its frame: :func:`board_corners`'), opaque: the dark squares
    on the face (z = 0), the white sheet 5 mm behind it. Two layers, because overlapping opaque splats of one layer
    draw in depth order, which on a flat board is the order of the array: black and white in one layer shift every
    square's edges by most of a pixel one way (0.8 px at 0.45 m); dark squares alone in front grow alike on every
    side, which leaves the corners where they are."""
    width, height = cfg.size_m
    s = cfg.gaussian_spacing_m
    X, Y = np.meshgrid(np.arange(-width / 2 + s / 2, width / 2, s), np.arange(-height / 2 + s / 2, height / 2, s))
    # square indices counted from the pattern's first corner: inner corners sit on integer boundaries
    cols, rows = cfg.inner_corners
    i = np.floor(X / cfg.square_m + (cols - 1) / 2).astype(int)
    j = np.floor(Y / cfg.square_m + (rows - 1) / 2).astype(int)
    dark = ((i >= -1) & (i <= cols - 1) & (j >= -1) & (j <= rows - 1) & ((i + j) % 2 == 0)).ravel()
    sheet = np.stack([X.ravel(), Y.ravel(), np.full(X.size, -0.005)], axis=1)
    squares = np.stack([X.ravel()[dark], Y.ravel()[dark], np.zeros(dark.sum())], axis=1)
    means = np.concatenate([sheet, squares])
    colors = np.concatenate([np.full((len(sheet), 3), white), np.full((len(squares), 3), black)])
    n = len(means)
    f = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    return GaussianCloud(f(means), f(np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))), f(np.tile([0.6 * s, 0.6 * s, 0.2 * s], (n, 1))),
                         f(np.full(n, 0.99)), f(colors), torch.zeros(n, dtype=torch.int64))


# ------------------------------------------------------------------------------------------------- the motion
@dataclass
class HandEyeCfg:
    board: CheckerboardCfg = field(default_factory=CheckerboardCfg)
    poses_per_camera: int = 6
    lift_m: float = 0.15  # the first pose: the tool straight above its start
    # the tool stays in this box (robot base frame, m) on the way between poses: inside the safety layer's workspace
    # (robot.safety.SafetyCfg), and 10 cm above the table
    path_min: List[float] = field(default_factory=lambda: [-0.2, -0.75, 0.1])
    path_max: List[float] = field(default_factory=lambda: [0.8, 0.75, 0.9])
    height_m: List[float] = field(default_factory=lambda: [0.1, 0.25])  # board centre above the target point
    toward_camera_m: List[float] = field(default_factory=lambda: [-0.05, 0.12])  # and this far towards its camera
    sideways_m: float = 0.08  # +- across
    tilt_deg: float = 20.0  # the board's normal this far (uniform +-, two axes) off the line to the camera
    roll_deg: float = 30.0  # the board turned in its plane (+-)
    max_joint_speed: float = 0.6  # rad/s between poses
    settle_s: float = 0.5  # still at a pose before the frames are taken
    window_px: int = 4  # corner search: half-size of the window around the predicted corner
    max_obliquity_deg: float = 65.0  # a view whose board normal is this far from the line of sight is not used
    # narrower streams are calibrated at an integer multiple of their size (the same cameras, as a RealSense is
    # calibrated at full resolution): at 240 px the board's squares are too small to find corners in
    min_width: int = 480
    refine_intrinsics: bool = True
    intrinsics_prior: float = 0.01  # relative std of the prior keeping fx, fy, cx, cy near the nominal
    seed: int = 0

    def __post_init__(self):
        if self.poses_per_camera < 2:
            raise ValueError(f"HandEyeCfg.poses_per_camera must be >= 2, got {self.poses_per_camera}")
        for name in ("height_m", "toward_camera_m"):
            low_high = getattr(self, name)
            if len(low_high) != 2 or low_high[0] > low_high[1]:
                raise ValueError(f"HandEyeCfg.{name} must be [low, high], got {low_high}")
        if len(self.path_min) != 3 or len(self.path_max) != 3:
            raise ValueError("HandEyeCfg.path_min and path_max must be [x, y, z]")
        if self.window_px < 2:
            raise ValueError(f"HandEyeCfg.window_px must be >= 2, got {self.window_px}")


def calibration_poses(cameras: Sequence[CameraInfo], target: np.ndarray, X_WBase: np.ndarray, q_start: np.ndarray,
                      cfg: HandEyeCfg) -> list[np.ndarray]:
    """Joint configurations (7,): the tool lifted above its start, the board presented to each camera in turn, and
    back above the start and to it. The board faces each camera from its nominal pose: its
    centre near ``target`` (world), its face towards the camera, tilted and turned at random (``cfg.seed``). Each IK
    starts from the previous solution, so consecutive poses are close in joint space; poses IK cannot reach are
    skipped (DataError when a camera gets fewer than 2)."""
    from real_is_sim.robot.kinematics import PandaKinematics

    kinematics = PandaKinematics()
    rng = np.random.default_rng(cfg.seed)
    X_BaseW = np.linalg.inv(X_WBase)
    X_BT = np.linalg.inv(cfg.board.X_TB())
    target = np.asarray(target, dtype=np.float64)
    order = sorted(cameras, key=lambda c: np.arctan2(c.X_WC[1, 3] - target[1], c.X_WC[0, 3] - target[0]))
    q = np.asarray(q_start, dtype=np.float64)
    start = kinematics.tool_pose(q)  # first straight up: a joint-space line from a pose near the table can dip into it
    q = kinematics.solve(start.translation + np.array([0.0, 0.0, cfg.lift_m]), start.rotation, q, iterations=200)
    poses = [q]
    for camera in order:
        eye = camera.X_WC[:3, 3]
        towards = eye - target
        towards[2] = 0.0
        towards /= np.linalg.norm(towards)
        across = np.cross([0.0, 0.0, 1.0], towards)
        found = 0
        for _ in range(4 * cfg.poses_per_camera):
            if found == cfg.poses_per_camera:
                break
            centre = (target + rng.uniform(*cfg.height_m) * np.array([0.0, 0.0, 1.0])
                      + rng.uniform(*cfg.toward_camera_m) * towards + rng.uniform(-cfg.sideways_m, cfg.sideways_m) * across)
            normal = eye - centre
            normal /= np.linalg.norm(normal)
            tilt = Rotation.from_rotvec(np.radians(rng.uniform(-cfg.tilt_deg, cfg.tilt_deg)) * across) * Rotation.from_rotvec(
                np.radians(rng.uniform(-cfg.tilt_deg, cfg.tilt_deg)) * np.array([0.0, 0.0, 1.0]))
            normal = tilt.apply(normal)
            # the board's y (rows, along the fingers) points down the face as far as it can, then turned in plane
            down = np.array([0.0, 0.0, -1.0]) + normal[2] * normal
            down /= np.linalg.norm(down)
            R_WB = np.stack([np.cross(down, normal), down, normal], axis=1)
            R_WB = Rotation.from_rotvec(np.radians(rng.uniform(-cfg.roll_deg, cfg.roll_deg)) * normal).as_matrix() @ R_WB
            X_WB = np.eye(4)
            X_WB[:3, :3], X_WB[:3, 3] = R_WB, centre
            X_BaseT = X_BaseW @ X_WB @ X_BT
            try:
                q_new = kinematics.solve(X_BaseT[:3, 3], X_BaseT[:3, :3], q, iterations=200)
            except DataError:
                continue
            if _corners_in_view(camera, X_WB, cfg) and _path_inside(kinematics, q, q_new, cfg):
                poses.append(q_new)
                q = q_new
                found += 1
        if found < 2:
            raise DataError(f"hand-eye calibration: the robot cannot present the board to camera {camera.serial} "
                            f"({found} reachable poses)")
    # back above the start and home: straight from the last pose when the way is clear, else retracing the poses
    lifted, back = poses[0], []
    for earlier in reversed(poses[:-1]):
        if _path_inside(kinematics, back[-1] if back else poses[-1], lifted, cfg):
            break
        back.append(earlier)
    return poses + back + [lifted, np.asarray(q_start, dtype=np.float64)]


def _path_inside(kinematics, q_from: np.ndarray, q_to: np.ndarray, cfg: "HandEyeCfg") -> bool:
    """The tool stays inside ``cfg``'s box (robot base frame) along the joint-space line: two IK solutions on
    different branches can be joined by a sweep through the table or behind the robot."""
    low, high = np.asarray(cfg.path_min), np.asarray(cfg.path_max)
    for f in np.linspace(0.0, 1.0, 20):
        p = kinematics.tool_position(q_from + f * (q_to - q_from))
        if np.any(p < low) or np.any(p > high):
            return False
    return True


def _corners_in_view(camera: CameraInfo, X_WB: np.ndarray, cfg: HandEyeCfg, margin_px: float = 6.0) -> bool:
    uv, depth = project(camera.K, camera.X_WC, X_WB, board_corners(cfg.board))
    inside = ((uv[:, 0] > margin_px) & (uv[:, 0] < camera.width - margin_px) & (uv[:, 1] > margin_px)
              & (uv[:, 1] < camera.height - margin_px) & (depth > 0.05))
    return bool(inside.all()) and _obliquity_deg(camera.X_WC, X_WB) < cfg.max_obliquity_deg


def _obliquity_deg(X_WC: np.ndarray, X_WB: np.ndarray) -> float:
    sight = X_WC[:3, 3] - X_WB[:3, 3]
    return float(np.degrees(np.arccos(np.clip(X_WB[:3, 2] @ sight / np.linalg.norm(sight), -1.0, 1.0))))


def project(K: np.ndarray, X_WC: np.ndarray, X_WB: np.ndarray, points_B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixels ``(N, 2)`` and depths ``(N,)`` of board-frame points in a camera (``X_WC``: OpenGL axes)."""
    return _project_cv(K, opengl_to_opencv(X_WC), X_WB, points_B)


def _project_cv(K: np.ndarray, X_WC_cv: np.ndarray, X_WB: np.ndarray, points_B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`project` for a camera pose with OpenCV axes."""
    X_CB = np.linalg.inv(X_WC_cv) @ X_WB
    p = points_B @ X_CB[:3, :3].T + X_CB[:3, 3]
    z = p[:, 2]
    return np.stack([K[0, 0] * p[:, 0] / z + K[0, 2], K[1, 1] * p[:, 1] / z + K[1, 2]], axis=1), z


# ------------------------------------------------------------------------------------------------- the corners
def refine_corners(image: np.ndarray, predicted: np.ndarray, window_px: int = 4, iterations: int = 20,
                   min_saddle: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Sub-pixel checkerboard corners near ``predicted (N, 2)`` pixels of ``image`` ((H, W, 3) or (H, W); uint8 or
    float in [0, 1]). The image blurred by half the window is fitted with a quadratic in the window around the
    estimate, which moves to the quadratic's saddle point, until it stops. A corner of a checkerboard is a centre of
    point symmetry, so the blurred image's saddle sits exactly on it. Returns the corners and a mask of those found:
    a saddle at least ``min_saddle`` strong (sqrt(-det Hessian) x window^2, about the contrast: an edge scores a
    third of a corner, a flat patch nothing), converged within the window of the prediction."""
    gray = np.asarray(image, dtype=np.float64)
    if gray.ndim == 3:
        gray = gray.mean(axis=2)
    if np.asarray(image).dtype == np.uint8:
        gray = gray / 255.0
    gray = gaussian_filter(gray, max(1.0, window_px / 2))
    offsets = np.arange(-window_px, window_px + 1, dtype=np.float64)
    du, dv = (a.ravel() for a in np.meshgrid(offsets, offsets))
    weight = np.exp(-(du**2 + dv**2) / (2 * (0.6 * window_px) ** 2))
    quadratic = np.stack([du * du, du * dv, dv * dv, du, dv, np.ones_like(du)], axis=1)
    fit = np.linalg.pinv(quadratic * weight[:, None])  # weighted least squares: coefficients = fit @ (weight * values)
    predicted = np.asarray(predicted, dtype=np.float64)
    out, ok = predicted.copy(), np.zeros(len(predicted), dtype=bool)
    h, w = gray.shape
    for k, start in enumerate(predicted):
        q = start.copy()
        for _ in range(iterations):
            if q[0] - window_px < 1 or q[1] - window_px < 1 or q[0] + window_px > w - 2 or q[1] + window_px > h - 2:
                break
            values = map_coordinates(gray, np.stack([q[1] + dv - 0.5, q[0] + du - 0.5]), order=1)  # centres at +0.5
            a, b, c, d, e, _ = fit @ (weight * values)
            hessian = np.array([[2 * a, b], [b, 2 * c]])
            det = np.linalg.det(hessian)
            if det >= 0:
                break  # a blob or nothing: no saddle to move to
            step = np.clip(-np.linalg.solve(hessian, [d, e]), -1.0, 1.0)
            q = q + step
            if np.linalg.norm(q - start) > window_px:
                break
            if np.linalg.norm(step) < 1e-3:  # converged: a corner if the saddle is strong (an edge's is weak)
                out[k], ok[k] = q, bool(np.sqrt(-det) * window_px**2 >= min_saddle)
                break
    return out, ok


def corner_window(predicted: np.ndarray, board: CheckerboardCfg, largest: int) -> int | None:
    """The search window's half-size for a view whose corners are predicted at ``predicted`` (row by row): at most
    ``largest``, and under half the smallest square's side so that no neighbouring corner falls inside; None when
    the squares are under 6 px (too small to find corners in)."""
    cols, rows = board.inner_corners
    grid = predicted.reshape(rows, cols, 2)
    side = min(np.linalg.norm(np.diff(grid, axis=0), axis=2).min(), np.linalg.norm(np.diff(grid, axis=1), axis=2).min())
    if side < 6.0:
        return None
    return int(min(largest, np.floor(0.4 * side)))


# ------------------------------------------------------------------------------------------------- the solve
@dataclass
class BoardView:
    """One camera's sight of the board: the TCP's world pose (forward kinematics of the measured joints) and the
    corners found (``uv (N, 2)``, ``found (N,)``)."""

    serial: str
    X_WT: np.ndarray
    uv: np.ndarray
    found: np.ndarray


@dataclass
class HandEyeResult:
    cameras: dict[str, CameraInfo]  # the calibrated cameras
    X_TB: np.ndarray  # the board's mount as solved
    rms_px_nominal: float  # reprojection error of the corners used, nominal calibration and mount
    rms_px: float  # after the solve
    corners_used: dict[str, int]  # per camera
    views_used: dict[str, int]

    def summary(self) -> dict:
        return {"rms_px_nominal": round(self.rms_px_nominal, 3), "rms_px": round(self.rms_px, 3),
                "corners_used": self.corners_used, "views_used": self.views_used}


def _exp(xi: np.ndarray) -> np.ndarray:
    X = np.eye(4)
    X[:3, :3] = Rotation.from_rotvec(xi[:3]).as_matrix()
    X[:3, 3] = xi[3:6]
    return X


def solve_hand_eye(views: Sequence[BoardView], cameras: dict[str, CameraInfo], board: CheckerboardCfg,
                   refine_intrinsics: bool = True, intrinsics_prior: float = 0.01, outlier_px: float = 3.0,
                   X_TB: np.ndarray | None = None) -> HandEyeResult:
    """Every camera's pose (a correction in its own frame), optionally its fx, fy, cx, cy (scales, with a prior of
    relative std ``intrinsics_prior`` at the nominal), and the board's mount ``X_TB`` (a correction in the board
    frame), minimising the corners' reprojection error (soft-L1, 1 px). Corners more than ``outlier_px`` off after
    a first solve are dropped and the solve repeated."""
    serials = sorted({v.serial for v in views})
    missing = [s for s in serials if s not in cameras]
    if missing:
        raise DataError(f"hand-eye calibration: views of unknown camera(s) {missing}")
    X_TB0 = board.X_TB() if X_TB is None else np.asarray(X_TB, dtype=np.float64)
    corners = board_corners(board)
    n_cam = 10 if refine_intrinsics else 6
    index = {s: k for k, s in enumerate(serials)}
    used = [v.found.copy() for v in views]

    def unpack(x):
        X_TB_ = X_TB0 @ _exp(x[:6])
        out = {}
        for s, k in index.items():
            c = cameras[s]
            xc = x[6 + n_cam * k: 6 + n_cam * (k + 1)]
            X_WC_cv = opengl_to_opencv(c.X_WC) @ _exp(xc[:6])
            K = np.array(c.K, dtype=np.float64)
            if refine_intrinsics:
                K[0, 0] *= 1 + xc[6]
                K[1, 1] *= 1 + xc[7]
                K[0, 2] *= 1 + xc[8]
                K[1, 2] *= 1 + xc[9]
            out[s] = (K, X_WC_cv)
        return X_TB_, out

    def residuals(x):
        X_TB_, cams = unpack(x)
        parts = []
        for view, mask in zip(views, used):
            K, X_WC_cv = cams[view.serial]
            uv, _ = _project_cv(K, X_WC_cv, view.X_WT @ X_TB_, corners[mask])
            parts.append((uv - view.uv[mask]).ravel())
        if refine_intrinsics:
            parts.append(np.concatenate([x[6 + n_cam * k + 6: 6 + n_cam * (k + 1)] for k in range(len(serials))]) / intrinsics_prior)
        return np.concatenate(parts)

    x0 = np.zeros(6 + n_cam * len(serials))
    rms_nominal = _rms(residuals(x0), refine_intrinsics, len(serials))
    solution = least_squares(residuals, x0, loss="soft_l1", f_scale=1.0, x_scale="jac")
    X_TB_, cams = unpack(solution.x)
    for k, (view, mask) in enumerate(zip(views, used)):  # drop the corners the solve could not explain
        K, X_WC_cv = cams[view.serial]
        uv, _ = _project_cv(K, X_WC_cv, view.X_WT @ X_TB_, corners)
        used[k] = mask & (np.linalg.norm(uv - view.uv, axis=1) < outlier_px)
    solution = least_squares(residuals, solution.x, loss="soft_l1", f_scale=1.0, x_scale="jac")
    X_TB_, cams = unpack(solution.x)
    # back to OpenGL axes: the axis flip is its own inverse
    calibrated = {s: CameraInfo(s, K, cameras[s].width, cameras[s].height, X_WC_cv @ OPENGL_TO_OPENCV)
                  for s, (K, X_WC_cv) in cams.items()}
    calibrated.update({s: c for s, c in cameras.items() if s not in calibrated})  # cameras never shown the board
    corners_used = {s: int(sum(m.sum() for v, m in zip(views, used) if v.serial == s)) for s in serials}
    views_used = {s: int(sum(m.any() for v, m in zip(views, used) if v.serial == s)) for s in serials}
    return HandEyeResult(calibrated, X_TB_, rms_nominal, _rms(residuals(solution.x), refine_intrinsics, len(serials)),
                         corners_used, views_used)


def _rms(residuals: np.ndarray, prior: bool, n_cameras: int) -> float:
    """Root mean square of the corners' pixel errors (the intrinsics prior's terms left out)."""
    r = (residuals[: len(residuals) - 4 * n_cameras] if prior else residuals).reshape(-1, 2)
    return float(np.sqrt(np.mean(np.sum(r**2, axis=1)))) if len(r) else float("nan")


# ------------------------------------------------------------------------------------------------- the routine
ViewsFn = Callable[[list[np.ndarray]], list[tuple[np.ndarray, dict[str, np.ndarray]]]]


def calibrate(cameras: Sequence[CameraInfo], target: np.ndarray, X_WBase: np.ndarray, q_start: np.ndarray,
              capture_views: ViewsFn, cfg: HandEyeCfg | None = None) -> HandEyeResult:
    """The whole routine. ``capture_views(poses)`` moves the robot through the joint ``poses``, holds still at each
    and returns ``(measured q (7,), {serial: image})`` per pose; the nominal ``cameras`` predict where the corners
    are, :func:`refine_corners` finds them, :func:`solve_hand_eye` solves; then the corners are searched again
    where the solution puts them and solved once more."""
    from real_is_sim.robot.kinematics import PandaKinematics

    cfg = cfg or HandEyeCfg()
    by_serial = {c.serial: c for c in cameras}
    poses = calibration_poses(cameras, target, X_WBase, q_start, cfg)
    shots = capture_views(poses)
    kinematics = PandaKinematics()
    X_WTs = [np.asarray(X_WBase) @ kinematics.tool_pose(q).homogeneous for q, _ in shots]
    corners = board_corners(cfg.board)
    result, current, X_TB = None, by_serial, cfg.board.X_TB()
    for _ in range(2):
        views = []
        for X_WT, (_, images) in zip(X_WTs, shots):
            X_WB = X_WT @ X_TB
            for serial, image in images.items():
                camera = current[serial]
                if _obliquity_deg(camera.X_WC, X_WB) > cfg.max_obliquity_deg:
                    continue
                predicted, depth = project(camera.K, camera.X_WC, X_WB, corners)
                if (depth <= 0).any():
                    continue
                window = corner_window(predicted, cfg.board, cfg.window_px)
                if window is None:
                    continue
                uv, found = refine_corners(image, predicted, window)
                if found.sum() >= 4:
                    views.append(BoardView(serial, X_WT, uv, found))
        if not views:
            raise DataError("hand-eye calibration: no camera found the board's corners")
        result = solve_hand_eye(views, by_serial, cfg.board, cfg.refine_intrinsics, cfg.intrinsics_prior)
        current, X_TB = result.cameras, result.X_TB
    return result


def perturbed_mount(X_TB: np.ndarray, rng: np.random.Generator, translation_m: float = 0.002,
                    rotation_deg: float = 0.5) -> np.ndarray:
    """A board as a person really mounts it: ``X_TB`` off by a random translation and rotation (in the board frame)."""
    xi = np.concatenate([np.radians(rotation_deg) * _unit(rng), translation_m * _unit(rng)])
    return np.asarray(X_TB, dtype=np.float64) @ _exp(xi)


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)

