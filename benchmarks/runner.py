"""Throughput of the runner against MuJoCo alone, on the same model and control sequence.

    python benchmarks/runner.py [--repeats 40]

Each repeat runs, one after the other (so that a busy machine slows all alike):
(a) ``mujoco.rollout``: SEGMENTS calls of a smooth 2 s trajectory (1000 control steps each) with
    ctrl = kp q_d + kd qd_d, the runner's model and start state;
(b) a Python loop of ``mj_step`` over the same controls, setting ctrl every step;
(c) one episode of the runner with full logging to an HDF5 file: a start and SEGMENTS segments
    of the same trajectory; the segment commands are timed (only their steps count). The log is
    written as a blocking runner writes it: each finished episode on the log's writer thread
    while the next one runs (episodic.logs.RunLog, writer "thread"), so the segments' time holds
    what that write takes from them (the interpreter, memory, the cores);
(d) the same with the log written before the reply that ends the episode (writer "inline"):
    what the write would cost on the reply path.
The order rotates from repeat to repeat. The ratios are the medians over the repeats of each
repeat's ratio; the rates the medians of the rates. Goal: runner (c) >= 90 % of rollout. Also
printed: where the runner's extra time goes (a segment's time beyond one rollout call, the last
segment's beyond the others': the episode's end), each runner's whole episode (start command
included) and the wait for the last queued write at the end of the run.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import mujoco
import numpy as np
from mujoco import rollout

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import RunLog
from episodic.runtime.machine import Flag
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

DURATION = 2.0       # s per trajectory / segment
SEGMENTS = 3         # segments per runner episode (and rollout calls per repeat)
WARM_UP = 3          # repeats run first and not counted (imports, caches, the file system)
GOAL = 0.90          # runner / rollout
RUNNER = "runner, full HDF5 logging"
INLINE = "runner, log written inline"
AMPLITUDE = np.array([0.3, 0.3, 0.3, 0.3, 0.5, 0.5, 0.5])  # rad


def trajectory(home: np.ndarray, n: int, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rest-to-rest excursion home -> home + AMPLITUDE -> home: q, qd, qdd (n, n_dofs)."""
    t = np.arange(n)[:, None] * dt
    w = 2 * np.pi / (n * dt)
    q = home + AMPLITUDE * 0.5 * (1 - np.cos(w * t))
    qd = AMPLITUDE * 0.5 * w * np.sin(w * t)
    qdd = AMPLITUDE * 0.5 * w**2 * np.cos(w * t)
    return q, qd, qdd


def rollout_timer(runner: Runner, ctrl: np.ndarray) -> Callable[[], list[float]]:
    """A function that runs SEGMENTS ``mujoco.rollout`` calls of ``ctrl`` (n, n_dofs) N m from
    the runner's start state and returns the s each took."""
    m = runner.scene.model
    d = mujoco.MjData(m)
    d.qpos[runner.scene.qpos_adr] = runner.robot.home
    mujoco.mj_forward(m, d)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    start = np.empty(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d, start, spec)
    control = np.zeros((1, len(ctrl), m.nu))
    control[0][:, runner.scene.actuator] = ctrl
    roll = rollout.Rollout(nthread=0)

    def run() -> list[float]:
        times = []
        for _ in range(SEGMENTS):
            t0 = time.perf_counter()
            roll.rollout(m, d, start, control)
            times.append(time.perf_counter() - t0)
        return times

    return run


def loop_timer(runner: Runner, ctrl: np.ndarray) -> Callable[[], list[float]]:
    """A function that steps ``ctrl`` (n, n_dofs) N m SEGMENTS times in a Python ``mj_step``
    loop from the runner's start state and returns the s each took."""
    m = runner.scene.model
    d = mujoco.MjData(m)
    act = runner.scene.actuator

    def run() -> list[float]:
        times = []
        for _ in range(SEGMENTS):
            mujoco.mj_resetData(m, d)
            d.qpos[runner.scene.qpos_adr] = runner.robot.home
            mujoco.mj_forward(m, d)
            t0 = time.perf_counter()
            for row in ctrl:
                d.ctrl[act] = row
                mujoco.mj_step(m, d)
            times.append(time.perf_counter() - t0)
        return times

    return run


def runner_timer(runner: Runner, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                 wholes: list[float]) -> Callable[[], list[float]]:
    """A function that runs one episode (start + SEGMENTS segments of q, qd, qdd) and returns the
    s each segment command took; appends the whole episode's s (start included) to ``wholes``."""
    episodes = iter(range(1, 1 << 30))

    def run() -> list[float]:
        e = next(episodes)
        begin = time.perf_counter()
        reply = runner.send(StartCommand(e, SEGMENTS))
        assert reply.flag == Flag.OK, reply.message
        times = []
        for k in range(1, SEGMENTS + 1):
            cmd = TrajectoryCommand(e, k, SEGMENTS, q, qd, qdd)
            t0 = time.perf_counter()
            reply = runner.send(cmd)
            times.append(time.perf_counter() - t0)
            assert reply.flag == Flag.OK and reply.n_steps == len(q), reply.message
        wholes.append(time.perf_counter() - begin)
        return times

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=40, help="repeats (medians over them)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, \
            Runner(make_task("reach"), log=Path(tmp) / "bench.h5", seed=0, keep_episodes=False) as runner, \
            Runner(make_task("reach"), seed=0, keep_episodes=False) as inline:
        inline.log = RunLog(Path(tmp) / "inline.h5", inline.metadata(), writer="inline")
        robot = runner.robot
        n = int(round(DURATION * robot.control_rate))
        q, qd, qdd = trajectory(robot.home, n, robot.control_dt)
        ctrl = robot.kp * robot.clamp(q) + robot.kd * qd
        wholes: dict[str, list[float]] = {RUNNER: [], INLINE: []}
        timers = {"mujoco.rollout (one call per segment)": rollout_timer(runner, ctrl),
                  "Python mj_step loop": loop_timer(runner, ctrl),
                  RUNNER: runner_timer(runner, q, qd, qdd, wholes[RUNNER]),
                  INLINE: runner_timer(inline, q, qd, qdd, wholes[INLINE])}
        names = list(timers)
        times: dict[str, list[list[float]]] = {name: [] for name in names}  # s per segment, per repeat
        for rep in range(WARM_UP + args.repeats):
            k = rep % len(names)
            order = names[k:] + names[:k]
            measured = {name: timers[name]() for name in order}
            if rep >= WARM_UP:
                for name, seconds in measured.items():
                    times[name].append(seconds)
        t0 = time.perf_counter()
        runner.log.close()  # the wait for what is still queued
        drain = time.perf_counter() - t0
        assert runner.log.failed_writes == inline.log.failed_writes == 0

    steps = SEGMENTS * n
    rollout_s, loop_s, runner_s, inline_s = (np.array(times[name]) for name in names)  # (repeats, SEGMENTS)
    print(f"{robot.name}, {robot.control_rate:g} Hz, {SEGMENTS} x {n}-step ({DURATION:g} s) segments per repeat, "
          f"{args.repeats} repeats interleaved; mujoco {mujoco.__version__}")
    width = max(map(len, names))
    print(f"{'':<{width}}  {'steps/s':>10}  (median)")
    for name, seconds in zip(names, (rollout_s, loop_s, runner_s, inline_s)):
        print(f"{name:<{width}}  {steps / np.median(seconds.sum(axis=1)):>10,.0f}")
    print(f"runner / rollout:   {np.median(rollout_s.sum(axis=1) / runner_s.sum(axis=1)):6.1%}  (goal >= {GOAL:.0%})")
    print(f"runner / raw loop:  {np.median(loop_s.sum(axis=1) / runner_s.sum(axis=1)):6.1%}")
    print(f"runner writing inline / rollout: {np.median(rollout_s.sum(axis=1) / inline_s.sum(axis=1)):6.1%}")
    ms = 1e3
    for name, seconds in ((RUNNER, runner_s), (INLINE, inline_s)):
        segment = np.median(seconds[:, :-1] - rollout_s[:, :-1]) * ms
        end = np.median(seconds[:, -1] - seconds[:, :-1].mean(axis=1)) * ms
        print(f"{name}: {segment:.2f} ms per segment beyond its rollout, {end:.2f} ms more for the last "
              f"(the episode's end), {np.median(wholes[name][WARM_UP:]) * ms:.2f} ms per whole episode "
              f"(start included)")
    print(f"one rollout call {np.median(rollout_s) * ms:.2f} ms; at the end of the run, {drain * ms:.2f} ms "
          f"waiting for the last queued write")


if __name__ == "__main__":
    main()
