"""`real-is-sim demo`: see `python scripts/demo.py --help` and real_is_sim.cli."""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
