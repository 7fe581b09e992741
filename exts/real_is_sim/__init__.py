"""real-is-sim: a Newton simulation kept in sync with a real robot cell by Embodied Gaussians.

The core never imports ``isaaclab`` or ``omni``; the Isaac Lab classes live in ``real_is_sim.isaaclab``.
Commands and scripts quiet Warp's log themselves (:func:`real_is_sim.cli.quiet_warp`); the library leaves it alone.
"""

__version__ = "0.1.0"
