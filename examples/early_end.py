"""Crash early, hold still, the reference: the three episodes that show an early end never pays,
for every task with a scripted reference (its Task.reference, found from the task registry), and
their returns as docs/control.md's table prints them.

    python examples/early_end.py [--tasks reach pole_balancing ...]

Each task's three episodes plan the same motion time as its scripted reference: the
reference itself; "hold", the start posture held throughout; "crash", a swing of j1 that trips the
joint-velocity safety abort within its first 0.1 s. The runner charges the crash the steps it left
out at the task's worst reward rate (Task.worst_reward_rate), and a task whose reward is a cost
also charges an episode shorter than its horizon (Task.scored_duration). tests/test_early_end.py
checks the order crash <= hold <= reference on every task, in-process and over the bridge.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `examples` importable when run as a script

from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand  # noqa: E402
from episodic.interface.robot import load_robot  # noqa: E402
from episodic.tasks import make_task, reference_commands, registry  # noqa: E402
from episodic.tools.batch import evaluate  # noqa: E402

WAM = load_robot("wam")
CRASH_ACCELERATION = 400.0  # rad/s^2 of j1's desired swing: its velocity limit (2.39 rad/s) within ~10 ms
CRASH_SWING = 0.5           # rad, where j1's desired swing stops

# the tasks of the registry (built-in and installed) that declare a scripted reference (Task.reference)
WITH_REFERENCE = tuple(name for name, cls in registry().items() if cls.reference is not None)


def reference_episode(name: str, robot=WAM, episode_id: int = 1) -> list:
    """The commands of task ``name``'s scripted reference (its Task.reference) on ``robot``."""
    return reference_commands(registry()[name])(robot, episode_id)


def planned_time(commands: list, robot=WAM) -> float:
    """s of motion the segments and gain sets after the start plan (samples and waits)."""
    total = 0.0
    for cmd in commands[1:]:
        if isinstance(cmd, TrajectoryCommand):
            total += len(cmd.q) / (cmd.rate or robot.control_rate)
        total += cmd.wait_time if isinstance(cmd, (TrajectoryCommand, GainsCommand)) else 0.0
    return total


def three_episodes(name: str, robot=WAM) -> dict[str, list]:
    """The task's crash, hold and reference episodes (module docstring), ids 1, 2, 3."""
    reference = reference_episode(name, robot)
    start = reference[0]
    posture = make_task(name).start_posture(robot) if start.posture is None else np.asarray(start.posture)
    n = int(round(planned_time(reference, robot) * robot.control_rate))
    t = np.arange(1, n + 1) * robot.control_dt
    hold = np.tile(posture, (n, 1))
    crash = hold.copy()
    crash[:, 0] += np.minimum(0.5 * CRASH_ACCELERATION * t**2, CRASH_SWING)

    def episode(episode_id: int, q: np.ndarray) -> list:
        first = StartCommand(episode_id, 1, context=start.context, posture=start.posture)
        return [first, TrajectoryCommand(episode_id, 1, 1, q)]

    renumbered = [dataclasses.replace(cmd, episode_id=3) for cmd in reference]
    return {"crash": episode(1, crash), "hold": episode(2, hold), "reference": renumbered}


KINDS = ("crash", "hold", "reference")


def returns(name: str) -> dict[str, object]:
    """The task's three episodes evaluated in this process: kind -> EpisodeResult."""
    episodes = three_episodes(name)
    return dict(zip(episodes, evaluate(list(episodes.values()), name, threads=2)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Returns of a crash, holding still and the reference, per task.")
    parser.add_argument("--tasks", nargs="+", default=list(WITH_REFERENCE),
                        help="tasks (default: those with a reference)")
    args = parser.parse_args(argv)
    print("| task | crash | hold still | reference |\n|---|---|---|---|")
    for name in args.tasks:
        results = returns(name)
        cells = [f"{results[k].episode_return:.4g} ({results[k].flag.name}{', success' if results[k].success else ''})"
                 for k in KINDS]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
