"""Record PushT demonstrations into a LeRobot v3 dataset: ``real-is-sim collect`` (docs/dataset.md).

    python scripts/collect.py --expert scripted --mode offline --episodes 50 --out out/demos/pusht_scripted
    python scripts/collect.py --expert scripted --mode online --episodes 10 --start-poses tasks/pusht/start_poses.json --out out/demos/online
    python scripts/collect.py --expert teleop --mode online --episodes 5 --out out/demos/teleop   # then open http://127.0.0.1:8080
"""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["collect", *sys.argv[1:]]))
