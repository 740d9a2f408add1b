"""Throughput of the runner against MuJoCo alone, on the same model and control sequence.

    python benchmarks/runner.py [--repeats 9]

(a) ``mujoco.rollout``: one call over a smooth 2 s trajectory (1000 control steps) with
    ctrl = kp q_d + kd qd_d, the runner's model and start state;
(b) a Python loop of ``mj_step`` setting ctrl every step;
(c) the runner with full logging to an HDF5 file: episodes of start + 3 segments of 1000
    steps; only segment steps count, and only the segment commands (the episode's HDF5 write
    happens inside the last one) are timed.

Each figure is the median over the repeats. Goal: runner >= 50% of rollout throughput.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
from mujoco import rollout

from episodic.commands import StartCommand, TrajectoryCommand
from episodic.machine import Flag
from episodic.runner import Runner
from episodic.tasks import make_task

DURATION = 2.0       # s per trajectory / segment
SEGMENTS = 3         # segments per runner episode
EPISODES = 4         # runner episodes per repeat
AMPLITUDE = np.array([0.3, 0.3, 0.3, 0.3, 0.5, 0.5, 0.5])  # rad


def trajectory(home: np.ndarray, n: int, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rest-to-rest excursion home -> home + AMPLITUDE -> home: q, qd, qdd (n, n_dofs)."""
    t = np.arange(n)[:, None] * dt
    w = 2 * np.pi / (n * dt)
    q = home + AMPLITUDE * 0.5 * (1 - np.cos(w * t))
    qd = AMPLITUDE * 0.5 * w * np.sin(w * t)
    qdd = AMPLITUDE * 0.5 * w**2 * np.cos(w * t)
    return q, qd, qdd


def bench_rollout(runner: Runner, ctrl: np.ndarray, repeats: int) -> float:
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
    roll.rollout(m, d, start, control)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        roll.rollout(m, d, start, control)
        times.append(time.perf_counter() - t0)
    return len(ctrl) / statistics.median(times)


def bench_loop(runner: Runner, ctrl: np.ndarray, repeats: int) -> float:
    m = runner.scene.model
    d = mujoco.MjData(m)
    act = runner.scene.actuator
    times = []
    for _ in range(repeats + 1):
        mujoco.mj_resetData(m, d)
        d.qpos[runner.scene.qpos_adr] = runner.robot.home
        mujoco.mj_forward(m, d)
        t0 = time.perf_counter()
        for row in ctrl:
            d.ctrl[act] = row
            mujoco.mj_step(m, d)
        times.append(time.perf_counter() - t0)
    return len(ctrl) / statistics.median(times[1:])


def bench_runner(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, repeats: int, directory: Path) -> float:
    rates = []
    for rep in range(repeats + 1):
        with Runner(make_task("reach"), log=directory / f"bench{rep}.h5", seed=0) as runner:
            steps, elapsed = 0, 0.0
            for e in range(1, EPISODES + 1):
                reply = runner.send(StartCommand(e, SEGMENTS))
                assert reply.flag == Flag.OK, reply.message
                for k in range(1, SEGMENTS + 1):
                    cmd = TrajectoryCommand(e, k, SEGMENTS, q, qd, qdd)
                    t0 = time.perf_counter()
                    reply = runner.send(cmd)
                    elapsed += time.perf_counter() - t0
                    assert reply.flag == Flag.OK, reply.message
                    steps += reply.n_steps
        if rep:  # the first pass warms up imports, caches and the file system
            rates.append(steps / elapsed)
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="repeats per measurement (median)")
    args = parser.parse_args()

    probe = Runner(make_task("reach"), seed=0)
    robot = probe.robot
    n = int(round(DURATION * robot.control_rate))
    q, qd, qdd = trajectory(robot.home, n, robot.control_dt)
    ctrl = robot.kp * robot.clamp(q) + robot.kd * qd

    results = {}
    results["mujoco.rollout (one call)"] = bench_rollout(probe, ctrl, args.repeats * 4)
    results["Python mj_step loop"] = bench_loop(probe, ctrl, args.repeats)
    probe.close()
    with tempfile.TemporaryDirectory() as tmp:
        results["runner, full HDF5 logging"] = bench_runner(q, qd, qdd, args.repeats, Path(tmp))

    rollout_rate = results["mujoco.rollout (one call)"]
    loop_rate = results["Python mj_step loop"]
    runner_rate = results["runner, full HDF5 logging"]
    print(f"{robot.name}, {robot.control_rate:g} Hz, {n}-step (2 s) trajectories, "
          f"median of {args.repeats} repeats; mujoco {mujoco.__version__}")
    width = max(map(len, results))
    print(f"{'':<{width}}  {'steps/s':>10}")
    for name, rate in results.items():
        print(f"{name:<{width}}  {rate:>10,.0f}")
    print(f"runner / rollout:   {runner_rate / rollout_rate:6.1%}  (goal >= 50%)")
    print(f"runner / raw loop:  {runner_rate / loop_rate:6.1%}")


if __name__ == "__main__":
    main()
