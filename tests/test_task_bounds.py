"""Task parameters at the edges of their ranges: every length and mass has a physical upper
bound, and a task whose values pass each range but cannot work together is refused when a runner
is built (episodic.runtime.startable), with a message, never by a crash or by every start."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.runtime.runner import Runner
from episodic.task import Param, TaskError
from episodic.task.params import UNIT_CEILING
from episodic.tasks import TASKS, make_task
from tests.helpers import channel_name, each_case, shm_leftovers


def edges(spec: Param) -> list[float | int]:
    """The largest and the smallest value ``spec`` admits (a bound that is excluded: the nearest
    number inside it)."""
    out: list[float | int] = []
    for bound, excluded, inward in ((spec.high, spec.high_open, -np.inf), (spec.low, spec.low_open, np.inf)):
        if bound is None:
            out.append((-1 if inward > 0 else 1) * (10**9 if spec.integer else 1e300))
        elif spec.integer:
            out.append(int(bound) + (0 if not excluded else (1 if inward > 0 else -1)))
        else:
            out.append(float(np.nextafter(bound, inward)) if excluded else float(bound))
    return out


def test_every_length_and_mass_has_an_upper_bound():
    with each_case() as case:
        for task, cls in TASKS.items():
            for key, spec in cls.declared().items():
                if isinstance(spec, Param) and spec.unit in UNIT_CEILING:
                    with case(f"{task}.{key}"):
                        assert spec.high is not None and spec.high <= UNIT_CEILING[spec.unit]


@pytest.mark.slow  # ~240 scenes built
def test_every_task_at_every_edge_builds_a_runner_or_is_refused_saying_why():
    """Each parameter at each end of its range (the others at their defaults): the task builds a
    runner, or TaskError names the parameters that do not go together (the task's own checks)
    or, for a scene MuJoCo refuses or the task cannot start, the task, the value and where to
    look; nothing else is raised."""
    names = {key for cls in TASKS.values() for key in cls.declared()}
    with each_case() as case:
        for task, cls in TASKS.items():
            for key, spec in cls.declared().items():
                if not isinstance(spec, Param):
                    continue
                for value in edges(spec):
                    with case(f"{task}.{key}={value!r}"):
                        try:
                            built = make_task(task, {key: value})
                        except TaskError as e:  # values that do not go together (Task.check_params)
                            assert any(name in str(e) for name in names), str(e)
                            continue
                        try:
                            Runner(built).close()
                        except TaskError as e:
                            message = str(e)
                            if "`episodic tasks`" in message:  # refused by the built scene
                                assert f"task '{task}' with {key}=" in message \
                                    or f"task '{task}' cannot be built with {key}=" in message, message
                            else:  # refused by the task's check of the robot (Task.check_robot)
                                assert any(name in message for name in names), message


@pytest.mark.parametrize("task, params, words", [
    ("beer_pong", {"table_x": -3.0}, "stands off the table"),          # the issue's example
    ("casting", {"cup_radius": 3.0}, "stands on the robot's pedestal"),
    ("tetherball", {"anchor_z": 0.0}, "touches"),
    ("ball_in_cup", {"ball_radius": 1e-9}, "mass and inertia"),         # MuJoCo's compiler refuses it
])
def test_a_scene_that_cannot_work_is_refused_when_the_runner_is_built(task, params, words):
    with pytest.raises(TaskError, match=words) as caught:
        Runner(make_task(task, params))
    assert "`episodic tasks`" in str(caught.value)


def test_the_issues_values_are_out_of_range_now():
    with pytest.raises(TaskError, match=r"parameter 'cup_radius' of task 'casting' must be in \(0, 3\] m, got 1e\+300"):
        make_task("casting", {"cup_radius": 1e300})
    with pytest.raises(TaskError, match=r"must be in \(0, 5\] kg"):
        make_task("ball_in_cup", {"ball_mass": 1e300})


def test_the_heaviest_objects_allowed_leave_a_runner_that_serves_on():
    """Every mass at its ceiling: the first start and a held posture end with a flag (the robot
    may not carry it: a safety abort), and a second episode runs."""
    for task, cls in TASKS.items():
        masses = {k: UNIT_CEILING["kg"] for k, spec in cls.declared().items()
                  if isinstance(spec, Param) and spec.unit == "kg"}
        if not masses:
            continue
        with Runner(make_task(task, masses)) as runner:
            for episode in (1, 2):
                start = runner.send(StartCommand(episode, 2))
                held = runner.send(TrajectoryCommand(episode, 1, 2, runner.sim.q[None, :], wait_time=0.1))
                assert start.flag in (Flag.OK, Flag.SAFETY_ABORT) and held.flag in (Flag.OK, Flag.SAFETY_ABORT), \
                    (task, start, held)


@pytest.mark.slow  # an `episodic serve` process
def test_episodic_serve_refuses_it_before_serving(tmp_path):
    before = shm_leftovers()
    result = subprocess.run([sys.executable, "-m", "episodic", "serve", "--task", "beer_pong", "--param", "table_x=-3",
                             "--channel", channel_name()], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Error: task 'beer_pong' with table_x=-3.0 cannot start an episode: the cup" in result.stderr
    assert "Traceback" not in result.stderr and "serving" not in result.stdout
    assert shm_leftovers() == before
