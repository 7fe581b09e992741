"""gaussians."""
