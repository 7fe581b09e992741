"""Check the Isaac Sim adapter on a machine with Isaac Sim (GPU): `python scripts/check_isaac.py`.

Starts Kit headless through Isaac Lab's AppLauncher, imports the adapter module named by
extension.toml, and prints one JSON line. It cannot run on the CPU-only development machines.
"""

import json
import sys


def main() -> int:
    try:
        from isaaclab.app import AppLauncher
    except ImportError:
        print(json.dumps({"ok": False, "reason": "isaaclab is not installed (needs Isaac Sim on a GPU machine)"}))
        return 2
    app = AppLauncher(headless=True).app
    try:
        import real_is_sim.isaaclab.kit as adapter

        ok = hasattr(adapter, "RealIsSimExtension")
        print(json.dumps({"ok": ok, "module": adapter.__name__}))
        return 0 if ok else 1
    finally:
        app.close()


if __name__ == "__main__":
    sys.exit(main())
