"""Write usd/pusht_scene.usda: the PushT scene (table, T-block with sphere colliders and mass, Gaussians, goal, robot).

    python scripts/build_scene.py                      # procedural T-block, no shared data needed
    python scripts/build_scene.py --object real        # the scanned block and table plane of the real data
"""

import argparse
import json

from real_is_sim.paths import USD_DIR
from real_is_sim.twin.usd_scene import write_scene
from real_is_sim_tasks.pusht import REAL_YAML, load_pusht_cfg
from real_is_sim.cli import quiet_warp


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--object", default="procedural", help="'procedural', 'real' (pusht_real.yaml) or an object file path")
    parser.add_argument("--out", default=str(USD_DIR / "pusht_scene.usda"))
    args = parser.parse_args()
    if args.object == "procedural":
        task = load_pusht_cfg()
    elif args.object == "real":
        task = load_pusht_cfg(REAL_YAML)
    else:
        task = load_pusht_cfg(REAL_YAML, [f"block.object_file={args.object}"])
    path = write_scene(args.out, task, goal_pose=task.goal.pose)
    print(json.dumps({"usd": str(path), "block_source": task.block.source}))


if __name__ == "__main__":
    main()
