"""A runner behind a shared-memory channel until SIGINT, SIGTERM, SIGHUP or SIGQUIT (what
``episodic serve`` runs)."""
from __future__ import annotations

import gc
import logging
import signal
from collections.abc import Callable
from typing import Any

import posix_ipc

from episodic import native
from episodic.bridge.channel import ChannelError
from episodic.bridge.endpoint import BatchEvaluator, Endpoint
from episodic.runtime.runner import Runner
from episodic.runtime.scheduling import realtime_where_permitted

log = logging.getLogger("episodic.serve")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # each ends serving cleanly


def _realtime_priority(priority: int | None) -> None:
    """For a paced loop: no garbage-collector passes over the objects that exist at start-up, no
    automatic collection (a pass of the oldest generation took 50 ms, of the younger ones up to
    2 ms, wherever an allocation set them off: in a tick's work; the serving loop collects the
    young objects at ticks with room for it instead, episodic.bridge.endpoint.hold), and
    SCHED_FIFO with locked memory (episodic.runtime.scheduling): at ``priority``, or when None at
    REALTIME_PRIORITY as far as this process may (a warning when it may not)."""
    gc.freeze()
    gc.disable()
    realtime_where_permitted(priority, lambda why: log.warning(
        "running the realtime loop without real-time scheduling (%s); expect more jitter", why))


def serve(runner: Runner, channel: str = "default", learner_timeout: float = 10.0, max_log_steps: int = 60_000,
          ready: Callable[[Endpoint], None] | None = None, batch: BatchEvaluator | None = None,
          batch_sizes: tuple[int, int, int] | None = None, priority: int | None = None,
          transport: Callable[[Runner], Any] | None = None) -> None:
    """Serve ``runner``'s episodes on ``channel`` until a terminating signal (STOP_SIGNALS); then
    the channel's objects are removed and the runner closed (an unfinished episode is kept with
    Flag.INTERRUPTED; paced motion stops at the next tick, a compiled blocking run before its
    next control step, its command left unanswered). The handlers are installed before the
    channel is created, so a signal during start-up also removes whatever was created.
    ``ready(endpoint)`` is called once the channel exists (to hear of finished episodes, subscribe
    to the runner: ``Runner.subscribe``). ``batch`` evaluates
    the episodes of a batch command (None: batches are refused), ``batch_sizes`` are (max_batch,
    max_batch_commands, max_batch_values) of the channel's batch block (None: the defaults).
    A paced runner runs under SCHED_FIFO at ``priority`` (episodic.runtime.scheduling.SchedulingError
    when not permitted), or when None at REALTIME_PRIORITY if permitted. ``transport(runner)``, when
    given, serves instead of the channel (an object with ``serve(stop)`` and ``close()``, e.g.
    episodic.bridge.sl_shm.SLShm)."""
    stopping: list[int] = []

    def stop(sig: int, _frame) -> None:
        stopping.append(sig)
        runner.interrupt()

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    collecting = gc.isenabled()
    # a signal also ends a compiled run between two control steps (native.Stopped): Python's
    # handler runs only once a run returns, and a run can be long (a start in a scene that is
    # very slow to simulate)
    native.stop_on_signals(STOP_SIGNALS)
    try:
        if runner.paced:
            _realtime_priority(priority)
        try:
            endpoint = Endpoint(runner, channel, learner_timeout=learner_timeout, max_log_steps=max_log_steps,
                                batch=batch, batch_sizes=batch_sizes) if transport is None else transport(runner)
        except (OSError, posix_ipc.Error) as exc:  # e.g. /dev/shm full: a message, not a traceback
            runner.close()
            raise ChannelError(f"could not create channel '{channel}': {exc}") from None
        except BaseException:
            runner.close()
            raise
        try:
            if ready is not None and not stopping:
                ready(endpoint)
            endpoint.serve(lambda: bool(stopping))
        except native.Stopped as exc:  # the command in hand is left unanswered: the runner stops
            log.info("stopping: %s", exc)
        finally:
            endpoint.close()
            runner.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        native.clear_stop()
        if collecting:
            gc.enable()

