"""CMA-ES for ball-in-a-cup over the bridge, each generation evaluated as one batch.

Policy: the swing of ``episodic.tasks.ball_in_cup_swing`` (a cubic spline through 5 knots of j2, j4, j6 one
``step`` s apart): 16 parameters, the 5 x 3 knots (rad) row by row and the step (s). Start: a
swing that misses far, ``REFERENCE_SWING`` with every elbow (j4) knot ``--start-offset`` rad
(default 0.15) further: the ball barely reaches the rim's height and falls 0.38 m from the cup's
axis (return 0.052; examples/power_ball_in_cup.py has the numbers). CMA-ES (Hansen's ``cma``
package, ask/tell) minimises minus the episode return: exp(-20 radial^2) per downward crossing of
the rim plane, +3 for a catch; an episode that does not end with flag OK scores 0.

Each generation (the population and, first, the distribution's mean) is one
``Client.evaluate`` call: one batch command, evaluated on the runner's ``--threads`` threads,
every episode bit-identical to it sent alone to a fresh runner. The first generation is also
sent one episode at a time, to show the two agree and what the batch saves in wall time. The
learner stops when the mean catches, or after ``--generations``.

Measured (seed 0, population 12 + the mean, 2 runner threads on a 2-core machine shared with
other jobs): the first catch by a sample in generation 5, the mean catches in generation 10
(130 episodes; return 0.052 -> 4.343). The first generation took 7.3 s as one batch and 14.2 s
one episode at a time, with the same returns bit for bit. (PoWER, one rollout at a time, needs
a median of 48 rollouts from this start: examples/power_ball_in_cup.py.)

    pip install 'episodic[learn]'
    python examples/cma_ball_in_cup.py [--generations 15] [--threads 2] [--seed 0] [--channel NAME]

Without ``--channel`` it serves ball_in_cup in a subprocess (``episodic serve --threads K``, no
log) and removes the channel on exit; with ``--channel`` it attaches to a running
``episodic serve --task ball_in_cup``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from episodic.interface.vocabulary import Flag
from episodic.tasks.ball_in_cup_swing import DEMO_TASK, bent_swing, params_swing, swing_commands, swing_params
from episodic.tools.served import ServedRunner, fresh_channel

START_OFFSET = 0.15  # rad added to every elbow (j4) knot: a far miss
SIGMA = 0.05         # rad, CMA-ES's initial step size on the knots (the step gets a tenth: s)
CATCH = 3.0          # a return above this is a catch (the task adds 3 for one)


def score(result) -> float:
    """What CMA-ES maximises: the return of an episode that ran whole, else 0."""
    return result.episode_return if result.flag == Flag.OK else 0.0


def one_by_one(client, episodes) -> list[float]:
    """The episodes sent one command at a time (what a learner without batches does): returns."""
    return [sum(r.reward for r in client.send_episode(commands)) for commands in episodes]


def learn(client, robot, generations: int, seed: int, offset: float) -> None:
    import cma

    theta = swing_params(bent_swing(offset))
    stds = np.append(np.ones(theta.size - 1), 0.1)
    es = cma.CMAEvolutionStrategy(theta, SIGMA, {"seed": seed + 1, "CMA_stds": stds, "verbose": -9})
    print(f"CMA-ES, population {es.popsize} + the mean per generation, one batch each")
    print(f"{'gen':>3} {'mean':>7} {'best':>7} {'catches':>8} {'batch s':>8} {'one by one s':>13}")
    episode_id = 0
    for generation in range(1, generations + 1):
        samples = es.ask()
        thetas = [es.mean] + samples
        episodes = [swing_commands(robot, params_swing(t), episode_id + k + 1) for k, t in enumerate(thetas)]
        episode_id += len(episodes)
        wall = time.perf_counter()
        results = client.evaluate(episodes)
        wall = time.perf_counter() - wall
        compare = ""
        if generation == 1:
            t = time.perf_counter()
            returns = one_by_one(client, episodes)
            compare = f"{time.perf_counter() - t:13.2f}"
            assert returns == [r.episode_return for r in results], "one by one differs from the batch"
        scores = [score(r) for r in results]
        es.tell(samples, [-s for s in scores[1:]])
        catches = sum(s > CATCH for s in scores[1:])
        print(f"{generation:3d} {scores[0]:7.3f} {max(scores):7.3f} {catches:4d}/{len(samples):<3d} {wall:8.2f} "
              f"{compare}")
        if scores[0] > CATCH:
            print(f"the mean catches after {generation} generations ({episode_id} episodes)")
            return
    print(f"no catch by the mean in {generations} generations")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=15)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads of the runner this script starts (default: every core)")
    parser.add_argument("--seed", type=int, default=0, help="seed of CMA-ES")
    parser.add_argument("--start-offset", type=float, default=START_OFFSET,
                        help="rad added to every elbow knot of the reference swing (default %(default)s)")
    parser.add_argument("--channel", default=None, help="attach to this runner instead of starting one")
    args = parser.parse_args(argv)
    try:
        import cma  # noqa: F401
    except ImportError:
        print("this example needs pycma: pip install 'episodic[learn]'", file=sys.stderr)
        return 1
    from episodic.bridge import Client
    from episodic.interface.robot import load_robot

    robot = load_robot("wam")
    if args.channel is not None:
        with Client(args.channel, timeout=60) as client:
            learn(client, robot, args.generations, args.seed, args.start_offset)
        return 0
    channel = fresh_channel("cma")
    with ServedRunner(channel, task=DEMO_TASK, args=("--threads", str(args.threads), "--quiet")) as runner:
        runner.wait_ready()
        with Client(channel, timeout=60) as client:
            learn(client, robot, args.generations, args.seed, args.start_offset)
        runner.stop(check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
