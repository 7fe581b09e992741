"""Where the pipelined loop runs its visual-force sensor: a worker thread, a worker process, or a fixed tick delay.

All take one update at a time (``submit`` when ``idle``) and hand back ``(job, reading)`` from ``collect`` once
it is ready; the loop applies the reading from then on. :class:`SensorWorker` runs the update in a thread beside
the 60 Hz tick (only Warp's kernels release the GIL, so it gets little of a second core: docs/realtime.md);
:class:`SensorProcess` runs it in a child process with its own copy of the sensor (a whole second core);
:class:`DelayedSensor` runs it inside the tick and makes it ready ``delay_ticks`` later, so a test can reproduce
the schedule exactly.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from typing import Any, Callable

import torch

from real_is_sim.errors import RealIsSimError


class CorrectionError(RealIsSimError):
    """The visual-force sensor failed or stopped answering in the pipelined loop; the cause is chained."""


class SensorWorker:
    """One sensor update at a time in a daemon thread. A failure in the thread is raised in the loop by
    :meth:`collect`; an update running longer than ``timeout_s`` is raised there too (never a silent hang)."""

    def __init__(self, update: Callable[[Any], Any], timeout_s: float):
        self._update = update
        self.timeout_s = timeout_s
        self._jobs: queue.Queue = queue.Queue()
        self._results: queue.Queue = queue.Queue()
        self._in_flight = None
        self._submitted_at = 0.0
        self._thread = threading.Thread(target=self._serve, name="visual-force-sensor", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                result = self._update(job)
            except BaseException as exc:  # handed to the loop's thread, raised there
                result = exc
            self._results.put((job, result))

    def idle(self) -> bool:
        return self._in_flight is None

    def submit(self, job) -> None:
        if not self._thread.is_alive():
            raise CorrectionError("the visual-force sensor's worker thread is closed")
        if self._in_flight is not None:
            raise CorrectionError("the visual-force sensor is still busy with the previous update")
        self._in_flight, self._submitted_at = job, time.perf_counter()
        self._jobs.put(job)

    def collect(self, tick: int, wait: bool = False):
        """``(job, reading)`` of the finished update, or None while it runs (``wait``: block until it is done)."""
        if self._in_flight is None:
            return None
        timeout = max(0.0, self._submitted_at + self.timeout_s - time.perf_counter())
        try:
            job, result = self._results.get(block=wait, timeout=timeout if wait else None)
        except queue.Empty:
            if time.perf_counter() - self._submitted_at >= self.timeout_s:
                raise CorrectionError(f"the visual-force sensor has not returned for {self.timeout_s} s "
                                      f"(loop.sensor_timeout_s)") from None
            return None
        self._in_flight = None
        if isinstance(result, BaseException):
            raise CorrectionError(f"the visual-force sensor failed in its worker thread: "
                                  f"{type(result).__name__}: {result}") from result
        return job, result

    def close(self) -> None:
        """Stop the thread after the update in flight (waits at most ``timeout_s``). Safe to call twice."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(self.timeout_s)
            if self._thread.is_alive():
                raise CorrectionError(f"the visual-force sensor's worker did not stop within {self.timeout_s} s")
        self._in_flight = None


class SensorProcess:
    """One sensor update at a time in a child process that owns a copy of ``sensor`` (and of ``occluders``, the
    robot's appearance, posed there at each job's joints). The job (frames, poses, joints) goes down a pipe and
    the reading comes back. The sensor's health counters live in the child: :meth:`reset_health` resets them there.
    A failure in the child is raised by :meth:`collect` as one :class:`CorrectionError`, as is an update running
    longer than ``timeout_s`` or a child that died."""

    START_TIMEOUT_S = 120.0  # the child imports torch and Warp and unpickles the sensor before it answers

    def __init__(self, sensor, occluders: Callable[[Any], Any] | None, timeout_s: float):
        self.timeout_s = timeout_s
        context = multiprocessing.get_context("spawn")  # fork would copy Warp's and torch's thread state mid-use
        self._conn, child_conn = context.Pipe()
        # the child starts with torch's default thread count: it gets the loop's, so the two do not oversubscribe
        self._process = context.Process(target=_serve_sensor, args=(child_conn, sensor, occluders, torch.get_num_threads()),
                                        name="visual-force-sensor", daemon=True)
        self._process.start()
        child_conn.close()
        self._in_flight = None
        self._submitted_at = 0.0
        if not self._conn.poll(self.START_TIMEOUT_S):
            self._process.kill()
            raise CorrectionError(f"the visual-force sensor's worker process did not start within {self.START_TIMEOUT_S} s")
        self._receive()  # "ready", or the error that stopped the child from starting

    def idle(self) -> bool:
        return self._in_flight is None

    def submit(self, job) -> None:
        if not self._process.is_alive():
            raise CorrectionError(f"the visual-force sensor's worker process is closed (exit code {self._process.exitcode})")
        if self._in_flight is not None:
            raise CorrectionError("the visual-force sensor is still busy with the previous update")
        self._in_flight, self._submitted_at = job, time.perf_counter()
        self._conn.send(("update", job))

    def collect(self, tick: int, wait: bool = False):
        """``(job, reading)`` of the finished update, or None while it runs (``wait``: block until it is done)."""
        if self._in_flight is None:
            return None
        timeout = max(0.0, self._submitted_at + self.timeout_s - time.perf_counter())
        if not self._conn.poll(timeout if wait else 0.0):
            if time.perf_counter() - self._submitted_at >= self.timeout_s:
                raise CorrectionError(f"the visual-force sensor has not returned for {self.timeout_s} s "
                                      f"(loop.sensor_timeout_s)")
            return None
        job, self._in_flight = self._in_flight, None
        return job, self._receive()

    def reset_health(self) -> None:
        """Forget past residuals in the child's sensor (after the twin was re-initialised); waits for its answer."""
        self.collect(0, wait=True)  # an update in flight answers first
        self._conn.send(("reset_health", None))
        self._receive()

    def close(self) -> None:
        """Stop the child after the update in flight (waits at most ``timeout_s``). Safe to call twice."""
        if self._process.is_alive():
            try:
                self._conn.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass
            self._process.join(self.timeout_s)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
                raise CorrectionError(f"the visual-force sensor's worker process did not stop within {self.timeout_s} s")
        self._conn.close()
        self._in_flight = None

    def _receive(self):
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(1.0)
            raise CorrectionError(f"the visual-force sensor's worker process died "
                                  f"(exit code {self._process.exitcode})") from None
        if kind == "error":
            raise CorrectionError(f"the visual-force sensor failed in its worker process: {payload}")
        return payload


def _serve_sensor(conn, sensor, occluders, torch_threads: int) -> None:
    """The child process of :class:`SensorProcess`: answers each request with ``(kind, payload)``."""
    torch.set_num_threads(torch_threads)
    try:
        sensor.warm_up()
    except Exception as exc:  # the loop's process raises it as the reason the worker did not start
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            request, job = conn.recv()
        except EOFError:  # the loop's process went away
            return
        if request == "stop":
            return
        try:
            if request == "reset_health":
                sensor.reset_health()
                answer = None
            else:
                robot = occluders(job.robot_q) if occluders is not None and job.robot_q is not None else None
                answer = sensor.update(job.poses_at_exposure, job.images, robot, job.current_poses)
            conn.send(("result", answer))
        except Exception as exc:  # handed to the loop's process (exceptions need not pickle: sent as text)
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class DelayedSensor:
    """The worker's schedule without a thread: the update runs when submitted (its errors raise there) and its
    reading is ready ``delay_ticks`` ticks later (0: in the same tick, which is the serial loop)."""

    def __init__(self, update: Callable[[Any], Any], delay_ticks: int):
        self._update = update
        self.delay_ticks = delay_ticks
        self._pending = None

    def idle(self) -> bool:
        return self._pending is None

    def submit(self, job) -> None:
        if self._pending is not None:
            raise CorrectionError("the visual-force sensor is still busy with the previous update")
        self._pending = (job, self._update(job))

    def collect(self, tick: int, wait: bool = False):
        if self._pending is None or (tick < self._pending[0].tick + self.delay_ticks and not wait):
            return None
        ready, self._pending = self._pending, None
        return ready

    def close(self) -> None:
        self._pending = None
