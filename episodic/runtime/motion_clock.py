"""The motion clock of the running episode: motion time in control steps, and the joint failures
(``Task.joint_failures``) and task events (``Task.motion_events``) scheduled on it.

Motion time starts at 0 with the first motion run of an episode (the first step of index 1) and
counts the control steps run since, so that a blocking run and its replay fail a joint, or see a
task event, at the same step. A joint failure due within a run splits the run there: the steps
before it drive the joint, the rest leave it passive until the next episode starts. A task event
due within a run splits it the same way, and ``Task.on_motion_event`` is called between the two
parts (before the step at the event's time runs). A run cut short afterwards (``rewind``) puts
the time back, and the events after it come again when their step is reached.
"""
from __future__ import annotations

import numpy as np

from episodic.interface.trajectory import Desired
from episodic.runtime.backend import Backend
from episodic.runtime.control import Feedback, Gains, Stop
from episodic.runtime.scene import Scene
from episodic.runtime.simulation import StepRecord
from episodic.task import Task


def control_steps(seconds: float, control_rate: float) -> int:
    """``seconds`` s as a whole number of control steps at ``control_rate`` Hz (rounded)."""
    return int(round(seconds * control_rate))


class MotionClock:
    """The running episode's motion time and what is scheduled on it, for ``task`` in ``scene``.

    ``steps``: control steps run since the motion started, None before it starts (and after the
    episode ends); ``passive``: (n_dofs,) bool, the joints without actuation now (the scene's
    passive joints and those failed so far).
    """

    def __init__(self, scene: Scene, task: Task) -> None:
        self.scene, self.task = scene, task
        self.passive: np.ndarray = scene.passive.copy()
        self.steps: int | None = None
        self._failures: list[tuple[int, int]] = []  # (motion step at which the joint goes passive, joint)
        self._events: list[tuple[int, str]] = []  # (motion step at which the event comes, name), in order
        self._events_done = 0  # how many of them have come

    @property
    def running(self) -> bool:
        """Whether the motion has started (and the episode not ended since)."""
        return self.steps is not None

    def new_episode(self) -> None:
        """At an episode's start: the scene's passive joints only, no motion time, the task's
        joint failures scheduled and no events yet (``schedule_events`` after the task's reset).
        ValueError when the task names a joint the robot lacks or a negative time."""
        self.passive, self.steps = self.scene.passive.copy(), None
        robot = self.scene.robot
        names, failures = robot.joint_names, []
        for name, seconds in self.task.joint_failures(robot).items():
            if name not in names or not seconds >= 0:
                raise ValueError(f"task '{self.task.name}' fails joint {name!r} at {seconds} s; "
                                 f"a failure names one of {', '.join(names)} and a time >= 0 s")
            failures.append((control_steps(seconds, robot.control_rate), names.index(name)))
        self._failures = sorted(failures)
        self._events, self._events_done = [], 0

    def schedule_events(self) -> None:
        """Schedule the task's events of this episode (asked right after the task's reset, so
        they may depend on its context); an event at an infinite time never comes. ValueError
        for an event without a name or at a negative time."""
        events = []
        for name, seconds in self.task.motion_events().items():
            if not isinstance(name, str) or not seconds >= 0:
                raise ValueError(f"task '{self.task.name}' schedules event {name!r} at {seconds} s; "
                                 f"an event has a name and a time >= 0 s")
            if np.isfinite(seconds):
                events.append((control_steps(seconds, self.scene.robot.control_rate), name))
        self._events = sorted(events)

    def stop(self) -> None:
        """The episode ended: failures still due do not come; failed joints stay passive until
        the next episode starts."""
        self.steps = None

    def _set(self, steps: int) -> None:
        """Set the motion time to ``steps`` control steps, and with it which joints have failed."""
        self.steps = steps
        self.passive = self.scene.passive.copy()
        for step, joint in self._failures:
            self.passive[joint] |= step <= steps

    def _fire_events(self, sim: Backend, now: int) -> None:
        """Let the task's events due at motion time ``now`` come, in order."""
        while self._events_done < len(self._events) and self._events[self._events_done][0] <= now:
            self.task.on_motion_event(self._events[self._events_done][1], sim.model, sim.data)
            self._events_done += 1
            sim.touch()

    def run(self, sim: Backend, desired: Desired, gains: Gains, feedback: Feedback | None = None,
            stop: Stop | None = None) -> StepRecord:
        """Run ``desired`` on ``sim`` under ``gains`` (the joints passive at each step's motion
        time left out) and ``feedback``, advancing the motion time (it starts at 0 with the first
        run of an episode). A joint failure or a task event due within the run splits it there;
        each part is run whole when it can be (the rollout path stays exact). ``stop``: as in
        ``Backend.run``; a part it cuts short ends the run."""
        now = 0 if self.steps is None else self.steps
        self._set(now)
        records, done = [], 0
        while True:
            self._fire_events(sim, now)
            due = [step - now for step, _ in self._failures if step > now]
            due += [step - now for step, _ in self._events[self._events_done :]]
            n = min([len(desired) - done, *due])
            part = Desired(desired.q[done : done + n], desired.qd[done : done + n], desired.qdd[done : done + n])
            record = sim.run(part, gains.with_passive(self.passive), feedback, stop)
            records.append(record)
            done += len(record)
            now += len(record)
            self._set(now)
            if done >= len(desired) or len(record) < n:
                return records[0] if len(records) == 1 else StepRecord.join(records)

    def rewind(self, steps: int) -> None:
        """Put the motion time back by ``steps`` (the end of a run that was cut short after it
        ran): the events due up to the new time came, and the state kept shows them; later ones
        come again when their step is reached, as do joint failures."""
        assert self.steps is not None, "rewind() needs a running motion"
        self._set(self.steps - steps)
        self._events_done = sum(step <= self.steps for step, _ in self._events)
