"""Episodes per second of batch evaluation (episodic.tools.batch) against one-by-one evaluation, for
populations of two-second episodes of open-loop tasks (reach, ball_in_cup) and of gain-set tasks
whose feedback law runs in Python every step (ball_on_beam, pole_balancing), and how the
throughput scales with the number of threads.

    python benchmarks/batch.py [--episodes 64] [--repeats 3] [--tasks reach,ball_in_cup,...]

Rows, each a function of the population: one-by-one in one runner; batch on 1 .. nproc threads;
the same over the bridge (``Client.evaluate`` against `episodic serve --threads nproc`, goal: at
least 0.95 of the in-process batch on nproc threads, the two run in turn, repeat by repeat, and
their ratio taken per repeat: its median, range and PASS or FAIL); batch on nproc worker
processes (a ProcessPoolExecutor through the executor argument); a Dask LocalCluster of nproc
worker processes (skipped without Dask: pip install 'episodic[dask]').
Each figure is the median of ``--repeats`` runs after an unmeasured one of short episodes that
builds the runners and starts the workers; control steps/s beside episodes/s, since one-by-one
episodes go to their start from where the previous one ended and a batch's from the posture a
runner is built in, so their go-to-starts differ in length. Goals on 2 cores for 64 episodes: batch on 2 threads
at least 1.8x one-by-one for the open-loop tasks and 1.5x for the gain-set tasks; Dask local at
least 1.6x.
"""
from __future__ import annotations

import argparse
import logging
import math
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial

import numpy as np

from episodic.interface.commands import Command, StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tasks.ball_in_cup_swing import demo_swings, swing_commands
from episodic.tools.batch import evaluate
from task_speed import reference

DURATION = 2.0  # s of motion per episode
OPEN_LOOP, FEEDBACK = ("reach", "ball_in_cup"), ("ball_on_beam", "pole_balancing")
THREAD_GOALS = {**{t: 1.8 for t in OPEN_LOOP}, **{t: 1.5 for t in FEEDBACK}}  # batch on 2 threads / one-by-one
DASK_GOAL = 1.6
BRIDGE_GOAL = 0.95  # over the bridge / in-process, both on nproc threads
PREDICT = (4, 8, 16)  # thread counts the scaling table predicts


@dataclass(frozen=True)
class Population:
    task: str
    robot: Robot
    episodes: list[list[Command]]


def reach_episodes(robot: Robot, n: int) -> list:
    """Starts and one segment of DURATION s each, of growing amplitude."""
    home, t = robot.home, np.arange(1, int(DURATION * robot.control_rate) + 1) / (DURATION * robot.control_rate)
    out = []
    for k in range(n):
        shape = np.sin(np.pi * t)[:, None] * np.linspace(1.0, 0.3, home.size) * (0.1 + 0.002 * k)
        out.append([StartCommand(k + 1, 1, context=np.array([0.3, 0.4, 1.4])),
                    TrajectoryCommand(k + 1, 1, 1, home + shape)])
    return out


def populations(robot: Robot, n: int, tasks: list[str]) -> list[Population]:
    """``n`` episodes of about DURATION s of motion per task: the demo's perturbed swings (2.15 s,
    no wait for the catch), the gain-set tasks' reference episodes (ball_on_beam from varied ball
    positions; pole_balancing's nudge, then its swing-up law)."""
    nudge = 0.3  # s: pole_balancing's nudge before its gain set
    beam, pole = reference("ball_on_beam"), reference("pole_balancing")
    make = {
        "reach": lambda: reach_episodes(robot, n),
        "ball_in_cup": lambda: [swing_commands(robot, s, k + 1, wait=0.0) for k, (_, s) in enumerate(demo_swings(n))],
        "ball_on_beam": lambda: [beam(robot, k + 1, context=[0.01 * (k % 11 - 5)], duration=DURATION)
                                 for k in range(n)],
        "pole_balancing": lambda: [pole(robot, k + 1, duration=DURATION - nudge) for k in range(n)],
    }
    return [Population(task, robot, make[task]()) for task in tasks]


# -- rows: each evaluates a whole population and returns the control steps it ran -------------
def one_by_one(pop: Population) -> int:
    """Each episode sent to one runner, command by command (each goes to its start from where the
    previous one ended; a batch's episodes from the built runner's posture)."""
    steps = 0
    with Runner(make_task(pop.task), pop.robot, keep_episodes=False) as runner:
        for commands in pop.episodes:
            runner.send_episode(commands)
            steps += runner.machine.last_episode.n_steps
    return steps


def on_threads(pop: Population, threads: int) -> int:
    return sum(r.n_steps for r in evaluate(pop.episodes, pop.task, pop.robot, threads=threads))


def on_executor(pop: Population, executor: Executor, workers: int) -> int:
    """Two chunks per worker (one thread each)."""
    results = evaluate(pop.episodes, pop.task, pop.robot, executor=executor,
                       chunk_size=math.ceil(len(pop.episodes) / (2 * workers)))
    return sum(r.n_steps for r in results)


class OverBridge:
    """Batches over the shared-memory bridge: ``Client.evaluate`` against one `episodic serve
    --threads K` per task, started on first use (and stopped by ``stack``)."""

    def __init__(self, stack: ExitStack, threads: int):
        self.stack, self.threads, self.clients = stack, threads, {}

    def __call__(self, pop: Population) -> int:
        if pop.task not in self.clients:
            from episodic.bridge import Client
            from episodic.tools.served import ServedRunner, fresh_channel

            channel = fresh_channel("bench")
            served = self.stack.enter_context(ServedRunner(
                channel, task=pop.task, args=("--threads", str(self.threads), "--quiet")))
            served.wait_ready()
            self.clients[pop.task] = self.stack.enter_context(Client(channel, timeout=600))
        return sum(r.n_steps for r in self.clients[pop.task].evaluate(pop.episodes))


def timed_runs(rows: list[Callable[[Population], int]], pop: Population, repeats: int) -> list[tuple[list[float], int]]:
    """Each row's s per run of ``pop`` over ``repeats`` runs, the rows in turn run by run, their
    order rotated from run to run (so that no row always runs first, or right after another),
    after a short unmeasured run of each; and the control steps it ran."""
    for row in rows:
        row(Population(pop.task, pop.robot, [e[:1] for e in pop.episodes[:8]]))  # build runners, start workers
    times: list[list[float]] = [[] for _ in rows]
    steps = [0] * len(rows)
    for repeat in range(repeats):
        for k in np.roll(np.arange(len(rows)), -repeat):
            row = rows[k]
            t = time.perf_counter()
            steps[k] = row(pop)
            times[k].append(time.perf_counter() - t)
    return list(zip(times, steps))


def median_rate(row: Callable[[Population], int], pop: Population, repeats: int) -> tuple[float, float]:
    """Episodes/s and control steps/s of ``row`` on ``pop``: the median of ``repeats`` runs after a
    short unmeasured one."""
    [(times, steps)] = timed_runs([row], pop, repeats)
    seconds = statistics.median(times)
    return len(pop.episodes) / seconds, steps / seconds


def serial_share(speedup: float, k: int) -> float:
    """Amdahl's serial share s of speedup(k) = 1 / (s + (1 - s) / k), within [0, 1]."""
    return min(1.0, max(0.0, (k / speedup - 1) / (k - 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", default=",".join(OPEN_LOOP + FEEDBACK),
                        help="comma-separated tasks (default: %(default)s)")
    args = parser.parse_args()
    nproc = len(os.sched_getaffinity(0))
    robot = load_robot("wam")
    with ExitStack() as stack:
        rows: list[tuple[str, Callable[[Population], int]]] = [("one-by-one", one_by_one)]
        rows += [(f"batch {k} thr", partial(on_threads, threads=k)) for k in range(1, nproc + 1)]
        bridge = OverBridge(stack, nproc)
        rows.append((f"bridge {nproc} thr", bridge))
        pool = stack.enter_context(ProcessPoolExecutor(nproc, mp_context=multiprocessing.get_context("spawn")))
        rows.append((f"processes {nproc}", partial(on_executor, executor=pool, workers=nproc)))
        try:
            import distributed
        except ImportError:
            print("Dask is not installed (pip install 'episodic[dask]'): no Dask row")
        else:
            cluster = stack.enter_context(distributed.LocalCluster(
                n_workers=nproc, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.ERROR))
            client = stack.enter_context(distributed.Client(cluster))
            rows.append((f"dask local {nproc}", partial(on_executor, executor=client.get_executor(pure=False),
                                                        workers=nproc)))
        print(f"{args.episodes} episodes of {DURATION:g} s per task, {nproc} cores, median of {args.repeats}")
        print(f"{'task':15} {'mode':16} {'episodes/s':>10} {'x one-by-one':>12} {'steps/s':>9} {'x':>5}  "
              f"goal (2 cores)")
        threads: dict[str, list[float]] = {}
        for pop in populations(robot, args.episodes, args.tasks.split(",")):
            base = None
            for label, row in rows:
                note = ""
                if row is bridge:  # against the same threads in-process, in turn run by run
                    (local, _), (remote, steps_run) = timed_runs(
                        [partial(on_threads, threads=nproc), bridge], pop, args.repeats)
                    ratios = [a / b for a, b in zip(local, remote)]
                    ratio = statistics.median(ratios)
                    seconds = statistics.median(remote)
                    rate, steps = len(pop.episodes) / seconds, steps_run / seconds
                    note = (f"  {ratio:.3f} ({min(ratios):.3f}-{max(ratios):.3f}) of batch {nproc} thr in turn: "
                            f"goal >= {BRIDGE_GOAL} {'PASS' if ratio >= BRIDGE_GOAL else 'FAIL'}")
                else:
                    rate, steps = median_rate(row, pop, args.repeats)
                base = base or (rate, steps)
                goal = THREAD_GOALS.get(pop.task) if label == "batch 2 thr" else \
                    DASK_GOAL if label.startswith("dask") else None
                note += f"  >= {goal:.1f}" if goal else ""
                print(f"{pop.task:15} {label:16} {rate:10.2f} {rate / base[0]:12.2f} {steps:9.0f} "
                      f"{steps / base[1]:5.2f}{note}", flush=True)
                if label.startswith("batch"):
                    threads.setdefault(pop.task, []).append(rate)
    if nproc < 2:
        return
    print(f"\nthread scaling: speedup over 1 thread; Amdahl's law fitted at {nproc} threads (serial share s: "
          f"speedup(k) = 1 / (s + (1 - s) / k)) predicts more threads (on as many free cores)")
    print(f"{'task':15} " + " ".join(f"{f'{k} thr':>6}" for k in range(1, nproc + 1))
          + f" {'s':>6} " + " ".join(f"{f'{k} thr':>6}" for k in PREDICT))
    for task, rates in threads.items():
        measured = [r / rates[0] for r in rates]
        s = serial_share(measured[-1], nproc)
        print(f"{task:15} " + " ".join(f"{x:6.2f}" for x in measured) + f" {s:6.2f} "
              + " ".join(f"{1 / (s + (1 - s) / k):6.2f}" for k in PREDICT))


if __name__ == "__main__":
    main()
