"""Outputs never follow a planted symbolic link: a log (also with --overwrite), a plot, an export
and a demonstration replace a link at their path or refuse it, and the file the link points to is
left as it was; a log is created readable by its owner only."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.files import HostileFileError, replacing
from episodic.logs import LogError, read_metadata
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import run_episode

VICTIM_TEXT = "a victim's file\n"


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("log") / "run.h5"
    with Runner(make_task("reach"), log=path, seed=1) as r:
        run_episode(r, 1)
    return path


def planted(folder: Path, name: str) -> tuple[Path, Path]:
    """A link ``folder/name`` planted to a victim's file; returns (link, victim)."""
    victim = folder / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    link = folder / name
    link.symlink_to(victim)
    return link, victim


def test_a_log_is_owner_only_and_overwrite_replaces_a_planted_link(tmp_path):
    link, victim = planted(tmp_path, "run.h5")
    with pytest.raises(LogError, match="symbolic link"):
        Runner(make_task("reach"), log=link).close()
    with Runner(make_task("reach"), log=link, overwrite=True) as r:
        run_episode(r, 1)
    assert victim.read_text() == VICTIM_TEXT
    assert not link.is_symlink() and read_metadata(link)["n_episodes"] == 1
    assert stat.S_IMODE(link.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


@pytest.mark.parametrize("tool", ["plot", "export robomimic", "demonstrate"])
def test_an_output_through_a_planted_link_leaves_the_victim_intact(log, tmp_path, tool):
    name = {"plot": "p.png", "export robomimic": "r.hdf5", "demonstrate": "d.h5"}[tool]
    link, victim = planted(tmp_path, name)
    args = {"plot": ["plot", str(log), "--out", str(link)],
            "export robomimic": ["export", str(log), "--format", "robomimic", "--out", str(link), "--overwrite"],
            "demonstrate": ["demonstrate", "--from-log", str(log), "-e", "0", "--out", str(link), "--overwrite"]}[tool]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0 or result.output.startswith("Error:"), result.output
    assert victim.read_text() == VICTIM_TEXT
    assert not link.is_symlink() or result.exit_code != 0
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_an_mrdplot_export_ignores_a_planted_partial_link(log, tmp_path):
    """The old export wrote <out>.partial, a name anyone could plant a link at."""
    out = tmp_path / "mrd"
    out.mkdir()
    link, victim = planted(out, f"{log.stem}_ep000000.mrd.partial")
    result = CliRunner().invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == VICTIM_TEXT and (out / f"{log.stem}_ep000000.mrd").stat().st_size > 1000


def test_replacing_never_replaces_what_appeared_meanwhile_without_overwrite(tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(HostileFileError, match="created by another process"):
        with replacing(target, overwrite=False) as tmp:
            tmp.write_bytes(b"new")
            target.write_text("someone else's")  # appeared between the check and the rename
    assert target.read_text() == "someone else's" and os.listdir(tmp_path) == ["out.bin"]


@pytest.mark.slow  # render probes OpenGL in a process
def test_a_rendered_picture_replaces_a_planted_link(log, tmp_path):
    link, victim = planted(tmp_path, "still.png")
    result = CliRunner().invoke(main, ["render", str(log), "--at", "0.1", "--size", "64x48", "--out", str(link)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == VICTIM_TEXT and not link.is_symlink()
    assert link.read_bytes().startswith(b"\x89PNG")
