"""GaussianCloud (Gaussians attached to bodies), posing, and io (object json, 3DGS ply, USD)."""

from real_is_sim.gaussians.cloud import GaussianCloud, concat_clouds, pose_cloud
from real_is_sim.gaussians.io import load_object_cloud, read_ply, read_usd, write_ply, write_usd

__all__ = ["GaussianCloud", "concat_clouds", "load_object_cloud", "pose_cloud", "read_ply", "read_usd", "write_ply", "write_usd"]
