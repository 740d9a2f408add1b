"""The motion clock (episodic.runtime.motion_clock) on a real MuJoCo simulation: motion time in
control steps, joint failures splitting a run, task events coming once at their step, a rewind
bringing them back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from episodic.interface.commands import Feedforward
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import Desired
from episodic.runtime.control import Gains
from episodic.runtime.motion_clock import MotionClock, control_steps
from episodic.runtime.scene import build_scene
from episodic.runtime.simulation import Simulation, StepRecord
from episodic.task import Task

ROBOT = load_robot("wam")
RATE = ROBOT.control_rate
HAND = 5  # the WAM's j6: at home gravity turns the hand down once it fails


def scheduled(failures: dict | None = None, events: dict | None = None) -> Task:
    """A task with no scene of its own that fails joints and schedules events as told, and
    notes in ``came`` each event as (name, the simulation's time when it came)."""

    @dataclass
    class Scheduled(Task):
        name: ClassVar[str] = "scheduled"
        columns: ClassVar[tuple[str, ...]] = ("hand_z",)
        came: ClassVar[list[tuple[str, float]]] = []

        def joint_failures(self, robot):
            return dict(failures or {})

        def motion_events(self):
            return dict(events or {})

        def on_motion_event(self, name, model, data):
            self.came.append((name, data.time))

        def state(self, steps):
            return steps.ee_pos[:, 2:]

    return Scheduled()


def setup(task: Task) -> tuple[MotionClock, Simulation, Gains]:
    scene = build_scene(ROBOT, task)
    sim = Simulation(scene)
    sim.reset(ROBOT.home)
    clock = MotionClock(scene, task)
    clock.new_episode()
    clock.schedule_events()
    return clock, sim, Gains(ROBOT.kp.copy(), ROBOT.kd.copy(), np.zeros(ROBOT.n_dofs),
                             Feedforward.GRAVITY_COMPENSATION)


def at_rate(seconds: float) -> int:
    return control_steps(seconds, RATE)


def test_control_steps_round_seconds_to_the_nearest_step():
    assert control_steps(0.25, 500.0) == 125
    assert control_steps(0.0031, 500.0) == 2  # 1.55 steps
    assert control_steps(0.0029, 500.0) == 1


def test_motion_time_starts_at_the_first_run_and_counts_the_steps_run():
    clock, sim, gains = setup(scheduled())
    assert not clock.running and clock.steps is None
    clock.run(sim, Desired.hold(ROBOT.home, 40), gains)
    assert clock.running and clock.steps == 40
    record = clock.run(sim, Desired.hold(ROBOT.home, 25), gains)
    assert len(record) == 25 and clock.steps == 65
    clock.stop()
    assert not clock.running


@pytest.mark.parametrize("fail_time", [0.0, 0.1, 0.25])
def test_a_failure_splits_the_run_exactly_where_it_is_due(fail_time):
    """The clock's run equals the two runs made by hand: the steps before the failure under the
    gains, the rest with the joint left out; the failed joint gets no torque from its step on."""
    task = scheduled(failures={ROBOT.joint_names[HAND]: fail_time})
    clock, sim, gains = setup(task)
    by_hand = Simulation(sim.scene)
    by_hand.set_state(sim.get_state())
    n, fail = 250, at_rate(fail_time)
    hold = Desired.hold(ROBOT.home, n)
    record = clock.run(sim, hold, gains)
    parts = [by_hand.run(Desired.hold(ROBOT.home, fail), gains)] if fail else []
    mask = np.zeros(ROBOT.n_dofs, bool)
    mask[HAND] = True
    parts.append(by_hand.run(Desired.hold(ROBOT.home, n - fail), gains.with_passive(mask)))
    expected = parts[0] if len(parts) == 1 else StepRecord.join(parts)
    np.testing.assert_array_equal(record.state, expected.state)
    np.testing.assert_array_equal(record.sensordata, expected.sensordata)
    u = sim.scene.applied_torque(record.sensordata)[:, HAND]
    assert np.all(u[fail:] == 0.0) and np.all(u[:fail] != 0.0)
    assert clock.passive[HAND]
    clock.stop()  # the failed joint stays passive until the next episode
    assert clock.passive[HAND]
    clock.new_episode()
    assert not clock.passive[HAND]


def test_an_event_comes_once_before_the_step_at_its_time():
    task = scheduled(events={"kick": 0.1, "never": np.inf})
    clock, sim, gains = setup(task)
    start = sim.data.time
    due = at_rate(0.1)
    clock.run(sim, Desired.hold(ROBOT.home, 30), gains)  # before it: nothing
    assert task.came == []
    clock.run(sim, Desired.hold(ROBOT.home, 100), gains)  # across it: once, at its step
    clock.run(sim, Desired.hold(ROBOT.home, 100), gains)
    assert [name for name, _ in task.came] == ["kick"]
    assert round((task.came[0][1] - start) / ROBOT.control_dt) == due


def test_an_event_at_step_zero_comes_before_the_first_step():
    task = scheduled(events={"now": 0.0})
    clock, sim, gains = setup(task)
    start = sim.data.time
    clock.run(sim, Desired.hold(ROBOT.home, 5), gains)
    assert task.came == [("now", start)]


def test_a_rewind_before_an_event_lets_it_come_again():
    task = scheduled(events={"kick": 0.1})
    clock, sim, gains = setup(task)
    clock.run(sim, Desired.hold(ROBOT.home, 100), gains)
    assert len(task.came) == 1
    clock.rewind(60)  # cut back to step 40, before the event's step 50
    assert clock.steps == 40
    clock.run(sim, Desired.hold(ROBOT.home, 5), gains)
    assert len(task.came) == 1
    clock.run(sim, Desired.hold(ROBOT.home, 20), gains)
    assert len(task.came) == 2


def test_a_rewind_after_an_event_keeps_it():
    task = scheduled(events={"kick": 0.1})
    clock, sim, gains = setup(task)
    clock.run(sim, Desired.hold(ROBOT.home, 100), gains)
    clock.rewind(20)  # back to step 80: the event at 50 came, and the state kept shows it
    clock.run(sim, Desired.hold(ROBOT.home, 50), gains)
    assert len(task.came) == 1


def test_a_rewind_past_a_failure_drives_the_joint_again():
    clock, sim, gains = setup(scheduled(failures={ROBOT.joint_names[HAND]: 0.1}))
    clock.run(sim, Desired.hold(ROBOT.home, 100), gains)
    assert clock.passive[HAND]
    clock.rewind(60)
    assert not clock.passive[HAND]


@pytest.mark.parametrize("failures, events, message", [
    ({"elbow": 0.1}, {}, "fails joint 'elbow'"),
    ({ROBOT.joint_names[0]: -1.0}, {}, "a time >= 0 s"),
    ({}, {"kick": -0.5}, "schedules event 'kick' at -0.5 s"),
    ({}, {3: 0.5}, "an event has a name"),
])
def test_a_bad_schedule_says_what_a_task_may_schedule(failures, events, message):
    task = scheduled(failures=failures, events=events)
    clock = MotionClock(build_scene(ROBOT, task), task)
    with pytest.raises(ValueError, match=message):
        clock.new_episode()
        clock.schedule_events()
