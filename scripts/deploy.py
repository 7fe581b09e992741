"""`real-is-sim deploy`: see `python scripts/deploy.py --help` and real_is_sim.cli."""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["deploy", *sys.argv[1:]]))
