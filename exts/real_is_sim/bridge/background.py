"""A deploy session on a background thread, started and stopped from a UI (the Isaac Sim menu) or a script."""

from __future__ import annotations

import threading

from real_is_sim.bridge.config import BridgeCfg
from real_is_sim.bridge.session import DeploySession, SessionResult
from real_is_sim.errors import RealIsSimError


class BackgroundSession:
    """One session at a time. ``start(cfg)`` builds it (a bad config or a missing device raises here, in the caller)
    and runs it on a thread; ``stop()`` asks it to stop (robot holds, then stops; recording closed) and waits."""

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.result: SessionResult | None = None
        self.error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, cfg: BridgeCfg) -> None:
        if self.running:
            raise RealIsSimError("a deploy session is already running: stop it first")
        session = DeploySession(cfg)
        self._stop.clear()
        self.result, self.error = None, None
        self._thread = threading.Thread(target=self._run, args=(session,), name="real-is-sim-deploy", daemon=True)
        self._thread.start()

    def _run(self, session: DeploySession) -> None:
        try:
            self.result = session.run(stop=self._stop)
        except BaseException as exc:  # kept for the UI to show; the session already stopped cleanly
            self.error = exc

    def stop(self, timeout_s: float = 30.0) -> SessionResult | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.result
