"""PoWER for ball-in-a-cup over the bridge: learn a catch from a swing that misses.

Policy search as in Kober & Peters ("Policy search for motor primitives in robotics", NIPS
2008 / Machine Learning 2011), run against ``episodic serve --task ball_in_cup`` through the
shared-memory client, one blocking episode per rollout.

Policy. The swing of ``episodic.demo``: a cubic spline through 5 knots of j2, j4, j6 one
``step`` s apart (``Swing``; ``swing_commands`` turns it into a start command and three
trajectory segments). The parameters theta (16,) are the 5 x 3 knot matrix row by row
(rad) and the step (s).

Start: a swing that misses. ``REFERENCE_SWING`` (which catches) with the elbow j4 bent
``START_OFFSET`` = 0.05 rad (3 degrees) further at every knot. The ball still flies up (12
cm above the rim) but falls past the cup: its centre crosses the rim plane 0.20 m from the
cup's axis, 16 cm outside the rim, for a return of 0.433 (from a fresh runner; offsets of
0.04-0.05 rad miss the same way, 0.06-0.08 rad no longer lift the ball above the rim, 0.03
catches). Like the imitated motion of Kober & Peters, it misses by centimetres. (On the first
version of the task, a tendon string and a cup that hardly bounced, the offset was 0.07 rad,
crossing 0.20 m from the axis, return 0.449.)

Reward of a rollout: the task's episode return, used as it is: exp(-20 radial^2) for each
downward crossing of the rim plane (0.45 at 0.2 m from the axis, 0.05 at 0.39 m, 0.92 at
6.5 cm) plus 3 for a catch. It is never negative, graded with the distance from the axis,
and a catch (about 4 to 5.4) outweighs any miss (< 2.3), so no transformation is needed. A rollout
that does not end with flag OK (e.g. SAFETY_ABORT: a sample that is too fast for the joint
velocity limits) gets weight 0.

PoWER (the episodic form with importance sampling, one rollout per iteration as on the real
robot):

    iteration 0:  roll out theta_0 (the start) once
    iteration n:  theta_n = theta + eps_n,   eps_n ~ N(0, diag(sigma^2))   (per parameter)
                  roll out theta_n, R_n = its return
                  B = the TOP_K rollouts with the highest returns of iterations 0..n
                  theta <- theta + sum_B R_i (theta_i - theta) / sum_B R_i

sigma = ``SIGMA_KNOT`` = 0.05 rad for each knot and ``SIGMA_STEP`` = 0.005 s for the step,
fixed; ``TOP_K`` = 5. It stops at the first catch or after ``--iterations`` (default 100).
The exploration comes from ``numpy.random.default_rng(seed)`` alone and a blocking runner's
results depend only on the commands it received, so with a fresh runner (what the script
starts unless given ``--channel``) a seed gives the same run bit for bit.

Measured (fresh runner; iterations to the first catch = exploratory rollouts after the
start, so the episodes run are one more; a run without a catch in 100 counts as more than 100
in the median), on the present task (chain string, cup restitution 0.6, 0.5 ms physics):

    start                        learner                         seeds  median  max   caught in 100
    elbow +0.05 (the default)    PoWER                            0-39     3      11     40 / 40
    elbow +0.05                  exploration only (*)             0-9      4      10     10 / 10
    elbow +0.15 (far miss)       PoWER                            0-9     48.5    80      8 / 10
    elbow +0.15                  exploration only (*)             0-9    > 100     -      0 / 10

    (*) the same samples around the frozen start (top_k = 0, no update): random search.

On the first version of the task (tendon string, a cup that hardly bounced, 2 ms physics, seeds
0-39) PoWER needed a median of 3 (max 16) from its near miss and 19 (max 78) from the far one,
and exploration alone 3.5 (max 25) and more than 100 (18 / 40 caught).

So from a near miss, as in Kober & Peters, the first catch comes after a handful of rollouts
(their real robot needed about 75 iterations; a simulator, 16 parameters instead of 7 x 31
and no sensor noise make it much easier), and random exploration around the start finds it
about as quickly: the catch lies within the exploration's reach. From a far miss
(``--start-offset 0.15``: the ball barely reaches the rim's height and falls 0.38 m from the
axis, return 0.052) PoWER's reward-weighted averaging moves theta to a catch in 8 of 10
seeds, after about 50 rollouts (the bouncing cup makes that harder than on the first version),
while random exploration around the start catches in none of 10 seeds within 100. Now and
then a sample is stopped by the joint velocity safety check (SAFETY_ABORT, weight 0). A rollout
takes about 0.8 s on one core (the chain string and the 0.5 ms physics; the tendon string is
about 4 times faster).

    python examples/power_ball_in_cup.py [--channel NAME] [--iterations 100] [--seed 0]
                                         [--start-offset 0.05] [--log RUN.h5]

Without ``--channel`` it serves ball_in_cup in a subprocess (``episodic.served.ServedRunner``
on channel power<pid>-0, as ``episodic demo`` does; its log goes to ``--log`` or a temporary
file) and removes the channel's shared memory on exit, also after an error, Ctrl-C or SIGTERM.
With ``--channel`` it attaches to a running ``episodic serve --task ball_in_cup --channel NAME``.
"""
from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from episodic.demo import (DEMO_TASK, ELBOW, REFERENCE_SWING, Swing, bent_swing, params_swing, run_swing,
                           swing_commands, swing_params)
from episodic.served import ServedRunner, ServeError, fresh_channel

# -- the policy: the swing's knots and step as one parameter vector -----------------------------
N_KNOTS, N_JOINTS = REFERENCE_SWING.knots.shape  # 5 knots of j2, j4, j6
N_PARAMS = N_KNOTS * N_JOINTS + 1                 # the 15 knots (row by row), then the step

START_OFFSET = 0.05    # rad added to every j4 knot of the reference swing: the ball misses
SIGMA_KNOT = 0.05      # rad, exploration of each knot
SIGMA_STEP = 0.005     # s, exploration of the step
TOP_K = 5              # rollouts (best so far, of all iterations) in each update
ITERATIONS = 100       # default budget of exploratory rollouts


def start_swing(offset: float = START_OFFSET) -> Swing:
    """The reference swing with every elbow (j4) knot ``offset`` rad further: with the
    default 0.05 rad the ball falls 0.20 m from the cup's axis (return 0.433)."""
    return bent_swing(offset, ELBOW)


def exploration_sigma(sigma_knot: float = SIGMA_KNOT, sigma_step: float = SIGMA_STEP) -> np.ndarray:
    """Standard deviation (16,) of the exploration of each parameter."""
    return np.append(np.full(N_KNOTS * N_JOINTS, float(sigma_knot)), float(sigma_step))


# -- the learner --------------------------------------------------------------------------------
@dataclass
class Rollout:
    """One episode: iteration 0 is the start swing, n >= 1 the n-th exploratory sample."""

    iteration: int
    theta: np.ndarray
    episode_return: float
    caught: bool
    flag: str
    weight: float  # what PoWER weights it with: the return, or 0 when the episode failed

    @property
    def swing(self) -> Swing:
        return params_swing(self.theta)


@dataclass
class PowerResult:
    rollouts: list[Rollout] = field(default_factory=list)
    theta: np.ndarray | None = None  # the policy mean after the last update

    @property
    def first_catch(self) -> Rollout | None:
        """The first rollout that caught the ball, or None."""
        return next((r for r in self.rollouts if r.caught), None)

    @property
    def best(self) -> Rollout:
        return max(self.rollouts, key=lambda r: r.episode_return)


def rollout_weight(episode_return: float, flag: str) -> float:
    """PoWER's weight of a rollout: its return (never negative for this task), 0 if it failed."""
    return max(float(episode_return), 0.0) if flag == "OK" else 0.0


def power(send: Callable, robot, iterations: int = ITERATIONS, seed: int = 0, start: Swing | None = None,
          sigma: np.ndarray | None = None, top_k: int = TOP_K, stop_at_catch: bool = True,
          echo: Callable[[str], None] | None = print, first_id: int = 1) -> PowerResult:
    """Run PoWER from ``start`` (default ``start_swing()``) for up to ``iterations``
    exploratory rollouts after the start's own rollout, each one episode sent through
    ``send`` (a bridge Client's ``send`` or an in-process Runner's ``handle``) with episode
    ids ``first_id``, ``first_id + 1``, ...; stop at the first catch if ``stop_at_catch``.
    ``robot``: an episodic.robot.Robot (the runner's, e.g. ``load_robot("wam")``).
    ``sigma`` (16,): exploration per parameter (default ``exploration_sigma()``).
    ``echo`` gets one line per iteration (None: quiet)."""
    rng = np.random.default_rng(seed)
    theta = swing_params(start_swing() if start is None else start)
    sigma = exploration_sigma() if sigma is None else np.asarray(sigma, float)
    if sigma.shape != theta.shape:
        raise ValueError(f"sigma must have {theta.size} values, got {sigma.shape}")
    result = PowerResult(theta=theta.copy())
    best = -np.inf

    def rollout(iteration: int, sample: np.ndarray) -> Rollout:
        nonlocal best
        row = run_swing(send, swing_commands(robot, params_swing(sample), first_id + iteration))
        r = Rollout(iteration, sample, row.episode_return, row.caught, row.flag,
                    rollout_weight(row.episode_return, row.flag))
        result.rollouts.append(r)
        best = max(best, r.episode_return)
        if echo is not None:
            note = "  (start)" if iteration == 0 else ""
            if r.flag != "OK":
                note += f"  {r.flag}: {row.message}"
            echo(f"{iteration:>9} {r.episode_return:>8.3f} {best:>8.3f} {'yes' if r.caught else 'no':>6}{note}")
        return r

    if echo is not None:
        echo(f"{'iteration':>9} {'return':>8} {'best':>8} {'caught':>6}")
    if rollout(0, theta.copy()).caught and stop_at_catch:
        return result
    for iteration in range(1, iterations + 1):
        r = rollout(iteration, theta + sigma * rng.standard_normal(theta.size))
        if r.caught and stop_at_catch:
            break
        # importance sampling: the best top_k rollouts of all iterations so far, weighted by return
        best_k = sorted(result.rollouts, key=lambda x: x.weight, reverse=True)[:top_k]
        w = np.array([x.weight for x in best_k])
        if w.sum() > 0:
            eps = np.array([x.theta for x in best_k]) - theta
            theta = theta + w @ eps / w.sum()
        result.theta = theta.copy()
    return result


# -- against a runner -----------------------------------------------------------------------------
def summary(result: PowerResult) -> str:
    catch = result.first_catch
    if catch is None:
        return (f"no catch in {len(result.rollouts) - 1} iterations "
                f"(best return {result.best.episode_return:.3f})")
    return (f"first catch at iteration {catch.iteration} ({len(result.rollouts)} episodes with the start), "
            f"return {catch.episode_return:.3f}")


def run_on_channel(channel: str, iterations: int = ITERATIONS, seed: int = 0, start: Swing | None = None,
                   echo: Callable[[str], None] | None = print, timeout: float = 60.0, **kwargs) -> PowerResult:
    """PoWER against the ball_in_cup runner serving ``channel``."""
    from episodic.bridge import Client
    from episodic.robot import load_robot

    robot = load_robot("wam")
    with Client(channel, timeout=timeout) as client:
        if tuple(client.sizes.state_names) != tuple(_task_columns()):
            raise ServeError(f"the runner on channel '{channel}' does not serve ball_in_cup "
                            f"(state columns {list(client.sizes.state_names)})")
        return power(client.send, robot, iterations, seed, start, echo=echo, **kwargs)


def run_served(iterations: int = ITERATIONS, seed: int = 0, start: Swing | None = None,
               log: str | Path | None = None, channel: str | None = None,
               echo: Callable[[str], None] | None = print, **kwargs) -> PowerResult:
    """Serve ball_in_cup in a subprocess (runner seed ``seed``, blocking mode) on ``channel``
    (default: a fresh ``power<pid>-<n>``), run PoWER against it, stop it and remove the
    channel whatever happens. The runner's log goes to ``log`` (default: a temporary file)."""
    from episodic.bridge import ProtocolError, RunnerGone

    channel = channel or fresh_channel("power")
    with tempfile.TemporaryDirectory(prefix="power-") as tmp:
        path = Path(log) if log is not None else Path(tmp) / "power.h5"
        path.parent.mkdir(parents=True, exist_ok=True)
        with ServedRunner(channel, task=DEMO_TASK, log=path, seed=seed, args=("--overwrite",)) as runner:
            if echo is not None:
                echo(f"runner started (pid {runner.proc.pid}), channel '{channel}'"
                     + (f", log {log}" if log is not None else ""))
            try:
                result = run_on_channel(channel, iterations, seed, start, echo=echo, **kwargs)
            except (RunnerGone, ProtocolError, TimeoutError, FileNotFoundError) as exc:
                raise runner.failed(exc) from None
            runner.stop(check=True)
    return result


def _task_columns() -> tuple[str, ...]:
    from episodic.tasks.ball_in_cup import BallInCup

    return BallInCup.columns


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt  # unwinds the with blocks: the runner is stopped, the channel removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PoWER on ball-in-a-cup from a swing that misses.")
    parser.add_argument("--channel", default=None,
                        help="attach to the runner serving this channel (default: start one)")
    parser.add_argument("--iterations", type=int, default=ITERATIONS,
                        help="budget of exploratory rollouts, one per iteration (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the exploration (and of the runner started)")
    parser.add_argument("--start-offset", type=float, default=START_OFFSET,
                        help="rad added to every elbow knot of the reference swing (default %(default)s)")
    parser.add_argument("--log", default=None, help="HDF5 log of the runner this script starts, replaced if it exists (default: none kept)")
    args = parser.parse_args(argv)
    if args.iterations < 0:
        parser.error("--iterations must be >= 0")
    start = start_swing(args.start_offset)
    try:
        if args.channel is not None:
            result = run_on_channel(args.channel, args.iterations, args.seed, start)
        else:
            signal.signal(signal.SIGTERM, _terminate)
            result = run_served(args.iterations, args.seed, start, log=args.log)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ServeError, FileNotFoundError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
