"""Compact logs: `episodic compact` and a writer with EPISODIC_LOG_FILTER (`--compress`) store the
datasets compressed, and every reader path (info, plot, replay, export, the reader API) reads a
compressed log as the plain one. Real runners, real HDF5 filters; no mocks."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.logs import read_episodes, read_metadata, read_summary
from episodic.logs.compression import ENV, FILTERS, MIN_BYTES, filters_of
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.compact import CompactError, compact, same_contents
from episodic.tools.export.mrdplot import export_mrdplot
from episodic.tools.replay import replay
from tests.helpers import assert_same_steps, run_episode

N_EPISODES = 2


def make_log(path: Path) -> Path:
    with Runner(make_task("reach"), log=path, seed=0) as runner:
        for episode_id in range(1, N_EPISODES + 1):
            run_episode(runner, episode_id, n_segments=2)
    return path


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, Path]:
    """The same two reach episodes logged plain and by a writer with EPISODIC_LOG_FILTER=gzip."""
    folder = tmp_path_factory.mktemp("compact")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(ENV, raising=False)
        plain = make_log(folder / "plain.h5")
        patch.setenv(ENV, "gzip")
        written = make_log(folder / "written.h5")
    return {"plain": plain, "written": written}


def storage(path: Path) -> set[str]:
    """The filters of the table of steps of the log at ``path``."""
    with h5py.File(path, "r") as f:
        return set(filters_of(f["steps"]) or ["plain"])


def assert_reads_the_same(plain: Path, other: Path, copy: bool = True) -> None:
    """The reader API reads ``other`` as ``plain``: all of it when ``other`` is a copy, else (two
    runs of the same commands) all but the times of day and wall times."""
    meta, meta_other = read_metadata(plain), read_metadata(other)
    if not copy:
        meta.pop("created"), meta_other.pop("created")
    assert meta == meta_other
    (rows, _), (rows_other, _) = read_summary(plain), read_summary(other)
    assert np.array_equal(rows["return"], rows_other["return"]) and (rows.tobytes() == rows_other.tobytes() or not copy)
    for a, b in zip(read_episodes(plain), read_episodes(other), strict=True):
        assert_same_steps(a, b)
        assert a.initial_state.tobytes() == b.initial_state.tobytes()
        assert not copy or (sorted(a.attrs) == sorted(b.attrs)
                            and all(np.array_equal(a.attrs[k], b.attrs[k]) for k in a.attrs))
        assert len(a.commands) == len(b.commands)


@pytest.mark.slow
def test_a_compressing_writer_logs_the_same_episodes_smaller(logs):
    assert storage(logs["plain"]) == {"plain"}
    assert storage(logs["written"]) == {"deflate", "shuffle"}
    assert logs["written"].stat().st_size < 0.8 * logs["plain"].stat().st_size
    assert_reads_the_same(logs["plain"], logs["written"], copy=False)


@pytest.mark.slow
def test_compact_and_every_reader(logs, tmp_path):
    plain = logs["plain"]
    done = compact(plain, tmp_path / "small.h5")
    assert done.filter == "gzip" and done.episodes == N_EPISODES and done.ratio > 1.25
    assert storage(done.out) == {"deflate", "shuffle"}
    with h5py.File(plain, "r") as a, h5py.File(done.out, "r") as b:
        assert same_contents(a, b) == ""
        small = [name for name, item in _datasets(b) if item.nbytes < MIN_BYTES and item.maxshape == item.shape]
        assert small and all(not filters_of(b[name]) for name in small)  # tiny datasets stay contiguous
    assert_reads_the_same(plain, done.out)
    report = replay(done.out)
    assert report.identical and len(report.episodes) == N_EPISODES
    exported = {p.name.split("_ep")[-1]: p.read_bytes() for p in export_mrdplot(plain, tmp_path / "a").files}
    assert exported == {p.name.split("_ep")[-1]: p.read_bytes() for p in export_mrdplot(done.out, tmp_path / "b").files}
    assert len(exported) == N_EPISODES
    info = CliRunner().invoke(main, ["info", str(done.out)])
    assert info.exit_code == 0, info.output
    per_episode = done.out.stat().st_size / N_EPISODES / 1e6
    assert f"MB, {per_episode:.3f} MB per episode, stored deflate+shuffle" in info.output
    assert "stored plain" in CliRunner().invoke(main, ["info", str(plain)]).output
    if importlib.util.find_spec("matplotlib") is not None:
        from episodic.tools.plot import plot

        for number in (None, 1):
            a, b = plot(plain, number, tmp_path / "a.png").figure, plot(done.out, number, tmp_path / "b.png").figure
            for ax_a, ax_b in zip(a.axes, b.axes, strict=True):
                for line_a, line_b in zip(ax_a.lines, ax_b.lines, strict=True):
                    assert np.array_equal(line_a.get_ydata(), line_b.get_ydata())


def _datasets(f: h5py.File) -> list[tuple[str, h5py.Dataset]]:
    found: list[tuple[str, h5py.Dataset]] = []
    f.visititems(lambda name, item: found.append((name, item)) if isinstance(item, h5py.Dataset) else None)
    return found


@pytest.mark.slow
def test_compact_command_in_place_and_refusals(logs, tmp_path):
    log = tmp_path / "run.h5"
    log.write_bytes(logs["plain"].read_bytes())
    runner = CliRunner()
    done = runner.invoke(main, ["compact", str(log)])
    assert done.exit_code == 0, done.output
    out = tmp_path / "run_compact.h5"
    assert done.output.startswith(f"wrote {out} (gzip): ") and "x smaller" in done.output
    again = runner.invoke(main, ["compact", str(log)])
    assert again.exit_code == 1 and "exists; choose another OUT, or replace it (--overwrite)" in again.output
    before = log.stat().st_size
    in_place = runner.invoke(main, ["compact", str(log), str(log)])
    assert in_place.exit_code == 0, in_place.output
    assert log.stat().st_size < before and storage(log) == {"deflate", "shuffle"}
    assert_reads_the_same(logs["plain"], log)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.arange(10)
    foreign = runner.invoke(main, ["compact", str(other), str(tmp_path / "o.h5")])
    assert foreign.exit_code == 1 and not (tmp_path / "o.h5").exists(), foreign.output
    with pytest.raises(CompactError, match="unknown log filter 'zip'"):
        compact(log, tmp_path / "z.h5", "zip")


@pytest.mark.slow
@pytest.mark.skipif(not FILTERS["blosc"].available(), reason="Blosc needs hdf5plugin: pip install 'episodic[compact]'")
def test_blosc(logs, tmp_path):
    done = compact(logs["plain"], tmp_path / "blosc.h5", "blosc")
    # > 1.1: a format-2 log's steps are a compound table, whose rows Blosc's shuffle takes whole
    # (about 1.14x here; 1.2x and more on the per-column datasets of format 1)
    assert storage(done.out) == {"blosc"} and done.ratio > 1.1
    assert_reads_the_same(logs["plain"], done.out)


@pytest.mark.slow
def test_evaluate_compress(logs, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)  # --compress sets it in this process; restored after the test
    runner = CliRunner()
    for name, extra in (("plain", []), ("compressed", ["--compress"])):
        result = runner.invoke(main, ["evaluate", str(logs["plain"]), "--out", str(tmp_path / f"{name}.h5"), *extra])
        assert result.exit_code == 0, result.output
    assert storage(tmp_path / "plain.h5") == {"plain"}
    assert storage(tmp_path / "compressed.h5") == {"deflate", "shuffle"}
    assert_reads_the_same(tmp_path / "plain.h5", tmp_path / "compressed.h5", copy=False)
    monkeypatch.setenv(ENV, "nonsense")
    bad = runner.invoke(main, ["evaluate", str(logs["plain"]), "--out", str(tmp_path / "x.h5"), "--compress"])
    assert bad.exit_code == 2 and "unknown log filter 'nonsense'" in bad.output
