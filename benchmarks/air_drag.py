"""Air drag without its derivative cost (issue 33): what the explicit air changes, judged against
the model's own step-size error (its speed: ``python benchmarks/task_speed.py --only air``).

    python benchmarks/air_drag.py [--swings 32] [--seed 3]

``--swings`` perturbed ball_in_cup swings (ball_in_cup_swing.demo_swings, 0.03 rad on
every via-point) on MuJoCo's air at the task's 0.5 ms step (the physics before: the yardstick's
zero), on the explicit air, and on MuJoCo's air at half the step (0.25 ms). How many swings end
as they did before (caught or missed) on each: the change of air is acceptable when it moves no
more outcomes than halving the step does, the model's own step-size error.
"""
from __future__ import annotations

import argparse

import numpy as np

from episodic.interface.robot import load_robot
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tasks.ball_in_cup_swing import demo_swings, run_swing, swing_commands


def catches(swings: int, seed: int) -> None:
    robot = load_robot("wam")
    perturbed = demo_swings(swings + 1, seed=seed)[1:]
    variants = {"before (implicit, 0.5 ms)": ("implicit", 1), "explicit air, 0.5 ms": ("explicit", 1),
                "before at half the step": ("implicit", 2)}
    caught = {}
    for label, (air, finer) in variants.items():
        task = make_task("ball_in_cup", {"air": air})
        task.substeps = type(task).substeps * finer  # an instance's own physics steps per control step
        with Runner(task, keep_episodes=False) as runner:
            caught[label] = np.array([run_swing(runner.send, swing_commands(robot, swing, k + 1), name).caught
                                      for k, (name, swing) in enumerate(perturbed)])
    before = caught["before (implicit, 0.5 ms)"]
    print(f"{swings} perturbed ball_in_cup swings (seed {seed}): outcomes as before")
    for label, outcome in caught.items():
        print(f"{label:<28} caught {int(outcome.sum()):>3}  same outcome as before {int((outcome == before).sum()):>3} "
              f"of {swings}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swings", type=int, default=32)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    catches(args.swings, args.seed)


if __name__ == "__main__":
    main()
