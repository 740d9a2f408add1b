"""The shared-memory layout, field by field (docs/protocol.md renders these tables).

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
from dataclasses import dataclass
from functools import cached_property

import numpy as np

MAGIC = b"EPISODIC"
VERSION = 5
NAME_BYTES = 32
MESSAGE_BYTES = 256
ALIGN = 64

HEADER = np.dtype([
    ("magic", "S8"),            # b"EPISODIC"
    ("version", "<u4"),         # protocol version (VERSION)
    ("status", "<u4"),          # 0 starting, 1 serving, 2 closed
    ("runner_pid", "<i8"),      # pid of the runner process
    ("n_dofs", "<u4"),          # joints of the robot
    ("max_samples", "<u4"),     # longest trajectory segment, samples
    ("max_log_steps", "<u4"),   # rows of the episode-log block
    ("max_context", "<u4"),     # length of the context / state buffer of a command
    ("n_state", "<u4"),         # task state columns (names follow the header)
    ("n_log_columns", "<u4"),   # per-step log columns (table follows the state names)
    ("control_rate", "<f8"),    # Hz
    ("command_offset", "<u8"),  # byte offsets of the blocks from the start of the object
    ("reply_offset", "<u8"),
    ("log_offset", "<u8"),
    ("total_size", "<u8"),      # bytes of the whole object
    ("client_pid", "<i8"),      # pid of the client holding the channel (0: none yet); for messages
    ("taken_seq", "<u8"),       # seq of the last command the runner copied out of the command block
    ("max_batch", "<u4"),       # most episodes in one batch
    ("max_batch_commands", "<u4"),  # most commands in one batch, all its episodes together
    ("max_batch_values", "<u8"),    # most float64 values in one batch's value pool
    ("batch_offset", "<u8"),    # byte offset of the batch block
])
# after HEADER: n_state names (NAME_BYTES each, NUL-padded ASCII), then the log column table
LOG_COLUMN = np.dtype([
    ("name", f"S{NAME_BYTES}"),
    ("width", "<u4"),           # values per row (e.g. n_dofs for q)
    ("pad", "<u4"),
    ("offset", "<u8"),          # byte offset of the (max_log_steps, width) float64 array in the log block
])

COMMAND = np.dtype([
    ("magic", "S8"),            # b"EPISODIC", written by the client with every command
    ("version", "<u4"),         # the client's protocol version
    ("pad0", "<u4"),
    ("seq", "<u8"),             # the client's sequence number, echoed by the reply
    ("client_pid", "<i8"),
    ("episode_id", "<i8"),
    ("index", "<i4"),           # 0 = start, 1..max_commands = segments
    ("max_commands", "<i4"),
    ("kind", "<i4"),            # 0 start, 1 trajectory, 2 gains, 3 reset, 4 batch, 5 batch log
    ("feedforward", "<i4"),     # 0 none, 1 gravity compensation, 2 feedforward, 3 inverse dynamics
    ("n_samples", "<i4"),       # rows of q/qd/qdd used
    ("n_context", "<i4"),       # entries of context used
    ("has_posture", "u1"),      # start: posture given (else the task's default)
    ("has_qd", "u1"),
    ("has_qdd", "u1"),
    ("has_ki", "u1"),
    ("pad", "<u4"),
    ("rate", "<f8"),            # Hz of the samples; 0 = the control rate
    ("wait_time", "<f8"),       # s the final posture is held after the samples
])
# after COMMAND (each float64): posture (n_dofs), kp, kd, ki (n_dofs each),
# context (max_context), q, qd, qdd (max_samples, n_dofs each)

REPLY = np.dtype([
    ("seq", "<u8"),             # seq of the command answered
    ("episode_id", "<i8"),
    ("index", "<i4"),
    ("flag", "<i4"),            # episodic.interface.vocabulary.Flag
    ("reward", "<f8"),          # reward of the segment
    ("n_steps", "<i4"),         # control steps the command ran
    ("episode_done", "<i4"),    # 1 when the episode ended with this command
    ("machine_state", "<i4"),   # state after the command
    ("log_rows", "<i4"),        # rows of the episode log now in the log block
    ("log_truncated", "<i4"),   # 1 when the episode had more steps than max_log_steps
    ("kind", "<i4"),            # the command's kind, echoed
    ("episode_return", "<f8"),  # return of the command's episode so far, the charge for an early end included
    ("success", "<i4"),         # 1 in the reply that ends an episode the task counts as solved (flag OK)
    ("pad", "<i4"),
    ("message", f"S{MESSAGE_BYTES}"),  # explanation of a non-zero flag, UTF-8
])
# after REPLY: state (n_state float64), the task state after the command; then posture
# (n_dofs float64), rad, the posture held after the command (where the next segment starts)


# The batch block: BATCH, then the commands of every episode of the batch in a table
# (max_batch_commands rows of BATCH_COMMAND), their arrays in one value pool (max_batch_values
# float64), and what the runner writes back: one BATCH_RESULT per episode (max_batch rows), one
# BATCH_REPLY per command sent (max_batch_commands rows) and the task state after each
# (max_batch_commands x n_state float64).
BATCH = np.dtype([
    ("n_episodes", "<u4"),      # episodes in the batch (1..max_batch)
    ("n_commands", "<u4"),      # rows of the command table used
    ("n_values", "<u8"),        # float64 values of the value pool used
    ("keep_logs", "<u4"),       # 1: keep each episode's per-step log for batch-log commands
    ("pad", "<u4"),
    ("batch_number", "<i8"),    # written by the runner: the batch's number in the run (its log)
    ("first_episode", "<i8"),   # written by the runner: the run's number of the batch's first episode
])
BATCH_COMMAND = np.dtype([
    ("episode", "<u4"),         # position of the command's episode in the batch, 0..n_episodes-1
    ("kind", "<i4"),            # 0 start, 1 trajectory, 2 gains, 3 reset
    ("episode_id", "<i8"),
    ("index", "<i4"),
    ("max_commands", "<i4"),
    ("feedforward", "<i4"),
    ("n_samples", "<i4"),       # rows of q/qd/qdd
    ("n_context", "<i4"),       # entries of context (start) or task gains (gains)
    ("has_posture", "u1"),
    ("has_qd", "u1"),
    ("has_qdd", "u1"),
    ("has_ki", "u1"),
    ("rate", "<f8"),            # Hz of the samples; 0 = the control rate
    ("wait_time", "<f8"),       # s
    ("values", "<u8"),          # where the command's arrays start in the value pool, in values
])
# a command's arrays in the value pool, in this order, each only when the command has it:
# start: posture (n_dofs), context (n_context); gains: kp, kd, ki (n_dofs each), task gains
# (n_context); trajectory: q, qd, qdd (n_samples x n_dofs each, row-major)
BATCH_RESULT = np.dtype([
    ("episode_return", "<f8"),  # sum of the rewards of the commands sent (the charge for an early end included)
    ("flag", "<i4"),            # the episode's end flag (0: it ran to its last segment)
    ("success", "<i4"),         # 1 when the task counts the episode as solved
    ("n_steps", "<i8"),         # control steps of the whole episode, the move to the start included
    ("n_replies", "<u4"),       # commands sent (a command after the one that ended the episode is not)
    ("first_reply", "<u4"),     # row of its first reply in the reply table
    ("message", f"S{MESSAGE_BYTES}"),  # why the episode ended with a non-zero flag, UTF-8
])
BATCH_REPLY = np.dtype([
    ("reward", "<f8"),
    ("flag", "<i4"),
    ("n_steps", "<i4"),         # control steps the command ran
])


_STRUCT_CODES = {("u", 1): "B", ("u", 4): "I", ("u", 8): "Q", ("i", 4): "i", ("i", 8): "q", ("f", 8): "d"}


def packer(dtype: np.dtype) -> struct.Struct:
    """A struct.Struct with exactly ``dtype``'s fields and offsets, for packing a whole block
    in one call (the dtypes above stay the single definition of the layout)."""
    fmt, at = "<", 0
    for name in dtype.names:
        sub, offset = dtype.fields[name][:2]
        fmt += "x" * (offset - at)
        fmt += f"{sub.itemsize}s" if sub.kind == "S" else _STRUCT_CODES[sub.kind, sub.itemsize]
        at = offset + sub.itemsize
    fmt += "x" * (dtype.itemsize - at)
    out = struct.Struct(fmt)
    assert out.size == dtype.itemsize, (fmt, dtype)
    return out


COMMAND_STRUCT = packer(COMMAND)
REPLY_STRUCT = packer(REPLY)
BATCH_STRUCT = packer(BATCH)
# a fixed part as read (struct.unpack_from, or a table row's .item()), its fields by name
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
        """name -> (offset from the command block, shape) of the float64 arrays."""
        s = self.sizes
        out, at = {}, COMMAND.itemsize
        for name, shape in (("posture", (s.n_dofs,)), ("kp", (s.n_dofs,)), ("kd", (s.n_dofs,)),
                            ("ki", (s.n_dofs,)), ("context", (s.max_context,)),
                            ("q", (s.max_samples, s.n_dofs)), ("qd", (s.max_samples, s.n_dofs)),
                            ("qdd", (s.max_samples, s.n_dofs))):
            out[name] = (at, shape)
            at += 8 * int(np.prod(shape))
        return out

    @cached_property
    def command_bytes(self) -> int:
        off, shape = self.command_arrays()["qdd"]
        return off + 8 * int(np.prod(shape))

    @cached_property
    def reply_offset(self) -> int:
        return self.command_offset + _align(self.command_bytes)

    def reply_arrays(self) -> dict[str, tuple[int, tuple[int, ...]]]:
        """name -> (offset from the reply block, shape) of the float64 arrays after REPLY:
        state (n_state,) and posture (n_dofs,) rad."""
        n_state = len(self.sizes.state_names)
        return {"state": (REPLY.itemsize, (n_state,)),
                "posture": (REPLY.itemsize + 8 * n_state, (self.sizes.n_dofs,))}

    @cached_property
    def reply_bytes(self) -> int:
        off, (n,) = self.reply_arrays()["posture"]
        return off + 8 * n

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
        """name -> (offset from the batch block, dtype, shape) of the batch block's parts, in
        order, each on a 64-byte boundary: the command table, the value pool, the results, the
        replies and the states after them."""
        s = self.sizes
        out, at = {}, _align(BATCH.itemsize)
        for name, dtype, shape in (("commands", BATCH_COMMAND, (s.max_batch_commands,)),
                                   ("values", np.dtype("<f8"), (s.max_batch_values,)),
                                   ("results", BATCH_RESULT, (s.max_batch,)),
                                   ("replies", BATCH_REPLY, (s.max_batch_commands,)),
                                   ("states", np.dtype("<f8"), (s.max_batch_commands, len(s.state_names)))):
            out[name] = (at, dtype, shape)
            at += _align(dtype.itemsize * int(np.prod(shape)))
        return out

    @cached_property
    def batch_bytes(self) -> int:
        at, dtype, shape = self.batch_tables()["states"]
        return at + _align(dtype.itemsize * int(np.prod(shape)))

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
