"""What a task is: its scene on the robot, how command 0's context resets it, its
rewards, when a segment is over, and the named state columns it logs.

Besides the :class:`Task` base class, this module holds what task modules share: the
declaration of a difficulty parameter (:func:`param`, :func:`coordinate`: its unit, valid range
and meaning; :func:`choice`: one of named options; checked whenever a task is built), the
per-episode state (:class:`Episode`, with the model's named objects bound to ids once in
:class:`Ids`), a tool on the flange (:func:`add_tool_body`), a free ball (:func:`add_free_ball`,
:func:`place_free_ball`), a target marker (:func:`add_target`, :func:`place_target`), frame
sensors (:func:`add_frame_sensors`) and what task code reads of a state
(:func:`update_kinematics`, :func:`body_velocity`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar

import mujoco
import numpy as np

from episodic.native import CompiledLaw
from episodic.robot import Robot

TARGET = "target"  # the target marker's mocap body, and the prefix of its position sensor


class TaskError(ValueError):
    """A task parameter or context is invalid; the message says what to change."""


PARAM = "param"  # the metadata key under which a task parameter's field holds its Param
# the box every position parameter lies in, m, world frame: over the floor, at most 3 m from the
# robot's base horizontally and 3 m up
WORKSPACE = {"x": (-3.0, 3.0), "y": (-3.0, 3.0), "z": (0.0, 3.0)}


def format_number(value: float) -> str:
    """``value`` as the shortest text that reads back as it: 0.02, -1, 1e-05, nan, inf."""
    text = repr(value if isinstance(value, int) else float(value))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class Param:
    """What a task parameter declares: its default, its ``unit`` ("" for a pure number), its
    valid range from ``low`` to ``high`` (None: unbounded on that side; ``low_open`` /
    ``high_open``: that bound itself is excluded) and, where the name does not say it, its
    ``meaning`` in a line. A value must be finite and in range, and a whole number when the
    default is an int."""

    default: float | int
    unit: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    meaning: str = ""

    @property
    def integer(self) -> bool:
        return isinstance(self.default, int)

    @property
    def two_sided(self) -> bool:
        return self.low is not None and self.high is not None

    def bounds(self) -> str:
        """The range as text: "> 0", ">= 0", "<= 3", "[0, 1)" when bounded on both sides,
        "finite" when unbounded."""
        low, high = self.low, self.high
        if self.two_sided:
            return (f"{'(' if self.low_open else '['}{format_number(low)}, "
                    f"{format_number(high)}{')' if self.high_open else ']'}")
        if low is not None:
            return f"{'>' if self.low_open else '>='} {format_number(low)}"
        if high is not None:
            return f"{'<' if self.high_open else '<='} {format_number(high)}"
        return "finite"

    def admits(self, value: float) -> bool:
        """Whether ``value`` is finite, in range and (for an integer parameter) whole."""
        value = float(value)
        if not math.isfinite(value) or (self.integer and not value.is_integer()):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def requirement(self) -> str:
        """What a value must be, with the unit: "> 0 m", "in [0, 1)", "a whole number >= 1",
        "a finite number, in m"."""
        if self.low is None and self.high is None:
            text = f"a finite {'whole ' if self.integer else ''}number"
            return f"{text}, in {self.unit}" if self.unit else text
        text = f"in {self.bounds()}" if self.two_sided else self.bounds()
        text = f"a whole number {text}" if self.integer else text
        return f"{text} {self.unit}" if self.unit else text

    def describe(self, name: str) -> str:
        """The parameter as `episodic tasks` lists it: "tolerance=0.02 m (> 0)", "restitution=0.8 [0, 1)"."""
        unit = f" {self.unit}" if self.unit else ""
        bounds = self.bounds() if self.two_sided else f"({self.bounds()})"
        return f"{name}={format_number(self.default)}{unit} {bounds}"


def param(default: float | int, unit: str, meaning: str = "", *, gt: float | None = None, ge: float | None = None,
          lt: float | None = None, le: float | None = None) -> Any:
    """Declare a task parameter: a dataclass field with ``default`` (an int for a parameter that
    counts), its ``unit`` ("" for a pure number), its ``meaning`` in a line where the name does not
    say it, and its valid range: greater than ``gt`` or at least ``ge``, less than ``lt`` or at
    most ``le`` (at most one of each pair; none: unbounded on that side). Every value given,
    the default included, is checked against it when the task is built."""
    if gt is not None and ge is not None or lt is not None and le is not None:
        raise TypeError("a parameter takes at most one lower bound (gt or ge) and one upper bound (lt or le)")
    spec = Param(default, unit, low=ge if gt is None else gt, high=le if lt is None else lt,
                 low_open=gt is not None, high_open=lt is not None, meaning=meaning)
    if not spec.admits(default):
        raise TypeError(f"the default {format_number(default)} is outside the declared range {spec.bounds()}")
    return field(default=default, metadata={PARAM: spec})


def coordinate(default: float, axis: str, meaning: str = "") -> Any:
    """Declare a position parameter: the world coordinate along ``axis`` ("x", "y" or "z") of a
    point, m, with ``default``, valid within :data:`WORKSPACE`."""
    low, high = WORKSPACE[axis]
    return param(default, "m", meaning, ge=low, le=high)


@dataclass(frozen=True)
class Choice:
    """What a text-choice task parameter declares: its ``default``, the ``options`` a value must
    be one of (exact text) and, where the name does not say it, its ``meaning`` in a line."""

    default: str
    options: tuple[str, ...]
    meaning: str = ""
    # what a number's declaration says, for code that lists parameters alike: no unit, no bounds
    unit = ""
    low = high = None
    low_open = high_open = False

    def admits(self, value: Any) -> bool:
        """Whether ``value`` is one of the options."""
        return isinstance(value, str) and value in self.options

    def bounds(self) -> str:
        """The options as text: "chain, tendon"."""
        return ", ".join(self.options)

    def requirement(self) -> str:
        """What a value must be: "one of chain, tendon"."""
        return f"one of {self.bounds()}"

    def describe(self, name: str) -> str:
        """The parameter as `episodic tasks` lists it: "string_model=chain (chain | tendon)"."""
        return f"{name}={self.default} ({' | '.join(self.options)})"


def choice(default: str, options: tuple[str, ...], meaning: str = "") -> Any:
    """Declare a text-choice task parameter: a dataclass field with ``default``, one of
    ``options`` (texts without spaces, each a way of building the task), and its ``meaning`` in
    a line. Every value given is checked against the options when the task is built, and
    recorded in the logs as the text."""
    options = tuple(options)
    if not options or not all(isinstance(o, str) and o and o.isprintable() and not any(c.isspace() for c in o)
                              and "=" not in o for o in options):
        raise TypeError(f"the options of a choice are non-empty texts without spaces or '=', got {options!r}")
    if len(set(options)) != len(options):
        raise TypeError(f"the options of a choice must differ, got {options!r}")
    spec = Choice(default, options, meaning)
    if not spec.admits(default):
        raise TypeError(f"the default {default!r} is not one of the options {options!r}")
    return field(default=default, metadata={PARAM: spec})


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
    def bind(cls, model: mujoco.MjModel) -> "Ids":
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


@dataclass
class Episode:
    """What a task keeps while an episode runs: made afresh by every :meth:`Task.reset` (and
    dropped with the next), so nothing carries over from one episode to another. A task that
    remembers more (a start posture, a running minimum) subclasses it with those fields, each
    with a default, and names the subclass in its ``episode_type``.

    ids: the named objects of the model the episode runs in.
    """

    ids: Ids


@dataclass
class Task:
    """Base class. Subclasses are dataclasses whose fields are the difficulty parameters, each
    declared with :func:`param` (or :func:`coordinate`): its unit, valid range and meaning.
    They are settable by name, recorded in every log, checked against their declarations and
    then together by :meth:`check_params` whenever a task is built; the subclasses override the
    hooks below. What changes during an episode lives in :attr:`episode`, never in the
    parameters."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line: what the task asks of the learner
    # what of the CompLACS scenario the task re-creates (../shared/seeds) is not built, in a line
    # ("" when everything is); `episodic tasks` and the README's task table show it
    not_built: ClassVar[str] = ""
    columns: ClassVar[tuple[str, ...]] = ()
    context_sizes: ClassVar[tuple[int, ...]] = (0,)  # the numbers of values a context may have
    context_help: ClassVar[str] = "no context"
    gains_help: ClassVar[str] = ""  # what task_gains of a gains command mean; "" = no feedback law
    substeps: ClassVar[int] = 1  # physics steps per control step the task needs (at least the robot's)
    robots: ClassVar[tuple[str, ...]] = ()  # the robots the task's scene is built for; () = any robot
    # the default view of `episodic render`: any of lookat (x, y, z) m, distance m, azimuth and
    # elevation deg (MuJoCo's free camera); what it leaves out is fitted to frame the episode
    camera: ClassVar[dict[str, float]] = {}
    # robot joints (names) the task leaves without actuation: no PD, ctrl, feedforward or gravity
    # compensation torque, only the joint's own friction and damping (episodic/scene.py)
    passive_joints: ClassVar[tuple[str, ...]] = ()
    episode_type: ClassVar[type[Episode]] = Episode  # what reset makes for each episode

    def __post_init__(self) -> None:
        self._episode: Episode | None = None
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
    def with_params(cls, params: dict[str, str | float]) -> "Task":
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
    def episode(self) -> Episode:
        """The running (or last) episode's :class:`Episode`, made by :meth:`reset`."""
        if self._episode is None:
            raise RuntimeError(f"task '{self.name}' has no episode yet; reset starts one")
        return self._episode

    # -- scene ---------------------------------------------------------------
    def check_robot(self, robot: Robot) -> None:
        """Raise TaskError unless the task's scene and start posture suit ``robot``."""
        if self.robots and robot.name not in self.robots:
            raise TaskError(f"task '{self.name}' is built for the {' or '.join(self.robots)} robot "
                            f"(its start posture and scene sizes assume it), not '{robot.name}'; "
                            f"run it with --robot {self.robots[0]}, or choose a task that takes any robot")

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
        self._episode = self.episode_type(Ids.bind(model))  # fresh also when the context is refused
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
        (episodic.machine.SEGMENT_END_WINDOW), so decide from those."""
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


# -- scene parts ------------------------------------------------------------------
def add_free_ball(spec: mujoco.MjSpec, name: str, pos, radius: float, mass: float, **geom) -> mujoco.MjsBody:
    """Add a solid ball to the world: a body at ``pos`` (3,) m with a free joint and a sphere
    geom, all three called ``name``, of ``radius`` m and ``mass`` kg (inertia 2/5 m r^2 kg m^2
    about its centre). ``geom``: further attributes of the sphere (contype, friction, rgba, ...).
    Returns the body, for sites on it."""
    ball = spec.worldbody.add_body(name=name, pos=pos)
    ball.add_freejoint(name=name)
    ball.explicitinertial = True
    ball.mass, ball.ipos, ball.iquat = mass, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
    ball.inertia = [0.4 * mass * radius**2] * 3
    ball.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0], **geom)
    return ball


def add_tool_body(spec: mujoco.MjSpec, robot: Robot, name: str, geoms: list[dict], touches: bool = True,
                  pos=None, quat=None) -> mujoco.MjsBody:
    """Add a tool rigidly attached to the robot's end effector: a body ``name`` in the frame of
    the end-effector site (or at ``pos`` (3,) m / ``quat`` (4,) in its parent link's frame), made
    of ``geoms`` (dicts of MjsGeom attributes, each with its ``mass`` kg), part of the arm's
    dynamics: its mass, centre of mass and inertia those of the geoms together
    (:func:`rigid_inertia`), and the controller's gravity compensation includes it. Its geoms
    collide like the arm's (not with the arm, with the task's objects) when ``touches``, else
    with nothing. Returns the body, for sites on it."""
    flange = spec.site(robot.end_effector_site)
    mass, ipos, iquat, inertia = rigid_inertia(geoms)
    body = flange.parent.add_body(name=name, pos=flange.pos if pos is None else pos,
                                  quat=flange.quat if quat is None else quat)
    body.explicitinertial = True
    body.mass, body.ipos, body.iquat, body.inertia = mass, ipos, iquat, inertia
    body.gravcomp = 1.0
    for g in geoms:
        geom = body.add_geom(**g)
        geom.contype, geom.conaffinity = (2, 1) if touches else (0, 0)
        geom.mass = 0.0  # the body's explicit inertia holds it
    return body


def rigid_inertia(geoms: list[dict]) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Mass kg, centre of mass (3,) m, principal axes (quat, 4) and principal moments (3,) kg m^2
    of rigidly joined geoms (dicts of MjsGeom attributes with ``mass``) in their common frame:
    MuJoCo's own geom inertia, computed on a scratch model (the robot's model takes inertias only
    explicitly)."""
    spec = mujoco.MjSpec()
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE
    body = spec.worldbody.add_body(name="tool")
    body.add_freejoint()
    for g in geoms:
        body.add_geom(**{k: v for k, v in g.items() if k != "name"})
    model = spec.compile()
    b = model.body("tool")
    return float(b.mass[0]), b.ipos.copy(), b.iquat.copy(), b.inertia.copy()


def add_frame_sensors(spec: mujoco.MjSpec, prefix: str, objtype: mujoco.mjtObj, objname: str) -> None:
    """Add sensors ``prefix``_pos (3,) m and ``prefix``_vel (3,) m/s: the world position and
    linear velocity of an object's frame (objtype mjOBJ_XBODY, mjOBJ_SITE, ...)."""
    for suffix, kind in (("pos", mujoco.mjtSensor.mjSENS_FRAMEPOS), ("vel", mujoco.mjtSensor.mjSENS_FRAMELINVEL)):
        spec.add_sensor(name=f"{prefix}_{suffix}", type=kind, objtype=objtype, objname=objname)


def add_target(spec: mujoco.MjSpec, pos, radius: float, rgba) -> None:
    """Add the target marker: a mocap body ``TARGET`` at ``pos`` (3,) m showing a sphere of
    ``radius`` m and colour ``rgba`` (4,) that touches nothing, and a sensor ``TARGET``_pos of
    its position (3,) m."""
    body = spec.worldbody.add_body(name=TARGET, mocap=True, pos=pos)
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0], rgba=rgba, contype=0, conaffinity=0)
    spec.add_sensor(name=f"{TARGET}_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                    objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=TARGET)


# -- episode start ----------------------------------------------------------------
def place_target(data: mujoco.MjData, ids: Ids, position: np.ndarray) -> None:
    """Move the target marker to ``position`` (3,) m."""
    data.mocap_pos[ids.mocap[TARGET]] = position


def place_free_ball(data: mujoco.MjData, ids: Ids, name: str, position: np.ndarray,
                    velocity: np.ndarray | float = 0.0, angular_velocity: np.ndarray | float = 0.0) -> None:
    """Put the free ball ``name`` at ``position`` (3,) m, unrotated, moving at ``velocity`` (3,)
    m/s and spinning at ``angular_velocity`` (3,) rad/s (world frame; 0: at rest)."""
    qa, va = ids.qpos[name], ids.dof[name]
    data.qpos[qa : qa + 3] = position
    data.qpos[qa + 3 : qa + 7] = [1.0, 0.0, 0.0, 0.0]
    data.qvel[va : va + 3] = velocity
    data.qvel[va + 3 : va + 6] = angular_velocity


# -- reading a state --------------------------------------------------------------
def update_kinematics(model: mujoco.MjModel, data: mujoco.MjData) -> None:
    """Recompute the poses (xpos, xmat, ...) and the com-based velocities from data.qpos and
    data.qvel: what :func:`body_velocity` needs, and stale after mj_step (which leaves them at
    the state before the step) or after data.qpos was written."""
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    mujoco.mj_comVel(model, data)


def body_velocity(model: mujoco.MjModel, data: mujoco.MjData, body: int) -> np.ndarray:
    """(6,) velocity of body ``body``'s frame, world axes: angular rad/s, then linear m/s of its
    origin (data's com-based velocities must be current, see :func:`update_kinematics`)."""
    out = np.empty(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, body, out, 0)
    return out
