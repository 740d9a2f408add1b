"""The scripted ball-in-a-cup reference: a hand-shaped swing that catches the ball.

A cubic spline through five via-points of the three pitch joints j2, j4, j6 (the arm moves
in its vertical plane), one every 0.43 s, from rest at the task's start posture (cup
upright, ball hanging still) to rest at the catch posture:

    knots 1-2  swing the ball back, towards the robot, and let it swing forward;
    knots 3-4  pull the cup up and back so the ball flies up, over and in front of the cup;
    knot 5     move the cup under the falling ball and hold it there 1 s while it settles.

It is sent as a start command and three trajectory segments (split at knots 2 and 4) at the
control rate with q, qd and qdd. The via-points (``episodic.tasks.ball_in_cup_swing.REFERENCE_SWING``) came
from a small CMA-ES search scored on catches of the swing and of noisy copies of it, on the
first version of the task (a massless tendon string, a cup that hardly bounced). They were not
re-tuned for the present one (the chain string of 5 kN/m, the cup rebounding with a restitution
of 0.6, friction acting during sliding impacts, the WAM's revised inertias): the swing still
catches from the start state (return 4.336), and 3 of 8 copies with 0.03 rad of noise on every
via-point still catch (``episodic.tasks.ball_in_cup_swing.demo_swings(9, seed=2)``). It sits near the edge of
the catch region: at 2 kN/m or at a quarter of the physics step it misses (1.25, 1.15). On the
tendon string (task parameter string_model=tendon) it catches too (4.359).

On another arm the same swing is the WAM's cup path followed by inverse kinematics in the arm's
frame (``episodic.tasks.ball_in_cup.arm_swing_trajectory``); the Panda, the UR5 and the Puma
560 cannot follow it within their joint velocity limits or range, and the task refuses them with
the reason (its ``needs``; benchmarks/ball_in_cup_arms.py).

    python examples/ball_in_cup_reference.py [--log runs/ball_in_cup_reference.h5]

runs it in-process and prints the return and whether the ball was caught. The same
commands go over the bridge with ``bridge.Client.send`` (see ``episodic demo``).
"""
from __future__ import annotations

import argparse

from episodic.tasks.ball_in_cup_swing import reference_commands as swing_reference, run_swing


def reference_commands(robot, episode_id: int = 1) -> list:
    """StartCommand + three TrajectoryCommands of the reference swing for ``robot``
    (an episodic.interface.robot.Robot, e.g. ``Runner(make_task("ball_in_cup")).robot``)."""
    return swing_reference(robot, episode_id)


def main() -> None:
    from episodic.runtime.runner import Runner
    from episodic.tasks import make_task

    parser = argparse.ArgumentParser(description="Run the reference ball-in-a-cup swing in-process.")
    parser.add_argument("--log", default=None, help="HDF5 log to write, replaced if it exists (default: none)")
    args = parser.parse_args()
    with Runner(make_task("ball_in_cup"), log=args.log, overwrite=True) as runner:
        row = run_swing(runner.send, reference_commands(runner.robot), "reference")
    print(f"return {row.episode_return:.4f}, caught {'yes' if row.caught else 'no'}, "
          f"{row.steps} steps, flag {row.flag}")


if __name__ == "__main__":
    main()
