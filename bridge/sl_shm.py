"""SL's own transport (``episodic serve --sl-shm``): the SysV shared memory and semaphores of the IAS
lab's SL bridge, so that a learner MEX compiled from SL's sources attaches and runs unchanged.

Three segments, laid out as SL's C structs (natural alignment, native byte order; N_DOFS the
robot's joints):

- ``episode_state`` (key 100000): int episodeID, commandIdx; double state[100] -- the reply:
  the command's episodeID and commandIdx echoed, state[0] the command's reward, then the task
  state (a controller command: state[1] the control steps it ran, then the task state);
- ``episode_trajectory`` (100001): int episodeID, trajectorySize, commandIdx, maxCommands; double
  waitingTime; double trajectory[100000][N_DOFS + 1]; double stateBuffer[100] -- the command,
  its samples in rows 1..trajectorySize and joints in columns 1..N_DOFS (SL's 1-based vectors);
- ``episode_steps`` (100002): int episodeID, numTransmittedSteps; double joints, jointsVel,
  jointsAcc, jointsDes, jointsVelDes, jointsAccDes, torque [60000][N_DOFS]; double cart[60000][7];
  double state[60000][100]; int stepInTrajectory, commandIdx, doMotionIdx [60000] -- the running
  or last episode's motion steps (not the move to the start), rewritten after every command.

Semaphores: 50000 the learner posts when it has written a command, 50002 the runner posts when
the reply is written; 50004, 50005 and 50006 are mutexes (initially 1) guarding episode_state,
episode_trajectory and episode_steps. The learner attaches, takes 50005, writes, gives it, posts
50000, waits on 50002 (its timeOut), takes 50004, reads, gives it, detaches. SL's conventions
(commandIdx 1 start, 2..maxCommands motion, -1 reset; zero-padded 10-value contexts; a one-row
trajectory is a controller command) are those of SLSendTrajectoryMex (clients/README.md); the
runner (an episodic.bridge.sl.SLRunner) reads SL's layout through the task's SL map. What arrives
is checked as on the native channel (sizes here, NaN, order and ranges by the runner): a bad
command is refused with its flag, never the runner's end. The keys are settable (SLKeys);
creating a segment or semaphore that exists is refused (a second runner on the same keys)."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import sysv_ipc  # type: ignore[import-not-found, import-untyped, unused-ignore]

from episodic.bridge.channel import ChannelError
from episodic.bridge.endpoint import hold
from episodic.interface.commands import (
    Command,
    GainsCommand,
    MalformedCommand,
    ResetCommand,
    StartCommand,
    TrajectoryCommand,
)
from episodic.interface.vocabulary import Flag, Reply
from episodic.runtime.runner import Runner
from episodic.task.sl import SL_VALUES, sl_states

log = logging.getLogger("episodic.sl_shm")
STEP_LIMIT = 100_000  # rows of episode_trajectory.trajectory (SL's STEPLIMIT)
EPISODE_STEPS = 60_000  # rows of episode_steps' arrays (SL's STEPLIMITEPISODE)
N_STATES = 100  # episode_state.state, episode_trajectory.stateBuffer (SL's NUMEPISODICSTATES)
STEP_STATES = 100  # columns of episode_steps.state (SL's MAXEPISODESTATES)
POLL = 0.001  # s between looks for a command (sysv_ipc waits without a timeout only)
JOINT_ARRAYS = (("joints", "q"), ("jointsVel", "qd"), ("jointsAcc", "qdd"), ("jointsDes", "q_d"),
                ("jointsVelDes", "qd_d"), ("jointsAccDes", "qdd_d"), ("torque", "u"))


@dataclass(frozen=True)
class SLKeys:
    """SysV keys of SL's segments and semaphores (SL's numbers by default)."""

    state: int = 100_000
    trajectory: int = 100_001
    steps: int = 100_002
    command: int = 50_000  # learner -> runner: a command is written
    reply: int = 50_002  # runner -> learner: the reply is written
    state_mutex: int = 50_004
    trajectory_mutex: int = 50_005
    steps_mutex: int = 50_006

    @classmethod
    def numbered(cls, segments: int, semaphores: int) -> SLKeys:
        """SL's numbering from other first keys: segments ``segments`` + 0, 1, 2; semaphores
        ``semaphores`` + 0 (command), 2 (reply), 4, 5, 6 (mutexes)."""
        return cls(segments, segments + 1, segments + 2, semaphores, semaphores + 2, semaphores + 4,
                   semaphores + 5, semaphores + 6)


def layouts(n_dofs: int) -> tuple[np.dtype, np.dtype, np.dtype]:
    """The C structs episode_state, episode_trajectory and episode_steps for ``n_dofs`` joints."""
    state = np.dtype([("episodeID", "i4"), ("commandIdx", "i4"), ("state", "f8", (N_STATES,))], align=True)
    trajectory = np.dtype([("episodeID", "i4"), ("trajectorySize", "i4"), ("commandIdx", "i4"),
                           ("maxCommands", "i4"), ("waitingTime", "f8"),
                           ("trajectory", "f8", (STEP_LIMIT, n_dofs + 1)), ("stateBuffer", "f8", (N_STATES,))],
                          align=True)
    steps = np.dtype([("episodeID", "i4"), ("numTransmittedSteps", "i4")]
                     + [(name, "f8", (EPISODE_STEPS, n_dofs)) for name, _ in JOINT_ARRAYS]
                     + [("cart", "f8", (EPISODE_STEPS, 7)), ("state", "f8", (EPISODE_STEPS, STEP_STATES)),
                        ("stepInTrajectory", "i4", (EPISODE_STEPS,)), ("commandIdx", "i4", (EPISODE_STEPS,)),
                        ("doMotionIdx", "i4", (EPISODE_STEPS,))], align=True)
    return state, trajectory, steps


class SLShm:
    """Serve ``runner`` (an SLRunner, so that SL's contexts and controller commands are read by the
    task's SL map) on SL's SysV keys until ``serve``'s stop; ``close`` removes what it created."""

    def __init__(self, runner: Runner, keys: SLKeys = SLKeys()):
        self.runner = runner
        self.keys = keys
        self._made: list = []  # segments and semaphores created, removed by close
        try:
            dtypes = layouts(runner.n_dofs)
            segments = [self._segment(k, d) for k, d in zip((keys.state, keys.trajectory, keys.steps), dtypes)]
            self.command, self.reply = self._semaphore(keys.command, 0), self._semaphore(keys.reply, 0)
            self.mutexes = [self._semaphore(k, 1) for k in (keys.state_mutex, keys.trajectory_mutex,
                                                              keys.steps_mutex)]
        except (sysv_ipc.Error, OSError) as exc:
            self.close()
            raise ChannelError(f"could not create SL's shared memory and semaphores (keys {keys}): {exc}; another "
                               f"runner serves these keys, or one that crashed left them behind (ipcs; ipcrm -M "
                               f"KEY, ipcrm -S KEY), or give other keys") from None
        self.state, self.trajectory, self.steps = (np.ndarray((), d, buffer=memoryview(s))
                                                   for s, d in zip(segments, dtypes))
        self.command.block = False
        self._episode_id = 0  # the runner's episode id of the SL episode running (one per SL start)
        sl = getattr(runner.task, "sl", None)
        self._rows = sl_states(sl, runner.state_names) if sl is not None else []  # SL's state rows

    def _segment(self, key: int, dtype: np.dtype):
        segment = sysv_ipc.SharedMemory(key, sysv_ipc.IPC_CREX, mode=0o600, size=dtype.itemsize)
        self._made.append(segment)
        return segment

    def _semaphore(self, key: int, value: int):
        semaphore = sysv_ipc.Semaphore(key, sysv_ipc.IPC_CREX, mode=0o600, initial_value=value)
        self._made.append(semaphore)
        return semaphore

    def serve(self, stop: Callable[[], bool]) -> None:
        """Answer SL's commands until ``stop()`` is true. While waiting, a blocking runner looks every
        POLL s; a paced (realtime) one holds the robot one control step at a time and takes a
        command at the first tick after it arrives, as on the channel."""
        while not stop():
            try:
                self.command.acquire()
            except sysv_ipc.BusyError:
                if self.runner.paced:
                    hold(self.runner)
                else:
                    time.sleep(POLL)
                continue
            self.serve_one()

    def serve_one(self) -> Reply:
        """Read the command segment, run the command, write the reply and the steps, post the reply."""
        with _held(self.mutexes[1]):
            t = self.trajectory
            sl_id, index, max_commands, size = (int(t[f]) for f in ("episodeID", "commandIdx", "maxCommands",
                                                                     "trajectorySize"))
            command = self._command(index, max_commands, size, float(t["waitingTime"]))
        try:
            reply = self.runner.send(command)
        except Exception as exc:  # noqa: BLE001 - the learner gets an answer whatever happens
            log.exception("the runner failed on SL's command %d", index)
            reply = Reply(self._episode_id, max(index - 1, 0), Flag.INTERNAL_ERROR, 0.0,
                          np.full(len(self.runner.state_names), np.nan), 0, True, f"the runner failed: {exc}")
        with _held(self.mutexes[2]):
            self._write_steps(sl_id)
        with _held(self.mutexes[0]):
            state = np.zeros(N_STATES)
            values = [reply.reward] + ([reply.n_steps] if isinstance(command, GainsCommand) else [])
            values += list(reply.state)
            state[:min(len(values), N_STATES)] = values[:N_STATES]
            self.state["state"] = state
            self.state["commandIdx"] = index
            self.state["episodeID"] = sl_id
        self.reply.release()
        return reply

    def _command(self, index: int, max_commands: int, size: int, wait_time: float) -> Command | MalformedCommand:
        """SL's command in the trajectory segment as the runner's (sizes checked here; the rest by the runner)."""
        t, n = self.trajectory, self.runner.n_dofs
        buffer = np.array(t["stateBuffer"][:SL_VALUES])
        if index == 1:
            self._episode_id += 1  # SL's start values: always its layout (SL has no "no context")
            return StartCommand(self._episode_id, max_commands - 1, context=buffer)
        if index == -1:
            return ResetCommand(self._episode_id)
        if not 2 <= index <= max_commands:
            return MalformedCommand(self._episode_id, max(index - 1, 0), max_commands - 1,
                                    f"SL's commandIdx is {index}: 1 starts, 2..maxCommands ({max_commands}) "
                                    f"are motion commands, -1 resets")
        if not 1 <= size < STEP_LIMIT:
            return MalformedCommand(self._episode_id, index - 1, max_commands - 1,
                                    f"SL's trajectorySize is {size}; it must be 1..{STEP_LIMIT - 1}")
        if size == 1:  # SL's controller command: the task gains in stateBuffer
            return GainsCommand(self._episode_id, index - 1, max_commands - 1, np.zeros(n), np.zeros(n),
                                wait_time=wait_time, task_gains=buffer)
        q = np.array(t["trajectory"][1:size + 1, 1:n + 1])  # SL's 1-based rows and joints
        return TrajectoryCommand(self._episode_id, index - 1, max_commands - 1, q, wait_time=wait_time)

    def _write_steps(self, sl_id: int) -> None:
        """The running or last episode's motion steps into episode_steps (at most EPISODE_STEPS)."""
        steps, s = self.runner.get_episode(copy=False), self.steps
        motion = np.flatnonzero(np.asarray(steps["index"]) >= 1)[:EPISODE_STEPS]
        m = len(motion)
        for name, column in JOINT_ARRAYS:
            s[name][:m] = np.asarray(steps[column])[motion]
        s["cart"][:m, :3] = np.asarray(steps["ee_pos"])[motion]
        s["cart"][:m, 3:] = np.asarray(steps["ee_quat"])[motion]
        s["state"][:m] = 0.0
        task_state = np.asarray(steps["task_state"])[motion]
        for row, source in enumerate(self._rows):
            if source is not None:
                s["state"][:m, row] = task_state[:, source]
        s["stepInTrajectory"][:m] = np.asarray(steps["step"])[motion] + 1
        s["commandIdx"][:m] = np.asarray(steps["index"])[motion] + 1
        s["doMotionIdx"][:m] = 1
        s["numTransmittedSteps"] = m
        s["episodeID"] = sl_id

    def close(self) -> None:
        """Remove the segments and semaphores this runner created."""
        for views in ("state", "trajectory", "steps"):
            self.__dict__.pop(views, None)
        for thing in reversed(self._made):
            try:
                if isinstance(thing, sysv_ipc.SharedMemory):
                    thing.detach()
                thing.remove()
            except (sysv_ipc.Error, OSError) as exc:
                log.warning("could not remove SL's SysV object %s: %s", thing.key, exc)
        self._made.clear()


class _held:
    """A SysV mutex semaphore taken for a ``with`` block."""

    def __init__(self, semaphore):
        self.semaphore = semaphore

    def __enter__(self) -> None:
        self.semaphore.acquire()

    def __exit__(self, *exc: object) -> None:
        self.semaphore.release()
