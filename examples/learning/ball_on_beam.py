"""ball_on_beam: PoWER on the logarithms of the feedback law's gains and of the beam joint's servo.

Representation: the reference's episode (examples/ball_on_beam_reference.py: a start with the
ball at rest 0.1 m from the centre, one gains command held for 10 s) with four gains learned,
theta = ln [k_x rad/m, k_v rad s/m, kp7 N m/rad, kd7 N m s/rad]: the task gains of the law
q7_desired = q7_held + clip(k_x x + k_v xd, +-max_tilt) and the stiffness and damping with which
j7 follows it. Logarithms keep every gain positive and make an exploration step a relative
change, the natural scale of a gain.

Start: the reference's gains with k_v a fifth of the reference's (0.1 rad s/m): too little
damping, the ball swings about the centre and is still 0.17 m out after 10 s; return -0.0928
(the reference returns -0.00388 and succeeds).

Learner: PoWER (10 samples per iteration, the 10 best rollouts so far reused by importance
sampling, as in the IAS toolbox), exploration 0.3 in each log-gain (about +-35 %). The returns
are negative, so they are turned into weights by ``exp_transform`` (the best rollout weighs 1,
the worst exp(-10)). PoWER's update is an average of the best gain sets weighted by their
returns: no learning rate to tune, and every policy it proposes is a blend of gain sets that ran.

Baseline: no published baseline (IAS's ball-on-a-beam has no paper numbers, design.md section 9).

Measured with an earlier version (this version's medians: the learning table in docs/learning.md, which the
same command reprints) (``python examples/learn.py ball_on_beam --seeds 0 1 2 --quiet``, 2 threads,
20
iterations, on a machine shared with other jobs; 90-100 % of the samples succeed from about the
sixth iteration on):

    seed | return: start -> final policy | final policy succeeds | rollouts | wall time
       0 | -0.09281 -> -0.003575         | yes                  | 201      | 79 s
       1 | -0.09281 -> -0.003691         | yes                  | 201      | 71 s
       2 | -0.09281 -> -0.003590         | yes                  | 201      | 81 s

Every final policy beats the reference (-0.00388), whose gains came from a coarse grid. Seed
0's policy: k_x 2.03 rad/m, k_v 0.603 rad s/m, kp7 5.01 N m/rad, kd7 0.339 N m s/rad (the
reference's: 1.5, 0.5, 5, 0.4), the ball within 0.2 mm of the centre at the end.
QUICK (3 iterations, seed 0): -0.09281 -> -0.01191, about 9 s in tests/test_learning.py.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from episodic.interface.robot import Robot
from episodic.learning.policy_search import Power, Problem, exp_transform
from examples.ball_on_beam_reference import KD7, KP7, TASK_GAINS, reference_commands

TASK = "ball_on_beam"
START = np.log([TASK_GAINS[0], TASK_GAINS[1] / 5, KP7, KD7])  # ln k_x, k_v, kp7, kd7
SIGMA = 0.3       # exploration in each log-gain

ITERATIONS = 20
QUICK = (3, 0.03)


def problem(robot: Robot) -> Problem:
    """The reference's 10 s gain-set episode with the four log-gains of theta (module docstring)."""
    def episode(theta: np.ndarray, episode_id: int) -> list:
        k_x, k_v, kp7, kd7 = np.exp(theta)
        start, gains = reference_commands(robot, episode_id, task_gains=np.array([k_x, k_v]))
        kp, kd = gains.kp.copy(), gains.kd.copy()
        kp[6], kd[6] = kp7, kd7
        return [start, replace(gains, kp=kp, kd=kd)]

    return Problem(TASK, START.copy(), episode, "ln task gains k_x, k_v and j7's kp, kd")


def learner(problem: Problem, seed: int) -> Power:
    """PoWER, 10 samples per iteration, the 10 best reused, exploration ``SIGMA`` per log-gain."""
    return Power(problem.theta0, SIGMA, n_samples=10, n_best=10, seed=seed, transform=exp_transform())
