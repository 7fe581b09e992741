"""Load a dataset written by real_is_sim.demos.dataset with LeRobot's own LeRobotDataset (docs/dataset.md).

LeRobot is not a dependency (its current releases need Python 3.12); lerobot 0.4.4 (codebase v3.0, Python >= 3.10)
and the few packages its dataset code imports go into a separate folder, without their dependencies (torch is ours):

    pip install --target /tmp/lr --no-deps lerobot==0.4.4 "datasets>=4,<5" "huggingface-hub>=0.34.2,<0.36" \
        pandas draccus==0.10.0 dill multiprocess xxhash fsspec httpx httpcore h11 anyio sniffio certifi idna requests \
        urllib3 charset-normalizer filelock hf-xet accelerate safetensors termcolor deepdiff orderly-set jsonlines \
        mergedeep pyyaml-include typing-inspect mypy-extensions toml
    python scripts/check_lerobot.py out/demos/pusht_scripted --lerobot /tmp/lr

It opens the metadata (info, tasks, episodes, stats), the whole dataset with an action chunk (delta_timestamps: LeRobot
checks the timestamps against fps), one episode alone, and prints one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import sys
import types


def _stub_torchvision() -> None:
    """lerobot.datasets.utils imports torchvision for image transforms only; the torchvision wheels on PyPI do not
    match our torch, and this dataset has no images."""
    tv = types.ModuleType("torchvision")
    tv.__spec__ = importlib.machinery.ModuleSpec("torchvision", None)
    names = ("torchvision.transforms", "torchvision.transforms.v2", "torchvision.transforms.v2.functional")
    modules = {name: types.ModuleType(name) for name in names}
    tv.transforms = modules[names[0]]
    tv.transforms.v2 = modules[names[1]]
    tv.transforms.v2.functional = modules[names[2]]
    sys.modules.update({"torchvision": tv, **modules})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", help="the dataset root")
    parser.add_argument("--lerobot", required=True, help="the folder lerobot 0.4.4 was installed into (pip --target)")
    args = parser.parse_args()
    sys.path.insert(0, args.lerobot)
    _stub_torchvision()
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata

    meta = LeRobotDatasetMetadata("local/real_is_sim", root=args.dataset)
    fps = meta.fps
    full = LeRobotDataset("local/real_is_sim", root=args.dataset, delta_timestamps={"action": [k / fps for k in range(4)]})
    item = full[len(full) // 2]
    last = LeRobotDataset("local/real_is_sim", root=args.dataset, episodes=[meta.total_episodes - 1])
    print(json.dumps({
        "codebase_version": meta.info["codebase_version"], "fps": fps, "episodes": meta.total_episodes,
        "frames": len(full), "tasks": list(meta.tasks.index),
        "item": {k: list(v.shape) for k, v in item.items() if hasattr(v, "shape")}, "item_task": item["task"],
        "last_episode_frames": len(last), "state_mean": meta.stats["observation.state"]["mean"].round(4).tolist(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
