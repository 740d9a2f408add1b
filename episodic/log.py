"""Episode logs: buffered in numpy while an episode runs, written to HDF5 once it ends.

File layout (one file per run; see the README):
  /                     attrs: format, task, task_params, robot, robot_settings, mode, seed,
                        control_rate, timestep, versions (JSON where structured), created
  /model_xml            the compiled scene, as MJCF text
  /episodes/NNNNNN/     attrs: episode_id, flag, flag_name, message, return, success, n_steps,
                        wall_time, rng_seed, batch, batch_position (-1 unless evaluated in a batch,
                        episodic.batch), complete (0 until the episode is written whole)
      initial_state     mjSTATE_INTEGRATION vector the episode started from
      steps/<column>    per control step (episodic.columns.STEP_COLUMNS, plus task_state with attr 'columns')
      segments/<field>  per segment (index >= 1): index, kind, flag, reward, n_steps, state (n_seg, n_state)
      commands/NNN/     each command as received: attrs kind, episode_id, index, ...; arrays
  /summary              one row per episode written whole, appended after it (SUMMARY_DTYPE)
  /rejected             commands refused outside any episode: episode_id, index, flag (table, appended)
"""
from __future__ import annotations

import errno
import importlib.metadata
import json
import logging
import os
import platform
import shutil
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from episodic.columns import STEP_DTYPES
from episodic.commands import Kind
from episodic.pacing import Mark, Timing

FORMAT = "episodic-log/1"
_log = logging.getLogger("episodic.log")
SPACE_MARGIN = 1 << 20  # bytes kept free on the log's disk beyond twice an episode's data
# One row of /summary per episode: what `episodic info` shows, so it reads one dataset instead
# of every episode's group. wall_time and timing_period_error_* in s; timing_* 0 / NaN in blocking mode;
# batch and batch_position -1 for an episode not evaluated in a batch.
SUMMARY_DTYPE = np.dtype([("number", "<i8"), ("episode_id", "<i8"), ("return", "<f8"), ("flag", "<i4"),
                          ("success", "i1"), ("n_steps", "<i8"), ("wall_time", "<f8"), ("timing_ticks", "<i8"),
                          ("timing_period_error_p50", "<f8"), ("timing_period_error_p99", "<f8"),
                          ("timing_period_error_max", "<f8"), ("timing_missed", "<i8"), ("batch", "<i8"),
                          ("batch_position", "<i8")])
# what a summary field is when an episode's attributes (or an older log's /summary) lack it
SUMMARY_DEFAULTS = {"timing_ticks": 0, "timing_missed": 0, "batch": -1, "batch_position": -1}
# bytes of HDF5's metadata cache for a log being written (fixed; HDF5's default starts at 2 MB and
# grows, each cached entry taking several times its size in memory: a runner's memory then grew by
# about 100 kB per episode written for its first few hundred episodes)
METADATA_CACHE = 1 << 17
SUMMARY_CHUNK = 512    # rows per HDF5 chunk of /summary
REJECTED_CHUNK = 1024  # rows per HDF5 chunk of /rejected

SEGMENT_FIELDS = {"index": np.int32, "kind": np.int8, "flag": np.int8, "reward": np.float64,
                  "n_steps": np.int32}
COMMAND_ATTRS = ("episode_id", "index", "max_commands", "rate", "wait_time", "feedforward", "reason")
COMMAND_ARRAYS = ("posture", "context", "q", "qd", "qdd", "kp", "kd", "ki", "task_gains")


def software_versions() -> dict[str, str]:
    import mujoco  # imported here: only needed for metadata
    import episodic

    # scipy's version from its metadata: importing it would cost a runner's start-up a third
    return {"episodic": episodic.__version__, "mujoco": mujoco.__version__, "numpy": np.__version__,
            "scipy": importlib.metadata.version("scipy"), "h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version,
            "python": platform.python_version()}


@dataclass
class EpisodeBuffer:
    """Everything one episode produced, kept in memory until it ends."""

    number: int
    episode_id: int
    initial_state: np.ndarray
    rng_seed: tuple[int, int]
    state_columns: tuple[str, ...]
    blocks: list[dict[str, np.ndarray]] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)
    commands: list = field(default_factory=list)
    flag: int = 0
    flag_name: str = "OK"
    message: str = ""
    ticks: tuple[Mark, Mark] | None = None  # the pacer's tick record at the start and the end (non-blocking mode)
    success: bool = False
    early_end: float = 0.0  # the charge for ending early, <= 0 (EpisodeMachine._early_end_charge)
    wall_time: float = 0.0
    batch: int = -1           # the batch's number in the run (episodic.batch), -1 when sent one by one
    batch_position: int = -1  # the episode's position in that batch

    @property
    def n_steps(self) -> int:
        return sum(len(b["time"]) for b in self.blocks)

    @property
    def timing(self) -> dict[str, float | int]:
        """The episode's tick statistics as log attributes (episodic.pacing.Timing), none in
        blocking mode. Worked out when asked (by the log's write), not on the tick that ends
        the episode."""
        return {} if self.ticks is None else Timing.between(*self.ticks).as_attrs()

    @property
    def episode_return(self) -> float:
        """The rewards of the episode's segments and its early end's charge."""
        return float(sum(s["reward"] for s in self.segments)) + self.early_end

    def column(self, name: str) -> np.ndarray:
        """One per-step column over the episode."""
        return np.concatenate([b[name] for b in self.blocks])

    def steps(self) -> dict[str, np.ndarray]:
        """Per-step columns concatenated over the episode."""
        return {k: self.column(k) for k in self.blocks[0]} if self.blocks else {}

    def segment_table(self) -> dict[str, np.ndarray]:
        out = {k: np.array([s[k] for s in self.segments], dtype=t) for k, t in SEGMENT_FIELDS.items()}
        n_state = len(self.state_columns)
        out["state"] = np.array([s["state"] for s in self.segments], dtype=float).reshape(-1, n_state)
        return out


def _command_record(cmd) -> tuple[dict, dict]:
    """attrs and arrays of a command as received (unvalidated values kept as far as numeric)."""
    attrs = {"kind": int(getattr(cmd, "kind", -1)), "type": type(cmd).__name__}
    arrays = {}
    for name in COMMAND_ATTRS:
        if hasattr(cmd, name) and getattr(cmd, name) is not None:
            value = getattr(cmd, name)
            attrs[name] = int(value) if isinstance(value, (bool, int, np.integer)) else _scalar(value)
    for name in COMMAND_ARRAYS:
        value = getattr(cmd, name, None)
        if value is not None:
            try:
                arrays[name] = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                attrs[f"{name}_repr"] = repr(value)[:1000]
    return attrs, arrays


def _scalar(value):
    if isinstance(value, str):
        return value[:1000]
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)[:1000]


class LogError(Exception):
    """A run log cannot be created where asked (it exists, is a directory or a symbolic link, or
    the path cannot be written); the message says why and what to do."""


WRITERS = ("inline", "thread", "ticks")  # how a RunLog writes (RunLog's docstring)


@dataclass
class _Job:
    """A queued write: what it is (for messages), its pieces, and the bytes it will add."""

    what: str
    pieces: Iterator[None]
    n_bytes: int


class RunLog:
    """One HDF5 file per run, always a new file: an existing one is refused unless ``overwrite``
    (and even then one that another process has open is refused). A symbolic link as ``path`` is
    refused, not followed. Each finished episode is written whole and flushed, so a run stopped
    mid-episode leaves a readable file holding every finished episode; its group is marked
    ``complete`` last, and a row is then appended to /summary.

    ``writer`` says where the writing happens (writes are queued and done in order either way):
    - "inline": in ``write_episode`` (and ``reject``, ``set_attrs``) itself, before it returns;
    - "thread" (a blocking runner's): on a writer thread, started when a write is queued and
      ended when none is left, so a finished episode is written while the next one runs (h5py
      lets the interpreter go while it reads and writes datasets, and the simulation runs in C
      without it: on two cores neither waits for the other). ``close`` waits for the queue;
      a process killed outright (SIGKILL) loses what was still queued, the last few ms;
    - "ticks" (a paced runner's): ``work(budget)`` writes a piece at a time (an attribute, a
      dataset, or PIECE_BYTES of a dataset's rows), so a paced loop spends its spare time per
      tick on it instead of stalling for the milliseconds a whole episode takes (a thread would
      take the interpreter from the tick loop at random moments).
    A write that fails (e.g. a full disk) is reported on the ``episodic.log`` logger, counted in
    ``failed_writes`` and kept for ``pop_failures``; the run goes on. An episode the disk has no
    room for (beside what is queued) is refused whole when it is queued, so the caller's reply
    can say so; one whose write fails part-way keeps ``complete`` = 0.
    """

    def __init__(self, path: str | Path, metadata: dict, writer: str = "inline", overwrite: bool = False):
        if writer not in WRITERS:
            raise ValueError(f"unknown log writer '{writer}'; use one of {', '.join(WRITERS)}")
        self.path = Path(path)
        self.failed_writes = 0
        self.writer = writer
        self._pending: deque[_Job] = deque()
        self._queued_bytes = 0  # of the queued writes, not yet on disk
        self._failures: list[str] = []
        self._lock = threading.Lock()  # guards the queue's bookkeeping, the failures and the writer thread
        self._thread: threading.Thread | None = None
        self._file = _create(self.path, overwrite)
        for key, value in metadata.items():
            if key == "model_xml":
                self._file.create_dataset("model_xml", data=value)
            else:
                self._file.attrs[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
        self._file.attrs["format"] = FORMAT
        self._episodes = self._file.create_group("episodes")
        self._summary = self._file.create_dataset("summary", shape=(0,), maxshape=(None,), dtype=SUMMARY_DTYPE,
                                                  chunks=(SUMMARY_CHUNK,))
        self._rejected: h5py.Dataset | None = None
        self._file.flush()

    def _submit(self, what: str, pieces: Iterator[None], n_bytes: int = 0) -> None:
        """Queue a write of about ``n_bytes`` bytes (0: too small to check) unless the disk
        cannot take it beside what is queued, and start it as the writer says."""
        with self._lock:
            queued = self._queued_bytes
        if n_bytes:
            try:
                self._check_space(n_bytes + queued)
            except OSError as exc:
                self._failed(what, exc)
                return
        with self._lock:
            self._pending.append(_Job(what, pieces, n_bytes))
            self._queued_bytes += n_bytes
            if self.writer == "thread" and self._thread is None:
                self._thread = threading.Thread(target=self._drain, name="episodic-log-writer")
                self._thread.start()
        if self.writer == "inline":
            self.work()

    def _drain(self) -> None:
        """The writer thread: write until the queue is empty, then end."""
        while True:
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return
            self.work()

    def work(self, budget: float = float("inf")) -> bool:
        """Write pending pieces for up to ``budget`` s: one, then more while another as long as
        the last one would still end within the budget; True while some remain."""
        end = time.perf_counter() + budget
        while self._pending:
            job = self._pending[0]
            started = time.perf_counter()
            try:
                next(job.pieces)
            except StopIteration:
                self._done(job)
            except Exception as exc:  # noqa: BLE001 - a failed write is reported, and the run goes on
                self._done(job)
                self._failed(job.what, exc)
            now = time.perf_counter()
            if 2 * now - started > end:
                break
        return bool(self._pending)

    def _done(self, job: _Job) -> None:
        with self._lock:
            self._pending.popleft()
            self._queued_bytes -= job.n_bytes

    def _failed(self, what: str, exc: Exception) -> None:
        with self._lock:
            self.failed_writes += 1
            self._failures.append(f"{what} was not logged in full ({exc})")
        _log.error("could not write %s to %s (%s); the run goes on", what, self.path, exc)

    def pop_failures(self) -> list[str]:
        """What could not be logged since the last call, one sentence each (for the next reply;
        with the "thread" writer, a failure part-way through a write comes in a later one)."""
        with self._lock:
            failures, self._failures = self._failures, []
        return failures

    def write_episode(self, ep: EpisodeBuffer) -> None:
        """Write a finished episode (only queued unless the writer is "inline": the command
        that ends an episode does not wait for it); refused here if the disk has no room for it."""
        self._submit(f"episode {ep.number:06d} (id {ep.episode_id})", self._write_episode(ep), _data_bytes(ep))

    def reject(self, episode_id, index, flag: int) -> None:
        """Note a command refused while no episode ran (a row appended to /rejected)."""
        self._submit(f"the refusal of command {index} of episode {episode_id}", self._reject(episode_id, index, flag),
                     REJECTED_CHUNK * 24)

    def set_attrs(self, attrs: dict) -> None:
        """Run-level attributes known only at the end (e.g. the whole run's tick timing)."""
        self._submit("the run's attributes", self._set_attrs(attrs))

    def _check_space(self, n_bytes: int) -> None:
        """Refuse a write of about ``n_bytes`` bytes the disk cannot take: HDF5 does not survive
        running out of space mid-write (the process may crash), so an episode that does not fit
        is left out whole and the file stays sound."""
        free = shutil.disk_usage(self.path.parent).free
        if free < 2 * n_bytes + SPACE_MARGIN:
            raise OSError(errno.ENOSPC, f"disk full: {free} bytes free, {2 * n_bytes + SPACE_MARGIN} needed; "
                          f"free some space or log elsewhere")

    def _write_episode(self, ep: EpisodeBuffer) -> Iterator[None]:
        """Write ``ep`` in pieces (module docstring's layout): one attribute or dataset each, or
        at most PIECE_BYTES of a dataset's rows when written between ticks; the group is marked
        complete after its last dataset, then its /summary row is appended and the file flushed."""
        head = {"episode_id": ep.episode_id, "flag": ep.flag, "flag_name": ep.flag_name, "message": ep.message,
                "return": ep.episode_return, "early_end": ep.early_end, "success": ep.success, "n_steps": ep.n_steps,
                "wall_time": ep.wall_time, "rng_seed": list(ep.rng_seed), "batch": ep.batch,
                "batch_position": ep.batch_position, **ep.timing}
        g = _group(self._episodes.id, f"{ep.number:06d}")
        yield from _attrs(g, {**head, "complete": False})
        yield from self._dataset(g, "initial_state", [ep.initial_state])
        steps = _group(g, "steps")
        for name in ep.blocks[0] if ep.blocks else ():
            column = yield from self._dataset(steps, name, [b[name] for b in ep.blocks], STEP_DTYPES[name])
            if name == "task_state":
                yield from _attrs(column, {"columns": list(ep.state_columns)})
        seg = _group(g, "segments")
        for name, values in ep.segment_table().items():
            yield from self._dataset(seg, name, [values])
        cmds = _group(g, "commands")
        for i, cmd in enumerate(ep.commands):
            attrs, arrays = _command_record(cmd)
            c = _group(cmds, f"{i:03d}")
            yield from _attrs(c, attrs)
            for name, value in arrays.items():
                yield from self._dataset(c, name, [value])
        h5py.h5a.open(g, b"complete").write(np.array(True), mtype=_types(np.dtype(bool))[1])
        yield
        _append(self._summary.id, summary_row(ep.number, head))
        yield
        self._file.flush()

    def _dataset(self, parent: h5py.h5g.GroupID, name: str, parts: list[np.ndarray],
                 dtype: type | None = None) -> Generator[None, None, h5py.h5d.DatasetID]:
        """Create dataset ``name`` of ``parent`` holding ``parts`` (arrays alike but in their
        first dimension) one after the other, as ``dtype`` (theirs when None), and write it in
        one piece, or when written between ticks and larger than PIECE_BYTES a piece per PIECE_BYTES of
        rows (each part written where it goes, not joined first). Returns the dataset."""
        dtype = np.dtype(dtype or parts[0].dtype)
        shape = (sum(len(p) for p in parts), *parts[0].shape[1:]) if parts[0].ndim else ()
        dset = h5py.h5d.create(parent, name.encode(), _types(dtype)[0], h5py.h5s.create_simple(shape),
                               dcpl=_DATASET_CREATION, lcpl=_LINK_CREATION)
        if self.writer != "ticks" or (len(parts) == 1 and parts[0].nbytes <= PIECE_BYTES):
            if 0 not in shape:  # one write of the whole dataset, which HDF5 takes straight from the array
                values = np.ascontiguousarray(parts[0], dtype) if len(parts) == 1 \
                    else np.concatenate(parts, out=np.empty(shape, dtype), casting="unsafe")
                dset.write(h5py.h5s.ALL, h5py.h5s.ALL, values, _types(dtype)[1])
            yield
            return dset
        row = 0
        for part in parts:
            per_piece = max(PIECE_BYTES // max(part[:1].nbytes, 1), 1)
            for start in range(0, len(part), per_piece):
                _write_rows(dset, row + start, np.ascontiguousarray(part[start : start + per_piece], dtype))
                yield
            row += len(part)
        return dset

    def _reject(self, episode_id, index, flag: int) -> Iterator[None]:
        if self._rejected is None:
            self._rejected = self._file.create_dataset("rejected", shape=(0, 3), maxshape=(None, 3), dtype=np.int64,
                                                       chunks=(REJECTED_CHUNK, 3))
            self._rejected.attrs["columns"] = ["episode_id", "index", "flag"]
        _append(self._rejected.id, np.array([_int_or(episode_id), _int_or(index), flag], dtype=np.int64))
        self._file.flush()
        yield

    def _set_attrs(self, attrs: dict) -> Iterator[None]:
        self._file.attrs.update(attrs)
        self._file.flush()
        yield

    def close(self) -> None:
        """Finish pending writes (waiting for the writer thread) and close the file."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()
        if self._file.id.valid:
            self.work()
            self._file.close()


def _create(path: Path, overwrite: bool) -> h5py.File:
    """A new, empty HDF5 file at ``path`` (LogError saying why and what to do when it cannot be).
    Without ``overwrite`` the file is created exclusively, so an existing one (a finished run's
    log, or a live run's) is never truncated. Free space is not tracked for reuse
    (fs_strategy "none"): HDF5's free-space manager would keep a record per freed fragment in
    memory, about 1 kB per episode over a run, for a file under 0.1 % larger."""
    if path.is_symlink():
        raise LogError(f"{path} is a symbolic link (to {os.readlink(path)}); a log is never written through "
                       f"a link: give the real path")
    if path.is_dir():
        raise LogError(f"{path} is a directory; give the log a file name, e.g. {path / 'run.h5'}")
    if path.exists() and not overwrite:
        raise LogError(f"{path} exists (the log of an earlier or of a running run); a log is never overwritten "
                       f"unless asked: choose another path, or overwrite it (episodic serve --overwrite, "
                       f"Runner(..., overwrite=True))")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "a file is in the way" if isinstance(exc, FileExistsError) else os.strerror(exc.errno)
        raise LogError(f"cannot create the directory {path.parent} for the log: {reason}; choose a path in "
                       f"a directory you can write to") from None
    try:
        if path.exists():
            _check_not_open(path)
        f = h5py.File(path, "w" if overwrite else "x", fs_strategy="none")
    except FileExistsError:  # created by another process since the check above
        raise LogError(f"{path} was created by another process just now; choose another path") from None
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise LogError(f"cannot write the log {path}: {reason}; choose a path in a directory you can "
                       f"write to") from None
    _fix_metadata_cache(f, METADATA_CACHE)
    return f


def _fix_metadata_cache(f: h5py.File, n_bytes: int) -> None:
    """Hold the metadata cache of ``f`` at ``n_bytes`` bytes (no adaptive resizing)."""
    config = f.id.get_mdc_config()
    config.set_initial_size = True
    config.initial_size = config.min_size = config.max_size = n_bytes
    config.incr_mode = config.flash_incr_mode = config.decr_mode = 0  # the modes' "off" values
    f.id.set_mdc_config(config)


def _check_not_open(path: Path) -> None:
    """LogError when another process has the HDF5 file at ``path`` open (HDF5 locks it)."""
    try:
        h5py.File(path, "r").close()
    except BlockingIOError:
        raise LogError(f"{path} is open in another process (a runner still writing it?); it is not "
                       f"overwritten: stop that process first, or choose another path") from None
    except OSError:
        pass  # not an HDF5 file: nothing holds it, it may be replaced


def _data_bytes(ep: EpisodeBuffer) -> int:
    """Bytes of an episode's per-step data and initial state (its bulk in the log)."""
    return ep.initial_state.nbytes + sum(v.nbytes for b in ep.blocks for v in b.values())


def _append(dataset: h5py.h5d.DatasetID, row: np.ndarray) -> None:
    """Append one row to a dataset resizable along its first axis."""
    n, *rest = dataset.shape
    dataset.set_extent((n + 1, *rest))
    _write_rows(dataset, n, row[None])


# HDF5 objects are made through h5py's low-level API, with each type, dataspace and property
# list made once: its high-level calls (create_dataset, attrs[name] = value) build a dozen h5py
# objects per dataset or attribute, each entered in h5py's registry of open identifiers, and took
# 107 us per dataset and 66 us per attribute, several times HDF5's own work. What they make is
# what h5py's high-level calls make: contiguous datasets and groups without time stamps, names in
# UTF-8, text as variable-length UTF-8 strings, bool as h5py's enum.
PIECE_BYTES = 1 << 16  # bytes of a dataset's rows a write between ticks writes at a time (tens of us)
_TEXT = h5py.string_dtype()
_SCALAR = h5py.h5s.create(h5py.h5s.SCALAR)
_LINK_CREATION = h5py.h5p.create(h5py.h5p.LINK_CREATE)
_LINK_CREATION.set_char_encoding(h5py.h5t.CSET_UTF8)
_GROUP_CREATION = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
_GROUP_CREATION.set_obj_track_times(False)
_DATASET_CREATION = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
_DATASET_CREATION.set_obj_track_times(False)
_TYPES: dict[str, tuple[h5py.h5t.TypeID, h5py.h5t.TypeID]] = {}


def _types(dtype: np.dtype) -> tuple[h5py.h5t.TypeID, h5py.h5t.TypeID]:
    """The HDF5 types of ``dtype`` (an object dtype stands for text) as h5py makes them: the
    one stored in the file and the one of the values in memory (they differ for text only)."""
    key = dtype.str
    if key not in _TYPES:
        dtype = _TEXT if dtype.kind == "O" else dtype
        _TYPES[key] = (h5py.h5t.py_create(dtype, logical=True), h5py.h5t.py_create(dtype))
    return _TYPES[key]


def _group(parent: h5py.h5g.GroupID, name: str) -> h5py.h5g.GroupID:
    """A new group ``name`` in ``parent``."""
    return h5py.h5g.create(parent, name.encode(), lcpl=_LINK_CREATION, gcpl=_GROUP_CREATION)


def _attrs(obj: h5py.h5o.ObjectID, attrs: dict) -> Iterator[None]:
    """Give ``obj`` the new attributes ``attrs`` (name -> a number, bool, text, or a list of one
    of them), one piece each."""
    for name, value in attrs.items():
        text = isinstance(value, str) or (isinstance(value, list) and any(isinstance(v, str) for v in value))
        data = np.array(value, dtype=_TEXT if text else None)
        stored, memory = _types(data.dtype)
        space = _SCALAR if data.ndim == 0 else h5py.h5s.create_simple(data.shape)
        h5py.h5a.create(obj, name.encode(), stored, space).write(data, mtype=memory)
        yield


def _write_rows(dataset: h5py.h5d.DatasetID, start: int, rows: np.ndarray) -> None:
    """Write ``rows`` (n, ...), C-contiguous, as rows start .. start + n - 1 of ``dataset``."""
    space = dataset.get_space()
    space.select_hyperslab((start,) + (0,) * (rows.ndim - 1), rows.shape)
    dataset.write(h5py.h5s.create_simple(rows.shape), space, rows, _types(rows.dtype)[1])


def summary_row(number: int, attrs) -> np.ndarray:
    """The /summary row of episode ``number`` from its attributes (a mapping such as its group's
    attrs; absent fields as SUMMARY_DEFAULTS says, else NaN: the timing fields 0 ticks and NaN s,
    as in blocking mode)."""
    row = np.zeros((), dtype=SUMMARY_DTYPE)
    row["number"] = number
    for name in SUMMARY_DTYPE.names[1:]:
        row[name] = attrs.get(name, SUMMARY_DEFAULTS.get(name, np.nan))
    return row


def _summary_rows(stored: np.ndarray) -> np.ndarray:
    """/summary rows as read from a log, in SUMMARY_DTYPE (an older log's lack the later fields:
    those take their defaults)."""
    if stored.dtype == SUMMARY_DTYPE:
        return stored
    rows = np.zeros(len(stored), dtype=SUMMARY_DTYPE)
    for name in SUMMARY_DTYPE.names:
        rows[name] = stored[name] if name in stored.dtype.names else SUMMARY_DEFAULTS.get(name, np.nan)
    return rows


def _int_or(value, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


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


def _open_read(path: str | Path) -> h5py.File:
    """The log at ``path`` opened for reading, its metadata cache held at METADATA_CACHE bytes:
    HDF5's adaptive cache otherwise grows while a reader visits episode after episode (by about
    150 kB per episode), so reading a long log would take memory in proportion to it."""
    f = h5py.File(path, "r")
    _fix_metadata_cache(f, METADATA_CACHE)
    return f


def read_metadata(path: str | Path, *, count_episodes: bool = True) -> dict:
    """The run's metadata (the root attributes, JSON parsed) and, with ``count_episodes``, the
    number of episode groups as ``n_episodes``: counting them walks the group's index (about
    0.5 µs per episode), which a reader of a few episodes of a long log can leave out."""
    with _open_read(path) as f:
        meta = {k: decode_attr(v) for k, v in f.attrs.items()}
        if count_episodes:
            meta["n_episodes"] = len(f["episodes"]) if "episodes" in f else 0
        return meta


def decode_attr(value):
    """An HDF5 attribute's value as Python: text for bytes, JSON parsed, numpy scalars as Python's."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    if isinstance(value, np.generic):
        return value.item()
    return value


def episode_problem(g: h5py.Group) -> str:
    """Why the episode group ``g`` is not whole, '' when it is. Its attribute ``complete`` says
    so (0 when a write failed part-way; the writer sets it to 1 after the last dataset), so
    nothing else is opened; a log written before the attribute is judged by its parts: one
    missing, or shorter than the episode's n_steps."""
    complete = g.attrs.get("complete")
    if complete is not None:
        return "" if complete else "its write did not finish"
    missing = [name for name in ("initial_state", "steps", "segments", "commands") if name not in g]
    if missing:
        return f"no {', '.join(missing)}"
    n = int(g.attrs.get("n_steps", 0))
    steps, segments = g["steps"], g["segments"]
    missing = [f"steps/{c}" for c in STEP_DTYPES if n and c not in steps]
    missing += [f"segments/{c}" for c in (*SEGMENT_FIELDS, "state") if c not in segments]
    if missing:
        return f"no {', '.join(missing)}"
    short = [f"steps/{c}" for c, d in steps.items() if d.shape[:1] != (n,)]
    return f"{', '.join(short)} not {n} rows long" if short else ""


def partial_episodes(path: str | Path) -> dict[str, str]:
    """The episodes of a log that are not whole: number (as its group name) -> why."""
    with _open_read(path) as f:
        found = ((name, episode_problem(g)) for name, g in f["episodes"].items())
        return {name: problem for name, problem in found if problem}


def read_summary(path: str | Path) -> tuple[np.ndarray, dict[str, str]]:
    """One SUMMARY_DTYPE row per episode in number order, and the episodes that are not whole
    (number as group name -> why). Read from /summary at once; only the episodes it lacks (those
    not written whole, or all of a log written before /summary) are read from their groups."""
    with _open_read(path) as f:
        rows = _summary_rows(f["summary"][()]) if "summary" in f else np.zeros(0, SUMMARY_DTYPE)
        episodes = f["episodes"]
        partial: dict[str, str] = {}
        if len(episodes) == len(rows):
            return rows, partial
        known = set(rows["number"].tolist())
        extra = []
        for name in sorted(episodes):
            if int(name) in known:
                continue
            g = episodes[name]
            extra.append(summary_row(int(name), g.attrs))
            problem = episode_problem(g)
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
    not whole. Only the episodes asked for are opened, whatever the length of the log."""
    with _open_read(path) as f:
        if "episodes" not in f:
            raise ValueError(f"{path} is not an episodic log (no /episodes group)")
        episodes = f["episodes"]
        if numbers is None:
            for name in sorted(episodes):
                if not episode_problem(episodes[name]):
                    yield _read_episode(name, episodes[name])
            return
        names = sorted({f"{n:06d}" for n in numbers})
        missing = [name for name in names if name not in episodes]
        if missing:
            raise ValueError(f"{path} has no episode {', '.join(missing)}; it holds {len(episodes)}")
        for name in names:
            problem = episode_problem(episodes[name])
            if problem:
                raise ValueError(f"episode {name} of {path} was not written whole ({problem}); it cannot be read")
        for name in names:
            yield _read_episode(name, episodes[name])


def _read_episode(name: str, g: h5py.Group) -> StoredEpisode:
    """The episode stored in group ``g`` (named ``name``), read whole."""
    steps = g["steps"]
    columns = tuple(decode_attr(c) for c in steps["task_state"].attrs.get("columns", [])) \
        if "task_state" in steps else ()
    commands = [({k: decode_attr(v) for k, v in c.attrs.items()}, {k: v[()] for k, v in c.items()})
                for _, c in sorted(g["commands"].items())]
    return StoredEpisode(name=name, attrs={k: decode_attr(v) for k, v in g.attrs.items()},
                         initial_state=g["initial_state"][()], steps={k: v[()] for k, v in steps.items()},
                         segments={k: v[()] for k, v in g["segments"].items()}, commands=commands,
                         state_columns=columns)


def command_from_record(attrs: dict, arrays: dict):
    """Rebuild a command from its stored form (inverse of what write_episode stores)."""
    from episodic import commands as c

    kind = Kind(attrs["kind"]) if attrs["kind"] in Kind._value2member_map_ else Kind.MALFORMED
    head = dict(episode_id=attrs.get("episode_id", -1), max_commands=attrs.get("max_commands", 0))
    if kind == Kind.MALFORMED:
        return c.MalformedCommand(**head, index=attrs.get("index", -1),
                                  reason=attrs.get("reason", "stored as malformed"))
    if kind == Kind.START:
        return c.StartCommand(**head, posture=arrays.get("posture"),
                              context=arrays.get("context", np.zeros(0)))
    head["index"] = attrs["index"]
    if kind == Kind.RESET:
        return c.ResetCommand(**head)
    if kind == Kind.GAINS:
        return c.GainsCommand(**head, kp=arrays.get("kp"), kd=arrays.get("kd"), ki=arrays.get("ki"),
                              feedforward=attrs.get("feedforward", 1), wait_time=attrs.get("wait_time", 0.0),
                              task_gains=arrays.get("task_gains"))
    return c.TrajectoryCommand(**head, q=arrays.get("q"), qd=arrays.get("qd"), qdd=arrays.get("qdd"),
                               rate=attrs.get("rate"), wait_time=attrs.get("wait_time", 0.0))
