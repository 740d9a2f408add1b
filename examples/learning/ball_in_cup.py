"""ball_in_cup: PoWER on a DMP imitating a demonstration that misses (the classic experiment;
``examples/power_ball_in_cup.py`` runs it over seeds and explains the setting).

Representation: a DMP of j2, j4, j6 with 10 weights each (30 parameters, rad of joint
displacement per kernel), imitating the kinesthetic demonstration of
``episodic.demonstration.ball_in_cup_demonstration`` (its execution misses the cup by 0.21 m).
Learner: PoWER, 10 rollouts per iteration, importance sampling over the 10 best so far,
exploration 0.03 rad adapted by the reward weighting (``episodic.demo.ball_in_cup_learner``).
Published baseline: Kober & Peters, reliable catches after about 75 rollouts (real WAM, all 7
joints, 31 weights each); the IAS toolbox's baseline settings (10 rollouts per iteration, 10 basis
functions) are this configuration's. Measured: see the README's learning table. The policy's
return is not monotone while PoWER searches (seed 0: 0.90, 0.90, 1.30, 1.26, 1.27, 1.26, 1.29 over
the first six iterations, the samples catching from the third).
"""
from __future__ import annotations

from examples.power_ball_in_cup import problem_and_learner

ITERATIONS = 20
QUICK = (2, 0.25)  # iterations, least improvement of the policy's return (seed 0: 0.9005 -> 1.257)


def problem(robot):
    return problem_and_learner()[0]


def learner(problem, seed: int):
    return problem_and_learner(seed)[1]
