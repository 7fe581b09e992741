"""The PushT twin on Newton: N replicated worlds of a Franka with a pusher and a T-block of spheres."""

from real_is_sim.twin.twin import SOLVERS, Twin, TwinCfg

__all__ = ["SOLVERS", "Twin", "TwinCfg"]
