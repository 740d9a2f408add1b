"""BATCH.h5 files: the episodes' commands of a batch (``episodic evaluate``; a run log is one too),
read and checked (docs/log-format.md: batch files)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from episodic.interface.commands import Command
from episodic.interface.files import HostileFileError, check_links, check_regular, read_array
from episodic.interface.vocabulary import Kind
from episodic.logs.layout import COMMAND_ARRAYS, COMMAND_ATTRS, command_from_record, decode_attr
from episodic.logs.reader import episode_problem, iter_episodes, partial_episodes


class BatchFileError(ValueError):
    """A BATCH.h5 file cannot be read as a batch; the message says what is wrong and where."""


# -- BATCH.h5 ----------------------------------------------------------------------------------
@dataclass
class BatchFile:
    """A BATCH.h5 file read: ``episodes`` (each a list of commands) in the file's order, the root
    attributes that name the setup (task, task_source, task_params, robot, seed: those present) and the
    episodes ``skipped`` (group name -> why: in a log, those not written whole)."""

    episodes: list[list[Command]]
    metadata: dict[str, Any]
    skipped: dict[str, str]


SETUP_ATTRS = ("task", "task_source", "task_params", "robot", "seed")  # task_source: a log's (episodic.tasks)
SETUP_TYPES = (("task", "text", str), ("task_source", "a JSON object", dict), ("robot", "text", str),
               ("task_params", "a JSON object", dict), ("seed", "a whole number", int))
KINDS = {k.value: k for k in (Kind.START, Kind.TRAJECTORY, Kind.GAINS, Kind.RESET, Kind.MALFORMED)}


def _by_number(names) -> list[str]:
    """Group names in number order (000010 and 10 alike after 9); other names after, by name."""
    return sorted(names, key=lambda s: (0, int(s), s) if s.isdigit() else (1, 0, s))


def _scalar_field(group: h5py.Group, name: str, where: str):
    """A command's scalar field: an attribute (as a log stores it) or a one-element dataset (as
    Octave's h5create/h5write make one); None when absent."""
    if name in group.attrs:
        value = decode_attr(group.attrs[name])
    elif name in group:
        value = read_array(group[name]) if isinstance(group[name], h5py.Dataset) else group[name]
    else:
        return None
    if isinstance(value, (str, bytes)):
        return value.decode() if isinstance(value, bytes) else value
    value = np.asarray(value)
    if value.size != 1 or value.dtype.kind not in "biuf":
        raise BatchFileError(f"{where}: '{name}' must be one number, got {value.dtype} of shape {value.shape}")
    return value.item()


def _array_field(dataset: h5py.Dataset, name: str, where: str) -> np.ndarray:
    """A command's array (float64); a vector written as a row or a column (1 x n, n x 1) flattened."""
    value = np.asarray(read_array(dataset))
    if value.dtype.kind not in "biuf":
        raise BatchFileError(f"{where}: '{name}' must be numeric, got {value.dtype}")
    value = value.astype(float)
    if name not in ("q", "qd", "qdd") and value.ndim > 1 and sum(n > 1 for n in value.shape) <= 1:
        value = value.ravel()
    return value


def _read_command(g: h5py.Group, position: int, n_commands: int, episode_id: int, where: str) -> Command:
    """One command group: scalar fields as attributes or datasets; ``kind``, ``index``,
    ``max_commands`` and ``episode_id`` completed when absent (docs/log-format.md: batch files)."""
    attrs = {name: _scalar_field(g, name, where) for name in ("kind", *COMMAND_ATTRS)}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    arrays = {name: _array_field(g[name], name, where) for name in COMMAND_ARRAYS
              if name in g and isinstance(g[name], h5py.Dataset)}
    attrs.setdefault("index", position)
    attrs.setdefault("max_commands", n_commands - 1)
    attrs.setdefault("episode_id", episode_id)
    for name in ("index", "max_commands", "episode_id"):
        if not isinstance(attrs[name], (int, float)) or int(attrs[name]) != attrs[name]:
            raise BatchFileError(f"{where}: '{name}' must be a whole number, got {attrs[name]!r}")
        attrs[name] = int(attrs[name])
    if "kind" not in attrs:
        attrs["kind"] = int(Kind.START if attrs["index"] == 0 else
                            Kind.GAINS if "kp" in arrays or "task_gains" in arrays else Kind.TRAJECTORY)
    if attrs["kind"] not in KINDS:
        raise BatchFileError(f"{where}: unknown kind {attrs['kind']!r}; use 0 start, 1 trajectory, 2 gains, 3 reset")
    if KINDS[attrs["kind"]] == Kind.TRAJECTORY and "q" not in arrays:
        raise BatchFileError(f"{where}: a trajectory command needs the dataset 'q' (n_samples, n_dofs) rad")
    return command_from_record(attrs, arrays)


def read_batch(path: str | Path) -> BatchFile:
    """The episodes of a BATCH.h5 file (docs/log-format.md: batch files; a run log is one), in the order of
    their group names' numbers; BatchFileError saying what is wrong and where."""
    try:
        check_regular(path)  # a FIFO would block the open
        f = h5py.File(path, "r")
    except HostileFileError as exc:
        raise BatchFileError(str(exc)) from None
    except FileNotFoundError:
        raise BatchFileError(f"{path}: no such file") from None
    except BlockingIOError:
        raise BatchFileError(f"{path} is open in another process (a runner still writing it?); try again once "
                             f"it is closed") from None
    except OSError as exc:
        raise BatchFileError(f"{path} is not an HDF5 file ({exc}); a batch is an HDF5 file of "
                             f"/episodes/<n>/commands/<k>/ groups (episodic evaluate --help)") from None
    with f:
        try:
            return _read_episodes(f, path)
        except HostileFileError as exc:
            raise BatchFileError(str(exc)) from None
        except (OSError, TypeError, ValueError, KeyError, AttributeError) as exc:
            if isinstance(exc, BatchFileError):
                raise
            raise BatchFileError(f"{path} is damaged ({str(exc).splitlines()[0]}); a batch is an HDF5 file of "
                                 f"/episodes/<n>/commands/<k>/ groups (episodic evaluate --help)") from None


def _read_episodes(f: h5py.File, path: str | Path) -> BatchFile:
    """read_batch's reading of the open file ``f``, raising what a damaged part raises."""
    check_links(f)  # an external link could lead to a FIFO, which would block the reader
    table = isinstance(f.get("episodes"), h5py.Dataset) and "format" in f.attrs  # a log of format 2
    if not table and not isinstance(f.get("episodes"), h5py.Group):
        raise BatchFileError(f"{path} has no /episodes group: a batch holds /episodes/<n>/commands/<k>/ "
                             f"groups, one per episode and command (episodic evaluate --help)")
    metadata = {k: decode_attr(f.attrs[k]) for k in SETUP_ATTRS if k in f.attrs}
    wrong = [f"'{k}' is not {what}" for k, what, types in SETUP_TYPES
             if k in metadata and not isinstance(metadata[k], types)]
    if wrong:
        raise BatchFileError(f"{path}: {', '.join(wrong)}; fix or remove the attribute (episodic evaluate --help)")
    if table:  # its episodes as its readers read them (episodic.logs.layout)
        stored = [[command_from_record(*c) for c in ep.commands] for ep in iter_episodes(path)]
        left_out = {name: f"it was not written whole ({why})" for name, why in partial_episodes(path).items()}
        if not stored:
            raise BatchFileError(f"{path} holds no episode to evaluate")
        return BatchFile(stored, metadata, left_out)
    episodes, skipped = [], {}
    is_log = "format" in f.attrs  # a run log: an episode not written whole is skipped, as its readers do
    for n, name in enumerate(_by_number(f["episodes"])):
        g = f["episodes"][name]
        problem = "it is not a group" if not isinstance(g, h5py.Group) \
            else episode_problem(g) if is_log else "" if g.attrs.get("complete", True) else "its write did not finish"
        if problem:
            skipped[name] = f"it was not written whole ({problem})"
            continue
        where = f"{path}: /episodes/{name}"
        if not isinstance(g.get("commands"), h5py.Group) or not len(g["commands"]):
            raise BatchFileError(f"{where} has no commands/ group of commands (commands/000/, commands/001/, ...)")
        cmds = _by_number(g["commands"])
        try:
            episodes.append([_read_command(g["commands"][c], k, len(cmds), n + 1, f"{where}/commands/{c}")
                             for k, c in enumerate(cmds)])
        except (TypeError, ValueError, KeyError) as exc:
            if isinstance(exc, BatchFileError):
                raise
            raise BatchFileError(f"{where}: cannot read its commands ({exc})") from None
    if not episodes:
        raise BatchFileError(f"{path} holds no episode to evaluate"
                             + (f" (skipped: {', '.join(sorted(skipped))})" if skipped else ""))
    return BatchFile(episodes, metadata, skipped)

