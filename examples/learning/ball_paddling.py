"""ball_paddling: PoWER on the paddling rhythm (frequency, amplitude, phase).

Representation: the reference's episode (examples/ball_paddling_reference.py: the start, a gain
set with inverse-dynamics feedforward, then the racket's face moved up and down on a vertical
line, level, in three segments over 6 s: a serve, a join and the rhythm z = c + A sin(2 pi f t +
phase)) with the rhythm's own three numbers learned: theta = [f Hz, A m, phase rad]. A rhythmic
task is set by its rhythm: the stroke's frequency and amplitude decide the ball's flight and the
phase decides where the first stroke of the rhythm meets the served ball; the serve, the face's
path (inverse kinematics, computed once) and the gains stay the reference's. (A discrete DMP
cannot express a steady rhythm; a rhythmic primitive's weights would only reshape one period of
this sinusoid.)

Start: the reference's rhythm 5 % slower and 20 % smaller (f = 0.95 x 2.852 Hz, A = 0.8 x 58.4
mm, phase 0): the rally falls apart, 12 hits after flights on a slack string and 4 off the face
against 1 good: return -15 (the reference returns 15: 15 good hits in a row). The return is a count of hits (+1
good, -1 off the face or after a slack flight) and jumps between rallies that lock to the
stroke (13 to 17) and rallies that fall apart (-3 to -18, scattered with no trend), so the
start lies on a rugged plateau: on a grid over (f, A) at phase 0 the rally locks for A >= 0.88 x
the reference's (at f >= 0.9 x the reference's) and fails at A <= 0.83 x for every f from 0.85 x
to 1.1 x. An aborted episode (a joint too fast) scores the runner's return: the
hits it made (an early end earns nothing more).

Learner: PoWER, 8 samples per iteration, the 8 best rollouts so far reused (importance
sampling), exploration ``SIGMA`` (0.15 Hz, 6 mm, 0.3 rad) kept constant; the hit counts (which
can be negative) become weights by ``exp_transform``, so one sample whose rally locks outweighs
all the failed ones (exp(-10) against 1) and the policy jumps to it. Reward-weighted averaging
with a fixed exploration keeps searching at the same scale on the plateau; CMA-ES, ranking
scattered plateau returns, shrank its step and stayed on the plateau in 1 of 3 seeds (8
iterations) from this start, PoWER in none.

Baseline: no published baseline (design.md section 9 knows none for paddling).

Measured with an earlier version (this version's medians: the learning table in docs/learning.md, which the
same command reprints) (``python examples/learn.py ball_paddling --seeds 0 1 2 --quiet``, 2
threads, 15
iterations, on a machine shared with other jobs):

    seed | return: start -> final policy | final policy succeeds | rollouts | wall time
       0 | -15 -> 18                     | yes                  | 121      | 37 s
       1 | -15 -> 18                     | yes                  | 121      | 45 s
       2 | -15 -> 18                     | yes                  | 121      | 45 s

In every seed the policy locks the rally after the first iteration (returns 14-15) and then
climbs to 17-18 good hits in the 6 s, where the reference's rhythm fits 15; 12-88 % of the last
iteration's samples succeed (the fixed exploration keeps trying rhythms beyond the edge).
QUICK (1 iteration, seed 0): -15 -> 15, about 4 s in tests/test_learning.py.
"""
from __future__ import annotations

import numpy as np

from episodic.interface.robot import Robot
from episodic.learning.policy_search import Power, Problem, exp_transform
from examples.ball_paddling_reference import (
    AMPLITUDE,
    FREQUENCY,
    face_spline,
    reference_commands,
)

TASK = "ball_paddling"
START = np.array([0.95 * FREQUENCY, 0.8 * AMPLITUDE, 0.0])  # Hz, m, rad
SIGMA = np.array([0.15, 0.006, 0.3])  # Hz, m, rad: PoWER's exploration

ITERATIONS = 15
QUICK = (1, 15.0)


def problem(robot: Robot) -> Problem:
    """The reference's serve and rhythm with theta = [f Hz, A m, phase rad] (module docstring)."""
    spline = face_spline(robot)

    def episode(theta: np.ndarray, episode_id: int) -> list:
        frequency, amplitude, phase = theta
        return reference_commands(robot, episode_id, frequency=frequency, amplitude=amplitude, phase=phase,
                                  spline=spline)

    return Problem(TASK, START.copy(), episode, "rhythm: frequency, amplitude, phase")


def learner(problem: Problem, seed: int) -> Power:
    """PoWER, 8 samples per iteration, the 8 best reused, fixed exploration ``SIGMA``."""
    return Power(problem.theta0, SIGMA, n_samples=8, n_best=8, seed=seed, transform=exp_transform())
