"""Simulation speed of each benchmark task: its scripted reference episode
(examples/<task>_reference.py) run in-process by a blocking Runner, median of repeats.
Prints steps/s, the real-time factor (simulated s per wall-clock s), the episode's return
and whether it succeeded.

    python benchmarks/task_speed.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from episodic.runner import Runner
from episodic.tasks import make_task
from episodic.tasks import TASKS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def reference(task: str):
    """The task's reference_commands function, or None when it has no reference example."""
    path = EXAMPLES / f"{task}_reference.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"{task}_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a module's dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module.reference_commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'task':<16} {'steps':>7} {'steps/s':>10} {'x real time':>12} {'return':>10} success")
    for name in TASKS:
        make = reference(name)
        if make is None:
            continue
        times = []
        for repeat in range(args.repeats):
            with Runner(make_task(name)) as runner:
                commands = make(runner.robot, episode_id=1)
                t0 = time.perf_counter()
                for command in commands:
                    runner.send(command)
                times.append(time.perf_counter() - t0)
                (episode,) = runner.episodes
        wall = float(np.median(times))
        steps = episode.n_steps
        dt = runner.robot.control_dt
        print(f"{name:<16} {steps:>7} {steps / wall:>10,.0f} {steps * dt / wall:>12,.0f} "
              f"{episode.episode_return:>10.4g} {'yes' if episode.success else 'no'}")


if __name__ == "__main__":
    main()
