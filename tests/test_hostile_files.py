"""Hostile and damaged files: every tool that reads a kind of file (a run log, a batch file, a
demonstration, an MRDPLOT file) ends a crafted one with a one-line message and an exit code other
than 0, never a traceback or a hang; a good episode beside a damaged one is still read.

The crafted files are made from real ones (a reach run's log, a demonstration taken from it, an
export of it) with h5py. The tools run in-process through click's CliRunner; those that a
regression would hang (an HDF5 external link or a path that is a named pipe) run as
subprocesses with a timeout.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.files import HostileFileError, read_array
from episodic.interface.robot import load_robot
from episodic.learning.demonstration import Demonstration, DemonstrationError
from episodic.logs.layout import SUMMARY_DTYPE
from episodic.tools.export.mrdplot import MrdplotError, read_mrdplot, trajectory_from_mrdplot, write_mrdplot

EPISODE = "episodes/000000"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A reach run's log of two whole episodes, in format 1 (an episode a group, whose parts the
    cases below craft; tests/test_log.py crafts those of format 2)."""
    path = tmp_path_factory.mktemp("base") / "run.h5"
    shutil.copy(Path(__file__).parent / "data" / "log_v1_reach.h5", path)
    return path


def crafted(base: Path, folder: Path, change: Callable[[h5py.File], None]) -> Path:
    """A copy of ``base`` in ``folder`` changed by ``change(file)``."""
    path = folder / "crafted.h5"
    shutil.copy(base, path)
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def replace(f: h5py.File, name: str, make: Callable[[h5py.Group, str], object]) -> None:
    """Put what ``make(parent, last name)`` makes where ``name`` was."""
    parent, last = name.rsplit("/", 1) if "/" in name else ("/", name)
    del f[name]
    make(f[parent], last)


def other_file(f: h5py.File) -> str:
    """A small HDF5 file beside ``f`` (the target of the external links made in process)."""
    target = Path(f.filename).with_name("other.h5")
    with h5py.File(target, "w") as g:
        g.create_dataset("x", data=np.zeros((2000, 7)))
        g.create_group("g")
    return str(target)


def linked_out(name: str, target: str = "/x", to: Path | None = None) -> Callable[[h5py.File], None]:
    """A change that puts an external link to ``target`` in ``to`` (default: ``other_file``)
    where ``name`` was."""
    def change(f: h5py.File) -> None:
        if name in f:
            del f[name]
        f[name] = h5py.ExternalLink(str(to) if to else other_file(f), target)
    return change


def bomb(parent: h5py.Group, name: str, shape=(1 << 27, 7)) -> None:
    """A compressed dataset of ``shape`` float64 with nothing written: a few bytes in the file,
    gigabytes once read."""
    parent.create_dataset(name, shape=shape, dtype="f8", chunks=(1 << 14, *shape[1:]), compression="gzip")


def odd_attrs(f: h5py.File) -> None:
    f.attrs["control_rate"] = "fast"
    f.attrs["robot_settings"] = "[" * 100_000  # JSON nested too deep for Python's parser
    f[EPISODE].attrs["n_steps"] = "many"
    f[EPISODE].attrs["flag"] = np.arange(3)


def odd_names(f: h5py.File) -> None:
    f["episodes"].create_group("abc")
    f["episodes"].create_dataset("000007", data=np.zeros(3))
    f["episodes"].create_group("99999999999999999999999")


HOSTILE_LOGS = {  # a log that no tool may read whole
    "external link to an episode": linked_out("episodes/000001", "/g"),
    "external link to a step column": linked_out(f"{EPISODE}/steps/q"),
    "external link to the summary": linked_out("summary"),
    "compressed bomb over the cap": lambda f: replace(f, f"{EPISODE}/steps/q", bomb),
    "compressed bomb under the cap": lambda f: replace(f, f"{EPISODE}/steps/q", lambda p, n: bomb(p, n, (1 << 23, 7))),
    "huge declared summary": lambda f: replace(f, "summary", lambda p, n: p.create_dataset(
        n, shape=(1 << 30,), dtype=SUMMARY_DTYPE, chunks=(1024,), compression="gzip")),
    "episodes is a dataset": lambda f: replace(f, "episodes", lambda p, n: p.create_dataset(n, data=np.zeros(3))),
}
HALF_WAY = "an episode written half-way"
DAMAGED_LOGS = {  # a log with a damaged part beside a good episode (000001): the rest is read
    HALF_WAY: lambda f: [f[EPISODE].attrs.__delitem__(k) for k in list(f[EPISODE].attrs)
                                              if k not in ("episode_id", "flag", "flag_name")]
    + [f[EPISODE].__delitem__(k) for k in ("steps", "segments", "commands")] + [f["summary"].resize(0, axis=0)],
    "odd attributes": odd_attrs,
    "odd names": odd_names,
    "metadata missing": lambda f: [f.attrs.__delitem__(k) for k in ("robot", "seed", "robot_settings", "mode",
                                                                      "control_rate", "task_params")],
    "an episode that is a dataset": lambda f: replace(f, EPISODE, lambda p, n: p.create_dataset(n, data=np.zeros(2)))
    or f["summary"].resize(0, axis=0),
}
LOG_TOOLS = {
    "info": ["info"],
    "replay": ["replay"],
    "export mrdplot": ["export", "--format", "mrdplot", "--out", "{out}/mrd"],
    "export robomimic": ["export", "--format", "robomimic", "--out", "{out}/rm.hdf5"],
    "plot": ["plot", "--out", "{out}/returns.png"],
    "plot an episode": ["plot", "-e", "1", "--out", "{out}/ep.png"],
    "demonstrate": ["demonstrate", "--from-log", "{log}", "-e", "1", "--out", "{out}/demo.h5"],
    "evaluate": ["evaluate", "{log}", "--task", "reach", "--robot", "wam"],
}  # render reads episodes as plot does; it probes OpenGL in a process, so it runs in the slow test below


def run_tool(args: list[str], log: Path, out: Path):
    """``episodic ARGS`` in process on ``log`` (appended unless ARGS name it), outputs in ``out``."""
    args = [a.format(log=log, out=out) for a in args]
    if str(log) not in args:
        args = [args[0], str(log), *args[1:]]
    return CliRunner().invoke(main, args, catch_exceptions=True)


def assert_one_line_refusal(result, what: str) -> None:
    assert result.exit_code not in (0, None), f"{what}: exit 0\n{result.output}"
    assert isinstance(result.exception, SystemExit), f"{what}: {result.exception!r}\n{result.output}"
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, f"{what}:\n{result.output}"


ALL_EPISODES = {"replay", "export mrdplot", "export robomimic"}  # tools reading every episode's steps
MUST_REFUSE = {  # the tools that read the hostile part; the others may do their work without it
    "external link to an episode": ALL_EPISODES | {"plot an episode", "demonstrate", "evaluate"},
    "external link to the summary": set(LOG_TOOLS) - {"plot an episode", "demonstrate", "evaluate"},
    "huge declared summary": set(LOG_TOOLS) - {"plot an episode", "demonstrate", "evaluate"},
    "episodes is a dataset": set(LOG_TOOLS),
}


def assert_no_traceback(result, what: str) -> None:
    """``result`` is a success or a one-line refusal."""
    assert "Traceback" not in result.output and (result.exception is None or isinstance(
        result.exception, SystemExit)), f"{what}: {result.exception!r}\n{result.output}"
    if result.exit_code:
        assert_one_line_refusal(result, what)


@pytest.mark.parametrize("case", sorted(HOSTILE_LOGS))
def test_a_hostile_log_is_refused_by_every_tool_that_reads_it_with_one_line(base, tmp_path, case):
    log = crafted(base, tmp_path, HOSTILE_LOGS[case])
    must = MUST_REFUSE.get(case, ALL_EPISODES)
    for tool, args in LOG_TOOLS.items():
        if tool.startswith("plot") and tool not in must:
            continue  # it would draw a plot of the parts that are whole, which takes seconds
        result = run_tool(args, log, tmp_path)
        if tool in must:
            assert_one_line_refusal(result, f"{case}, {tool}")
        else:
            assert_no_traceback(result, f"{case}, {tool}")


@pytest.mark.parametrize("case", sorted(DAMAGED_LOGS))
def test_a_damaged_part_leaves_the_good_episode_readable(base, tmp_path, case):
    log = crafted(base, tmp_path, DAMAGED_LOGS[case])
    tools = {t: a for t, a in LOG_TOOLS.items() if case == HALF_WAY or not t.startswith("plot")}  # plots take s
    results = {tool: run_tool(args, log, tmp_path) for tool, args in tools.items()}
    for tool, result in results.items():
        assert_no_traceback(result, f"{case}, {tool}")
    if case not in ("odd attributes", "metadata missing"):  # there the run's metadata itself is damaged
        replayed, listed = results["replay"], results["info"]
        assert replayed.exit_code == 0 and re.search(r"\d episodes? replayed bit-identically", replayed.output), \
            replayed.output
        assert listed.exit_code == 0 and "not written whole" in listed.output, listed.output
        assert results["evaluate"].exit_code == 0, results["evaluate"].output


def test_a_half_written_episode_is_marked_and_the_rest_exported(base, tmp_path):
    """The audit's case: an all-zero command block's refusal failed its write half-way (at the
    message attribute), after which info/replay/export/plot exited 1 on the whole log."""
    log = crafted(base, tmp_path, DAMAGED_LOGS[HALF_WAY])
    out = CliRunner().invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(tmp_path / "m")])
    assert out.exit_code == 0 and "wrote 1 MRDPLOT file" in out.output, out.output
    assert "episode 0 not exported" in out.output
    listed = CliRunner().invoke(main, ["info", str(log)])
    assert listed.exit_code == 0 and "INVALID_PAYLOAD*" in listed.output or "*" in listed.output


# -- batch files ---------------------------------------------------------------------------------
def good_batch(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        c = f.create_group("episodes/000000/commands")
        c.create_group("000").attrs["kind"] = 0
        c.create_group("001").create_dataset("q", data=np.zeros((5, 7)))
    return path


HOSTILE_BATCHES = {
    "external link": linked_out("episodes/000000/commands/001/qd"),
    "compressed bomb": lambda f: replace(f, "episodes/000000/commands/001/q", bomb),
    "deep JSON": lambda f: f.attrs.__setitem__("task_params", "[" * 100_000)
    or f["episodes/000000/commands/001"].attrs.__setitem__("rate", "[" * 100_000),
    "text where a number goes": lambda f: f["episodes/000000/commands/001"].attrs.__setitem__("index", "first"),
    "q of text": lambda f: replace(f, "episodes/000000/commands/001/q",
                                   lambda p, n: p.create_dataset(n, data=np.array([b"a", b"b"]))),
    "commands is a dataset": lambda f: replace(f, "episodes/000000/commands", lambda p, n: p.create_dataset(n, data=1)),
    "odd names only": lambda f: replace(f, "episodes/000000", lambda p, n: p.create_group("x/y")),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_BATCHES))
def test_a_hostile_batch_file_is_refused_with_one_line(tmp_path, case):
    path = good_batch(tmp_path / "batch.h5")
    with h5py.File(path, "r+") as f:
        HOSTILE_BATCHES[case](f)
    result = CliRunner().invoke(main, ["evaluate", str(path), "--task", "reach", "--robot", "wam"])
    assert_one_line_refusal(result, case)


# -- demonstrations ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo(base, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.h5"
    result = CliRunner().invoke(main, ["demonstrate", "--from-log", str(base), "-e", "1", "--out", str(path)])
    assert result.exit_code == 0, result.output
    return path


HOSTILE_DEMOS = {
    "external link": linked_out("q"),
    "compressed bomb": lambda f: replace(f, "t", lambda p, n: bomb(p, n, (1 << 28,))),
    "deep JSON": lambda f: f.attrs.__setitem__("metadata", "[" * 100_000),
    "q of text": lambda f: replace(f, "q", lambda p, n: p.create_dataset(n, data=np.array([b"a", b"b"]))),
    "q is a group": lambda f: replace(f, "q", lambda p, n: p.create_group(n)),
    "joint names a number": lambda f: f.attrs.__setitem__("joint_names", 3),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_DEMOS))
def test_a_hostile_demonstration_is_refused_with_one_line(demo, tmp_path, case):
    path = tmp_path / "demo.h5"
    shutil.copy(demo, path)
    with h5py.File(path, "r+") as f:
        HOSTILE_DEMOS[case](f)
    with pytest.raises(DemonstrationError) as caught:
        Demonstration.load(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_demonstration_from_a_log_naming_its_robot_by_a_path_is_refused(base, tmp_path):
    log = crafted(base, tmp_path, lambda f: f.attrs.__setitem__("robot", str(tmp_path / "robots" / "evil")))
    out = str(tmp_path / "d.h5")
    result = CliRunner().invoke(main, ["demonstrate", "--from-log", str(log), "-e", "1", "--out", out])
    assert_one_line_refusal(result, "robot by path")
    assert "never loaded from a path" in result.output


# -- MRDPLOT files ---------------------------------------------------------------------------------
def test_an_mrdplot_file_whose_frequency_implies_too_many_samples_is_refused(tmp_path):
    """The audit's case: a tiny sampling frequency made resampling to the control rate allocate
    gigabytes; the samples it implies are checked first."""
    names = [f"{j}_des_th" for j in load_robot("wam").joint_names]
    path = tmp_path / "slow.mrd"
    write_mrdplot(path, names, ["rad"] * 7, 1e-6, np.zeros((3, 7)))
    with pytest.raises(MrdplotError, match="samples at the control rate") as caught:
        trajectory_from_mrdplot(path, "wam")
    assert "\n" not in str(caught.value)


def test_arrays_are_checked_before_they_are_allocated(tmp_path):
    with h5py.File(tmp_path / "b.h5", "w") as f:
        bomb(f, "over")
        bomb(f, "ratio", (1 << 23, 7))
        f.create_dataset("fine", data=np.ones((100, 7)))
        with pytest.raises(HostileFileError, match="over the 1024 MiB"):
            read_array(f["over"])
        with pytest.raises(HostileFileError, match="expands over 1000 times"):
            read_array(f["ratio"])
        assert read_array(f["fine"]).sum() == 700


# -- named pipes: what a regression would hang, run with a timeout ---------------------------------
HANG_SCRIPT = """
import json, sys
from click.testing import CliRunner
from episodic.cli.main import main
for args in json.loads(sys.argv[1]):
    r = CliRunner().invoke(main, args)
    print(json.dumps([args, r.exit_code, r.output]), flush=True)
"""


@pytest.mark.slow
def test_a_named_pipe_or_a_link_to_one_never_hangs_a_tool(base, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = linked_out("episodes/000001", "/", fifo)
    log = crafted(base, tmp_path, lambda f: link(f) or f["summary"].resize(1, axis=0))  # info opens the group
    batch = good_batch(tmp_path / "batch.h5")
    with h5py.File(batch, "r+") as f:
        linked_out("episodes/000000/commands/001/qd", "/x", fifo)(f)
    cases = [[t, str(log), *a] for t, *a in (("info",), ("replay",), ("export", "--format", "mrdplot", "--out",
                                                                         str(tmp_path / "m")),
                                             ("plot", "--out", str(tmp_path / "p.png")))]
    cases += [["demonstrate", "--from-log", str(log), "-e", "1", "--out", str(tmp_path / "d.h5")],
              ["render", str(log), "-e", "1", "--at", "0.1", "--out", str(tmp_path / "r.png")],
              ["evaluate", str(fifo), "--task", "reach"], ["evaluate", str(batch), "--task", "reach"],
              ["info", str(fifo)]]
    # one process for all (a hang in any times it out, and the cases done before it are shown)
    done = subprocess.run([sys.executable, "-c", HANG_SCRIPT, json.dumps(cases)], capture_output=True, text=True,
                          timeout=120)
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [args for args, _, _ in results] == cases, done.stderr
    for args, code, output in results:
        assert code != 0 and "Traceback" not in output, (args, output)
        assert sum(line.startswith("Error:") for line in output.splitlines()) == 1, (args, output)
    for reader in (Demonstration.load, read_mrdplot):
        with pytest.raises((DemonstrationError, MrdplotError, HostileFileError), match="named pipe"):
            reader(fifo)
