"""Cost as work grows: a control step, an episode's write, a refusal, `episodic info` and
`episodic replay` as segments, episodes and logs get longer, and the runner's memory over a long run.

    python benchmarks/scaling.py [--episodes 10000] [--refusals 30000] [--repeats 5] [--replay-all]

Blocking reach runners logging to temporary files; about three minutes on 2 cores with the
defaults, and 0.5 GB of files (``--episodes 100000 --refusals 300000 --replay-all`` is the long
version: about half an hour, 5 GB):

(a) per-step cost by segment length: episodes of a start, one segment of 0.1 s to 40 s (every
    joint out and back, in periods of at most 2 s) and a 10-step segment that ends the episode;
    the long segment's command is timed (the episode's write comes with the last one): µs per
    control step, median of ``--repeats`` rounds that take the lengths in turn;
(b) an episode's write by its steps: the episodes of (a) written again (``RunLog.write_episode``),
    a round of one per length at a time into a new log; a fit of a fixed cost plus a cost per step;
(c) refusals: commands refused outside any episode (each appends a row to /rejected): ms per
    refusal over the first 1,000 and over 1,000 more after ``--refusals`` of them;
(d) a long run, in the log of (c): ``--episodes`` short episodes (a start and a 50-step
    segment); the runner's resident memory (RSS) at episode 1,000 and at the last, and ms per
    episode over episodes 1,001-2,000 and over the last 1,000; then a 1,000-episode log to compare;
(e) ``episodic info`` on both logs: in-process (time, and bytes the process read by
    /proc/self/io) and in a subprocess as a user runs it (interpreter start and imports included);
(f) ``episodic.tools.replay.replay`` of 1 episode of each log and of 10 of the long one, in turn
    (medians of ``--repeats``), and of the whole short log (``--replay-all``: also of the long
    one); the peak RSS of ``episodic replay`` of one episode and of a whole log, in subprocesses.

The in-process figures are this process's CPU time (the kernel's page-cache work for a write
included; other processes' load on the cores counts less in it than in wall time), (a), (b) and
(f) print the wall time too. A write goes to the page cache: its wall time per MB varies with
the machine's other I/O. The RSS is this process's: it includes what (a) left allocated.

Goals (issue 16, goal 5): the cost per control step flat in the segment's length (40 s over
0.1 s at most 1.1); the write linear in the steps (its cost per step from 20 s to 40 s over
that from 0.1 s to 20 s about 1, at most 1.2); a refusal as cheap after 30,000 as at the start,
and an episode at the end of the long run as at its start (at most 1.1); RSS growth under 5 %;
info under a second on the long log, reading a small part of it; a replay's cost proportional
to the episodes replayed (per episode the same for 10 and for a whole log; one episode of the
long log as fast as one of the short log: at most 1.2) and its memory independent of how many
it replays (at most 1.2). Each ratio is printed with its goal in a summary at the end.
"""
from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from episodic.cli.main import main as cli
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import RunLog
from episodic.logs.episode import EpisodeBuffer
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.replay import replay
from process import rss_kib

LENGTHS = (0.1, 0.4, 2.0, 10.0, 20.0, 40.0)  # s of the timed segment in (a) and (b); 40 s is the longest allowed
PERIOD = 2.0      # s, longest period of a segment's excursion
SPEED = 0.15      # rad of excursion per s of period (peak joint speed 0.47 rad/s)
WRITES = 10       # times each episode of (a) is written in (b)
TIMED = 1000      # refusals per timed batch, episodes per timed stretch, episode of the first RSS sample
SHORT_STEPS = 50  # control steps of a long-run episode's segment
SHORT_LOG = 1000  # episodes of the short log
REPLAYED = 10     # episodes of the long log replayed together
GOALS = {"per step": 1.1, "write": 1.2, "refusal": 1.1, "episode": 1.1, "rss": 5.0, "info": 1.0, "replay": 1.2}
PEAK = """import sys
from episodic.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as end:
    code = end.code
print(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")), file=sys.stderr)
sys.exit(code)
"""  # `episodic ARGS` in a fresh interpreter, then its peak RSS on stderr ("VmHWM: N kB")

Rows = list[tuple[str, str]]  # the summary: what, and its figure against its goal


def verdict(ratio: float, goal: float) -> str:
    return f"{ratio:.2f} (goal ≤ {goal:g}: {'met' if ratio <= goal else 'MISSED'})"


def clocks() -> np.ndarray:
    """Now, s: the wall clock and this process's CPU time."""
    return np.array([time.perf_counter(), time.process_time()])


# -- (a), (b) ------------------------------------------------------------------------
def excursion(start: np.ndarray, n: int, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every joint out and back from ``start`` in whole periods of min(n dt, PERIOD) s over n
    control steps of dt s, ending at rest where it began: q, qd, qdd (n, n_dofs)."""
    period = min(n * dt, PERIOD)
    w, half = 2 * np.pi / period, np.full_like(start, SPEED * period / 2)
    t = np.arange(1, n + 1)[:, None] * dt
    return start + half * (1 - np.cos(w * t)), half * w * np.sin(w * t), half * w**2 * np.cos(w * t)


def segments_by_length(path: Path, repeats: int) -> tuple[dict[float, np.ndarray], dict[float, int],
                                                          list[tuple[float, EpisodeBuffer]]]:
    """(a): per segment length, the median µs per control step of its command (wall, CPU) and
    its steps; and the episodes with their segment's length (kept for (b))."""
    times: dict[float, list[np.ndarray]] = {length: [] for length in LENGTHS}
    steps: dict[float, int] = {}
    with Runner(make_task("reach"), log=path, seed=0, keep_episodes=True) as runner:
        dt = runner.robot.control_dt
        episode = 0
        for _ in range(repeats + 1):  # the first round warms caches up
            for length in LENGTHS:
                episode += 1
                start = runner.send(StartCommand(episode, 2))
                q, qd, qdd = excursion(start.posture, int(round(length / dt)), dt)
                command = TrajectoryCommand(episode, 1, 2, q, qd, qdd)
                t0 = clocks()
                reply = runner.send(command)
                elapsed = clocks() - t0
                assert reply.flag == Flag.OK, reply
                done = runner.send(TrajectoryCommand(episode, 2, 2, np.repeat(q[-1:], 10, axis=0)))
                assert done.flag == Flag.OK and done.episode_done and not done.message, done
                if episode > len(LENGTHS):
                    times[length].append(elapsed / reply.n_steps * 1e6)
                steps[length] = reply.n_steps
        kept = list(zip(LENGTHS * repeats, runner.episodes[len(LENGTHS):]))
    return {length: np.median(v, axis=0) for length, v in times.items()}, steps, kept


def write_ms(path: Path, metadata: dict,
             episodes: list[tuple[float, EpisodeBuffer]]) -> dict[float, tuple[int, np.ndarray]]:
    """(b): per segment length, the median steps of its episodes and ms of writing one (wall,
    CPU). Each round of LENGTHS episodes goes into a new log at ``path``, deleted after it, so
    the page cache the writes fill stays the size of one round."""
    times: dict[float, list[tuple[int, np.ndarray]]] = {}
    for first in range(0, len(episodes), len(LENGTHS)):
        log = RunLog(path, metadata)
        try:
            for number, (length, ep) in enumerate(episodes[first:first + len(LENGTHS)]):
                copy = dataclasses.replace(ep, number=number)
                t0 = clocks()
                log.write_episode(copy)
                times.setdefault(length, []).append((ep.n_steps, 1e3 * (clocks() - t0)))
                assert not log.failed_writes, log.pop_failures()
        finally:
            log.close()
            path.unlink()
    return {length: (int(np.median([n for n, _ in v])), np.median([t for _, t in v], axis=0))
            for length, v in times.items()}


def section_lengths(tmp: Path, repeats: int) -> Rows:
    print(f"(a) per-step cost by segment length, median of {repeats}")
    us, steps, kept = segments_by_length(tmp / "lengths.h5", repeats)
    for length in LENGTHS:
        wall, cpu = us[length]
        print(f"  {length:5g} s segment ({steps[length]:>6,} steps): {wall:6.2f} µs per step ({cpu:6.2f} CPU)")
    rows = [(f"CPU µs per step, {LENGTHS[-1]:g} s / {LENGTHS[0]:g} s segment",
             verdict(us[LENGTHS[-1]][1] / us[LENGTHS[0]][1], GOALS["per step"]))]

    print(f"(b) an episode's write by its steps, median of {WRITES * repeats}")
    with Runner(make_task("reach"), seed=0) as probe:
        metadata = probe.metadata()
    written = write_ms(tmp / "writes.h5", metadata, kept * WRITES)
    for length, (count, (wall, cpu)) in written.items():
        print(f"  {length:5g} s segment, {count:>6,} steps: {wall:7.2f} ms ({cpu:7.2f} CPU; "
              f"{1e3 * cpu / count:5.2f} CPU µs per step)")
    counts, cpu_ms = np.array([count for count, _ in written.values()]), [ms[1] for _, ms in written.values()]
    slope, fixed = np.polyfit(counts, cpu_ms, 1)
    print(f"  fit (CPU): {fixed:.2f} ms + {1e3 * slope:.3f} µs per step")
    (n0, (_, t0)), (n20, (_, t20)), (n40, (_, t40)) = (written[length] for length in (LENGTHS[0], 20.0, 40.0))
    rows.append(("write, CPU µs per step 20->40 s / 0.1->20 s",
                 verdict(((t40 - t20) / (n40 - n20)) / ((t20 - t0) / (n20 - n0)), GOALS["write"])))
    return rows


# -- (c), (d) ------------------------------------------------------------------------
def refusal_ms(runner: Runner, q: np.ndarray, first: int, n: int) -> float:
    """Mean CPU ms per refusal over refusals first .. first + n - 1 (segments with no episode running)."""
    t0 = time.process_time()
    for k in range(first, first + n):
        reply = runner.send(TrajectoryCommand(1_000_000 + k, 1, 1, q))
        assert reply.flag == Flag.OUT_OF_ORDER, reply
    return 1e3 * (time.process_time() - t0) / n


def long_run(path: Path, episodes: int, refusals: int) -> tuple[tuple[float, ...], dict[int, int], dict[int, float]]:
    """``refusals`` refusals, then ``episodes`` short episodes, into a new log at ``path``: the CPU
    ms per refusal at the start and after the refusals (none when 0), the RSS KiB at episodes
    1,000 and the last, and the CPU ms per episode over episodes 1,001-2,000 and the last 1,000."""
    with Runner(make_task("reach"), log=path, seed=0, keep_episodes=False) as runner:
        q = runner.robot.home[None].repeat(SHORT_STEPS, axis=0)
        refusal: tuple[float, ...] = ()
        if refusals:
            first = refusal_ms(runner, q, 0, TIMED)
            if refusals > TIMED:
                refusal_ms(runner, q, TIMED, refusals - TIMED)
            refusal = (first, refusal_ms(runner, q, refusals, TIMED))
        rss, stretch = {}, {}
        t0 = time.process_time()
        for episode in range(1, episodes + 1):
            runner.send(StartCommand(episode, 1))
            reply = runner.send(TrajectoryCommand(episode, 1, 1, q))
            assert reply.flag == Flag.OK and not reply.message, reply
            if episode % TIMED == 0:
                now = time.process_time()
                if episode in (2 * TIMED, episodes):
                    stretch[episode] = (now - t0) / TIMED * 1e3
                t0 = now
            if episode in (TIMED, episodes):
                rss[episode] = rss_kib()
    return refusal, rss, stretch


def section_long_run(long_log: Path, short_log: Path, episodes: int, refusals: int) -> Rows:
    print(f"(c), (d) a long run: {refusals:,} refusals, then {episodes:,} episodes")
    (start, later), rss, stretch = long_run(long_log, episodes, refusals)
    print(f"  refusal: {start:.3f} CPU ms at the start, {later:.3f} after {refusals:,} refusals")
    growth = 100 * (rss[episodes] - rss[TIMED]) / rss[TIMED]
    print(f"  runner RSS {rss[TIMED] / 1024:.1f} MiB at episode {TIMED:,}, {rss[episodes] / 1024:.1f} MiB at "
          f"{episodes:,}: {growth:+.2f} %")
    print(f"  CPU ms per episode: {stretch[2 * TIMED]:.2f} over episodes {TIMED + 1:,}-{2 * TIMED:,}, "
          f"{stretch[episodes]:.2f} over the last {TIMED:,}")
    long_run(short_log, SHORT_LOG, 0)
    return [(f"CPU per refusal, after {refusals:,} / at the start", verdict(later / start, GOALS["refusal"])),
            ("CPU per episode, last 1,000 / episodes 1,001-2,000",
             verdict(stretch[episodes] / stretch[2 * TIMED], GOALS["episode"])),
            (f"runner RSS growth, episode {TIMED:,} to {episodes:,}, %", verdict(growth, GOALS["rss"]))]


# -- (e), (f) ------------------------------------------------------------------------
def read_bytes() -> int:
    """Bytes this process has read so far (rchar of /proc/self/io)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


def info_in_process(path: Path) -> tuple[float, int]:
    """s and bytes read by `episodic info` on ``path`` in this process (its imports done)."""
    b0, t0 = read_bytes(), time.perf_counter()
    result = CliRunner().invoke(cli, ["info", str(path)], catch_exceptions=False)
    seconds, n_bytes = time.perf_counter() - t0, read_bytes() - b0
    assert result.exit_code == 0, result.output
    return seconds, n_bytes


def in_subprocess(*args: str) -> tuple[float, int]:
    """Wall s and peak RSS KiB of ``episodic args`` run in a fresh interpreter (it must succeed).
    The peak is the process's own high-water mark (VmHWM): a child's ru_maxrss would include
    this process's, inherited across fork and exec."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"episodic {' '.join(args)} failed: {done.stderr}")
    return seconds, int(done.stderr.split()[-2])


def section_info(long_log: Path, short_log: Path, episodes: int) -> Rows:
    print("(e) episodic info")
    read = {}
    for path, count in ((short_log, SHORT_LOG), (long_log, episodes)):
        seconds, read[count] = info_in_process(path)
        size = path.stat().st_size
        print(f"  {count:>7,} episodes, {size / 2**20:5.0f} MiB log: {seconds:.3f} s in-process, read "
              f"{read[count] / 2**20:.2f} MiB ({100 * read[count] / size:.2f} % of the file)")
    whole, _ = in_subprocess("info", str(long_log))
    print(f"  in a subprocess on the {episodes:,}-episode log: {whole:.2f} s")
    return [(f"episodic info on {episodes:,} episodes, s (subprocess)", verdict(whole, GOALS["info"])),
            (f"info's bytes read, {episodes:,} / {SHORT_LOG:,} episodes", f"{read[episodes] / read[SHORT_LOG]:.2f} "
             f"(the episodes' ratio {episodes / SHORT_LOG:g}: the table has a row per episode)")]


def replay_ms(path: Path, numbers: list[int] | None) -> np.ndarray:
    """ms of replaying the episodes ``numbers`` (all when None) of ``path`` in this process (wall, CPU)."""
    t0 = clocks()
    report = replay(path, numbers)
    elapsed = 1e3 * (clocks() - t0)
    assert report.identical and not report.skipped, report.differences[:3]
    return elapsed


def section_replay(long_log: Path, short_log: Path, episodes: int, repeats: int, replay_all: bool) -> Rows:
    print(f"(f) replay, median of {repeats}")
    middle = episodes // 2
    cases = {"1 of the short log": (short_log, [SHORT_LOG // 2]), "1 of the long log": (long_log, [middle]),
             f"{REPLAYED} of the long log": (long_log, list(range(middle, middle + REPLAYED)))}
    replay_ms(short_log, [0])  # imports and caches
    runs: dict[str, list[np.ndarray]] = {case: [] for case in cases}
    for _ in range(repeats):
        for case, (path, numbers) in cases.items():
            runs[case].append(replay_ms(path, numbers))
    whole_logs = {f"all {SHORT_LOG:,} of the short log": (short_log, SHORT_LOG)}
    if replay_all:
        whole_logs[f"all {episodes:,} of the long log"] = (long_log, episodes)
    for case, (path, _) in whole_logs.items():
        runs[case] = [replay_ms(path, None)]
    ms = {case: np.median(values, axis=0) for case, values in runs.items()}
    for case, (wall, cpu) in ms.items():
        print(f"  {case:<28} {wall:9.1f} ms ({cpu:9.1f} CPU)")
    one, ten = ms["1 of the long log"][1], ms[f"{REPLAYED} of the long log"][1]
    each = (ten - one) / (REPLAYED - 1)
    print(f"  CPU per episode from 1 to {REPLAYED}: {each:.2f} ms (and {one - each:.0f} ms once: the runner's build)")
    rows = [("replay of 1 episode, CPU, long / short log", verdict(one / ms["1 of the short log"][1], GOALS["replay"]))]
    for case, (_, count) in whole_logs.items():
        whole_each = (ms[case][1] - one) / (count - 1)
        print(f"  CPU per episode, {case}: {whole_each:.2f} ms")
        rows.append((f"replay, CPU per episode, {case} / {REPLAYED}", verdict(whole_each / each, GOALS["replay"])))
    one_peak = in_subprocess("replay", str(long_log), "--episode", str(middle))[1]
    all_peak = in_subprocess("replay", str(short_log))[1]
    print(f"  peak RSS of `episodic replay`: {one_peak / 1024:.0f} MiB for 1 episode of the long log, "
          f"{all_peak / 1024:.0f} MiB for all of the short log")
    rows.append(("replay peak RSS, whole short log / 1 episode", verdict(all_peak / one_peak, GOALS["replay"])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000, help=f"episodes of the long run (≥ {2 * TIMED})")
    parser.add_argument("--refusals", type=int, default=30_000, help=f"refusals before the second timing (≥ {TIMED})")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of (a) and (f) (medians)")
    parser.add_argument("--replay-all", action="store_true", help="also replay the whole long log (slow)")
    args = parser.parse_args()
    if args.episodes < 2 * TIMED or args.refusals < TIMED:
        parser.error(f"--episodes must be at least {2 * TIMED} and --refusals at least {TIMED}")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        long_log, short_log = tmp / "long.h5", tmp / "short.h5"
        rows = section_lengths(tmp, args.repeats)
        rows += section_long_run(long_log, short_log, args.episodes, args.refusals)
        rows += section_info(long_log, short_log, args.episodes)
        rows += section_replay(long_log, short_log, args.episodes, args.repeats, args.replay_all)

    print("\nsummary (figures against their goal)")
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


if __name__ == "__main__":
    main()
