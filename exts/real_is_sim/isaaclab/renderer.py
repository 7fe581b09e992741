"""The twin's Gaussians as an Isaac Lab renderer: a ``Camera`` / ``TiledCamera`` whose ``renderer_cfg`` is a
:class:`GaussianRendererCfg` draws the Gaussian clouds attached to rigid bodies, posed where the physics has them.

Each env's camera sees only that env's bodies (as Newton's per-world renderer does). Body poses come from Isaac
Lab's scene data provider (the Newton state's ``body_q`` on the Newton backend, forward kinematics applied), read
at every render; camera poses and intrinsics are the camera's own buffers. Rendering is
:func:`real_is_sim.render.clouds.render_clouds` (our CPU backend, or gsplat on CUDA), all views in one batched call.

Conventions: Isaac Lab hands the renderer the camera orientation in its "world" convention (forward +X, up +Z);
the rasterizer wants an OpenCV world-to-camera matrix (forward +Z, down +Y). The intrinsic matrix is the camera's
(from the USD focal length and aperture, or the authored OpenCV calibration), pixel centres at +0.5 in both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import MISSING, dataclass

import torch
import warp as wp
from isaaclab.cloner.cloner_cfg import DEFAULT_ENV_TEMPLATE
from isaaclab.renderers import BaseRenderer, RenderBufferKind, RenderBufferSpec, RendererCfg
from isaaclab.renderers.camera_render_spec import CameraRenderSpec
from isaaclab.scene_data import SceneDataFormat
from isaaclab.sim import SimulationContext
from isaaclab.utils import configclass
from isaaclab.utils.math import matrix_from_quat
from isaaclab.utils.warp import ProxyArray

from real_is_sim.errors import ConfigError
from real_is_sim.gaussians.cloud import GaussianCloud
from real_is_sim.render.clouds import render_clouds
from real_is_sim.render.rasterize import BACKENDS

ENV_MACRO = "{ENV_REGEX_NS}"

# Columns: the OpenCV camera axes (x right, y down, z forward) in Isaac Lab's "world" camera convention
# (x forward, y left, z up): R_opencv = R_world @ OPENCV_AXES_IN_WORLD_CONVENTION.
OPENCV_AXES_IN_WORLD_CONVENTION = torch.tensor([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def opencv_viewmats(positions: torch.Tensor, quats_world_convention: torch.Tensor) -> torch.Tensor:
    """``[N, 4, 4]`` world-to-camera matrices in OpenCV axes from Isaac Lab camera poses: ``positions [N, 3]`` and
    ``quats_world_convention [N, 4]`` (x, y, z, w; ``CameraData.quat_w_world``)."""
    rotation = matrix_from_quat(quats_world_convention.float()) @ OPENCV_AXES_IN_WORLD_CONVENTION.to(positions.device)
    viewmats = torch.zeros(positions.shape[0], 4, 4, device=positions.device)
    viewmats[:, :3, :3] = rotation.transpose(1, 2)
    viewmats[:, :3, 3] = -(rotation.transpose(1, 2) @ positions.float()[:, :, None])[:, :, 0]
    viewmats[:, 3, 3] = 1.0
    return viewmats


def checked_clouds(cfg: GaussianRendererCfg) -> list[GaussianCloud]:
    """The clouds of ``cfg.bodies`` (in body order) once ``cfg`` is checked; one :class:`ConfigError` otherwise."""
    if cfg.backend not in BACKENDS:
        raise ConfigError(f"GaussianRendererCfg.backend must be one of {BACKENDS}, got {cfg.backend!r}")
    background = cfg.background_color
    if not (isinstance(background, (tuple, list)) and len(background) == 3
            and all(isinstance(c, (int, float)) and 0.0 <= c <= 1.0 for c in background)):
        raise ConfigError(f"GaussianRendererCfg.background_color must be 3 values in [0, 1], got {background!r}")
    if not cfg.bodies:
        raise ConfigError("GaussianRendererCfg.bodies is empty: attach at least one cloud to a body")
    clouds = []
    for body in cfg.bodies:
        if not body.body_path.startswith(ENV_MACRO):
            raise ConfigError(f"GaussianBodyCfg.body_path must start with {ENV_MACRO} (one body per env), got {body.body_path!r}")
        cloud = body.cloud()
        if not isinstance(cloud, GaussianCloud) or len(cloud) == 0 or bool((cloud.body_ids != 0).any()):
            raise ConfigError(f"GaussianBodyCfg.cloud of '{body.body_path}' must make a non-empty GaussianCloud "
                              "with every Gaussian on body 0 (its body frame)")
        clouds.append(cloud)
    return clouds


@dataclass
class GaussianRenderData:
    """One camera bundle: its size, the transform indices of each view's bodies (view i is env i), and the buffers
    it renders from (the camera's pose / intrinsic buffers) and into (its ``rgba`` output)."""

    width: int
    height: int
    body_indices: torch.Tensor  # [views, bodies] indices into the scene data provider's transforms
    background: torch.Tensor  # [3] RGB in [0, 1]
    near_plane: float
    far_plane: float
    positions: ProxyArray | None = None
    orientations: ProxyArray | None = None
    intrinsics: ProxyArray | None = None
    rgba: torch.Tensor | None = None  # [views, H, W, 4] uint8, a view of the camera's buffer


class GaussianRenderer(BaseRenderer):
    """Renders the Gaussian clouds of :attr:`GaussianRendererCfg.bodies` for every camera using this config."""

    cfg: GaussianRendererCfg

    def __init__(self, cfg: GaussianRendererCfg):
        clouds = checked_clouds(cfg)
        self.cfg = cfg
        self.device = SimulationContext.instance().device
        self.clouds = [GaussianCloud(c.means.to(self.device), c.quats.to(self.device), c.scales.to(self.device),
                                     c.opacities.to(self.device), c.colors.to(self.device), c.body_ids.to(self.device))
                       for c in clouds]
        self._provider = None

    def initialize(self) -> None:
        self._provider = SimulationContext.instance().get_scene_data_provider()

    def supported_output_types(self) -> dict[RenderBufferKind, RenderBufferSpec]:
        return self.cfg.supported_output_types()

    def prepare_stage(self, stage, num_envs: int) -> None:
        """Nothing to export: the clouds are in memory and the poses come from the scene data provider."""

    def create_render_data(self, spec: CameraRenderSpec) -> GaussianRenderData:
        # View i is env i: kit-less, only the source camera prim exists on the stage; the camera's pose buffers
        # hold one pose per env, in env order.
        paths = list(self._provider.backend.transform_paths)
        body_indices = [[self._body_index(paths, body.body_path, env) for body in self.cfg.bodies]
                        for env in range(spec.num_instances)]
        background = spec.cfg.background_color if spec.cfg.background_color is not None else self.cfg.background_color
        clipping = spec.cfg.spawn.clipping_range if spec.cfg.spawn is not None else (0.01, 1.0e10)
        return GaussianRenderData(
            width=spec.cfg.width,
            height=spec.cfg.height,
            body_indices=torch.tensor(body_indices, dtype=torch.long, device=self.device),
            background=torch.tensor(background, dtype=torch.float32, device=self.device),
            near_plane=float(clipping[0]),
            far_plane=float(clipping[1]),
        )

    @staticmethod
    def _body_index(paths: list[str], body_path: str, env: int) -> int:
        pattern = body_path.replace(ENV_MACRO, DEFAULT_ENV_TEMPLATE.format(env))
        matches = [i for i, path in enumerate(paths) if re.fullmatch(pattern, path)]
        if len(matches) != 1:
            raise ConfigError(f"GaussianRenderer: body path '{pattern}' matched {len(matches)} rigid bodies "
                              f"(exactly one needed){': ' + str([paths[i] for i in matches]) if matches else ''}")
        return matches[0]

    def set_outputs(self, render_data: GaussianRenderData, output_data: dict[str, ProxyArray]) -> None:
        # 'rgb' is a view into 'rgba' (Isaac Lab allocates it so when both are supported): one buffer to fill.
        render_data.rgba = output_data[str(RenderBufferKind.RGBA)].torch

    def update_transforms(self) -> None:
        """Nothing to cache: :meth:`render` reads the body poses it needs."""

    def update_geometries(self) -> None:
        """Rigid clouds: nothing deforms."""

    def update_camera(self, render_data: GaussianRenderData, positions: ProxyArray, orientations: ProxyArray,
                      intrinsics: ProxyArray) -> None:
        # The camera's own persistent buffers: read at each render, so later pose updates are seen.
        render_data.positions, render_data.orientations, render_data.intrinsics = positions, orientations, intrinsics

    def update_camera_intrinsics(self, render_data: GaussianRenderData, intrinsics: wp.array, parameters: wp.array) -> None:
        """Accepted as is: every view's K is read from the camera's intrinsic buffer (which the camera commits after
        this call) at each render; per-view intrinsics are fine."""

    def body_poses(self) -> torch.Tensor:
        """``[transforms, 7]`` world poses (px, py, pz, qx, qy, qz, qw) of every rigid body the provider publishes."""
        transforms = SceneDataFormat.Transform()
        if not self._provider.get_transforms(transforms):
            raise RuntimeError("GaussianRenderer: the scene data provider publishes no rigid-body transforms")
        return wp.to_torch(transforms.transforms).reshape(-1, 7)

    def render(self, render_data: GaussianRenderData) -> None:
        """Every view (view i is env i, seeing only that env's bodies) in one batched rasterization call."""
        data = render_data
        poses = self.body_poses()[data.body_indices]  # [views, bodies, 7]
        views = poses.shape[0]
        viewmats = opencv_viewmats(data.positions.torch, data.orientations.torch)
        Ks = data.intrinsics.torch.float()
        with torch.no_grad():
            colors, alphas, _ = render_clouds(
                self.clouds, [poses[:, i, None] for i in range(len(self.clouds))], viewmats[:, None], Ks[:, None],
                data.width, data.height, requires_grad=[False] * len(self.clouds),
                backgrounds=data.background.expand(views, 1, -1), backend=self.cfg.backend,
                near_plane=data.near_plane, far_plane=data.far_plane,
            )
        image = torch.cat([colors[:, 0], alphas[:, 0]], dim=-1)
        data.rgba.copy_((image.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8))

    def read_output(self, render_data: GaussianRenderData, camera_data) -> None:
        """Nothing to copy: :meth:`render` writes into the camera's own buffer."""

    def cleanup(self, render_data: GaussianRenderData | None) -> None:
        if render_data is not None:
            render_data.positions = render_data.orientations = render_data.intrinsics = render_data.rgba = None

    def close(self) -> None:
        self._provider = None


@configclass
class GaussianBodyCfg:
    """One Gaussian cloud on one rigid body per env."""

    body_path: str = MISSING
    """Prim path (regex) of the rigid body below each env: ``{ENV_REGEX_NS}/TBlock``, or an articulation link such
    as ``{ENV_REGEX_NS}/Robot/.*panda_hand``; must match exactly one body per env."""
    cloud: Callable[[], GaussianCloud] = MISSING
    """Makes the cloud in the body's frame (every ``body_ids`` 0), e.g. a ``functools.partial`` of
    ``real_is_sim.gaussians.spheres.cloud_from_spheres`` or of a loader of the object file. A callable because
    configclass walks (and would write into) a frozen cloud's fields."""


@configclass
class GaussianRendererCfg(RendererCfg):
    """Select with ``CameraCfg(..., renderer_cfg=GaussianRendererCfg(bodies=[...]))`` (or ``TiledCameraCfg``)."""

    class_type: type = GaussianRenderer
    renderer_type: str = "real_is_sim_gaussians"
    """Our own type: Isaac Lab's launcher takes the default renderer type for a Kit (RTX) camera."""
    bodies: list = MISSING
    """:class:`GaussianBodyCfg` items: which cloud rides on which rigid body."""
    background_color: tuple = (0.0, 0.0, 0.0)
    """RGB in [0, 1] where no Gaussian covers a pixel (alpha 0); a camera's own ``background_color`` wins."""
    backend: str = "auto"
    """Rasterizer backend: "auto" (gsplat on CUDA when importable, else cpu), "cpu" or "gsplat"."""

    def supported_output_types(self) -> dict[RenderBufferKind, RenderBufferSpec]:
        # rgba's alpha is the Gaussians' coverage (0: background only).
        return {RenderBufferKind.RGBA: RenderBufferSpec(4, wp.uint8), RenderBufferKind.RGB: RenderBufferSpec(3, wp.uint8)}
