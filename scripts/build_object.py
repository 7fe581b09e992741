"""`real-is-sim build-object`: an object file + USD from >= 4 calibrated views; see `--help`, docs/scene.md.

    python scripts/build_object.py RECORDING --frame 30 --background-frame 0 --name box --out out/objects
"""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["build-object", *sys.argv[1:]]))
