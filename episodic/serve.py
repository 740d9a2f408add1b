"""``episodic serve``: a runner behind a shared-memory channel until SIGINT or SIGTERM."""
from __future__ import annotations

import gc
import logging
import os
import signal
from pathlib import Path

from bridge.endpoint import Endpoint
from episodic.runner import Runner

log = logging.getLogger("episodic.serve")
REALTIME_PRIORITY = 50  # SCHED_FIFO priority of a realtime runner (1..99)


def _realtime_priority() -> None:
    """Best effort for a paced loop: FIFO scheduling (needs root or CAP_SYS_NICE) and no
    garbage-collector passes over the objects that exist at start-up."""
    gc.freeze()
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
    except (PermissionError, AttributeError, OSError) as exc:
        log.warning("running the realtime loop without real-time scheduling (%s); expect more jitter", exc)


def serve(task: str, robot: str = "wam", params: dict | None = None, channel: str = "default",
          log_path: str | Path | None = None, seed: int = 0, learner_timeout: float = 10.0,
          max_log_steps: int = 60_000, mode: str = "blocking", ready=None) -> None:
    """Serve episodes on ``channel`` until SIGINT/SIGTERM in ``mode`` ("blocking" or "realtime");
    the channel's objects are removed and the log closed on the way out (an unfinished episode
    is kept with Flag.INTERRUPTED).
    ``ready(endpoint)`` is called once the channel exists."""
    runner = Runner(task, robot, params=params, log=log_path, seed=seed, keep_episodes=False, mode=mode)
    if mode == "realtime":
        _realtime_priority()
    try:
        endpoint = Endpoint(runner, channel, learner_timeout=learner_timeout, max_log_steps=max_log_steps)
    except BaseException:
        runner.close()
        raise
    stopping = []
    previous = {sig: signal.signal(sig, lambda *_: stopping.append(True)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if ready is not None:
            ready(endpoint)
        endpoint.serve(lambda: bool(stopping))
    finally:
        endpoint.close()
        runner.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
