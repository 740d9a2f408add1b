"""The classic experiment: ball-in-a-cup learned by PoWER from the imitation of a demonstration
that misses (Kober & Peters, "Policy search for motor primitives in robotics", NIPS 2008 /
Machine Learning 84, 2011), over several seeds, beside their figures.

Setting (``episodic.cli.demo.ball_in_cup_learner``, what ``episodic demo`` runs):
- the calibrated task at its defaults: the chain string (5 kN/m, damping ratio 1), a wooden ball
  on a hard cup (restitution 0.60 measured by a drop test, friction 0.4), 0.5 ms physics;
- the demonstration: kinesthetic teaching in simulation (``episodic.learning.demonstration``), the hand
  guided along a swing bent 0.05 rad at the elbow: taught, the ball comes down 0.31 m from the
  cup's axis; the recording executed by the runner catches, but the policy below, its imitation,
  misses by centimetres like the human demonstration (the ball comes down 0.08 m from the axis,
  return 2.275);
- the policy: a DMP of j2, j4 and j6 (the arm's pitch joints: the swing lies in the arm's vertical
  plane, and the other joints hold the start posture) with 10 weights each, imitated from the
  demonstration: 30 parameters, in rad of joint displacement per kernel. Kober & Peters learned all
  seven joints with 31 weights each (217), which is harder; the IAS toolbox's baseline used 10
  basis functions;
- PoWER: 10 rollouts per iteration (the IAS baseline's number), each iteration one batch;
  importance sampling over the 10 best rollouts so far; exploration 0.03 rad per parameter,
  adapted by the same reward weighting (never above its start, Kober & Peters' form); the
  return (exp(-20 r^2) per downward crossing of the rim plane, +3 for a catch) is the weight.

Reported per seed: rollouts to the first catch, rollouts until 80 % of the last 20 rollouts
caught, and wall time (2 threads). Kober & Peters: the robot catches reliably after about 75
rollouts, with virtually no failures after about 100 (one run on the real robot). The measured
table is in docs/learning.md.

    python examples/power_ball_in_cup.py [--seeds 0 1 ... 9] [--iterations 15] [--threads 2] [--out runs/power]
"""
from __future__ import annotations

import argparse
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from episodic.cli.demo import RELIABLE, ball_in_cup_learner
from episodic.interface.robot import load_robot
from episodic.learning.demonstration import ball_in_cup_demonstration
from episodic.learning.policy_search import LearningCurve, Problem, learn

ITERATIONS = 15  # at most; a run stops once it catches reliably


@lru_cache(maxsize=1)
def demonstration():
    """The kinesthetic demonstration (deterministic: taught once per process)."""
    return ball_in_cup_demonstration(load_robot("wam"))


def problem_and_learner(seed: int = 0):
    """The task, start parameters and episodes (a Problem) and PoWER, for ``seed``."""
    policy, learner, episode = ball_in_cup_learner(demonstration(), load_robot("wam"), seed)
    problem = Problem("ball_in_cup", learner.theta.copy(), episode,
                      f"DMP of j2, j4, j6 x {policy.dmp.n_weights} weights, imitating a missing demonstration")
    return problem, learner


def run(seed: int, iterations: int = ITERATIONS, threads: int = 2, echo=print) -> LearningCurve:
    """One PoWER run from the imitation, stopping once 80 % of the last 20 rollouts caught."""
    problem, learner = problem_and_learner(seed)
    window, rate = RELIABLE
    return learn(learner, problem.rollouts(threads=threads), iterations, evaluate_mean=False, echo=echo,
                 stop=lambda curve: curve.reliable_after(window, rate) is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PoWER on ball-in-a-cup from a missing demonstration, over seeds.")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--iterations", type=int, default=ITERATIONS, help="at most (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="folder for each seed's learning curve (CSV)")
    parser.add_argument("--quiet", action="store_true", help="no line per iteration")
    args = parser.parse_args(argv)
    window, rate = RELIABLE
    table = []
    for seed in args.seeds:
        print(f"== seed {seed}")
        curve = run(seed, args.iterations, args.threads, echo=None if args.quiet else print)
        if args.out:
            curve.save(Path(args.out) / f"power_ball_in_cup-seed{seed}.csv")
        table.append((seed, curve.first_success, curve.reliable_after(window, rate), curve.rows[-1].seconds))
        print(f"seed {seed}: first catch at rollout {curve.first_success}, reliable after "
              f"{curve.reliable_after(window, rate)}, {curve.rows[-1].seconds:.1f} s", flush=True)
    budget = args.iterations * 10 + 1

    def median(values):
        return float(np.median([v if v is not None else np.inf for v in values]))

    print(f"\n{'seed':>4} {'first catch':>12} {'reliable':>9} {'wall s':>7}")
    for seed, first, reliable, seconds in table:
        print(f"{seed:>4} {first if first else '-':>12} {reliable if reliable else '-':>9} {seconds:>7.1f}")
    print(f"median over {len(table)} seeds: first catch at rollout {median([t[1] for t in table]):g}, "
          f"{rate:.0%} of the last {window} caught after {median([t[2] for t in table]):g} rollouts "
          f"('inf': not within {budget}), {np.median([t[3] for t in table]):.1f} s")
    print("Kober & Peters (real WAM, 7 joints x 31 weights): reliable after about 75 rollouts, "
          "virtually no failures after about 100")
    return 0


if __name__ == "__main__":
    sys.exit(main())
