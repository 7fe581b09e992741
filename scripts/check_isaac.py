"""Check the Kit extension on a machine with Isaac Sim 6 (GPU): `python scripts/check_isaac.py`.

Starts Kit headless through Isaac Lab's AppLauncher, imports the module extension.toml names, runs its start-up as
Kit would, checks that the Real-is-Sim actions (deploy, stop) are registered and that the Gaussian renderer config is
importable inside Kit, shuts the extension down again and checks the actions are gone. Prints one JSON line. It
cannot run on the CPU-only development machines (no Isaac Sim there).
"""

import json
import sys

EXT_ID = "real_is_sim-check"


def main() -> int:
    try:
        from isaaclab.app import AppLauncher
    except ImportError:
        print(json.dumps({"ok": False, "reason": "isaaclab is not installed (needs Isaac Sim on a GPU machine)"}))
        return 2
    app = AppLauncher(headless=True).app
    try:
        import omni.kit.actions.core

        import real_is_sim.isaaclab.kit as kit
        from real_is_sim.isaaclab.renderer import GaussianRendererCfg

        registry = omni.kit.actions.core.get_action_registry()
        extension = kit.RealIsSimExtension()
        extension.on_startup(EXT_ID)
        registered = {a: registry.get_action(EXT_ID, a) is not None for a in kit.ACTIONS}
        extension.on_shutdown()
        removed = {a: registry.get_action(EXT_ID, a) is None for a in kit.ACTIONS}
        ok = all(registered.values()) and all(removed.values())
        print(json.dumps({"ok": ok, "module": kit.__name__, "actions_registered": registered,
                          "actions_removed_on_shutdown": removed, "renderer_type": GaussianRendererCfg().renderer_type}))
        return 0 if ok else 1
    finally:
        app.close()


if __name__ == "__main__":
    sys.exit(main())
