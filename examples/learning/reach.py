"""reach: CMA-ES on the goal and the DMP weights of the four joints that place the wrist.

Representation: one discrete DMP per joint (episodic.learning.primitives.DMPPolicy, ``DURATION`` = 1.2 s,
``N_WEIGHTS`` = 5 basis functions) from the task's start posture (the WAM's home) to a goal,
sent as one trajectory segment whose end is held ``HOLD`` = 0.5 s; the target is the task's
default, (0, 0.45, 1.55) m, 0.83 m from the hand at home. Learned: the goal (rad) and the
weights of j1-j4, the joints that place the wrist (the end effector sits on the flange, a few
centimetres from the wrist centre); j5-j7 hold their home angles. Each weight is scaled by its
peak response (a parameter step of 0.01 moves its joint by about 0.01 rad at the basis
function's peak): theta = [goal (4) rad, weights (5, 4) x peak response, row by row] rad,
4 x (1 + 5) = 24 parameters.

Start: the DMP imitates a minimum-jerk move of 1.2 s to the inverse-kinematics posture (over
j1-j4) of a point ``MISS`` 0.2 m below the target: a demonstration that misses. It ends 0.20 m
from the target and returns -0.7475. The reference, the same primitive imitating the move to
the target's own IK posture (what examples/reach_learner.py does, at this duration), returns
-0.564 and ends 0.4 mm from the target. An episode the velocity check aborts (the fastest
samples) scores the runner's return, which charges the steps it left out at the task's worst cost
rate (about -6.2 per second).

Learner: CMA-ES (pycma), initial step ``SIGMA`` = 0.05 rad on every parameter, pycma's default
population (4 + 3 ln 24 = 13 samples per iteration; the policy's own evaluation is not counted
as a rollout). The return,
minus the time-integrated distance and effort, is smooth in the parameters, the kind of problem
CMA-ES is made for, and its step-size and covariance adaptation finds the scales of goals and
weights without tuning. The learned policy moves sooner and faster than the minimum-jerk
reference (the return rewards being near the target early), close to the joints' velocity
limits: many samples near the end are aborted by the velocity check, and some of those that run
end just over the 0.02 m tolerance, hence the low success rate among the last samples.

Baseline: no published baseline (reach is this project's own task).

Measured with an earlier version (this version's medians: the learning table in docs/learning.md, which the
same command reprints) (``python examples/learn.py reach --seeds 0 1 2 --quiet``, 2 threads, 100
iterations,
on a machine shared with other jobs):

    seed | return: start -> final policy | final policy succeeds | rollouts | wall time
       0 | -0.7475 -> -0.2943            | yes                  | 1301     | 21 s
       1 | -0.7475 -> -0.3133            | yes                  | 1301     | 22 s
       2 | -0.7475 -> -0.2893            | yes                  | 1301     | 20 s

QUICK (3 iterations, seed 0): -0.7475 -> -0.6119, about 2 s in tests/test_learning.py.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from episodic.interface.robot import Robot
from episodic.interface.trajectory import min_jerk
from episodic.learning.policy_search import Cmaes, Problem
from episodic.learning.primitives import DMPPolicy
from episodic.runtime.scene import build_scene
from episodic.task.kinematics import SiteIK
from episodic.tasks import make_task

TASK = "reach"
DURATION = 1.2                      # s, the DMP's move
HOLD = 0.5                          # s held at the end of the move
N_WEIGHTS = 5                       # basis functions per joint
JOINTS = (0, 1, 2, 3)               # j1-j4, the learned joints
MISS = np.array([0.0, 0.0, -0.2])   # m, the demonstration's aim relative to the target
SIGMA = 0.05                        # rad, CMA-ES's initial step

ITERATIONS = 100
QUICK = (3, 0.05)


def problem(robot: Robot) -> Problem:
    """Reach the default target with a DMP of j1-j4 (goal and weights), starting from the imitated
    move that misses by ``MISS`` (module docstring)."""
    task = make_task(TASK)
    home, target, dt = task.start_posture(robot), task.default_context(), robot.control_dt
    held = np.setdiff1d(np.arange(robot.n_dofs), JOINTS)
    lower, upper = robot.range_lower.copy(), robot.range_upper.copy()
    lower[held] = upper[held] = home[held]  # inverse kinematics over j1-j4 only
    scene = build_scene(robot, task)
    ik = SiteIK(scene.model, robot.end_effector_site, scene.qpos_adr, scene.dof_adr, lower, upper)
    aim, _ = ik.solve(home, target + MISS)
    demo = min_jerk(home, aim, DURATION, dt)
    t = np.arange(len(demo) + 1) * dt
    rest = np.zeros_like(home)  # the demonstration starts and ends at rest
    policy, weights = DMPPolicy.imitate(t, np.vstack([home, demo.q]), JOINTS, N_WEIGHTS, dt,
                                        np.vstack([rest, demo.qd]), np.vstack([rest, demo.qdd]))
    n_goal = len(JOINTS)

    def episode(theta: np.ndarray, episode_id: int) -> list:
        move = replace(policy, goal=theta[:n_goal]).trajectory(theta[n_goal:])
        return move.episode(episode_id, wait=HOLD)

    return Problem(TASK, np.concatenate([policy.goal, weights]), episode,
                   f"DMP goal + weights, j1-j4 x (1 + {N_WEIGHTS})")


def learner(problem: Problem, seed: int) -> Cmaes:
    """CMA-ES from the start parameters, initial step ``SIGMA`` rad, pycma's default population."""
    return Cmaes(problem.theta0, SIGMA, seed=seed)
