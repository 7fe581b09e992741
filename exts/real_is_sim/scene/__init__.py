"""Scene building: an object (spheres + Gaussians) from calibrated views, the table plane from its points.

``views`` (segmentation, loading a recording), ``hull`` (visual hull, sphere fill), ``gaussian_fit``, ``build``
(the pipeline, the object file + USD writer), ``ground`` (RANSAC plane), ``compare`` (metrics against a known
object). docs/scene.md.
"""
