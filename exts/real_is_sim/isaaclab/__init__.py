"""Isaac Lab 3 counterparts of the core: the visual-force sensor and actuator, the PushT task, the renderer.

Isaac Lab imports live in this package only. It runs kit-less on the Newton backend (no Isaac Sim); the Kit
extension entry point is :mod:`real_is_sim.isaaclab.kit`, imported only inside Isaac Sim. Without isaaclab
installed, importing this package raises one ImportError saying so; the core never imports it.
"""

from __future__ import annotations

try:
    import isaaclab as _isaaclab  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "real_is_sim.isaaclab needs Isaac Lab 3.0 (pip install --no-deps --ignore-requires-python isaaclab==3.0.0, "
        "see the Makefile); the core package (real_is_sim.twin, .render, .correction, ...) works without it"
    ) from exc
