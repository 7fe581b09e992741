"""Replay the real RealSense footage through the Real-is-Sim loop (see docs/replay.md).

    python scripts/replay_real.py --out DIR [--max-frames N] [--recording sample_demos/0] [--render-downscale K]

Writes DIR/trajectory.csv, DIR/overlay_*.png and DIR/replay.rrd; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from real_is_sim.errors import RealIsSimError
from real_is_sim.replay import ReplayCfg, replay_real, tuned_sensor_cfg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--max-frames", type=int, default=None, help="replay only the first N frames per camera")
    parser.add_argument("--recording", default=ReplayCfg.recording, help="recording directory (relative to the shared data)")
    parser.add_argument("--render-downscale", type=int, default=1, help="the sensor renders at 1/K resolution")
    args = parser.parse_args()
    try:
        sensor = dataclasses.replace(tuned_sensor_cfg(), render_downscale=args.render_downscale)
        result = replay_real(args.out, ReplayCfg(recording=args.recording, max_frames=args.max_frames, sensor=sensor))
    except RealIsSimError as exc:  # bad data or config: one line, no traceback
        sys.exit(f"replay_real: {exc}")
    print(result.to_json())


if __name__ == "__main__":
    main()
