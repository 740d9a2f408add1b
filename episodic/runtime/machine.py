"""The episode state machine: RESTART -> GOTO_START -> WAIT_FOR_START -> DO_MOTION ->
WAIT_FOR_COMMAND -> DO_MOTION ... -> RESTART (docs/architecture.md); every state change goes
through ``EpisodeMachine._enter``, which refuses a transition not in TRANSITIONS.

``handle`` takes one command and returns its Reply; it never raises on input. Index 0
starts an episode; 1..max_commands are segments in order; after max_commands the episode
ends. An out-of-order index, a stale episode id, an invalid payload or a velocity over
its limit aborts the episode with its own flag. What happens while the learner is
silent is the caller's choice: in blocking mode nothing (time stops); a non-blocking
loop calls ``idle`` once per tick, which holds the robot and logs the steps.

The machine's parts, each a unit of its own:

- the start routine (episodic.runtime.start): GOTO_START, then, on a backend that can
  (``Backend.can_start_exactly``: a blocking simulation; ``exact_start``), the exact start state,
  from which the task's ``reset`` places its objects; there the go-to-start is not simulated
  (``skip_goto_start``: nothing of it can reach the episode; the log holds no GOTO_START steps,
  episodic.runtime.start.start_exactly). That reset gets a fresh
  ``Episode`` and a random generator seeded with the run's seed and the episode's number in the
  run, so what a task draws from it depends on the episode's place in the run, and a replay,
  which runs each episode at its place, repeats it (ball_on_beam, pole_balancing and
  ball_bouncing draw the key of their sensing noise there). Where a go-to-start that ran really
  ended is kept in ``settled_state``;
- the motion clock (episodic.runtime.motion_clock): motion time in control steps from the first
  step of index 1, the task's joint failures (``Task.joint_failures``: the joint joins the
  passive ones, ``Task.passive_joints``, until the next start) and task events
  (``Task.motion_events``, asked right after the task's reset; ``Task.on_motion_event`` may change
  the physics state, e.g. beer_pong's release of the ball). Each event comes exactly once per
  episode: at step 0 before the first step, at a segment boundary before the next segment's
  first step (or a held step, ``idle``), never when the episode ends first; a segment cut short
  before an event's step (the task's ``segment_end``, a safety abort) puts the state back, and
  the event comes again when its step is reached;
- the step recorder (episodic.runtime.recorder): the task's view of a run's steps and the
  episode's per-step log blocks.

Passive joints are left out of every gain set; GOTO_START does not move or wait for them, and a
segment's start is not checked against them.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
from numpy.random import default_rng  # numpy imports it when first used: ~9 ms, a missed tick at the first start

from episodic.interface.commands import (
    GainsCommand,
    Limits,
    ResetCommand,
    StartCommand,
    TrajectoryCommand,
    validate,
)
from episodic.interface.trajectory import Desired, resample
from episodic.interface.vocabulary import CommandError, Feedforward, Flag, MachineState, Reply
from episodic.logs.episode import EpisodeBuffer
from episodic.logs.timing import Mark
from episodic.native import NativeError
from episodic.runtime.backend import Backend
from episodic.runtime.control import Feedback, Gains, over_velocity_limit_after, velocity_over_limit
from episodic.runtime.motion_clock import MotionClock, control_steps
from episodic.runtime.recorder import StepRecorder
from episodic.runtime.scene import ROLLOUT_SPEC, Scene
from episodic.runtime.simulation import SimulationUnstable, StepRecord
from episodic.runtime.start import CarriedSag, go_to_start, restart_exactly, start_exactly
from episodic.task import Task, TaskError

__all__ = ["EpisodeMachine", "Flag", "MachineState", "HELD_BLOCK", "INTERRUPTED_MESSAGE", "SEGMENT_END_WINDOW"]

SEGMENT_END_WINDOW = 2.0  # s of recent steps a paced segment shows the task's segment_end each tick
HELD_BLOCK = 0.2  # s of held steps logged as one block (so the tick a command arrives logs at most this)
INTERRUPTED_MESSAGE = "the runner stopped during the episode"
# the state changes the machine makes: state -> the states it may go to (any state may go to
# RESTART: an episode's end, or a failure)
TRANSITIONS: dict[MachineState, frozenset[MachineState]] = {
    MachineState.RESTART: frozenset({MachineState.GOTO_START}),
    MachineState.GOTO_START: frozenset({MachineState.WAIT_FOR_START}),
    MachineState.WAIT_FOR_START: frozenset({MachineState.DO_MOTION}),
    MachineState.DO_MOTION: frozenset({MachineState.WAIT_FOR_COMMAND}),
    MachineState.WAIT_FOR_COMMAND: frozenset({MachineState.DO_MOTION}),
}
_log = logging.getLogger("episodic.runtime.machine")


class EpisodeMachine:
    """Runs episodes of ``task`` on ``sim``; hands each finished episode to ``on_episode`` and
    each command refused outside an episode to ``on_reject`` (the runner's)."""

    def __init__(self, scene: Scene, sim: Backend, task: Task, seed: int = 0,
                 limits: Limits = Limits(), on_episode: Callable[[EpisodeBuffer], None] | None = None,
                 on_reject: Callable[[Any, Flag], None] | None = None):
        self.scene, self.sim, self.task, self.seed, self.limits = scene, sim, task, seed, limits
        self.robot = scene.robot
        self.on_episode = on_episode or (lambda ep: None)
        self.on_reject = on_reject or (lambda cmd, flag: None)
        self.state = MachineState.RESTART
        self.episode: EpisodeBuffer | None = None
        self._kept: Any = None  # the command last added to an episode's record, as it arrived
        self.last_episode: EpisodeBuffer | None = None  # the running one, else the one that ended last
        self.episodes_started = 0  # also the number the next episode gets (its place in the run)
        self._max_commands = 0
        self._next_index = 0
        self.clock = MotionClock(scene, task)
        self.recorder = StepRecorder(scene, sim, task)
        self._gains = self.default_gains()
        self._feedback: Feedback | None = None  # the task's feedback law, once a gains command set it
        self._held: list[StepRecord] = []  # steps held while waiting, not yet logged
        self._started_at = 0.0
        self._tick_mark: Mark | None = None  # the pacer's tick record when the running episode started
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
        # set (from another thread: the bridge's watch on the learner) to end the running episode's
        # paced motion at the next tick with this (flag, message); whoever sets it clears it
        self.halt: tuple[Flag, str] | None = None
        # put the backend in the exact start state after GOTO_START (episodic.runtime.start); a log
        # replays only under the setting it was recorded with
        self.exact_start = sim.can_start_exactly
        # where the exact start follows, do not simulate GOTO_START (episodic.runtime.start.start_exactly;
        # the episode's goto_start records it, and a replay of an episode whose go-to-start ran runs it)
        self.skip_goto_start = True
        # "close" allows the static sag under what the arm carries (episodic.runtime.start.carried_sag);
        # a replay of a log written before it (no goto_start) waits as that run did
        self.allow_carried_sag = True
        self._sag = CarriedSag(scene, now=sim.pacer is not None)  # its scratch data, made once
        # whether the task has its own segment_end (else a paced segment does not ask it each tick)
        self._ends_segments = type(task).segment_end is not Task.segment_end
        self.settled_state: np.ndarray | None = None  # where the last go-to-start really ended (None: skipped)
        sim.reset(self.robot.home)
        self._hold_q = sim.q  # the posture held (n_dofs,) rad: the last desired one, without feedback offsets

    def default_gains(self) -> Gains:
        r = self.robot
        return Gains(r.kp.copy(), r.kd.copy(), r.ki.copy(), Feedforward.parse(r.feedforward))

    @property
    def _gains(self) -> Gains:
        """The gains in force, the joints passive now left out."""
        return self._gain_set.with_passive(self.clock.passive)

    @_gains.setter
    def _gains(self, gains: Gains) -> None:
        self._gain_set = gains

    def _enter(self, state: MachineState) -> None:
        """Change the machine's state (the one place that does); RuntimeError for a change the
        machine never makes (TRANSITIONS), which the boundary of ``handle`` reports."""
        if state != MachineState.RESTART and state not in TRANSITIONS[self.state]:
            raise RuntimeError(f"the episode machine cannot go from {self.state.name} to {state.name}")
        _log.debug("%s -> %s", self.state.name, state.name)
        self.state = state

    # -- commands ------------------------------------------------------------
    def handle(self, raw: Any) -> Reply:
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

    def _fail(self, raw: Any, flag: Flag, message: str) -> Reply:
        """End the running episode after a failure inside ``handle`` and hold where the robot is."""
        self._hold_q = self.robot.clamp(self.sim.q)
        self._gains, self._feedback = self._holding_gains(), None
        try:
            return self._refuse(raw, flag, message)
        except Exception:  # noqa: BLE001 - the episode's own end failed too: drop it, keep serving
            _log.exception("could not end the episode after a failure")
            self.episode = None
            self._enter(MachineState.RESTART)
            return self._refusal(raw, flag, message)

    def _holding_gains(self) -> Gains:
        """The robot's PD gains under gravity compensation, no integral: how it holds after an abort."""
        r = self.robot
        return Gains(r.kp, r.kd, np.zeros(r.n_dofs), Feedforward.GRAVITY_COMPENSATION)

    def _handle(self, raw: Any) -> Reply:
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
                    law = self.task.feedback_law(self.sim.model, cmd.task_gains)
                except (TaskError, NativeError) as exc:  # NativeError: a law in C, not built in this install
                    return self._refuse(raw, Flag.INVALID_PAYLOAD, str(exc))
                self._feedback = law
            assert cmd.ki is not None, "validate() fills ki in"
            self._gains = Gains(cmd.kp, cmd.kd, cmd.ki, cmd.feedforward)
            self.sim.reset_integral()  # the integral term starts anew with every gain set
            desired = Desired.hold(self._hold_q, self._steps(cmd.wait_time))
        else:
            assert cmd.rate is not None, "validate() fills the rate in"
            desired = resample(cmd.q, cmd.qd, cmd.qdd, cmd.rate, self.robot.control_rate)
            self._pending_steps = len(desired) + self._steps(cmd.wait_time)
            jump = np.abs(self.robot.clamp(desired.q[0]) - self._hold_q)
            jump[self.clock.passive] = 0.0  # a joint without actuation is not moved, so it cannot jump
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

    def _steps(self, seconds: float) -> int:
        return control_steps(seconds, self.robot.control_rate)

    def _refuse(self, raw: Any, flag: Flag, message: str) -> Reply:
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

    def _refusal(self, raw: Any, flag: Flag, message: str, episode: EpisodeBuffer | None = None) -> Reply:
        """The reply to a refused (possibly malformed) command: its ids as far as they are
        integers, NaN task state, the posture held; when it ended ``episode``, that episode's
        early-end charge as its reward and the episode's return."""
        charge, total = (0.0, 0.0) if episode is None else (episode.early_end, episode.episode_return)
        if episode is not None and episode is self._unreplied:
            self._unreplied = None
        return Reply(_int(getattr(raw, "episode_id", -1)), _int(getattr(raw, "index", -1)), flag, charge,
                     self._no_state(), 0, True, message, self.state, self._hold_q.copy(), False, total)

    def _keep(self, raw: Any) -> None:
        """Add a command as received to the running episode's record, its arrays and lists
        copied: the record is logged after the reply, and a learner may reuse them meanwhile."""
        assert self.episode is not None, "a command is kept only while an episode runs"
        self.episode.commands.append(_as_received(raw))
        self._kept = raw

    def _no_state(self) -> np.ndarray:
        return np.full(len(self.task.columns), np.nan)

    def _reply(self, cmd: Any, flag: Flag, reward: float = 0.0, n_steps: int = 0, done: bool = False,
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
    def _start(self, raw: Any, cmd: StartCommand) -> Reply:
        number = self.episodes_started
        self.episodes_started += 1
        rng_seed = (int(self.seed), number)
        ep = self.episode = EpisodeBuffer(number, cmd.episode_id, self.sim.get_state(), rng_seed, self.task.columns)
        self.last_episode = ep
        self._keep(raw)
        self._started_at = time.perf_counter()
        self.recorder.step_in_command = 0
        self._tick_mark = self.sim.pacer.mark() if self.sim.pacer is not None else None
        self._max_commands, self._next_index = cmd.max_commands, 1
        self._scored_steps = self._pending_steps = 0
        self._task_ready = False
        self.clock.new_episode()
        self._gains = self.default_gains()
        self._feedback = None
        self.sim.reset_integral()
        target = self.task.start_posture(self.robot) if cmd.posture is None else cmd.posture
        self._enter(MachineState.GOTO_START)
        if self.exact_start and self.skip_goto_start:
            ep.goto_start, self.settled_state = "skipped", None
            start_exactly(self.sim, target, self._gains)
            self._hold_q = target.copy()
        else:
            paced = self.sim.pacer is not None
            go_to_start(self.sim, self.scene, target, self._gains, self.clock.passive,
                        (lambda: self._stopping() is not None) if paced else None,
                        lambda record: self._record(record, 0), self.allow_carried_sag, self._sag)
            self._hold_q = target.copy()
            stopped = self._stopping() if paced else None
            if stopped is not None:
                self.abort(*stopped)
                return self._reply(cmd, stopped[0], done=True, message=stopped[1], episode=ep)
            if self.exact_start:
                self.settled_state = restart_exactly(self.sim, target, self._gains, ep.blocks)
        try:
            self.task.reset(self.sim.model, self.sim.data, cmd.context, default_rng(rng_seed))
        except TaskError as exc:
            self.abort(Flag.INVALID_PAYLOAD, str(exc))
            return self._reply(cmd, Flag.INVALID_PAYLOAD, done=True, message=str(exc), episode=ep)
        self._task_ready = True
        self.clock.schedule_events()
        mujoco.mj_forward(self.sim.model, self.sim.data)
        self.sim.touch()
        self._enter(MachineState.WAIT_FOR_START)
        return self._reply(cmd, Flag.OK, n_steps=ep.n_steps, episode=ep)

    def _segment(self, cmd: GainsCommand | TrajectoryCommand, desired: Desired) -> Reply:
        """Run a segment's ``desired`` steps; cut it at the task's end of segment or the first
        velocity over its limit; log and reward what ran."""
        ep = self.episode
        assert ep is not None, "a segment runs only in an episode"
        self._enter(MachineState.DO_MOTION)
        self.recorder.step_in_command = 0
        stop = self._stop_early if self.sim.pacer is not None else None
        steps = self.recorder.measure(self.clock.run(self.sim, desired, self._gain_set, self._feedback, stop))
        rewards = self.task.step_reward(steps.view, steps.task_state)
        n = ran = len(steps)
        end = self.task.segment_end(steps.view, steps.task_state)
        if end is not None:
            n = min(n, max(int(end), 1))
        over = velocity_over_limit(steps.qd[1 : n + 1], self.robot.velocity_limit)
        flag, message = Flag.OK, ""
        if over is not None:
            step, joints = over
            n = step + 1
            flag = Flag.SAFETY_ABORT
            message = (f"joint velocity over its limit at step {n} (joints "
                       f"{[self.robot.joint_names[j] for j in joints]}); segment aborted, robot holds")
        elif end is None and n < len(desired) and (stopped := self._stopping()) is not None:
            flag, message = stopped  # stopped at a tick by _stop_early
        # toward the scored duration: the steps run, or the whole segment when the task ended it
        self._scored_steps += len(desired) if flag == Flag.OK and end is not None else n
        self._pending_steps = len(desired) - n if flag != Flag.OK else 0
        if n < ran:
            # the run went past step n: back to the state after it (the events due up to it came;
            # later ones come again when their step is reached)
            self.clock.rewind(ran - n)
            steps, rewards = steps.truncate(n), rewards[:n]
            self.sim.set_state(steps.record.state[-1], ROLLOUT_SPEC)
        self.recorder.append(ep, steps, self.state, cmd.index, rewards)
        self._hold_q = self.robot.clamp(desired.q[n - 1]) if n else self._hold_q  # without feedback offsets
        reward = float(np.sum(rewards))
        ep.segments.append(dict(index=cmd.index, kind=int(cmd.kind), flag=int(flag),
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
            self._enter(MachineState.WAIT_FOR_COMMAND)
        return self._reply(cmd, Flag.OK, reward, n, done, episode=ep)

    def _stop_early(self, k: int, states: np.ndarray, sensordata: np.ndarray) -> bool:
        """Whether a paced segment must stop after step k: a velocity over its limit, or the
        task's end of segment (asked, when the task has its own ``segment_end``, on the last
        SEGMENT_END_WINDOW s of steps, so the cost of a tick does not grow with the segment), or
        an interruption (``interrupted``) or a ``halt``."""
        if self._stopping() is not None:
            return True
        if over_velocity_limit_after(self.scene, states, k):
            return True
        if not self._ends_segments:
            return False
        rows = slice(max(k + 1 - self._steps(SEGMENT_END_WINDOW), 0), k + 1)
        view = self.recorder.view(states[rows], sensordata[rows])
        return self.task.segment_end(view, self.task.state(view)) is not None

    def _stopping(self) -> tuple[Flag, str] | None:
        """Why paced motion must stop now, if it must: an interruption, else a ``halt``."""
        return (Flag.INTERRUPTED, INTERRUPTED_MESSAGE) if self.interrupted else self.halt

    def idle(self, n_steps: int = 1) -> None:
        """Hold the last desired posture for n_steps control steps (the non-blocking seam);
        logged in the running episode, if any. Never raises: a failure (e.g. the task's feedback
        law) ends the episode and the robot holds under its own gains."""
        try:
            hold = Desired.hold(self._hold_q, n_steps)
            record = self.clock.run(self.sim, hold, self._gain_set, self._feedback) \
                if self.episode is not None and self.clock.running else self.sim.run(hold, self._gains, self._feedback)
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

    def _record(self, record: StepRecord, index: int) -> None:
        """Log the steps of ``record`` (a go-to-start, held steps) in the running episode, if any,
        as steps of command ``index`` in the present state, with no reward."""
        if self.episode is not None and len(record):
            self.recorder.append(self.episode, self.recorder.measure(record), self.state, index)

    def abort(self, flag: Flag, message: str) -> None:
        """End the running episode with ``flag`` (timeouts and learner aborts come here)."""
        if self.episode is not None:
            self._log_held()
            self._finish(flag, message)

    def _finish(self, flag: Flag, message: str) -> None:
        ep = self.episode
        assert ep is not None, "only a running episode finishes"
        ep.flag, ep.flag_name = int(flag), flag.name
        ep.message = message
        ep.success = flag == Flag.OK and self.task.success(self.current_task_state())
        ep.early_end = self._early_end_charge(ep)
        ep.wall_time = time.perf_counter() - self._started_at
        if self.sim.pacer is not None and self._tick_mark is not None:
            ep.ticks = (self._tick_mark, self.sim.pacer.mark())
        self.episode = None
        self.clock.stop()
        self._aborted = (ep.episode_id, flag, message) if flag != Flag.OK else (None, Flag.OK, "")
        self._unreplied = ep if flag != Flag.OK else None
        self._enter(MachineState.RESTART)
        self.on_episode(ep)

    def _early_end_charge(self, ep: EpisodeBuffer) -> float:
        """What the early end of ``ep``, the running episode, costs (<= 0): the steps it leaves
        out, those of the command in hand that did not run or the rest of the task's scored
        duration, whichever is more, at the task's worst reward rate (Task.worst_reward_rate,
        Task.scored_duration); and when no motion step ran at all, what the task charges up front
        (Task.unplayed_return)."""
        charge = 0.0
        if self._task_ready and not any(s["n_steps"] for s in ep.segments):
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

    def current_task_state(self) -> np.ndarray:
        """Task state (n_state,) at the simulator's present state (cached until it changes)."""
        return self.recorder.current_task_state()


def _as_received(raw: Any) -> Any:
    """``raw`` (a command dataclass, or whatever arrived) with its array and list fields copied,
    but for arrays that nothing can change (over immutable memory: the bridge decodes commands so)."""
    if not dataclasses.is_dataclass(raw) or isinstance(raw, type):
        return raw
    copies = {f.name: copy.deepcopy(value) for f in dataclasses.fields(raw)
              if f.init and isinstance(value := getattr(raw, f.name, None), (np.ndarray, list))
              and not _immutable(value)}
    return dataclasses.replace(raw, **copies) if copies else raw


def _immutable(value: Any) -> bool:
    """Whether ``value`` is an array over an immutable bytes object (which no one can make writeable)."""
    while isinstance(value, np.ndarray):
        value = value.base
    return isinstance(value, bytes)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1
