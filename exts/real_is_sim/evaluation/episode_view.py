"""One offline episode of an evaluation, run again from its result row and recorded for rerun.

An evaluation keeps one row per episode (``<out>.jsonl``): checkpoint, start pose, seed, time limit, waypoints per
call, control. That is enough to run the episode again alone: its flow noise comes from its own seed and the twin's
worlds do not interact, so one world gives what its batch gave (the row's start pose is rounded to 1e-6, which a
long chaotic push may amplify; :func:`record_episode` says whether the outcome was reproduced). The recording
holds, per 60 Hz tick, the block (its spheres), the goal, the pusher, the arm's link origins, the distance and
yaw error to the goal, and every ``image_every`` ticks the virtual static camera's view of the twin.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from real_is_sim.errors import ConfigError, DataError
from real_is_sim.evaluation.spec import Episode, Unit

REPRODUCED_M = 1e-3  # final block distances to the goal that differ by less count as the same outcome


def load_rows(path: str | Path) -> list[dict]:
    """The episode rows of an evaluation (``FILE.jsonl``, or ``FILE.json`` whose rows sit beside it)."""
    path = Path(path)
    rows_path = path if path.suffix == ".jsonl" else path.with_suffix(".jsonl")
    if not rows_path.is_file():
        raise DataError(f"no episode rows at {rows_path} (an evaluation writes them beside its summary JSON)")
    rows = []
    for number, line in enumerate(rows_path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"{rows_path}:{number} is not a JSON row ({exc.msg})") from None
    return rows


def episode_unit(row: dict) -> Unit:
    """The one-episode unit that runs ``row``'s episode again (offline rows only)."""
    if row.get("mode") != "offline":
        raise ConfigError(f"only offline episodes can be run again (episode {row.get('key')!r} is {row.get('mode')!r}: "
                          f"an online one depends on the stand-in's frames)")
    try:
        episode = Episode(row["checkpoint"], row["start"], int(row["pose_index"]), int(row["trial"]), int(row["seed"]),
                          tuple(float(v) for v in row["start_pose"]))
        return Unit("offline", row["checkpoint"], [episode], float(row["seconds_limit"]),
                    execute=row.get("execute_waypoints"), control=row.get("control"), noise_scale=row.get("noise_scale"),
                    tempo=row.get("tempo"))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"episode row {row.get('key')!r} lacks a field to run it again: {exc}") from None


class EpisodeRecording:
    """``on_tick(tick, twin)`` for :func:`~real_is_sim.evaluation.offline.simulate_unit`: logs world 0 to rerun."""

    def __init__(self, path: Path, cell, image_every: int, image_size: int):
        import rerun as rr

        from real_is_sim.twin.tblock import block_geometry

        self.rr, self.cell, self.image_every, self.image_size = rr, cell, image_every, image_size
        self.rec = rr.RecordingStream("real_is_sim_episode")
        self.rec.save(str(path))
        geometry = block_geometry(cell)
        self.rec.log("world/block", rr.Points3D(geometry.centers, radii=geometry.radius, colors=(230, 90, 30)), static=True)
        goal = np.asarray(cell.goal.pose, dtype=np.float64)
        self.rec.log("world/goal", rr.Transform3D(translation=goal[:3], quaternion=rr.Quaternion(xyzw=goal[3:7])), static=True)
        self.rec.log("world/goal/outline", rr.Points3D(geometry.centers, radii=geometry.radius * 0.4, colors=(60, 120, 230)),
                     static=True)
        self.dt = 1.0 / cell.control_hz

    def __call__(self, tick: int, twin) -> None:
        from real_is_sim.render.virtual_cameras import render_virtual
        from real_is_sim_tasks.pusht.success import goal_errors

        rr, rec = self.rr, self.rec
        pose = twin.object_poses()[0, 0]
        rec.set_time("t", duration=(tick + 1) * self.dt)
        rec.log("world/block", rr.Transform3D(translation=pose[:3], quaternion=rr.Quaternion(xyzw=pose[3:7])))
        rec.log("world/pusher", rr.Points3D(twin.tool_position()[:1], radii=self.cell.robot.pusher_radius,
                                            colors=(200, 200, 200)))
        links = twin.robot_link_poses()[0][:, :3]
        rec.log("world/arm", rr.LineStrips3D([links], colors=(220, 220, 210)))
        distance, yaw = goal_errors(pose, self.cell.goal)
        rec.log("goal/distance_m", rr.Scalars(float(distance)))
        rec.log("goal/yaw_error_deg", rr.Scalars(float(np.degrees(yaw))))
        if tick % self.image_every == 0:
            image = render_virtual("static", twin.object_poses()[:1], twin.robot_q()[:1], self.image_size,
                                   self.image_size, cell=self.cell)[0]
            rec.log("camera/static", rr.Image(image).compress(jpeg_quality=85))

    def close(self) -> None:
        self.rec.flush()


def record_episode(row: dict, out_dir: str | Path, image_every: int = 6, image_size: int = 256) -> dict:
    """Run ``row``'s offline episode again and write ``out_dir/<start>_t<trial>.rrd``; returns what happened next to
    what the row says (``same_outcome``: ground truth; ``reproduced``: that and the final distance within 1 mm)."""
    from real_is_sim.evaluation.offline import cached_policy, simulate_unit

    if int(image_every) < 1 or int(image_size) < 16:
        raise ConfigError(f"image_every must be >= 1 and image_size >= 16, got {image_every}, {image_size}")
    unit = episode_unit(row)
    _, _, cell = cached_policy(unit.checkpoint)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{row['start']}_t{row['trial']}.rrd"
    recording = EpisodeRecording(path, cell, int(image_every), int(image_size))
    try:
        clock, final = simulate_unit(unit, on_tick=recording)
    finally:
        recording.close()
    outcome = clock.row(0, final[0])
    same_outcome = outcome["ground_truth"] == row.get("ground_truth")
    reproduced = same_outcome and abs(outcome["final_distance_m"] - float(row.get("final_distance_m", np.nan))) < REPRODUCED_M
    return {"key": row.get("key"), "rerun": str(path), "ground_truth": outcome["ground_truth"],
            "final_distance_m": outcome["final_distance_m"], "row_ground_truth": row.get("ground_truth"),
            "row_final_distance_m": row.get("final_distance_m"), "same_outcome": bool(same_outcome),
            "reproduced": bool(reproduced)}
