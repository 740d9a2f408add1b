"""Validation of learner commands (episodic/interface/commands.py): every rule raises CommandError
with a message naming the problem; valid commands come back with float64 arrays; garbage
in any field never raises anything but CommandError (the runner never crashes on input)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from episodic.interface.commands import (
    CommandError,
    Feedforward,
    GainsCommand,
    Limits,
    ResetCommand,
    StartCommand,
    TrajectoryCommand,
    validate,
)
from episodic.interface.robot import load_robot

ROBOT = load_robot("wam")
N = ROBOT.n_dofs
LIMITS = Limits()



def trajectory(**kw):
    q = np.linspace(ROBOT.home, ROBOT.home + 0.1, 20)
    args = dict(episode_id=3, index=1, max_commands=2, q=q)
    args.update(kw)
    return TrajectoryCommand(**args)


def gains(**kw):
    args = dict(episode_id=3, index=1, max_commands=2, kp=ROBOT.kp, kd=ROBOT.kd)
    args.update(kw)
    return GainsCommand(**args)


def start(**kw):
    args = dict(episode_id=3, max_commands=2)
    args.update(kw)
    return StartCommand(**args)


def rejects(cmd, *words, limits=LIMITS):
    """validate(cmd) raises CommandError whose message contains every word (case-insensitive)."""
    with pytest.raises(CommandError) as info:
        validate(cmd, ROBOT, limits)
    message = str(info.value)
    for word in words:
        assert word.lower() in message.lower(), f"{word!r} not in {message!r}"
    return message


# ------------------------------------------------------------------ trajectory rules


def test_wrong_joint_count():
    rejects(trajectory(q=np.zeros((10, N - 1))), "q", str(N))


def test_one_dimensional_q():
    rejects(trajectory(q=ROBOT.home), "q", "dimension")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("field", ["q", "qd", "qdd"])
def test_non_finite_samples(field, bad):
    base = trajectory()
    arrays = dict(q=base.q.copy(), qd=np.zeros_like(base.q), qdd=np.zeros_like(base.q))
    arrays[field][5, 2] = bad
    word = "nan" if np.isnan(bad) else "inf"
    rejects(trajectory(**arrays), field, word)


def test_derivative_shape_must_match_q():
    rejects(trajectory(qd=np.zeros((19, N))), "qd", "shape")
    rejects(trajectory(qd=np.zeros((20, N)), qdd=np.zeros((20, N - 2))), "qdd", "shape")


def test_qdd_without_qd():
    rejects(trajectory(qdd=np.zeros((20, N))), "qdd", "qd")


def test_too_many_samples():
    limits = Limits(max_segment_steps=100)
    validate(trajectory(q=np.tile(ROBOT.home, (100, 1))), ROBOT, limits)
    rejects(trajectory(q=np.tile(ROBOT.home, (101, 1))), "101", "samples", limits=limits)


def test_no_samples():
    rejects(trajectory(q=np.zeros((0, N))), "0", "samples")


def test_segment_too_long_at_a_slow_rate():
    # 50 samples at 10 Hz last 5 s: 2500 control steps, over a 100-step limit
    limits = Limits(max_segment_steps=100)
    rejects(trajectory(q=np.tile(ROBOT.home, (50, 1)), rate=10.0), "lasts", limits=limits)


@pytest.mark.parametrize("rate", [0.0, -100.0, math.nan, math.inf])
def test_bad_rate(rate):
    rejects(trajectory(rate=rate), "rate")


@pytest.mark.parametrize("wait", [-0.001, -5.0, LIMITS.max_wait_time + 0.001, 1e9, math.nan, math.inf])
@pytest.mark.parametrize("make", [trajectory, gains])
def test_bad_wait_time(make, wait):
    rejects(make(wait_time=wait), "wait_time")


@pytest.mark.parametrize("make", [trajectory, gains])
def test_wait_time_bounds_are_inclusive(make):
    assert validate(make(wait_time=0.0), ROBOT, LIMITS).wait_time == 0.0
    assert validate(make(wait_time=LIMITS.max_wait_time), ROBOT, LIMITS).wait_time == LIMITS.max_wait_time


@pytest.mark.parametrize("make", [trajectory, gains])
def test_segment_index_zero_is_the_start(make):
    rejects(make(index=0), "index")


# ------------------------------------------------------------------ gains rules


@pytest.mark.parametrize("field", ["kp", "kd", "ki"])
def test_negative_gains(field):
    value = np.ones(N)
    value[3] = -1.0
    rejects(gains(**{field: value}), field, "non-negative")


@pytest.mark.parametrize("field", ["kp", "kd", "ki"])
def test_gain_count_and_finiteness(field):
    rejects(gains(**{field: np.ones(N + 1)}), field, "shape")
    rejects(gains(**{field: np.ones((1, N))}), field, "dimension")
    bad = np.ones(N)
    bad[0] = np.nan
    rejects(gains(**{field: bad}), field, "nan")


@pytest.mark.parametrize("name", ["torque", "pd", "gravity", ""])
def test_unknown_feedforward_name(name):
    message = rejects(gains(feedforward=name), "feedforward")
    assert f"'{name}'" in message
    assert "inverse_dynamics" in message  # it lists the valid names


@pytest.mark.parametrize("value", [4, -1, 99])
def test_unknown_feedforward_number(value):
    rejects(gains(feedforward=value), "feedforward")


@pytest.mark.parametrize("value,mode", [
    ("inverse_dynamics", Feedforward.INVERSE_DYNAMICS),
    ("GRAVITY_COMPENSATION", Feedforward.GRAVITY_COMPENSATION),
    ("None", Feedforward.NONE),
    (2, Feedforward.FEEDFORWARD),
    (np.int32(3), Feedforward.INVERSE_DYNAMICS),
    (Feedforward.NONE, Feedforward.NONE),
])
def test_feedforward_names_and_numbers(value, mode):
    assert validate(gains(feedforward=value), ROBOT, LIMITS).feedforward is mode


# ------------------------------------------------------------------ start rules


def test_posture_outside_the_range():
    posture = ROBOT.home.copy()
    posture[3] = ROBOT.range_upper[3] + 0.01
    rejects(start(posture=posture), "posture", "range")
    posture = ROBOT.home.copy()
    posture[0] = ROBOT.range_lower[0] - 0.01
    rejects(start(posture=posture), "posture", "range")


def test_posture_on_the_range_boundary_is_valid():
    validate(start(posture=ROBOT.range_upper), ROBOT, LIMITS)
    validate(start(posture=ROBOT.range_lower), ROBOT, LIMITS)


def test_posture_shape_and_finiteness():
    rejects(start(posture=ROBOT.home[:-1]), "posture", "shape")
    bad = ROBOT.home.copy()
    bad[1] = np.inf
    rejects(start(posture=bad), "posture", "inf")


def test_context_too_long():
    limits = Limits(max_context=3)
    validate(start(context=np.zeros(3)), ROBOT, limits)
    rejects(start(context=np.zeros(4)), "context", "4", "3", limits=limits)


def test_context_must_be_a_finite_vector():
    rejects(start(context=np.zeros((2, 2))), "context", "dimension")
    rejects(start(context=[0.1, np.nan]), "context", "nan")


def test_start_has_index_zero():
    rejects(start(index=1), "index")


# ------------------------------------------------------------------ header rules


HEADER_GARBAGE = [("episode_id", -1), ("episode_id", 1.5), ("episode_id", "3"), ("episode_id", None),
                  ("index", -1), ("index", 2.0), ("max_commands", -3), ("max_commands", "2")]


@pytest.mark.parametrize("make,field,value", [
    (make, field, value) for make in (start, trajectory, gains, ResetCommand)
    for field, value in HEADER_GARBAGE if not (make is start and field == "index")
])
def test_header_fields_must_be_non_negative_integers(make, field, value):
    kw = {"episode_id": 3, "max_commands": 2}
    if make is not start:
        kw["index"] = 1
    kw[field] = value
    rejects(make(**kw), field)


@pytest.mark.parametrize("make", [start, trajectory, gains])
@pytest.mark.parametrize("value", [0, LIMITS.max_commands + 1])
def test_max_commands_range(make, value):
    rejects(make(max_commands=value), "max_commands", str(LIMITS.max_commands))


def test_max_commands_at_the_limit_is_valid():
    validate(start(max_commands=LIMITS.max_commands), ROBOT, LIMITS)
    validate(start(max_commands=1), ROBOT, LIMITS)


@pytest.mark.parametrize("thing", [object(), {"kind": "trajectory"}, None, "start", 3])
def test_unknown_kind(thing):
    rejects(thing, "kind")


# ------------------------------------------------------------------ valid commands


def assert_float64(arr, expected):
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float64
    np.testing.assert_array_equal(arr, np.asarray(expected, dtype=float))


def test_valid_trajectory_comes_back_as_float64():
    q = np.round(np.linspace(ROBOT.home, ROBOT.home + 0.1, 20), 3).tolist()  # nested lists
    qd = np.zeros((20, N), dtype=np.float32)
    qdd = np.ones((20, N), dtype=np.int64)
    cmd = validate(trajectory(q=q, qd=qd, qdd=qdd, wait_time=1), ROBOT, LIMITS)
    assert isinstance(cmd, TrajectoryCommand)
    assert_float64(cmd.q, q)
    assert_float64(cmd.qd, qd)
    assert_float64(cmd.qdd, qdd)
    assert cmd.rate == ROBOT.control_rate  # default filled in
    assert cmd.wait_time == 1.0 and isinstance(cmd.wait_time, float)
    assert (cmd.episode_id, cmd.index, cmd.max_commands) == (3, 1, 2)


def test_valid_trajectory_keeps_optional_fields_empty_and_its_rate():
    cmd = validate(trajectory(q=np.tile(ROBOT.home, (5, 1)).astype(np.float32), rate=100), ROBOT, LIMITS)
    assert cmd.qd is None and cmd.qdd is None
    assert cmd.rate == 100.0
    assert cmd.q.dtype == np.float64


def test_valid_gains_come_back_as_float64():
    kp = [int(k) for k in ROBOT.kp]
    cmd = validate(gains(kp=kp, kd=ROBOT.kd.astype(np.float32), feedforward="feedforward"), ROBOT, LIMITS)
    assert isinstance(cmd, GainsCommand)
    assert_float64(cmd.kp, kp)
    assert_float64(cmd.kd, ROBOT.kd.astype(np.float32))
    assert_float64(cmd.ki, np.zeros(N))  # None becomes zeros
    assert cmd.feedforward is Feedforward.FEEDFORWARD
    cmd = validate(gains(ki=np.full(N, 2)), ROBOT, LIMITS)
    assert_float64(cmd.ki, np.full(N, 2.0))


def test_zero_gains_are_valid():
    validate(gains(kp=np.zeros(N), kd=np.zeros(N), ki=np.zeros(N)), ROBOT, LIMITS)


def test_valid_start_comes_back_as_float64():
    cmd = validate(start(posture=ROBOT.home.tolist(), context=[1, 2, 3]), ROBOT, LIMITS)
    assert isinstance(cmd, StartCommand) and cmd.index == 0
    assert_float64(cmd.posture, ROBOT.home)
    assert_float64(cmd.context, [1, 2, 3])
    cmd = validate(start(episode_id=np.int64(7)), ROBOT, LIMITS)
    assert cmd.posture is None
    assert_float64(cmd.context, np.zeros(0))


def test_reset_is_valid_without_max_commands():
    cmd = ResetCommand(episode_id=5)
    assert validate(cmd, ROBOT, LIMITS) == cmd


# ------------------------------------------------------------------ garbage


class Weird:
    """An object numpy cannot make a number of."""

    def __repr__(self):
        return "Weird()"


def garbage():
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.integers(min_value=2**64),
        st.floats(allow_nan=True, allow_infinity=True), st.complex_numbers(),
        st.text(max_size=5), st.binary(max_size=5), st.just(Weird()),
    )
    arrays = hnp.arrays(
        dtype=st.one_of(hnp.floating_dtypes(), hnp.integer_dtypes(), hnp.boolean_dtypes(),
                        hnp.complex_number_dtypes(), st.just(np.dtype(object))),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=8),
    )
    nested = st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=8), st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3)), max_leaves=20)
    return st.one_of(scalars, arrays, nested, st.lists(st.lists(st.floats(), max_size=8), max_size=4))


def good_values():
    q = np.linspace(ROBOT.home, ROBOT.home + 0.1, 20)
    return {
        "episode_id": 3, "index": 1, "max_commands": 2, "q": q, "qd": np.zeros_like(q),
        "qdd": np.zeros_like(q), "rate": 250.0, "wait_time": 0.5, "kp": ROBOT.kp, "kd": ROBOT.kd,
        "ki": np.zeros(N), "feedforward": "feedforward", "posture": ROBOT.home, "context": np.zeros(3),
    }


FIELDS = {
    StartCommand: ("episode_id", "max_commands", "posture", "context", "index"),
    TrajectoryCommand: ("episode_id", "index", "max_commands", "q", "qd", "qdd", "rate", "wait_time"),
    GainsCommand: ("episode_id", "index", "max_commands", "kp", "kd", "ki", "feedforward", "wait_time"),
    ResetCommand: ("episode_id", "index", "max_commands"),
}


@st.composite
def garbled_commands(draw):
    cls = draw(st.sampled_from(sorted(FIELDS, key=lambda c: c.__name__)))
    good = good_values()
    if cls is StartCommand:
        good["index"] = 0
    kw = {}
    for name in FIELDS[cls]:
        kw[name] = draw(garbage()) if draw(st.booleans()) else good[name]
    return cls(**kw)


def only_command_error(cmd):
    try:
        out = validate(cmd, ROBOT, LIMITS)
    except CommandError as exc:
        assert str(exc), "a CommandError must say what is wrong"
        return None
    # what comes back is clean
    for name in ("q", "qd", "qdd", "kp", "kd", "ki", "posture", "context"):
        value = getattr(out, name, None)
        if value is not None:
            assert isinstance(value, np.ndarray) and value.dtype == np.float64
            assert np.all(np.isfinite(value))
    return out


@pytest.mark.slow
@settings(max_examples=200, deadline=None, derandomize=True, report_multiple_bugs=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(garbled_commands())
def test_garbage_in_any_field_raises_only_command_error(cmd):
    only_command_error(cmd)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(arr=garbage(), field=st.sampled_from(["q", "qd", "qdd", "kp", "kd", "ki", "posture", "context"]))
def test_garbage_arrays_raise_only_command_error(arr, field):
    """Array fields alone (this part of validation holds up)."""
    good = good_values()
    if field in ("q", "qd", "qdd"):
        cmd = trajectory(**{k: good[k] for k in ("q", "qd", "qdd")} | {field: arr})
    elif field in ("kp", "kd", "ki"):
        cmd = gains(**{field: arr})
    else:
        cmd = start(**{field: arr})
    only_command_error(cmd)


# Specific garbage that escapes today as TypeError/ValueError/OverflowError: one regression
# test each, so the report's list is checked. Array fields already handle these.
SPECIFIC = [
    ("wait_time None", lambda: trajectory(wait_time=None)),
    ("wait_time text", lambda: gains(wait_time="soon")),
    ("wait_time array", lambda: trajectory(wait_time=np.array([1.0, 2.0]))),
    ("wait_time huge int", lambda: trajectory(wait_time=10**400)),
    ("rate text", lambda: trajectory(rate="fast")),
    ("rate list", lambda: trajectory(rate=[500.0])),
    ("rate complex", lambda: trajectory(rate=1j)),
    ("feedforward None", lambda: gains(feedforward=None)),
    ("feedforward list", lambda: gains(feedforward=[2])),
    ("feedforward inf", lambda: gains(feedforward=math.inf)),
]


@pytest.mark.parametrize("make", [m for _, m in SPECIFIC], ids=[i for i, _ in SPECIFIC])
def test_specific_garbage(make):
    with pytest.raises(CommandError):
        validate(make(), ROBOT, LIMITS)


@pytest.mark.parametrize("value", [1.5, 2.7, True])
def test_feedforward_rejects_non_integer_numbers(value):
    with pytest.raises(CommandError):
        validate(gains(feedforward=value), ROBOT, LIMITS)


@pytest.mark.parametrize("field", ["q", "kp", "context"])
def test_complex_values_are_rejected(field):
    value = {"q": np.tile(ROBOT.home, (4, 1)), "kp": ROBOT.kp, "context": np.zeros(3)}[field] + 1j
    make = {"q": trajectory, "kp": gains, "context": start}[field]
    rejects(make(**{field: value}), field, "real")


@pytest.mark.parametrize("value", [["1", "2", "3"], "1.5", [b"1"], np.array([1.0, 2.0], dtype=object)])
def test_text_and_object_arrays_are_rejected(value):
    rejects(start(context=value), "context", "real")


@pytest.mark.parametrize("make", [
    lambda: gains(kp=[10**400] * N), lambda: start(context=[10**400]),
    lambda: trajectory(q=[[None] * N] * 3), lambda: gains(kd=[Weird()] * N),
    lambda: trajectory(q=[[1.0] * N, [1.0] * (N - 1)]),
], ids=["huge int", "huge int context", "None samples", "objects", "ragged"])
def test_array_garbage_is_a_command_error(make):
    with pytest.raises(CommandError):
        validate(make(), ROBOT, LIMITS)
