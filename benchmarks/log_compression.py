"""Which filter compact logs use, and what `--compress` costs a runner.

    python benchmarks/log_compression.py [--bic LOG] [--episodes 10] [--rounds 3] [--part filters|runner|tasks]

1. Filters: the columns of ``--episodes`` episodes of a ball-in-a-cup log (``--bic``; default a
   fresh one of the reference swing) and of a reach log (made here: three 1 s wave segments per
   episode) are written to a new file per filter, one dataset per column as format-1 logs held
   them (one HDF5 call each, chunked and filtered as episodic.logs.compression.creation makes
   them; format 2 keeps the step columns in one table of rows, which compresses less), ``--rounds``
   times interleaved. Printed per log and filter: bytes per episode, ratio to plain, write CPU
   time per episode (process time, median of the rounds) and the time to read every dataset back.
2. The runner: blocking Runners with a log, compression off and on (EPISODIC_LOG_FILTER=gzip)
   alternately, ``--rounds`` times, run the same reach and ball-in-a-cup episodes; printed: wall
   and CPU time (the process's, all threads: steadier on a shared machine) per episode of each
   and the ratio on/off per round (one run: the same machine load).
3. Every task: ``--episodes`` episodes of its scripted reference on the WAM, logged plain, then
   compacted with gzip and with Blosc (`episodic compact`); printed: bytes per episode of each.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import read_episodes
from episodic.logs.compression import DEFLATE_LEVEL, ENV, FILTERS, Filter, creation
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tasks.ball_in_cup_swing import reference_commands

LZF = 32000  # h5py's own LZF filter
CANDIDATES = [
    Filter("gzip 1", h5py.h5z.FILTER_DEFLATE, (1,), shuffle=False),
    Filter("gzip 1 + shuffle", h5py.h5z.FILTER_DEFLATE, (1,), shuffle=True),
    Filter(f"gzip {DEFLATE_LEVEL} + shuffle", h5py.h5z.FILTER_DEFLATE, (DEFLATE_LEVEL,), shuffle=True),
    Filter("gzip 6 + shuffle", h5py.h5z.FILTER_DEFLATE, (6,), shuffle=True),
    Filter("gzip 9 + shuffle", h5py.h5z.FILTER_DEFLATE, (9,), shuffle=True),
    Filter("lzf", LZF, (), shuffle=False),
    Filter("lzf + shuffle", LZF, (), shuffle=True),
    Filter("blosc zstd 5 + bitshuffle", FILTERS["blosc"].filter_id, FILTERS["blosc"].options, shuffle=False,
           plugin=True),
    Filter("blosc lz4 5 + bitshuffle", 32001, (0, 0, 0, 0, 5, 2, 1), shuffle=False, plugin=True),
]


def datasets(path: Path, n: int) -> list[list[tuple[str, np.ndarray]]]:
    """The arrays (a name in its episode, values) of the first ``n`` episodes of the log at
    ``path``, read through episodic.logs (any log format): the initial state, each step column
    and each segment column, one dataset each (format 1's layout: the filters compared on the
    columns' own values)."""
    out = []
    for ep in read_episodes(path, list(range(n))):
        arrays = [("initial_state", ep.initial_state)]
        arrays += [(f"steps/{name}", values) for name, values in ep.steps.items()]
        arrays += [(f"segments/{name}", values) for name, values in ep.segments.items()]
        out.append([(key, values) for key, values in arrays if np.asarray(values).dtype.kind != "O"])
    return out


def write(episodes, path: Path, use: Filter | None) -> tuple[float, int]:
    """Write ``episodes`` to a new file at ``path``, each dataset as the writer would with ``use``;
    (process seconds of the writes, file bytes)."""
    plain = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plain.set_obj_track_times(False)
    with h5py.File(path, "w") as f:
        groups = []
        for i, found in enumerate(episodes):  # the groups first, outside the timing
            g = f.create_group(f"{i:06d}")
            for key, _ in found:
                if "/" in key:
                    g.require_group(key.rsplit("/", 1)[0])
            groups.append(g)
        start = time.process_time()
        for g, found in zip(groups, episodes, strict=True):
            for key, values in found:
                values = np.asarray(values)
                if values.dtype.kind == "O":
                    g[key] = values
                    continue
                dcpl = plain if use is None else creation(values.shape, values.dtype.itemsize, plain, use)
                d = h5py.h5d.create(g.id, key.encode(), h5py.h5t.py_create(values.dtype), h5py.h5s.create_simple(
                    values.shape) if values.shape else h5py.h5s.create(h5py.h5s.SCALAR), dcpl=dcpl)
                if values.size:
                    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(values))
        f.flush()
        seconds = time.process_time() - start
    return seconds, path.stat().st_size


def read_all(path: Path) -> float:
    """Seconds to read every dataset of the file at ``path``."""
    start = time.perf_counter()
    with h5py.File(path, "r") as f:
        f.visititems(lambda _, item: item[()] if isinstance(item, h5py.Dataset) else None)
    return time.perf_counter() - start


def reach_episode(runner: Runner, episode_id: int) -> None:
    home = runner.robot.home
    t = np.linspace(0, 2 * np.pi, 500)[:, None]
    runner.send(StartCommand(episode_id, 3, context=np.array([0.5, 0.2, 1.5])))
    for k in range(1, 4):
        runner.send(TrajectoryCommand(episode_id, k, 3, home + 0.2 * np.sin(t + k) * (1 - np.cos(t)) / 2))


def bic_episode(runner: Runner, episode_id: int) -> None:
    for command in reference_commands(runner.robot, episode_id):
        runner.send(command)


def make_log(path: Path, task: str, n: int) -> Path:
    with Runner(make_task(task), log=path, seed=0, keep_episodes=False) as runner:
        for i in range(n):
            (reach_episode if task == "reach" else bic_episode)(runner, i + 1)
    return path


def filters(logs: dict[str, Path], n: int, rounds: int, folder: Path) -> None:
    choices: list[Filter | None] = [None, *[c for c in CANDIDATES if c.available()]]
    for task, log in logs.items():
        episodes = datasets(log, n)
        results: dict[str, list[tuple[float, int, float]]] = {}
        for _ in range(rounds):
            for use in choices:
                name = "plain (contiguous)" if use is None else use.name
                out = folder / "candidate.h5"
                seconds, size = write(episodes, out, use)
                results.setdefault(name, []).append((seconds, size, read_all(out)))
                out.unlink()
        plain = results["plain (contiguous)"][0][1]
        print(f"\n{task}: {len(episodes)} episodes of {log}")
        print(f"{'filter':28} {'kB/episode':>11} {'ratio':>6} {'write ms/ep':>12} {'read ms/ep':>11}")
        for name, rows in results.items():
            size = rows[0][1]
            write_ms = 1e3 * statistics.median(r[0] for r in rows) / len(episodes)
            read_ms = 1e3 * statistics.median(r[2] for r in rows) / len(episodes)
            print(f"{name:28} {size / len(episodes) / 1e3:11.1f} {plain / size:6.2f} {write_ms:12.2f} {read_ms:11.2f}")


def runner_speed(n: int, rounds: int, folder: Path) -> None:
    print(f"\nrunner, blocking, {n} episodes per task and round; EPISODIC_LOG_FILTER off / gzip")
    for task, episode in (("reach", reach_episode), ("ball_in_cup", bic_episode)):
        ratios, cpu_ratios, per = [], [], {"off": [], "on": []}
        for _ in range(rounds):
            seconds, cpu = {}, {}
            for state in ("off", "on"):
                if state == "on":
                    os.environ[ENV] = "gzip"
                else:
                    os.environ.pop(ENV, None)
                path = folder / f"{task}_{state}.h5"
                start, start_cpu = time.perf_counter(), time.process_time()
                with Runner(make_task(task), log=path, seed=0, keep_episodes=False, overwrite=True) as runner:
                    for i in range(n):
                        episode(runner, i + 1)
                seconds[state] = time.perf_counter() - start
                cpu[state] = time.process_time() - start_cpu
                per[state].append(seconds[state] / n)
                size = path.stat().st_size / n
                print(f"  {task} {state}: {1e3 * seconds[state] / n:.1f} ms/episode wall, "
                      f"{1e3 * cpu[state] / n:.1f} ms CPU, {size / 1e3:.1f} kB/episode")
            ratios.append(seconds["on"] / seconds["off"])
            cpu_ratios.append(cpu["on"] / cpu["off"])
        os.environ.pop(ENV, None)
        print(f"{task}: ms/episode off {1e3 * statistics.median(per['off']):.1f}, on "
              f"{1e3 * statistics.median(per['on']):.1f}; on/off per round, wall "
              f"{', '.join(f'{r:.3f}' for r in ratios)} (median {statistics.median(ratios):.3f}), CPU "
              f"{', '.join(f'{r:.3f}' for r in cpu_ratios)} (median {statistics.median(cpu_ratios):.3f})")


def task_sizes(n: int, folder: Path) -> None:
    from episodic.tasks import TASKS, reference_commands
    from episodic.tools.compact import compact

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the references are the repository's examples/
    names = ["gzip"] + (["blosc"] if FILTERS["blosc"].available() else [])
    print(f"\nsize per episode of each task's reference ({n} episodes): plain, {', '.join(names)}")
    for name, cls in TASKS.items():
        if cls.reference is None:
            continue
        path = folder / f"{name}.h5"
        with Runner(make_task(name), log=path, seed=0, keep_episodes=False, overwrite=True) as runner:
            for i in range(n):
                for command in reference_commands(cls)(runner.robot, i + 1):
                    runner.send(command)
        sizes = [path.stat().st_size] + [compact(path, folder / f"{name}_{f}.h5", f, overwrite=True).bytes_after
                                         for f in names]
        print(f"{name:16} " + "  ".join(f"{size / n / 1e3:9.1f} kB" + (f" ({sizes[0] / size:.2f}x)" if k else "")
                                        for k, size in enumerate(sizes)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bic", type=Path, default=None, help="a ball-in-a-cup log (default: made here)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--part", choices=("filters", "runner", "tasks"), default=None, help="only this part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.part in (None, "filters"):
            logs = {"ball_in_cup": args.bic or make_log(folder / "bic.h5", "ball_in_cup", args.episodes),
                    "reach": make_log(folder / "reach.h5", "reach", args.episodes)}
            filters(logs, args.episodes, args.rounds, folder)
        if args.part in (None, "runner"):
            runner_speed(args.episodes, args.rounds, folder)
        if args.part in (None, "tasks"):
            task_sizes(args.episodes, folder)


if __name__ == "__main__":
    main()
