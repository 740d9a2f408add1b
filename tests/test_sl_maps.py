"""Tasks' SL maps (episodic.task.sl): SL's zero-padded start values and controller parameters
become the task's own context and gain set, what a task does not model is refused by name, every
declared map names the task's own columns and parameters and builds a context the task takes; a
runner that takes SL's layout (episodic.bridge.sl.SLRunner) starts the ball where SL's context
puts it and runs SL's controller command for the task's own duration; the maps' state rows are
those SLGetEpisodeMex fills by name."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.bridge.sl import SLRunner
from episodic.interface.commands import GainsCommand, MalformedCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Feedforward, Flag
from episodic.task.sl import SL_VALUES, SLMap, sl_command, sl_context, sl_states
from episodic.tasks import TASKS, make_task, task_class
from episodic.tasks.ball_on_beam import BallOnBeam

# SLGetEpisodeMex (clients/matlab/sl_mex.c) fills SL's state rows by these names of the task's state
# columns, as it cannot read the runner's map: every declared map must say the same
MEX_ROWS = (("ball_x",), ("ball_y",), ("ball_z",), ("ball_vx", "ball_xd"), ("ball_vy",), ("ball_vz",),
            ("cup_x", "target_x"), ("cup_y", "target_y"), ("cup_z", "target_z"))


def padded(*values: float) -> np.ndarray:
    return np.concatenate([values, np.zeros(SL_VALUES - len(values))])


def test_sl_context_takes_slots_and_parameters_and_refuses_what_the_task_does_not_model():
    cup = SLMap(("cup x m", "cup y m", "action cost weight", "bounce noise"), ("release_time", 0, 1))
    np.testing.assert_array_equal(sl_context(cup, padded(1.5, 0.1), {"release_time": 1.7}), [1.7, 1.5, 0.1])
    with pytest.raises(ValueError, match=r"SL start value 4 is 0.2 \(SL's 'bounce noise'\); this task does not "
                                         r"model it: send 0"):
        sl_context(cup, padded(1.5, 0.1, 0, 0.2), {"release_time": 1.7})
    with pytest.raises(ValueError, match="SL start value 7 is 1 .beyond SL's layout of this task"):
        sl_context(cup, padded(1.5, 0.1, 0, 0, 0, 0, 1), {"release_time": 1.7})
    with pytest.raises(ValueError, match="at most 10 slots"):
        SLMap(("x",) * 11)
    with pytest.raises(ValueError, match="positions must lie in 0..1"):
        SLMap(("x", "y"), (2,))


def test_sl_command_turns_sl_layout_into_the_task_s_own_commands():
    task, robot = BallOnBeam(), load_robot("wam")
    start = sl_command(task, robot, StartCommand(5, 1, context=padded(0.1, -0.2)))
    assert isinstance(start, StartCommand) and list(start.context) == [0.1, -0.2]
    gains = sl_command(task, robot, GainsCommand(5, 1, 1, np.zeros(7), np.zeros(7), task_gains=padded(3, 1)))
    assert isinstance(gains, GainsCommand)
    np.testing.assert_array_equal(gains.kp, robot.kp)  # the robot's own joint gains
    np.testing.assert_array_equal(gains.kd, robot.kd)
    assert gains.feedforward == Feedforward.parse(robot.feedforward)
    assert list(gains.task_gains) == [3, 1] and gains.wait_time == task.horizon == 10.0
    refused = sl_command(task, robot, GainsCommand(5, 1, 1, np.zeros(7), np.zeros(7), task_gains=padded(3, 1, 2)))
    assert isinstance(refused, MalformedCommand) and "beyond the first 2 are not 0" in refused.reason
    no_map = sl_command(make_task("reach"), robot,
                        GainsCommand(5, 1, 1, np.zeros(7), np.zeros(7), task_gains=padded(3, 1)))
    assert isinstance(no_map, MalformedCommand) and "no controller of its own for SL to run" in no_map.reason
    # anything else passes unchanged: the task's own contexts and gains, trajectories
    own = [StartCommand(5, 1, context=np.array([0.1, 0.0])),
           GainsCommand(5, 1, 1, robot.kp, robot.kd, task_gains=np.array([3.0, 1.0])),
           TrajectoryCommand(5, 1, 1, np.zeros((3, 7)))]
    assert all(sl_command(task, robot, c) is c for c in own)


@pytest.mark.parametrize("name", sorted(n for n in TASKS if getattr(task_class(n), "sl", None) is not None))
def test_declared_sl_maps_fit_their_task(name):
    sl = task_class(name).sl
    task = make_task(name)
    rows = sl_states(sl, tuple(task.columns))  # every name a state column of the task
    assert len(rows) == 9
    assert list(sl.states) == [next((n for n in names if n in task.columns), None) for names in MEX_ROWS]
    params = task.params()
    assert all(c in params for c in sl.context if isinstance(c, str))
    assert isinstance(sl.duration, (int, float, type(None))) or sl.duration in params
    assert len(sl_context(sl, np.zeros(SL_VALUES), params)) in task.context_sizes


@pytest.mark.slow  # a go-to-start and 10 s of ball on beam
def test_a_runner_taking_sl_layout_starts_the_ball_where_sl_puts_it_and_runs_sl_s_controller():
    with SLRunner(BallOnBeam(), "wam") as runner:
        start = runner.send(StartCommand(1, 1, context=padded(0.05, 0.0)))
        assert start.flag == Flag.OK
        assert start.state[0] == pytest.approx(0.05, abs=1e-3)  # ball_x, m: where SL's context puts it
        done = runner.send(GainsCommand(1, 1, 1, np.zeros(7), np.zeros(7), task_gains=padded(0.5, 0.3)))
        # SL's controller command: the task's feedback law on the robot's own joint gains for the task's
        # horizon, 10 s at 500 Hz (soft gains: the robot's j7 servo is softer than the reference's)
        assert done.flag == Flag.OK and done.n_steps == 5000 and abs(done.state[0]) < 0.01
        refused = runner.send(StartCommand(2, 1, context=padded(0.1, -0.05, 1.0)))
        assert refused.flag == Flag.INVALID_PAYLOAD and "SL start value 3 is 1" in refused.message


@pytest.mark.slow  # three scenes built
@pytest.mark.parametrize("name,values", [("tetherball", (1.0, 0.3, 1.6)), ("casting", (0.6, 0.2)),
                                         ("beer_pong", (1.5, 0.1))])
def test_sl_s_start_values_put_the_cup_or_target_where_sl_means(name, values):
    with SLRunner(make_task(name), "wam") as runner:
        reply = runner.send(StartCommand(1, 1, context=padded(*values)))
        assert reply.flag == Flag.OK, reply.message
        rows = sl_states(task_class(name).sl, runner.state_names)[6:6 + len(values)]  # SL's cup or target rows
        assert [reply.state[r] for r in rows] == list(values)
