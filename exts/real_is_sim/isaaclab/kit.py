"""The Kit extension entry point of real-is-sim, loaded only inside Isaac Sim.

``extension.toml`` names this module, so Kit imports it when the extension is enabled. Outside Kit
(``omni.ext`` missing) importing it raises one clear ImportError; the core package never imports it.
"""

from __future__ import annotations

try:
    import omni.ext as _omni_ext
except ImportError as exc:  # not inside Kit
    raise ImportError(
        "real_is_sim.isaaclab.kit needs Isaac Sim (Kit): 'omni.ext' is not importable here; "
        "the core package (real_is_sim.twin, .render, .correction, ...) works without it"
    ) from exc


class RealIsSimExtension(_omni_ext.IExt):
    """Kit entry point: registers nothing heavy at start-up; the twin is built by scripts on demand."""

    def on_startup(self, ext_id: str) -> None:
        import carb

        carb.log_info(f"[real_is_sim] extension {ext_id} started")

    def on_shutdown(self) -> None:
        import carb

        carb.log_info("[real_is_sim] extension stopped")
