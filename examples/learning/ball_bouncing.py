"""ball_bouncing: episodic REPS on the two gains of the mirror law that keeps the ball on the racket.

Representation: the reference's episode (examples/ball_bouncing_reference.py: the toss, the first
hit and the sinusoidal stroke, the face level, with inverse-dynamics feedforward and the
reference's stiffer wrist gains) with the gains command's task gains learned: theta = [k_r rad/m,
k_v rad s/m], the mirror law that tilts the face toward its centre by -(k_r r + k_v v) (r, v the
ball's horizontal offset and velocity relative to the face; tasks/ball_bouncing.py). The vertical
bounce is open-loop stable by itself (Schaal & Atkeson 1993); what fails without feedback is the
sideways drift that off-centre impacts on the compliant wrist start, so the feedback law's gains
are what there is to learn. The stroke is planned once and the episodes differ only in their
gains command. The episode is cut to 3 segments of 2.5 s (7.5 s; the reference plays 4 of 3 s):
enough for the task's 10 good bounces in a row (the reference bounces 12 good ones in a row in
it) in five eighths of the simulated time.

Start: the mirror law switched off, theta = [0, 0]: the sideways offset grows bounce by bounce
and after 5 good bounces and 2 more the ball falls to the floor (return 4.72). With the reference's gains [0.8,
0.2] the same episode returns 11.98 and succeeds. An aborted episode scores the runner's return (the bounces it made).

Learner: episodic REPS, 8 samples per iteration, KL bound epsilon 0.5, initial standard
deviations ``SIGMA`` (0.5 rad/m, 0.15 rad s/m, about the size of the reference's gains), diagonal
covariance. Two parameters, and a return that counts good bounces less the ball's distance from
the face's centre at each: REPS's update, bounded by the KL divergence to the last search
distribution, moves toward the good samples without jumping past the region where the law holds
the ball (too high gains lose it again: [1.6, 0.4] returns 3.78).

Baseline: no published baseline (design.md section 9 knows none for ball bouncing).

Measured with an earlier version (this version's medians: the learning table in docs/learning.md, which the
same command reprints) (``python examples/learn.py ball_bouncing --seeds 0 1 2 --quiet``, 2
threads, 10
iterations, on a machine shared with other jobs):

    seed | return: start -> final policy | final policy succeeds | rollouts | wall time
       0 | 4.723 -> 11.98                | yes                  | 81       | 75 s
       1 | 4.723 -> 11.98                | yes                  | 81       | 69 s
       2 | 4.723 -> 11.98                | yes                  | 81       | 85 s

In every seed the policy after one iteration succeeds (11.88-11.89: 12 good bounces), and all
the samples succeed from the third or fourth iteration on; 11.98 is the reference's gains' return.
QUICK (1 iteration, seed 0): 4.723 -> 11.88, about 11 s in tests/test_learning.py.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from episodic.interface.robot import Robot
from episodic.learning.policy_search import Problem, Reps
from examples.ball_bouncing_reference import reference_commands

TASK = "ball_bouncing"
SEGMENTS, SEGMENT_TIME = 3, 2.5   # the learning episode: 3 segments of 2.5 s
START = np.zeros(2)               # k_r rad/m, k_v rad s/m: the mirror law off
SIGMA = np.array([0.5, 0.15])     # REPS's initial standard deviations, rad/m and rad s/m

ITERATIONS = 10
QUICK = (1, 5.0)


def problem(robot: Robot) -> Problem:
    """The reference's stroke in ``SEGMENTS`` segments of ``SEGMENT_TIME`` s, planned once, with the
    mirror law's gains theta (module docstring)."""
    start, gains, *segments = reference_commands(robot, 1, segments=SEGMENTS, segment_time=SEGMENT_TIME)

    def episode(theta: np.ndarray, episode_id: int) -> list:
        law = replace(gains, episode_id=episode_id, task_gains=np.array(theta, float))
        return [replace(start, episode_id=episode_id), law, *(replace(s, episode_id=episode_id) for s in segments)]

    return Problem(TASK, START.copy(), episode, "mirror-law task gains k_r, k_v")


def learner(problem: Problem, seed: int) -> Reps:
    """Episodic REPS, 8 samples per iteration, KL bound 0.5, initial deviations ``SIGMA``."""
    return Reps(problem.theta0, SIGMA, n_samples=8, epsilon=0.5, seed=seed)
