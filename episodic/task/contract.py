"""What a task is: its scene on the robot, how command 0's context resets it, its rewards, when
a segment is over, and the named state columns it logs (:class:`Task`); the view of a control
step it reads (:class:`StepView`), the per-episode state (:class:`Episode`, with the model's
named objects bound to ids once in :class:`Ids`)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypedDict, TypeVar, cast

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.native import CompiledLaw
from episodic.task.frame import Needs, RobotFrame
from episodic.task.params import PARAM, Choice, Param, format_number


class TaskError(ValueError):
    """A task parameter or context is invalid; the message says what to change."""


@dataclass
class StepView:
    """What a task reads of n control steps.

    qpos (n, nq), qvel (n, nv): full simulator state before each step; sensordata
    (n, nsensordata); u (n, n_dofs) N m applied joint torques; ee_pos (n, 3) m; dt s;
    sensor(name) -> that sensor's columns.
    """

    qpos: np.ndarray
    qvel: np.ndarray
    sensordata: np.ndarray
    u: np.ndarray
    ee_pos: np.ndarray
    dt: float
    sensors: dict[str, slice]

    def sensor(self, name: str) -> np.ndarray:
        return self.sensordata[:, self.sensors[name]]


# the column docs (see Task.column_docs) of a free ball's centre, which several tasks log first
BALL_COLUMNS: Mapping[str, tuple[str, str]] = {
    **{f"ball_{a}": ("m", f"the ball centre's {a} (world frame)") for a in "xyz"},
    **{f"ball_v{a}": ("m/s", f"the ball centre's velocity along {a}") for a in "xyz"},
}


@dataclass(frozen=True)
class Ids:
    """The named objects of one compiled model, resolved to ids and addresses once, so that
    code run every control step indexes dicts instead of looking names up.

    body, site, geom: name -> id; mocap: name of a mocap body -> its row of data.mocap_pos;
    qpos, dof: joint name -> its first address in data.qpos, data.qvel; arm_qpos, arm_dof:
    (n_dofs,) addresses of the robot's joints (those the controller actuates), in the robot's
    order. Unnamed objects are left out.
    """

    body: dict[str, int]
    site: dict[str, int]
    geom: dict[str, int]
    mocap: dict[str, int]
    qpos: dict[str, int]
    dof: dict[str, int]
    arm_qpos: np.ndarray
    arm_dof: np.ndarray

    @classmethod
    def bind(cls, model: mujoco.MjModel) -> Ids:
        def named(kind: mujoco.mjtObj, count: int) -> dict[str, int]:
            names = (mujoco.mj_id2name(model, kind, i) for i in range(count))
            return {name: i for i, name in enumerate(names) if name}

        obj = mujoco.mjtObj
        body, joint = named(obj.mjOBJ_BODY, model.nbody), named(obj.mjOBJ_JOINT, model.njnt)
        arm = model.actuator_trnid[:, 0]
        return cls(body=body, site=named(obj.mjOBJ_SITE, model.nsite), geom=named(obj.mjOBJ_GEOM, model.ngeom),
                   mocap={name: int(model.body_mocapid[i]) for name, i in body.items() if model.body_mocapid[i] >= 0},
                   qpos={name: int(model.jnt_qposadr[i]) for name, i in joint.items()},
                   dof={name: int(model.jnt_dofadr[i]) for name, i in joint.items()},
                   arm_qpos=model.jnt_qposadr[arm].copy(), arm_dof=model.jnt_dofadr[arm].copy())


class Camera(TypedDict, total=False):
    """A task's default view for `episodic render` (MuJoCo's free camera): what it leaves out is
    fitted to frame the episode."""

    lookat: tuple[float, float, float]  # m
    distance: float  # m
    azimuth: float  # deg
    elevation: float  # deg


@dataclass
class Episode:
    """What a task keeps while an episode runs: made afresh by every :meth:`Task.reset` (and
    dropped with the next), so nothing carries over from one episode to another. A task that
    remembers more (a start posture, a running minimum) subclasses it with those fields, each
    with a default, and names the subclass in its ``episode_type``.

    ids: the named objects of the model the episode runs in.
    """

    ids: Ids


@dataclass(frozen=True)
class Reference:
    """What a task declares about its scripted reference motion, for the generic test suites and
    the examples that run every task (found from the task registry, episodic.tasks.registry).

    commands: "module:function" of a function ``(robot: Robot, episode_id: int) -> list`` of
    command objects (a start, then segments and gain sets): one episode of the task with its
    default parameters that succeeds on the robots it names (the WAM for the built-in tasks), also
    when run twice in a row (the second starting where the first left off).
    return_tolerance: how far the reference's return may move when the physics step is halved
    (tests/test_convergence.py; choose ``substeps`` with it).
    learner: "module" of a learner configuration (``problem(robot)``, ``learner(problem, seed)``,
    ``ITERATIONS``, ``QUICK``: examples/learn.py), "" for none.
    not_converged: why the reference's outcome is known to change when the step is halved ("":
    it converges; otherwise the convergence test expects it to fail, and fails once it passes).
    Modules under ``examples.`` are the repository's examples (importable from its root); a
    task package names its own modules."""

    commands: str
    return_tolerance: float
    learner: str = ""
    not_converged: str = ""


if TYPE_CHECKING:  # for the checker, a Task not parameterised keeps an Episode (a default: PEP 696)
    import typing_extensions

    EpisodeT = typing_extensions.TypeVar("EpisodeT", bound=Episode, default=Episode)
else:
    EpisodeT = TypeVar("EpisodeT", bound=Episode)


@dataclass
class Task(Generic[EpisodeT]):
    """Base class. Subclasses are dataclasses whose fields are the difficulty parameters, each
    declared with :func:`param` (or :func:`coordinate`): its unit, valid range and meaning.
    They are settable by name, recorded in every log, checked against their declarations and
    then together by :meth:`check_params` whenever a task is built; the subclasses override the
    hooks below. What changes during an episode lives in :attr:`episode`, never in the
    parameters. A task whose episodes keep more names its :class:`Episode` subclass twice: as the
    type parameter (``class Reach(Task[ReachEpisode])``, for the type checker) and as
    ``episode_type`` (what :meth:`reset` makes)."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line: what the task asks of the learner
    # what of the CompLACS scenario the task re-creates (../shared/seeds) is not built, in a line
    # ("" when everything is); `episodic tasks` and the README's task table (and docs/tasks.md) show it
    not_built: ClassVar[str] = ""
    columns: ClassVar[tuple[str, ...]] = ()
    # each state column's unit ("" for a count or a 0/1 flag) and meaning in a line: name -> (unit,
    # meaning), and what a step's reward is in a line; `episodic plot` labels its panels with them
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {}
    reward_doc: ClassVar[str] = ""
    context_sizes: ClassVar[tuple[int, ...]] = (0,)  # the numbers of values a context may have
    context_help: ClassVar[str] = "no context"
    gains_help: ClassVar[str] = ""  # what task_gains of a gains command mean; "" = no feedback law
    substeps: ClassVar[int] = 1  # physics steps per control step the task needs (at least the robot's)
    # what the task asks of a robot (joints, reach, a hinge joint, or robots it is tied to by definition)
    needs: ClassVar[Needs] = Needs()
    camera: ClassVar[Camera] = {}  # the default view of `episodic render`
    # robot joints (names) the task leaves without actuation: no PD, ctrl, feedforward or gravity
    # compensation torque, only the joint's own friction and damping (episodic/runtime/scene.py)
    passive_joints: ClassVar[tuple[str, ...]] = ()
    episode_type: ClassVar[type[Episode]] = Episode  # what reset makes for each episode
    # the scripted reference motion the generic test suites run (None: the task has none, they skip it)
    reference: ClassVar[Reference | None] = None

    def __post_init__(self) -> None:
        self._episode: EpisodeT | None = None
        self._robot: Robot | None = None  # the robot the scene was last built for (check_robot)
        for key, spec in self.declared().items():
            setattr(self, key, self._checked(key, spec, getattr(self, key)))
        self.check_params()

    @classmethod
    def declared(cls) -> dict[str, Param | Choice]:
        """Each parameter's name -> its declaration; TypeError names a field declared without
        :func:`param` (or :func:`choice`)."""
        out = {}
        for f in fields(cls):
            if PARAM not in f.metadata:
                raise TypeError(f"parameter '{f.name}' of task '{cls.name}' has no declared unit and range; "
                                f"declare it with episodic.task.param (or episodic.task.choice)")
            out[f.name] = f.metadata[PARAM]
        return out

    def _checked(self, key: str, spec: Param | Choice, value: Any) -> float | int | str:
        """``value`` (a number or its text) as the parameter's type, int or float; TaskError
        naming the task, the parameter, its unit and range and ``value`` unless it is a number
        the declaration admits. A choice's value is one of its options, as text; TaskError lists
        them otherwise."""
        if isinstance(spec, Choice):
            if not spec.admits(value):
                got = value if isinstance(value, str) else format_number(value) if isinstance(value, (int, float)) \
                    else repr(value)
                raise TaskError(f"parameter '{key}' of task '{self.name}' must be {spec.requirement()}, got {got}")
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TaskError(f"parameter '{key}' of task '{self.name}' must be a number "
                            f"({spec.requirement()}), got {value!r}") from None
        if not spec.admits(number):
            raise TaskError(f"parameter '{key}' of task '{self.name}' must be {spec.requirement()}, "
                            f"got {format_number(number)}")
        return int(number) if spec.integer else number

    @classmethod
    def with_params(cls, params: Mapping[str, str | float]) -> Self:
        """Build from name -> value, a value being a number or its text (the CLI's --param
        NAME=VALUE); TaskError names an unknown parameter, and construction checks the values."""
        known = cls.declared()
        for key in params:
            if key not in known:
                raise TaskError(f"task '{cls.name}' has no parameter '{key}'; known: {', '.join(known) or 'none'}")
        return cls(**params)

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def check_params(self) -> None:
        """Raise TaskError naming the parameters whose values do not go together (run on
        construction, after each value has been checked against its declaration)."""

    @property
    def episode(self) -> EpisodeT:
        """The running (or last) episode's :class:`Episode`, made by :meth:`reset`."""
        if self._episode is None:
            raise RuntimeError(f"task '{self.name}' has no episode yet; reset starts one")
        return self._episode

    # -- scene ---------------------------------------------------------------
    def check_robot(self, robot: Robot) -> None:
        """Raise TaskError unless ``robot`` has what the task :attr:`needs`; then the scene about
        to be built is placed in ``robot``'s frame (:meth:`from_wam`). The scene builder calls it
        first."""
        unmet = self.needs.unmet(robot)
        if unmet and self.needs.robots and robot.name not in self.needs.robots:
            raise TaskError(f"task '{self.name}' is built for the {' or '.join(self.needs.robots)} robot "
                            f"({self.needs.why}), not '{robot.name}'; run it with --robot {self.needs.robots[0]}, "
                            f"or choose a task that takes any robot (`episodic tasks` shows which)")
        if unmet:
            raise TaskError(f"task '{self.name}' cannot run on '{robot.name}': it {unmet}; choose another robot "
                            f"(`episodic tasks` shows which suit it)")
        self._robot = robot

    def from_wam(self, point: np.ndarray) -> np.ndarray:
        """A point (3,) m of the task's scene numbers (given for the WAM) placed in the frame of
        the robot the scene was last built for (:meth:`RobotFrame.from_wam`: the point itself on
        the WAM, and before any scene is built)."""
        return np.asarray(point, float).copy() if self._robot is None else RobotFrame.of(self._robot).from_wam(point)

    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """Add bodies rigidly attached to the end effector (part of the arm's dynamics)."""

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """Add the task's objects and sensors to the world."""

    def start_posture(self, robot: Robot) -> np.ndarray:
        """Default start posture (n_dofs,) rad when command 0 gives none."""
        return robot.home.copy()

    def joint_failures(self, robot: Robot) -> dict[str, float]:
        """Robot joints (names) that go passive during an episode, each at a time s after its
        motion starts (the first step of index 1), as :attr:`passive_joints` are throughout, until
        the next start; a function of the parameters only, so replays repeat it. Default: none."""
        return {}

    def motion_events(self) -> dict[str, float]:
        """Named events of this episode, each at a time s (>= 0; inf: never) after its motion
        starts (the first step of index 1, the clock of :meth:`joint_failures`, rounded to a
        control step), e.g. the release of a held ball. Asked right after :meth:`reset`, so it
        may depend on the episode's context (and is repeated by a replay). Default: none."""
        return {}

    def on_motion_event(self, name: str, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Called once per episode for each of :meth:`motion_events`, when the motion time
        reaches the event's step, before that step runs (also between two segments, and before
        the first step for an event at 0 s). It may change the simulation's physics state in
        ``data``: what mjSTATE_FULLPHYSICS holds (qpos, qvel, act, ...), which the runs carry from
        step to step, the log records and a shortened segment puts back. Not the model, and not
        the inputs (ctrl, mocap poses, eq_active: the log does not record them, so a replay would
        not repeat such a change). Default: nothing."""

    # -- episode start -------------------------------------------------------
    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, context: np.ndarray,
              rng: np.random.Generator) -> None:
        """Start an episode from command 0's ``context`` (k,): raise TaskError unless k is one of
        ``context_sizes`` and the values are finite, make a fresh :attr:`episode` bound to
        ``model``, complete the context from :meth:`default_context` and hand it to
        :meth:`initialize_episode`."""
        # fresh also when the context is refused; episode_type is the class the type parameter names
        self._episode = cast(EpisodeT, self.episode_type(Ids.bind(model)))
        if context.size not in self.context_sizes or not np.all(np.isfinite(context)):
            raise TaskError(f"{self.name} takes {self.context_help}; got {context.size} values")
        full = np.concatenate([context, self.default_context()[context.size :]])
        self.initialize_episode(model, data, full, rng)

    def default_context(self) -> np.ndarray:
        """The context (the longest of ``context_sizes`` values) a start command without one
        gets; a shorter context keeps its values and takes the rest from here."""
        return np.zeros(0)

    def initialize_episode(self, model: mujoco.MjModel, data: mujoco.MjData, context: np.ndarray,
                           rng: np.random.Generator) -> None:
        """Put the task's objects in their start state for the complete ``context`` (data holds
        the arm at its start posture); raise TaskError on a context the task refuses."""

    # -- feedback law --------------------------------------------------------
    def check_gains(self, task_gains: np.ndarray) -> None:
        """Raise TaskError unless ``task_gains`` suit this task's feedback law."""
        if not self.gains_help:
            raise TaskError(f"task '{self.name}' has no feedback law; send a gains command without task gains")

    def feedback_law(self, model: mujoco.MjModel, task_gains: np.ndarray) -> Callable[[mujoco.MjData], np.ndarray]:
        """The feedback law with (checked) ``task_gains`` for the running episode, as the runner
        calls it every control step: data -> offsets (n_dofs,) rad. The compiled law when the
        task has one (:meth:`compiled_law`; a blocking simulation then runs whole segments in
        C), else :meth:`feedback`."""
        law = self.compiled_law(model, task_gains)
        return law if law is not None else lambda data: self.feedback(model, data, task_gains)

    def compiled_law(self, model: mujoco.MjModel, task_gains: np.ndarray) -> CompiledLaw | None:
        """The task's feedback law written in C (``tasks/<name>.c``, compiled into episodic's
        native library) bound to the running episode and ``task_gains``, or None when the law
        is :meth:`feedback`, in Python."""
        return None

    def feedback(self, model: mujoco.MjModel, data: mujoco.MjData, task_gains: np.ndarray) -> np.ndarray:
        """Offsets (n_dofs,) rad to the desired joint positions at the present state, from the
        task's feedback law with ``task_gains``: a law in Python overrides this; a compiled one
        (:meth:`compiled_law`) is evaluated once here. data's positions and velocities and what
        is computed from them (xpos, xmat, com-based velocities: the position and velocity
        stages of mj_step1 or mj_forward) are current. A law that keeps memory (a sensing delay
        line) counts each call as a control step."""
        law = self.compiled_law(model, task_gains)
        if law is None:
            raise NotImplementedError(f"task '{self.name}' has no feedback law")
        return law(data)

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        """Extra state (n, len(columns))."""
        return np.zeros((len(steps.qpos), 0))

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        """Reward of each step (n,)."""
        return np.zeros(len(steps.qpos))

    def segment_end(self, steps: StepView, state: np.ndarray) -> int | None:
        """Number of steps after which the segment is over early, or None to run it whole. In
        realtime mode it is asked after every step with the last 2 s of steps
        (episodic.runtime.machine.SEGMENT_END_WINDOW), so decide from those."""
        return None

    def success(self, state: np.ndarray) -> bool:
        """Whether an episode ending in ``state`` (len(columns),) counts as solved."""
        return False

    # -- ending early ----------------------------------------------------------
    def worst_reward_rate(self, model: mujoco.MjModel, robot: Robot) -> float:
        """The lowest step reward per second (reward/s, <= 0) the task can give in any state under
        any torques within ``robot``'s limits: what every second an episode ends early is
        charged, so that an episode cut short (a safety abort, an unstable simulation, a learner's
        abort, a timeout, an interruption, a refused segment) never returns more than the same
        episode completed by holding the posture where it was cut. Default 0: a task whose
        rewards are earned (a catch, a hit, a closer approach), where an early end forfeits what
        the rest would have earned and charging nothing keeps that rule."""
        return 0.0

    def unplayed_return(self, state: np.ndarray) -> float:
        """The return (<= 0) of an episode of this task that ends before any motion step ran (a
        refused first segment, a reset right after the start), from its task state ``state``
        (len(columns),) then: what its first step would have charged, for a task that charges its
        cost up front and pays it back as it is earned (a ball never scored, never at rest, never
        brought closer), so that such an episode never returns more than one that plays. Default
        0: nothing is charged up front."""
        return 0.0

    def scored_duration(self) -> float:
        """s of motion every episode is scored over (0: none). An episode whose motion ends
        sooner, however it ends (Flag.OK included), is charged the rest at
        :meth:`worst_reward_rate`, so a task whose reward is a cost cannot be won by ending early.
        A segment the task ends itself (:meth:`segment_end`) counts whole: the task prices its
        own end. Default 0: no such duration (the tasks whose rewards are earned)."""
        return 0.0

