"""Reading a run log: its metadata, its summary, its episodes (whole, or one at a time), and
which episodes were not written whole, in either format (episodic.logs.layout: an episode a row
of /episodes naming rows of run-wide tables, or in logs of format 1 an episode a group).

A log may be read while a runner writes it (episodic.logs.writer's docstring): every function here
opens the file only while it reads it, waiting up to LIVE_WAIT for the writer to close it, and
sees the episodes written before it opened it (an episode reaches the file at most
writer.QUEUE_SECONDS after its last reply in blocking mode); ``iter_episodes`` opens it anew for
each episode, so a long replay never keeps the writer waiting."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from episodic.interface.columns import STEP_DTYPES
from episodic.interface.files import (
    MAX_ARRAY_BYTES,
    MAX_RATIO,
    SMALL_ARRAY_BYTES,
    HostileFileError,
    check_links,
    member,
    open_hdf5,
    read_array,
    readable_rows,
)
from episodic.logs.episode import SEGMENT_FIELDS
from episodic.logs.layout import (
    EPISODE_DTYPE,
    IN_PROCESS,
    METADATA_CACHE,
    SUMMARY_DEFAULTS,
    SUMMARY_DTYPE,
    SUMMARY_NAMES,
    command_from_entry,
    decode_attr,
    file_key,
    fix_metadata_cache,
    int_or,
    summary_row,
    written_in_process,
)

_log = logging.getLogger("episodic.logs")
_TORN_SAID: set[tuple[str, int]] = set()  # (log, rows) whose unreadable rows were said, once a process


def _summary_rows(stored: np.ndarray) -> np.ndarray:
    """/summary rows as read from a log, in SUMMARY_DTYPE (an older log's lack the later fields:
    those take their defaults)."""
    if stored.dtype == SUMMARY_DTYPE:
        return stored
    rows = np.zeros(len(stored), dtype=SUMMARY_DTYPE)
    for name in SUMMARY_NAMES:
        rows[name] = stored[name] if name in (stored.dtype.names or ()) else SUMMARY_DEFAULTS.get(name, np.nan)
    return rows


# -- reading ------------------------------------------------------------------
@dataclass
class StoredEpisode:
    """One episode read back from a log."""

    name: str
    attrs: dict
    initial_state: np.ndarray
    steps: dict[str, np.ndarray]
    segments: dict[str, np.ndarray]
    commands: list[tuple[dict, dict]]
    state_columns: tuple[str, ...]


LIVE_WAIT = 10.0   # s a reader waits for a log's writer to close the file (it holds it up to writer.HOLD_SECONDS)
READ_POLL = 0.005  # s between a waiting reader's tries


@dataclass(frozen=True)
class ByteLock:
    """A lock on one byte of a file taken through an open file description (Linux's F_OFD_SETLK:
    not dropped when the process closes another descriptor of the file, as HDF5 does)."""

    start: int  # byte offset

    FORMAT = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for these locks)

    def pack(self, kind: int) -> bytes:
        """The struct flock asking for a lock of ``kind`` (fcntl.F_RDLCK, F_WRLCK, F_UNLCK)."""
        return struct.pack(self.FORMAT, kind, os.SEEK_SET, self.start, 1, 0)


LIVE_LOCK = ByteLock(1 << 62)  # held for writing by a log's writer for as long as its run lasts


def being_written(path: str | Path) -> bool:
    """Whether a runner is writing the log at ``path`` now (its writer holds LIVE_LOCK); False
    also where that cannot be told (no such file, a file system without these locks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        held = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, LIVE_LOCK.pack(fcntl.F_RDLCK))
        return bool(struct.unpack(ByteLock.FORMAT, held)[0] != fcntl.F_UNLCK)
    except OSError:
        return False
    finally:
        os.close(fd)


def open_log(path: str | Path, wait: float = LIVE_WAIT) -> h5py.File:
    """``h5py.File(path, "r")``, waiting up to ``wait`` s while the log's writer has the file
    open (HDF5 then refuses readers with errno 11: BlockingIOError after the wait); any other
    error as h5py raises it. Close it soon: the writer waits while a reader holds the file."""
    return _waiting(path, lambda: h5py.File(path, "r"), wait)


def _waiting(path: str | Path, opener: Callable[[], h5py.File], wait: float) -> h5py.File:
    """``opener()``, tried again every READ_POLL s for up to ``wait`` s while it fails because a
    writer holds the file at ``path``: a BlockingIOError (or an error raised on one), or, while
    a runner writes it, "truncated file": HDF5 takes a file's size before its lock, so an open
    that waited for the writer's lock may find the file grown since."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with IN_PROCESS:  # this process's writer has it open: wait as for another process's
                try:
                    key = file_key(os.stat(path))
                except OSError:
                    key = None  # the opener says why
                if key is not None and written_in_process(key):
                    raise BlockingIOError(errno.EAGAIN, "this process's log writer has the file open")
                return opener()
        except (OSError, HostileFileError) as exc:
            cause = exc.__context__ if isinstance(exc, HostileFileError) else exc  # open_hdf5's, raised on h5py's
            busy = isinstance(cause, BlockingIOError) or ("truncated file" in str(exc) and being_written(path))
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(READ_POLL)


def _open_read(path: str | Path) -> h5py.File:
    """The log at ``path`` opened for reading (waiting up to LIVE_WAIT for a writer to close it),
    its metadata cache held at METADATA_CACHE bytes:
    HDF5's adaptive cache otherwise grows while a reader visits episode after episode (by about
    150 kB per episode), so reading a long log would take memory in proportion to it. What is
    not a regular HDF5 file is refused (episodic.interface.files.HostileFileError, a ValueError)."""
    f = _waiting(path, lambda: open_hdf5(path), LIVE_WAIT)
    fix_metadata_cache(f, METADATA_CACHE)
    return f


def _episodes(f: h5py.File) -> h5py.Group | h5py.Dataset:
    """/episodes of the log ``f``: its table of episodes, or a format-1 log's group of them
    (ValueError when it has neither or it leads elsewhere)."""
    episodes = member(f, "episodes")
    if isinstance(episodes, h5py.Dataset) and episodes.dtype.names == EPISODE_DTYPE.names and episodes.ndim == 1:
        return episodes
    if not isinstance(episodes, h5py.Group):
        raise ValueError(f"{f.filename} is not an episodic log (no /episodes table or group)")
    return episodes


def _index(episodes: h5py.Dataset) -> dict[int, np.void]:
    """The rows of a table of episodes by episode number (_last_rows)."""
    return {int(row["number"]): row for row in _last_rows(episodes)}


def _table_rows(f: h5py.File) -> dict[str, int]:
    """Rows of each run-wide table of ``f`` (-1: not a table), looked up once for all its rows."""
    return {name: t.shape[0] if isinstance(t := member(f, name), h5py.Dataset) and t.ndim >= 1 else -1
            for name in ("initial_states", "steps", "segments", "commands")}


def _last_rows(episodes: h5py.Dataset) -> np.ndarray:
    """The rows of a table of episodes in number order, one per number (the last written,
    should one be written twice); rows that cannot be read are left out (_readable_rows)."""
    table = _readable_rows(episodes)
    _, last = np.unique(table["number"][::-1], return_index=True)
    return table[len(table) - 1 - last]


def _readable_rows(episodes: h5py.Dataset) -> np.ndarray:
    """The rows of a table of episodes, read at once or, when HDF5 cannot read some of them (rows
    whose text a kill during a flush kept from the file: episodic.interface.files.readable_rows),
    those it can, the others left out with a warning on the episodic.logs logger, once a process.
    Those episodes had not finished being written; the others read as they were."""
    try:
        return read_array(episodes)
    except OSError:
        rows, lost = readable_rows(episodes)
    said = (episodes.file.filename, len(lost))
    if lost and said not in _TORN_SAID:
        _TORN_SAID.add(said)
        _log.warning("%s: %d row%s of /episodes cannot be read (a write cut short, e.g. by a kill while the "
                     "file was flushed); %s left out", episodes.file.filename, len(lost), "s" if len(lost) > 1 else "",
                     "they are" if len(lost) > 1 else "it is")
    return rows


# the run-wide table each row of /episodes names rows of: (table, first row's field, rows' field or "" for one)
SPANS = (("initial_states", "initial_state", ""), ("steps", "steps_start", "n_steps"),
         ("segments", "segments_start", "n_segments"), ("commands", "commands_start", "n_commands"))


def _rows_problems(f: h5py.File, table: np.ndarray) -> dict[str, str]:
    """_row_problem of every row of ``table`` (rows of /episodes) that has one, by number as
    group name: the rows' spans checked at once, only the rows outside a table looked at one by one."""
    lengths = _table_rows(f)
    bad = np.zeros(len(table), bool)
    for name, first, count in SPANS:
        start = table[first]
        n = table[count] if count else np.ones_like(start)
        bad |= (n != 0) & ~((start >= 0) & (n >= 0) & (start <= lengths[name] - n))
    return {f"{int(row['number']):06d}": _row_problem(f, row, lengths) for row in table[bad]}


def _row_problem(f: h5py.File, row: np.void, rows: dict[str, int] | None = None) -> str:
    """Why the episode of a row of /episodes cannot be read, '' when it can: the rows it names
    must lie inside the tables (the writer appends them before the row, a damaged file may not
    hold them); ``rows``: _table_rows(f), when known."""
    rows = _table_rows(f) if rows is None else rows
    for name, first, count in SPANS:
        start, n = int(row[first]), int(row[count]) if count else 1
        if n and not 0 <= start <= start + n <= rows[name]:
            return f"its rows {start}..{start + n - 1} of /{name} are not in the file"
    return ""


def _text(value) -> str:
    """Text as read from an HDF5 dataset (h5py gives bytes for variable-length strings)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _episode_group(episodes: h5py.Group, name: str) -> h5py.Group | None:
    """Episode ``name`` of ``episodes``: None when it is not a group; HostileFileError when it
    is, or holds, an external link."""
    g = member(episodes, name)
    if not isinstance(g, h5py.Group):
        return None
    check_links(g)
    return g


def read_metadata(path: str | Path, *, count_episodes: bool = True) -> dict:
    """The run's metadata (the root attributes, JSON parsed) and, with ``count_episodes``, the
    number of episode groups as ``n_episodes``: counting them walks the group's index (about
    0.5 µs per episode), which a reader of a few episodes of a long log can leave out."""
    with _open_read(path) as f:
        meta = {k: decode_attr(v) for k, v in f.attrs.items()}
        wrong = [f"{key} is not {kind}" for key, kind, types in METADATA_TYPES
                 if key in meta and not isinstance(meta[key], types)]
        if wrong:
            raise ValueError(f"{path}: the run's metadata is damaged ({', '.join(wrong)}); it cannot be read")
        if count_episodes:
            meta["n_episodes"] = len(_episodes(f)) if "episodes" in f else 0
        return meta


# what the structured root attributes of a log are: (name, what to call it, Python types)
METADATA_TYPES = (("robot_settings", "a JSON object", dict), ("task_params", "a JSON object", dict),
                  ("versions", "a JSON object", dict), ("robot", "text", str), ("task", "text", str),
                  ("control_rate", "a number", (int, float)), ("seed", "a whole number", int))


def episode_problem(g: h5py.Group | None) -> str:
    """Why the episode group ``g`` is not whole, '' when it is. Its attribute ``complete`` says
    so (0 when a write failed part-way; the writer sets it to 1 after the last dataset), so
    nothing else is opened; a log written before the attribute is judged by its parts: one
    missing, or shorter than the episode's n_steps. A damaged group (not a group, parts of the
    wrong kind, attributes HDF5 cannot read) is not whole either."""
    if g is None:
        return "it is not an HDF5 group"
    try:
        return _problem(g)
    except HostileFileError:
        raise
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"it is damaged ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"


def _problem(g: h5py.Group) -> str:
    """episode_problem of a group whose parts may raise when looked at."""
    complete = g.attrs.get("complete")
    if complete is not None:
        return "" if complete else "its write did not finish"
    missing = [name for name in ("initial_state", "steps", "segments", "commands") if name not in g]
    if missing:
        return f"no {', '.join(missing)}"
    n = int_or(g.attrs.get("n_steps", 0), 0)
    steps, segments = g["steps"], g["segments"]
    if not (isinstance(steps, h5py.Group) and isinstance(segments, h5py.Group)):
        return "steps or segments is not a group"
    missing = [f"steps/{c}" for c in STEP_DTYPES if n and c not in steps]
    missing += [f"segments/{c}" for c in (*SEGMENT_FIELDS, "state") if c not in segments]
    if missing:
        return f"no {', '.join(missing)}"
    short = [f"steps/{c}" for c, d in steps.items() if d.shape[:1] != (n,)]
    return f"{', '.join(short)} not {n} rows long" if short else ""


def partial_episodes(path: str | Path) -> dict[str, str]:
    """The episodes of a log that are not whole: number (as its group name) -> why."""
    with _open_read(path) as f:
        episodes = _episodes(f)
        if isinstance(episodes, h5py.Dataset):
            return _rows_problems(f, _last_rows(episodes))
        found = ((name, episode_problem(_episode_group(episodes, name))) for name in episodes)
        return {name: problem for name, problem in found if problem}


def read_summary(path: str | Path) -> tuple[np.ndarray, dict[str, str]]:
    """One SUMMARY_DTYPE row per episode in number order, and the episodes that are not whole
    (number as group name -> why). Read from /summary at once; only the episodes it lacks (those
    not written whole, or all of a log written before /summary) are read from their groups."""
    with _open_read(path) as f:
        summary = member(f, "summary")
        rows = _summary_rows(read_array(summary)) if isinstance(summary, h5py.Dataset) and summary.dtype.names \
            else np.zeros(0, SUMMARY_DTYPE)
        episodes = _episodes(f)
        partial: dict[str, str] = {}
        if isinstance(episodes, h5py.Dataset):  # the table: rows its /summary lacks from their attributes
            table = _last_rows(episodes)
            rows = rows[np.isin(rows["number"], table["number"])]  # none of a row that cannot be read
            partial = _rows_problems(f, table)
            missing = [summary_row(int(row["number"]), _attrs_of(row))
                       for row in table[~np.isin(table["number"], rows["number"])]]
            if missing:
                rows = np.sort(np.concatenate([rows, np.array(missing, dtype=SUMMARY_DTYPE)]), order="number")
            return rows, partial
        if len(episodes) == len(rows):
            return rows, partial
        known = set(rows["number"].tolist())
        extra = []
        for name in sorted(episodes):
            number = int_or(name) if name.isdigit() else -1
            if number in known or not 0 <= number < 1 << 62:  # a name that is not an episode's number
                continue
            g = _episode_group(episodes, name)
            problem = episode_problem(g)
            extra.append(summary_row(number, _attrs_or_none(g)))
            if problem:
                partial[name] = problem
        return np.sort(np.concatenate([rows, np.array(extra, dtype=SUMMARY_DTYPE)]), order="number"), partial


def read_episodes(path: str | Path, numbers: list[int] | None = None) -> list[StoredEpisode]:
    """The whole episodes of a log, all or those whose sequence numbers are given, as a list
    (``iter_episodes`` reads them one at a time instead)."""
    return list(iter_episodes(path, numbers))


def iter_episodes(path: str | Path, numbers: list[int] | None = None) -> Iterator[StoredEpisode]:
    """The whole episodes of a log in number order, each read when the caller asks for it, so
    a long log is never held in memory whole: all of them (an episode that is not whole, see
    ``partial_episodes``, is left out), or those whose sequence numbers are given. Given numbers
    are checked before the first episode comes: ValueError naming one the log lacks or that is
    not whole. Only the episodes asked for are opened, whatever the length of the log. The file
    is opened for each episode (a live log's writer waits for no reader); all of them means
    those the log held when the first was asked for."""
    with _open_read(path) as f:
        episodes = _episodes(f)
        if isinstance(episodes, h5py.Dataset):
            index = _index(episodes)
            wanted = sorted(index) if numbers is None else sorted(set(numbers))
            missing = [f"{n:06d}" for n in wanted if n not in index]
            if missing:
                raise ValueError(f"{path} has no episode {', '.join(missing)}; it holds {len(index)}")
            for n in wanted if numbers is not None else ():
                problem = _row_problem(f, index[n])
                if problem:
                    raise ValueError(f"episode {n:06d} of {path} was not written whole ({problem}); "
                                     f"it cannot be read")
    if isinstance(episodes, h5py.Dataset):
        for n in wanted:
            with _open_read(path) as f:
                episode = _read_row_or_none(f, index[n]) if numbers is None else _read_row(f, index[n])
            if episode is not None:
                yield episode
        return
    with _open_read(path) as f:
        episodes = _episodes(f)
        if numbers is None:
            names = sorted(episodes)
        else:
            names = sorted({f"{n:06d}" for n in numbers})
            missing = [name for name in names if name not in episodes]
            if missing:
                raise ValueError(f"{path} has no episode {', '.join(missing)}; it holds {len(episodes)}")
            for name in names:
                problem = episode_problem(_episode_group(episodes, name))
                if problem:
                    raise ValueError(f"episode {name} of {path} was not written whole ({problem}); "
                                     f"it cannot be read")
    for name in names:
        with _open_read(path) as f:
            g = _episode_group(_episodes(f), name)
            episode = _read_episode(name, g) if g is not None and not episode_problem(g) else None
        if episode is not None:
            yield episode


def _attrs_or_none(g: h5py.Group | None) -> dict:
    """The attributes of a damaged episode group that HDF5 can read, as Python values ({} when none)."""
    found: dict = {}
    if g is None:
        return found
    for key in g.attrs:
        with contextlib.suppress(OSError, TypeError, ValueError, KeyError):
            found[key] = decode_attr(g.attrs[key])
    return found


def _read_episode(name: str, g: h5py.Group) -> StoredEpisode:
    """The episode stored in group ``g`` (named ``name``), read whole: each dataset after its
    declared size is checked (episodic.interface.files.read_array); ValueError naming the episode
    when a part is damaged."""
    try:
        return _read_parts(name, g)
    except HostileFileError:
        raise
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"episode {name} of {g.file.filename} is damaged ({str(exc).splitlines()[0]}); "
                         f"it cannot be read") from None


def _read_parts(name: str, g: h5py.Group) -> StoredEpisode:
    """_read_episode's reading, raising whatever a damaged part raises."""
    steps = g["steps"]
    columns = tuple(decode_attr(c) for c in steps["task_state"].attrs.get("columns", [])) \
        if "task_state" in steps else ()
    commands = [({k: decode_attr(v) for k, v in c.attrs.items()}, {k: read_array(v) for k, v in c.items()})
                for _, c in sorted(g["commands"].items())]
    return StoredEpisode(name=name, attrs={k: decode_attr(v) for k, v in g.attrs.items()},
                         initial_state=read_array(g["initial_state"]),
                         steps={k: read_array(v) for k, v in steps.items()},
                         segments={k: read_array(v) for k, v in g["segments"].items()}, commands=commands,
                         state_columns=columns)



def _attrs_of(row: np.void) -> dict:
    """The attributes of the episode of a row of /episodes ({} when its text is not a JSON object)."""
    try:
        attrs = json.loads(_text(row["attrs"]))
    except (json.JSONDecodeError, RecursionError):
        return {}
    return attrs if isinstance(attrs, dict) else {}


def _read_row(f: h5py.File, row: np.void) -> StoredEpisode:
    """The episode of the row ``row`` of /episodes of the log ``f``, read whole (ValueError naming
    it when a part is damaged)."""
    name = f"{int(row['number']):06d}"
    try:
        return _read_rows(f, name, row)
    except HostileFileError:
        raise
    except (OSError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ValueError(f"episode {name} of {f.filename} is damaged ({str(exc).splitlines()[0]}); "
                         f"it cannot be read") from None


def _read_row_or_none(f: h5py.File, row: np.void) -> StoredEpisode | None:
    """_read_row of an episode read among all of a log's: None, with a warning on the logger,
    when it is not whole or a part of it cannot be read (as the commands of a write that a kill
    cut short while the file was flushed, _readable_rows)."""
    if _row_problem(f, row):
        return None
    try:
        return _read_row(f, row)
    except ValueError as exc:
        if isinstance(exc, HostileFileError):
            raise
        _log.warning("%s; it is left out", exc)
        return None


def _slice(f: h5py.File, name: str, start: int, n: int) -> np.ndarray:
    """Rows start .. start + n - 1 of the table ``name`` of ``f`` (ValueError when they are not
    there), read only within the bounds read_array keeps (HostileFileError otherwise): at most
    MAX_ARRAY_BYTES, from a table that does not expand over MAX_RATIO times its stored bytes."""
    table = member(f, name)
    if not isinstance(table, h5py.Dataset) or table.ndim < 1 or not 0 <= start <= start + n <= table.shape[0]:
        raise ValueError(f"its rows {start}..{start + n - 1} of /{name} are not in the file")
    row_bytes = table.dtype.itemsize * int(np.prod(table.shape[1:], dtype=object))
    whole, stored = row_bytes * table.shape[0], table.id.get_storage_size()
    if n * row_bytes > MAX_ARRAY_BYTES or (whole > SMALL_ARRAY_BYTES and whole > MAX_RATIO * stored):
        raise HostileFileError(f"{f.filename}: /{name} declares {whole} bytes stored in {stored} ({n * row_bytes} "
                               f"to read at once); the file is damaged or not one of ours")
    return table[start : start + n]


def _read_rows(f: h5py.File, name: str, row: np.void) -> StoredEpisode:
    """_read_row's reading, raising whatever a damaged part raises."""
    steps: dict[str, np.ndarray] = {}
    columns: tuple[str, ...] = ()
    if row["n_steps"]:
        rows = _slice(f, "steps", int(row["steps_start"]), int(row["n_steps"]))
        steps = {column: np.ascontiguousarray(rows[column]) for column in rows.dtype.names or ()}
        columns = tuple(decode_attr(c) for c in f["steps"].attrs.get("columns", []))
    rows = _slice(f, "segments", int(row["segments_start"]), int(row["n_segments"]))
    segments = {field: np.ascontiguousarray(rows[field]) for field in rows.dtype.names or ()}
    segments.setdefault("state", np.zeros((len(rows), 0)))
    texts = [_text(t) for t in _slice(f, "commands", int(row["commands_start"]), int(row["n_commands"]))]
    records = [json.loads(t) for t in texts]
    places = [(start, int(np.prod(shape, dtype=np.int64))) for r in records for start, shape in r["arrays"].values()]
    first = min((start for start, _ in places), default=0)
    values = _slice(f, "command_values", first, max((start + n for start, n in places), default=first) - first)
    commands = [command_from_entry(t, values, first) for t in texts]
    initial = _slice(f, "initial_states", int(row["initial_state"]), 1)[0]
    return StoredEpisode(name=name, attrs=_attrs_of(row), initial_state=initial, steps=steps, segments=segments,
                         commands=commands, state_columns=columns)
