"""`real-is-sim build-ground`: the table plane from a point cloud (RANSAC + least squares); see `--help`, docs/scene.md.

    python scripts/build_ground.py ../shared/data/pusht_real/environment/ground.npy --out out/ground_plane.json
"""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["build-ground", *sys.argv[1:]]))
