"""Task parameters: every parameter of every task declares a unit and a valid range, and a task
refuses (with a message naming the task, the parameter, its unit, its range and the value) a
non-finite value or one outside that range, whether built by name, by `episodic serve --param`
or directly."""
from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.task import Param, Task, TaskError, format_number, param
from episodic.tasks import TASKS, make_task
from tests.helpers import channel_name, each_case, shm_leftovers

PARAMS = [(task, key) for task, cls in TASKS.items() for key in cls.declared()]
ISSUE_EXAMPLES = [  # the values the issue reports accepted, and what is said now
    ("target_z", "nan", "parameter 'target_z' of task 'reach' must be in [0, 3] m, got nan"),
    ("tolerance", "-1", "parameter 'tolerance' of task 'reach' must be in (0, 3] m, got -1"),
    ("tolerance", "0", "parameter 'tolerance' of task 'reach' must be in (0, 3] m, got 0"),
    ("effort", "-1", "parameter 'effort' of task 'reach' must be >= 0 m/(N m)^2, got -1"),
]


def spec(task: str, key: str) -> Param:
    return TASKS[task].declared()[key]


def refused(task: str, key: str, value) -> str:
    """The message with which ``task`` refuses ``key`` = ``value`` (a number or its text), built by
    name and directly; it names the task, the parameter, its unit and its range."""
    with pytest.raises(TaskError) as by_name:
        make_task(task, {key: value})
    with pytest.raises(TaskError) as direct:
        TASKS[task](**{key: value})
    message = str(by_name.value)
    assert message == str(direct.value)
    declared = spec(task, key)
    assert f"parameter '{key}' of task '{task}' must be" in message
    assert declared.bounds() in message and declared.unit in message
    return message


# One test per task and check, each looping over the task's parameters (and values, and bounds):
# a failing case is named in the test's message and does not hide the others (tests.helpers.each_case).

@pytest.mark.parametrize("task", TASKS)
def test_every_parameter_declares_a_unit_a_range_and_an_admitted_default(task):
    with each_case() as case:
        for key, declared in TASKS[task].declared().items():
            with case(f"{task}.{key}"):
                assert isinstance(declared.unit, str)
                assert declared.admits(declared.default) and getattr(TASKS[task](), key) == declared.default
                assert declared.unit or declared.meaning, "a pure number says what it is"


@pytest.mark.parametrize("task", TASKS)
def test_non_finite_values_are_refused(task):
    with each_case() as case:
        for key in TASKS[task].declared():
            for value in (math.nan, math.inf, -math.inf):
                with case(f"{task}.{key} = {value}"):
                    assert refused(task, key, value).endswith(f"got {format_number(value)}")
                    assert refused(task, key, str(value)).endswith(f"got {format_number(value)}")


@pytest.mark.parametrize("task", TASKS)
def test_values_just_outside_a_bound_are_refused_and_the_bound_as_declared(task):
    with each_case() as case:
        for key, declared in TASKS[task].declared().items():
            bounds = [(declared.low, declared.low_open, -math.inf), (declared.high, declared.high_open, math.inf)]
            for bound, open_, outwards in bounds:
                if bound is None:
                    continue
                with case(f"{task}.{key} at its bound {bound}"):
                    outside = np.nextafter(bound, outwards)
                    assert refused(task, key, outside).endswith(f"got {format_number(outside)}")
                    if open_:
                        refused(task, key, bound)
                    else:  # admitted by its range; a check of values that go together may still refuse it
                        try:
                            assert getattr(make_task(task, {key: str(bound)}), key) == bound
                            assert getattr(TASKS[task](**{key: bound}), key) == bound
                        except TaskError as e:
                            assert declared.requirement() not in str(e), str(e)


@pytest.mark.parametrize("key, value, message", ISSUE_EXAMPLES)
def test_the_issues_examples_are_refused_by_make_task(key, value, message):
    with pytest.raises(TaskError) as caught:
        make_task("reach", {key: value})
    assert str(caught.value) == message


@pytest.mark.slow  # an `episodic serve` process each
@pytest.mark.parametrize("key, value, message", ISSUE_EXAMPLES)
def test_the_issues_examples_are_refused_by_episodic_serve(tmp_path, key, value, message):
    before = shm_leftovers()
    result = subprocess.run([sys.executable, "-m", "episodic", "serve", "--task", "reach", "--param", f"{key}={value}",
                             "--channel", channel_name()], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"Error: {message}" in result.stderr
    assert "Traceback" not in result.stderr and "serving" not in result.stdout
    assert shm_leftovers() == before


def test_values_are_numbers_stored_as_the_parameters_type():
    task = make_task("reach", {"tolerance": "0.05", "target_x": np.float32(0.5), "effort": 0})
    assert task.params()["tolerance"] == 0.05 and type(task.tolerance) is float
    assert task.target_x == 0.5 and type(task.effort) is float
    with pytest.raises(TaskError,
                       match=r"parameter 'tolerance' of task 'reach' must be a number \(in \(0, 3\] m\), got 'far'"):
        make_task("reach", {"tolerance": "far"})
    with pytest.raises(TaskError, match="has no parameter 'tolerence'; known: effort, tolerance, target_x"):
        make_task("reach", {"tolerence": "0.1"})


def test_checks_that_involve_several_parameters_remain():
    with pytest.raises(TaskError, match="cup_radius.*larger than ball_radius"):
        make_task("ball_in_cup", {"ball_radius": "0.05"})
    with pytest.raises(TaskError, match="ball_radius 0.2 m is too large"):
        make_task("ball_on_beam", {"ball_radius": "0.2", "x0": "0"})
    with pytest.raises(TaskError, match="x0 must lie on the beam"):
        make_task("ball_on_beam", {"x0": "0.4"})


@dataclass
class Juggling(Task):
    """A task of this module's own: a parameter that counts."""

    name: ClassVar[str] = "juggling"
    balls: int = param(3, "", "how many balls are in the air", ge=1)


def test_integer_parameters_take_whole_numbers_only():
    assert Juggling.with_params({"balls": "5"}).balls == 5
    assert type(Juggling.with_params({"balls": "4.0"}).balls) is int
    assert Juggling(balls=2.0).params() == {"balls": 2}
    for value in ("2.5", 2.5, "nan"):
        with pytest.raises(TaskError, match=r"parameter 'balls' of task 'juggling' must be a whole number >= 1, got"):
            Juggling.with_params({"balls": value})
    with pytest.raises(TaskError, match="a whole number >= 1, got 0"):
        Juggling(balls=0)


def test_a_parameter_must_be_declared_with_a_range_its_default_is_in():
    @dataclass
    class Undeclared(Task):
        name: ClassVar[str] = "undeclared"
        speed: float = 1.0

    with pytest.raises(TypeError, match="parameter 'speed' of task 'undeclared' has no declared unit and range"):
        Undeclared()
    with pytest.raises(TypeError, match=r"outside the declared range \(0, 3\]"):
        param(0.0, "m", gt=0)
    with pytest.raises(TypeError, match="at most one lower bound"):
        param(1.0, "m", gt=0, ge=0)


def test_episodic_tasks_lists_each_parameter_with_its_unit_and_range():
    result = CliRunner().invoke(main, ["tasks"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "        tolerance=0.02 m (0, 3]: " in out
    assert "        target_z=1.55 m [0, 3]: " in out
    assert "        restitution=0.75 [0, 1): " in out
    assert "        pole_length=0.5 m (0, 1.2]: " in out
    for task, key in PARAMS:
        assert f"        {spec(task, key).describe(key)}" in out
