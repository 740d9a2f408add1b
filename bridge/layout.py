"""The shared-memory layout, field by field: the one description of the wire. BLOCKS (the fixed
parts), COMMAND_ARRAYS, REPLY_ARRAYS and BATCH_PARTS (what follows them) are data; the numpy dtypes
and the Layout below are made from them, and so are the C clients' header
(clients/c/episodic_layout.h) and the layout tables of docs/protocol.md, which
``python -m episodic.bridge.generate`` writes (tests/test_wire_schema.py checks both are up to date).

One shared-memory object per channel holds five blocks, each starting on a 64-byte
boundary: the header, the command block, the reply block, the episode-log block and the batch
block (a population of episodes going in, their results coming out).
Every number is little-endian; arrays are C row order (row = time step, column = joint).
The runner chooses the sizes when it creates the channel and writes them in the header;
a client reads them from there, so nothing is fixed at compile time.
"""
from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Self

import numpy as np

MAGIC = b"EPISODIC"
VERSION = 5
NAME_BYTES = 32
MESSAGE_BYTES = 256
ALIGN = 64


@dataclass(frozen=True)
class Field:
    """A field of a fixed part: its name, its wire type (a key of WIRE_TYPES, or ``char[N]``: N bytes,
    NUL-padded) and what it means (the protocol document's text)."""

    name: str
    type: str
    meaning: str


@dataclass(frozen=True)
class Array:
    """An array after a fixed part (or a part of the batch block): its name, its shape in names of
    sizes (``n_dofs``, ``max_context``, ``max_samples``, ``n_state``, ``max_batch``,
    ``max_batch_commands``, ``max_batch_values``: attributes of Sizes), what it holds, and its
    element: ``float64`` or the name of a fixed part in BLOCKS."""

    name: str
    shape: tuple[str, ...]
    meaning: str
    element: str = "float64"


WIRE_TYPES = {"uint8": "u1", "int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float64": "<f8"}
_AS_COMMAND = "as in the command block"

# The fixed parts, field by field in wire order, with no hidden padding (the pad fields are listed).
BLOCKS: dict[str, tuple[Field, ...]] = {
    "HEADER": (
        Field("magic", "char[8]", "the 8 ASCII bytes `EPISODIC` (no NUL)"),
        Field("version", "uint32", f"protocol version, {VERSION}"),
        Field("status", "uint32", "0 starting, 1 serving, 2 closed (set just before the objects are removed)"),
        Field("runner_pid", "int64", "pid of the runner process (for messages; whether it lives is its lock, "
              "section 1)"),
        Field("n_dofs", "uint32", "joints of the robot (WAM: 7)"),
        Field("max_samples", "uint32", "rows of the command's q, qd, qdd arrays (longest segment, samples)"),
        Field("max_log_steps", "uint32", "rows of each log-block column"),
        Field("max_context", "uint32", "length of the command's context array"),
        Field("n_state", "uint32", "task state columns (reach: 4)"),
        Field("n_log_columns", "uint32", "entries of the log-column table"),
        Field("control_rate", "float64", "control rate, Hz (WAM: 500)"),
        Field("command_offset", "uint64", "byte offset of the command block from the start of the object"),
        Field("reply_offset", "uint64", "byte offset of the reply block"),
        Field("log_offset", "uint64", "byte offset of the log block"),
        Field("total_size", "uint64", "size of the whole object, bytes"),
        Field("client_pid", "int64", "pid of the client holding the client lock (section 1), written by that "
              "client; 0 before any"),
        Field("taken_seq", "uint64", "`seq` of the last command the runner copied out of the command block "
              "(section 7)"),
        Field("max_batch", "uint32", "most episodes in one batch (section 8)"),
        Field("max_batch_commands", "uint32", "most commands in one batch, all its episodes together"),
        Field("max_batch_values", "uint64", "most float64 values in one batch's value pool"),
        Field("batch_offset", "uint64", "byte offset of the batch block"),
    ),
    # after HEADER: n_state names (NAME_BYTES each, NUL-padded ASCII), then one LOG_COLUMN per log column
    "LOG_COLUMN": (
        Field("name", f"char[{NAME_BYTES}]", "column name, ASCII, NUL-padded"),
        Field("width", "uint32", "values per row"),
        Field("pad", "uint32", "0"),
        Field("offset", "uint64", "byte offset of the column's (max_log_steps, width) float64 array from the "
              "start of the **log block**"),
    ),
    "COMMAND": (
        Field("magic", "char[8]", "`EPISODIC`, written with every command"),
        Field("version", "uint32", f"the client's protocol version, {VERSION}"),
        Field("pad0", "uint32", "unused"),
        Field("seq", "uint64", "the client's sequence number (its own: starts at a random value), echoed in "
              "the reply"),
        Field("client_pid", "int64", "the client's pid (the runner watches it; 0 = not watched)"),
        Field("episode_id", "int64", "episode id, 0 ≤ id < 2^63"),
        Field("index", "int32", "0 = start, 1..max_commands = segments"),
        Field("max_commands", "int32", "segments in the episode, 1..1000"),
        Field("kind", "int32", "payload kind (table below)"),
        Field("feedforward", "int32", "gains: feedforward mode (table below)"),
        Field("n_samples", "int32", "trajectory: rows of q (and qd, qdd) used, 1..max_samples"),
        Field("n_context", "int32", "entries of `context` used, 0..max_context (start: the context; gains: the "
              "task gains)"),
        Field("has_posture", "uint8", "start: non-zero = go to `posture`, 0 = the task's start posture"),
        Field("has_qd", "uint8", "trajectory: non-zero = `qd` given (else finite differences of q)"),
        Field("has_qdd", "uint8", "trajectory: non-zero = `qdd` given (needs `has_qd`)"),
        Field("has_ki", "uint8", "gains: non-zero = `ki` given (else 0)"),
        Field("pad", "uint32", "unused"),
        Field("rate", "float64", "trajectory: Hz of the samples; 0 = the control rate"),
        Field("wait_time", "float64", "trajectory, gains: s the final posture is held afterwards, 0..60"),
    ),
    "REPLY": (
        Field("seq", "uint64", "`seq` of the command answered"),
        Field("episode_id", "int64", "the command's episode id, echoed"),
        Field("index", "int32", "the command's index, echoed"),
        Field("flag", "int32", "outcome (flags table)"),
        Field("reward", "float64", "reward of the segment (0 for a start); in the reply that ends an episode, "
              "the charge for ending early included (a reset's or a refusal's reward is that charge alone)"),
        Field("n_steps", "int32", "control steps the command ran (start: the move to the start posture)"),
        Field("episode_done", "int32", "1 when the episode ended with this command (also 1 for a refused "
              "command)"),
        Field("machine_state", "int32", "machine state after the command (states table)"),
        Field("log_rows", "int32", "valid rows of the log block when this reply was written (a learner-timeout "
              "abort afterwards may add rows without a reply)"),
        Field("log_truncated", "int32", "1 when the episode has more steps than max_log_steps (the log block "
              "keeps the first ones)"),
        Field("kind", "int32", "the command's kind, echoed"),
        Field("episode_return", "float64", "return of the command's episode so far: the rewards of its replies "
              "up to this one; in the reply that ends it, the episode's return as the log records it (its "
              "`return`), the charge for ending early included; 0 outside an episode and for a batch command"),
        Field("success", "int32", "1 only in the reply that ends an episode (`episode_done` 1) that the task "
              "counts as solved; an episode that ends with a flag other than OK is never solved"),
        Field("pad", "int32", "0"),
        Field("message", f"char[{MESSAGE_BYTES}]", f"why the flag is not OK (or a note), UTF-8, NUL-padded, no "
              f"NUL when {MESSAGE_BYTES} bytes long"),
    ),
    "BATCH": (
        Field("n_episodes", "uint32", "episodes in the batch, 1..max_batch"),
        Field("n_commands", "uint32", "rows of the command table used, n_episodes..max_batch_commands"),
        Field("n_values", "uint64", "values of the value pool used, 0..max_batch_values"),
        Field("keep_logs", "uint32", "1: keep each episode's per-step log for batch-log commands; 0: not"),
        Field("pad", "uint32", "unused"),
        Field("batch_number", "int64", "written by the runner: the batch's number in the run (0, 1, ...; in "
              "the HDF5 log)"),
        Field("first_episode", "int64", "written by the runner: the run's episode number (in the HDF5 log) of "
              "the batch's first episode; the others follow in batch order, except those whose start was "
              "refused, which never ran and get none"),
    ),
    "BATCH_COMMAND": (
        Field("episode", "uint32", "the episode's position in the batch, 0..n_episodes − 1"),
        Field("kind", "int32", "0 start, 1 trajectory, 2 gains, 3 reset (as in the command block)"),
        *(Field(name, type_, _AS_COMMAND) for name, type_ in (
            ("episode_id", "int64"), ("index", "int32"), ("max_commands", "int32"), ("feedforward", "int32"),
            ("n_samples", "int32"), ("n_context", "int32"), ("has_posture", "uint8"), ("has_qd", "uint8"),
            ("has_qdd", "uint8"), ("has_ki", "uint8"), ("rate", "float64"), ("wait_time", "float64"))),
        Field("values", "uint64", "where the command's arrays start in the value pool, counted in float64 "
              "values"),
    ),
    "BATCH_RESULT": (
        Field("episode_return", "float64", "the sum of the episode's replies' rewards (the charge for ending "
              "early is in the reward of the reply that ended it, as in section 5)"),
        Field("flag", "int32", "how the episode ended: 0 OK (it ran to its last segment), else the flag that "
              "ended it (flags table)"),
        Field("success", "int32", "1 when the task counts the episode as solved"),
        Field("n_steps", "int64", "control steps of the whole episode, the move to the start included"),
        Field("n_replies", "uint32", "commands sent (the start included; commands after the one that ended the "
              "episode are not sent)"),
        Field("first_reply", "uint32", "the row of its first reply in the reply table (its replies are "
              "consecutive)"),
        Field("message", f"char[{MESSAGE_BYTES}]", "why the episode ended with a flag other than OK, UTF-8, "
              "NUL-padded"),
    ),
    "BATCH_REPLY": (
        Field("reward", "float64", "the command's reward, as in a reply"),
        Field("flag", "int32", "the command's flag, as in a reply"),
        Field("n_steps", "int32", "control steps the command ran"),
    ),
}

# What follows a fixed part, back to back (8-byte aligned; only the blocks are 64-byte aligned).
# After COMMAND, in this order (also the order of a command's arrays in a batch's value pool):
COMMAND_ARRAYS = (
    Array("posture", ("n_dofs",), "start, when `has_posture` (rad)"),
    Array("kp", ("n_dofs",), "gains (N·m/rad)"),
    Array("kd", ("n_dofs",), "gains (N·m·s/rad)"),
    Array("ki", ("n_dofs",), "gains, when `has_ki` (N·m/(rad·s))"),
    Array("context", ("max_context",), "start: the context; gains: the task gains (first `n_context` entries)"),
    Array("q", ("max_samples", "n_dofs"), "trajectory: the first `n_samples` rows (rad)"),
    Array("qd", ("max_samples", "n_dofs"), "trajectory, when `has_qd` (rad/s)"),
    Array("qdd", ("max_samples", "n_dofs"), "trajectory, when `has_qdd` (rad/s²)"),
)
# after REPLY:
REPLY_ARRAYS = (
    Array("state", ("n_state",), "the task state after the command in the order of the state names (reach: "
          "target x, y, z in m and the end-effector distance to it in m); NaN when the command was refused"),
    Array("posture", ("n_dofs",), "the posture the robot holds after the command, rad: after a start, the "
          "start posture reached (the task's, see `episodic tasks`, or the command's `posture`); after a "
          "segment or a gain set, where the next segment must start (its first desired posture within "
          "`max_start_jump` of it, else DISCONTINUOUS); after a refusal, the posture held then"),
)
# The batch block: BATCH, then these parts, each on a 64-byte boundary: the commands of every
# episode of the batch and their arrays (written by the client), what the runner writes back.
BATCH_PARTS = (
    Array("commands", ("max_batch_commands",), "command table, one row per command (client)", "BATCH_COMMAND"),
    Array("values", ("max_batch_values",), "value pool: the commands' arrays (client)"),
    Array("results", ("max_batch",), "one result per episode (runner)", "BATCH_RESULT"),
    Array("replies", ("max_batch_commands",), "one reply per command sent (runner)", "BATCH_REPLY"),
    Array("states", ("max_batch_commands", "n_state"), "the task state after each command sent (runner)"),
)


def wire_dtype(type_: str) -> np.dtype:
    """The numpy dtype of a wire type (a key of WIRE_TYPES, ``char[N]`` or a name in BLOCKS)."""
    if type_ in BLOCKS:
        return block_dtype(BLOCKS[type_])
    if type_.startswith("char[") and type_.endswith("]"):
        return np.dtype(f"S{int(type_[5:-1])}")
    return np.dtype(WIRE_TYPES[type_])


def block_dtype(fields: tuple[Field, ...]) -> np.dtype:
    """The structured dtype of a fixed part: its fields back to back, in order."""
    return np.dtype([(f.name, wire_dtype(f.type)) for f in fields])


def field_at(dtype: np.dtype, name: str) -> tuple[int, int]:
    """(byte offset, bytes) of field ``name`` in a fixed part's ``dtype``."""
    assert dtype.fields is not None, f"{dtype} is not a fixed part"
    sub, offset = dtype.fields[name][:2]
    return offset, sub.itemsize


HEADER, LOG_COLUMN, COMMAND, REPLY, BATCH, BATCH_COMMAND, BATCH_RESULT, BATCH_REPLY = (
    block_dtype(BLOCKS[name]) for name in ("HEADER", "LOG_COLUMN", "COMMAND", "REPLY", "BATCH", "BATCH_COMMAND",
                                           "BATCH_RESULT", "BATCH_REPLY"))


_STRUCT_CODES = {("u", 1): "B", ("u", 4): "I", ("u", 8): "Q", ("i", 4): "i", ("i", 8): "q", ("f", 8): "d"}


def packer(dtype: np.dtype) -> struct.Struct:
    """A struct.Struct with exactly ``dtype``'s fields and offsets, for packing a whole block
    in one call (the dtypes above stay the single definition of the layout)."""
    fmt, at = "<", 0
    for name in dtype.names or ():
        sub = dtype[name]
        offset = field_at(dtype, name)[0]
        fmt += "x" * (offset - at)
        fmt += f"{sub.itemsize}s" if sub.kind == "S" else _STRUCT_CODES[sub.kind, sub.itemsize]
        at = offset + sub.itemsize
    fmt += "x" * (dtype.itemsize - at)
    out = struct.Struct(fmt)
    assert out.size == dtype.itemsize, (fmt, dtype)
    return out


COMMAND_STRUCT = packer(COMMAND)
REPLY_STRUCT = packer(REPLY)
# a fixed part as read (struct.unpack_from, or a table row's .item()), its fields by name
if TYPE_CHECKING:  # the classes are made from the schema when the module loads: to a type checker, any field is Any
    class _FixedPart(tuple[Any, ...]):
        index: Any  # a field of COMMAND and REPLY (the tuple's method to a checker otherwise)

        def __getattr__(self, name: str) -> Any: ...

        @classmethod
        def _make(cls, values: Iterable[Any]) -> Self: ...

    class CommandFields(_FixedPart): ...

    class ReplyFields(_FixedPart): ...

    class BatchCommandFields(_FixedPart): ...
else:
    CommandFields = namedtuple("CommandFields", COMMAND.names)
    ReplyFields = namedtuple("ReplyFields", REPLY.names)
    BatchCommandFields = namedtuple("BatchCommandFields", BATCH_COMMAND.names)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class Sizes:
    """What the runner chose; everything else follows from these."""

    n_dofs: int
    max_samples: int
    max_log_steps: int
    max_context: int
    state_names: tuple[str, ...]
    log_columns: tuple[tuple[str, int], ...]  # (name, width) in log-block order
    control_rate: float
    max_batch: int = 256
    max_batch_commands: int = 4096
    max_batch_values: int = 1 << 21  # 16 MiB of values (shared memory takes pages only as they are written)

    @property
    def n_state(self) -> int:
        return len(self.state_names)

    def shape(self, array: Array) -> tuple[int, ...]:
        """``array``'s shape with these sizes."""
        return tuple(int(getattr(self, name)) for name in array.shape)


@dataclass(frozen=True)
class Layout:
    """Byte offsets of every field for given Sizes (computed once per layout: the codec reads them
    with every command)."""

    sizes: Sizes

    @cached_property
    def header_bytes(self) -> int:
        s = self.sizes
        return HEADER.itemsize + NAME_BYTES * len(s.state_names) + LOG_COLUMN.itemsize * len(s.log_columns)

    @cached_property
    def command_offset(self) -> int:
        return _align(self.header_bytes)

    def command_arrays(self) -> dict[str, tuple[int, tuple[int, ...]]]:
        """name -> (offset from the command block, shape) of the float64 arrays (COMMAND_ARRAYS)."""
        return {name: (at, shape) for name, (at, _, shape) in self._parts(COMMAND_ARRAYS, COMMAND.itemsize)[0].items()}

    @cached_property
    def command_bytes(self) -> int:
        return self._parts(COMMAND_ARRAYS, COMMAND.itemsize)[1]

    @cached_property
    def reply_offset(self) -> int:
        return self.command_offset + _align(self.command_bytes)

    def reply_arrays(self) -> dict[str, tuple[int, tuple[int, ...]]]:
        """name -> (offset from the reply block, shape) of the float64 arrays after REPLY (REPLY_ARRAYS):
        state (n_state,) and posture (n_dofs,) rad."""
        return {name: (at, shape) for name, (at, _, shape) in self._parts(REPLY_ARRAYS, REPLY.itemsize)[0].items()}

    @cached_property
    def reply_bytes(self) -> int:
        return self._parts(REPLY_ARRAYS, REPLY.itemsize)[1]

    @cached_property
    def log_offset(self) -> int:
        return self.reply_offset + _align(self.reply_bytes)

    def log_column_offsets(self) -> list[tuple[str, int, int]]:
        """(name, width, offset from the log block) of each per-step column."""
        out, at = [], 0
        for name, width in self.sizes.log_columns:
            out.append((name, width, at))
            at += _align(8 * width * self.sizes.max_log_steps)
        return out

    @cached_property
    def log_bytes(self) -> int:
        name, width, at = self.log_column_offsets()[-1]
        return at + _align(8 * width * self.sizes.max_log_steps)

    @cached_property
    def batch_offset(self) -> int:
        return self.log_offset + self.log_bytes

    def batch_tables(self) -> dict[str, tuple[int, np.dtype, tuple[int, ...]]]:
        """name -> (offset from the batch block, dtype, shape) of the batch block's parts (BATCH_PARTS),
        in order, each on a 64-byte boundary: the command table, the value pool, the results, the
        replies and the states after them."""
        return self._parts(BATCH_PARTS, _align(BATCH.itemsize), aligned=True)[0]

    @cached_property
    def batch_bytes(self) -> int:
        return self._parts(BATCH_PARTS, _align(BATCH.itemsize), aligned=True)[1]

    def _parts(self, arrays: tuple[Array, ...], at: int,
               aligned: bool = False) -> tuple[dict[str, tuple[int, np.dtype, tuple[int, ...]]], int]:
        """name -> (offset, dtype, shape) of ``arrays`` laid out in order from byte ``at`` (each
        rounded up to 64 bytes when ``aligned``), and the byte where the last one ends."""
        out = {}
        for array in arrays:
            dtype, shape = wire_dtype(array.element), self.sizes.shape(array)
            out[array.name] = (at, dtype, shape)
            size = dtype.itemsize * int(np.prod(shape))
            at += _align(size) if aligned else size
        return out, at

    @cached_property
    def total_size(self) -> int:
        return self.batch_offset + self.batch_bytes


def write_header(buf, layout: Layout, runner_pid: int) -> None:
    """Fill the header (status 'starting') into the start of ``buf``."""
    s = layout.sizes
    head = np.ndarray((), HEADER, buffer=buf)
    head["magic"] = MAGIC
    head["version"] = VERSION
    head["status"] = 0
    head["runner_pid"] = runner_pid
    head["n_dofs"], head["max_samples"] = s.n_dofs, s.max_samples
    head["max_log_steps"], head["max_context"] = s.max_log_steps, s.max_context
    head["n_state"], head["n_log_columns"] = len(s.state_names), len(s.log_columns)
    head["control_rate"] = s.control_rate
    head["command_offset"], head["reply_offset"] = layout.command_offset, layout.reply_offset
    head["log_offset"], head["total_size"] = layout.log_offset, layout.total_size
    head["max_batch"], head["max_batch_commands"] = s.max_batch, s.max_batch_commands
    head["max_batch_values"], head["batch_offset"] = s.max_batch_values, layout.batch_offset
    names = np.ndarray((len(s.state_names),), f"S{NAME_BYTES}", buffer=buf, offset=HEADER.itemsize)
    names[:] = [n.encode() for n in s.state_names]
    table = np.ndarray((len(s.log_columns),), LOG_COLUMN, buffer=buf,
                       offset=HEADER.itemsize + NAME_BYTES * len(s.state_names))
    for i, (name, width, off) in enumerate(layout.log_column_offsets()):
        table[i] = (name.encode(), width, 0, off)


class LayoutError(ValueError):
    """The shared memory does not hold a channel this code can speak to."""


MAX_SMALL = 65536      # plausibility bounds on header sizes (joints, context, state and log columns)
MAX_LARGE = 1 << 28    # ... and on samples, log steps, batch episodes and batch commands
MAX_VALUES = 1 << 36   # ... and on the batch value pool (512 GiB)


def _ascii_names(raw, what: str) -> tuple[str, ...]:
    """NUL-padded ASCII names; LayoutError when one is not ASCII or is empty."""
    out = []
    for i, name in enumerate(raw):
        try:
            text = bytes(name).rstrip(b"\0").decode("ascii")
        except UnicodeDecodeError:
            raise LayoutError(f"{what} {i} in the header is not ASCII; the channel is corrupt") from None
        if not text or "\0" in text:
            raise LayoutError(f"{what} {i} in the header is empty or holds a NUL; the channel is corrupt")
        out.append(text)
    return tuple(out)


def read_header(buf) -> Layout:
    """Sizes from an existing channel's header; raises LayoutError (with the reason) on a bad
    magic or version and on any header that does not describe a consistent layout inside ``buf``."""
    if len(buf) < HEADER.itemsize:
        raise LayoutError("the shared-memory object is smaller than a header")
    head = np.ndarray((), HEADER, buffer=buf).copy()
    if head["magic"].item() != MAGIC:
        magic = head["magic"].item().decode("ascii", errors="replace")
        raise LayoutError(f"the shared memory starts with '{magic}', not 'EPISODIC': it is not an episodic "
                          f"channel (another program's object under this name?)")
    if int(head["version"]) != VERSION:
        raise LayoutError(f"the runner speaks protocol version {int(head['version'])}, "
                          f"this client version {VERSION}; use matching versions of episodic")
    n_dofs, max_samples = int(head["n_dofs"]), int(head["max_samples"])
    max_log_steps, max_context = int(head["max_log_steps"]), int(head["max_context"])
    n_state, n_cols = int(head["n_state"]), int(head["n_log_columns"])
    rate = float(head["control_rate"])
    max_batch, max_batch_commands = int(head["max_batch"]), int(head["max_batch_commands"])
    max_batch_values = int(head["max_batch_values"])
    if not (1 <= n_dofs <= MAX_SMALL and max_context <= MAX_SMALL and n_state <= MAX_SMALL
            and 1 <= n_cols <= MAX_SMALL and 1 <= max_samples <= MAX_LARGE and 1 <= max_log_steps <= MAX_LARGE
            and 1 <= max_batch <= MAX_LARGE and 1 <= max_batch_commands <= MAX_LARGE
            and 1 <= max_batch_values <= MAX_VALUES):
        raise LayoutError("implausible sizes in the header; the channel is corrupt")
    if not (np.isfinite(rate) and rate > 0):
        raise LayoutError(f"the header's control rate {rate} is not a positive number; the channel is corrupt")
    tables = HEADER.itemsize + NAME_BYTES * n_state + LOG_COLUMN.itemsize * n_cols
    if tables > len(buf):
        raise LayoutError("the header's tables overrun the shared-memory object; the channel is corrupt")
    names = np.ndarray((n_state,), f"V{NAME_BYTES}", buffer=buf, offset=HEADER.itemsize)
    table = np.ndarray((n_cols,), LOG_COLUMN, buffer=buf, offset=HEADER.itemsize + NAME_BYTES * n_state).copy()
    widths = [int(w) for w in table["width"]]
    if not all(1 <= w <= MAX_SMALL for w in widths):
        raise LayoutError("a log column's width in the header is implausible; the channel is corrupt")
    columns = zip(_ascii_names(table["name"], "log column name"), widths)
    sizes = Sizes(n_dofs, max_samples, max_log_steps, max_context, _ascii_names(names, "state name"),
                  tuple(columns), rate, max_batch, max_batch_commands, max_batch_values)
    layout = Layout(sizes)
    offsets = (layout.command_offset, layout.reply_offset, layout.log_offset, layout.batch_offset, layout.total_size)
    if offsets != tuple(int(head[k]) for k in ("command_offset", "reply_offset", "log_offset", "batch_offset",
                                                "total_size")):
        raise LayoutError("the header's offsets disagree with its sizes; the channel is corrupt")
    if layout.total_size > len(buf):
        raise LayoutError(f"the shared-memory object ({len(buf)} bytes) is smaller than its header says "
                          f"({layout.total_size}); the channel is corrupt")
    if any(off != at for (_, _, at), off in zip(layout.log_column_offsets(), table["offset"])):
        raise LayoutError("a log column's offset disagrees with the widths; the channel is corrupt")
    return layout
