"""Decode and encode speed of the camera layer on the shared footage.

Run: ``python -m real_is_sim.cameras.benchmark [--recording DIR]``. Prints one JSON object on the
last stdout line: sequential replay decode rate (frames/s, both cameras, RGB out), random-access
time per frame (the shared videos have a keyframe every 250 frames), Recorder encode time per
480x270 frame, random access in a recording it wrote (a keyframe per second), and the process's peak RSS after replaying everything.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from real_is_sim.cameras.recorder import Recorder
from real_is_sim.cameras.replay import VideoReplaySource
from real_is_sim.paths import shared_data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", type=Path, default=shared_data_dir() / "sample_demos" / "0")
    parser.add_argument("--random-reads", type=int, default=40)
    parser.add_argument("--encode-frames", type=int, default=300)
    args = parser.parse_args()

    with VideoReplaySource(args.recording) as src:
        begin = time.perf_counter()
        frames = 0
        for _ in src.frames():
            frames += 1
        decode_s = time.perf_counter() - begin
        replay_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # streaming: no frame store
        rng = np.random.default_rng(0)
        serial = src.serials[0]
        picks = rng.integers(0, src.num_frames(serial), args.random_reads)
        begin = time.perf_counter()
        for index in picks:
            src.frame(serial, int(index))
        random_ms = (time.perf_counter() - begin) / len(picks) * 1e3
        cameras = src.cameras
        encode_frames = [src.frame(serial, i) for i in range(min(args.encode_frames, src.num_frames(serial)))]

    with tempfile.TemporaryDirectory() as tmp:
        with Recorder(Path(tmp) / "bench", {serial: cameras[serial]}) as recorder:
            begin = time.perf_counter()
            recorder.write_all(encode_frames)
            encode_ms = (time.perf_counter() - begin) / len(encode_frames) * 1e3
        video_bytes = (Path(tmp) / "bench" / "videos" / f"{serial}.mp4").stat().st_size
        with VideoReplaySource(Path(tmp) / "bench") as recorded:
            begin = time.perf_counter()
            for index in picks % len(encode_frames):
                recorded.frame(serial, int(index))
            recorded_random_ms = (time.perf_counter() - begin) / len(picks) * 1e3

    print(
        json.dumps(
            {
                "recording": str(args.recording),
                "replay_frames": frames,
                "replay_decode_fps": round(frames / decode_s, 1),
                "random_access_ms_per_frame": round(random_ms, 2),
                "encode_ms_per_frame": round(encode_ms, 2),
                "recorded_random_access_ms_per_frame": round(recorded_random_ms, 2),
                "encoded_kib_per_frame": round(video_bytes / len(encode_frames) / 1024, 1),
                "frame_size": [cameras[serial].width, cameras[serial].height],
                "peak_rss_mib_after_full_replay": round(replay_rss_mib, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
