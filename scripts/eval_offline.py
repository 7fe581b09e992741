"""Evaluate policy checkpoints: ``real-is-sim eval`` (docs/evaluation.md).

    python scripts/eval_offline.py --checkpoint out/policy/pose_10k/last.pt --out out/eval/pose_10k_quick.json
    python scripts/eval_offline.py --checkpoint out/policy/RUN --protocol paper --out out/eval/RUN_paper.json
    python scripts/eval_offline.py --checkpoint CKPT --mode online --out out/eval/CKPT_online.json cameras.num_cameras=2
"""

import sys

from real_is_sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
