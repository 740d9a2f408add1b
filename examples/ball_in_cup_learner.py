"""A ball-in-a-cup learner over the bridge: the reference swing and perturbed variants of it,
sent to a runner in another process. The swing lives in tasks/ball_in_cup_swing.py (``episodic demo``
learns ball-in-a-cup from a demonstration instead).

    episodic serve --task ball_in_cup --log runs/ball_in_cup.h5     # one terminal
    python examples/ball_in_cup_learner.py [--channel default] [--episodes 5] [--noise 0.03]
"""
from __future__ import annotations

import argparse

from episodic.bridge import Client
from episodic.interface.robot import load_robot
from episodic.tasks.ball_in_cup_swing import DEMO_NOISE, demo_swings, format_swing_rows, run_swings


def main() -> None:
    parser = argparse.ArgumentParser(description="Swing the ball into the cup on a served runner.")
    parser.add_argument("--channel", default="default", help="the runner's channel")
    parser.add_argument("--episodes", type=int, default=5, help="the reference, then perturbed swings")
    parser.add_argument("--noise", type=float, default=DEMO_NOISE, help="perturbation (rad) of the via-points")
    parser.add_argument("--seed", type=int, default=0, help="seed of the perturbations")
    args = parser.parse_args()

    with Client(args.channel, timeout=60) as runner:
        rows = run_swings(runner.send, load_robot("wam"), demo_swings(args.episodes, args.seed, args.noise))
    print(format_swing_rows(rows))


if __name__ == "__main__":
    main()
