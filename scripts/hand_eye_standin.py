"""Hand-eye calibration of the stand-in's cameras: how far each camera puts the block from where the true camera
sees it, with the nominal calibration and after the routine (a checkerboard on the robot's hand shown to every
camera, real_is_sim.cameras.hand_eye), with every appearance knob on (realistic) by default.

    python scripts/hand_eye_standin.py --out docs/img            # draws 1 and 3, realistic appearance
    python scripts/hand_eye_standin.py --draws 1 --perfect       # the stand-in's cameras are the nominal ones

The stand-in's true cameras are 2 mm / 0.3 deg (random directions) and 0.5 % (intrinsics) off the nominal
calibration (HiddenAppearance knob ``calibration``), its board 2 mm / 0.5 deg off its nominal mount; the routine
knows neither. Writes an overlay of one pose's frames (nominal prediction red, corners found green) to --out.
Last stdout line: one JSON object.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench_sync import calibration_check, run_cfg
from real_is_sim.bridge import build_bridge
from real_is_sim.cameras.hand_eye import (HandEyeCfg, board_cloud, board_corners, calibrate, corner_window, project,
                                          refine_corners)
from real_is_sim.cli import quiet_warp
from real_is_sim.paths import shared_data_dir
from real_is_sim.standin.appearance import HiddenAppearance
from real_is_sim.transforms import pose_to_matrix
from real_is_sim_tasks.pusht.config import load_pusht_cfg


def overlay(shot, nominal, X_WBase, cfg: HandEyeCfg, path: Path) -> None:
    """The frames of one pose side by side, the corners where the nominal calibration predicts them (red) and where
    they were found (green)."""
    import imageio.v3 as iio

    from real_is_sim.robot.kinematics import PandaKinematics

    q, images = shot
    X_WB = X_WBase @ PandaKinematics().tool_pose(q).homogeneous @ cfg.board.X_TB()
    tiles = []
    for camera in nominal:
        if camera.serial not in images:
            continue
        image = images[camera.serial].copy()
        predicted, _ = project(camera.K, camera.X_WC, X_WB, board_corners(cfg.board))
        window = corner_window(predicted, cfg.board, cfg.window_px)
        found, ok = refine_corners(image, predicted, window) if window else (predicted, np.zeros(len(predicted), bool))
        for points, colour in ((predicted, (255, 0, 0)), (found[ok], (0, 255, 0))):
            for u, v in points:
                r, c = int(v), int(u)
                image[max(r - 1, 0): r + 2, max(c - 1, 0): c + 2] = colour
        tiles.append(image)
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, np.concatenate(tiles, axis=1))


def main() -> None:
    quiet_warp()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, nargs="+", default=[1, 3], help="stand-in seeds (its true cameras)")
    parser.add_argument("--perfect", action="store_true", help="perfect appearance: no hidden camera error")
    parser.add_argument("--out", default="docs/img", help="where the overlay goes")
    parser.add_argument("--overlay-pose", type=int, default=3, help="which pose of the first draw the overlay shows")
    args = parser.parse_args()
    scanned = shared_data_dir() / "objects" / "tblock.json"
    block = "scanned" if scanned.is_file() else "procedural"
    task = load_pusht_cfg(Path(__file__).resolve().parents[1] / "tasks" / "pusht" / "pusht_real.yaml") if scanned.is_file() else load_pusht_cfg()
    appearance = HiddenAppearance() if args.perfect else HiddenAppearance.realistic()
    cfg = HandEyeCfg()
    rows = []
    for draw in args.draws:
        begin = time.perf_counter()
        session = build_bridge(run_cfg(draw, True, appearance), task)  # nominal cameras: calibrated below
        try:
            world = session.standin
            world.mount_board(board_cloud(cfg.board), cfg.board.X_TB())
            shots = []

            def capture(poses):
                shots.extend(world.calibration_views(poses, cfg.max_joint_speed, cfg.settle_s))
                return shots

            X_WBase = pose_to_matrix(np.asarray(task.robot.base_pose))
            result = calibrate(session.cameras, session.twin.object_poses()[0, 0, :3], X_WBase,
                               np.asarray(task.robot.q_start), capture, cfg)
            if draw == args.draws[0]:
                overlay(shots[args.overlay_pose], session.cameras, X_WBase, cfg, Path(args.out) / "hand_eye_views.png")
            session.cameras = [result.cameras[c.serial] for c in session.cameras]
            row = {"draw": draw, "poses": len(shots), **result.summary(), **calibration_check(session),
                   "wall_s": round(time.perf_counter() - begin, 1)}
        finally:
            session.hold_and_stop()
        print(row, flush=True)
        rows.append(row)
    mean = lambda key: round(float(np.mean([v for r in rows for v in r[key].values()])), 3)  # noqa: E731
    print(json.dumps({"appearance": "perfect" if args.perfect else "realistic", "block": block,
                      "block_px_nominal_mean": mean("block_px_nominal"), "block_px_calibrated_mean": mean("block_px_calibrated"),
                      "runs": rows}))


if __name__ == "__main__":
    main()
