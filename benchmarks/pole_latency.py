"""What a tracker's latency does to pole balancing: the reference swing-up and balance law
(examples/pole_balancing_reference.py) run on a pole of each length, hanging at rest at the
start, with the pole's angle and rate reaching the law each latency late (the task's
``sensing_latency``; noise as given, none by default). Three tables: the swing-up and balance
with the published reference's balance gains (designed for a pole seen at once); the same with
balance gains designed for the latency; and the balance law alone (gains designed for the
latency) holding a pole started near upright (phi0 = 0.1 rad at rest) for BALANCE s, which
leaves the swing-up out and asks only for the reaction the seed speaks of.

    python benchmarks/pole_latency.py [--lengths 0.3 0.4 0.5 0.7 1.0] [--latencies 0 10 20 40 60]
                                      [--noise 0] [--noise-rate 0] [--only published|designed|balance]

Each table has one row per pole length. Swing-up: per latency, whether the episode succeeded
(the pole upright and nearly still at the end) and when the pole first came up (|phi| < 0.2 rad,
s after the motion started; "never up" if it did not), with the flag when the episode did not
end OK. Balance: whether it succeeded, else how long the pole stayed within 0.2 rad of upright.
The seed's claim it tests: a shorter pole is harder, since it falls faster and leaves the robot
less time to react.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np

from episodic.interface.commands import GainsCommand, StartCommand
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "pole_balancing_reference.py"
LENGTHS = (0.3, 0.4, 0.5, 0.7, 1.0)  # m
LATENCIES = (0, 10, 20, 40, 60)      # ms
BALANCE = 5.0                        # s, the balance table's episodes
BALANCE_START = (0.1, 0.0)           # rad, rad/s: the balance table's start
TABLES = {"published": "swing-up and balance, balance gains designed for no latency (the published reference)",
          "designed": "swing-up and balance, balance gains designed for the latency",
          "balance": f"balance alone from {BALANCE_START[0]} rad at rest for {BALANCE:g} s, gains designed for the "
                     "latency"}


def reference():
    """examples/pole_balancing_reference.py as a module."""
    spec = importlib.util.spec_from_file_location("pole_balancing_reference", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a module's dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def cell(result: dict) -> str:
    """One table cell: "yes 7.7 s", "no, up 4.1 s" (came up, then fell), "no, never up", with the
    flag when the episode did not end OK."""
    up = "never up" if math.isnan(result["up_after"]) else f"up {result['up_after']:.1f} s"
    text = f"yes {result['up_after']:.1f} s" if result["success"] else f"no, {up}"
    return text if result["flag"] == "OK" else f"{text}, {result['flag']}"


def balance(ref, length: float, sensing: dict) -> str:
    """One balance table cell: the reference's balance law alone (gains designed for the
    latency) on a pole started at BALANCE_START: "yes", or "no, up 1.3 s" (how long it stayed
    within the task's upright angle), with the flag when the episode did not end OK."""
    delay = int(round(sensing["sensing_latency"] / ref.load_robot("wam").control_dt))
    params = {"pole_length": length, "horizon": BALANCE, **sensing}
    with Runner(make_task("pole_balancing", params), keep_episodes=True) as runner:
        replies = [runner.send(c) for c in (
            StartCommand(1, 1, context=list(BALANCE_START)),
            GainsCommand(1, 1, 1, ref.KP, ref.KD, wait_time=BALANCE,
                         task_gains=ref.balance_gains(length, delay=delay)))]
        episode, dt, upright = runner.episodes[0], runner.robot.control_dt, runner.task.upright
    if episode.success:
        return "yes"
    steps = episode.steps()
    phi = steps["task_state"][steps["index"] >= 1, 0]
    fallen = np.flatnonzero(np.abs(phi) >= upright)
    text = f"no, up {(fallen[0] if fallen.size else phi.size) * dt:.1f} s"
    return text if replies[-1].flag.name == "OK" else f"{text}, {replies[-1].flag.name}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Pole length x sensing latency: the pole_balancing reference's "
                                                 "success and when the pole came up.")
    parser.add_argument("--lengths", type=float, nargs="+", default=LENGTHS, help="pole lengths, m")
    parser.add_argument("--latencies", type=float, nargs="+", default=LATENCIES, help="sensing latencies, ms")
    parser.add_argument("--noise", type=float, default=0.0, help="rad, noise std on the sensed angle")
    parser.add_argument("--noise-rate", type=float, default=0.0, help="rad/s, noise std on the sensed rate")
    parser.add_argument("--only", choices=tuple(TABLES), default=None, help="print only this table")
    args = parser.parse_args()
    ref = reference()
    print(f"pole_balancing reference; swing-up from hanging at rest, {ref.DURATION:g} s; sensing noise "
          f"{args.noise:g} rad, {args.noise_rate:g} rad/s")
    for table, title in TABLES.items():
        if args.only not in (None, table):
            continue
        print(f"\n{title}")
        print("pole m | " + " | ".join(f"{latency:g} ms" for latency in args.latencies) + " | solved")
        for length in args.lengths:
            cells = []
            for latency in args.latencies:
                sensing = {"sensing_latency": latency / 1000, "sensing_noise": args.noise,
                           "sensing_noise_rate": args.noise_rate}
                if table == "balance":
                    cells.append(balance(ref, length, sensing))
                else:
                    cells.append(cell(ref.run(length, designed=table == "designed", sensing=sensing)))
            solved = sum(c.startswith("yes") for c in cells)
            print(f"{length:g} | " + " | ".join(cells) + f" | {solved}/{len(args.latencies)}", flush=True)


if __name__ == "__main__":
    main()
