"""Demonstrations for imitation learning: a joint trajectory taken from a run log, or taught in
simulation by guiding the arm's hand (a stand-in for kinesthetic teaching), saved in a documented
HDF5 file.

A :class:`Demonstration` is t (n,) s (0, dt, 2 dt, ...), q (n, n_dofs) rad, qd (n, n_dofs) rad/s
and qdd (n, n_dofs) rad/s^2 at the robot's control rate, with the robot, the task and its
parameters it was recorded on, where it came from (``source``) and what makes it reproducible
(``metadata``: seed, software versions, the teaching's settings). It may also carry the task's
state columns per step (``task_state``), e.g. where the ball went during the demonstration.

- :func:`from_log`: the motion of one episode of a run log (its steps from the first of segment
  1 to the end), with the logged q, qd and qdd.
- :func:`kinesthetic`: the arm, under gravity compensation and a small joint damping, moved by a
  spring-damper between its hand and a scripted teacher's hand pose.
- :func:`ball_in_cup_demonstration`: the ball-in-a-cup demonstration, taught along the hand
  path of a swing close to ``episodic.tasks.ball_in_cup_swing.REFERENCE_SWING``; like Kober & Peters' human
  demonstration it misses the cup by centimetres.
- :func:`demonstration_commands`: one episode's commands that execute a demonstration.
- :class:`BallFlight`: where the ball of ball_in_cup crossed the rim plane, from its state columns.

File layout (``Demonstration.save`` / ``Demonstration.load``; HDF5, any HDF5 library reads it)::

    /            attributes:
                   format          "episodic-demonstration"
                   format_version  1
                   robot           the robot's name (a folder of robots/), e.g. "wam"
                   task            the task's name, e.g. "ball_in_cup"
                   task_params     JSON object: the task's parameters, name -> value
                   joint_names     the robot's joint names, in the column order of q
                   source          where it came from: "log runs/x.h5 episode 3", "kinesthetic ..."
                   metadata        JSON object: derivatives ("recorded" or "numpy.gradient": how
                                   qd and qdd were obtained), seed, versions (software versions
                                   that wrote it), and what else the source records
    /t           (n,) float64, s: 0, dt, 2 dt, ... (dt the robot's control period)
    /q           (n, n_dofs) float64, rad: joint positions
    /qd          (n, n_dofs) float64, rad/s: joint velocities
    /qdd         (n, n_dofs) float64, rad/s^2: joint accelerations
    /task_state  optional, (n, n_state) float64: the task's state columns per step,
                 attribute columns: their names (see `episodic tasks`)

Shapes as h5py (row-major) shows them; Octave and Matlab see each matrix transposed.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

from episodic.interface.commands import Command
from episodic.interface.files import SHARED, HostileFileError, check_links, check_regular, read_array, replacing
from episodic.interface.robot import Robot, check_named_by_file, load_robot
from episodic.learning.primitives import JointTrajectory
from episodic.logs import read_episodes, read_metadata
from episodic.logs.layout import software_versions
from episodic.runtime.scene import Scene, build_scene
from episodic.task import StepView, Task

FORMAT = "episodic-demonstration"
FORMAT_VERSION = 1
ARRAYS = ("t", "q", "qd", "qdd")
RECORDED = "recorded"
GRADIENT = "numpy.gradient"

# -- the teacher's hand (kinesthetic) ----------------------------------------------------------
# The teacher as the equilibrium-point model of human arm control has it: a spring-damper from the
# robot's hand to where the teacher means the hand to be (``guide``). 2000 N/m is stiffer than a
# relaxed human arm (a few hundred N/m at the hand in posture: Mussa-Ivaldi, Hogan & Bizzi 1985),
# a teacher who grips the hand and co-contracts; it is chosen so that the WAM's hand, of 1.8, 2.2
# and 5.5 kg effective mass at the ball-in-a-cup start posture (``hand_inertia``), follows at 3.0
# to 5.3 Hz and keeps within 18 mm of the guide in the 2.15 s swing (measured). A stiffer teacher
# tracks more closely (5000 N/m: within 7 mm) and the demonstration becomes the guide's path.
TEACHER_STIFFNESS = 2000.0  # N/m
# The rotational spring of a grip: the translational stiffness over a hand's lever of GRIP m,
# K GRIP^2 = 20 N m/rad by default, which turns the WAM's hand (0.00075, 0.011 and 0.045 kg m^2)
# at 3.4 to 26 Hz; the hand's orientation keeps within 0.11 rad of the guide's in the swing.
GRIP = 0.1  # m
# Both dampers are critically damped for the hand's effective mass and inertia at the start posture
# (geometric means of the principal values: 2.8 kg and 0.0071 kg m^2 for the ball-in-a-cup start);
# they act on the hand's velocity relative to the guide's.
TEACHER_DAMPING_RATIO = 1.0
# The teacher's force is explicit (set before each physics step from the state then), so the
# teaching steps at most this long, s: the hand's fastest mode, the flange turning about its own
# axis (inertia 0.00075 kg m^2 with the ball-in-a-cup cup, less bare), oscillates at up to 26 Hz
# and its damper would turn a 2 ms step unstable. Tasks with a longer physics step (reach,
# ball_on_beam, pole_balancing: 2 ms) are taught at this one.
TEACHING_STEP = 0.0005
# A person holding a compliant arm: each joint damped by this fraction of the robot's damping gain
# kd (WAM: 0.005 to 1.5 N m s/rad), which damps the motion the 6-D hand spring leaves free to a
# 7-joint arm (the elbow turning about the shoulder-wrist line) while the hand spring dominates.
JOINT_DAMPING = 0.1

# -- the ball-in-a-cup demonstration -------------------------------------------------------------
BALL_IN_CUP = "ball_in_cup"
# rad added to every elbow knot of REFERENCE_SWING (episodic.tasks.ball_in_cup_swing.bent_swing): the bend of the
# PoWER example's missing start swing. At the task's defaults (a 5 kN/m string, contacts that keep
# their restitution when sliding) the ball, taught along its hand path, rises 0.047 m above the rim
# and comes down 0.313 m from the cup's axis; the recording executed by the runner catches (return
# 3.99); the PoWER example's DMP imitation of it (10 weights per joint) lifts it 0.243 m and it
# comes down 0.080 m from the axis (return 2.275). (With the earlier 0.67 kN/m string and contacts:
# 0.29 m taught, 0.21 m executed.) With stiffnesses of 1000 to 5000 N/m, a grip of 0.12 m, a damping ratio of 0.8 or
# twice the joint damping, the teaching misses by 0.19 to 0.34 m and the execution by 0.19 to
# 0.24 m; from 0.045 rad alike. (Closer to REFERENCE_SWING the execution flips between catches and
# near misses: at 0.015 rad it misses by 0.09 m, and catches when taught at 2200 N/m.)
DEMO_OFFSET = 0.05
DEMO_HOLD = 1.0    # s the teacher holds the hand still after the swing (the ball comes down meanwhile)


class DemonstrationError(ValueError):
    """A file is not a demonstration, or a demonstration cannot be made from what was given; the
    message names the file and what is wrong."""


@dataclass(eq=False)
class Demonstration:
    """A demonstrated joint trajectory at the control rate.

    t: (n,) s, 0, dt, 2 dt, ...; q: (n, n_dofs) rad; qd: (n, n_dofs) rad/s; qdd: (n, n_dofs)
    rad/s^2; robot, task: names; task_params: the task's parameters (name -> value);
    joint_names: the columns of q; source: where it came from; metadata: what makes it
    reproducible (JSON types: derivatives, seed, versions, ...); task_state: (n, n_state) the
    task's state columns per step, or None; state_columns: their names."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    robot: str
    task: str
    task_params: dict
    joint_names: list[str]
    source: str
    metadata: dict = field(default_factory=dict)
    task_state: np.ndarray | None = None
    state_columns: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.t)
        shapes = {name: np.shape(getattr(self, name)) for name in ARRAYS}
        if n < 2 or shapes["t"] != (n,) or any(shapes[k] != (n, len(self.joint_names)) for k in ARRAYS[1:]):
            raise DemonstrationError(f"a demonstration needs t (n,) with n >= 2 and q, qd, qdd (n, n_dofs) for "
                                     f"{len(self.joint_names)} joints; got {shapes}")
        if self.task_state is not None and np.shape(self.task_state) != (n, len(self.state_columns)):
            raise DemonstrationError(f"task_state must be (n, n_state) = ({n}, {len(self.state_columns)}), "
                                     f"got {np.shape(self.task_state)}")

    @classmethod
    def from_positions(cls, q: np.ndarray, dt: float, *, qd: np.ndarray | None = None,
                       qdd: np.ndarray | None = None, **fields) -> Demonstration:
        """A demonstration of q (n, n_dofs) rad sampled every dt s, with qd rad/s and qdd rad/s^2
        as given, or where not given by ``numpy.gradient`` (second order inside, first at the
        ends); metadata["derivatives"] says which. ``fields``: the other fields."""
        q = np.asarray(q, float)
        recorded = qd is not None and qdd is not None
        qd = np.gradient(q, dt, axis=0) if qd is None else np.asarray(qd, float)
        qdd = np.gradient(qd, dt, axis=0) if qdd is None else np.asarray(qdd, float)
        fields["metadata"] = {**fields.get("metadata", {}), "derivatives": RECORDED if recorded else GRADIENT}
        return cls(t=np.arange(len(q)) * dt, q=q, qd=qd, qdd=qdd, **fields)

    @property
    def dt(self) -> float:
        """Sample period, s."""
        return float(self.t[1] - self.t[0])

    @property
    def duration(self) -> float:
        """s from the first sample to the last."""
        return float(self.t[-1] - self.t[0])

    def state(self, name: str) -> np.ndarray:
        """The task state column ``name`` (n,); KeyError names the columns there are."""
        if self.task_state is None or name not in self.state_columns:
            raise KeyError(f"the demonstration has no task state column '{name}'; it has: "
                           f"{', '.join(self.state_columns) or 'none'}")
        return self.task_state[:, self.state_columns.index(name)]

    # -- file ------------------------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the file layout of the module docstring at ``path``; an existing file is
        refused (FileExistsError) unless ``overwrite``. The file is written under a temporary
        name in the same folder and renamed onto ``path`` when whole (a link planted at ``path``
        is replaced, never written through)."""
        path = Path(path)
        if os.path.lexists(path) and not overwrite:
            raise FileExistsError(f"{path} exists; choose another path, or overwrite it "
                                  f"(save(..., overwrite=True), episodic demonstrate --overwrite)")
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path, overwrite, mode=SHARED) as tmp, h5py.File(tmp, "w") as f:
            f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, robot=self.robot, task=self.task,
                           task_params=json.dumps(self.task_params), joint_names=list(self.joint_names),
                           source=self.source, metadata=json.dumps(self.metadata))
            for name in ARRAYS:
                f.create_dataset(name, data=np.asarray(getattr(self, name), float))
            if self.task_state is not None:
                f.create_dataset("task_state", data=np.asarray(self.task_state, float))
                f["task_state"].attrs["columns"] = list(self.state_columns)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Demonstration:
        """Read a file written by ``save``; DemonstrationError names the file and what is wrong
        (FileNotFoundError when there is none)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
        try:
            check_regular(path)  # a FIFO or a device is refused before it is opened
            f = h5py.File(path, "r")
        except HostileFileError as exc:
            raise DemonstrationError(str(exc)) from None
        except OSError as exc:
            raise DemonstrationError(f"{path} is not a demonstration: not an HDF5 file ({exc})") from None
        with f:
            try:
                check_links(f)
            except HostileFileError as exc:
                raise DemonstrationError(str(exc)) from None
            fmt = f.attrs.get("format")
            fmt = None if fmt is None else _text(fmt)
            if fmt != FORMAT:
                hint = (" (an episodic run log: turn one of its episodes into a demonstration with "
                        "`episodic demonstrate --from-log LOG.h5 --episode N`)") if "episodes" in f else ""
                raise DemonstrationError(f"{path} is not a demonstration: its format attribute is {fmt!r}, "
                                         f"not {FORMAT!r}{hint}")
            version = f.attrs.get("format_version")
            if version != FORMAT_VERSION:
                raise DemonstrationError(f"{path} is a demonstration of format_version {version}; this version of "
                                         f"episodic reads format_version {FORMAT_VERSION}: use a matching episodic")
            missing = [k for k in ("robot", "task", "task_params", "joint_names", "source", "metadata")
                       if k not in f.attrs] + [f"/{k}" for k in ARRAYS if k not in f]
            if missing:
                raise DemonstrationError(f"{path} is a damaged demonstration: it lacks {', '.join(missing)}")
            state = f.get("task_state")
            try:
                return cls(**{k: read_array(f[k]) for k in ARRAYS}, robot=_text(f.attrs["robot"]),
                           task=_text(f.attrs["task"]), task_params=json.loads(_text(f.attrs["task_params"])),
                           joint_names=[_text(n) for n in f.attrs["joint_names"]], source=_text(f.attrs["source"]),
                           metadata=json.loads(_text(f.attrs["metadata"])),
                           task_state=None if state is None else read_array(state),
                           state_columns=[] if state is None else [_text(c) for c in state.attrs["columns"]])
            except (ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError) as exc:
                # DemonstrationError, JSON that is not JSON or nested too deep, a part of the wrong kind
                why = "JSON nested too deep" if isinstance(exc, RecursionError) else str(exc).splitlines()[0]
                raise DemonstrationError(f"{path} is a damaged demonstration: {why}") from None


def _text(value: Any) -> str:
    """An HDF5 attribute's text (stored as bytes or str)."""
    return value.decode() if isinstance(value, bytes) else str(value)


# -- from a log ------------------------------------------------------------------------------------
def from_log(path: str | Path, episode: int) -> Demonstration:
    """The motion of episode number ``episode`` (its place in the log, as `episodic info` shows
    it) of the run log at ``path``: the logged q, qd, qdd and task state of its steps from the
    first step of segment 1 (index 1: the machine's DO_MOTION) to the end of the episode, time
    from 0. DemonstrationError when the episode has no motion steps or the log cannot be read."""
    path = Path(path)
    try:
        meta = read_metadata(path)
        (stored,) = read_episodes(path, [episode])
        robot, task, rate = str(meta["robot"]), str(meta["task"]), float(meta["control_rate"])
        check_named_by_file(robot)  # a log names its robot; a path it names is never followed
        joint_names = list(meta["robot_settings"]["joint_names"])
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise DemonstrationError(f"cannot take episode {episode} of {path}: {exc}") from None
    steps = stored.steps
    motion = np.flatnonzero(steps["index"] >= 1) if "index" in steps else np.zeros(0, int)
    if motion.size < 2:
        raise DemonstrationError(f"episode {episode} of {path} has {motion.size} motion steps, too few for a "
                                 f"demonstration (its flag: {stored.attrs.get('flag_name', '?')}, "
                                 f"{stored.attrs.get('message', '')})")
    rows = slice(int(motion[0]), None)
    attrs = stored.attrs
    return Demonstration.from_positions(
        steps["q"][rows], 1.0 / rate, qd=steps["qd"][rows], qdd=steps["qdd"][rows], robot=robot, task=task,
        task_params=dict(meta.get("task_params", {})), joint_names=joint_names, source=f"log {path} episode {episode}",
        metadata={"seed": meta.get("seed"), "versions": software_versions(), "log_versions": meta.get("versions"),
                  "episode_id": attrs.get("episode_id"), "flag": attrs.get("flag_name"),
                  "return": attrs.get("return"), "success": bool(attrs.get("success", False)),
                  "log_created": meta.get("created")},
        task_state=steps["task_state"][rows] if "task_state" in steps else None,
        state_columns=list(stored.state_columns))


# -- kinesthetic teaching in simulation --------------------------------------------------------------
Guide = Callable[[float], tuple[np.ndarray, np.ndarray]]


def hand_inertia(scene: Scene, q: np.ndarray) -> tuple[float, float]:
    """The arm's effective mass kg and rotational inertia kg m^2 at its hand (the robot's end
    effector site) at posture q (n_dofs,) rad: the geometric means of the principal values of the
    translational and the rotational 3 x 3 blocks of the hand's operational-space inertia
    (J M^-1 J^T)^-1 (6 x 6, J the site's Jacobian), for the robot and its tool alone
    (``scene.dynamics``: rotor inertias included)."""
    model = scene.dynamics
    data = mujoco.MjData(model)
    data.qpos[:] = q
    mujoco.mj_forward(model, data)
    jp, jr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    mujoco.mj_jacSite(model, data, jp, jr, model.site(scene.robot.end_effector_site).id)
    mass = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, mass)
    jac = np.vstack([jp, jr])
    spatial = np.linalg.inv(jac @ np.linalg.solve(mass, jac.T))
    translational, rotational = (float(np.prod(np.linalg.eigvalsh(block)) ** (1 / 3))
                                 for block in (spatial[:3, :3], spatial[3:, 3:]))
    return translational, rotational


def _guide_path(guide: Guide, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The teacher's hand at ``times`` (m,) s: positions (m, 3) m, orientations (m, 4) as
    quaternions (w, x, y, z), velocities (m, 3) m/s and angular velocities (m, 3) rad/s (world
    frame; by central differences inside, one-sided at the ends)."""
    poses = [guide(float(t)) for t in times]
    position = np.array([np.asarray(p, float) for p, _ in poses])
    rotation = Rotation.from_matrix(np.array([np.asarray(r, float) for _, r in poses]))
    velocity = np.gradient(position, times, axis=0)
    ahead, behind = np.r_[1 : len(times), len(times) - 1], np.r_[0, 0 : len(times) - 1]
    turn = (rotation[ahead] * rotation[behind].inv()).as_rotvec()
    angular = turn / (times[ahead] - times[behind])[:, None]
    return position, rotation.as_quat(scalar_first=True), velocity, angular


def kinesthetic(task: Task | str, robot: Robot | str, guide: Guide, duration: float, *, context=None, seed: int = 0,
                stiffness: float = TEACHER_STIFFNESS, grip: float = GRIP,
                damping_ratio: float = TEACHER_DAMPING_RATIO, joint_damping: float = JOINT_DAMPING,
                source: str = "kinesthetic", metadata: dict | None = None) -> Demonstration:
    """Teach ``task`` (a Task or its name) on ``robot`` by guiding the arm's hand for ``duration``
    s (a stand-in for kinesthetic teaching) and record q, qd, qdd and the task's state at the
    control rate.

    The task's scene (arm, tool and objects, as the runner builds it) starts as an episode does:
    the arm at rest at the task's start posture, the task's objects placed by its episode
    initialisation from ``context`` (None: the task's default) with the random generator of a
    run's first episode of seed ``seed``. The arm is under gravity compensation only (MuJoCo's,
    through the controller's actuators, which otherwise only damp each joint with
    ``joint_damping`` times the robot's kd). ``guide(t)`` -> (position (3,) m, rotation matrix
    (3, 3)), world frame: where the teacher's hand holds the robot's hand (its end-effector site,
    the flange) at t s. At every physics step (at most TEACHING_STEP s) a spring-damper pulls the
    hand towards it, applied as an external force and torque on the hand's body
    (``xfrc_applied``): force K (p_g - p) + D (v_g - v) at the site with K = ``stiffness`` N/m,
    and torque K grip^2 theta + D_r (w_g - w) with theta the rotation vector from the hand's
    orientation to the guide's and ``grip`` m; D and D_r critically damped (``damping_ratio``) for
    the hand's effective mass and inertia at the start posture (``hand_inertia``). Why these
    values: the notes at TEACHER_STIFFNESS, GRIP, TEACHER_DAMPING_RATIO and JOINT_DAMPING. The
    guide's velocities are finite differences of its poses at the physics steps.

    Returns the demonstration: n = round(duration / dt) samples at t = 0, dt, ... (dt the
    control period): q and qd at the start of each control step, qdd the mean acceleration over
    it, the task's state columns, and in metadata the teaching's settings, the guide's largest
    distance from the hand (m and rad) and the task's return over the teaching. RuntimeError when
    the simulation becomes unstable (lower the stiffness)."""
    from episodic.tasks import make_task

    task = make_task(task) if isinstance(task, str) else task
    robot = load_robot(robot) if isinstance(robot, str) else robot
    dt = robot.control_dt
    n = int(round(duration / dt))
    if n < 2:
        raise ValueError(f"a demonstration lasts at least two control steps ({2 * dt} s); got {duration} s")
    scene = build_scene(robot, task)
    context = np.zeros(0) if context is None else np.asarray(context, float)
    data = _compliant_start(scene, task, context, seed, joint_damping)
    start = task.start_posture(robot)
    mass, inertia = hand_inertia(scene, start)
    hand = _Hand(stiffness, stiffness * grip**2, 2 * damping_ratio * np.sqrt(stiffness * mass),
                 2 * damping_ratio * np.sqrt(stiffness * grip**2 * inertia))
    qpos, qvel, sensordata, errors = _teach(scene, data, hand, guide, n)
    view = StepView(qpos=qpos[:n], qvel=qvel[:n], sensordata=sensordata, u=scene.applied_torque(sensordata),
                    ee_pos=scene.sensor(sensordata, "ee_pos"), dt=dt, sensors=scene.sensors)
    task_state = task.state(view)
    arm_qd = qvel[:, scene.dof_adr]
    return Demonstration.from_positions(
        qpos[:n, scene.qpos_adr], dt, qd=arm_qd[:n], qdd=np.diff(arm_qd, axis=0) / dt,
        robot=robot.name, task=task.name, task_params=task.params(), joint_names=list(robot.joint_names),
        source=source,
        metadata={"seed": int(seed), "versions": software_versions(), "context": context.tolist(),
                  "stiffness": hand.stiffness, "rotational_stiffness": hand.rotational_stiffness,
                  "damping": hand.damping, "rotational_damping": hand.rotational_damping,
                  "joint_damping": (joint_damping * robot.kd).tolist(), "hand_mass": mass, "hand_inertia": inertia,
                  "physics_step": float(scene.model.opt.timestep),
                  "guide_error_max": errors[0], "guide_error_max_rad": errors[1],
                  "return": float(np.sum(task.step_reward(view, task_state))), **(metadata or {})},
        task_state=task_state, state_columns=list(task.columns))


@dataclass(frozen=True)
class _Hand:
    """The teacher's spring-damper: N/m, N m/rad, N s/m, N m s/rad."""

    stiffness: float
    rotational_stiffness: float
    damping: float
    rotational_damping: float


def _compliant_start(scene: Scene, task: Task, context: np.ndarray, seed: int, joint_damping: float) -> mujoco.MjData:
    """Fresh data of the scene's model at the start of an episode (the arm at rest at the task's
    start posture, the task reset from ``context`` with the generator of episode 0 of ``seed``),
    the model's physics step at most TEACHING_STEP, and the controller's actuators turned into
    joint dampers of ``joint_damping`` times the robot's kd (no position gain, ctrl 0), MuJoCo's
    gravity compensation still routed through them."""
    model, robot = scene.model, scene.robot
    model.opt.timestep = robot.control_dt / max(scene.substeps, int(np.ceil(robot.control_dt / TEACHING_STEP - 1e-9)))
    data = mujoco.MjData(model)
    data.qpos[scene.qpos_adr] = task.start_posture(robot)
    mujoco.mj_forward(model, data)
    task.reset(model, data, context, np.random.default_rng((int(seed), 0)))
    mujoco.mj_forward(model, data)
    model.actuator_biasprm[scene.actuator, 1] = 0.0
    model.actuator_biasprm[scene.actuator, 2] = -joint_damping * robot.kd
    scene.set_passive(model, np.zeros(robot.n_dofs, bool))
    return data


def _teach(scene: Scene, data: mujoco.MjData, hand: _Hand, guide: Guide,
           n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[float, float]]:
    """n control steps of the hand pulled towards ``guide``: qpos (n + 1, nq) and qvel (n + 1,
    nv) at the start of each control step and after the last, sensordata (n, nsensordata) of each
    control step (as the runner records it), and the largest distance of the hand from the guide,
    m and rad."""
    model = scene.model
    sub = int(round(scene.robot.control_dt / model.opt.timestep))
    goal_p, goal_q, goal_v, goal_w = _guide_path(guide, np.arange(n * sub) * model.opt.timestep)
    site = model.site(scene.robot.end_effector_site).id
    body = int(model.site_bodyid[site])
    qpos, qvel = np.empty((n + 1, model.nq)), np.empty((n + 1, model.nv))
    sensordata = np.empty((n, model.nsensordata))
    offset, turn = np.empty((n * sub, 3)), np.empty((n * sub, 3))  # hand to guide: m, and rad (hand frame)
    velocity, quat, lever = np.empty(6), np.empty(4), np.empty(3)
    for k in range(n * sub):
        if k % sub == 0:
            qpos[k // sub], qvel[k // sub] = data.qpos, data.qvel
        mujoco.mj_step1(model, data)
        p = data.site_xpos[site]
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, site, velocity, 0)
        mujoco.mju_mat2Quat(quat, data.site_xmat[site])
        mujoco.mju_subQuat(turn[k], goal_q[k], quat)
        offset[k] = goal_p[k] - p
        force = hand.stiffness * offset[k] + hand.damping * (goal_v[k] - velocity[3:])
        torque = (hand.rotational_stiffness * (data.site_xmat[site].reshape(3, 3) @ turn[k])
                  + hand.rotational_damping * (goal_w[k] - velocity[:3]))
        mujoco.mju_cross(lever, p - data.xipos[body], force)
        data.xfrc_applied[body, :3] = force
        data.xfrc_applied[body, 3:] = torque + lever
        mujoco.mj_step2(model, data)
        if k % sub == 0:
            sensordata[k // sub] = data.sensordata
    qpos[n], qvel[n] = data.qpos, data.qvel
    if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number or not np.all(np.isfinite(qvel)):
        raise RuntimeError(f"the teaching's simulation became unstable (stiffness {hand.stiffness} N/m); lower "
                           f"the stiffness or slow the guide")
    return qpos, qvel, sensordata, (float(np.max(np.linalg.norm(offset, axis=1))),
                                    float(np.max(np.linalg.norm(turn, axis=1))))


# -- ball in a cup ---------------------------------------------------------------------------------
def swing_guide(scene: Scene, start: np.ndarray, swing) -> Guide:
    """The teacher's hand for ``swing`` (an ``episodic.tasks.ball_in_cup_swing.Swing``) from posture ``start``
    (n_dofs,) rad: the pose of the hand (the robot's end-effector site) along the swing's joint
    trajectory (``episodic.tasks.ball_in_cup_swing.swing_trajectory`` at the physics step, linear in between), by
    forward kinematics (``mujoco.mj_kinematics``) of the scene's model; held at the last
    posture after the swing."""
    from episodic.tasks.ball_in_cup_swing import swing_trajectory

    robot, model = scene.robot, scene.model
    h = model.opt.timestep
    path = np.vstack([start, swing_trajectory(start, swing, h)[0]])  # at t = 0, h, 2 h, ...
    data, site = mujoco.MjData(model), model.site(robot.end_effector_site).id

    def guide(t: float) -> tuple[np.ndarray, np.ndarray]:
        s = min(max(t / h, 0.0), len(path) - 1.0)
        i = min(int(s), len(path) - 2)
        data.qpos[scene.qpos_adr] = path[i] + (s - i) * (path[i + 1] - path[i])
        mujoco.mj_kinematics(model, data)
        return data.site_xpos[site].copy(), data.site_xmat[site].reshape(3, 3).copy()

    return guide


def ball_in_cup_demonstration(robot: Robot | str = "wam", *, offset: float = DEMO_OFFSET, hold: float = DEMO_HOLD,
                              seed: int = 0, task_params: dict | None = None, **teaching) -> Demonstration:
    """The ball-in-a-cup demonstration: the teacher guides the hand (``kinesthetic``, settings
    ``teaching``) along the hand path of ``episodic.tasks.ball_in_cup_swing.bent_swing(offset)`` (``offset`` rad on
    every elbow knot of ``REFERENCE_SWING``), then holds it still for ``hold`` s while the ball
    comes down. The compliant arm does not follow the path exactly, and the demonstration misses
    the cup by centimetres, as Kober & Peters' human demonstration did: during the teaching and
    when executed by the runner (``demonstration_commands``). The same arguments give
    bit-identical arrays."""
    from episodic.tasks import make_task
    from episodic.tasks.ball_in_cup_swing import bent_swing

    robot = load_robot(robot) if isinstance(robot, str) else robot
    task = make_task(BALL_IN_CUP, task_params)
    swing = bent_swing(offset)
    guide = swing_guide(build_scene(robot, task), task.start_posture(robot), swing)
    return kinesthetic(task, robot, guide, swing.duration + hold, seed=seed, **teaching,
                       source=f"kinesthetic: the hand guided along "
                              f"episodic.tasks.ball_in_cup_swing.bent_swing({offset:g}), then held {hold:g} s",
                       metadata={"offset": offset, "hold": hold, "swing_step": swing.step,
                                 "swing_knots": np.asarray(swing.knots).tolist()})


@dataclass(frozen=True)
class BallFlight:
    """Where a ball went relative to a cup's rim: ``crossings`` (k, 2) the downward crossings of
    the rim plane by the ball's centre, each (t s, distance m from the cup's axis), ``max_height``
    m the highest the ball's centre rose above the rim plane, ``caught`` at the end."""

    crossings: np.ndarray
    max_height: float
    caught: bool

    @classmethod
    def of(cls, t: np.ndarray, height: np.ndarray, radial: np.ndarray, caught: np.ndarray) -> BallFlight:
        """From the ball_in_cup state columns over time t (n,) s: height (n,) m above the rim
        plane, radial (n,) m from the axis, caught (n,) 0/1. A crossing lies between a step
        above the plane and the next on or below it; t and radial are interpolated linearly
        to height 0."""
        k = np.flatnonzero((height[:-1] > 0) & (height[1:] <= 0))
        w = height[k] / (height[k] - height[k + 1])
        crossings = np.column_stack([t[k] + w * (t[k + 1] - t[k]), radial[k] + w * (radial[k + 1] - radial[k])])
        return cls(crossings, float(np.max(height)), bool(caught[-1] > 0.5))

    @classmethod
    def of_demonstration(cls, demo: Demonstration) -> BallFlight:
        return cls.of(demo.t, demo.state("height"), demo.state("radial"), demo.state("caught"))

    def summary(self) -> str:
        """One phrase: "caught", or where the ball last came down through the rim plane."""
        if self.caught:
            return "the ball was caught"
        if not len(self.crossings):
            return f"the ball never came down through the rim plane (highest {self.max_height:+.3f} m from it)"
        t, radial = self.crossings[-1]
        return (f"not caught: the ball rose {self.max_height:.3f} m above the rim and came down {radial:.3f} m "
                f"from the cup's axis at {t:.3f} s")


# -- executing a demonstration -------------------------------------------------------------------------
def demonstration_commands(demo: Demonstration, robot: Robot | str, episode_id: int = 1, segments: int = 3,
                           wait: float = 1.0) -> list[Command]:
    """One episode that executes ``demo`` on ``robot``: a start at demo.q[0] (the task's default
    context), then the recording's q, qd, qdd after that first sample in ``segments`` trajectory
    segments of about equal length, the last held ``wait`` s. ValueError when the demonstration was recorded on another
    robot."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    if demo.robot != robot.name or list(demo.joint_names) != list(robot.joint_names):
        raise ValueError(f"the demonstration was recorded on the robot '{demo.robot}' (joints "
                         f"{', '.join(demo.joint_names)}), not on '{robot.name}'; execute it on '{demo.robot}'")
    if not 1 <= segments < len(demo.t):
        raise ValueError(f"segments must be between 1 and the demonstration's {len(demo.t) - 1} samples after its "
                         f"first, got {segments}")
    rate = None if np.isclose(demo.dt, robot.control_dt, rtol=1e-9, atol=0.0) else 1.0 / demo.dt
    return JointTrajectory(demo.t, demo.q, demo.qd, demo.qdd).episode(episode_id, segments, wait, rate=rate)
