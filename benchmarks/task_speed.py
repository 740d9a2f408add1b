"""Simulation speed of each benchmark task, and what closing the loop costs.

    python benchmarks/task_speed.py [--repeats 5] [--only closed-loop|tasks|air]

Tasks: each task's scripted reference episode (examples/<task>_reference.py) run in-process by a
blocking Runner, median of repeats: steps/s, the real-time factor (simulated s per wall-clock
s), the episode's return and whether it succeeded.

Air before and after (issue 33): every task with air, its reference episode on MuJoCo's own air
(``air=implicit``, the physics before) and on the explicit air (``air=explicit``, the default),
alternating repeat by repeat: episodes/s of each (median over repeats, the commands after the
start timed, logging included), their ratio, and each one's return and success.

Closed loop against open loop (goal: closed loop at >= 75 % of the open loop's steps/s). For each
task with a feedback law and a reference: the reference's motion (its commands after the start)
closed-loop, and the same motion open-loop: the closed-loop run's desired q, qd, qdd replayed as
trajectory segments under the same joint gains and feedforward, without task gains (each
segment starting with one step at the held posture, so that it does not jump). And for the
reach task, a 2 s move and 1 s hold under inverse dynamics at the measured state, and under
gravity compensation with integral action, each against the same segment under gravity
compensation alone. Both runs of a pair alternate, repeat by repeat; each time spans the
commands after the start, logging included.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from episodic.interface.commands import Feedforward, GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag
from episodic.runtime.runner import Runner
from episodic.tasks import TASKS, make_task

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GOAL = 0.75  # closed-loop steps/s at least this share of the open loop's


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


def run(task: str, commands: list) -> tuple[float, int, object]:
    """Send ``commands`` (a start first) to a fresh blocking runner: the wall-clock s of the
    commands after the start, the steps they ran, and the episode. RuntimeError when a command
    is not run as sent."""
    with Runner(make_task(task)) as runner:
        replies = [runner.send(commands[0])]
        began = time.perf_counter()
        replies += [runner.send(command) for command in commands[1:]]
        wall = time.perf_counter() - began
        (episode,) = runner.episodes
    refused = [f"{reply.flag.name}: {reply.message}" for reply in replies if reply.flag != Flag.OK]
    if refused:
        raise RuntimeError(f"{task}: {refused[0]}")
    return wall, int(np.count_nonzero(episode.column("index") >= 1)), episode


def open_loop(commands: list, episode) -> list:
    """The closed-loop episode's motion as open-loop commands: per command after the start, its
    gains without task gains (a gains command held for 0 s) and its logged desired q, qd, qdd as
    one trajectory segment, led by one step at the posture held before it."""
    steps = episode.steps()
    index = steps["index"]
    # where the move to the start ended; not simulated (episodic.runtime.start): the start posture, at rest
    held = steps["q_d"][index == 0][-1] if (index == 0).any() else steps["q"][0]
    out = []
    for command in commands[1:]:
        if isinstance(command, GainsCommand):
            out.append(dataclasses.replace(command, wait_time=0.0, task_gains=None))
        rows = index == command.index
        if not rows.any():
            continue
        lead = {"q_d": held, "qd_d": steps["qd_d"][rows][0], "qdd_d": steps["qdd_d"][rows][0]}
        q, qd, qdd = (np.vstack([lead[k], steps[k][rows]]) for k in ("q_d", "qd_d", "qdd_d"))
        out.append(TrajectoryCommand(1, 0, 0, q, qd, qdd))
        held = q[-1]
    n = len(out)
    return [dataclasses.replace(commands[0], max_commands=n)] + [
        dataclasses.replace(c, index=i, max_commands=n) for i, c in enumerate(out, 1)]


def reach_pair(mode: Feedforward, ki: float) -> tuple[list, list]:
    """Closed and open loop for the reach task: a 2 s move and 1 s hold under ``mode`` with the
    integral gain ``ki`` kp per s, and under gravity compensation alone."""
    robot = load_robot("wam")
    home = robot.home
    move = min_jerk(home, home + np.array([0.3, -0.2, 0.3, -0.3, 0.3, 0.3, 0.3]), 2.0, robot.control_dt)
    trajectory = TrajectoryCommand(1, 2, 2, move.q, move.qd, move.qdd, wait_time=1.0)

    def commands(mode: Feedforward, ki: float) -> list:
        gains = GainsCommand(1, 1, 2, robot.kp, robot.kd, ki * robot.kp, mode)
        return [StartCommand(1, 2, context=np.array([0.6, 0.1, 1.5])), gains, trajectory]

    return commands(mode, ki), commands(Feedforward.GRAVITY_COMPENSATION, 0.0)


def closed_against_open(repeats: int) -> None:
    print(f"closed loop against open loop (goal: closed >= {GOAL:.0%} of open)")
    print(f"{'run':<30} {'steps':>7} {'closed steps/s':>15} {'open steps/s':>13} {'ratio':>7}  goal")
    pairs = {}
    for name, task in TASKS.items():
        make = reference(name)
        if make is not None and task.gains_help:
            closed = make(load_robot("wam"), episode_id=1)
            pairs[f"{name}, feedback law"] = (name, closed, open_loop(closed, run(name, closed)[2]))
    pairs["reach, inverse dynamics"] = ("reach", *reach_pair(Feedforward.INVERSE_DYNAMICS, 0.0))
    pairs["reach, integral action"] = ("reach", *reach_pair(Feedforward.GRAVITY_COMPENSATION, 2.0))
    for label, (task, closed, opened) in pairs.items():
        times, steps = {"closed": [], "open": []}, {}
        for _ in range(repeats):  # the two alternate, so that a load on the machine hits both
            for which, commands in (("closed", closed), ("open", opened)):
                wall, steps[which], _ = run(task, commands)
                times[which].append(wall)
        rate = {which: steps[which] / float(np.median(times[which])) for which in times}
        ratio = rate["closed"] / rate["open"]
        print(f"{label:<30} {steps['closed']:>7} {rate['closed']:>15,.0f} {rate['open']:>13,.0f} {ratio:>7.0%}  "
              f"{'met' if ratio >= GOAL else 'MISSED'}")


def task_speeds(repeats: int) -> None:
    print(f"{'task':<16} {'steps':>7} {'steps/s':>10} {'x real time':>12} {'return':>10} success")
    for name in TASKS:
        make = reference(name)
        if make is None:
            continue
        times = []
        for _ in range(repeats):
            with Runner(make_task(name)) as runner:
                commands = make(runner.robot, episode_id=1)
                began = time.perf_counter()
                for command in commands:
                    runner.send(command)
                times.append(time.perf_counter() - began)
                (episode,) = runner.episodes
        wall = float(np.median(times))
        steps = episode.n_steps
        dt = runner.robot.control_dt
        print(f"{name:<16} {steps:>7} {steps / wall:>10,.0f} {steps * dt / wall:>12,.0f} "
              f"{episode.episode_return:>10.4g} {'yes' if episode.success else 'no'}")


def air_before_after(repeats: int) -> None:
    print(f"air before (implicit) and after (explicit): reference episodes/s, medians of {repeats} interleaved")
    print(f"{'task':<16} {'before ep/s':>11} {'after ep/s':>10} {'ratio':>6}  {'return before':>13} "
          f"{'return after':>12}  success")
    modes = ("implicit", "explicit")
    for name, cls in TASKS.items():
        make = reference(name)
        if make is None or "air" not in cls.declared():
            continue
        walls: dict[str, list[float]] = {mode: [] for mode in modes}
        episodes = {}
        for _ in range(repeats):  # the two alternate, so that a load on the machine hits both
            for mode in modes:
                with Runner(make_task(name, {"air": mode})) as runner:
                    commands = make(runner.robot, episode_id=1)
                    runner.send(commands[0])
                    began = time.perf_counter()
                    for command in commands[1:]:
                        runner.send(command)
                    walls[mode].append(time.perf_counter() - began)
                    (episodes[mode],) = runner.episodes
        rate = {mode: 1.0 / float(np.median(walls[mode])) for mode in modes}
        before, after = episodes["implicit"], episodes["explicit"]
        ratio = rate["explicit"] / rate["implicit"]
        print(f"{name:<16} {rate['implicit']:>11.2f} {rate['explicit']:>10.2f} {ratio:>5.2f}x  "
              f"{before.episode_return:>13.5g} {after.episode_return:>12.5g}  "
              f"{'yes' if before.success else 'no'} -> {'yes' if after.success else 'no'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("tasks", "closed-loop", "air"), help="run one of the three parts")
    args = parser.parse_args()
    if args.only == "air":
        air_before_after(args.repeats)
        return
    if args.only != "closed-loop":
        task_speeds(args.repeats)
    if args.only != "tasks":
        if args.only is None:
            print()
        closed_against_open(args.repeats)


if __name__ == "__main__":
    main()
