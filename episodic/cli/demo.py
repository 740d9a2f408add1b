"""The end-to-end demo (``episodic demo``): ball-in-a-cup learned from a demonstration that
misses, over the bridge.

``run_demo`` starts serving the ball_in_cup task in a subprocess (``episodic.tools.served.ServedRunner``
on channel demo<pid>-<n>, ``batch_threads`` threads, its log at OUT) and, while the runner starts, records the
demonstration by kinesthetic teaching in simulation (``episodic.learning.demonstration``: the ball
comes down beside the cup). It imitates it with a DMP of j2, j4 and j6
(``episodic.learning.primitives.DMPPolicy``) and improves it with PoWER
(``episodic.learning.policy_search``), each iteration's rollouts and the current policy evaluated as
one batch (``Client.evaluate``), until 80 % of the last 20 rollouts caught the ball. As soon as the
runner has logged the first catch, a thread renders it (with the media extra) while the learning
goes on. At the end it stops the runner, checks the log, waits for the video, and removes the
channel whatever happens (error, Ctrl-C).
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from episodic.tools.served import ServedRunner, ServeError, fresh_channel

if TYPE_CHECKING:  # the learning side is imported once the runner is starting
    from episodic.bridge import Client
    from episodic.interface.commands import Command
    from episodic.interface.vocabulary import EpisodeResult
    from episodic.learning.policy_search import LearningCurve

# -- ball in a cup: the demo ---------------------------------------------------------------------
DEMO_TASK = "ball_in_cup"      # the task served, named here (not imported with episodic.tasks) so that
                               # the runner starts first
N_WEIGHTS = 10                 # DMP weights per joint (the IAS toolbox's baseline: 10 basis functions)
SAMPLES = 10                   # PoWER's rollouts per iteration (the IAS baseline's 10), one batch each
SIGMA = 0.03                   # rad, PoWER's initial exploration of each (scaled) weight
N_BEST = 10                    # PoWER's importance sampling: the best rollouts of all iterations so far
ITERATIONS = 10                # at most; the demo stops earlier once 80 % of the last 20 rollouts caught
QUICK = (2, 4)                 # --quick: iterations, samples per iteration
RELIABLE = (20, 0.8)           # window of rollouts, share of catches: "catches reliably"
SETTLE = 0.5                   # s the last posture is held after the DMP (whose last second is the
                               # demonstration's hold)
LOG_WAIT = 60.0                # s the video waits at most for the runner to have logged the first catch
VIDEO_FPS = 30.0               # frames per second of motion in the video of the first catch
VIDEO_SIZE = (640, 480)        # its pictures, pixels, drawn without shadows, reflections or smoothed
                               # edges: 16 instead of 145 ms per picture on a CPU renderer (see
                               # episodic.tools.render.EpisodeRenderer); the shadows show nothing of the
                               # catch (only the arm's shadow on the floor), the floor's reflections
                               # change no pixel


class DemoError(RuntimeError):
    """The demo's runner did not start, failed, did not stop cleanly, or wrote no log."""


def ball_in_cup_learner(demo, robot, seed: int = 0, samples: int = SAMPLES):
    """The demo's learner of a demonstration ``demo`` (episodic.learning.demonstration.Demonstration):
    a DMPPolicy of the swing's joints (j2, j4, j6: ``episodic.tasks.ball_in_cup_swing.SWING_JOINTS``;
    the others hold the start posture) imitating it, PoWER from there (adapting its exploration),
    and the episode of parameters theta (three segments, the catch posture held ``SETTLE`` s)."""
    from episodic.learning.policy_search import Power
    from episodic.learning.primitives import DMPPolicy
    from episodic.tasks.ball_in_cup_swing import SWING_JOINTS

    policy, theta0 = DMPPolicy.imitate(demo.t, demo.q, SWING_JOINTS, N_WEIGHTS, robot.control_dt, demo.qd, demo.qdd)
    learner = Power(theta0, SIGMA, n_samples=samples, n_best=N_BEST, seed=seed, adapt_sigma=True)

    def episode(theta: np.ndarray, episode_id: int) -> list:
        return policy.trajectory(theta).episode(episode_id, segments=3, wait=SETTLE)

    return policy, learner, episode


@dataclass
class DemoResult:
    """What ``run_demo`` did: the learning curve, the log and how many episodes it holds, the
    demonstration's file, the first caught episode's number in the log (None: none), the video
    of it (None: not made), the channel, the wall-clock time in s."""

    curve: LearningCurve
    log: Path
    logged_episodes: int
    demonstration: Path
    first_catch: int | None
    video: Path | None
    channel: str
    seconds: float


def run_demo(out: str | Path = "runs/demo.h5", seed: int = 0, iterations: int = ITERATIONS, samples: int = SAMPLES,
             video: bool = True, echo: Callable[[str], None] = print) -> DemoResult:
    """Ball-in-a-cup learned from a demonstration that misses, over the bridge: serve the task
    in a subprocess (``batch_threads`` threads, log at ``out``), record the demonstration meanwhile (kinesthetic
    teaching in simulation, saved beside the log), imitate it with a DMP, run PoWER with each
    iteration's ``samples`` rollouts (and the policy) as one batch until 80 % of the last 20
    rollouts caught or ``iterations`` ran, render the first catch as soon as it is logged (with
    ``video`` and the media extra), stop the runner and check the log."""
    t0 = time.perf_counter()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    channel = fresh_channel("demo")
    clip: _Video | None = None
    threads = ("--threads", str(batch_threads(samples + 1)))  # a batch: the samples and the policy
    try:
        with contextlib.closing(ServedRunner(channel, task=DEMO_TASK, log=out, seed=seed,
                                             args=("--overwrite", *threads))) as runner:
            clip = _Video(out, echo) if video else None  # probing OpenGL while the runner starts
            demo_path, learner, episode = _prepare(out, seed, samples, echo)  # likewise
            runner.wait_ready()
            echo(f"runner started (pid {runner.proc.pid}), channel '{channel}', log {out}")
            curve = _learn(runner, learner, episode, iterations, clip, echo)
            runner.stop(check=True)
    except ServeError as exc:
        raise DemoError(str(exc)) from None
    logged, first = _check_log(out, curve)
    made = clip.wait(first) if clip is not None and first is not None else None
    return DemoResult(curve, out, logged, demo_path, first, made, channel, time.perf_counter() - t0)


def batch_threads(batch: int) -> int:
    """Threads for batches of ``batch`` episodes: one more than the cores this process may run on,
    at most one per episode. With one thread per core a core idles at a batch's end whenever the
    episodes do not divide evenly (11 on 2 cores: six rounds); with one more, the cores share the
    threads to the end (11 on 2 cores: the time of 5.5 episodes). The results are the same on any
    number of threads (``episodic.tools.batch``)."""
    return max(1, min(len(os.sched_getaffinity(0)) + 1, batch))


def _prepare(out: Path, seed: int, samples: int, echo: Callable[[str], None]):
    """The demonstration, recorded and saved beside the log ``out``, and the learner imitating
    it (``ball_in_cup_learner``): the demonstration's path, the learner and its episode."""
    from episodic.interface.robot import load_robot
    from episodic.learning.demonstration import ball_in_cup_demonstration

    robot = load_robot("wam")
    demo = ball_in_cup_demonstration(robot)
    demo_path = demo.save(out.with_name(out.stem + "_demonstration.h5"), overwrite=True)
    echo(f"demonstration: kinesthetic teaching in simulation, {demo.duration:.2f} s, saved to {demo_path}")
    _, learner, episode = ball_in_cup_learner(demo, robot, seed, samples)
    echo(f"imitation: a DMP of j2, j4, j6 with {N_WEIGHTS} weights each ({learner.theta.size} parameters); "
         f"PoWER, {samples} rollouts and the policy per batch")
    return demo_path, learner, episode


def _learn(runner: ServedRunner, learner, episode, iterations: int, video: _Video | None,
           echo: Callable[[str], None]) -> LearningCurve:
    """PoWER over the bridge to ``runner`` until the stopping rule holds or ``iterations`` ran;
    ``video`` starts rendering the first catch as soon as a batch returns it."""
    from episodic.bridge import Client, ProtocolError, RunnerGone
    from episodic.learning.policy_search import Rollouts, learn

    window, rate = RELIABLE
    try:
        with Client(runner.channel, timeout=120) as client:
            batches = _Batches(client, None if video is None else video.start)
            return learn(learner, Rollouts(episode, batches.evaluate), iterations, echo=echo,
                         stop=lambda c: c.reliable_after(window, rate) is not None)
    except (RunnerGone, ProtocolError, TimeoutError) as exc:
        raise runner.failed(exc) from None


@dataclass
class _Batches:
    """``client.evaluate`` that calls ``on_catch(number)`` once, with the log's number of the
    first caught episode: a served runner's log numbers its episodes from 0 in the order they
    were sent, a batch's in its order."""

    client: Client
    on_catch: Callable[[int], None] | None
    sent: int = 0
    first_catch: int | None = None

    def evaluate(self, episodes: Sequence[Sequence[Command]]) -> list[EpisodeResult]:
        results = self.client.evaluate(episodes)
        caught = [k for k, r in enumerate(results) if r.success]
        if self.first_catch is None and caught:
            self.first_catch = self.sent + caught[0]
            if self.on_catch is not None:
                self.on_catch(self.first_catch)
        self.sent += len(episodes)
        return results


def _check_log(out: Path, curve: LearningCurve) -> tuple[int, int | None]:
    """The episodes in the log ``out`` and the number of its first caught episode (None: none);
    DemoError when there is no log or it holds another number of episodes than were run."""
    from episodic.logs import read_metadata, read_summary

    if not out.is_file():
        raise DemoError(f"the runner wrote no log at {out}")
    logged = int(read_metadata(out).get("n_episodes", 0))
    expected = _episodes_run(curve)
    if logged != expected:
        raise DemoError(f"the log {out} holds {logged} episodes, {expected} were run")
    rows, _ = read_summary(out)
    caught = np.flatnonzero(rows["success"])
    return logged, int(rows["number"][caught[0]]) if caught.size else None


def _episodes_run(curve: LearningCurve) -> int:
    """Episodes a learning run sent: its sample rollouts, a policy evaluation per iteration after
    the start, and the final policy's."""
    return curve.rows[-1].rollouts + len(curve.rows)


class _Video:
    """The video of the first catch, ``<log stem>_first_catch.mp4`` beside the log: rendered on a
    thread of its own (a daemon: an error or Ctrl-C in the demo does not wait for it) once the
    runner has logged the episode, ``VIDEO_FPS`` frames per second of ``VIDEO_SIZE`` pixels, without
    shadows, reflections or smoothed edges.

    The headless OpenGL backend is probed (a subprocess: ``episodic.tools.render.gl_backend``,
    0.75 CPU s) as soon as the runner is starting, on the core the runner's start-up leaves while
    the demonstration is recorded, not later beside the learning. The rendering itself runs at the
    learning's priority: it takes what the learning leaves of the cores (the batches' ends, while
    the runner writes their episodes to its log) and a share of the rest; at the lowest priority
    it would wait for the end of the learning on a busy machine and then run on one core."""

    def __init__(self, log: Path, echo: Callable[[str], None]):
        self.log, self.echo = log, echo
        self.path = log.with_name(f"{log.stem}_first_catch.mp4")
        self.number: int | None = None
        self._thread: threading.Thread | None = None
        self._note = ""  # why there is no video
        self._failure: BaseException | None = None  # what else went wrong, raised by wait
        from episodic.tools.render import gl_backend  # imported here: a module imported on two threads at once
                                                      # can be seen half made by one of them
        self._backend = threading.Thread(target=self._guard, args=(gl_backend,), name="episodic-demo-gl", daemon=True)
        self._backend.start()

    def start(self, number: int) -> None:
        """Render episode ``number`` of the log as soon as it is there."""
        self.number = number
        self._thread = threading.Thread(target=self._guard, args=(self._render, number), name="episodic-demo-video",
                                        daemon=True)
        self._thread.start()

    def _render(self, number: int) -> None:
        from episodic.tools.render import render

        self._backend.join()
        if self._note or self._failure is not None:
            return
        _wait_logged(self.log, number, LOG_WAIT)
        render(self.log, number, self.path, fps=VIDEO_FPS, size=VIDEO_SIZE, shadows=False, reflections=False,
               antialiasing=False)

    def _guard(self, work: Callable[..., object], *args) -> None:
        """Run ``work(*args)`` on this thread: why it could not make the video as a note (RenderError
        says which extra or packages to install), anything else kept for ``wait`` to raise."""
        from episodic.tools.render import RenderError

        try:
            work(*args)
        except (RenderError, ImportError, TimeoutError) as exc:
            self._note = self._note or f"no video of the first catch: {exc}"
        except BaseException as exc:  # noqa: BLE001 - handed to the demo's thread by wait
            self._failure = exc

    def wait(self, first: int) -> Path | None:
        """The video of episode ``first`` (the log's first catch) once rendered; None with a note
        when it could not be made."""
        if self._thread is None or self.number != first:
            raise DemoError(f"the log's first catch is episode {first}, the learner saw it as episode {self.number}")
        self._thread.join()
        if self._failure is not None:
            raise self._failure
        if self._note:
            self.echo(self._note)
            return None
        return self.path


def _wait_logged(log: Path, number: int, timeout: float) -> None:
    """Wait until the log holds episode ``number``, at most ``timeout`` s (TimeoutError)."""
    from episodic.logs import read_metadata

    deadline = time.monotonic() + timeout
    while int(read_metadata(log).get("n_episodes", 0)) <= number:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the runner had not logged episode {number} of {log} after {timeout:g} s")
        time.sleep(0.05)
