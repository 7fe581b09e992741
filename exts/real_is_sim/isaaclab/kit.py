"""The Kit extension entry point of real-is-sim, loaded only inside Isaac Sim.

``extension.toml`` names this module, so Kit imports it when the extension is enabled. On start-up it registers two
actions and a "Real-is-Sim" menu under Window: "Deploy (stand-in)" starts a deploy session of the ``standin`` preset
on a background thread (:class:`real_is_sim.bridge.background.BackgroundSession`), "Stop deploy" stops it cleanly
(robot holds, then stops; recording closed). The Gaussian renderer needs no registration: an Isaac Lab camera selects
it through ``GaussianRendererCfg`` (``class_type``), imported here so a broken install fails at start-up.
Outside Kit (``omni.ext`` missing) importing this module raises one clear ImportError.
"""

from __future__ import annotations

try:
    import omni.ext as _omni_ext
except ImportError as exc:  # not inside Kit
    raise ImportError(
        "real_is_sim.isaaclab.kit needs Isaac Sim (Kit): 'omni.ext' is not importable here; "
        "the core package (real_is_sim.twin, .render, .correction, ...) works without it"
    ) from exc

ACTIONS = {"deploy_standin": "Deploy (stand-in)", "stop_deploy": "Stop deploy"}
MENU = "Real-is-Sim"


class RealIsSimExtension(_omni_ext.IExt):
    def on_startup(self, ext_id: str) -> None:
        import carb
        import omni.kit.actions.core
        import omni.kit.menu.utils
        from omni.kit.menu.utils import MenuItemDescription

        from real_is_sim.bridge.background import BackgroundSession
        from real_is_sim.isaaclab.renderer import GaussianRendererCfg  # noqa: F401  (fail early if unusable)

        self._ext_id = ext_id
        self._session = BackgroundSession()
        registry = omni.kit.actions.core.get_action_registry()
        callbacks = {"deploy_standin": self._deploy_standin, "stop_deploy": self._stop_deploy}
        for action, label in ACTIONS.items():
            registry.register_action(ext_id, action, callbacks[action], display_name=f"{MENU}: {label}")
        items = [MenuItemDescription(name=label, onclick_action=(ext_id, action)) for action, label in ACTIONS.items()]
        self._menu = [MenuItemDescription(name=MENU, sub_menu=items)]
        omni.kit.menu.utils.add_menu_items(self._menu, "Window")
        carb.log_info(f"[real_is_sim] extension {ext_id} started: Window > {MENU}")

    def _deploy_standin(self) -> None:
        import carb

        from real_is_sim.bridge.config import load_bridge_cfg
        from real_is_sim.errors import RealIsSimError

        try:
            self._session.start(load_bridge_cfg("standin"))
            carb.log_info("[real_is_sim] deploy session started (stand-in preset)")
        except RealIsSimError as exc:
            carb.log_error(f"[real_is_sim] deploy: {exc}")

    def _stop_deploy(self) -> None:
        import carb

        result = self._session.stop()
        carb.log_info(f"[real_is_sim] deploy session stopped: {result.to_dict() if result else self._session.error}")

    def on_shutdown(self) -> None:
        import omni.kit.actions.core
        import omni.kit.menu.utils

        self._session.stop()
        omni.kit.menu.utils.remove_menu_items(self._menu, "Window")
        registry = omni.kit.actions.core.get_action_registry()
        for action in ACTIONS:
            registry.deregister_action(self._ext_id, action)
