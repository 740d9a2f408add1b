"""casting: lower a ball hanging from the hand on an elastic string into a cup on the floor, as
fast as possible, like a crane: fast motion with as little swinging as possible.

Scene. A hook (``add_tool``: a steel eye bolt, ``HOOK_LENGTH`` = 40 mm long, ``HOOK_MASS`` =
30 g, part of the arm's dynamics and gravity compensation) stands out of the tool flange along
its axis. At the start posture (``START_POSTURE``, WAM: the flange 1.30 m up over (0.55, -0.35)
m, pointing straight down) the string hangs from the hook's tip (the "anchor", site
``hook_anchor``) straight down, free of the arm, with a ball at its end: a solid wooden ball of
``ball_mass`` = 30 g and ``ball_radius`` = 21.5 mm (beech, about 720 kg/m^3, as ball_in_cup's;
the issue's 30 g). A floor cup stands on the floor at (``cup_x``, ``cup_y``) (the context): a
bottom disc, ``WALL_BOXES`` thin boxes around a circle (``CUP_WALL`` = 5 mm thick) and a rounded
lip of as many capsules on top of them (body ``cup_lip``), ``cup_radius`` = 0.06 m inside (the
issue's 0.12 m across) and ``cup_depth`` = 0.08 m from the inner bottom to the top of the lip.

The string. ball_in_cup's capsule chain (tasks/ball_in_cup.py, imported, not copied):
``CHAIN_LINKS`` = 8 capsules of a 2 mm cotton cord (2.9 g/m: 2.3 g for the default 0.8 m
string, 8 % of the ball), each on a universal joint on the one before, the first on the hook;
the ball sits at the last one's end on a slide joint along it, the string's stretch: slack, the
ball and string move freely; taut, the string pulls like a spring of ``string_stiffness`` N/m
with a damper of ``string_dampratio`` times the ball's critical damping (lower stiffness: a
more elastic string). The default is ball_in_cup's, 5 kN/m, the stiffest its chain holds at the
0.5 ms step: the cotton cord over 0.8 m would be stiffer, EA / L = 12.7 kN/m (an upper estimate;
the sources, the stability measurements and the allowed ranges are in tasks/ball_in_cup.py). The
ball's weight stretches it by ``ball_mass`` g / ``string_stiffness`` = 0.06 mm. The links collide with the cup (and the
hook), so the string drapes over the lip instead of passing through it. Why the chain and not
ball_in_cup's cheaper straight tendon: the ball is lowered into a cup while the string comes
down into it from above; a straight tendon from the anchor to the ball passes through the cup's
wall whenever the anchor is off to the side of a ball that is low in the cup or beside it (a
ball dragged along the cup, a swing that ends low against the wall), which learners do.
``string_length`` (anchor to ball centre, taut) is a parameter, not part of the context: it is
the chain's geometry (the links' lengths are built into the model), which a reset cannot change
without changing the model; the context is the cup's position only. A learner reads the string
length from the task's parameters (recorded in every log).

Other arms. The scene's numbers are the WAM's; on another arm (``needs``: 5+ joints and the hook
held pointing down high enough, :meth:`Casting.start_posture`) the floor cup and the start's
point over the floor are placed in the arm's frame (episodic.task.frame: turned with its facing,
scaled by its reach; the cup stays on the floor, the pedestal's clearance is about the arm's base
axis), and the hook starts pointing down at the height that hangs the ball ``START_LIFT`` m above
the cup's rim: heights are the string's and the floor's, so they are not scaled. Measured (inverse
kinematics from 33 seeded postures, pointing down over the placed start): the Panda's hook gets
0.6 m up at most and the UR5's 0.75 m, short of the 1.01 m the default 0.8 m string needs; the
Puma 560 (its shoulder 1.42 m up) holds it.

Ball contacts (``episodic.task.contact``): every surface the ball meets is an explicit bouncing pair
calibrated at the physics step. The cup (bottom, wall, lip): restitution ``cup_restitution`` =
0.35 and friction ``cup_friction`` = 0.5, a cup lined with a damping rubber (``CUP_LINING``: for
a rigid ball on a rubber layer, the rebound is the rubber's rebound resilience, ISO 4662, e =
sqrt(resilience);
0.35 is a resilience of 12 %, which damping rubbers such as butyl have at room temperature;
friction of wood on rubber); the issue asks for a low restitution, 0.3-0.4, so that a ball
dropped into the cup stays in it. The floor, the arm and the hook: a wooden ball on a hard
floor, 0.60, friction 0.4 (contact.MATERIALS["wooden_ball_on_cup"]: The Physics Factbook; Marks'
Handbook). Drop tests in the scene at 1.5 m/s measure 0.333 on the cup's bottom (0.314-0.353
over where the impact falls within a step; the calibration's own drop test, contact.
measure_restitution, gives 0.336 there: at 0.35 its mean falls a little short) and 0.593 on the
floor (tested). The
string's links touch the cup with ball_in_cup's stiff, critically damped contact and friction
0.3. Air (``contact.add_air``): 1.204 kg/m^3, 1.81e-5 Pa s; the ball has a smooth sphere's drag,
C_D = 0.47.

Physics step. ``substeps`` = 4: 0.5 ms physics steps under the 500 Hz control, as ball_in_cup
(the chain needs it: at 2 ms it is not stable in vigorous swings) and tetherball (one bounce's
restitution within about +-0.02 of the calibrated value). The reference's return is -2.484 at
0.5 ms and -2.488 at 0.125 ms (tests/test_convergence.py).

Pendulum. Hanging from the held hook, the ball and string swing as a compound pendulum: for
small angles, period 2 pi sqrt(I / (M g d)) with I = m_b (L^2 + 2/5 r^2) + m_s L^2 / 3 and
M d = m_b L + m_s L / 2 about the anchor (m_b ball, m_s string, L = string_length plus the
static stretch, r ball_radius), 1.783 s for the defaults, 0.6 % shorter than a point mass's
2 pi sqrt(L / g) (tested within 0.1 % for 0.5 and 1.0 m strings, where the point mass is 0.3-0.6 %
off).

Context (command 0): the cup's position (x, y) m on the floor, or nothing for (``cup_x``,
``cup_y``) = (0.55, 0.35): 0.7 m across from the ball's start, a slewing move of the arm. The cup
must stand clear of the robot's pedestal (its centre at least ``PEDESTAL_RADIUS`` plus the cup's
outer radius from the base axis) and on the floor; else TaskError (INVALID_PAYLOAD). With the
default string, cups up to about 0.75 m from the base axis are within the arm's reach of the
lowering (a shorter string needs a closer cup: the flange must come lower).

Start state. After GOTO_START the ball hangs still straight below the anchor (the chain straight,
the string unstretched). The ball must hang clear of everything and above the cup's rim (its
lowest point above the lip's top), else TaskError: a start posture that puts the ball in or on
the cup is refused.

State columns. ball_x, ball_y, ball_z m and ball_vx, ball_vy, ball_vz m/s: the ball's centre
(world frame); cup_x, cup_y m: the cup's axis; radial m: the ball centre's horizontal distance
from the cup's axis; height m: the ball centre above the top of the lip (negative below);
swing m: the ball centre's horizontal distance from the anchor (how far the ball hangs out:
0 hanging still); string m: the straight distance from the anchor to the ball centre; rim: the
number of contacts of the ball with the lip (0 when it does not touch it); resting: 1 when the
ball rests in the cup, else 0. "Rests in the cup": its centre is inside the cup (radial <
cup_radius and height < 0) and its speed is below ``rest_speed`` m/s.

Rewards. Time t counts from the first step of the episode's first segment (the motion's start).
The ball has come to rest at the end of the step at which it has rested in the cup for
``rest_time`` s without a break within one segment; that ends the segment (``segment_end``; so
does a later segment once the ball has rested in the cup for rest_time s in it).
A rim strike is a new contact of the ball with the lip before that: a step at which the ball
touches the lip (``rim`` > 0) ``STRIKE_GAP`` = 0.1 s or more after it last touched it (or the first
such step). The gap makes one strike of a ball that bounces or rolls along the lip, which a soft
contact turns into a touch every few milliseconds (a bounce shorter than 0.1 s rises less than
12 mm).
The episode's return is

    return = -min(t_rest, max_time) - strike_penalty * strikes

with t_rest = infinity (so the cap ``max_time`` s, the episode's length) when the ball never comes
to rest in the cup. Each step's reward is the change of "the return if the episode ended now",
so the return is exact however a learner splits its motion into segments and whenever it ends
the episode: the episode's first step earns -max_time, each rim strike -strike_penalty, and the
step at which the ball comes to rest (before max_time) max_time - t_rest; every other step 0. A
single segment that brings the ball to rest earns -t_rest - strike_penalty * strikes. Once the
ball has come to rest, the time stops and later steps earn nothing. Steps outside segments (going
to the start, a real-time hold while the learner is late) earn nothing, though the clock runs on.
Success: the episode ends with the ball resting in the cup (``resting`` = 1), so a learner's
last segment should hold still until the ball has settled.

Ending early. The rewards are earned (the charge of -max_time comes with the first motion step
and is paid back only by a rest in the cup), so an episode cut short is charged nothing more
(``worst_reward_rate`` 0): a crash returns -max_time less its strikes, no more than holding
still (-max_time), and an episode that ends before its first motion step (a refused first
segment, a reset after the start) returns ``unplayed_return`` = -max_time (tests/test_early_end.py).
A crash can save the strikes that holding on would have cost; each is paid as it happens.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.task import (
    Camera,
    Episode,
    Needs,
    Reference,
    StepView,
    Task,
    TaskError,
    add_frame_sensors,
    contact,
    coordinate,
    param,
)
from episodic.task.contract import BALL_COLUMNS
from episodic.task.frame import RobotFrame, tool_ik
from episodic.task.sl import SLMap
from episodic.tasks.ball_in_cup import (
    ANCHOR_GAP,
    STRING_CONTACT_SOLIMP,
    STRING_CONTACT_SOLREF,
    STRING_DENSITY,
    STRING_FRICTION,
    WALL_BOXES,
    BallInCup,
    string_dampratio_param,
    string_stiffness_param,
)

# -- the hook on the flange ----------------------------------------------------------------------
HOOK_LENGTH = 0.04   # m, from the flange face along its axis (a small steel eye bolt)
HOOK_RADIUS = 0.006  # m
HOOK_MASS = 0.03     # kg
HOOK_BITS = dict(contype=2, conaffinity=1 | 4)  # like the arm's geoms, and the string's links touch it
# WAM posture with the flange 1.30 m up over (0.55, -0.35) m pointing straight down (found by
# inverse kinematics; the flange's axis is within 1e-5 rad of the vertical)
START_POSTURE = (-0.5667, 0.7675, 0.0, 1.6229, 0.0, 0.7512, -1.57)
START_OVER = (0.55, -0.35, 0.0)  # m, the floor point the WAM's start holds the hook over (placed on another arm)
START_LIFT = 0.1    # m, on another arm the ball's lowest point starts this far above the cup's rim
START_SEEDS = 8     # postures (seeded) the start's inverse kinematics on another arm starts from, besides home

# -- the floor cup -------------------------------------------------------------------------------
CUP_WALL = 0.005    # m, wall thickness (the lip's capsules are as thick)
CUP_BOTTOM = 0.006  # m, bottom thickness
CUP_BITS = dict(contype=1, conaffinity=1 | 4)  # the arm and the hook touch it, and the string's links
PEDESTAL_RADIUS = 0.12  # m, the WAM's pedestal and base plate around the base axis
CUP_LINING = contact.MaterialPair(
    ball="solid wooden ball (43 mm, 30 g)", surface="a cup lined with a damping rubber",
    restitution=0.35, friction=0.5, radius=0.0215, mass=0.03,
    source="a rigid ball on a rubber layer rebounds with the rubber's rebound resilience (ISO 4662: a rigid "
           "striker on the rubber), e = sqrt(resilience): 0.35 is 12 %, a damping rubber's such as butyl at room "
           "temperature; the issue asks for 0.3-0.4. Friction: wood on rubber, about 0.5")
HARD_SURFACES = contact.MATERIALS["wooden_ball_on_cup"]  # a wooden ball on a hard floor: 0.60, friction 0.4


@dataclass
class Cast(Episode):
    """The reward's memory (module docstring): ``start`` the clock s at the motion's start (the
    first segment step), ``rested`` the time s from it at which the ball came to rest in the cup
    (None: not yet), ``touched`` the clock s of the last segment step so far at which the ball
    touched the lip and ``strikes`` the rim strikes so far."""

    start: float | None = None
    rested: float | None = None
    touched: float = -np.inf
    strikes: int = 0


class _HookSpec:
    """The spec as ball_in_cup's chain builder (``BallInCup._add_chain``) sees it: it hangs the
    string from the body "cup" at the site "cup_anchor" and lets the first link touch the geom
    "cup_bottom"; here they are the hook's. (Until the builder takes those names as arguments,
    and the chain's hanging in ``BallInCup.initialize_episode`` the body's and the anchor's.)"""

    NAMES = {"cup": "hook", "cup_anchor": "hook_anchor", "cup_bottom": "hook"}

    def __init__(self, spec: mujoco.MjSpec):
        self.spec = spec

    def _name(self, name: str) -> str:
        return self.NAMES.get(name, name)

    def body(self, name: str):
        return self.spec.body(self._name(name))

    def site(self, name: str):
        return self.spec.site(self._name(name))

    def add_pair(self, name: str, geomname1: str, geomname2: str, **attributes):
        return self.spec.add_pair(name=f"{geomname1}/{self._name(geomname2)}", geomname1=self._name(geomname1),
                                  geomname2=self._name(geomname2), **attributes)

    def add_tendon(self, **attributes) -> _HookTendon:
        return _HookTendon(self.spec.add_tendon(**attributes), self)


class _HookTendon:
    """A tendon whose sites are named as ball_in_cup names them (see :class:`_HookSpec`)."""

    def __init__(self, tendon, names: _HookSpec):
        self.tendon, self.names = tendon, names

    def wrap_site(self, name: str):
        return self.tendon.wrap_site(self.names._name(name))


_UNREACHED: dict[tuple[str, str], str] = {}  # (robot name, its model's sha256) -> why it cannot start
_STARTS: dict[tuple, np.ndarray] = {}  # (robot name, sha256, the anchor's place) -> the start posture found


def _start_unreached(robot: Robot) -> str:
    """Why ``robot`` cannot hold the default casting's start ("" when it can: the WAM at once,
    another arm by :meth:`Casting.start_posture`'s inverse kinematics, once per robot model)."""
    if RobotFrame.of(robot).is_reference():
        return ""
    key = (robot.name, robot.sha256)
    if key not in _UNREACHED:
        try:
            Casting().start_posture(robot)
            _UNREACHED[key] = ""
        except TaskError as error:
            _UNREACHED[key] = str(error).removeprefix("casting ").split("; ")[0]
    return _UNREACHED[key]


@dataclass
class Casting(Task[Cast]):
    name: ClassVar[str] = "casting"
    reference: ClassVar[Reference | None] = Reference(  # examples/casting_reference.py
        "examples.casting_reference:reference_commands",
        return_tolerance=0.05,  # the reference's return is -2.48 (s to rest in the cup)
        learner="examples.learning.casting",
    )
    summary: ClassVar[str] = ("lower a ball hanging from the hand on an elastic string into a cup on the floor, "
                              "fast and without swinging.")
    needs: ClassVar[Needs] = Needs(dofs=5, placed=_start_unreached,
                                   placed_doc="the hook pointing down high enough to hang the ball above the cup")
    camera: ClassVar[Camera] = {"azimuth": 160, "elevation": -20}  # deg; episodic render frames the rest
    sl: ClassVar[SLMap] = SLMap(("cup x m", "cup y m"), (0, 1), states=tuple(BALL_COLUMNS) + ("cup_x", "cup_y", None))
    columns: ClassVar[tuple[str, ...]] = ("ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz",
                                          "cup_x", "cup_y", "radial", "height", "swing", "string", "rim", "resting")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {**BALL_COLUMNS,
        "cup_x": ("m", "the cup's axis x (world frame)"), "cup_y": ("m", "the cup's axis y (world frame)"),
        "radial": ("m", "ball centre from the cup's axis, horizontally"),
        "height": ("m", "ball centre above the lip (negative below)"),
        "swing": ("m", "ball centre from the anchor, horizontally (0 hanging still)"),
        "string": ("m", "anchor to ball centre"), "rim": ("", "contacts of the ball with the lip"),
        "resting": ("", "1 while the ball rests in the cup")}
    reward_doc: ClassVar[str] = (
        "-max_time (s) at the first step, -strike_penalty per rim strike, max_time - t_rest once at rest")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 2)
    context_help: ClassVar[str] = "the cup's position (x, y) m on the floor, or no context for the default"
    substeps: ClassVar[int] = 4  # 0.5 ms physics steps: the chain string and the bounces converge
    episode_type: ClassVar[type[Episode]] = Cast
    STRIKE_GAP: ClassVar[float] = 0.1  # s, the least time between two rim strikes (module docstring)

    # ball and string
    ball_mass: float = param(0.03, "kg", gt=0)
    ball_radius: float = param(0.0215, "m", gt=0)
    string_length: float = param(0.8, "m", "anchor to ball centre when taut (the anchor is 1.25 m up at the start, "
                                 "the cup's rim 0.09 m)", ge=0.3, le=1.1)
    string_stiffness: float = string_stiffness_param()
    string_dampratio: float = string_dampratio_param()
    # cup
    cup_radius: float = param(0.06, "m", "inner radius, larger than ball_radius", gt=0)
    cup_depth: float = param(0.08, "m", "inner bottom to the top of the lip", gt=0)
    cup_restitution: float = param(CUP_LINING.restitution, "", "the ball's coefficient of restitution on the cup "
                                   "(a rubber-lined cup)", ge=0, le=0.9)
    cup_friction: float = param(CUP_LINING.friction, "", "Coulomb friction coefficient of the ball on the cup",
                                ge=0, le=1.5)
    cup_x: float = coordinate(0.55, "x", "the cup's position without a context")
    cup_y: float = coordinate(0.35, "y", "the cup's position without a context")
    # rest and reward
    rest_speed: float = param(0.05, "m/s", "'resting' below this speed", gt=0)
    rest_time: float = param(0.2, "s", "resting this long in the cup ends the segment: the ball has come to rest",
                             ge=0)
    strike_penalty: float = param(0.5, "s", "subtracted from the return for each rim strike", ge=0)
    max_time: float = param(10.0, "s", "the time charged when the ball never comes to rest in the cup, and the "
                            "most charged: the episode's length", gt=0)
    air: str = contact.air_choice()

    def check_params(self) -> None:
        for key, least, what in (("cup_radius", self.ball_radius, f"ball_radius ({self.ball_radius} m)"),
                                 ("cup_depth", CUP_WALL, f"the wall's thickness ({CUP_WALL} m: the lip sits on it)")):
            if not getattr(self, key) > least:
                raise TaskError(f"parameter '{key}' of task 'casting' must be larger than {what}, "
                                f"got {getattr(self, key)}")

    # -- derived quantities ----------------------------------------------------
    @property
    def rim_height(self) -> float:
        """m, the top of the lip above the floor."""
        return CUP_BOTTOM + self.cup_depth

    @property
    def outer_radius(self) -> float:
        """m, the cup's outer radius."""
        return self.cup_radius + CUP_WALL

    @property
    def default_cup(self) -> np.ndarray:
        """(2,) m, the cup's position without a context: (cup_x, cup_y), given for the WAM, placed
        on the floor in the frame of the robot the scene is built for (:meth:`Task.from_wam`)."""
        return self.from_wam(np.array([self.cup_x, self.cup_y, 0.0]))[:2]

    def base_axis(self) -> np.ndarray:
        """(2,) m, where the robot's base axis (its first joint's) meets the floor: (0, 0) on the WAM."""
        return np.zeros(2) if self._robot is None else RobotFrame.of(self._robot).anchor[:2]

    def string_mass(self) -> float:
        """kg, the chain's links together."""
        return STRING_DENSITY * self.string_length

    def pendulum_period(self) -> float:
        """s, the small-angle period of the ball and string hanging from the held anchor: a compound
        pendulum, the string a uniform rod, the ball a solid sphere at the loaded length."""
        g = contact.GRAVITY
        m_b, m_s, r = self.ball_mass, self.string_mass(), self.ball_radius
        length = self.string_length + self.static_stretch()
        inertia = m_b * (length**2 + 0.4 * r**2) + m_s * self.string_length**2 / 3
        moment = m_b * length + m_s * self.string_length / 2
        return float(2 * np.pi * np.sqrt(inertia / (g * moment)))

    def static_stretch(self) -> float:
        """m, the string's stretch under the hanging ball's weight: ball_mass g / string_stiffness."""
        return self.ball_mass * contact.GRAVITY / self.string_stiffness

    def cup_geoms(self) -> list[str]:
        """The names of the cup's geoms: bottom, wall boxes, lip capsules."""
        return (["cup_bottom"] + [f"cup_wall{k}" for k in range(WALL_BOXES)]
                + [f"cup_lip{k}" for k in range(WALL_BOXES)])

    def _string(self) -> BallInCup:
        """ball_in_cup with this task's string and ball: its chain builder."""
        return BallInCup(string_model="chain", string_length=self.string_length,
                         string_stiffness=self.string_stiffness, string_dampratio=self.string_dampratio,
                         ball_radius=self.ball_radius, ball_mass=self.ball_mass,
                         cup_radius=self.cup_radius)

    # -- scene ---------------------------------------------------------------
    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """The hook: a body on the flange whose -z is the flange's axis (the string hangs along its
        -z when its joints are at zero), a capsule out of the flange face and the anchor beyond
        its tip; the anchor site's x axis is the hook's z (for inverse kinematics)."""
        flange = spec.site(robot.end_effector_site)
        flip = np.zeros(4)
        mujoco.mju_mulQuat(flip, np.asarray(flange.quat, float), np.array([0.0, 1.0, 0.0, 0.0]))
        hook = flange.parent.add_body(name="hook", pos=flange.pos, quat=flip)
        hook.gravcomp = 1.0  # part of the arm: the controller compensates its weight
        hook.add_geom(name="hook", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[HOOK_RADIUS, 0, 0],
                      fromto=[0, 0, -HOOK_RADIUS, 0, 0, -HOOK_LENGTH], mass=0.0, rgba=[0.6, 0.6, 0.65, 1],
                      condim=3, friction=[STRING_FRICTION, 0.005, 0.0001], solref=list(STRING_CONTACT_SOLREF),
                      solimp=list(STRING_CONTACT_SOLIMP), **HOOK_BITS)
        hook.add_site(name="hook_anchor", pos=[0, 0, -HOOK_LENGTH - HOOK_RADIUS - ANCHOR_GAP], size=[0.004, 0, 0],
                      quat=[np.sqrt(0.5), 0.0, -np.sqrt(0.5), 0.0])
        hook.explicitinertial = True  # a rod along the flange's axis
        hook.mass, hook.ipos, hook.iquat = HOOK_MASS, [0.0, 0.0, -HOOK_LENGTH / 2], [1.0, 0.0, 0.0, 0.0]
        hook.inertia = [HOOK_MASS * (HOOK_LENGTH**2 / 12 + HOOK_RADIUS**2 / 4)] * 2 + [HOOK_MASS * HOOK_RADIUS**2 / 2]

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        self._string()._add_chain(_HookSpec(spec))
        self._add_cup(spec)
        overrides = {geom: dict(restitution=self.cup_restitution, friction=self.cup_friction)
                     for geom in self.cup_geoms()}
        contact.add_bouncing_pairs(spec, "ball", HARD_SURFACES.restitution, HARD_SURFACES.friction,
                                   spec.option.timestep, overrides=overrides)
        contact.add_air(spec, ["ball"], mode=self.air)
        add_frame_sensors(spec, "cast_ball", mujoco.mjtObj.mjOBJ_XBODY, "ball")
        for site in ("cup_rim", "hook_anchor"):
            spec.add_sensor(name=f"cast_{site}", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                            objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
        rim = spec.add_sensor(name="cast_rim", type=mujoco.mjtSensor.mjSENS_CONTACT, objtype=mujoco.mjtObj.mjOBJ_GEOM,
                              objname="ball", reftype=mujoco.mjtObj.mjOBJ_BODY, refname="cup_lip")
        rim.intprm[0] = 1 << int(mujoco.mjtConDataField.mjCONDATA_FOUND)  # the number of contacts
        rim.intprm[2] = 1
        spec.add_sensor(name="cast_clock", type=mujoco.mjtSensor.mjSENS_CLOCK)

    def _add_cup(self, spec: mujoco.MjSpec) -> None:
        """The floor cup: a mocap body (placed by the context) with the bottom disc and the wall's
        boxes, and a body ``cup_lip`` on it with the lip's capsules; the site ``cup_rim`` at the
        centre of the opening (the top of the lip)."""
        R, w, t = self.cup_radius, CUP_WALL, CUP_BOTTOM
        lip = t + self.cup_depth - w / 2  # the capsules' axes; the wall's boxes end there
        look = dict(condim=3, rgba=[0.2, 0.45, 0.75, 1.0], solref=list(STRING_CONTACT_SOLREF),
                    solimp=list(STRING_CONTACT_SOLIMP), friction=[STRING_FRICTION, 0.005, 0.0001], **CUP_BITS)
        cup = spec.worldbody.add_body(name="cup", mocap=True, pos=[self.cup_x, self.cup_y, 0.0])
        cup.add_geom(name="cup_bottom", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[R + w, t / 2, 0],
                     pos=[0, 0, t / 2], **look)
        cup.add_site(name="cup_rim", pos=[0, 0, t + self.cup_depth], size=[0.004, 0, 0])
        rim = cup.add_body(name="cup_lip")
        angles = 2 * np.pi * np.arange(WALL_BOXES) / WALL_BOXES
        middle = R + w / 2  # the wall's mid-surface radius
        half_side = middle * np.tan(np.pi / WALL_BOXES)  # half a side of the polygon there
        for k, phi in enumerate(angles):
            radial, along = np.array([np.cos(phi), np.sin(phi)]), np.array([-np.sin(phi), np.cos(phi)])
            cup.add_geom(name=f"cup_wall{k}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[*(middle * radial), lip / 2],
                         size=[w / 2, (R + w) * np.tan(np.pi / WALL_BOXES) + 1e-4, lip / 2],
                         quat=[np.cos(phi / 2), 0, 0, np.sin(phi / 2)], **look)
            ends = [middle * radial - half_side * along, middle * radial + half_side * along]
            rim.add_geom(name=f"cup_lip{k}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[w / 2, 0, 0],
                         fromto=[*ends[0], lip, *ends[1], lip], **look)

    # -- start ---------------------------------------------------------------
    def start_posture(self, robot: Robot) -> np.ndarray:
        """On the WAM ``START_POSTURE``: the flange 1.30 m up over (0.55, -0.35) m, pointing down.
        On another arm the hook's anchor over ``START_OVER`` placed in the arm's frame
        (episodic.task.frame), pointing down, as high as hangs the ball's lowest point
        ``START_LIFT`` above the cup's rim (heights are the string's and the floor's, not scaled):
        of the inverse kinematics solutions from its home and ``START_SEEDS`` seeded postures, the
        farthest from a singular one (the largest least singular value of the anchor's Jacobian:
        the crane's move then keeps away from where the arm cannot follow a path); TaskError when
        none reaches."""
        frame = RobotFrame.of(robot)
        if frame.is_reference():
            return np.array(START_POSTURE)
        height = self.rim_height + START_LIFT + self.ball_radius + self.string_length + self.static_stretch()
        anchor = np.array([*frame.from_wam(np.array(START_OVER))[:2], height])
        key = (robot.name, robot.sha256, *anchor.tolist())
        if key in _STARTS:
            return _STARTS[key].copy()
        ik = tool_ik(robot, self.add_tool, "hook_anchor")
        starts = np.vstack([robot.home, np.random.default_rng(0).uniform(robot.range_lower, robot.range_upper,
                                                                         (START_SEEDS, robot.n_dofs))])
        best, dexterity = None, -np.inf
        for start in starts:
            q, error = ik.solve(start, anchor, np.array([0.0, 0.0, 1.0]), iterations=1000)
            least = float(np.linalg.svd(ik.jacobian(q), compute_uv=False)[-1])
            if error < 1e-6 and ik.pose(q)[1][2] > 0 and least > dexterity:  # the hook's axis down, not up
                best, dexterity = q, least
        if best is None:
            raise TaskError(f"casting needs the hook pointing down {height:.2f} m up over ({anchor[0]:.2f}, "
                            f"{anchor[1]:.2f}) m (the {self.string_length:g} m string's ball {START_LIFT:g} m above "
                            f"the cup's rim), which '{robot.name}' does not reach; choose an arm that does")
        _STARTS[key] = best
        return best.copy()

    def default_context(self) -> np.ndarray:
        """The default cup position (x, y) m."""
        return self.default_cup

    def initialize_episode(self, model, data, context, rng) -> None:
        x, y = context
        if np.hypot(*(context - self.base_axis())) < PEDESTAL_RADIUS + self.outer_radius:
            raise TaskError(f"the cup at ({x:.4g}, {y:.4g}) m stands on the robot's pedestal; its centre must be "
                            f"at least {PEDESTAL_RADIUS + self.outer_radius:.3f} m from the base axis")
        edge = 3.0 - self.outer_radius
        if max(abs(x), abs(y)) > edge:
            raise TaskError(f"the cup at ({x:.4g}, {y:.4g}) m is off the floor; |x| and |y| at most {edge:.3f} m")
        ids = self.episode.ids
        data.mocap_pos[ids.mocap["cup"]] = [x, y, 0.0]
        # ball_in_cup hangs the chain straight below the anchor, still (its names mapped to the hook's)
        string = self._string()
        string._episode = Episode(replace(ids, body=ids.body | {"cup": ids.body["hook"]},
                                          site=ids.site | {"cup_anchor": ids.site["hook_anchor"]}))
        string.initialize_episode(model, data, np.zeros(2), rng)
        mujoco.mj_forward(model, data)
        ball = ids.geom["ball"]
        touched = {model.geom(int(g)).name for c in data.contact[: data.ncon] if ball in (c.geom1, c.geom2)
                   for g in (c.geom1, c.geom2) if g != ball}
        if touched:
            raise TaskError(f"the ball touches {', '.join(sorted(touched))} at the start posture; start the robot "
                            f"elsewhere")
        low = data.xpos[ids.body["ball"]][2] - self.ball_radius
        if not low > self.rim_height:
            raise TaskError(f"the ball hangs {low:.3f} m up at the start posture, not above the cup's rim "
                            f"({self.rim_height:.3f} m); start the robot higher")

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        ball, vel = steps.sensor("cast_ball_pos"), steps.sensor("cast_ball_vel")
        rim, anchor = steps.sensor("cast_cup_rim"), steps.sensor("cast_hook_anchor")
        contacts = steps.sensor("cast_rim")[:, 0]
        radial = np.hypot(ball[:, 0] - rim[:, 0], ball[:, 1] - rim[:, 1])
        height = ball[:, 2] - rim[:, 2]
        swing = np.hypot(ball[:, 0] - anchor[:, 0], ball[:, 1] - anchor[:, 1])
        string = np.linalg.norm(ball - anchor, axis=1)
        speed = np.linalg.norm(vel, axis=1)
        resting = (radial < self.cup_radius) & (height < 0) & (speed < self.rest_speed)
        return np.column_stack([ball, vel, rim[:, :2], radial, height, swing, string, contacts,
                                resting.astype(float)])

    def _rest_step(self, steps: StepView, state: np.ndarray) -> int | None:
        """Index of the first step that ends rest_time s of resting in the cup, or None."""
        need = max(round(self.rest_time / steps.dt), 1)
        resting = np.concatenate([[0], np.cumsum(state[:, 13] > 0.5)])
        full = np.flatnonzero(resting[need:] - resting[:-need] == need)  # windows of need steps all resting
        return int(full[0]) + need - 1 if full.size else None

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        n = len(state)
        reward = np.zeros(n)
        memory = self.episode
        if n == 0 or memory.rested is not None:
            return reward  # the ball has come to rest: the clock has stopped
        times = steps.sensor("cast_clock")[:, 0]
        if memory.start is None:
            memory.start = float(times[0])
            reward[0] -= self.max_time
        rest = self._rest_step(steps, state)
        last = n - 1 if rest is None else rest
        touching = np.flatnonzero(state[: last + 1, 12] > 0)
        if touching.size:  # a strike: a touch STRIKE_GAP s or more after the one before
            touched = times[touching]
            strikes = touching[np.diff(touched, prepend=memory.touched) >= self.STRIKE_GAP - 1e-9]
            reward[strikes] -= self.strike_penalty
            memory.strikes += strikes.size
            memory.touched = float(touched[-1])
        if rest is not None:
            memory.rested = float(times[rest] + steps.dt - memory.start)
            reward[rest] += max(self.max_time - memory.rested, 0.0)
        return reward

    def unplayed_return(self, state: np.ndarray) -> float:
        """-max_time: what the episode's first motion step charges (the ball never at rest in the
        cup), so an episode that ends before it returns no more than one held still."""
        return -self.max_time

    def segment_end(self, steps: StepView, state: np.ndarray) -> int | None:
        rest = self._rest_step(steps, state)
        return None if rest is None else rest + 1

    def time_to_rest(self) -> float | None:
        """s from the motion's start until the ball came to rest in the cup, or None."""
        return self.episode.rested

    def success(self, state: np.ndarray) -> bool:
        return bool(state[13] > 0.5)

