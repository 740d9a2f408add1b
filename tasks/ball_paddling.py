"""ball_paddling: paddle a ball tied to the racket's face by an elastic string, in a steady rhythm.

The paddle-ball toy: a wooden paddle with a rubber ball on an elastic string stapled to the
centre of its face. Hit up, the ball flies until the string tightens, the string stretches and
throws it back down onto the face, and the next hit sends it up again.

Scene. The racket (``add_tool``) is bolted to the tool flange (site "ee"): a wooden handle of
``handle_length`` m along the flange's axis and a round plywood blade (a cylinder of
``blade_radius`` m and ``blade_thickness`` m) beyond it, its face (the side the string is tied
to) normal to the flange's -y axis. A toy paddle is 6 mm plywood about 15 cm wide; wood of
600 kg/m^3 (between basswood's and yellow birch's specific gravities, 0.37 and 0.62 at 12 %
moisture: Wood Handbook, USDA FPL-GTR-190, table 5-3a) makes the 16 cm blade 70 g and the 8 cm
handle 30 g (``blade_mass``, ``handle_mass``).
Its mass and inertia are part of the arm's dynamics, gravity compensation includes it, and it
collides with the ball, not with the arm. Start posture (WAM): ``START_POSTURE``, shoulder and
elbow bent so that the racket points forward with its face level and facing up, the face's
centre at (0.850, 0, 1.204) m. On another arm (``needs``: 6 joints, to place the face's centre
and normal) the face's centre is where the WAM's is, placed in the arm's frame
(episodic.task.frame.RobotFrame), facing up, in the posture that best strokes it up and down:
of the inverse kinematics solutions from 65 seeded starts, each 0.2 rad or more inside the joint
range, the one needing the smallest share of a joint's velocity or torque limit to move the face
vertically at ``STROKE_SPEED`` and accelerate it at ``STROKE_ACCELERATION``
(episodic.task.frame.easiest_posture; searched once per robot, about 1 s). A start posture
whose face is tilted more than 30 degrees from facing up is refused (the ball could not rest on
it).

Ball and string. A solid rubber ball (the issue's 15 g; 30 mm across, i.e. 1.06 g/cm^3, a
rubber's density), free, tied by a string of ``string_length`` m (the issue: 0.3-0.5 m) from
the face's centre (site "racket_face") to the ball's centre: a spatial tendon, a rubber band
that is slack while shorter than ``string_length`` and then pulls with the tension

    T = k x + c max(x', 0)        (x = length - string_length > 0; none while x <= 0)

MuJoCo's dead-band spring (two-value ``springlength`` [0, L], stiffness k = ``string_stiffness``,
the issue's 30 N/m) gives k x exactly. The damping: MuJoCo's tendon damping acts whether the
string is slack or not (on a slack string at 4 m/s it would brake the flying ball by more than
its weight), so the damper is the tendon's length limit at ``string_length`` instead, a soft
constraint active only while the string is longer, in MuJoCo's direct form with no stiffness
and damping c / m (solref (0, -2 zeta omega), omega = sqrt(k / m), zeta = ``string_damping``)
and an impedance of ``STRING_IMPEDANCE`` = 1e-4, as small as MuJoCo allows, so that it adds
only that damper (within 1e-4 of the other forces). A constraint can only pull: the damper
acts while the string lengthens and lets it go as it shortens, a hysteresis loop like a rubber
band's. zeta = 0.05, light as the issue asks: a stretch and release returns the ball at 93 % of
its speed (86 % of the energy; a free bob decays as with a damping ratio of about zeta / 2,
0.024: tested). (The damper's c is felt against the reduced mass of the ball and the racket's
face: 9 % less here, the face being light.) The ball hangs m g / k = 4.9 mm below the string's length, bobbing with
the period 2 pi sqrt(m/k) = 0.1405 s (0.8 % shorter on the held racket, whose face gives; both
tested). The string passes through nothing in play: the ball flies above the face. (A slack
string is drawn as MuJoCo's catenary of its length, hanging through the blade: a drawing only.)

Contacts and air (episodic.task.contact). The ball bounces off every geom it can touch (blade,
handle, the arm's links, the floor) through explicit pairs of restitution ``restitution``
(the issue's suggested 0.7, a rubber ball on a wooden paddle) and Coulomb friction 0.6
(``BALL_ON_PADDLE``; not measured for this pair: the value episodic.task.contact uses for a tennis
ball on a hard surface), calibrated at the physics step: dropped on the held racket's face, the
ball rebounds relative to the face with 0.684-0.705 (tested). In the world it rebounds lower,
0.56-0.58: the face gives, its effective mass at the centre being only 0.16 kg (the wrist's light
joints), as a light paddle in a loose hand does: (e M - m) / (M + m) = 0.553 (tested). The ball
flies through still air (1.204 kg/m^3) with a smooth sphere's drag coefficient 0.47: 2.7 % of its
weight at 4.5 m/s. The physics runs at 0.5 ms (``substeps`` 4): bounces within +-0.015 of
``restitution``, and the reference's rally ends the same at 0.125 ms (return 15 both;
tests/test_convergence.py).

Context (command 0): the target apex height m of the ball's centre above the face's centre,
or nothing for ``apex_height`` (0.45 m: the string stretched by about 5 cm at the top). It must
lie above ``string_length`` (a ball whose apex is lower never stretches the string). Start: the
ball rests on the face's centre, the string slack.

Hits and flights. The ball touches the robot when the contact sensor "touch" finds a contact
between the ball and any geom of the robot (racket or arm: the subtree of the robot's root body)
at a control step; on the face when
that contact's normal lies within 30 degrees of the face's normal (the flat face the string is
tied to: not its back, its rim or the handle). A hit is a touch ``MIN_FLIGHT`` = 0.05 s or more
after the touch before it (a shorter gap, a hop of under 3 mm, is the same touch: a ball rolling
or chattering on the face); the flight is the time since the previous hit (for the first, since
the start: the serve). A flight's apex is the highest ``height`` (the ball's centre above the face's
centre, vertically) in it; its string was taut if ``string`` ever exceeded ``string_length``.

Reward, at the step of each hit (every other step earns 0), for the flight that the hit ends:
  +1 (a good hit) when the hit is on the face, within ``hit_radius`` of its centre (``offset``)
     and on the blade, the string was taut and |apex - target| <= ``apex_tolerance``;
  -``penalty`` for a hit off the face: on the face's back, its rim or the handle, on an arm
     link, or on the face farther than ``hit_radius`` from its centre;
  -``penalty`` for a slack string at the wrong time: a hit on the face after a flight in which
     the string never tightened (the ball fell back by gravity alone), except the serve's;
  0 for a hit on the face after a taut flight whose apex is outside the band (and a slack serve).
Good hits in a row make a streak; any other hit ends it. Success: the episode's longest streak
reaches ``min_hits`` (default 10). Steps outside segments (going to the start, a real-time hold
while the learner is late) earn nothing and are not seen (a touch then is missed). The running
counts are in the task's ``episode`` (hits, off_face, slack, missed, streak, best).

State columns: ball_x, ball_y, ball_z m, ball_vx, ball_vy, ball_vz m/s (the ball's centre);
face_x, face_y, face_z m (the face's centre); height m (ball_z - face_z); offset m (the ball's
centre from the face's normal axis through its centre); string m (face centre to ball centre:
the string's length when taut); touch: 1 the ball touches the face, -1 it touches another part
of the robot, 0 neither.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot, load_robot
from episodic.task import (
    Camera,
    Episode,
    Needs,
    Reference,
    StepView,
    Task,
    TaskError,
    add_frame_sensors,
    add_free_ball,
    add_tool_body,
    param,
    place_free_ball,
)
from episodic.task.contact import SPHERE_DRAG_COEFFICIENT, MaterialPair, add_air, add_bouncing_pairs, air_choice
from episodic.task.contract import BALL_COLUMNS
from episodic.task.frame import REFERENCE_ROBOT, RobotFrame, easiest_posture, tool_ik

GRAVITY = 9.81  # m/s^2, MuJoCo's default |gravity|
BALL_ON_PADDLE = MaterialPair(
    ball="solid rubber ball (15 g, 30 mm)", surface="wooden racket (blade, handle), arm links, floor",
    restitution=0.7, friction=0.6, radius=0.015, mass=0.015,
    source="restitution: the issue's suggested value for a rubber ball on a wooden paddle; friction: not "
           "measured for this pair, episodic.task.contact's tennis ball on a hard surface")
STRING_IMPEDANCE = 1e-4  # the string limit's solimp (dmin = dmax): MuJoCo's smallest (module docstring)
FACE_COSINE = np.cos(np.radians(30.0))  # a touch on the face: its normal within 30 degrees of the face's
MIN_FLIGHT = 0.05  # s, the shortest time from one touch to the next that makes the next a hit
FACE_UP = np.cos(np.radians(30.0))  # a start posture's face normal: at least this far up (cosine)
HEIGHT, OFFSET, STRING, TOUCH = 9, 10, 11, 12  # columns of the state
# the face's peak speed m/s and acceleration m/s^2 in a steady paddling rhythm (that of
# examples/ball_paddling_reference.py: 5.8 cm at 2.85 Hz), for which another arm's start posture is chosen
STROKE_SPEED, STROKE_ACCELERATION = 1.05, 18.7
# shoulder 0.96 rad, elbow 1.8 rad, the wrist pitched to keep the racket level (j2 + j4 + j6 =
# pi/2 levels the flange's axis on the WAM) and j7 turning the face up
START_POSTURE = np.array([0.0, 0.96, 0.0, 1.8, 0.0, np.pi / 2 - 2.76, -np.pi / 2])


_POSTURES: dict[tuple, np.ndarray] = {}  # _start_posture's results


def _root_body(spec: mujoco.MjSpec, robot: Robot) -> str:
    """The robot's root body (the world's child that holds its first joint): the touch sensor's
    subtree ("wam_base" on the WAM)."""
    body = spec.joint(robot.joint_names[0]).parent
    while body.parent.name != "world":
        body = body.parent
    return str(body.name)


def _start_posture(robot: Robot, handle_length: float, blade_radius: float, blade_thickness: float,
                   clearance: tuple[float, float]) -> np.ndarray:
    """BallPaddling.start_posture on an arm other than the WAM, for a racket of these dimensions m
    and ``clearance`` (radius m, height m) over its face for the ball (computed once per robot
    model, home, limits and racket: a search over 65 starts, about 1 s)."""
    key = (robot.sha256, robot.home.tobytes(), robot.range_lower.tobytes(), robot.range_upper.tobytes(),
           robot.velocity_limit.tobytes(), robot.torque_limit.tobytes(), handle_length, blade_radius,
           blade_thickness, clearance)
    if key not in _POSTURES:
        _POSTURES[key] = _search_posture(robot, handle_length, blade_radius, blade_thickness, clearance)
    return _POSTURES[key]


def _search_posture(robot: Robot, handle_length: float, blade_radius: float, blade_thickness: float,
                    clearance: tuple[float, float]) -> np.ndarray:
    task = BallPaddling(handle_length=handle_length, blade_radius=blade_radius, blade_thickness=blade_thickness)
    face, _ = tool_ik(load_robot(REFERENCE_ROBOT), task.add_tool, "racket_face").pose(START_POSTURE)
    up = np.array([0.0, 0.0, 1.0])
    q = easiest_posture(tool_ik(robot, task.add_tool, "racket_face"), robot, RobotFrame.of(robot).from_wam(face), up,
                        np.concatenate([up, np.zeros(3)]), STROKE_SPEED, STROKE_ACCELERATION, clearance=clearance)
    if q is None:
        raise TaskError(f"ball_paddling cannot hold the racket's face level where it is placed on '{robot.name}'; "
                        f"choose an arm that reaches it")
    return q


@dataclass
class Rally(Episode):
    """The reward's memory over the episode's segments (module docstring): the flight so far,
    the streak and the counts of hits by kind."""

    last_touch: float = 0.0       # s, clock time of the last step at which the ball touched the robot
    apex: float = -np.inf         # m, highest height of the flight so far
    taut: bool = False            # the string was stretched during the flight so far
    streak: int = 0               # consecutive good hits
    best: int = 0                 # the longest streak of the episode
    hits: int = 0                 # good hits
    off_face: int = 0             # hits off the face
    slack: int = 0                # hits after a flight with a slack string
    missed: int = 0               # hits on the face after a taut flight with the apex out of the band, or a slack serve
    target: float = 0.0           # m, the target apex height (the context)
    served: bool = False          # the serve (the flight before the first hit) is over


@dataclass
class BallPaddling(Task[Rally]):
    name: ClassVar[str] = "ball_paddling"
    reference: ClassVar[Reference | None] = Reference(  # examples/ball_paddling_reference.py
        "examples.ball_paddling_reference:reference_commands",
        return_tolerance=1.0,  # a good hit more or less; the reference's return is 15
        learner="examples.learning.ball_paddling",
    )
    summary: ClassVar[str] = "paddle a ball tied to the racket by an elastic string, in a steady rhythm."
    needs: ClassVar[Needs] = Needs(dofs=6)  # the face's centre and normal placed, and a way to move it
    camera: ClassVar[Camera] = {"azimuth": 120, "elevation": -5}  # deg; episodic render frames the rest
    columns: ClassVar[tuple[str, ...]] = (
        "ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz", "face_x", "face_y", "face_z",
        "height", "offset", "string", "touch")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {**BALL_COLUMNS,
        "face_x": ("m", "the paddle face's centre x"), "face_y": ("m", "the paddle face's centre y"),
        "face_z": ("m", "the paddle face's centre z"), "height": ("m", "ball_z - face_z"),
        "offset": ("m", "ball centre from the face's normal axis"),
        "string": ("m", "face centre to ball centre (the string when taut)"),
        "touch": ("", "1 the ball touches the face, -1 another part of the robot, 0 neither")}
    reward_doc: ClassVar[str] = "at each hit: +1 a good hit, -penalty off the face or after a slack string, else 0"
    context_sizes: ClassVar[tuple[int, ...]] = (0, 1)
    context_help: ClassVar[str] = "a target apex height m of the ball's centre above the racket's face, or no context"
    substeps: ClassVar[int] = 4  # 0.5 ms physics: bounces within +-0.015 of ``restitution`` (docstring)
    episode_type: ClassVar[type[Episode]] = Rally

    # string and ball
    string_length: float = param(0.4, "m", "face centre to ball centre when just taut", gt=0)
    string_stiffness: float = param(30.0, "N/m", "elasticity of the stretched string", gt=0)
    string_damping: float = param(0.05, "", "damping ratio c / (2 sqrt(k m)) of the string's damper, acting while "
                                  "it is taut and lengthening", ge=0, lt=1)
    ball_mass: float = param(0.015, "kg", gt=0)
    ball_radius: float = param(0.015, "m", gt=0)
    restitution: float = param(BALL_ON_PADDLE.restitution, "", "the ball's coefficient of restitution on the "
                               "racket, the arm and the floor", ge=0, lt=1)
    # racket (a paddle-ball paddle: plywood blade and handle)
    blade_radius: float = param(0.08, "m", gt=0)
    blade_thickness: float = param(0.006, "m", gt=0)
    blade_mass: float = param(0.07, "kg", gt=0)
    handle_length: float = param(0.08, "m", "flange to the blade's edge", gt=0)
    handle_mass: float = param(0.03, "kg", gt=0)
    # reward and success
    apex_height: float = param(0.45, "m", "the target apex of the ball's centre above the face without a context",
                               gt=0)
    apex_tolerance: float = param(0.05, "m", "half width of the apex band", gt=0)
    hit_radius: float = param(0.06, "m", "a hit on the face lands within this of its centre (and on the blade)",
                              gt=0)
    penalty: float = param(1.0, "", "reward of a hit off the face or after a slack flight, negated", ge=0)
    min_hits: int = param(10, "", "success: this many good hits in a row", ge=1)
    air: str = air_choice()

    def check_params(self) -> None:
        if not self.string_length > self.ball_radius:
            raise TaskError(f"parameter 'string_length' of task '{self.name}' must be longer than ball_radius "
                            f"({self.ball_radius} m): the string would be taut with the ball on the face; "
                            f"got {self.string_length}")
        self._check_apex(self.apex_height, "parameter 'apex_height'")

    def _check_apex(self, apex: float, what: str) -> None:
        if not apex > self.string_length:
            raise TaskError(f"{what} of task '{self.name}' must be above string_length ({self.string_length} m): "
                            f"a ball whose apex is lower never stretches the string; got {apex}")

    # -- derived quantities ----------------------------------------------------
    @property
    def static_stretch(self) -> float:
        """m, how far the hanging ball's weight stretches the string: m g / k."""
        return self.ball_mass * GRAVITY / self.string_stiffness

    @property
    def bob_period(self) -> float:
        """s, the period 2 pi sqrt(m / k) of the ball bobbing on the taut string (undamped)."""
        return 2 * np.pi * np.sqrt(self.ball_mass / self.string_stiffness)

    @property
    def face_radius(self) -> float:
        """m, how far from the face's centre a hit on the face may land: hit_radius, at most the blade's."""
        return min(self.hit_radius, self.blade_radius)

    # -- scene ------------------------------------------------------------------
    @property
    def blade_centre(self) -> float:
        """m, the blade's centre from the flange along the handle."""
        return self.handle_length + self.blade_radius

    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        handle_r, blade_r, half_t = 0.012, self.blade_radius, self.blade_thickness / 2
        centre = self.blade_centre
        # racket frame = flange frame; the handle runs along +z, the face (the side the string is
        # tied to) faces -y: at the WAM's home posture the racket points forward and the face up
        geoms = [
            dict(name="racket_handle", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[handle_r, 0, 0],
                 fromto=[0, 0, handle_r, 0, 0, self.handle_length + 0.01], mass=self.handle_mass,
                 rgba=[0.6, 0.4, 0.2, 1]),
            dict(name="racket_blade", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[blade_r, half_t, 0],
                 pos=[0, 0, centre], quat=[np.sqrt(0.5), np.sqrt(0.5), 0, 0], mass=self.blade_mass,
                 rgba=[0.85, 0.65, 0.4, 1]),
        ]
        body = add_tool_body(spec, robot, "racket", geoms)
        # the blade's centre and the face's centre, each with its x axis along the face normal
        # (-y of the racket frame): a rotation by -90 degrees about z
        normal_x = [np.sqrt(0.5), 0, 0, -np.sqrt(0.5)]
        body.add_site(name="racket_centre", pos=[0, 0, centre], quat=normal_x, group=3)
        body.add_site(name="racket_face", pos=[0, -half_t, centre], quat=normal_x, group=3)

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        ball = add_free_ball(spec, "ball", [0.8, 0.0, 1.5], self.ball_radius, self.ball_mass,
                             rgba=[0.85, 0.1, 0.1, 1], contype=1, conaffinity=1)
        ball.add_site(name="ball", pos=[0, 0, 0])
        add_frame_sensors(spec, "ball", mujoco.mjtObj.mjOBJ_SITE, "ball")
        add_frame_sensors(spec, "face", mujoco.mjtObj.mjOBJ_SITE, "racket_face")
        spec.add_sensor(name="face_normal", type=mujoco.mjtSensor.mjSENS_FRAMEXAXIS,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname="racket_face")
        # the string: a dead-band spring, and a damper acting while it is taut and lengthening (module docstring)
        string = spec.add_tendon(name="string", stiffness=self.string_stiffness, springlength=[0.0, self.string_length],
                                 limited=mujoco.mjtLimited.mjLIMITED_TRUE, range=[0.0, self.string_length],
                                 width=0.0015, rgba=[0.95, 0.95, 0.9, 1])
        omega = np.sqrt(self.string_stiffness / self.ball_mass)
        string.solref_limit = [0.0, -2 * self.string_damping * omega]  # direct: no stiffness, damping c / m
        string.solimp_limit = [STRING_IMPEDANCE, STRING_IMPEDANCE, 0.001, 0.5, 2.0]
        string.wrap_site("racket_face")
        string.wrap_site("ball")
        spec.add_sensor(name="string", type=mujoco.mjtSensor.mjSENS_TENDONPOS,
                        objtype=mujoco.mjtObj.mjOBJ_TENDON, objname="string")
        spec.add_sensor(name="clock", type=mujoco.mjtSensor.mjSENS_CLOCK)
        add_bouncing_pairs(spec, "ball", self.restitution, BALL_ON_PADDLE.friction, spec.option.timestep)
        # touch: whether the ball touches the robot (the racket or the arm), through those pairs
        touch = spec.add_sensor(name="touch", type=mujoco.mjtSensor.mjSENS_CONTACT,
                                objtype=mujoco.mjtObj.mjOBJ_GEOM, objname="ball",
                                reftype=mujoco.mjtObj.mjOBJ_XBODY, refname=_root_body(spec, robot))
        touch.intprm = [1 | 32, 0, 1]  # data "found" and "normal", no reduction, 1 slot
        add_air(spec, ["ball"], SPHERE_DRAG_COEFFICIENT, self.air)

    def start_posture(self, robot: Robot) -> np.ndarray:
        """The racket forward, its face level and facing up (module docstring): on the WAM
        ``START_POSTURE``; on another arm the face's centre where the WAM's is, placed in the arm's
        frame (episodic.task.frame), the face up, in the posture that raises the face with the
        least joint rates for the arm's velocity limits (:func:`easiest_posture`)."""
        if RobotFrame.of(robot).is_reference():
            return START_POSTURE.copy()
        return _start_posture(robot, self.handle_length, self.blade_radius, self.blade_thickness,
                              (2 * self.ball_radius, self.apex_height + 2 * self.ball_radius)).copy()

    def default_context(self) -> np.ndarray:
        """The target apex height ``apex_height`` m."""
        return np.array([self.apex_height])

    def initialize_episode(self, model, data, context, rng) -> None:
        self._check_apex(float(context[0]), "the target apex height (context)")
        ids = self.episode.ids
        self.episode.target = float(context[0])
        mujoco.mj_kinematics(model, data)
        face = data.site_xpos[ids.site["racket_face"]]
        normal = data.site_xmat[ids.site["racket_face"]].reshape(3, 3)[:, 0]
        if not normal[2] >= FACE_UP:
            tilt = np.degrees(np.arccos(np.clip(normal[2], -1.0, 1.0)))
            raise TaskError(f"the racket's face is tilted {tilt:.0f} degrees from facing up at the start posture; "
                            f"the ball rests on it at the start, so it must face up within 30 degrees")
        place_free_ball(data, ids, "ball", face + normal * self.ball_radius)  # resting on the face's centre

    # -- per step ----------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        ball, vel = steps.sensor("ball_pos"), steps.sensor("ball_vel")
        face, normal = steps.sensor("face_pos"), steps.sensor("face_normal")
        rel = ball - face
        offset = np.linalg.norm(rel - np.einsum("ij,ij->i", rel, normal)[:, None] * normal, axis=1)
        touch = steps.sensor("touch")
        # the contact normal points from the ball into what it touches: against the face normal on the face
        facing = np.einsum("ij,ij->i", touch[:, 1:4], normal) <= -FACE_COSINE
        touching = np.where(touch[:, 0] > 0, np.where(facing, 1.0, -1.0), 0.0)
        return np.column_stack([ball, vel, face, rel[:, 2], offset, steps.sensor("string")[:, 0], touching])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        rewards = np.zeros(len(state))
        if len(state) == 0:
            return rewards
        memory = self.episode
        times = steps.sensor("clock")[:, 0]
        touching = np.flatnonzero(state[:, TOUCH] != 0)
        # a hit: the ball touches the robot after MIN_FLIGHT s or more without touching it
        before = np.concatenate([[memory.last_touch], times[touching[:-1]]])
        hits = touching[times[touching] - before >= MIN_FLIGHT - 1e-9]
        height, string = state[:, HEIGHT], state[:, STRING]
        start = 0
        for h in hits:
            apex = max(memory.apex, float(height[start : h + 1].max()))
            taut = memory.taut or bool(np.any(string[start : h + 1] > self.string_length))
            rewards[h] = self._judge(state[h], apex, taut)
            memory.apex, memory.taut, memory.served, start = -np.inf, False, True, h + 1
        if start < len(state):
            memory.apex = max(memory.apex, float(height[start:].max()))
            memory.taut = memory.taut or bool(np.any(string[start:] > self.string_length))
        if touching.size:
            memory.last_touch = float(times[touching[-1]])
        return rewards

    def _judge(self, row: np.ndarray, apex: float, taut: bool) -> float:
        """The reward of a hit in state ``row`` ending a flight of ``apex`` m whose string was
        (``taut``) or was not stretched, and the memory's counts and streak updated."""
        memory = self.episode
        on_face = row[TOUCH] > 0 and row[OFFSET] <= self.face_radius
        good = on_face and taut and abs(apex - memory.target) <= self.apex_tolerance
        memory.streak = memory.streak + 1 if good else 0
        memory.best = max(memory.best, memory.streak)
        if good:
            memory.hits += 1
            return 1.0
        if not on_face:
            memory.off_face += 1
            return -self.penalty
        if not taut and memory.served:
            memory.slack += 1
            return -self.penalty
        memory.missed += 1
        return 0.0

    def success(self, state: np.ndarray) -> bool:
        return self.episode.best >= self.min_hits
