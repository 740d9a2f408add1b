"""tetherball: PoWER on the DMP weights of the stroke, all seven joints, from a demonstration
aimed at another target.

Representation: the reference's episode (examples/tetherball_reference.py: the start, segment 1
moving the racket below the ball to the backswing posture, segment 2 the stroke, the pull back
and a 0.5 s wait) with segment 2 replaced by one discrete DMP per joint
(episodic.learning.primitives.DMPPolicy, the segment's 1.92 s, ``N_WEIGHTS`` basis functions, from the
backswing posture at rest to the segment's end posture). Learned: the weights of all seven
joints (the stroke turns every joint), each scaled by its peak response (a parameter step of
0.01 moves its joint by about 0.01 rad at the basis function's peak): theta = weights
(10, 7) x peak response, row by row, 70 parameters. Segment 1 stays the demonstration's.

Start: the DMP imitates the reference's stroke planned for ``DEMO_TARGET``, a point of the
ball's swing sphere 0.1 m lower than the task's target and 0.19 m from it: a demonstration
aimed elsewhere. Its ball passes 0.167 m from the target (return -0.167, no success); the
reference, planned for the target itself, passes 0.026 m from it (return -0.0259, success
within 0.1 m).

Learner: PoWER, 10 samples per iteration, the 10 best rollouts so far reused (importance
sampling), 10 basis functions: the IAS toolbox's settings for DMP weights (design.md section 9),
exploration ``SIGMA`` = 0.02 rad on every scaled weight, fixed. The return, minus the ball's
closest approach in m, is negative, so ``exp_transform`` turns it into weights (the best 1, the
worst exp(-10)). PoWER's reward-weighted average of whole samples moves all 70 weights at once
along what worked, which is why it is the classic learner for primitive weights.

Baseline: no published baseline (tetherball is this project's own task).

Measured with an earlier version (this version's medians: the learning table in docs/learning.md, which the
same command reprints) (``python examples/learn.py tetherball --seeds 0 1 2 --quiet``, 2 threads,
15
iterations, on a machine shared with other jobs; in every seed 80-100 % of the samples pass
within 0.1 m of the target from the third iteration on):

    seed | return: start -> final policy | final policy succeeds | rollouts | wall time
       0 | -0.1673 -> -0.000542          | yes                  | 151      | 68 s
       1 | -0.1673 -> -0.001732          | yes                  | 151      | 47 s
       2 | -0.1673 -> -0.001364          | yes                  | 151      | 70 s

QUICK (2 iterations, seed 0): -0.1673 -> -0.0159, about 9 s in tests/test_learning.py.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from episodic.interface.robot import Robot
from episodic.learning.policy_search import Power, Problem, exp_transform
from episodic.learning.primitives import DMPPolicy
from episodic.tasks import make_task
from examples.tetherball_reference import reference_commands

TASK = "tetherball"
DEMO_TARGET = np.array([0.85, 0.436, 1.45])  # m, on the swing sphere (1 m around the anchor), 0.1 m below the target
N_WEIGHTS = 10         # basis functions per joint
SIGMA = 0.02           # rad, PoWER's exploration of every (scaled) weight

ITERATIONS = 15
QUICK = (2, 0.05)


def problem(robot: Robot) -> Problem:
    """The reference's episode with its stroke (segment 2) a DMP of all joints, imitating the stroke
    planned for ``DEMO_TARGET`` (module docstring)."""
    target = make_task(TASK).default_target
    start, approach, stroke = reference_commands(robot, 1, DEMO_TARGET)
    back, rest = approach.q[-1], np.zeros(robot.n_dofs)  # the stroke starts at the backswing posture, at rest
    t = np.arange(len(stroke.q) + 1) * robot.control_dt
    policy, theta0 = DMPPolicy.imitate(t, np.vstack([back, stroke.q]), range(robot.n_dofs), N_WEIGHTS,
                                       robot.control_dt, np.vstack([rest, stroke.qd]),
                                       np.vstack([rest, stroke.qdd]))

    def episode(theta: np.ndarray, episode_id: int) -> list:
        move = policy.trajectory(theta)
        return [replace(start, episode_id=episode_id, context=target), replace(approach, episode_id=episode_id),
                replace(stroke, episode_id=episode_id, q=move.q[1:], qd=move.qd[1:], qdd=move.qdd[1:])]

    return Problem(TASK, theta0, episode, f"DMP weights of the stroke, 7 joints x {N_WEIGHTS}")


def learner(problem: Problem, seed: int) -> Power:
    """PoWER, 10 samples per iteration, the 10 best reused, exploration ``SIGMA`` rad per scaled weight."""
    return Power(problem.theta0, SIGMA, n_samples=10, n_best=10, seed=seed, transform=exp_transform())
