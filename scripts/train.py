"""Train the flow-matching waypoint policy: ``real-is-sim train`` (docs/policy.md).

    python scripts/train.py --dataset out/demos/pusht_scripted --out out/policy/pose --variant pose --steps 20000
"""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
