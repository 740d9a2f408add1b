"""The episode state machine: RESTART -> GOTO_START -> WAIT_FOR_START -> DO_MOTION ->
WAIT_FOR_COMMAND -> DO_MOTION ... -> RESTART (docs/architecture.md).

``handle`` takes one command and returns its Reply; it never raises on input. Index 0
starts an episode; 1..max_commands are segments in order; after max_commands the episode
ends. An out-of-order index, a stale episode id, an invalid payload or a velocity over
its limit aborts the episode with its own flag. What happens while the learner is
silent is the caller's choice: in blocking mode nothing (time stops); a non-blocking
loop calls ``idle`` once per tick, which holds the robot and logs the steps.

Passive joints (the task's ``passive_joints``) are left out of every gain set; GOTO_START does
not move or wait for them (in blocking simulation the exact start below then puts them at the
posture) and a segment's start is not checked against them. A joint the task
fails (``Task.joint_failures``) joins them at its time after the motion starts (the first step
of index 1; time is counted in control steps run, so a blocking run and its replay fail it at
the same step) until the next start: a run that straddles that step is split there.

Task events (``Task.motion_events``, asked right after the task's reset, so they may depend on
the episode's context: e.g. beer_pong's release of the ball) are scheduled on the same clock and
split runs the same way: when the motion time reaches an event's step, before that step runs,
the machine calls ``Task.on_motion_event``, which may change the simulation's physics state
(what mjSTATE_FULLPHYSICS holds, e.g. an actuator's activation), and runs the rest from there.
Each event comes exactly once per episode: at step 0 before the first step, at a segment
boundary before the next segment's first step (or a held step, ``idle``), never when the episode
ends first. A segment cut short before an event's step (the task's ``segment_end``, a safety
abort) puts the state back to before it, and the event comes again when its step is reached.

Exact start (blocking simulation only, ``exact_start``). GOTO_START ends "close and slow": the
arm within the goto tolerances of the start posture, still moving a little, the solver's
warmstart and the objects wherever the previous episodes left them. So that an episode depends
only on its own commands, the task, the seed and the software versions, never on the episodes
before it, the go-to-start is run and logged as it happened and the simulation is then put in
the exact start state (``Simulation.reset`` to the posture, then the task's ``reset``):

- the whole integration state (mjSTATE_INTEGRATION) as ``mj_resetData`` leaves it: time 0;
  qvel, act, qacc_warmstart, ctrl, qfrc_applied, xfrc_applied, userdata 0; every qpos the
  model's qpos0; mocap poses, equality activations, actuator history, plastic and plugin state
  the model's defaults;
- the robot's joints exactly at the start posture, at rest: the passive ones too (the start
  posture's value, e.g. pole_balancing's hanging j7), which the go-to-start cannot drive;
- the model's actuator gains those of the robot's default gains (what the go-to-start ran
  with; a later run sets its own), the controller's integral term 0, no task feedback law;
- then the task's ``reset``: a fresh ``Episode`` and ``initialize_episode`` from the context and
  the episode's random generator, which places the task's objects (and passive joints: the
  pole's angle and velocity) on top of that state. (That generator is seeded with the run's
  seed and the episode's number in the run, so what a task draws from it depends on the
  episode's place in the run, and a replay, which runs each episode at its place, repeats it:
  ball_on_beam, pole_balancing and ball_bouncing draw the key of their sensing noise there.)

The state the go-to-start really reached is kept in ``settled_state`` (mjSTATE_INTEGRATION).
The log's ``time`` column counts from the exact start: the GOTO_START steps, which ran at the
time the previous episode left, are logged at that time minus the time the move ended (so
negative, ending at -control_dt), and the motion starts at 0. In realtime mode and on a driven
robot nothing is restored: the episode starts where the go-to-start left the robot.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import time
from typing import Callable

import mujoco
import numpy as np
from numpy.random import default_rng  # numpy imports it when first used: ~9 ms, a missed tick at the first start

from episodic.runtime.backend import Backend
from episodic.interface.columns import STEP_DTYPES
from episodic.interface.commands import (CommandError, Feedforward, GainsCommand, Limits, ResetCommand,
                               StartCommand, validate)
from episodic.runtime.control import Feedback, Gains, over_velocity_limit_after, velocity_over_limit
from episodic.runtime.episodes import EpisodeBuffer
from episodic.interface.vocabulary import Flag, MachineState, Reply
from episodic.runtime.scene import ROLLOUT_SPEC, Scene
from episodic.runtime.simulation import Simulation, SimulationUnstable, StepRecord
from episodic.interface.trajectory import Desired, min_jerk, min_jerk_duration, resample
from episodic.task import StepView, Task, TaskError

SETTLE_CHUNK = 0.05  # s of holding between "close and slow" checks in GOTO_START
SEGMENT_END_WINDOW = 2.0  # s of recent steps a paced segment shows the task's segment_end each tick
HELD_BLOCK = 0.2  # s of held steps logged as one block (so the tick a command arrives logs at most this)
INTERRUPTED_MESSAGE = "the runner stopped during the episode"
_log = logging.getLogger("episodic.runtime.machine")


class EpisodeMachine:
    """Runs episodes of ``task`` on ``sim``; hands each finished episode to ``on_episode``."""

    def __init__(self, scene: Scene, sim: Backend, task: Task, seed: int = 0,
                 limits: Limits = Limits(), on_episode: Callable[[EpisodeBuffer], None] | None = None,
                 on_reject: Callable[[object, Flag], None] | None = None):
        self.scene, self.sim, self.task, self.seed, self.limits = scene, sim, task, seed, limits
        self.robot = scene.robot
        self.on_episode = on_episode or (lambda ep: None)
        self.on_reject = on_reject or (lambda cmd, flag: None)
        self.state = MachineState.RESTART
        self.episode: EpisodeBuffer | None = None
        self._kept = None  # the command last added to an episode's record, as it arrived
        self.last_episode: EpisodeBuffer | None = None  # the running one, else the one that ended last
        self.episodes_started = 0
        self._max_commands = 0
        self._next_index = 0
        self._passive = scene.passive.copy()  # the joints without actuation now
        self._schedule: list[tuple[int, int]] = []  # the episode's joint failures: (motion step, joint)
        self._events: list[tuple[int, str]] = []  # the episode's task events: (motion step, name), in order
        self._events_done = 0  # how many of them have come
        self._motion_steps: int | None = None  # control steps since the motion started; None before
        self._gains = self.default_gains()
        self._hold_q = self.robot.home.copy()
        self._feedback: Feedback | None = None  # the task's feedback law, once a gains command set it
        self._held: list[StepRecord] = []  # steps held while waiting, not yet logged
        self._started_at = 0.0
        self._steps_in_command = 0  # the "step" column: steps since the current command began
        self._task_state: tuple[int, np.ndarray] = (-1, np.zeros(0))
        # the running episode's control steps toward the task's scored duration, and the steps of
        # the command in hand that have not run (what an early end now would leave out)
        self._scored_steps = 0
        self._pending_steps = 0
        self._task_ready = False  # the running episode's task reset succeeded
        self._aborted: tuple[int | None, Flag, str] = (None, Flag.OK, "")  # (episode id, flag, why) of the last abort
        # the episode last aborted (the one _aborted names) while no reply ended it (a timeout, an
        # interruption while waiting), until the first refusal of one of its commands reports it
        self._unreplied: EpisodeBuffer | None = None
        # set (e.g. from a signal handler) to end paced motion at the next tick with Flag.INTERRUPTED
        self.interrupted = False
        # put the simulation in the exact start state after GOTO_START (module docstring):
        # blocking simulation only; a log replays only under the setting it was recorded with
        self.exact_start = isinstance(sim, Simulation) and sim.pacer is None
        # whether the task has its own segment_end (else a paced segment does not ask it each tick)
        self._ends_segments = type(task).segment_end is not Task.segment_end
        self.settled_state: np.ndarray | None = None  # where the last go-to-start really ended
        sim.reset(self.robot.home)
        self._hold_q = sim.q

    def default_gains(self) -> Gains:
        r = self.robot
        return Gains(r.kp.copy(), r.kd.copy(), r.ki.copy(), Feedforward.parse(r.feedforward))

    @property
    def _gains(self) -> Gains:
        """The gains in force, the joints passive now left out."""
        return self._gain_set.with_passive(self._passive)

    @_gains.setter
    def _gains(self, gains: Gains) -> None:
        self._gain_set = gains

    # -- commands ------------------------------------------------------------
    def handle(self, raw) -> Reply:
        """Process one command (possibly malformed) and return its reply. Never raises: a
        failure while running it (an unstable simulation, a task's or the runner's own bug)
        ends the episode with a flag that says so, and the robot holds."""
        try:
            return self._handle(raw)
        except SimulationUnstable as exc:
            return self._fail(raw, Flag.SAFETY_ABORT, str(exc))
        except Exception as exc:  # noqa: BLE001 - the boundary: nothing may end the runner
            _log.exception("command %r failed inside the runner", type(raw).__name__)
            return self._fail(raw, Flag.INTERNAL_ERROR,
                              f"the runner failed on this command ({type(exc).__name__}: {exc}); "
                              f"the episode is aborted and the robot holds; please report it")

    def _fail(self, raw, flag: Flag, message: str) -> Reply:
        """End the running episode after a failure inside ``handle`` and hold where the robot is."""
        self._hold_q = self.robot.clamp(self.sim.q)
        self._gains, self._feedback = self._holding_gains(), None
        try:
            return self._refuse(raw, flag, message)
        except Exception:  # noqa: BLE001 - the episode's own end failed too: drop it, keep serving
            _log.exception("could not end the episode after a failure")
            self.episode, self.state = None, MachineState.RESTART
            return self._refusal(raw, flag, message)

    def _holding_gains(self) -> Gains:
        """The robot's PD gains under gravity compensation, no integral: how it holds after an abort."""
        r = self.robot
        return Gains(r.kp, r.kd, np.zeros(r.n_dofs), Feedforward.GRAVITY_COMPENSATION)

    def _handle(self, raw) -> Reply:
        self._log_held()
        try:
            cmd = validate(raw, self.robot, self.limits)
        except CommandError as exc:
            return self._refuse(raw, Flag.INVALID_PAYLOAD, str(exc))
        if isinstance(cmd, StartCommand):
            if self.episode is not None:
                self.abort(Flag.ABORTED_BY_LEARNER, "a new index 0 arrived before the episode ended")
            return self._start(raw, cmd)
        if isinstance(cmd, ResetCommand):
            if self.episode is None:
                return self._reply(cmd, Flag.OK, message="no episode was running")
            self._keep(raw)
            ep = self.episode
            self.abort(Flag.ABORTED_BY_LEARNER, "the learner reset the episode")
            return self._reply(cmd, Flag.ABORTED_BY_LEARNER, done=True, message="episode aborted", episode=ep)
        if self.episode is None and self._aborted[0] == cmd.episode_id:
            # the first refusal reports an episode no reply ended (_unreplied: then this one) with its
            # charge and return
            self.on_reject(raw, self._aborted[1])
            return self._refusal(raw, self._aborted[1], f"episode {cmd.episode_id} was aborted: {self._aborted[2]}",
                                 self._unreplied)
        if self.episode is None:
            return self._refuse(raw, Flag.OUT_OF_ORDER,
                                f"no episode is running; send index 0 to start one (got index {cmd.index})")
        if cmd.episode_id != self.episode.episode_id:
            return self._refuse(raw, Flag.STALE_EPISODE,
                                f"episode id {cmd.episode_id} is not the running episode {self.episode.episode_id}")
        if cmd.index != self._next_index or cmd.max_commands != self._max_commands:
            return self._refuse(raw, Flag.OUT_OF_ORDER,
                                f"expected index {self._next_index} of {self._max_commands}, "
                                f"got index {cmd.index} of {cmd.max_commands}")
        if isinstance(cmd, GainsCommand):
            self._pending_steps = self._steps(cmd.wait_time)
            if cmd.task_gains is not None:
                try:
                    self.task.check_gains(cmd.task_gains)
                except TaskError as exc:
                    return self._refuse(raw, Flag.INVALID_PAYLOAD, str(exc))
                self._feedback = self._task_feedback(cmd.task_gains)
            self._gains = Gains(cmd.kp, cmd.kd, cmd.ki, cmd.feedforward)
            self.sim.reset_integral()  # the integral term starts anew with every gain set
            desired = Desired.hold(self._hold_q, self._steps(cmd.wait_time))
        else:
            desired = resample(cmd.q, cmd.qd, cmd.qdd, cmd.rate, self.robot.control_rate)
            self._pending_steps = len(desired) + self._steps(cmd.wait_time)
            jump = np.abs(self.robot.clamp(desired.q[0]) - self._hold_q)
            jump[self._passive] = 0.0  # a joint without actuation is not moved, so it cannot jump
            if jump.max() > self.robot.max_start_jump:
                j = int(np.argmax(jump))
                held = (np.round(self._hold_q, 4) + 0.0).tolist()  # + 0.0: no "-0.0"
                return self._refuse(raw, Flag.DISCONTINUOUS,
                                    f"the segment starts {jump[j]:.3f} rad from the held posture on joint "
                                    f"{self.robot.joint_names[j]} (at most {self.robot.max_start_jump} rad); "
                                    f"start it at the held posture {held} rad (the last reply's posture)")
            desired = desired.then_hold(self._steps(cmd.wait_time))
        self._keep(raw)
        return self._segment(cmd, desired)

    def _task_feedback(self, task_gains: np.ndarray) -> Feedback:
        return self.task.feedback_law(self.sim.model, task_gains)

    def _steps(self, seconds: float) -> int:
        return int(round(seconds * self.robot.control_rate))

    def _refuse(self, raw, flag: Flag, message: str) -> Reply:
        """End the episode (or note the refusal outside one) with ``flag``; ``raw`` is stored once
        in the episode's commands (it may be there already when it failed while running). The
        reply carries NaN as task state and the posture held (n_dofs,) rad."""
        ep = self.episode
        if ep is None:
            self.on_reject(raw, flag)
        else:
            if raw is not None and raw is not self._kept:
                self._keep(raw)
            self.abort(flag, message)
        return self._refusal(raw, flag, message, ep)

    def _refusal(self, raw, flag: Flag, message: str, episode: EpisodeBuffer | None = None) -> Reply:
        """The reply to a refused (possibly malformed) command: its ids as far as they are
        integers, NaN task state, the posture held; when it ended ``episode``, that episode's
        early-end charge as its reward and the episode's return."""
        charge, total = (0.0, 0.0) if episode is None else (episode.early_end, episode.episode_return)
        if episode is not None and episode is self._unreplied:
            self._unreplied = None
        return Reply(_int(getattr(raw, "episode_id", -1)), _int(getattr(raw, "index", -1)), flag, charge,
                     self._no_state(), 0, True, message, self.state, self._hold_q.copy(), False, total)

    def _keep(self, raw) -> None:
        """Add a command as received to the running episode's record, its arrays and lists
        copied: the record is logged after the reply, and a learner may reuse them meanwhile."""
        self.episode.commands.append(_as_received(raw))
        self._kept = raw

    def _no_state(self) -> np.ndarray:
        return np.full(len(self.task.columns), np.nan)

    def _reply(self, cmd, flag: Flag, reward: float = 0.0, n_steps: int = 0, done: bool = False,
               message: str = "", episode: EpisodeBuffer | None = None) -> Reply:
        """The reply to ``cmd`` of ``episode`` (None: outside one), with the task state now and the
        posture held now (n_dofs,) rad; when it ends the episode (``done``), its reward includes
        the episode's early-end charge and it carries the episode's success."""
        success, total = False, 0.0
        if episode is not None:
            total = episode.episode_return
            if done:
                reward, success = reward + episode.early_end, episode.success
                if episode is self._unreplied:
                    self._unreplied = None
        return Reply(cmd.episode_id, cmd.index, flag, reward, self.current_task_state(), n_steps, done, message,
                     self.state, self._hold_q.copy(), success, total)

    # -- episode life --------------------------------------------------------
    def _start(self, raw, cmd: StartCommand) -> Reply:
        number = self.episodes_started
        self.episodes_started += 1
        rng_seed = (int(self.seed), number)
        self.episode = EpisodeBuffer(number, cmd.episode_id, self.sim.get_state(), rng_seed, self.task.columns)
        self.last_episode = self.episode
        self._keep(raw)
        self._started_at = time.perf_counter()
        self._steps_in_command = 0
        self._tick_mark = self.sim.pacer.mark() if self.sim.pacer is not None else None
        self._max_commands, self._next_index = cmd.max_commands, 1
        self._scored_steps = self._pending_steps = 0
        self._task_ready = False
        ep = self.episode
        self._passive, self._motion_steps = self.scene.passive.copy(), None
        self._schedule = self._failure_schedule()
        self._gains = self.default_gains()
        self._feedback = None
        self.sim.reset_integral()
        target = self.task.start_posture(self.robot) if cmd.posture is None else cmd.posture
        self.state = MachineState.GOTO_START
        self._goto(target)
        if self.sim.pacer is not None and self.interrupted:
            self.abort(Flag.INTERRUPTED, INTERRUPTED_MESSAGE)
            return self._reply(cmd, Flag.INTERRUPTED, done=True, message=INTERRUPTED_MESSAGE, episode=ep)
        if self.exact_start:
            self._restart_exactly(target)
        self._events, self._events_done = [], 0
        try:
            self.task.reset(self.sim.model, self.sim.data, cmd.context, default_rng(rng_seed))
        except TaskError as exc:
            self.abort(Flag.INVALID_PAYLOAD, str(exc))
            return self._reply(cmd, Flag.INVALID_PAYLOAD, done=True, message=str(exc), episode=ep)
        self._task_ready = True
        self._events = self._event_schedule()
        mujoco.mj_forward(self.sim.model, self.sim.data)
        self.sim.touch()
        self.state = MachineState.WAIT_FOR_START
        return self._reply(cmd, Flag.OK, n_steps=ep.n_steps, episode=ep)

    def _goto(self, target: np.ndarray) -> None:
        """Minimum-jerk move to ``target`` within the goto limits, then hold until close and slow
        (passive joints, which cannot be driven, are neither moved nor waited for). The move and
        its holds are logged as one block (also when a run fails part-way: what ran is kept), so
        that the log and the bridge's log block take the go-to-start in one piece."""
        goto = self.robot.goto
        q0 = self.sim.q
        driven = ~self._passive
        goal = np.where(driven, target, q0)
        stop = (lambda *_: self.interrupted) if self.sim.pacer is not None else None
        duration = min_jerk_duration(q0, goal, goto.max_velocity, goto.max_acceleration)
        records: list[StepRecord] = []
        try:
            if duration > 0:
                records.append(self.sim.run(min_jerk(q0, goal, duration, self.robot.control_dt), self._gains,
                                            stop=stop))
            self._hold_q = target.copy()
            chunk = max(self._steps(SETTLE_CHUNK), 1)
            for _ in range(int(np.ceil(goto.settle_time / SETTLE_CHUNK))):
                if (np.max(np.abs(self.sim.q - target)[driven], initial=0.0) < goto.tolerance_q
                        and np.max(np.abs(self.sim.qd)[driven], initial=0.0) < goto.tolerance_qd) \
                        or (stop is not None and self.interrupted):
                    break
                records.append(self.sim.run(Desired.hold(target, chunk), self._gains, stop=stop))
        finally:
            if records:  # (_record skips an empty one; joined, an empty run adds no rows)
                self._record(records[0] if len(records) == 1 else StepRecord.join(records), index=0)

    def _restart_exactly(self, target: np.ndarray) -> None:
        """After the go-to-start: keep the state it reached in ``settled_state``, shift the time
        of the GOTO_START steps logged so that they end at the start, and put the simulation at
        rest exactly at ``target`` (n_dofs,) rad, everything else at the model's defaults, the
        model's gains those of the move, the integral term 0 (the module docstring; the task's
        reset follows)."""
        sim = self.sim
        self.settled_state = sim.get_state()
        end = float(sim.data.time)
        for block in self.episode.blocks:
            block["time"] = block["time"] - end
        sim.reset(target)  # mj_resetData, the robot at target, mj_forward, integral 0
        sim.apply_gains(self._gains)

    def _segment(self, cmd, desired: Desired) -> Reply:
        self.state = MachineState.DO_MOTION
        self._steps_in_command = 0
        ep = self.episode
        stop = self._stop_early if self.sim.pacer is not None else None
        record = self._run_motion(desired, stop)
        view = self._view(record)
        task_state = self.task.state(view)
        rewards = self.task.step_reward(view, task_state)
        n = len(record)
        end = self.task.segment_end(view, task_state)
        if end is not None:
            n = min(n, max(int(end), 1))
        qd = self._joint_velocities(record)
        over = velocity_over_limit(qd[1 : n + 1], self.robot.velocity_limit)
        flag, message = Flag.OK, ""
        if over is not None:
            step, joints = over
            n = step + 1
            flag = Flag.SAFETY_ABORT
            message = (f"joint velocity over its limit at step {n} (joints "
                       f"{[self.robot.joint_names[j] for j in joints]}); segment aborted, robot holds")
        elif end is None and n < len(desired) and self.interrupted:  # stopped at a tick by _stop_early
            flag, message = Flag.INTERRUPTED, INTERRUPTED_MESSAGE
        # toward the scored duration: the steps run, or the whole segment when the task ended it
        self._scored_steps += len(desired) if flag == Flag.OK and end is not None else n
        self._pending_steps = len(desired) - n if flag != Flag.OK else 0
        if n < len(record):
            self._set_motion_steps(self._motion_steps - len(record) + n)
            # the run went past step n, so the events due up to it came, and its state shows them;
            # later ones are undone with the state put back and come again when their step is reached
            self._events_done = sum(step <= self._motion_steps for step, _ in self._events)
            record = record.truncate(n)
            self.sim.set_state(record.state[-1], ROLLOUT_SPEC)
            view, task_state, rewards, qd = self._trim(view, n), task_state[:n], rewards[:n], qd[: n + 1]
        self._record(record, cmd.index, task_state, rewards, view, qd)
        self._hold_q = self.robot.clamp(desired.q[n - 1]) if n else self._hold_q  # without feedback offsets
        reward = float(np.sum(rewards))
        self.episode.segments.append(dict(index=cmd.index, kind=int(cmd.kind), flag=int(flag),
                                          reward=reward, n_steps=n, state=self.current_task_state()))
        if flag != Flag.OK:
            if flag == Flag.SAFETY_ABORT:  # hold where the robot is, under gravity compensation
                self._hold_q = self.robot.clamp(self.sim.q)
                self._gains, self._feedback = self._holding_gains(), None
            self.abort(flag, message)
            return self._reply(cmd, flag, reward, n, True, message, ep)
        self._next_index += 1
        done = cmd.index == self._max_commands
        if done:
            self._finish(Flag.OK, "")
        else:
            self.state = MachineState.WAIT_FOR_COMMAND
        return self._reply(cmd, Flag.OK, reward, n, done, episode=ep)

    # -- passive joints and joint failures ---------------------------------------
    def _failure_schedule(self) -> list[tuple[int, int]]:
        """The task's joint failures as (motion step at which the joint goes passive, joint
        index), in order."""
        names, out = self.robot.joint_names, []
        for name, seconds in self.task.joint_failures(self.robot).items():
            if name not in names or not seconds >= 0:
                raise ValueError(f"task '{self.task.name}' fails joint {name!r} at {seconds} s; "
                                 f"a failure names one of {', '.join(names)} and a time >= 0 s")
            out.append((self._steps(seconds), names.index(name)))
        return sorted(out)

    def _event_schedule(self) -> list[tuple[int, str]]:
        """The task's events for this episode as (motion step at which it comes, name), in
        order; an event at an infinite time never comes."""
        out = []
        for name, seconds in self.task.motion_events().items():
            if not isinstance(name, str) or not seconds >= 0:
                raise ValueError(f"task '{self.task.name}' schedules event {name!r} at {seconds} s; "
                                 f"an event has a name and a time >= 0 s")
            if np.isfinite(seconds):
                out.append((self._steps(seconds), name))
        return sorted(out)

    def _fire_events(self) -> None:
        """Let the task's events due at the present motion time come, in order (before the
        step of that time runs)."""
        while self._events_done < len(self._events) and self._events[self._events_done][0] <= self._motion_steps:
            self.task.on_motion_event(self._events[self._events_done][1], self.sim.model, self.sim.data)
            self._events_done += 1
            self.sim.touch()

    def _set_motion_steps(self, steps: int) -> None:
        """Set the motion time to ``steps`` control steps, and with it which joints have failed."""
        self._motion_steps = steps
        self._passive = self.scene.passive.copy()
        for step, joint in self._schedule:
            self._passive[joint] |= step <= steps

    def _run_motion(self, desired: Desired, stop=None) -> StepRecord:
        """Run ``desired`` under the gains in force and the feedback law, advancing the motion
        time (which starts with the first such run of an episode). A joint failure or a task
        event due within the run splits it there: the steps before it drive the joint, the rest
        leave it passive; the event comes between the two parts (``Task.on_motion_event``).
        Each part is run whole when it can be (the rollout path stays exact)."""
        if self._motion_steps is None:
            self._set_motion_steps(0)
        records, done = [], 0
        while True:
            self._fire_events()
            n = len(desired) - done
            due = [step - self._motion_steps for step, _ in self._schedule if step > self._motion_steps]
            due += [step - self._motion_steps for step, _ in self._events[self._events_done :]]
            n = min([n] + due)
            part = Desired(desired.q[done : done + n], desired.qd[done : done + n], desired.qdd[done : done + n])
            record = self.sim.run(part, self._gains, self._feedback, stop)
            records.append(record)
            done += len(record)
            self._set_motion_steps(self._motion_steps + len(record))
            if done >= len(desired) or len(record) < n:
                return records[0] if len(records) == 1 else StepRecord.join(records)

    def _stop_early(self, k: int, states: np.ndarray, sensordata: np.ndarray) -> bool:
        """Whether a paced segment must stop after step k: a velocity over its limit, or the
        task's end of segment (asked, when the task has its own ``segment_end``, on the last
        SEGMENT_END_WINDOW s of steps, so the cost of a tick does not grow with the segment), or
        an interruption (``interrupted``)."""
        if self.interrupted:
            return True
        if over_velocity_limit_after(self.scene, states, k):
            return True
        if not self._ends_segments:
            return False
        s = self.scene
        rows = slice(max(k + 1 - self._steps(SEGMENT_END_WINDOW), 0), k + 1)
        pre, sensed = states[rows], sensordata[rows]
        view = StepView(s.qpos(pre), s.qvel(pre), sensed, s.applied_torque(sensed), s.sensor(sensed, "ee_pos"),
                        self.robot.control_dt, s.sensors)
        return self.task.segment_end(view, self.task.state(view)) is not None

    def idle(self, n_steps: int = 1) -> None:
        """Hold the last desired posture for n_steps control steps (the non-blocking seam);
        logged in the running episode, if any. Never raises: a failure (e.g. the task's feedback
        law) ends the episode and the robot holds under its own gains."""
        try:
            hold = Desired.hold(self._hold_q, n_steps)
            record = self._run_motion(hold) if self.episode is not None and self._motion_steps is not None \
                else self.sim.run(hold, self._gains, self._feedback)
            if self.episode is not None:
                self._held.append(record)
                if sum(map(len, self._held)) >= self._steps(HELD_BLOCK):
                    self._log_held()
        except Exception as exc:  # noqa: BLE001 - a paced loop must go on ticking
            _log.exception("holding failed")
            self._held = []
            self._fail(None, Flag.INTERNAL_ERROR, f"holding failed ({type(exc).__name__}: {exc})")

    def _log_held(self) -> None:
        """Log the steps held since the last command or block as one block (a tick at a time
        would make thousands of one-row blocks; all at the next command, a long hold would be
        logged on the tick that command arrives)."""
        if self._held:
            held, self._held = StepRecord.join(self._held), []
            self._record(held, self._next_index - 1)

    def abort(self, flag: Flag, message: str) -> None:
        """End the running episode with ``flag`` (timeouts and learner aborts come here)."""
        if self.episode is not None:
            self._log_held()
            self._finish(flag, message)

    def _finish(self, flag: Flag, message: str) -> None:
        ep = self.episode
        ep.flag, ep.flag_name = int(flag), flag.name
        ep.message = message
        ep.success = flag == Flag.OK and self.task.success(self.current_task_state())
        ep.early_end = self._early_end_charge()
        ep.wall_time = time.perf_counter() - self._started_at
        if self.sim.pacer is not None:
            ep.ticks = (self._tick_mark, self.sim.pacer.mark())
        self.episode = None
        self._motion_steps = None  # failures still due do not come; failed joints stay passive until the next start
        self._aborted = (ep.episode_id, flag, message) if flag != Flag.OK else (None, Flag.OK, "")
        self._unreplied = ep if flag != Flag.OK else None
        self.state = MachineState.RESTART
        self.on_episode(ep)

    def _early_end_charge(self) -> float:
        """What the running episode's early end costs (<= 0): the steps it leaves out, those of the
        command in hand that did not run or the rest of the task's scored duration, whichever is
        more, at the task's worst reward rate (Task.worst_reward_rate, Task.scored_duration); and
        when no motion step ran at all, what the task charges up front (Task.unplayed_return)."""
        charge = 0.0
        if self._task_ready and not any(s["n_steps"] for s in self.episode.segments):
            charge = float(self.task.unplayed_return(self.current_task_state()))
            if not charge <= 0.0:
                raise ValueError(f"task '{self.task.name}' gives an unplayed episode the return {charge}; "
                                 f"it must be <= 0")
        left = max(self._pending_steps, self._steps(self.task.scored_duration()) - self._scored_steps)
        if left <= 0:
            return charge
        rate = float(self.task.worst_reward_rate(self.sim.model, self.robot))
        if not rate <= 0.0:
            raise ValueError(f"task '{self.task.name}' gives a worst reward rate of {rate}/s; it must be <= 0")
        return charge + rate * left * self.robot.control_dt

    # -- logging -------------------------------------------------------------
    def _view(self, record: StepRecord) -> StepView:
        s = self.scene
        pre = record.state[:-1]
        return StepView(qpos=s.qpos(pre), qvel=s.qvel(pre), sensordata=record.sensordata,
                        u=s.applied_torque(record.sensordata),
                        ee_pos=s.sensor(record.sensordata, "ee_pos"), dt=self.robot.control_dt,
                        sensors=s.sensors)

    @staticmethod
    def _trim(view: StepView, n: int) -> StepView:
        return StepView(view.qpos[:n], view.qvel[:n], view.sensordata[:n], view.u[:n],
                        view.ee_pos[:n], view.dt, view.sensors)

    def current_task_state(self) -> np.ndarray:
        """Task state (n_state,) at the simulator's present state (cached until it changes)."""
        if self._task_state[0] == self.sim.version:
            return self._task_state[1].copy()
        m, d = self.sim.model, self.sim.data
        mujoco.mj_forward(m, d)
        view = StepView(d.qpos[None].copy(), d.qvel[None].copy(), d.sensordata[None].copy(),
                        self.scene.applied_torque(d.sensordata[None]),
                        self.scene.sensor(d.sensordata[None], "ee_pos"), self.robot.control_dt,
                        self.scene.sensors)
        self._task_state = (self.sim.version, self.task.state(view)[0])
        return self._task_state[1].copy()

    def _joint_velocities(self, record: StepRecord) -> np.ndarray:
        """The robot's joint velocities (n + 1, n_dofs) rad/s before each step of ``record`` and after its last."""
        return self.scene.joint_velocities(record.state)

    def _record(self, record: StepRecord, index: int, task_state=None, rewards=None, view=None,
                qd: np.ndarray | None = None) -> None:
        """Append a record's steps to the episode's per-step columns, each in its log dtype
        (episodic.interface.columns); ``qd``: the record's ``_joint_velocities`` when already at hand."""
        if self.episode is None or len(record) == 0:
            return
        s, n, first = self.scene, len(record), self._steps_in_command
        view = view or self._view(record)
        if task_state is None:
            task_state = self.task.state(view)
        if qd is None:
            qd = self._joint_velocities(record)
        block = {
            "time": record.state[:-1, 0],
            "machine_state": np.full(n, self.state, STEP_DTYPES["machine_state"]),
            "index": np.full(n, index, STEP_DTYPES["index"]),
            "step": np.arange(first, first + n, dtype=STEP_DTYPES["step"]),
            "q": s.joint_positions(record.state[:-1]), "qd": qd[:-1],
            "qdd": np.diff(qd, axis=0) / self.robot.control_dt,
            "q_d": self.robot.clamp(record.desired.q), "qd_d": record.desired.qd,
            "qdd_d": record.desired.qdd,
            "u": view.u, "u_ff": record.u_ff,
            "ee_pos": view.ee_pos, "ee_quat": s.sensor(record.sensordata, "ee_quat"),
            "task_state": task_state,
            "reward": np.zeros(n) if rewards is None else rewards,
        }
        self.episode.blocks.append(block)
        self._steps_in_command += n


def _as_received(raw):
    """``raw`` (a command dataclass, or whatever arrived) with its array and list fields copied,
    but for arrays that nothing can change (over immutable memory: the bridge decodes commands so)."""
    if not dataclasses.is_dataclass(raw) or isinstance(raw, type):
        return raw
    copies = {f.name: copy.deepcopy(value) for f in dataclasses.fields(raw)
              if f.init and isinstance(value := getattr(raw, f.name, None), (np.ndarray, list))
              and not _immutable(value)}
    return dataclasses.replace(raw, **copies) if copies else raw


def _immutable(value) -> bool:
    """Whether ``value`` is an array over an immutable bytes object (which no one can make writeable)."""
    while isinstance(value, np.ndarray):
        value = value.base
    return isinstance(value, bytes)


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1
