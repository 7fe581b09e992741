"""real-is-sim: a Newton simulation kept in sync with a real robot cell by Embodied Gaussians.

The core never imports ``isaaclab`` or ``omni``; the Isaac adapters live in ``real_is_sim.isaaclab``.
"""

try:
    import warp as _wp
except ImportError:  # Warp is a dependency; only the gsplat-only GPU check (scripts/check_gsplat.py) runs without it
    pass
else:
    # Warp prints a banner and a line per kernel module load; keep a library's output to what it means to say.
    _wp.config.quiet = True

__version__ = "0.1.0"
