"""Speed of a blocking run with and without episodic's compiled loop (episodic.native).

    python benchmarks/native_speed.py [--repeats 5]

A blocking reach episode in-process (a 2 s move and a 1 s hold on the WAM, 2 ms control steps,
under gravity compensation and under inverse dynamics at the measured state): the median
control steps per second of the commands after the start, logging included, through the loop
this install has. Run it once in an install with the compiled library and once in one built
without a C compiler (``CC=/nonexistent pip install .``; episodic then warns once and steps in
Python) to get the ratio the warning quotes; the runs give the same numbers either way.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from episodic import native
from episodic.interface.commands import Feedforward, GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import min_jerk
from episodic.runtime.runner import Runner
from episodic.tasks import make_task


def steps_per_second(mode: Feedforward) -> tuple[float, float]:
    """Control steps per wall-clock s of one blocking reach episode under ``mode``, and its
    final joint position j1 rad (equal with and without the compiled loop)."""
    robot = load_robot("wam")
    move = min_jerk(robot.home, robot.home + np.array([0.3, -0.2, 0.3, -0.3, 0.3, 0.3, 0.3]), 2.0, robot.control_dt)
    commands = [GainsCommand(1, 1, 2, robot.kp, robot.kd, 0.5 * robot.kp, mode),
                TrajectoryCommand(1, 2, 2, move.q, move.qd, move.qdd, wait_time=1.0)]
    with Runner(make_task("reach")) as runner:
        runner.send(StartCommand(1, 2, context=np.array([0.6, 0.1, 1.5])))
        began = time.perf_counter()
        for command in commands:
            runner.send(command)
        wall = time.perf_counter() - began
        q = runner.sim.q
    return (2.0 + 1.0) / robot.control_dt / wall, float(q[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"compiled loop: {'yes' if native.compiled() else 'no (Python loop)'}")
    for mode in (Feedforward.GRAVITY_COMPENSATION, Feedforward.INVERSE_DYNAMICS):
        runs = [steps_per_second(mode) for _ in range(args.repeats)]
        print(f"{mode.name:<22} {statistics.median(r[0] for r in runs):>9.0f} steps/s  final j1 {runs[-1][1]!r}")


if __name__ == "__main__":
    main()
