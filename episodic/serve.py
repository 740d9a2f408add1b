"""``episodic serve``: a runner behind a shared-memory channel until SIGINT or SIGTERM."""
from __future__ import annotations

import signal
from pathlib import Path

from bridge.endpoint import Endpoint
from episodic.runner import Runner


def serve(task: str, robot: str = "wam", params: dict | None = None, channel: str = "default",
          log_path: str | Path | None = None, seed: int = 0, learner_timeout: float = 10.0,
          max_log_steps: int = 60_000, ready=None) -> None:
    """Serve episodes on ``channel`` until SIGINT/SIGTERM; the channel's objects are removed and
    the log closed on the way out (an unfinished episode is kept with Flag.INTERRUPTED).
    ``ready(endpoint)`` is called once the channel exists."""
    runner = Runner(task, robot, params=params, log=log_path, seed=seed, keep_episodes=False)
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
