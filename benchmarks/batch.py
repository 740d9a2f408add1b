"""Episodes per second of in-process batch evaluation (episodic.batch) against one-by-one
evaluation in one runner, for 16 reach and 16 ball_in_cup episodes, on 1 and 2 threads.

    python benchmarks/batch.py [--episodes 16] [--repeats 3]

Each figure is the median of ``--repeats`` runs (the machine may be shared).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from episodic.batch import evaluate
from episodic.commands import StartCommand, TrajectoryCommand
from episodic.demo import demo_swings, swing_commands
from episodic.robot import load_robot
from episodic.runner import Runner
from episodic.tasks import make_task


def reach_episodes(robot, n: int) -> list:
    home, t = robot.home, np.arange(1, 1001) / 1000
    out = []
    for k in range(n):  # two seconds of motion each at 500 Hz
        shape = np.sin(np.pi * t)[:, None] * np.linspace(1.0, 0.3, home.size) * (0.1 + 0.01 * k)
        out.append([StartCommand(k + 1, 1, context=np.array([0.3, 0.4, 1.4])),
                    TrajectoryCommand(k + 1, 1, 1, home + shape)])
    return out


def one_by_one(episodes, task: str, robot) -> None:
    with Runner(make_task(task), robot, log=None, keep_episodes=False) as runner:
        for commands in episodes:
            for command in commands:
                if runner.send(command).episode_done:
                    break


def median_rate(run, n: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return n / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    robot = load_robot("wam")
    n = args.episodes
    populations = {"reach": reach_episodes(robot, n),
                   "ball_in_cup": [swing_commands(robot, s, k + 1) for k, (_, s) in enumerate(demo_swings(n))]}
    print(f"{'task':12} {'mode':14} {'episodes/s':>10} {'ratio':>6}")
    for task, episodes in populations.items():
        base = median_rate(lambda: one_by_one(episodes, task, robot), n, args.repeats)
        print(f"{task:12} {'one-by-one':14} {base:10.2f} {1.0:6.2f}")
        for threads in (1, 2):
            rate = median_rate(lambda: evaluate(episodes, task, robot, threads=threads), n, args.repeats)
            print(f"{task:12} {f'batch {threads} thr':14} {rate:10.2f} {rate / base:6.2f}")


if __name__ == "__main__":
    main()
