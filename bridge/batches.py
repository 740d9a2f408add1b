"""The wire form of a batch (a population of episodes) and of its results, in the channel's
batch block (layout in docs/protocol.md): ``encode_batch``/``decode_batch`` and
``encode_results``/``decode_results`` are inverse pairs. ``split`` cuts a population into
batches that fit the runner's sizes. Decoding a batch never raises: a batch that cannot be
read comes back as the reason, a command that cannot be read as a MalformedCommand in its
episode (the runner refuses it there, as it would one sent alone)."""
from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import numpy as np

from episodic.bridge.blocks import Blocks
from episodic.bridge.codec import command_from, command_parts, flag_of
from episodic.bridge.layout import BATCH_COMMAND, BATCH_RESULT, COMMAND_ARRAYS, MESSAGE_BYTES, BatchCommandFields, Sizes
from episodic.interface.commands import Command, Kind, MalformedCommand
from episodic.interface.vocabulary import EpisodeResult

# a command's arrays in the value pool: the command block's (each present only when the command has it)
ARRAYS = {array.name: array for array in COMMAND_ARRAYS}
_RESULT_ORDER = itemgetter(*BATCH_RESULT.names or ())  # a dict of BATCH_RESULT's fields -> their values in row order


def episode_size(s: Sizes, commands: Sequence[Command]) -> tuple[int, int]:
    """(commands, float64 values) an episode takes in a batch; ValueError when a command does
    not fit the channel's sizes."""
    return len(commands), sum(a.size for c in commands for a in command_parts(s, c)[1].values())


def split(s: Sizes, episodes: Sequence[Sequence[Command]]) -> list[list[list[Command]]]:
    """``episodes`` cut, in order, into batches within the runner's max_batch, max_batch_commands
    and max_batch_values; ValueError naming an episode too large for any batch."""
    batches: list[list[list[Command]]] = []
    used = (s.max_batch, 0, 0)  # episodes, commands, values of the batch being filled
    for i, episode in enumerate(episodes):
        n_commands, n_values = episode_size(s, episode)
        if not 1 <= n_commands <= s.max_batch_commands or n_values > s.max_batch_values:
            raise ValueError(f"episode {i} of the batch has {n_commands} commands and {n_values} values; the "
                             f"runner takes 1..{s.max_batch_commands} commands and at most {s.max_batch_values} "
                             f"values per batch (episodic serve --max-batch-values)")
        if (used[0] + 1 > s.max_batch or used[1] + n_commands > s.max_batch_commands
                or used[2] + n_values > s.max_batch_values):
            batches.append([])
            used = (0, 0, 0)
        batches[-1].append(list(episode))
        used = (used[0] + 1, used[1] + n_commands, used[2] + n_values)
    return batches


def encode_batch(blocks: Blocks, episodes: Sequence[Sequence[Command]], keep_logs: bool) -> None:
    """Write ``episodes`` (one batch: within the sizes, see :func:`split`) into the batch block:
    the command table column by column (a field a command does not set is 0), the arrays into
    the value pool in order."""
    s = blocks.layout.sizes
    table, pool = blocks.batch_tables["commands"], blocks.batch_tables["values"]
    parts = [(position, command_parts(s, command)) for position, episode in enumerate(episodes) for command in episode]
    columns: dict[str, list] = {name: [0] * len(parts) for name in BATCH_COMMAND.names or ()}
    at = 0
    for row, (position, (fields, arrays)) in enumerate(parts):
        for name, value in fields.items():
            columns[name][row] = value
        columns["episode"][row], columns["values"][row] = position, at
        for name in ARRAYS:
            if name in arrays:
                values = arrays[name].ravel()
                pool[at : at + values.size] = values
                at += values.size
    rows = table[: len(parts)]
    for name, column in columns.items():
        rows[name] = column
    head = blocks.batch
    head["n_episodes"], head["n_commands"], head["n_values"] = len(episodes), len(parts), at
    head["keep_logs"] = int(bool(keep_logs))
    head["batch_number"] = head["first_episode"] = -1


def decode_batch(blocks: Blocks) -> tuple[list[list[Command | MalformedCommand]], bool] | str:
    """The batch block's episodes (each a list of commands, in order) and whether to keep their
    logs, or the reason the batch cannot be read."""
    s = blocks.layout.sizes
    head = blocks.batch[()].copy()
    n_episodes, n_commands, n_values = int(head["n_episodes"]), int(head["n_commands"]), int(head["n_values"])
    if not 1 <= n_episodes <= s.max_batch:
        return f"n_episodes {n_episodes} outside 1..{s.max_batch}"
    if not n_episodes <= n_commands <= s.max_batch_commands:
        return f"n_commands {n_commands} outside {n_episodes}..{s.max_batch_commands} (at least one per episode)"
    if n_values > s.max_batch_values:
        return f"n_values {n_values} over max_batch_values {s.max_batch_values}"
    table = blocks.batch_tables["commands"][:n_commands].copy()
    pool = blocks.batch_tables["values"][:n_values].copy()
    positions = table["episode"].astype(np.int64)
    if positions[0] != 0 or np.any(np.diff(positions) < 0) or np.any(np.diff(positions) > 1) \
            or positions[-1] != n_episodes - 1:
        return ("the command table's episode column must run 0, 0, ..., 1, ... up to n_episodes - 1 "
                "(each episode's commands together, in order, every episode at least one)")
    episodes: list[list[Command | MalformedCommand]] = [[] for _ in range(n_episodes)]
    tails = {name: s.shape(array)[1:] for name, array in ARRAYS.items()}
    for record in table.tolist():
        c = BatchCommandFields._make(record)
        episodes[c.episode].append(_pooled_command(s, c, pool, tails))
    return episodes, bool(head["keep_logs"])


def _pooled_command(s: Sizes, c: BatchCommandFields, pool: np.ndarray,
                    tails: dict[str, tuple[int, ...]]) -> Command | MalformedCommand:
    """The command of a command-table row whose arrays start at c.values in ``pool``; ``tails``:
    each array's shape after its first axis, as the block's arrays have it."""
    kind, n, n_context = c.kind, c.n_samples, c.n_context
    context = n_context if 0 <= n_context <= s.max_context else 0  # else refused by command_from
    sizes: dict[str, int] = {}
    if kind == Kind.START:
        sizes = {"posture": s.n_dofs * c.has_posture, "context": context}
    elif kind == Kind.TRAJECTORY and 1 <= n <= s.max_samples:
        sizes = {"q": n * s.n_dofs, "qd": n * s.n_dofs * c.has_qd, "qdd": n * s.n_dofs * c.has_qdd}
    elif kind == Kind.GAINS:
        sizes = {"context": context, "kp": s.n_dofs, "kd": s.n_dofs, "ki": s.n_dofs * c.has_ki}
    at, arrays = c.values, {}
    for name, tail in tails.items():
        if name not in sizes:
            continue  # the command has no such array (and command_from reads none)
        size = sizes[name]
        if at + size > pool.size:
            return MalformedCommand(c.episode_id, c.index, c.max_commands,
                                    reason=f"the command's arrays run past the batch's n_values {pool.size}")
        arrays[name] = pool[at : at + size].reshape((-1, *tail))  # rows of the block's array
        at += size
    return command_from(s, c, arrays)


def encode_results(blocks: Blocks, results: Sequence[EpisodeResult], batch_number: int, first_episode: int) -> None:
    """Write each episode's result, its replies and the task states after them."""
    out, replies, states = (blocks.batch_tables[k] for k in ("results", "replies", "states"))
    row = 0
    for i, r in enumerate(results):
        n = len(r.rewards)
        out[i] = _RESULT_ORDER(dict(episode_return=r.episode_return, flag=int(r.flag), success=int(r.success),
                                    n_steps=r.n_steps, n_replies=n, first_reply=row,
                                    message=r.message.encode()[:MESSAGE_BYTES]))
        replies["reward"][row : row + n] = r.rewards
        replies["flag"][row : row + n] = [int(f) for f in r.flags]
        replies["n_steps"][row : row + n] = r.command_steps
        states[row : row + n] = r.task_states
        row += n
    blocks.batch["batch_number"], blocks.batch["first_episode"] = batch_number, first_episode


def decode_results(blocks: Blocks, n_episodes: int) -> list[EpisodeResult]:
    """The results of the batch's ``n_episodes`` episodes (the inverse of encode_results), each
    table read column by column (a row's fields one by one cost a numpy scalar each)."""
    names = blocks.layout.sizes.state_names
    results = blocks.batch_tables["results"][:n_episodes]
    r = {name: results[name].tolist() for name in BATCH_RESULT.names or ()}
    replies = blocks.batch_tables["replies"][:max(map(sum, zip(r["first_reply"], r["n_replies"])), default=0)]
    rewards, steps = replies["reward"], replies["n_steps"]
    flags = [flag_of(f) for f in replies["flag"].tolist()]
    states = blocks.batch_tables["states"]
    out = []
    for i in range(n_episodes):
        first = r["first_reply"][i]
        rows = slice(first, first + r["n_replies"][i])
        out.append(EpisodeResult(
            episode_return=r["episode_return"][i], rewards=rewards[rows].copy(), flags=tuple(flags[rows]),
            task_states=states[rows].copy(), command_steps=steps[rows].astype(int), flag=flag_of(r["flag"][i]),
            message=r["message"][i].rstrip(b"\0").decode(errors="replace"), success=bool(r["success"][i]),
            n_steps=r["n_steps"][i], state_names=names))
    return out
