"""Rigid transforms in the conventions of this project (numpy).

- Poses are 7-vectors ``(px, py, pz, qx, qy, qz, qw)``, as Newton stores ``wp.transform``.
- Quaternions are ``(x, y, z, w)`` everywhere in the core. Files that store ``(w, x, y, z)``
  (the Embodied Gaussians object file, gsplat's ``quats`` argument) convert at their boundary
  with :func:`wxyz_to_xyzw` / :func:`xyzw_to_wxyz`.
- Camera poses ``X_WC`` in the shared data use OpenGL axes (camera looks down -Z, +Y up);
  :func:`opengl_to_opencv` is the one place that converts them to OpenCV axes (+Z forward, +Y down).
"""

from __future__ import annotations

import numpy as np

OPENGL_TO_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


def xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([q[..., 3:4], q[..., 0:3]], axis=-1)


def quat_normalize(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of xyzw quaternions (rotate by b, then by a)."""
    ax, ay, az, aw = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bx, by, bz, bw = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([-q[..., :3], q[..., 3:]], axis=-1)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices ``[..., 3, 3]`` from xyzw quaternions (normalised first)."""
    x, y, z, w = np.moveaxis(quat_normalize(q), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        axis=-2,
    )


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """xyzw quaternions (w >= 0) from rotation matrices ``[..., 3, 3]`` (Shepperd's method)."""
    R = np.asarray(R, dtype=np.float64)
    batch = R.shape[:-2]
    R = R.reshape(-1, 3, 3)
    q = np.empty((R.shape[0], 4))
    for i, m in enumerate(R):
        t = np.trace(m)
        if t > 0:
            s = np.sqrt(t + 1.0) * 2
            q[i] = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
        elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
            s = np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
            q[i] = [0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s]
        elif m[1, 1] > m[2, 2]:
            s = np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
            q[i] = [(m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s]
        else:
            s = np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
            q[i] = [(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s]
    q *= np.where(q[:, 3:4] < 0, -1.0, 1.0)
    return quat_normalize(q).reshape(*batch, 4)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v [..., 3]`` by xyzw quaternions ``q``."""
    return np.einsum("...ij,...j->...i", quat_to_matrix(q), np.asarray(v, dtype=np.float64))


def pose_to_matrix(pose: np.ndarray) -> np.ndarray:
    """4x4 homogeneous matrices from 7-vector poses ``(p, q_xyzw)``."""
    pose = np.asarray(pose, dtype=np.float64)
    T = np.zeros(pose.shape[:-1] + (4, 4))
    T[..., :3, :3] = quat_to_matrix(pose[..., 3:7])
    T[..., :3, 3] = pose[..., :3]
    T[..., 3, 3] = 1.0
    return T


def matrix_to_pose(T: np.ndarray) -> np.ndarray:
    """7-vector poses ``(p, q_xyzw)`` from 4x4 matrices (rotation part re-orthonormalised)."""
    T = np.asarray(T, dtype=np.float64)
    U, _, Vt = np.linalg.svd(T[..., :3, :3])
    R = U @ Vt
    return np.concatenate([T[..., :3, 3], matrix_to_quat(R)], axis=-1)


def pose_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Compose 7-vector poses: ``a * b`` (b expressed in a's frame)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    p = a[..., :3] + quat_rotate(a[..., 3:7], b[..., :3])
    return np.concatenate([p, quat_normalize(quat_multiply(a[..., 3:7], b[..., 3:7]))], axis=-1)


def pose_inverse(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    qi = quat_conjugate(a[..., 3:7])
    return np.concatenate([-quat_rotate(qi, a[..., :3]), qi], axis=-1)


def quat_from_axis_angle(axis: np.ndarray, angle: np.ndarray | float) -> np.ndarray:
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
    half = np.asarray(angle, dtype=np.float64)[..., None] / 2.0
    return np.concatenate([axis * np.sin(half), np.cos(half)], axis=-1)


def quat_from_yaw(yaw: np.ndarray | float) -> np.ndarray:
    """Rotation about world +Z."""
    return quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), yaw)


def yaw_of(q: np.ndarray) -> np.ndarray:
    """Heading (rotation about +Z, radians) of the body x axis for xyzw quaternions."""
    R = quat_to_matrix(q)
    return np.arctan2(R[..., 1, 0], R[..., 0, 0])


def rotation_angle_between(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """Smallest rotation angle (radians) taking qa to qb."""
    d = np.abs(np.sum(quat_normalize(qa) * quat_normalize(qb), axis=-1))
    return 2.0 * np.arccos(np.clip(d, 0.0, 1.0))


def opengl_to_opencv(X_WC: np.ndarray) -> np.ndarray:
    """Camera-to-world pose with OpenGL axes -> the same camera with OpenCV axes."""
    return np.asarray(X_WC, dtype=np.float64) @ OPENGL_TO_OPENCV


def viewmat_from_opengl(X_WC: np.ndarray) -> np.ndarray:
    """World-to-camera matrix in OpenCV axes (gsplat's ``viewmats``) from an OpenGL ``X_WC``."""
    return np.linalg.inv(opengl_to_opencv(X_WC))


def look_at_X_WC(eye: np.ndarray, target: np.ndarray, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """Camera-to-world pose with OpenGL axes (the shared data's convention) looking from ``eye`` at ``target``."""
    forward = np.asarray(target, dtype=np.float64) - np.asarray(eye, dtype=np.float64)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    X_cv = np.eye(4)
    X_cv[:3, :3] = np.stack([right, down, forward], axis=1)  # OpenCV: +x right, +y down, +z forward
    X_cv[:3, 3] = eye
    return X_cv @ OPENGL_TO_OPENCV
