"""The ``real-is-sim`` command: deploy, demo, replay, export-usd.

    real-is-sim deploy [--preset standin|real_cell] [--config FILE] [--follower franky --robot-ip IP] [key=value ...]
    real-is-sim home [--robot-ip IP]       (before a deploy with a Franka: move it to the twin robot's start)
    real-is-sim demo [--out out/demo]
    real-is-sim replay --out DIR [--max-frames N] [--no-checks] [--arm-occluder]
    real-is-sim export-usd SESSION_DIR [--out FILE]
    real-is-sim collect --out DIR [--expert scripted|teleop] [--mode offline|online] [--episodes N] [--start-poses FILE|random|stratified]
    real-is-sim train --dataset DIR --out DIR [--variant pose|static_camera|wrist_camera|real_image] [--steps N ...]
    real-is-sim eval --checkpoint CKPT|RUN_DIR ... --out FILE.json [--protocol quick|paper] [--mode offline|online] [--executor local|ray]
    real-is-sim build-object RECORDING --frame N (--background-frame M | --backgrounds DIR | --masks DIR) --out DIR
    real-is-sim build-ground POINTS.npy --out ground_plane.json

Each prints a short human summary and, on its last stdout line, one JSON object. Bad input ends in one line on
stderr naming the problem (exit 2); a session stopped by a failing stage exits 1, by Ctrl-C 130.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import signal
import sys
from pathlib import Path

from real_is_sim.errors import RealIsSimError

EXIT_BAD_INPUT, EXIT_STAGE_FAILED, EXIT_INTERRUPTED = 2, 1, 130


def quiet_warp() -> None:
    """Warp prints a banner and a line per kernel module it loads: a command keeps its output to its own lines."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING


def _sigterm_as_interrupt() -> None:
    """SIGTERM stops a session the way Ctrl-C does: robot holds, then stops; recordings closed."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


# -- deploy ---------------------------------------------------------------------------------------------------


def _deploy_parser(sub) -> None:
    from real_is_sim.bridge.config import PRESETS

    p = sub.add_parser("deploy", help="run the Real-is-Sim loop: cameras -> visual forces -> twin -> policy -> follower",
                       description="Run a deploy session: the twin, corrected by visual forces from the cameras, "
                                   "commanded by the policy; the real (or stand-in) robot follows the twin robot.")
    p.add_argument("--preset", default="standin", choices=PRESETS, help="configuration preset (default: standin)")
    p.add_argument("--config", help="a YAML file merged over the preset")
    p.add_argument("--follower", choices=["simulated", "franky"], help="who follows the twin robot")
    p.add_argument("--robot-ip", help="the Franka's FCI address (with --follower franky); a loopback address is a "
                                      "simulator such as franky-sim, which needs no real-time kernel")
    p.add_argument("--seconds", type=float, help="twin time to run (default: the config's duration_s)")
    p.add_argument("--out", help="recording directory (default: the config's recording.out)")
    p.add_argument("--rerun", action="store_true", help="also write a rerun recording of the session")
    p.add_argument("--replay", metavar="SESSION_DIR", help="replay a recorded session through the loop (its config, "
                                                            "camera streams and arm; give --out for the new recording)")
    p.add_argument("overrides", nargs="*", help="config overrides, e.g. sensor.kp=8 policy.kind=hold")


def robot_ip_overrides(robot_ip: str) -> list[str]:
    """The Franka's address; a loopback address is a simulator (franky-sim), which needs no real-time kernel."""
    overrides = [f"follower.franky.address={robot_ip}"]
    try:
        if ipaddress.ip_address(robot_ip).is_loopback:
            overrides.append("follower.franky.require_realtime_kernel=false")
    except ValueError:
        pass  # a hostname: the real robot
    return overrides


def deploy_overrides(args) -> list[str]:
    from real_is_sim.bridge.config import session_replay_overrides

    overrides = session_replay_overrides(args.replay) if args.replay else []
    overrides += args.overrides
    if args.follower:
        overrides.append(f"follower.kind={args.follower}")
    if args.robot_ip:
        overrides += robot_ip_overrides(args.robot_ip)
    if args.seconds is not None:
        overrides.append(f"duration_s={args.seconds}")
    if args.out:
        overrides.append(f"recording.out={args.out}")
    if args.rerun:
        overrides.append("recording.rerun=true")
    return overrides


def deploy(args) -> int:
    from real_is_sim.bridge.config import load_bridge_cfg
    from real_is_sim.bridge.session import DeploySession, StageError

    config = Path(args.replay) / "config.yaml" if args.replay and not args.config else args.config
    cfg = load_bridge_cfg(args.preset, config, deploy_overrides(args))
    _sigterm_as_interrupt()
    session = DeploySession(cfg)
    try:
        result = session.run()
    except StageError as exc:
        print(f"real-is-sim deploy: {exc}", file=sys.stderr)
        print(json.dumps({"error": str(exc), "stage": exc.stage, "recording": cfg.recording.out}))
        return EXIT_STAGE_FAILED
    print(f"{result.policy}: {result.seconds_simulated:.1f} s in {result.wall_s:.1f} s ({result.loop_hz} Hz), "
          f"stopped by {result.stopped_by}; recorded in {result.recording}")
    print(json.dumps(result.to_dict()))
    return EXIT_INTERRUPTED if result.stopped_by == "interrupt" else 0


def _home_parser(sub) -> None:
    from real_is_sim.bridge.config import PRESETS

    p = sub.add_parser("home", help="move the Franka (franky) to the twin robot's start pose before a deploy session",
                       description="One slow joint motion of the Franka to the task's start pose (a straight line in "
                                   "joint space: check the path is clear), then the connection is released.")
    p.add_argument("--preset", default="real_cell", choices=PRESETS)
    p.add_argument("--config", help="a YAML file merged over the preset")
    p.add_argument("--robot-ip", help="the Franka's FCI address (a loopback address is a simulator)")
    p.add_argument("overrides", nargs="*", help="config overrides")


def home(args) -> int:
    from real_is_sim.bridge.config import load_bridge_cfg
    from real_is_sim.robot.franky_follower import FrankyFollower
    from real_is_sim.task import import_task

    overrides = [*args.overrides, *(robot_ip_overrides(args.robot_ip) if args.robot_ip else [])]
    cfg = load_bridge_cfg(args.preset, args.config, overrides)
    q_start = import_task(cfg.task_module).load_cfg(cfg.task).robot.q_start
    robot = FrankyFollower(cfg.follower.franky)
    try:
        robot.move_to(q_start)
        print(json.dumps({"robot": cfg.follower.franky.address, "q": [round(float(v), 4) for v in robot.read_state().q]}))
    finally:
        robot.close()
    return 0


# -- demo -----------------------------------------------------------------------------------------------------

DEMO_OFFSET = [0.015, -0.01, 0.1]  # reality's block starts 1.8 cm and 5.7 deg from where the twin believes it is
# Three cameras at 480x270, as the real ones: both runs take about 1.5 minutes on two quiet CPU cores.
DEMO_CAMERAS = ["cameras.width=480", "cameras.height=270"]


def _demo_parser(sub) -> None:
    p = sub.add_parser("demo", help="Real-is-Sim against the stand-in world, with a visual-forces-off control",
                       description="The stand-in world (hidden physics) plays the cell; the twin, corrected by visual "
                                   "forces, is commanded by the scripted push; the stand-in's robot follows the twin "
                                   "robot. Then the same run with visual forces off, as the control.")
    p.add_argument("--out", default="out/demo", help="output directory (replaced if it holds an earlier demo)")
    p.add_argument("--seconds", type=float, default=5.0, help="twin time per run")


def demo(args) -> int:
    import shutil

    from real_is_sim.bridge.config import load_bridge_cfg
    from real_is_sim.bridge.plots import plot_sync_error
    from real_is_sim.bridge.session import DeploySession

    out = Path(args.out)
    if (out / "demo.json").exists():
        shutil.rmtree(out)  # only an earlier demo's own output
    runs = {}
    for name, forces in (("forces_on", True), ("forces_off", False)):
        overrides = [f"duration_s={args.seconds}", f"recording.out={out / name}", f"loop.visual_forces={forces}",
                     "loop.realtime=false", f"initial_offset={DEMO_OFFSET}", f"recording.rerun={forces}",
                     *DEMO_CAMERAS]
        print(f"demo: visual forces {'on' if forces else 'off'} ...", flush=True)
        runs[name] = DeploySession(load_bridge_cfg("standin", overrides=overrides)).run()
    on, off = runs["forces_on"], runs["forces_off"]
    plot = plot_sync_error({"visual forces on": out / "forces_on", "off (control)": out / "forces_off"},
                           out / "sync_error.png")
    print(f"stand-in reality (hidden physics; it renders with the twin's own appearance model), its block started "
          f"{DEMO_OFFSET[:2]} m / {DEMO_OFFSET[2]} rad from where the twin believes it is; {on.policy} policy")
    for name, r in runs.items():
        print(f"  {name:10s}: sync error median {r.sync_error_mm_median} mm / {r.sync_error_deg_median} deg "
              f"(p95 {r.sync_error_mm_p95} mm / {r.sync_error_deg_p95} deg), {r.loop_hz} Hz, "
              f"block at goal (ground truth): {r.success}")
    summary = {
        "policy": on.policy, "seconds_simulated": on.seconds_simulated, "success": on.success,
        "sync_error_mm_median": on.sync_error_mm_median, "sync_error_deg_median": on.sync_error_deg_median,
        "sync_error_mm_p95": on.sync_error_mm_p95, "sync_error_deg_p95": on.sync_error_deg_p95,
        "loop_hz": on.loop_hz, "recording": str(out / "forces_on" / "session.rrd"), "plot": str(plot),
        "control_forces_off": {"sync_error_mm_median": off.sync_error_mm_median, "sync_error_deg_median": off.sync_error_deg_median,
                               "sync_error_mm_p95": off.sync_error_mm_p95, "sync_error_deg_p95": off.sync_error_deg_p95,
                               "success": off.success},
    }
    (out / "demo.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    return 0


# -- replay ---------------------------------------------------------------------------------------------------


def _replay_parser(sub) -> None:
    from real_is_sim.replay import ReplayCfg

    p = sub.add_parser("replay", help="replay the real RealSense footage through the loop (docs/replay.md)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--max-frames", type=int, default=None, help="replay only the first N frames per camera")
    p.add_argument("--recording", default=ReplayCfg.recording, help="recording directory (relative to the shared data)")
    p.add_argument("--render-downscale", type=int, default=1, help="the sensor renders at 1/K resolution")
    p.add_argument("--no-checks", action="store_true",
                   help="skip the leave-one-view-out runs and the forces-off control (the main run only)")
    p.add_argument("--arm-occluder", action="store_true",
                   help="render the arm fitted to the footage as the sensor's occluder (default: the truncated loss alone)")


def replay(args) -> int:
    from real_is_sim.replay import ReplayCfg, replay_real, tuned_sensor_cfg

    sensor = dataclasses.replace(tuned_sensor_cfg(), render_downscale=args.render_downscale)
    result = replay_real(args.out, ReplayCfg(recording=args.recording, max_frames=args.max_frames, sensor=sensor,
                                             checks=not args.no_checks, occlude_arm=args.arm_occluder))
    print(result.to_json())
    return 0


# -- export-usd -----------------------------------------------------------------------------------------------


def _export_usd_parser(sub) -> None:
    p = sub.add_parser("export-usd", help="a recorded session as a time-sampled USD stage (usdview, Isaac Sim)",
                       description="Write a recorded deploy session as one .usda: the twin's block (spheres, "
                                   "Gaussians) and robot links per 60 Hz tick, reality's block when recorded.")
    p.add_argument("session_dir", metavar="SESSION_DIR", help="a deploy session's recording directory")
    p.add_argument("--out", help="the USD file (default: SESSION_DIR/session.usda)")


def export_usd(args) -> int:
    from real_is_sim.bridge.usd_export import export_session_usd, session_usd_summary

    print(json.dumps(session_usd_summary(export_session_usd(args.session_dir, args.out))))
    return 0


# -- train ----------------------------------------------------------------------------------------------------


def _train_parser(sub) -> None:
    from real_is_sim.policy.config import LR_SCHEDULES, VARIANTS

    p = sub.add_parser("train", help="train the flow-matching waypoint policy on a demonstration dataset (docs/policy.md)",
                       description="Train the policy on a LeRobot v3 dataset; checkpoints (config, normalisers, "
                                   "weights, optimiser and RNG state in one file) every K steps, a loss plot at the end.")
    p.add_argument("--dataset", required=True, help="the dataset root (meta/info.json inside)")
    p.add_argument("--out", required=True, help="run directory: step_NNNNNN.pt, last.pt, loss.png, train.json")
    p.add_argument("--variant", default="pose", choices=VARIANTS, help="observation variant (default: pose)")
    p.add_argument("--steps", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--lr-schedule", choices=LR_SCHEDULES)
    p.add_argument("--seed", type=int)
    p.add_argument("--checkpoint-every", type=int, metavar="K")
    p.add_argument("--frame-stride", type=int, help="train on every k-th frame")
    p.add_argument("--resume", action="store_true", help="continue from OUT/last.pt (same settings)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: a run is reproducible only "
                                                          "with the same count, and 1 is fastest on a shared 2-core CPU)")
    p.add_argument("overrides", nargs="*", help="policy.KEY=V or train.KEY=V, e.g. policy.trunk=unet train.warmup_steps=0")


def train(args) -> int:
    import torch

    from real_is_sim.policy.train import configs_from_args, train as train_policy

    torch.set_num_threads(args.threads)
    policy_cfg, train_cfg = configs_from_args(
        args.variant, args.overrides, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
        lr_schedule=args.lr_schedule, seed=args.seed, checkpoint_every=args.checkpoint_every,
        frame_stride=args.frame_stride)
    result = train_policy(args.dataset, policy_cfg, train_cfg, args.out, resume=args.resume,
                          progress=not args.no_progress)
    print(f"trained {policy_cfg.variant} for {result.steps} steps on {result.samples} samples; "
          f"checkpoint {result.checkpoint}")
    print(json.dumps(json.loads((Path(args.out) / "train.json").read_text())))
    return 0


# -- eval -----------------------------------------------------------------------------------------------------


def _eval_parser(sub) -> None:
    from real_is_sim.evaluation.command import add_eval_arguments

    p = sub.add_parser("eval", help="evaluate policy checkpoints offline (parallel twin worlds) or online (against the "
                                    "stand-in) (docs/evaluation.md)",
                       description="Success by ground truth, gym-pusht coverage and the policy's progress, with Wilson "
                                   "intervals, per start pose; resumable (OUT.jsonl).")
    add_eval_arguments(p)


def eval_(args) -> int:
    from real_is_sim.evaluation.command import eval_command

    return eval_command(args)


# -- collect --------------------------------------------------------------------------------------------------


def _collect_parser(sub) -> None:
    from real_is_sim.demos import MODES
    from real_is_sim.demos.collect import EXPERTS, TIME_LIMIT_S

    p = sub.add_parser("collect", help="record PushT demonstrations into a LeRobot v3 dataset (docs/dataset.md)",
                       description="Episodes from the scripted expert or the web teleoperation page, offline (twin "
                                   "only) or online (against the stand-in, visual forces on), 60 Hz, into --out; a "
                                   "rerun appends the episodes still missing.")
    p.add_argument("--expert", default="scripted", choices=EXPERTS)
    p.add_argument("--mode", default="offline", choices=MODES)
    p.add_argument("--episodes", type=int, default=10, help="episodes the dataset should hold (default 10)")
    p.add_argument("--start-poses", default="random", metavar="FILE|random|stratified",
                   help="a start pose file ({\"poses\": [[7 numbers], ...]}), random ones or ones spread over the "
                        "start area by design (both seeded)")
    p.add_argument("--out", required=True, help="the dataset root (created, or resumed when it exists)")
    p.add_argument("--seed", type=int, default=0, help="random start poses, the expert's planner, the stand-in")
    p.add_argument("--task", default="pusht.yaml", help="the task YAML (default pusht.yaml)")
    p.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, help=f"s per scripted episode (default {TIME_LIMIT_S:g})")
    p.add_argument("--port", type=int, default=8080, help="teleop: the page's port on 127.0.0.1")
    p.add_argument("--expert-grid", default="random", choices=("random", "block"),
                   help="scripted: push headings turned at random per decision, or with the block's yaw")
    p.add_argument("--handover", default="", metavar="CKPT",
                   help="scripted, offline: this policy drives each episode first; the recorded demonstration "
                        "starts where it left block and arm (docs/dataset.md)")
    p.add_argument("--handover-after", type=float, nargs=2, default=(2.0, 12.0), metavar=("MIN", "MAX"),
                   help="seconds the policy drives, drawn per episode (default 2 12)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("overrides", nargs="*", help="BridgeCfg key=value overrides, e.g. cameras.num_cameras=2")


def collect(args) -> int:
    from real_is_sim.demos.collect import collect as collect_demos

    _sigterm_as_interrupt()
    try:
        result = collect_demos(args.expert, args.mode, args.episodes, args.start_poses, args.out, seed=args.seed,
                               task=args.task, overrides=args.overrides, time_limit_s=args.time_limit,
                               progress=not args.no_progress, teleop_port=args.port, expert_grid=args.expert_grid,
                               handover=args.handover, handover_after_s=args.handover_after)
    except KeyboardInterrupt:
        print("collect interrupted: the finished episodes are in the dataset, a rerun continues", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"{result.recorded} episodes recorded ({result.successes} successful), {result.episodes} in {result.out}")
    print(json.dumps(result.to_dict()))
    return 0


# -- build-object / build-ground -----------------------------------------------------------------------------


def _build_object_parser(sub) -> None:
    from real_is_sim.scene.build import ObjectBuildCfg
    from real_is_sim.scene.gaussian_fit import GaussianFitCfg

    p = sub.add_parser("build-object", help="an object file + USD from >= 4 calibrated views (docs/scene.md)",
                       description="Segment the object in every camera of a recording (difference to the empty cell, or "
                                   "mask files), carve its visual hull, fill it with fixed-radius spheres, fit Gaussians "
                                   "to the views, and write OUT/NAME.json (tblock.json's format) and OUT/NAME.usda.")
    p.add_argument("recording", help="a recording directory: cameras.json, videos/<serial>.mp4 and .json")
    p.add_argument("--frame", type=int, required=True, help="the frame index that shows the object")
    p.add_argument("--background-frame", type=int, help="the frame index that shows the empty cell")
    p.add_argument("--backgrounds", help="a folder of <serial>.npy images of the empty cell")
    p.add_argument("--masks", help="a folder of <serial>.png|.npy object masks (non-zero = object), used instead of segmenting")
    p.add_argument("--ground", help="the table's ground_plane.json (default: the plane z = 0)")
    p.add_argument("--name", default=ObjectBuildCfg.name)
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--sphere-radius", type=float, default=ObjectBuildCfg.sphere_radius, help="m (default: %(default)s)")
    p.add_argument("--sphere-spacing", type=float, default=ObjectBuildCfg.sphere_spacing, help="m (default: %(default)s)")
    p.add_argument("--voxel", type=float, default=ObjectBuildCfg.voxel_size, help="m (default: %(default)s)")
    p.add_argument("--mass", type=float, default=ObjectBuildCfg.mass, help="kg, for the USD (default: %(default)s)")
    p.add_argument("--gaussians", type=int, default=GaussianFitCfg.num_gaussians, help="(default: %(default)s)")
    p.add_argument("--iterations", type=int, default=GaussianFitCfg.iterations, help="Gaussian fit (default: %(default)s)")
    p.add_argument("--threshold", type=float, default=0.08, help="segmentation: colour difference to the empty cell")


def build_object(args) -> int:
    from real_is_sim.scene.build import ObjectBuildCfg, build_object as build, write_object
    from real_is_sim.scene.gaussian_fit import GaussianFitCfg
    from real_is_sim.scene.ground import read_ground_plane
    from real_is_sim.scene.views import load_views

    cfg = ObjectBuildCfg(name=args.name, voxel_size=args.voxel, sphere_radius=args.sphere_radius,
                         sphere_spacing=args.sphere_spacing, mass=args.mass,
                         gaussians=GaussianFitCfg(num_gaussians=args.gaussians, iterations=args.iterations))
    plane = read_ground_plane(args.ground) if args.ground else [0.0, 0.0, 1.0, 0.0]
    views = load_views(args.recording, args.frame, args.background_frame, args.backgrounds, args.masks, args.threshold)
    built = build(views, plane, cfg)
    json_path, usd_path = write_object(built, args.out)
    summary = {**built.summary(), "views": [v.camera.serial for v in views], "object_file": str(json_path),
               "usd": str(usd_path)}
    print(f"{built.name}: {summary['spheres']} spheres of {cfg.sphere_radius * 1000:g} mm, {summary['gaussians']} "
          f"Gaussians from {len(views)} views in {summary['seconds']} s -> {json_path}, {usd_path}")
    print(json.dumps(summary))
    return 0


def _build_ground_parser(sub) -> None:
    p = sub.add_parser("build-ground", help="the table plane from a point cloud (docs/scene.md)",
                       description="RANSAC for the inliers, least squares on them; writes ground_plane.json's format "
                                   "(upward normal: points above the table are positive) with the inlier ratio and "
                                   "the residual.")
    p.add_argument("points", help="an (N, 3) .npy point cloud, as environment/ground.npy")
    p.add_argument("--out", required=True, help="the plane file to write")
    p.add_argument("--threshold", type=float, default=0.003, help="inlier distance, m (default: %(default)s)")
    p.add_argument("--iterations", type=int, default=500, help="RANSAC samples (default: %(default)s)")


def build_ground(args) -> int:
    from real_is_sim.scene.ground import fit_plane, load_points, write_ground_plane

    fit = fit_plane(load_points(args.points), args.threshold, args.iterations)
    path = write_ground_plane(fit, args.out)
    print(f"plane {[round(float(v), 5) for v in fit.plane]}: {fit.inlier_ratio:.1%} of {fit.inliers.size} points within "
          f"{args.threshold * 1000:g} mm, rms residual {fit.rms_residual * 1000:.2f} mm -> {path}")
    print(json.dumps({**fit.to_dict(), "out": str(path)}))
    return 0


COMMANDS = {"deploy": (_deploy_parser, deploy), "home": (_home_parser, home), "demo": (_demo_parser, demo), "replay": (_replay_parser, replay),
            "export-usd": (_export_usd_parser, export_usd), "train": (_train_parser, train), "eval": (_eval_parser, eval_),
            "collect": (_collect_parser, collect), "build-object": (_build_object_parser, build_object),
            "build-ground": (_build_ground_parser, build_ground)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="real-is-sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for make_parser, _ in COMMANDS.values():
        make_parser(sub)
    args = parser.parse_args(argv)
    quiet_warp()
    try:
        return COMMANDS[args.command][1](args)
    except RealIsSimError as exc:  # bad config, missing file or device: one line, no traceback
        print(f"real-is-sim {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
