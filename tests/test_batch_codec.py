"""The batch block's wire form in memory (episodic.bridge.batches): every kind of command goes
through encode_batch and decode_batch unchanged, in its episode and order, and a row holds
nothing of the batch written before it."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.bridge.batches import decode_batch, encode_batch
from episodic.bridge.blocks import Blocks
from episodic.bridge.layout import Layout, Sizes
from episodic.interface.columns import step_widths
from episodic.interface.commands import ResetCommand, StartCommand, TrajectoryCommand
from tests.test_codec import COMMANDS, MAX_CONTEXT, MAX_SAMPLES, N, same


@pytest.fixture
def blocks() -> Blocks:
    layout = Layout(Sizes(N, MAX_SAMPLES, 10, MAX_CONTEXT, ("a", "b"), step_widths(N, 2), 500.0, max_batch=8,
                          max_batch_commands=64, max_batch_values=1 << 14))
    return Blocks(bytearray(layout.total_size), layout)


def test_every_kind_of_command_comes_back_in_its_episode(blocks):
    episodes = [COMMANDS[:3], COMMANDS[3:7], [COMMANDS[-1]], COMMANDS[7:-1]]
    for keep_logs in (True, False):
        encode_batch(blocks, episodes, keep_logs)
        decoded = decode_batch(blocks)
        assert not isinstance(decoded, str), decoded
        got, kept = decoded
        assert kept is keep_logs and [len(e) for e in got] == [len(e) for e in episodes]
        for sent, came in zip(episodes, got, strict=True):
            for a, b in zip(sent, came, strict=True):
                same(a, b)
        table = blocks.batch_tables["commands"][: sum(map(len, episodes))]
        assert table["episode"].tolist() == [k for k, e in enumerate(episodes) for _ in e]
        assert np.all(np.diff(table["values"]) >= 0) and table["values"][0] == 0


def test_a_row_keeps_nothing_of_the_batch_before():
    """A reset written over a trajectory's row: the fields a reset does not set read 0."""
    layout = Layout(Sizes(N, MAX_SAMPLES, 10, MAX_CONTEXT, ("a",), step_widths(N, 1), 500.0, max_batch=4,
                          max_batch_commands=8, max_batch_values=1 << 12))
    blocks = Blocks(bytearray(layout.total_size), layout)
    q = np.ones((4, N))
    encode_batch(blocks, [[StartCommand(1, 1, posture=q[0], context=np.ones(3)),
                           TrajectoryCommand(1, 1, 1, q, qd=q, wait_time=0.5)]], False)
    encode_batch(blocks, [[ResetCommand(9), ResetCommand(9)]], False)
    rows = blocks.batch_tables["commands"][:2]
    for name in ("has_posture", "n_context", "n_samples", "has_qd", "wait_time", "values"):
        assert rows[name].tolist() == [0, 0], name
    got, _ = decode_batch(blocks)
    for came in got[0]:
        same(came, ResetCommand(9))
