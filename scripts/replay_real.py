"""Replay the real RealSense footage through the Real-is-Sim loop (see docs/replay.md): `real-is-sim replay`.

    python scripts/replay_real.py --out DIR [--max-frames N] [--recording sample_demos/0] [--render-downscale K]

Writes DIR/trajectory.csv, DIR/overlay_*.png and DIR/replay.rrd; the last stdout line is one JSON object.
"""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["replay", *sys.argv[1:]]))
