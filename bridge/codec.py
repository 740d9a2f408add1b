"""The wire form of commands and replies: ``encode_command``/``decode_command`` and
``encode_reply``/``decode_reply`` are inverse pairs over a channel's blocks (layout in
docs/protocol.md). Encoding runs in the learner (or the runner, for replies) and raises
ValueError on what cannot be laid out; decoding a command never raises: what cannot be read
as a command comes back as a MalformedCommand that the runner refuses.
"""
from __future__ import annotations

from operator import itemgetter
from typing import NamedTuple

import numpy as np

from episodic.bridge.blocks import Blocks
from episodic.bridge.layout import (
    COMMAND,
    COMMAND_STRUCT,
    MAGIC,
    MESSAGE_BYTES,
    REPLY,
    REPLY_STRUCT,
    VERSION,
    BatchCommandFields,
    CommandFields,
    ReplyFields,
    Sizes,
)
from episodic.interface.commands import (
    Command,
    CommandError,
    Feedforward,
    GainsCommand,
    Kind,
    MalformedCommand,
    ResetCommand,
    StartCommand,
    TrajectoryCommand,
)
from episodic.interface.vocabulary import Flag, MachineState, Reply

_COMMAND_DEFAULTS = {name: 0 for name in COMMAND.names or ()} | {"magic": MAGIC, "version": VERSION,
                                                           "rate": 0.0, "wait_time": 0.0}
_COMMAND_ORDER = itemgetter(*COMMAND.names or ())  # a dict of COMMAND's fields -> their values in struct order
_REPLY_ORDER = itemgetter(*REPLY.names or ())
_FLAGS = {int(flag): flag for flag in Flag}  # value -> member, a dict lookup instead of the enum's call
_STATES = {int(state): state for state in MachineState}


class ReplyBlock(NamedTuple):
    """A reply as the reply block holds it: the Reply, the seq and kind of the command it answers,
    the episode-log rows now in the log block and whether the episode outgrew that block."""

    seq: int
    kind: int
    reply: Reply
    log_rows: int
    log_truncated: bool


def encode_command(blocks: Blocks, command: Command | MalformedCommand, seq: int, client_pid: int) -> None:
    """Write ``command`` into the command block under sequence number ``seq``; ValueError when
    its arrays do not fit the channel's sizes."""
    fields, arrays = command_parts(blocks.layout.sizes, command)
    _pack_command(blocks, fields, seq, client_pid)
    for name, value in arrays.items():
        blocks.command_arrays[name][: len(value)] = value


def encode_request(blocks: Blocks, kind: int, index: int, seq: int, client_pid: int) -> None:
    """Write a command that is fields only (a batch: its episodes are in the batch block; a
    batch log: ``index`` is the episode's position in the last batch) under ``seq``."""
    _pack_command(blocks, {"kind": kind, "index": index}, seq, client_pid)


def _pack_command(blocks: Blocks, fields: dict, seq: int, client_pid: int) -> None:
    """Write the command block's fixed part: ``fields`` (COMMAND names), the rest their defaults."""
    values = _COMMAND_DEFAULTS | fields
    values["seq"], values["client_pid"] = seq, client_pid
    COMMAND_STRUCT.pack_into(blocks.buf, blocks.layout.command_offset, *_COMMAND_ORDER(values))


def command_parts(s: Sizes, command: Command | MalformedCommand) -> tuple[dict, dict[str, np.ndarray]]:
    """The fields a command sets (COMMAND / BATCH_COMMAND names; the rest are 0) and its arrays
    (name -> float64 array), checked against the channel's sizes: TypeError for what is not a
    command, ValueError (a CommandError) for a value the command block cannot hold."""
    if not isinstance(command, (StartCommand, TrajectoryCommand, GainsCommand, ResetCommand, MalformedCommand)):
        raise TypeError(f"cannot send {type(command).__name__}; send a command from episodic.interface.commands")
    fields: dict[str, int | float] = dict(episode_id=_integer(command.episode_id, "episode_id", 64),
                                          index=_integer(command.index, "index", 32),
                                          max_commands=_integer(command.max_commands, "max_commands", 32),
                                          kind=int(command.kind))
    arrays: dict[str, np.ndarray] = {}
    if isinstance(command, StartCommand):
        if command.posture is not None:
            arrays["posture"], fields["has_posture"] = _vector(command.posture, "posture", s.n_dofs), 1
        arrays["context"] = _vector(command.context, "context", None, s.max_context)
        fields["n_context"] = arrays["context"].size
    elif isinstance(command, TrajectoryCommand):
        q = _matrix(command.q, "q", s.n_dofs, s.max_samples)
        arrays["q"], fields["n_samples"] = q, q.shape[0]
        for name in ("qd", "qdd"):
            value = getattr(command, name)
            if value is not None:
                arrays[name], fields[f"has_{name}"] = _matrix(value, name, s.n_dofs, s.max_samples, q.shape), 1
        fields["rate"] = 0.0 if command.rate is None else _number(command.rate, "rate")
        fields["wait_time"] = _number(command.wait_time, "wait_time")
    elif isinstance(command, GainsCommand):
        arrays["kp"], arrays["kd"] = _vector(command.kp, "kp", s.n_dofs), _vector(command.kd, "kd", s.n_dofs)
        if command.ki is not None:
            arrays["ki"], fields["has_ki"] = _vector(command.ki, "ki", s.n_dofs), 1
        if command.task_gains is not None:
            arrays["context"] = _vector(command.task_gains, "task_gains", None, s.max_context)
            fields["n_context"] = arrays["context"].size
        fields["feedforward"] = int(Feedforward.parse(command.feedforward))
        fields["wait_time"] = _number(command.wait_time, "wait_time")
    return fields, arrays


def _integer(value, name: str, bits: int) -> int:
    """``value`` as an int that the command block's signed ``bits``-bit field holds; CommandError
    (a ValueError) saying what the runner takes for anything else."""
    top = 1 << (bits - 1)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not -top <= value < top:
        raise CommandError(f"{name} must be an integer in [0, 2^{bits - 1}), got {value!r}: the command block "
                           f"cannot hold it")
    return int(value)


def _number(value, name: str) -> float:
    """``value`` as a float for a float64 field; CommandError for what is not a real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CommandError(f"{name} must be a real number, got {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise CommandError(f"{name} is too large for a float64: {value!r}") from None


def _reals(value, name: str) -> np.ndarray:
    """``value`` as a float64 array; CommandError for anything but real numbers (complex, text,
    None, ragged lists)."""
    try:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"got {arr.dtype} values")
        return arr.astype(float, copy=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise CommandError(f"{name} must be real numbers: {exc}") from None


def _vector(value, name: str, size: int | None, most: int | None = None) -> np.ndarray:
    arr = _reals(value, name).ravel()
    if size is not None and arr.size != size:
        raise ValueError(f"{name} needs {size} values, got {arr.size}")
    if most is not None and arr.size > most:
        raise ValueError(f"{name} has {arr.size} values; the runner takes at most {most}")
    return arr


def _matrix(value, name: str, n_dofs: int, most: int, shape: tuple[int, int] | None = None) -> np.ndarray:
    arr = _reals(value, name)
    if arr.ndim != 2 or arr.shape[1] != n_dofs:
        raise ValueError(f"{name} must be (n_samples, {n_dofs}), got {arr.shape}")
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{name} must have q's shape {shape}, got {arr.shape}")
    if not 1 <= arr.shape[0] <= most:
        raise ValueError(f"{name} has {arr.shape[0]} samples; the runner takes 1..{most}")
    return arr


def read_command_fields(blocks: Blocks) -> CommandFields:
    """The command block's fixed fields, in one unpack."""
    return CommandFields._make(COMMAND_STRUCT.unpack_from(blocks.buf, blocks.layout.command_offset))


def decode_command(blocks: Blocks, c: CommandFields) -> Command | MalformedCommand:
    """The command that fixed fields ``c`` (from read_command_fields) and the block's arrays
    describe; a MalformedCommand saying why when they describe none."""
    if c.magic != MAGIC or c.version != VERSION:
        magic = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in c.magic.decode("latin-1"))
        return MalformedCommand(c.episode_id, c.index, c.max_commands,
                                reason=f"the command block holds magic '{magic}' and version {c.version}; this "
                                f"runner speaks protocol version {VERSION}: write magic 'EPISODIC' and version "
                                f"{VERSION} with every command")
    return command_from(blocks.layout.sizes, c, blocks.command_arrays)


def command_from(s: Sizes, c: CommandFields | BatchCommandFields,
                 a: dict[str, np.ndarray]) -> Command | MalformedCommand:
    """The command that fields ``c`` (the command block's or a batch table row's) and arrays ``a``
    (name -> values, at least as long as the fields say; only those the command has are read)
    describe, or a MalformedCommand."""
    head = dict(episode_id=c.episode_id, index=c.index, max_commands=c.max_commands)
    kind, n_context = c.kind, c.n_context
    if not 0 <= n_context <= s.max_context:
        return MalformedCommand(**head, reason=f"n_context {n_context} outside 0..{s.max_context}")
    if kind == Kind.START:
        return StartCommand(c.episode_id, c.max_commands, _frozen(a["posture"]) if c.has_posture else None,
                            _frozen(a["context"][:n_context]), index=c.index)
    if kind == Kind.TRAJECTORY:
        n = c.n_samples
        if not 1 <= n <= s.max_samples:
            return MalformedCommand(**head, reason=f"n_samples {n} outside 1..{s.max_samples}")
        return TrajectoryCommand(**head, q=_frozen(a["q"][:n]), qd=_frozen(a["qd"][:n]) if c.has_qd else None,
                                 qdd=_frozen(a["qdd"][:n]) if c.has_qdd else None,
                                 rate=None if c.rate == 0 else c.rate, wait_time=c.wait_time)
    if kind == Kind.GAINS:
        return GainsCommand(**head, kp=_frozen(a["kp"]), kd=_frozen(a["kd"]), ki=_frozen(a["ki"]) if c.has_ki else None,
                            feedforward=c.feedforward, wait_time=c.wait_time,
                            task_gains=_frozen(a["context"][:n_context]) if n_context else None)
    if kind == Kind.RESET:
        return ResetCommand(**head)
    return MalformedCommand(**head, reason=f"unknown command kind {kind}; use 0 start, 1 trajectory, 2 gains, 3 reset")


def _frozen(values: np.ndarray) -> np.ndarray:
    """A copy of ``values`` that nothing can change: over an immutable bytes object, so read-only for
    good (the runner keeps such an array in the episode's record as it is, without a copy of its own)."""
    return np.frombuffer(values.tobytes(), values.dtype).reshape(values.shape)


def encode_reply(blocks: Blocks, answer: ReplyBlock) -> None:
    """Write a reply (its success and episode return among its fields), its task state, its posture
    (NaN when the reply has none) and the log-block bookkeeping into the reply block."""
    r = answer.reply
    values = dict(seq=answer.seq, episode_id=r.episode_id, index=r.index, flag=r.flag, reward=r.reward,
                  n_steps=r.n_steps, episode_done=r.episode_done, machine_state=r.machine_state,
                  log_rows=answer.log_rows, log_truncated=answer.log_truncated, kind=answer.kind,
                  episode_return=r.episode_return, success=r.success, pad=0,
                  message=r.message.encode()[:MESSAGE_BYTES])
    REPLY_STRUCT.pack_into(blocks.buf, blocks.layout.reply_offset, *_REPLY_ORDER(values))
    arrays = blocks.reply_arrays
    arrays["state"][:] = r.state
    arrays["posture"][:] = np.nan if r.posture is None else r.posture


def decode_reply(blocks: Blocks) -> ReplyBlock:
    """Read the reply block (the inverse of encode_reply)."""
    r = ReplyFields._make(REPLY_STRUCT.unpack_from(blocks.buf, blocks.layout.reply_offset))
    message = r.message.partition(b"\0")[0]  # NUL-padded (a C string): cheaper than stripping 256 bytes
    reply = Reply(r.episode_id, r.index, flag_of(r.flag), r.reward,
                  blocks.reply_arrays["state"].copy(), r.n_steps, bool(r.episode_done),
                  message.decode(errors="replace"),
                  _member(_STATES, MachineState, r.machine_state), blocks.reply_arrays["posture"].copy(),
                  bool(r.success), r.episode_return)
    return ReplyBlock(r.seq, r.kind, reply, r.log_rows, bool(r.log_truncated))


def flag_of(value: int) -> Flag:
    """The Flag with ``value`` (ValueError when there is none), by a dict lookup."""
    return _member(_FLAGS, Flag, value)


def _member(members: dict, enum: type, value: int):
    """The member of ``enum`` with ``value`` (ValueError from the enum when there is none)."""
    member = members.get(value)
    return enum(value) if member is None else member
