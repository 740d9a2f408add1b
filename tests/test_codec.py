"""The wire codec: every command and reply survives encode -> decode unchanged (in-process, on
a buffer laid out like a channel), encoding refuses what does not fit, and a learner written
against the in-process Runner runs unchanged against a Client."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from episodic.bridge import Client
from episodic.bridge.blocks import Blocks
from episodic.bridge.codec import (
    ReplyBlock,
    decode_command,
    decode_reply,
    encode_command,
    encode_reply,
    read_command_fields,
)
from episodic.bridge.layout import (
    BLOCKS,
    COMMAND,
    COMMAND_ARRAYS,
    MAGIC,
    VERSION,
    Layout,
    Sizes,
    block_dtype,
    field_at,
    wire_dtype,
    write_header,
)
from episodic.interface.columns import step_widths
from episodic.interface.commands import (
    Feedforward,
    GainsCommand,
    Kind,
    MalformedCommand,
    ResetCommand,
    StartCommand,
    TrajectoryCommand,
)
from episodic.interface.vocabulary import Flag, MachineState, Reply
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import Served, assert_same_steps, channel_name, wave

N, MAX_SAMPLES, MAX_CONTEXT = 7, 50, 8
HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])


@pytest.fixture
def blocks() -> Blocks:
    layout = Layout(Sizes(N, MAX_SAMPLES, 10, MAX_CONTEXT, ("a", "b"), step_widths(N, 2), 500.0))
    buf = bytearray(layout.total_size)
    write_header(buf, layout, 1234)
    return Blocks(buf, layout)


def round_trip(blocks: Blocks, command):
    encode_command(blocks, command, seq=42, client_pid=99)
    fields = read_command_fields(blocks)
    assert (fields.seq, fields.client_pid) == (42, 99)
    return decode_command(blocks, fields)


def same(a, b) -> None:
    """Command objects equal field by field (arrays bit for bit, modes by value)."""
    assert type(a) is type(b)
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if name == "feedforward":
            assert Feedforward.parse(x) == Feedforward.parse(y)
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert np.asarray(x, float).tobytes() == np.asarray(y, float).tobytes(), name
        else:
            assert x == y, name


rng = np.random.default_rng(0)
COMMANDS = [
    StartCommand(7, 3),
    StartCommand(2**40, 1000, posture=HOME, context=np.array([0.5, -0.25, 1.5])),
    TrajectoryCommand(7, 1, 3, rng.normal(size=(MAX_SAMPLES, N))),
    TrajectoryCommand(7, 2, 3, rng.normal(size=(1, N)), qd=np.ones((1, N)), rate=125.5, wait_time=0.25),
    TrajectoryCommand(7, 3, 3, rng.normal(size=(5, N)), qd=rng.normal(size=(5, N)), qdd=rng.normal(size=(5, N))),
    *[GainsCommand(7, 1, 3, rng.random(N), rng.random(N), feedforward=mode) for mode in Feedforward],
    GainsCommand(7, 1, 3, rng.random(N), rng.random(N), ki=rng.random(N), feedforward="inverse_dynamics",
                 wait_time=1.5, task_gains=np.array([1.5, 0.5])),
    ResetCommand(7, max_commands=3),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: type(c).__name__)
def test_commands_round_trip(blocks, command):
    same(round_trip(blocks, command), command)


def test_an_encoded_command_lies_at_the_offsets_of_the_schema(blocks):
    """The bytes as a client in another language reads them: each field at its offset in BLOCKS, each
    array where COMMAND_ARRAYS puts it."""
    command = COMMANDS[4]  # a trajectory of 5 samples with qd and qdd
    encode_command(blocks, command, seq=42, client_pid=99)
    base, dtype = blocks.layout.command_offset, block_dtype(BLOCKS["COMMAND"])
    wire = {f.name: np.frombuffer(blocks.buf, wire_dtype(f.type), 1, base + field_at(dtype, f.name)[0])[0]
            for f in BLOCKS["COMMAND"]}
    assert {name: wire[name] for name in ("magic", "version", "seq", "client_pid", "episode_id", "index",
                                          "max_commands", "kind", "n_samples", "has_qd", "has_qdd", "has_ki")} == {
        "magic": MAGIC, "version": VERSION, "seq": 42, "client_pid": 99, "episode_id": 7, "index": 3,
        "max_commands": 3, "kind": Kind.TRAJECTORY, "n_samples": 5, "has_qd": 1, "has_qdd": 1, "has_ki": 0}
    at = base + COMMAND.itemsize
    for array in COMMAND_ARRAYS:
        if array.name in ("q", "qd", "qdd"):
            sent = getattr(command, array.name)
            assert np.frombuffer(blocks.buf, "<f8", sent.size, at).tobytes() == sent.tobytes(), array.name
        at += 8 * int(np.prod(blocks.layout.sizes.shape(array)))


@pytest.mark.parametrize("command", COMMANDS[1:-1], ids=lambda c: type(c).__name__)
def test_a_decoded_command_owns_arrays_nothing_can_change(blocks, command):
    """A decoded command's arrays are copies over immutable bytes: the next command written into
    the block leaves them alone, and no one can make them writeable (so the runner keeps them
    in the episode's record without a copy of its own)."""
    decoded = round_trip(blocks, command)
    arrays = [v for v in vars(decoded).values() if isinstance(v, np.ndarray) and v.size]
    assert arrays
    before = [a.copy() for a in arrays]
    for values in blocks.command_arrays.values():
        values[:] = 12345.0
    for a, b in zip(arrays, before):
        assert np.array_equal(a, b) and not a.flags.writeable
        with pytest.raises(ValueError):
            a.flags.writeable = True


@settings(max_examples=50, deadline=None)
@given(q=hnp.arrays(float, st.tuples(st.integers(1, MAX_SAMPLES), st.just(N)),
                    elements=st.floats(-1e6, 1e6, allow_nan=False)),
       rate=st.none() | st.floats(1e-3, 1e6), wait=st.floats(0, 60))
def test_any_trajectory_round_trips(q, rate, wait):
    layout = Layout(Sizes(N, MAX_SAMPLES, 10, MAX_CONTEXT, ("a",), step_widths(N, 1), 500.0))
    blocks = Blocks(bytearray(layout.total_size), layout)
    command = TrajectoryCommand(3, 1, 1, q, qd=-q, rate=rate, wait_time=wait)
    same(round_trip(blocks, command), command)


@pytest.mark.parametrize("command, words", [
    (TrajectoryCommand(1, 1, 1, np.zeros((MAX_SAMPLES + 1, N))), "samples"),
    (TrajectoryCommand(1, 1, 1, np.zeros((3, N - 1))), "(n_samples, 7)"),
    (TrajectoryCommand(1, 1, 1, np.zeros((3, N)), qd=np.zeros((4, N))), "q's shape"),
    (GainsCommand(1, 1, 1, np.zeros(N - 1), np.zeros(N)), "kp needs 7"),
    (StartCommand(1, 1, context=np.zeros(MAX_CONTEXT + 1)), "at most 8"),
    (GainsCommand(1, 1, 1, np.zeros(N), np.zeros(N), feedforward="sideways"), "feedforward"),
])
def test_encoding_refuses_what_does_not_fit(blocks, command, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        encode_command(blocks, command, 1, 1)


Q = np.zeros((3, N))
OUT_OF_RANGE = [
    (StartCommand(2**63, 1), "episode_id must be an integer in [0, 2^63), got 9223372036854775808"),
    (ResetCommand(2**70, 1, 1), "episode_id must be an integer"),
    (StartCommand(1, 2**31), "max_commands must be an integer in [0, 2^31)"),
    (StartCommand(1, 1.5), "max_commands must be an integer"),
    (StartCommand(1, None), "max_commands must be an integer"),
    (TrajectoryCommand(1, 2**31, 3, Q), "index must be an integer in [0, 2^31)"),
    (TrajectoryCommand(1, np.int64(2**40), 3, Q), "index must be an integer"),
    (TrajectoryCommand(1, 1, 3, Q, rate="fast"), "rate must be a real number, got 'fast'"),
    (TrajectoryCommand(1, 1, 3, Q, wait_time=None), "wait_time must be a real number, got None"),
    (TrajectoryCommand(1, 1, 3, Q, wait_time=10**400), "wait_time is too large"),
    (TrajectoryCommand(1, 1, 3, "abc"), "q must be real numbers"),
    (TrajectoryCommand(1, 1, 3, None), "q must be real numbers"),
    (StartCommand(1, 1, posture=[None] * N), "posture must be real numbers"),
    (StartCommand(1, 1, context=[1, [2, 3]]), "context must be real numbers"),
    (GainsCommand(1, 1, 1, np.ones(N) * 1j, np.ones(N)), "kp must be real numbers: got complex128"),
]


@pytest.mark.parametrize("command, words", OUT_OF_RANGE, ids=lambda c: getattr(c, "__name__", None))
def test_a_value_the_block_cannot_hold_is_a_value_error_naming_it(blocks, command, words):
    """Not struct.error, numpy's bare messages or a silently dropped imaginary part."""
    before = bytes(blocks.buf[blocks.layout.command_offset : blocks.layout.reply_offset])
    with pytest.raises(ValueError) as caught:
        encode_command(blocks, command, 1, 1)
    assert str(caught.value).startswith(words)
    assert bytes(blocks.buf[blocks.layout.command_offset : blocks.layout.reply_offset]) == before  # nothing written


@pytest.mark.parametrize("thing", [None, 5, "start", {"episode_id": 1}])
def test_what_is_no_command_is_a_type_error_naming_it(blocks, thing):
    with pytest.raises(TypeError, match=f"cannot send {type(thing).__name__}; send a command from"):
        encode_command(blocks, thing, 1, 1)


def test_a_block_that_is_no_command_decodes_as_malformed(blocks):
    encode_command(blocks, COMMANDS[2], 1, 1)
    blocks.command["kind"] = 9
    decoded = decode_command(blocks, read_command_fields(blocks))
    assert isinstance(decoded, MalformedCommand) and "kind 9" in decoded.reason


@pytest.mark.parametrize("reply", [
    Reply(2**41, 3, Flag.SAFETY_ABORT, -1.25e-3, np.array([0.5, np.nan]), 1234, True,
          "joint velocity over its limit ✓", MachineState.RESTART, HOME + 0.125, False, -0.6180339887498949),
    Reply(7, 2, Flag.OK, -0.03125, np.array([0.25, 0.0]), 600, True, "", MachineState.RESTART, HOME, True,
          -1.5e-300),
    Reply(7, 1, Flag.OK, -2.5, np.array([0.25, 1.0]), 600, False, "", MachineState.WAIT_FOR_COMMAND, HOME, False,
          -np.inf),
], ids=["aborted", "solved", "running"])
def test_replies_round_trip(blocks, reply):
    encode_reply(blocks, ReplyBlock(77, 1, reply, 1000, True))
    answer = decode_reply(blocks)
    assert (answer.seq, answer.kind, answer.log_rows, answer.log_truncated) == (77, 1, 1000, True)
    for name in reply.__dataclass_fields__:
        x, y = getattr(reply, name), getattr(answer.reply, name)
        assert x.tobytes() == y.tobytes() if name in ("state", "posture") else x == y, name


def test_a_reply_without_posture_goes_out_as_nan(blocks):
    """The bridge's own could-not-write-the-reply answer has no posture: NaN on the wire."""
    reply = Reply(1, 1, Flag.INTERNAL_ERROR, 0.0, np.full(2, np.nan), 0, True, "could not write")
    encode_reply(blocks, ReplyBlock(78, 3, reply, 0, False))
    posture = decode_reply(blocks).reply.posture
    assert posture.shape == (N,) and np.isnan(posture).all()


def learner(runner) -> list[Reply]:
    """A learner that uses only the calls Runner and Client share."""
    home = HOME
    replies = [runner.send_trajectory(wave(home))]  # before any start: out of order
    replies.append(runner.start_episode(4, context=[0.6, 0.1, 1.5]))
    replies.append(runner.send_gains(0.5 * np.array([200, 300, 100, 100, 10, 10, 2.5]),
                                     0.05 * np.array([200, 300, 100, 100, 10, 10, 2.5]),
                                     feedforward="inverse_dynamics", wait_time=0.05))
    replies.append(runner.send_trajectory(wave(home), rate=250.0))
    replies.append(runner.send_trajectory(wave(home, phase=0.1), wait_time=0.1))
    log = runner.get_episode()
    assert log["q"].shape == (len(log["time"]), runner.n_dofs) and "distance" in log
    replies.append(runner.send_trajectory(wave(home)))
    replies.append(runner.start_episode(2))
    replies.append(runner.reset())
    replies.append(runner.send_trajectory(wave(home)))  # the reset episode's: refused with its flag
    return replies


@pytest.mark.slow
def test_a_learner_runs_unchanged_against_runner_and_client(tmp_path):
    with Runner(make_task("reach"), log=tmp_path / "local.h5", seed=7) as runner:
        local = learner(runner)
    channel = channel_name()
    with Served(channel, tmp_path / "bridge.h5", "--seed", "7"):
        with Client(channel, timeout=10) as client:
            bridged = learner(client)
    assert [r.flag for r in local] == [Flag.OUT_OF_ORDER] + [Flag.OK] * 6 + [Flag.ABORTED_BY_LEARNER] * 2
    assert [r.flag for r in bridged] == [r.flag for r in local]
    assert [r.reward for r in bridged] == [r.reward for r in local]
    assert [r.state.tobytes() for r in bridged] == [r.state.tobytes() for r in local]
    assert [(r.success, r.episode_return) for r in bridged] == [(r.success, r.episode_return) for r in local]
    here, there = read_episodes(tmp_path / "local.h5"), read_episodes(tmp_path / "bridge.h5")
    assert len(here) == len(there) == 2
    assert_same_steps(here[0], there[0])
