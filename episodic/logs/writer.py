"""The HDF5 writer of a run log: episodes queued as they end and written on a thread (blocking
mode) or a piece at a time between the ticks (realtime mode); the file's layout is
episodic.logs.layout.

A log is readable while it is written (a live log): the writer opens the file only to write what
is queued and closes it again, so between its writes the file on disk is whole and closed, and any
reader (``episodic info``, plain ``h5py.File(path, "r")``) may open it. HDF5 locks a file open
for writing (a reader's open fails with errno 11 meanwhile; episodic.logs.open_log waits for
it) and a file open for reading (the writer waits for the reader to close it, and says so on the
``episodic.logs`` logger when that takes more than BUSY_WARN). SWMR (HDF5's single-writer,
multiple-reader mode) cannot serve: its writer makes no new object once readers may look, and a
log makes its tables as its first episodes need them (and a format-1 log made a group per episode)."""
from __future__ import annotations

import errno
import fcntl
import inspect
import json
import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from episodic.interface.columns import STEP_DTYPES
from episodic.logs import compression
from episodic.logs.episode import EpisodeBuffer
from episodic.logs.layout import (
    EPISODE_DTYPE,
    FORMAT,
    IN_PROCESS,
    SUMMARY_DTYPE,
    attrs_text,
    command_entry,
    file_key,
    fix_metadata_cache,
    int_or,
    read_in_process,
    segment_dtype,
    summary_row,
    writing,
)
from episodic.logs.reader import LIVE_LOCK, being_written

_log = logging.getLogger("episodic.logs")
SPACE_MARGIN = 1 << 20  # bytes kept free on the log's disk beyond twice an episode's data
SUMMARY_CHUNK = 512    # rows per HDF5 chunk of /summary
REJECTED_CHUNK = 1024  # rows per HDF5 chunk of /rejected
# The "thread" writer's queue is bounded: a write that would take it past either bound waits for
# room (the learner's reply waits with it) instead of the queue growing, so what a SIGKILL can
# lose is at most this much, written in about QUEUE_SECONDS (docs/reliability.md); one write
# larger than QUEUE_BYTES is queued alone.
QUEUE_WRITES = 8          # writes (episodes, refusals, attributes) queued at most
QUEUE_BYTES = 8 << 20     # bytes of episode data queued at most
QUEUE_SECONDS = 1.0       # s: the bound stated and tested for writing a full queue (tests/test_writer_bound.py)
TABLE_CHUNK_BYTES = 1 << 14  # bytes per HDF5 chunk of a run-wide table (/steps, /segments, ...)
# The file is open only while queued writes are written (a live log, the module's docstring):
HOLD_SECONDS = 0.2    # s the writer keeps it open at most while more writes wait; then it closes it
GAP_SECONDS = 0.02    # s it then leaves it closed, so that a reader waiting for it gets in
# s the writer thread keeps the file open once the queue is empty, for a next write to come: a
# learner's next short episode is then written without opening the file and its tables again
# (about three times the cost of writing it)
LINGER_SECONDS = 0.02
BUSY_POLL = 0.002     # s between the writer's tries to open a file a reader holds
BUSY_WARN = 2.0       # s a reader may hold the file before the writer says so on the logger
# bytes of HDF5's metadata cache while the file is open: a write's changes to the file's existing
# metadata then stay in memory until it is flushed and closed (a SIGKILL mid-write leaves the
# file as it was after the last write, but for a kill inside the flush itself, which may leave
# the write's rows of /episodes without their text: episodic.logs.reader._readable_rows), and the
# cache is emptied at every close
WRITE_CACHE = 1 << 21


class LogError(Exception):
    """A run log cannot be created where asked (it exists, is a directory or a symbolic link, or
    the path cannot be written); the message says why and what to do."""


WRITERS = ("inline", "thread", "ticks")  # how a RunLog writes (RunLog's docstring)


@dataclass
class _Job:
    """A queued write: what it is (for messages), its pieces, the bytes it will add, and the
    episode it writes (None: not an episode's)."""

    what: str
    pieces: Iterator[None]
    n_bytes: int
    episode: EpisodeBuffer | None = None


class RunLog:
    """One HDF5 file per run, always a new file: an existing one is refused unless ``overwrite``
    (and even then one that another process has open is refused). A symbolic link as ``path`` is
    refused, not followed. Each finished episode is written whole and flushed, so a run stopped
    mid-episode leaves a readable file holding every finished episode; its row of /episodes is
    appended last (after its rows of the run-wide tables), and a row is then appended to /summary.

    ``writer`` says where the writing happens (writes are queued and done in order either way):
    - "inline": in ``write_episode`` (and ``reject``, ``set_attrs``) itself, before it returns;
    - "thread" (a blocking runner's): on a writer thread, started when a write is queued and
      ended when none has been left for LINGER_SECONDS, so a finished episode is written while the next one runs (h5py
      lets the interpreter go while it reads and writes datasets, and the simulation runs in C
      without it: on two cores neither waits for the other). The queue holds at most
      QUEUE_WRITES writes and QUEUE_BYTES bytes: a write past that waits in ``write_episode``
      (or ``reject``, ``set_attrs``) for room, holding the caller back. ``close`` waits for the
      queue; a process killed outright (SIGKILL) loses what was still queued, at most the
      last QUEUE_WRITES writes;
    - "ticks" (a paced runner's): ``work(budget)`` writes a piece at a time (a table's rows, at
      most PIECE_BYTES of them), so a paced loop spends its spare time per
      tick on it instead of stalling for the milliseconds a whole episode takes (a thread would
      take the interpreter from the tick loop at random moments).
    A write that fails (e.g. a full disk) is reported on the ``episodic.logs`` logger, counted in
    ``failed_writes`` and kept for ``pop_failures``; the run goes on. An episode the disk has no
    room for (beside what is queued) is refused whole when it is queued, so the caller's reply
    can say so. A write that fails part-way takes the rows it appended back off the tables, so
    /episodes never names a half-written episode (a process killed mid-write leaves rows no
    episode names, which no reader looks at).

    The file is opened (through the descriptor kept from its creation, so a file put at ``path``
    later is never written) when a write is taken from the queue and closed when the queue is
    empty (the "thread" writer: once it has stayed empty for LINGER_SECONDS; the "ticks" writer:
    at the next tick, a piece of its own as the opening is), or after
    HOLD_SECONDS with writes still queued and then left closed for GAP_SECONDS:
    readers get the file between writes. A reader holding it open makes the writer wait (the
    "thread" writer's queue then fills and holds the learner back; the "ticks" writer tries again
    at the next tick). While the run lasts the writer holds a lock on a byte beyond the file's
    data (reader.LIVE_LOCK), by which ``being_written`` tells a live log.
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
        self._room = threading.Condition(self._lock)  # notified when a queued write is done
        self._thread: threading.Thread | None = None
        # episodes whose steps are being streamed, by number: their first row in /steps and the
        # rows streamed (None: a streamed write failed)
        self._streams: dict[int, tuple[int, int] | None] = {}
        self._file: h5py.File | None = None  # open only while writing
        self._tables: dict[str, h5py.h5d.DatasetID] = {}  # the run-wide tables opened since it was
        self._opened = 0.0  # time.monotonic() of its last opening
        self._reopen = 0.0  # time.monotonic() before which it is not opened again (GAP_SECONDS)
        self._closing = False  # a "ticks" writer closing the file a piece a call after HOLD_SECONDS open
        self._busy_since: float | None = None  # when the writer first found a reader holding it
        self._warned = False  # whether the writer said so (BUSY_WARN)
        self._fd = _create(self.path, overwrite)
        self._key = file_key(os.fstat(self._fd))
        with IN_PROCESS:  # a new file: no reader has it yet
            self._file = h5py.File(_by_descriptor(self._fd), "r+")
            writing(self._key, True)
        fix_metadata_cache(self._file, WRITE_CACHE)
        for key, value in metadata.items():
            if key == "model_xml":
                self._file.create_dataset("model_xml", data=value)
            else:
                self._file.attrs[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
        self._file.attrs["format"] = FORMAT
        self._table("episodes", EPISODE_DTYPE)
        self._file.create_dataset("summary", shape=(0,), maxshape=(None,), dtype=SUMMARY_DTYPE,
                                  chunks=(SUMMARY_CHUNK,))
        self._close_file()

    def _open(self, wait: bool) -> bool:
        """Open the file for writing unless it is open; when a reader holds it (or GAP_SECONDS
        have not passed since the writer let it go), wait for it if ``wait``, else False."""
        while self._file is None:
            now = time.monotonic()
            if now < self._reopen:
                if not wait:
                    return False
                time.sleep(self._reopen - now)
            try:
                with IN_PROCESS:  # a reader in this process has it open: wait as for another process's
                    if read_in_process(self._key):
                        raise BlockingIOError(errno.EAGAIN, "a reader in this process has the log open")
                    self._file = h5py.File(_by_descriptor(self._fd), "r+")
                    writing(self._key, True)
            except OSError as exc:
                if not _busy(exc):
                    raise
                if self._busy_since is None:
                    self._busy_since, self._warned = now, False
                elif now - self._busy_since > BUSY_WARN and not self._warned:
                    self._warned = True  # said once per wait
                    _log.warning("%s is held open by a reader; the log's writes wait until it closes the "
                                 "file (a reader should open it only while it reads)", self.path)
                if not wait:
                    return False
                time.sleep(BUSY_POLL)
                continue
            fix_metadata_cache(self._file, WRITE_CACHE)
            self._opened, self._busy_since = now, None
        return True

    def _close_piece(self) -> bool:
        """Between ticks, close the file a piece at a time: one of its open tables per call
        (closing a dataset writes its metadata, 0.1-0.3 ms each), then the file itself (about 0.3
        ms; all at once they took 1-2 ms, most of a 2 ms tick); True once it is closed."""
        if self._tables:
            self._tables.pop(next(iter(self._tables)))
            return False
        self._close_file()
        return True

    def _close_file(self) -> None:
        """Flush and close the file (open until then), so that readers may open it."""
        if self._file is not None:
            self._tables.clear()
            with IN_PROCESS:
                self._file.close()
                self._file = None
                writing(self._key, False)

    def _submit(self, what: str, pieces: Iterator[None], n_bytes: int = 0,
                episode: EpisodeBuffer | None = None) -> None:
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
            if self.writer == "thread":
                self._room.wait_for(lambda: not self._pending or (
                    len(self._pending) < QUEUE_WRITES and self._queued_bytes + n_bytes <= QUEUE_BYTES))
            self._pending.append(_Job(what, pieces, n_bytes, episode))
            self._queued_bytes += n_bytes
            self._room.notify_all()  # a lingering writer thread (_drain) takes it
            if self.writer == "thread" and self._thread is None:
                self._thread = threading.Thread(target=self._drain, name="episodic-log-writer")
                self._thread.start()
        if self.writer == "inline":
            self.work()

    def _drain(self) -> None:
        """The writer thread: write until the queue is empty and has stayed so for LINGER_SECONDS
        (the file left open meanwhile, HOLD_SECONDS at most since it was opened), then close the
        file and end."""
        while True:
            with self._lock:
                if not self._pending:
                    left = self._opened + HOLD_SECONDS - time.monotonic() if self._file is not None else 0.0
                    linger = min(LINGER_SECONDS, max(left, 0.0))
                    if not self._room.wait_for(lambda: bool(self._pending), timeout=linger):
                        self._close_file()
                        self._reopen = time.monotonic() + GAP_SECONDS  # readers get in before the next write
                        self._thread = None
                        return
            self.work()

    def work(self, budget: float = float("inf")) -> bool:
        """Write pending pieces for up to ``budget`` s: one, then more while another as long as
        the last one would still end within the budget; True while some remain. For the "ticks"
        writer opening the file is a piece of its own (about half a millisecond, a quarter of a 2
        ms tick): a call that opens it writes only if the budget still has room for a piece as
        long as the opening; once the queue ran empty, or the file was held open HOLD_SECONDS,
        the calls close it a piece each (:meth:`_close_piece`) and do nothing else (with no
        budget, the file is closed at once and the writes go on)."""
        end, finite = time.perf_counter() + budget, budget != float("inf")
        if self.writer == "ticks" and (self._closing or not self._pending):
            if self._file is not None and finite and not self._close_piece():
                return bool(self._pending)
            self._close_file()
            if self._closing:  # the file was held HOLD_SECONDS: readers get in before the next write
                self._closing, self._reopen = False, time.monotonic() + GAP_SECONDS
            if finite or not self._pending:
                return bool(self._pending)
        while self._pending:
            job = self._pending[0]
            started = time.perf_counter()
            if self.writer == "ticks" and self._file is None:
                if not self._open(wait=budget == float("inf")):
                    break
                now = time.perf_counter()
                if 2 * now - started > end:
                    break
                started = now
            try:
                if not self._open(wait=self.writer != "ticks" or budget == float("inf")):
                    break
                together = self._together()
                if len(together) > 1 and self._write_together(together):
                    job = together[-1]  # (done, as the others)
                else:
                    next(job.pieces)
            except StopIteration:
                self._done(job)
            except Exception as exc:  # noqa: BLE001 - a failed write is reported, and the run goes on
                self._done(job)
                self._failed(job.what, exc)
            if job is not (self._pending[0] if self._pending else None):  # a write ended: let readers in?
                if not self._pending and self.writer == "inline":  # the thread (_drain) and the next tick close it
                    self._close_file()
                elif time.monotonic() - self._opened > HOLD_SECONDS:
                    if self.writer == "ticks" and finite:  # closed a piece at a time by the next calls
                        self._closing = True
                        break
                    self._close_file()
                    self._reopen = time.monotonic() + GAP_SECONDS
            now = time.perf_counter()
            if 2 * now - started > end:
                break
        return bool(self._pending)

    def _together(self) -> list[_Job]:
        """The "thread" writer's queued episodes that can be written together, from the first:
        whole episodes (none that streamed steps) whose writes have not begun."""
        together: list[_Job] = []
        with self._lock:
            for job in self._pending if self.writer == "thread" else ():
                if job.episode is None or job.episode.streamed_blocks or not isinstance(job.pieces, Generator) \
                        or inspect.getgeneratorstate(job.pieces) != inspect.GEN_CREATED:
                    break
                together.append(job)
        return together

    def _write_together(self, jobs: list[_Job]) -> bool:
        """Write the episodes of ``jobs`` at once, a few row appends for all of them (about the cost
        of writing one); False, with nothing written, when that fails (each is then written on
        its own, so that only the one that cannot be written fails)."""
        try:
            for _ in self._write_episode([job.episode for job in jobs if job.episode is not None]):
                pass
        except Exception:  # noqa: BLE001 - said by the write of the one that fails, on its own
            return False
        for job in jobs:
            if isinstance(job.pieces, Generator):  # (as _together took them)
                job.pieces.close()
            self._done(job)
        return True

    def _done(self, job: _Job) -> None:
        with self._lock:
            self._pending.popleft()
            self._queued_bytes -= job.n_bytes
            self._room.notify_all()

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
        self._submit(f"episode {ep.number:06d} (id {ep.episode_id})", self._write_episode([ep]), _data_bytes(ep), ep)

    def write_steps(self, ep: EpisodeBuffer) -> None:
        """Hand the steps ``ep`` holds (``ep.blocks``) to the log while ``ep`` still runs (queued
        like an episode, and waiting for room the same way), so a long episode's memory stays
        bounded: they are appended to /steps and ``ep`` keeps only their count; ``write_episode``
        appends the rest after them. The log's contents are those of an episode written whole."""
        blocks, n = ep.blocks, ep.held_steps
        if not n:
            return
        ep.blocks, ep.streamed_blocks, ep.streamed_steps = [], ep.streamed_blocks + len(blocks), ep.streamed_steps + n
        self._submit(f"steps of episode {ep.number:06d} (id {ep.episode_id})",
                     self._stream_steps(ep.number, blocks, ep.state_columns),
                     sum(v.nbytes for b in blocks for v in b.values()))

    def read_streamed(self, number: int, n_steps: int) -> dict[str, np.ndarray]:
        """The first ``n_steps`` rows of each step column of episode ``number``, one that
        streamed them (``write_steps``), once written (waits for the queue); empty when the log
        does not have them (a write failed)."""
        self._wait()
        self._open(wait=True)
        assert self._file is not None
        try:
            stream = self._streams.get(number)
            start = stream[0] if stream else _written_steps(self._file, number)
            if start is None or "steps" not in self._file:
                return {}
            rows = self._file["steps"][start : start + n_steps]
            return {name: np.ascontiguousarray(rows[name]) for name in rows.dtype.names or ()}
        finally:
            self._close_file()

    def _stream_steps(self, number: int, blocks: list[dict[str, np.ndarray]],
                      state_columns: tuple[str, ...]) -> Iterator[None]:
        """Append ``blocks`` to /steps as episode ``number``'s next steps (right after those it
        streamed before); on a failure the episode's write fails (its rows stay unnamed)."""
        if number in self._streams and self._streams[number] is None:
            return  # an earlier piece failed: the episode is not logged (write_episode says so)
        try:
            steps = self._steps_table(blocks[0], state_columns)
            start, count = self._streams.get(number) or (steps.shape[0], 0)
            if steps.shape[0] != start + count:
                raise OSError("other steps were logged between its streamed ones")
            if self.writer == "ticks":
                yield  # opening /steps is a piece of its own between ticks
            appended = yield from self._append_steps(steps, blocks, [])
            self._streams[number] = (start, count + appended)
        except BaseException:
            self._streams[number] = None
            raise

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

    def _write_episode(self, eps: list[EpisodeBuffer]) -> Iterator[None]:
        """Write the episodes ``eps`` (one, or several queued one after the other: the "thread"
        writer's, taken together) in pieces (the layout: episodic.logs.layout), a table's rows
        each, or at most PIECE_BYTES of them when written between ticks: their initial states,
        steps (after those one streamed), segments and commands appended to the run-wide tables,
        then their rows of /episodes, which name them (a failure before that takes the rows back
        off the tables, so no episode is half-written); then their /summary rows, and the file
        flushed (between ticks, the next tick's closing of the file flushes it)."""
        heads = [{"episode_id": ep.episode_id, "flag": ep.flag, "flag_name": ep.flag_name, "message": ep.message,
                  "return": ep.episode_return, "early_end": ep.early_end, "success": ep.success,
                  "n_steps": ep.n_steps, "wall_time": ep.wall_time, "rng_seed": list(ep.rng_seed), "batch": ep.batch,
                  "batch_position": ep.batch_position, "goto_start": ep.goto_start, **ep.timing} for ep in eps]
        f = self._file
        assert f is not None  # open while a write runs (work)
        first = eps[0]
        stream = self._streams.pop(first.number, None) if first.streamed_blocks else None
        if first.streamed_blocks and stream is None:
            raise OSError("some of its steps could not be written as it ran; it is left out")
        grown: list[tuple[h5py.h5d.DatasetID, int]] = []  # the tables appended to, and their rows before
        try:
            initial = self._table("initial_states", np.dtype("<f8"), first.initial_state.shape)
            rows = np.zeros(len(eps), EPISODE_DTYPE)
            rows["number"] = [ep.number for ep in eps]
            rows["attrs"] = [attrs_text(head) for head in heads]
            rows["initial_state"] = initial.shape[0] + np.arange(len(eps))
            yield from self._append(initial, np.stack([ep.initial_state for ep in eps]), grown)
            rows["n_steps"] = [ep.n_steps for ep in eps]
            held = [ep.held_steps for ep in eps]
            rows["steps_start"] = (stream[0] if stream else self._rows("steps")) + np.cumsum([0, *held[:-1]])
            blocks = [b for ep in eps for b in ep.blocks]
            if blocks:
                with_steps = next(ep for ep in eps if ep.blocks)
                steps = self._steps_table(with_steps.blocks[0], with_steps.state_columns)
                if stream and steps.shape[0] != sum(stream):
                    raise OSError("other steps were logged between its streamed ones")
                if self.writer == "ticks":
                    yield  # opening /steps is a piece of its own between ticks
                yield from self._append_steps(steps, blocks, grown)
            segments = self._table("segments", segment_dtype(len(first.state_columns)))
            n_segments = [len(ep.segments) for ep in eps]
            rows["n_segments"] = n_segments
            rows["segments_start"] = segments.shape[0] + np.cumsum([0, *n_segments[:-1]])
            tables = [_segment_rows(segments.dtype, ep.segment_table()) for ep in eps]
            yield from self._append(segments, np.concatenate(tables), grown)
            commands, values = self._table("commands", _TEXT), self._table("command_values", np.dtype("<f8"))
            entries: list[str] = []
            flat: list[np.ndarray] = []
            offset = values.shape[0]
            for k, ep in enumerate(eps):
                rows["commands_start"][k], rows["n_commands"][k] = commands.shape[0] + len(entries), len(ep.commands)
                for cmd in ep.commands:
                    text, arrays = command_entry(cmd, offset)
                    entries.append(text)
                    flat += arrays
                    offset += sum(len(v) for v in arrays)
            yield from self._append(values, np.concatenate(flat) if flat else np.zeros(0), grown)
            yield from self._append(commands, np.array(entries, dtype=_TEXT), grown)
            yield from self._append(self._table("episodes", EPISODE_DTYPE), rows, grown)  # names the rows
        except BaseException:  # GeneratorExit or a failed write: no half-written episode stays
            for table, n in grown:
                table.set_extent((n, *table.shape[1:]))
            raise
        _append_rows(self._table("summary", SUMMARY_DTYPE),
                     np.stack([summary_row(ep.number, head) for ep, head in zip(eps, heads, strict=True)]))
        yield
        if self.writer != "ticks":  # between ticks the next tick closes the file, which flushes it (a flush
            f.flush()               # and a close would each take 1-2 ms, most of a tick)

    def _table(self, name: str, dtype: np.dtype, row: tuple[int, ...] = ()) -> h5py.h5d.DatasetID:
        """The run-wide table ``name`` at the file's root: made when it is not there yet, empty,
        resizable along its first axis, its rows ``row``-shaped values of ``dtype``, in chunks of
        about TABLE_CHUNK_BYTES (filtered as episodic.logs.compression.chosen says, but for text)."""
        assert self._file is not None
        found = self._tables.get(name)
        if found is None:
            key = name.encode()
            access = _TICK_ACCESS if self.writer == "ticks" else None
            if key in self._file.id:
                found = h5py.h5d.open(self._file.id, key, dapl=access)
            else:
                row_bytes = (dtype.itemsize if dtype.kind != "O" else 16) * int(np.prod(row, dtype=np.int64))
                chunk = (max(TABLE_CHUNK_BYTES // max(row_bytes, 1), 1), *row)
                use = compression.chosen() if not dtype.hasobject and dtype.kind != "O" else None
                space = h5py.h5s.create_simple((0, *row), (h5py.h5s.UNLIMITED, *row))
                found = h5py.h5d.create(self._file.id, key, _types(dtype)[0], space,
                                        dcpl=compression.resizable(chunk, _DATASET_CREATION, use),
                                        lcpl=_LINK_CREATION, dapl=access)
            self._tables[name] = found
        return found

    def _rows(self, name: str) -> int:
        """The rows of the run-wide table ``name`` (0 when it has not been made)."""
        assert self._file is not None
        return self._table(name, np.dtype("<f8")).shape[0] if name.encode() in self._file.id else 0

    def _steps_table(self, like: dict[str, np.ndarray], state_columns: tuple[str, ...]) -> h5py.h5d.DatasetID:
        """/steps, made (a column per step column of the block ``like``, its rows' shapes, the
        log's types; attribute columns: ``state_columns``) when it is not there yet."""
        assert self._file is not None
        made = b"steps" in self._file.id
        steps = self._table("steps", np.dtype([(name, _dtype(name), v.shape[1:]) for name, v in like.items()]))
        if not made:
            for _ in _attrs(steps, {"columns": list(state_columns)}):
                pass
        return steps

    def _append_steps(self, table: h5py.h5d.DatasetID, blocks: list[dict[str, np.ndarray]],
                      grown: list[tuple[h5py.h5d.DatasetID, int]]) -> Generator[None, None, int]:
        """Append the per-step ``blocks`` (column -> (n, ...) values) to /steps as its rows, as
        :meth:`_append` does; when written between ticks, each piece's rows are gathered from the
        blocks as it is written (gathering all of an episode's at once takes about a millisecond).
        Returns the rows appended."""
        n = sum(len(b["time"]) for b in blocks)
        per_piece = n if self.writer != "ticks" else _piece_rows(table.dtype.itemsize)
        for start in range(0, n, max(per_piece, 1)):
            yield from self._append(table, _step_rows(table.dtype, blocks, start, min(start + per_piece, n)), grown)
        return n

    def _append(self, table: h5py.h5d.DatasetID, rows: np.ndarray,
                grown: list[tuple[h5py.h5d.DatasetID, int]]) -> Iterator[None]:
        """Append ``rows`` to ``table`` (noting its length before in ``grown``, once): in one
        piece, or when written between ticks a piece per PIECE_BYTES of rows."""
        if not any(table is t for t, _ in grown):
            grown.append((table, table.shape[0]))
        per_piece = len(rows) if self.writer != "ticks" else _piece_rows(rows[:1].nbytes)
        for start in range(0, len(rows), max(per_piece, 1)):
            _append_rows(table, np.ascontiguousarray(rows[start : start + per_piece]))
            yield

    def _reject(self, episode_id, index, flag: int) -> Iterator[None]:
        f = self._file
        assert f is not None
        if "rejected" not in f:
            f.create_dataset("rejected", shape=(0, 3), maxshape=(None, 3), dtype=np.int64, chunks=(REJECTED_CHUNK, 3))
            f["rejected"].attrs["columns"] = ["episode_id", "index", "flag"]
        _append(f["rejected"].id, np.array([int_or(episode_id), int_or(index), flag], dtype=np.int64))
        f.flush()
        yield

    def _set_attrs(self, attrs: dict) -> Iterator[None]:
        assert self._file is not None
        self._file.attrs.update(attrs)
        self._file.flush()
        yield

    def _wait(self) -> None:
        """Wait until every queued write is done (on the writer thread, or here)."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()
        if self._fd >= 0:
            self.work()

    def close(self) -> None:
        """Finish pending writes (waiting for the writer thread) and close the file; the log is
        then no longer being written (``being_written``)."""
        self._wait()
        self._close_file()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _create(path: Path, overwrite: bool) -> int:
    """A new, empty HDF5 file at ``path``, readable and writable by its owner only (LogError
    saying why and what to do when it cannot be), as a file descriptor open for reading and
    writing, locked as a live log's (LIVE_LOCK) unless this file system's locks would keep HDF5
    from opening it. It is made under a temporary name in the same
    folder, exclusively and without following links, and then given its name in one step
    (episodic.interface.files.publish): without ``overwrite`` that step fails when anything is
    at ``path``, so an existing log (a finished run's, or a live run's) is never truncated; with
    it, what is there is replaced, a symbolic link planted there too, never written through (no
    check-then-open race). Free space is not tracked for reuse (fs_strategy "none"): HDF5's
    free-space manager would keep a record per freed fragment in memory, about 1 kB per episode
    over a run, for a file under 0.1 % larger. Writes go through the descriptor
    (``_by_descriptor``), to this file whatever is put at ``path`` later."""
    from episodic.interface.files import publish, temporary_beside

    if path.is_symlink() and not overwrite:
        raise LogError(f"{path} is a symbolic link (to {os.readlink(path)}); a log is never written through "
                       f"a link: give the real path")
    if path.is_dir() and not path.is_symlink():
        raise LogError(f"{path} is a directory; give the log a file name, e.g. {path / 'run.h5'}")
    if os.path.lexists(path) and not overwrite:
        raise LogError(f"{path} exists (the log of an earlier or of a running run); a log is never overwritten "
                       f"unless asked: choose another path, or overwrite it (episodic serve --overwrite, "
                       f"Runner(..., overwrite=True))")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "a file is in the way" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        raise LogError(f"cannot create the directory {path.parent} for the log: {reason}; choose a path in "
                       f"a directory you can write to") from None
    tmp = None
    try:
        if overwrite and path.is_file() and not path.is_symlink():
            _check_not_open(path)
        tmp = temporary_beside(path)
        h5py.File(tmp, "w", fs_strategy="none").close()
        made = os.stat(tmp)
        publish(tmp, path, overwrite)
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        if not os.path.samestat(os.fstat(fd), made):
            os.close(fd)
            raise FileExistsError(path)
        _lock_live(fd)
    except FileExistsError:  # created by another process since the check above
        raise LogError(f"{path} was created by another process just now; choose another path") from None
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise LogError(f"cannot write the log {path}: {reason}; choose a path in a directory you can "
                       f"write to") from None
    finally:
        if tmp is not None:  # published (renamed or linked and dropped), or left over from a failure
            tmp.unlink(missing_ok=True)
    return fd


def _by_descriptor(fd: int) -> str:
    """A name that opens the file of descriptor ``fd`` (Linux's /proc/self/fd), whatever is at
    its path now (HDF5 needs a path it can resolve: the file's, where it has been moved since,
    but not a deleted file's)."""
    return f"/proc/self/fd/{fd}"


def _busy(exc: OSError) -> bool:
    """Whether opening a file failed because it is open elsewhere: another process's HDF5 lock
    (errno 11), or this process's own read-only handle (HDF5 then refuses to open it for writing)."""
    return isinstance(exc, BlockingIOError) or "already open" in str(exc)


def _lock_live(fd: int) -> None:
    """Lock LIVE_LOCK of the file of ``fd`` for writing, for as long as the descriptor is open
    (an open file description's lock, which HDF5's own locks and closes leave alone); not when
    the file system emulates HDF5's whole-file lock by such locks (NFS), where it would keep HDF5
    from opening the file for writing."""
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, LIVE_LOCK.pack(fcntl.F_WRLCK))
    try:
        h5py.File(_by_descriptor(fd), "r+").close()
    except BlockingIOError:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, LIVE_LOCK.pack(fcntl.F_UNLCK))


def _check_not_open(path: Path) -> None:
    """LogError when another process writes the log at ``path`` (``being_written``) or has the
    HDF5 file open (HDF5 locks it)."""
    try:
        if not being_written(path):
            h5py.File(path, "r").close()
            return
    except BlockingIOError:
        pass
    except OSError:
        return  # not an HDF5 file: nothing holds it, it may be replaced
    raise LogError(f"{path} is open in another process (a runner still writing it?); it is not "
                   f"overwritten: stop that process first, or choose another path")


def _data_bytes(ep: EpisodeBuffer) -> int:
    """Bytes of an episode's per-step data and initial state (its bulk in the log)."""
    return ep.initial_state.nbytes + sum(v.nbytes for b in ep.blocks for v in b.values())


def _dtype(column: str) -> np.dtype:
    """A step column's log dtype."""
    return np.dtype(STEP_DTYPES[column])


def _piece_rows(row_bytes: int) -> int:
    """Rows of ``row_bytes`` bytes each that one piece written between ticks holds (PIECE_BYTES, at least one)."""
    return max(PIECE_BYTES // max(row_bytes, 1), 1)


def _step_rows(dtype: np.dtype, blocks: list[dict[str, np.ndarray]], start: int, stop: int) -> np.ndarray:
    """Rows ``start`` to ``stop`` (exclusive) of /steps (``dtype``) of the per-step ``blocks``
    (column -> (n, ...) values) taken one after the other."""
    rows = np.empty(stop - start, dtype)
    at = 0  # the first row of the block, among all the blocks' rows
    for block in blocks:
        n = len(block["time"])
        lo, hi = max(start, at), min(stop, at + n)
        if lo < hi:
            for name in dtype.names or ():
                rows[name][lo - start : hi - start] = block[name][lo - at : hi - at]
        at += n
        if at >= stop:
            break
    return rows


def _segment_rows(dtype: np.dtype, table: dict[str, np.ndarray]) -> np.ndarray:
    """The rows of /segments (``dtype``) of an episode's segment table (EpisodeBuffer.segment_table)."""
    rows = np.empty(len(table["index"]), dtype)
    for name in dtype.names or ():
        rows[name] = table[name]
    return rows


def _written_steps(f: h5py.File, number: int) -> int | None:
    """The first row in /steps of episode ``number`` of the log ``f`` (None when it has no row in /episodes)."""
    episodes = f["episodes"]
    found = np.flatnonzero(episodes.fields("number")[()] == number)
    return int(episodes[found[-1]]["steps_start"]) if len(found) else None


def _append_rows(dataset: h5py.h5d.DatasetID, rows: np.ndarray) -> None:
    """Append ``rows`` (n, ...) to a dataset resizable along its first axis."""
    n, *rest = dataset.shape
    if len(rows):
        dataset.set_extent((n + len(rows), *rest))
        _write_rows(dataset, n, rows)


def _append(dataset: h5py.h5d.DatasetID, row: np.ndarray) -> None:
    """Append one row to a dataset resizable along its first axis."""
    _append_rows(dataset, row[None])


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


_DATASET_CREATION = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
_DATASET_CREATION.set_obj_track_times(False)

# A table written between ticks keeps one chunk in its cache, so that each chunk is written to the
# file once full, in the piece that filled it, instead of all of them when the table is closed
# (HDF5's default cache of 1 MiB held an episode's /steps: its closing took 1.3-1.6 ms of a 2 ms tick)
_TICK_ACCESS = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
_TICK_ACCESS.set_chunk_cache(521, TABLE_CHUNK_BYTES, 1.0)  # hash slots (a prime), bytes, evict full chunks first


_TYPES: dict[np.dtype, tuple[h5py.h5t.TypeID, h5py.h5t.TypeID]] = {}


def _types(dtype: np.dtype) -> tuple[h5py.h5t.TypeID, h5py.h5t.TypeID]:
    """The HDF5 types of ``dtype`` (an object dtype, or field, stands for text) as h5py makes
    them: the one stored in the file and the one of the values in memory (they differ for text only)."""
    key = dtype  # equal dtypes are one key (text's metadata aside: every object field is text here)
    if key not in _TYPES:
        dtype = _TEXT if dtype.kind == "O" else dtype
        _TYPES[key] = (h5py.h5t.py_create(dtype, logical=True), h5py.h5t.py_create(dtype))
    return _TYPES[key]


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

