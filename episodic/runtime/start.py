"""The start routine of an episode: the go-to-start, and the exact start after it.

GOTO_START (``go_to_start``) is a minimum-jerk move to the start posture within the robot's goto
limits, then holding until "close and slow": the arm within the goto tolerances of the posture,
still moving a little, the solver's warmstart and the objects wherever the previous episodes left
them. Passive joints, which cannot be driven, are neither moved nor waited for. "Close" allows on
each joint, beyond the robot's tolerance_q, the static error its PD gains leave under the weight
of what the arm carries besides itself and its tool (``carried_sag``: ball_in_cup's hanging ball
and string sag j6 by about 3 mrad, over the WAM's 2 mrad, so without it that settle never
succeeded and every go-to-start held for the whole settle_time). Gravity compensation covers the
robot and its tool only: compensating the load as well would change the torques of every
episode's motion (and the replay of every log written before), and on a robot the load's weight
and where it hangs are not known to the joint controller; the allowance instead states how far
from the posture the arm rests under that load, and no waiting can remove it. A replay of a log
written before it (no ``goto_start``) waits as that run did (``carried=False``).

Exact start (``restart_exactly``; a backend that can, ``Backend.can_start_exactly``: a blocking
simulation). So that an episode depends only on its own commands, the task, the seed and the
software versions, never on the episodes before it, the simulation is put in the exact start
state after the go-to-start (``Backend.reset`` to the posture; the task's ``reset`` follows,
episodic.runtime.machine). Since nothing of a go-to-start followed by the exact start can reach
the episode, the machine does not simulate it (``EpisodeMachine.skip_goto_start``): it goes
through GOTO_START to the exact start state at once (``start_exactly``), so the log holds no
GOTO_START steps (as for a go-to-start that had nothing to do, the robot already at rest at the
posture) and the start's reply says 0 steps; the episode's ``goto_start`` attribute says
"skipped" (else "ran"; a log written before the skip lacks it, and a replay of such an episode
runs its go-to-start as it ran). The exact start state:

- the whole integration state (mjSTATE_INTEGRATION) as ``mj_resetData`` leaves it: time 0;
  qvel, act, qacc_warmstart, ctrl, qfrc_applied, xfrc_applied, userdata 0; every qpos the
  model's qpos0; mocap poses, equality activations, actuator history, plastic and plugin state
  the model's defaults;
- the robot's joints exactly at the start posture, at rest: the passive ones too (the start
  posture's value, e.g. pole_balancing's hanging j7), which the go-to-start cannot drive;
- the model's actuator gains those the go-to-start ran with (a later run sets its own), the
  controller's integral term 0.

The state a go-to-start that ran really reached is returned (mjSTATE_INTEGRATION; the machine
keeps it as ``settled_state``, None after a skipped one). The log's ``time`` column counts from
the exact start: the GOTO_START steps, which ran at the time the previous episode left, are
shifted by the time the move ended (so negative, ending at -control_dt), and the motion starts
at 0. In realtime mode and on a driven robot nothing is restored: the episode starts where the
go-to-start left the robot.
"""
from __future__ import annotations

from collections.abc import Callable

import mujoco
import numpy as np

from episodic.interface.trajectory import Desired, min_jerk, min_jerk_duration
from episodic.interface.vocabulary import Feedforward
from episodic.runtime.backend import Backend
from episodic.runtime.control import Gains, Stop
from episodic.runtime.motion_clock import control_steps
from episodic.runtime.scene import STATE_SPEC, Scene
from episodic.runtime.simulation import StepRecord

SETTLE_CHUNK = 0.05  # s of holding between "close and slow" checks in GOTO_START


class CarriedSag:
    """``carried_sag`` for one scene, on scratch simulation data made once: two MjData, a few ms
    to make each, where the rest of the check takes tens of us (so a paced go-to-start's settle
    check fits between two ticks); ``mj_resetData`` before each use leaves them as new. Made at
    the first use, or at once when ``now`` (a paced run's first check then costs no more than the
    others). Not shared between threads."""

    def __init__(self, scene: Scene, now: bool = False) -> None:
        self.scene = scene
        self._data: tuple[mujoco.MjData, mujoco.MjData] | None = None
        if now:
            self._data = mujoco.MjData(scene.model), mujoco.MjData(scene.dynamics)

    def __call__(self, state: np.ndarray, gains: Gains) -> np.ndarray:
        """(n_dofs,) rad: the static error ``gains`` leave on each joint under the weight of what
        the arm carries in the scene's ``state`` (mjSTATE_INTEGRATION) besides itself and its tool
        (module docstring): the torque that holds the scene still in this configuration
        (mj_inverse at rest, qvel and qacc 0) less what contacts take (pressing on an obstacle is
        no load) and less the robot's and its tool's own static torque (``scene.dynamics``; all of
        it is left to the gains under Feedforward.NONE), over kp; 0 where kp is 0."""
        scene = self.scene
        m = scene.model
        if self._data is None:
            self._data = mujoco.MjData(m), mujoco.MjData(scene.dynamics)
        d, own = self._data
        mujoco.mj_resetData(m, d)
        mujoco.mj_resetData(scene.dynamics, own)
        mujoco.mj_setState(m, d, state, STATE_SPEC)
        d.qvel[:] = 0.0  # at rest (qacc is 0 after mj_resetData, and mjSTATE_INTEGRATION sets none)
        mujoco.mj_inverse(m, d)
        contact = np.where(d.efc_type >= int(mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS), d.efc_force, 0.0)
        by_contacts = np.zeros(m.nv)
        mujoco.mj_mulJacTVec(m, d, by_contacts, contact)
        own.qpos[:] = d.qpos[scene.qpos_adr]
        mujoco.mj_inverse(scene.dynamics, own)
        load = (d.qfrc_inverse + by_contacts)[scene.dof_adr]  # qfrc_inverse counts the contacts' force against it
        if gains.feedforward != Feedforward.NONE:
            load = load - own.qfrc_inverse
        sag: np.ndarray = np.divide(np.abs(load), gains.kp, out=np.zeros_like(load), where=gains.kp > 0)
        return sag


def carried_sag(scene: Scene, state: np.ndarray, gains: Gains) -> np.ndarray:
    """:class:`CarriedSag` of ``scene`` once: (n_dofs,) rad, the static error ``gains`` leave on
    each joint under the weight of what the arm carries in ``state`` besides itself and its tool."""
    return CarriedSag(scene)(state, gains)


def go_to_start(sim: Backend, scene: Scene, target: np.ndarray, gains: Gains, passive: np.ndarray,
                interrupted: Callable[[], bool] | None, record: Callable[[StepRecord], None],
                carried: bool = True, sag: CarriedSag | None = None) -> None:
    """Move ``sim``'s robot (``scene``'s) to ``target`` (n_dofs,) rad under ``gains`` and hold
    until close and slow or robot.goto.settle_time s have passed; joints where ``passive``
    (n_dofs,) bool stay where they are. "Close": within tolerance_q and, when ``carried``, the
    ``carried_sag`` of the moment (worked out by ``sag``, else on data made for this call).
    ``interrupted()`` (a paced backend; else None) ends the move at the next tick when true. The
    move and its holds are handed to ``record`` as one StepRecord (also when a run fails part-way:
    what ran is kept), so that the log and the bridge's log block take the go-to-start in one
    piece."""
    robot = scene.robot
    goto = robot.goto
    q0 = sim.q
    driven = ~passive
    goal = np.where(driven, target, q0)
    stop: Stop | None = None if interrupted is None else (lambda *_: interrupted())
    sag = sag or CarriedSag(scene)
    duration = min_jerk_duration(q0, goal, goto.max_velocity, goto.max_acceleration)
    records: list[StepRecord] = []
    try:
        if duration > 0:
            records.append(sim.run(min_jerk(q0, goal, duration, robot.control_dt), gains, stop=stop))
        chunk = max(control_steps(SETTLE_CHUNK, robot.control_rate), 1)
        for _ in range(int(np.ceil(goto.settle_time / SETTLE_CHUNK))):
            if (np.max(np.abs(sim.qd)[driven], initial=0.0) < goto.tolerance_qd
                    and _close(sim, scene, target, gains, driven, sag if carried else None)) \
                    or (interrupted is not None and interrupted()):
                break
            records.append(sim.run(Desired.hold(target, chunk), gains, stop=stop))
    finally:
        if records:  # (joined, an empty run adds no rows)
            record(records[0] if len(records) == 1 else StepRecord.join(records))


def _close(sim: Backend, scene: Scene, target: np.ndarray, gains: Gains, driven: np.ndarray,
           sag: CarriedSag | None) -> bool:
    """Whether ``sim``'s ``driven`` joints are within tolerance_q of ``target``, or, given ``sag``,
    within it and their carried sag (worked out only then)."""
    error = np.abs(sim.q - target)[driven]
    tolerance = scene.robot.goto.tolerance_q
    return bool(np.all(error < tolerance)
                or sag is not None and np.all(error < tolerance + sag(sim.get_state(), gains)[driven]))


def start_exactly(sim: Backend, target: np.ndarray, gains: Gains) -> None:
    """Put ``sim`` at rest exactly at ``target`` (n_dofs,) rad, everything else at the model's
    defaults, the model's gains ``gains``, the integral term 0: the exact start state (module
    docstring). Where the go-to-start is skipped, this is all of it."""
    sim.reset(target)  # mj_resetData, the robot at target, mj_forward, integral 0
    sim.apply_gains(gains)


def restart_exactly(sim: Backend, target: np.ndarray, gains: Gains, blocks: list[dict[str, np.ndarray]]) -> np.ndarray:
    """After the go-to-start: shift the "time" of the logged ``blocks`` so that they end at the
    start, put ``sim`` at rest exactly at ``target`` (n_dofs,) rad, everything else at the
    model's defaults, the model's gains ``gains``, the integral term 0 (module docstring); return
    the state the go-to-start reached (mjSTATE_INTEGRATION)."""
    settled = sim.get_state()
    end = float(sim.data.time)
    for block in blocks:
        block["time"] = block["time"] - end
    start_exactly(sim, target, gains)
    return settled
