"""Scene building: an object (spheres + Gaussians) from calibrated views, the table plane from its points."""
