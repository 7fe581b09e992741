"""real-is-sim: a Newton simulation kept in sync with a real robot cell by Embodied Gaussians.

The core never imports ``isaaclab`` or ``omni``; the Isaac adapters live in ``real_is_sim.isaac``.
"""

__version__ = "0.1.0"
