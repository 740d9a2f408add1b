"""A reach learner driving the runner in-process: one episode per target, each a start
command (context = target) and three trajectory segments of a minimum-jerk move to an
inverse-kinematics goal. The learner logic lives in episodic/demo.py.

    python examples/reach_learner.py [--out runs/reach_learner.h5] [--episodes 8] [--seed 1]
"""
from __future__ import annotations

import argparse

from episodic.demo import demo_targets, format_rows, run_reach_demo
from episodic.runner import Runner
from episodic.tasks import make_task


def main() -> None:
    parser = argparse.ArgumentParser(description="Reach random targets with the WAM and log the run.")
    parser.add_argument("--out", default="runs/reach_learner.h5", help="HDF5 log to write")
    parser.add_argument("--episodes", type=int, default=8, help="number of targets (episodes)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the run and of the targets")
    args = parser.parse_args()

    with Runner(make_task("reach"), log=args.out, seed=args.seed) as runner:
        targets = demo_targets(runner, args.episodes, args.seed)
        rows = run_reach_demo(runner, targets)
        tolerance = runner.task.tolerance
    print(format_rows(rows, tolerance))
    print(f"log written to {args.out}; try: episodic info {args.out}")


if __name__ == "__main__":
    main()
