"""The end-to-end demo (``episodic demo``): ball-in-a-cup learned from a demonstration that
misses, over the bridge.

``run_demo`` serves the ball_in_cup task in a subprocess (``episodic.tools.served.ServedRunner`` on
channel demo<pid>-<n>, 2 threads, its log at OUT), records the demonstration by kinesthetic
teaching in simulation (``episodic.learning.demonstration``: the ball comes down beside the cup), imitates
it with a DMP of j2, j4 and j6 (``episodic.learning.primitives.DMPPolicy``) and improves it with PoWER
(``episodic.learning.policy_search``), each iteration's rollouts and the current policy evaluated as one
batch (``Client.evaluate``), until 80 % of the last 20 rollouts caught the ball. It then stops the
runner, checks the log, renders the first catch (with the media extra) and removes the channel
whatever happens (error, Ctrl-C).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from episodic.tasks.ball_in_cup_swing import DEMO_TASK, SWING_JOINTS
from episodic.tools.served import ServedRunner, ServeError, fresh_channel

if TYPE_CHECKING:  # the learning side is imported when the demo runs
    from episodic.learning.policy_search import LearningCurve

# -- ball in a cup: the demo ---------------------------------------------------------------------
LEARNED_JOINTS = SWING_JOINTS  # the demo's DMP moves j2, j4, j6; the others hold the start posture
N_WEIGHTS = 10                 # DMP weights per joint (the IAS toolbox's baseline: 10 basis functions)
SAMPLES = 10                   # PoWER's rollouts per iteration (the IAS baseline's 10), one batch each
SIGMA = 0.03                   # rad, PoWER's initial exploration of each (scaled) weight
N_BEST = 10                    # PoWER's importance sampling: the best rollouts of all iterations so far
ITERATIONS = 10                # at most (about 2.5 min on 2 busy cores); the demo stops earlier once
                               # 80 % of the last 20 rollouts caught
QUICK = (2, 4)                 # --quick: iterations, samples per iteration
RELIABLE = (20, 0.8)           # window of rollouts, share of catches: "catches reliably"
SETTLE = 0.5                   # s the last posture is held after the DMP (whose last second is the
                               # demonstration's hold)


class DemoError(RuntimeError):
    """The demo's runner did not start, failed, did not stop cleanly, or wrote no log."""


def ball_in_cup_learner(demo, robot, seed: int = 0, samples: int = SAMPLES):
    """The demo's learner of a demonstration ``demo`` (episodic.learning.demonstration.Demonstration):
    a DMPPolicy of ``LEARNED_JOINTS`` imitating it, PoWER from there (adapting its exploration),
    and the episode of parameters theta (three segments, the catch posture held ``SETTLE`` s)."""
    from episodic.learning.policy_search import Power
    from episodic.learning.primitives import DMPPolicy

    policy, theta0 = DMPPolicy.imitate(demo.t, demo.q, LEARNED_JOINTS, N_WEIGHTS, robot.control_dt, demo.qd, demo.qdd)
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
    in a subprocess (2 threads, log at ``out``), record the demonstration (kinesthetic teaching
    in simulation, saved beside the log), imitate it with a DMP, run PoWER with each iteration's
    ``samples`` rollouts (and the policy) as one batch until 80 % of the last 20 rollouts caught
    or ``iterations`` ran, stop the runner, check the log, and render the first catch (with
    ``video`` and the media extra)."""
    from episodic.bridge import Client, ProtocolError, RunnerGone
    from episodic.interface.robot import load_robot
    from episodic.learning.demonstration import ball_in_cup_demonstration
    from episodic.learning.policy_search import Rollouts, learn
    from episodic.logs import read_metadata, read_summary

    t0 = time.perf_counter()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    robot = load_robot("wam")
    demo = ball_in_cup_demonstration(robot)
    demo_path = demo.save(out.with_name(out.stem + "_demonstration.h5"), overwrite=True)
    echo(f"demonstration: kinesthetic teaching in simulation, {demo.duration:.2f} s, saved to {demo_path}")
    policy, learner, episode = ball_in_cup_learner(demo, robot, seed, samples)
    echo(f"imitation: a DMP of j2, j4, j6 with {N_WEIGHTS} weights each ({learner.theta.size} parameters); "
         f"PoWER, {samples} rollouts and the policy per batch")
    channel = fresh_channel("demo")
    window, rate = RELIABLE
    try:
        with ServedRunner(channel, task=DEMO_TASK, log=out, seed=seed,
                          args=("--overwrite", "--threads", "2")) as runner:
            echo(f"runner started (pid {runner.proc.pid}), channel '{channel}', log {out}")
            try:
                with Client(channel, timeout=120) as client:
                    curve = learn(learner, Rollouts(episode, client.evaluate), iterations, echo=echo,
                                  stop=lambda c: c.reliable_after(window, rate) is not None)
            except (RunnerGone, ProtocolError, TimeoutError) as exc:
                raise runner.failed(exc) from None
            runner.stop(check=True)
    except ServeError as exc:
        raise DemoError(str(exc)) from None
    if not out.is_file():
        raise DemoError(f"the runner wrote no log at {out}")
    logged = int(read_metadata(out).get("n_episodes", 0))
    expected = _episodes_run(curve)
    if logged != expected:
        raise DemoError(f"the log {out} holds {logged} episodes, {expected} were run")
    rows, _ = read_summary(out)
    caught = np.flatnonzero(rows["success"])
    first = int(rows["number"][caught[0]]) if caught.size else None
    clip = _render_catch(out, first, echo) if video and first is not None else None
    return DemoResult(curve, out, logged, demo_path, first, clip, channel, time.perf_counter() - t0)


def _episodes_run(curve: LearningCurve) -> int:
    """Episodes a learning run sent: its sample rollouts, a policy evaluation per iteration after
    the start, and the final policy's."""
    return curve.rows[-1].rollouts + len(curve.rows)


def _render_catch(log: Path, number: int, echo: Callable[[str], None]) -> Path | None:
    """A video of episode ``number`` of ``log`` beside it, or None (with a note) when the media
    extra or an OpenGL backend is missing."""
    try:
        from episodic.tools.render import RenderError, render
    except ImportError:
        echo("a video of the first catch needs the media extra: pip install 'episodic[media]'")
        return None
    path = log.with_name(f"{log.stem}_first_catch.mp4")
    try:
        render(log, number, path)
    except (RenderError, ImportError) as exc:
        echo(f"no video of the first catch: {exc}")
        return None
    return path
