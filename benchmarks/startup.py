"""Start-up: how long a user waits for ``import episodic``, ``episodic --help`` and a served runner.

    python benchmarks/startup.py [--runs 9] [--task reach]

Each figure is the median wall time of ``--runs`` fresh interpreters (``python -c pass``,
the floor every command pays, measured in the same rounds): ``import episodic``;
``python -m episodic --help``; ``python -m episodic serve --quiet``, from starting the process
until its channel exists and a client attaches to it ("ready"), and until a first command is
answered (a reset with no episode running: answered at once). The rounds interleave the
commands, so load on the machine hits them alike. The interpreters cache their bytecode, as an
installed package's is (PYTHONDONTWRITEBYTECODE is dropped and PYTHONPYCACHEPREFIX points to a
temporary directory, so the source tree gets no __pycache__), after a first round not counted.

Then which heavy modules ``--help`` imports (mujoco, h5py, scipy, matplotlib, dask, posix_ipc),
and where a served runner's start-up goes: its
import time by package (``-X importtime``, the modules' own time summed per top-level
package) against its ready time.

Goals (issue 16, goal 6): the times measured and reported; ``--help`` imports none of the heavy
modules (the CLI imports them in the commands that use them).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

from episodic.bridge import Client
from episodic.bridge.client import ProtocolError
from episodic.interface.vocabulary import Flag
from episodic.tools.served import fresh_channel

HEAVY = ("mujoco", "h5py", "scipy", "matplotlib", "dask", "distributed", "posix_ipc")
POLL = 0.002        # s between a client's attempts to attach while the runner starts
READY_TIMEOUT = 60  # s
CHECK_HELP = ("import sys; from episodic.cli.main import main\n"
              "try: main(['--help'])\n"
              "except SystemExit: pass\n"
              f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")


def run_s(args: list[str], env: dict[str, str]) -> float:
    """Wall time s of ``python args`` run to its end (its output discarded; it must succeed)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def serve_s(task: str, env: dict[str, str], extra: list[str] = (),
            stderr=subprocess.DEVNULL) -> tuple[float, float, str]:
    """Start ``episodic serve`` and stop it: s from its start until a client attached to its
    channel, s until that client's first command was answered, and its stderr when captured."""
    channel = fresh_channel("startup")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *extra, "-m", "episodic", "serve", "--task", task, "--quiet",
                             "--channel", channel], stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env)
    try:
        while True:
            try:
                client = Client(channel, timeout=30)
                break
            except (FileNotFoundError, ProtocolError):
                if proc.poll() is not None or time.perf_counter() - t0 > READY_TIMEOUT:
                    sys.exit(f"episodic serve did not start (exit {proc.poll()})")
                time.sleep(POLL)
        ready = time.perf_counter() - t0
        with client:
            reply = client.reset()
            answered = time.perf_counter() - t0
            assert reply.flag == Flag.OK, reply
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    return ready, answered, err or ""


def import_ms_by_package(importtime: str) -> tuple[float, Counter]:
    """From ``-X importtime`` output: the total import time ms, and each top-level package's own ms."""
    own: Counter = Counter()
    total = 0.0
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = (part for part in line.removeprefix("import time:").split("|"))
        own[name.strip().split(".")[0]] += int(self_us) / 1e3
        if not name.startswith("  "):  # a top-level import: its cumulative time holds its children's
            total += int(cumulative_us) / 1e3
    return total, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="fresh processes per figure (median)")
    parser.add_argument("--task", default="reach", help="task of the served runner")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPYCACHEPREFIX": cache}
        measure(args.runs, args.task, env)


def measure(runs: int, task: str, env: dict[str, str]) -> None:
    """Run and print the figures (subprocesses in the environment ``env``)."""
    commands = {"python -c pass": ["-c", "pass"], "import episodic": ["-c", "import episodic"],
                "episodic --help": ["-m", "episodic", "--help"]}
    served = ("episodic serve: ready", "episodic serve: first reply")
    times: dict[str, list[float]] = {name: [] for name in [*commands, *served]}
    for run in range(runs + 1):
        if run == 1:  # the first round only filled the bytecode cache
            times = {name: [] for name in times}
        for name, command in commands.items():
            times[name].append(run_s(command, env))
        for name, seconds in zip(served, serve_s(task, env)):
            times[name].append(seconds)
    floor = statistics.median(times["python -c pass"])
    print(f"start-up, median of {runs} fresh processes (task {task}); ms, and ms above the floor")
    for name, values in times.items():
        ms = 1e3 * statistics.median(values)
        print(f"  {name:<28} {ms:8.0f} ms  {ms - 1e3 * floor:+8.0f} ms")

    heavy = subprocess.run([sys.executable, "-c", CHECK_HELP], capture_output=True, text=True, check=True,
                           env=env).stderr
    print(f"heavy modules imported by --help: {heavy.strip() or 'none'} (goal: none of {', '.join(HEAVY)})")

    ready, _, err = serve_s(task, env, ["-X", "importtime"], stderr=subprocess.PIPE)
    total, own = import_ms_by_package(err)
    print(f"episodic serve, one run with -X importtime: ready after {1e3 * ready:.0f} ms, of which imports "
          f"{total:.0f} ms; own import time by package:")
    for package, ms in own.most_common(8):
        print(f"  {package:<20} {ms:7.0f} ms")


if __name__ == "__main__":
    main()
