"""The rasterization rules both backends share: gsplat 1.6's classic mode.

Read from gsplat's ``gsplat/cuda/_torch_impl.py``, ``ProjectionEWA3DGSFused.cu`` and
``RasterizeToPixels3DGSDevice.cuh``:

- EWA splatting, the Jacobian evaluated at the camera-space mean clamped to 1.3x the field of view;
  ``eps2d`` (0.3 px^2) added to the 2D covariance (classic: no compensation of the opacity);
- Gaussians nearer than ``near_plane`` (0.01) or farther than ``far_plane`` are culled, as are those
  with opacity < 1/255 or a non-positive 2D determinant;
- the screen box is opacity-aware: ``min(3.33, sqrt(2 ln(255 opacity)))`` standard deviations per
  axis. Outside it alpha < 1/255, so it culls nothing that would be drawn (for opacity 1 it is the
  classic ~3.3 sigma);
- pixel centres at +0.5; per pixel, Gaussians front to back (by camera z), alpha = min(0.99,
  opacity exp(-sigma)), skipped when alpha < 1/255, and the pixel stops *before* a Gaussian that
  would bring the transmittance to <= 1e-4; colour = sum(c alpha T) + T background.
"""

EPS2D = 0.3  # px^2 added to every projected 2D covariance (the low-pass)
ALPHA_THRESHOLD = 1.0 / 255.0
MAX_ALPHA = 0.99
TRANSMITTANCE_THRESHOLD = 1e-4
GAUSSIAN_EXTEND = 3.33
