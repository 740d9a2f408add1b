"""Exports of a run log to the formats of other tools: SL's MRDPLOT files
(:mod:`episodic.tools.export.mrdplot`, one file per episode, and trajectory files read back as
commands) and robomimic's HDF5 layout (:mod:`episodic.tools.export.robomimic`). Both read the log
with :func:`episodic.logs.iter_episodes`, one episode at a time, so a long log is never held
in memory whole; `episodic export` is their command line.
"""
from __future__ import annotations

from pathlib import Path

from episodic.logs import read_summary


class ExportError(ValueError):
    """An export cannot be made as asked (an output exists, a name cannot be written, ...); the
    message says why and what to do."""


def select_episodes(log: str | Path, numbers: list[int] | None = None) -> tuple[list[int], dict[str, str]]:
    """The sequence numbers of the episodes to export and those left out (number as its group
    name -> why), as the log's /summary and `episodic info` tell them. All episodes written
    whole when ``numbers`` is None; otherwise the numbers given, ascending, each once
    (ExportError naming one the log lacks or that is not whole)."""
    rows, partial = read_summary(log)
    if numbers is None:
        left_out = {name: f"it was not written whole ({why})" for name, why in partial.items()}
        return [int(n) for n in rows["number"] if f"{int(n):06d}" not in partial], left_out
    known = {int(n) for n in rows["number"]}
    wanted = sorted(set(numbers))
    missing = [n for n in wanted if n not in known]
    if missing:
        raise ExportError(f"{log} has no episode {', '.join(map(str, missing))}; it holds {len(known)} "
                          f"(numbers as `episodic info` shows them)")
    broken = [f"{n} ({partial[f'{n:06d}']})" for n in wanted if f"{n:06d}" in partial]
    if broken:
        raise ExportError(f"episode {', '.join(broken)} of {log} was not written whole; it cannot be exported")
    return wanted, {}


def check_target(path: Path, overwrite: bool) -> None:
    """ExportError when ``path`` may not be written: it exists (unless ``overwrite``), or is a
    directory or a symbolic link (never written through)."""
    if path.is_symlink():
        raise ExportError(f"{path} is a symbolic link; an export is never written through a link: give the real path")
    if path.is_dir():
        raise ExportError(f"{path} is a directory; give a file name")
    if path.exists() and not overwrite:
        raise ExportError(f"{path} exists; choose another path, or replace it (--overwrite)")
