"""Speed of the Isaac Lab PushT env (RealIsSim-PushT-Franka-v0, MJWarp on CPU) next to the core twin, same task.

    python scripts/bench_isaaclab.py                          # 1 and 20 envs, cold and cached first step (~6 min)
    python scripts/bench_isaaclab.py --envs 4 --no-first-step

Steady state: each env count gets a fresh env (creation and the first reset + step timed apart), then the best of
``--repeats`` timings of ``--steps`` control steps of the whole env (all envs at once); the core twin
(``Twin(task, N)``, XPBD) steps the same arm targets (a 0.5 Hz, 0.1 rad sine on every joint around the task's
q_start). First step: two subprocesses build a 1-env PushT env with Warp's kernel cache (``WARP_CACHE_PATH``) and
the USD assets in a fresh temp dir: "cold" (empty cache: every kernel compiled) then "cached" (same dir).

Prints one JSON object on its last line: ``isaaclab`` and ``twin`` lists of {num_envs, env_steps_per_s (wall clock;
``_cpu_time``: by this process's CPU time), realtime_factor_per_env (= env_steps_per_s / 60: simulated seconds of one
env per second), realtime_factor_all_envs (= env_steps_per_s * num_envs / 60), env_create_s, first_step_s (reset +
first step)}, ``first_step`` {cold, cached: import_s, env_create_s, first_step_s, total_s, process_s}, and the machine
load (1-minute load average at the start and the end, CPU count).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from real_is_sim.cli import quiet_warp

CONTROL_HZ = 60.0


def arm_targets(q_start: np.ndarray, step: int, num_envs: int) -> np.ndarray:
    """``[num_envs, 7]`` targets at control step ``step``: q_start + 0.1 rad * sin(2 pi 0.5 Hz t), every joint."""
    q = np.asarray(q_start, dtype=np.float32) + 0.1 * np.sin(2.0 * np.pi * 0.5 * step / CONTROL_HZ)
    return np.repeat(q[None].astype(np.float32), num_envs, axis=0)


def timed_steps(step, steps: int, repeats: int, first: int) -> tuple[float, float]:
    """(control steps per second by wall clock, by this process's CPU time), best of ``repeats`` runs of ``steps``."""
    best_wall = best_cpu = 0.0
    k = first
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step(k)
            k += 1
        best_wall = max(best_wall, steps / (time.perf_counter() - wall))
        best_cpu = max(best_cpu, steps / (time.process_time() - cpu))
    return best_wall, best_cpu


def figures(num_envs: int, wall: float, cpu: float) -> dict:
    # Every env advances 1/60 s per control step: each env runs at steps/s / 60 times realtime (bench_twin.py's
    # "per world"); all envs together simulate steps/s * num_envs / 60 env-seconds per second.
    return {"num_envs": num_envs, "env_steps_per_s": round(wall, 2), "env_steps_per_s_cpu_time": round(cpu, 2),
            "realtime_factor_per_env": round(wall / CONTROL_HZ, 3),
            "realtime_factor_all_envs": round(wall * num_envs / CONTROL_HZ, 3)}


def make_env(num_envs: int, asset_dir: str | None, cameras: tuple = ()):
    """The PushT env (``gym.make`` of the registered id, as a user gets it) with ``num_envs`` envs."""
    import gymnasium as gym

    import real_is_sim.isaaclab.tasks  # noqa: F401  (registers the gym ids)
    from real_is_sim.isaaclab.tasks.pusht_env_cfg import PushTEnvCfg

    cfg = PushTEnvCfg(asset_dir=asset_dir, cameras=tuple(cameras))
    cfg.scene.num_envs = num_envs
    cfg.seed = 0
    env = gym.make("RealIsSim-PushT-Franka-v0", cfg=cfg).unwrapped
    assert env.num_envs == num_envs
    return env


def bench_isaaclab(num_envs: int, steps: int, repeats: int, cameras: tuple) -> dict:
    from isaaclab.sim import SimulationContext

    clock = time.perf_counter()
    env = make_env(num_envs, None, cameras)
    create = time.perf_counter() - clock
    try:
        q_start = env.task.robot.q_start

        def step(k: int) -> None:
            env.step(torch.from_numpy(arm_targets(q_start, k, num_envs)))

        clock = time.perf_counter()
        env.reset()
        step(0)
        first = time.perf_counter() - clock
        wall, cpu = timed_steps(step, steps, repeats, 1)
    finally:
        env.close()
        SimulationContext.clear_instance()
    return {**figures(num_envs, wall, cpu), "env_create_s": round(create, 2), "first_step_s": round(first, 2)}


def bench_twin(num_envs: int, steps: int, repeats: int) -> dict:
    from real_is_sim.twin import Twin
    from real_is_sim_tasks.pusht import load_pusht_cfg

    task = load_pusht_cfg()  # the env's default task: procedural block, 108 spheres
    clock = time.perf_counter()
    twin = Twin(task, num_envs)
    create = time.perf_counter() - clock

    def step(k: int) -> None:
        twin.step(arm_targets(task.robot.q_start, k, num_envs))

    clock = time.perf_counter()
    step(0)
    first = time.perf_counter() - clock
    wall, cpu = timed_steps(step, steps, repeats, 1)
    return {**figures(num_envs, wall, cpu), "env_create_s": round(create, 2), "first_step_s": round(first, 2)}


def first_step_child(asset_dir: str) -> None:
    """In a subprocess whose WARP_CACHE_PATH the parent set: import, create a 1-env env, reset + one step."""
    clock = time.perf_counter()
    import warp as wp

    quiet_warp()
    from isaaclab.sim import SimulationContext

    import real_is_sim.isaaclab.tasks.pusht_env  # noqa: F401
    imported = time.perf_counter() - clock
    clock = time.perf_counter()
    env = make_env(1, asset_dir)
    created = time.perf_counter() - clock
    clock = time.perf_counter()
    env.reset()
    env.step(torch.from_numpy(arm_targets(env.task.robot.q_start, 0, 1)))
    first = time.perf_counter() - clock
    env.close()
    SimulationContext.clear_instance()
    print(json.dumps({"import_s": round(imported, 2), "env_create_s": round(created, 2), "first_step_s": round(first, 2),
                      "total_s": round(imported + created + first, 2), "kernel_cache_dir": wp.config.kernel_cache_dir}))


def first_step_runs(torch_threads: int) -> dict:
    """Cold (empty kernel cache) and cached first step, each in its own process."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_isaaclab_") as tmp:
        cache = Path(tmp) / "warp"
        environment = {**os.environ, "WARP_CACHE_PATH": str(cache)}
        for run in ("cold", "cached"):
            clock = time.perf_counter()
            child = subprocess.run([sys.executable, __file__, "--torch-threads", str(torch_threads),
                                    "--first-step-child", str(Path(tmp) / "usd")], env=environment, capture_output=True,
                                   text=True)
            if child.returncode != 0:
                raise RuntimeError(f"the {run} first-step run failed:\n{child.stderr[-3000:]}")
            result = json.loads(child.stdout.strip().splitlines()[-1])
            used = Path(result.pop("kernel_cache_dir")).resolve()  # Warp adds its version: <cache>/1.17.0
            if not used.is_relative_to(cache.resolve()):
                raise RuntimeError(f"the {run} run used the kernel cache {used}, not the fresh {cache}")
            result["process_s"] = round(time.perf_counter() - clock, 2)
            result["kernel_cache_entries"] = len(list(used.iterdir()))
            results[run] = result
            print(f"first step, {run}: {result}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--steps", type=int, default=30, help="timed control steps per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="timings per env count; the best is reported")
    parser.add_argument("--no-first-step", action="store_true", help="skip the cold / cached first-step subprocesses")
    parser.add_argument("--cameras", nargs="*", default=[], help="Isaac Lab env cameras (PushTEnvCfg.cameras, 160x120) "
                        "in the steady-state runs: static, wrist")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch's CPU threads (the env's tensor code and the cameras' renderer; Warp runs the physics). "
                        "1 by default: on a loaded 2-core machine a 2-thread pool made the renderer ~30x slower")
    parser.add_argument("--first-step-child", metavar="ASSET_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    if args.first_step_child:
        first_step_child(args.first_step_child)
        return
    quiet_warp()
    load_start = os.getloadavg()[0]
    clock = time.perf_counter()
    result = {"timing": f"best of {args.repeats} x {args.steps} control steps (1/60 s each) of the whole env",
              "torch_threads": torch.get_num_threads(), "isaaclab_cameras": args.cameras}
    if not args.no_first_step:
        result["first_step"] = first_step_runs(args.torch_threads)
    benches = (("isaaclab", lambda n: bench_isaaclab(n, args.steps, args.repeats, tuple(args.cameras))),
               ("twin", lambda n: bench_twin(n, args.steps, args.repeats)))
    for name, bench in benches:
        result[name] = []
        for num_envs in args.envs:
            figures_n = bench(num_envs)
            result[name].append(figures_n)
            print(f"{name}, {num_envs} envs: {figures_n}", flush=True)
    result["machine"] = {"cpus": os.cpu_count(), "load_1min_start": round(load_start, 2),
                         "load_1min_end": round(os.getloadavg()[0], 2)}
    result["wall_s"] = round(time.perf_counter() - clock, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
