"""ball_bouncing: bounce a free tennis ball on a racket, again and again, to a target height.

Scene. A tennis racket is bolted to the tool flange (site "ee"), held by its throat: a short
post rises from the flange to the underside of the head, a thin cylinder of radius
``head_radius`` and ``head_thickness`` whose face normal is the flange's -x axis and whose centre
lies ``HEAD_HEIGHT`` = 8 cm along that normal from the centre of the WAM's spherical wrist (where
the axes of j5, j6 and j7 meet, ``WRIST_OFFSET`` = 6 cm behind the flange); the handle lies in
the head's plane and points along the flange axis from the rim. The racket's mass and inertia
are part of the arm's dynamics and gravity compensation includes it. At the start posture
(``START``: the arm reaching forward and a little down, the elbow bent back, j6 = pi/2 - (j2 + j4)
so that the flange points straight ahead, j7 = 0) the face is horizontal, facing up, its centre
at (0.828, 0, 1.254) m, the handle pointing away from the robot. A ball hitting the face pushes
along the face normal through the wrist's centre: the impacts load the strong joints j1-j4, not
the weak wrist (5, 5, 2 N m), which an impact on a racket held at its handle would overpower.
Nothing ties the ball to the robot: at the start it lies on the face, and it bounces off
whatever it reaches: the racket, the arm's links, the floor.

Other arms (``needs``: 6 joints, the last three tilting the face for the feedback law, and the
torque to toss the ball). The racket is bolted to the arm's flange as to the WAM's (its head over
the point 6 cm behind the flange, wherever that arm's wrist centre is). The face's centre is where
the WAM's is, placed in the arm's frame (episodic.task.frame.RobotFrame), facing up, in the
posture that best strokes it vertically (episodic.task.frame.easiest_posture: of the inverse
kinematics solutions from 65 seeded starts, each 0.2 rad or more inside the joint range, with no
link of the arm over the face within a ball's radius up to the target apex and a ball's diameter
more, the one needing the smallest share of a joint's velocity or torque limit to move the face at
``STROKE_SPEED`` and accelerate it at ``STROKE_ACCELERATION``, at the start and ``STROKE_TRAVEL``
above and below it; searched once per robot, about 1 s). An arm whose torque at that posture,
gravity and the toss's acceleration together (episodic.task.frame.stroke_shares), passes
``TOSS_TORQUE`` times a joint's limit is refused with the numbers (the Panda: 1.21 of
panda_joint2's 87 N m).

Ball, contacts and air (episodic.task.contact, calibrated by drop tests: tests/test_task_ball_bouncing.py).
The ball is a tennis ball, 57 g and 33.5 mm in radius (ITF Rules of Tennis, Appendix I:
56.0-59.4 g, 65.4-68.6 mm across). It meets every geom it can touch through explicit bouncing
pairs. On the racket's head the coefficient of restitution is the episode's (the context, by
default ``restitution``, 0.75): the racket's elasticity, from a dead (0.6) to a lively (0.9)
string bed. 0.75 is a tennis ball on a rigid surface (ITF: dropped from 254 cm onto concrete, a
type 2 ball rebounds 135-147 cm, e = 0.73-0.76); a racket held rigidly rebounds the ball with a
coefficient that falls with impact speed and string tension (Goodwill & Haake, J. Sports Sci.
21, 839 (2003), on rigidly clamped rackets). Elsewhere (handle, post, the arm's links, the
floor) it is 0.75. Friction is 0.6 everywhere (a tennis ball on a hard court, 0.5-0.7),
acting during the impact (the ball leaves an oblique impact rolling, as a real one does). The
physics runs at 0.5 ms (``substeps`` 4): there one bounce's restitution lies within about
+-0.02 of its target, where at 2 ms it would depend on where the impact falls between two
steps by up to -0.05 / +0.10 (episodic.task.contact). Air: 1.204 kg/m^3 at 20 degC with a tennis
ball's drag coefficient 0.508 (Stepanek, Am. J. Phys. 56, 138 (1988)); on a 0.45 m bounce (3 m/s)
drag is up to 1.7 % of the ball's weight and takes 4 mm off the apex (the flight is tested
against an integration with drag and against the parabola), so it is kept.

Context (command 0), any leading part of (h, e, dx, dy, vx, vy), the rest from
(``target_apex``, ``restitution``, 0, 0, 0, 0): h m, the target apex: how far above its start
position the ball's centre should peak; e, the coefficient of restitution of the ball on the
racket's head this episode (set on the model's contact pair at every reset, so each episode, and
its replay, has its own); (dx, dy) m, where the ball lies on the face: its centre's offset from
the face's centre along the face (world x and y when the face is horizontal); (vx, vy) m/s, the
ball rolling along the face at the start (0: at rest). Start: the ball's centre at the face's
centre + (dx, dy) along the face and ``ball_radius`` above it, unrotated, rolling without
slipping at (vx, vy). The face must be within 0.2 rad of horizontal at the start posture
(``StartCommand``'s posture may differ from ``START``), the offset within the face and the speed
at most 1 m/s.

Feedback law (a gains command's task gains [k_r, k_v], rad/m and rad s/m; in C,
tasks/ball_bouncing.c): a mirror law for the sideways motion. Each control step the face is
tilted toward the face's centre, by the horizontal vector t = -(k_r r + k_v v) rad (clipped to
``max_tilt``), where r m is the ball's horizontal offset from the face's centre and v m/s its
horizontal velocity relative to the face: the wrist joints j5, j6, j7 get the offsets that turn
the face normal by t (its horizontal components) without turning the racket about it (damped
least squares on the wrist's angular Jacobian: j5 and j7 line up where j6 passes 0). r and v come
from the ball's horizontal position and velocity as a tracker senses them and the face's present
pose and velocity (the joint encoders). Sensing (episodic/native/sensing.py): the ball's x, y and
vx, vy reach the law ``sensing_latency`` s late (rounded to control steps of 2 ms), each with
independent Gaussian noise of std ``sensing_noise`` m and ``sensing_noise_rate`` m/s, drawn from
the episode's random generator (seeded by the run's seed and the episode's number, so a replay
repeats it); the defaults, 0, give the true state at once and keep the reference's figures
comparable (a camera tracker is 6-17 ms late: sensing.py). An open-loop
stroke alone cannot keep the ball on this arm's racket: a hit off the centre turns the racket
about the wrist, tilting the face toward where the ball hit while they touch (a hit 2 cm off the
centre leaves 0.017 m/s faster outward along the flange axis, 0.06 m/s across it, than one at
the centre, with the robot's wrist gains: tested), so the sideways offset grows about 1.5 to 2
times per bounce and the ball is off the racket after 5 or 6 (the reference stroke without the
mirror law) unless something steers it back.

Bounces. A flight is a stretch of steps in which the ball touches nothing (a touch sensor on
the ball); its apex is the step at which its vertical velocity turns from up to down, the apex
height z_prev + vz_prev^2 / 2g (the step before: within 0.1 mm). A bounce is a flight that
leaves the racket's head and rises at least ``MIN_BOUNCE`` = 1 cm (so the ball lying on the
moving face is not bouncing); it is "good" when its apex lies within ``apex_band`` of the
target height (start height + h). A flight that leaves anything else (the arm, the handle)
counts for nothing and breaks the run of good bounces, as does a bounce outside the band.

Reward. At each bounce's apex: 1 if it is good, minus the sideways distance (m) of the ball's
centre from the face's centre (along the face) when it left the racket; every other step 0.
The ball touching the floor (its centre within 1 mm of its radius above it) ends the game: from
that step on the episode earns nothing and cannot succeed. The segment runs on (it is not cut
short, so a learner's next segment still starts where this one was planned to end); the floor
column tells the learner. Steps outside segments (going to the start, a
real-time hold while the learner is late) are not seen: a bounce in them neither counts nor
breaks the run. Success: at least ``min_bounces`` good bounces in a row and the ball never on
the floor.

State columns: ball_x, ball_y, ball_z m, ball_vx, ball_vy, ball_vz m/s (the ball's centre,
world frame); face_x, face_y, face_z m (the centre of the face); tilt rad (the face normal's
angle from vertical); height m (the ball's lowest point above the face's plane: negative
while it presses in); lateral m (the ball centre's distance from the face's axis); target_z
m (the target apex height of the ball's centre, world frame); on_racket, contact, floor: 1
while the ball presses on the racket's head, touches anything, touches the floor, else 0.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot, load_robot
from episodic.native import CompiledLaw
from episodic.native.sensing import Sensing, add_control_period
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
    add_target,
    add_tool_body,
    param,
    place_free_ball,
    place_target,
)
from episodic.task.contact import (
    MATERIALS,
    TENNIS_BALL_DRAG_COEFFICIENT,
    add_air,
    add_bouncing_pairs,
    air_choice,
    solref_for_restitution,
)
from episodic.task.contract import BALL_COLUMNS
from episodic.task.frame import REFERENCE_ROBOT, RobotFrame, easiest_posture, stroke_shares, tool_ik
from episodic.task.sl import SLMap

GRAVITY = 9.81  # m/s^2, MuJoCo's default |gravity|
BALL_SURFACES = MATERIALS["tennis_ball_on_rigid"]  # restitution 0.75, friction 0.6 and their sources
# the start posture: the arm reaching forward and a little down, the elbow bent back, the flange
# pointing straight ahead (j6 = pi/2 - (j2 + j4)): the face up, the handle pointing away from the robot
START = np.array([0.0, 1.7, 0.0, -0.3, 0.0, np.pi / 2 - 1.4, 0.0])
WRIST_OFFSET = 0.06    # m, the WAM's wrist centre (where j5, j6, j7 meet) behind the flange (Barrett: d7)
HEAD_HEIGHT = 0.08     # m, the head's centre above the flange axis, over the wrist centre
POST_RADIUS = 0.012    # m
HANDLE_RADIUS = 0.015  # m
WRIST_DAMPING = 1e-4   # rad^2, the feedback law's damped least squares on the wrist's Jacobian
MAX_START_TILT = 0.2   # rad, the face's largest angle from horizontal at the start
MIN_BOUNCE = 0.01      # m, the least rise above its take-off height of a flight that counts as a bounce
FLOOR_CONTACT = 0.001  # m, the ball's centre at most this above its radius: it touches the floor
MAX_START_SPEED = 1.0  # m/s, the fastest the ball may roll at the start
# where the ball waits until the first reset places it: on the floor, beside the robot (x, y m)
PARKED = (0.0, -1.2)
# the face's peak speed m/s and acceleration m/s^2 when it bounces the ball to 0.45 m (the toss and
# the stroke of examples/ball_bouncing_reference.py), for which another arm's start posture is chosen
STROKE_SPEED, STROKE_ACCELERATION = 1.4, 27.0
STROKE_TRAVEL = 0.12  # m, how far the face moves up and down from its start in that stroke
# the most of a joint's torque limit that the toss may need by stroke_shares' estimate (gravity and
# the peak acceleration at once, at the start posture): the Puma 560 at 1.00 (j2) and the UR5 at
# 0.92 (shoulder_lift) toss and rally (their references succeed); the Panda at 1.21 (panda_joint2)
# cannot: that joint saturates at 87 N m before the first hit, the face tilts 0.04 rad and the ball
# is off the racket by the third bounce
TOSS_TORQUE = 1.1
_POSTURES: dict[tuple, np.ndarray] = {}  # BallBouncing.start_posture's on arms other than the WAM


def _toss_torque(robot: Robot) -> str:
    """Why ``robot`` cannot toss the ball (Needs.placed; "" when it can): at its start posture the
    torque to hold the arm and accelerate the face at STROKE_ACCELERATION passes TOSS_TORQUE times
    a joint's limit."""
    task = BallBouncing()
    q = task.start_posture(robot)
    up = np.array([0.0, 0.0, 1.0])
    ik = tool_ik(robot, task.add_tool, "racket_face")
    _, torque = stroke_shares(ik, robot, q, np.concatenate([up, np.zeros(3)]), STROKE_SPEED, STROKE_ACCELERATION)
    joint = int(np.argmax(torque))
    if torque[joint] <= TOSS_TORQUE:
        return ""
    return (f"cannot toss the ball: accelerating the face at {STROKE_ACCELERATION:g} m/s^2 from its start posture "
            f"needs {torque[joint]:.2f} times {robot.joint_names[joint]}'s torque limit "
            f"({robot.torque_limit[joint]:g} N m; at most {TOSS_TORQUE:g} is followed)")


@dataclass
class Bounces(Episode):
    """What the episode remembers of the ball's bounces (see the module docstring).

    last: the last step seen (time s, z m, vz m/s, contact, on_racket, lateral m); at the start,
    time None: the ball lying on the face before the first step;
    airborne: the ball is in a flight; from_racket: that flight left the racket's head;
    take_off: m, the height it left at; launch_lateral: m, its sideways distance then;
    apex_seen: the flight's apex has been scored; run, best_run: good bounces in a row now and
    at most; bounces, good: bounces so far and the good ones; apexes: (time s, apex height m,
    good) of each bounce; floored: the ball has touched the floor; sensing: the feedback law's
    tracker, memory: its sensing memory block (changed in place by the compiled law)."""

    last: tuple | None = None
    airborne: bool = False
    from_racket: bool = False
    take_off: float = 0.0
    launch_lateral: float = 0.0
    apex_seen: bool = True
    run: int = 0
    best_run: int = 0
    bounces: int = 0
    good: int = 0
    apexes: list = field(default_factory=list)
    floored: bool = False
    sensing: Sensing | None = None
    memory: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class BallBouncing(Task[Bounces]):
    name: ClassVar[str] = "ball_bouncing"
    reference: ClassVar[Reference | None] = Reference(  # examples/ball_bouncing_reference.py
        "examples.ball_bouncing_reference:reference_commands",
        return_tolerance=0.1,  # the reference's return is 18.96 (19 good bounces); a bounce more or less is 1
        learner="examples.learning.ball_bouncing",
    )
    summary: ClassVar[str] = "bounce a free tennis ball on a racket again and again to a target height."
    # the face's centre and normal placed, three wrist joints to tilt it, and the torque to toss the ball
    needs: ClassVar[Needs] = Needs(dofs=6, placed=_toss_torque,
                                   placed_doc="the torque to toss the ball from its start posture")
    camera: ClassVar[Camera] = {"azimuth": 120, "elevation": -15}  # deg; episodic render frames the rest
    sl: ClassVar[SLMap] = SLMap(states=tuple(BALL_COLUMNS) + (None, None, "target_z"))  # SL: no start values
    columns: ClassVar[tuple[str, ...]] = ("ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz",
                                          "face_x", "face_y", "face_z", "tilt", "height", "lateral", "target_z",
                                          "on_racket", "contact", "floor")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {**BALL_COLUMNS,
        "face_x": ("m", "the racket face's centre x"), "face_y": ("m", "the racket face's centre y"),
        "face_z": ("m", "the racket face's centre z"), "tilt": ("rad", "the face normal from vertical"),
        "height": ("m", "the ball's lowest point above the face (negative pressing in)"),
        "lateral": ("m", "ball centre from the face's axis"),
        "target_z": ("m", "the target apex of the ball centre"),
        "on_racket": ("", "1 while the ball presses on the racket"),
        "contact": ("", "1 while the ball touches anything"), "floor": ("", "1 while the ball touches the floor")}
    reward_doc: ClassVar[str] = (
        "at each bounce's apex: 1 for a good bounce minus its sideways miss (m) at the racket; else 0")
    context_sizes: ClassVar[tuple[int, ...]] = tuple(range(7))
    context_help: ClassVar[str] = ("any leading part of (apex m, restitution, dx m, dy m, vx m/s, vy m/s): the target "
                                   "apex above the ball's start, the racket's restitution, the ball's offset on the "
                                   "face and its rolling velocity at the start")
    gains_help: ClassVar[str] = ("[k_r, k_v] rad/m, rad s/m: the face tilts toward its centre by -(k_r r + k_v v), "
                                 "clipped to max_tilt; r m, v m/s the ball's horizontal offset from the face's "
                                 "centre and velocity relative to it")
    substeps: ClassVar[int] = 4  # 0.5 ms physics: bounces within +-0.02 of their restitution (docstring)
    episode_type: ClassVar[type[Episode]] = Bounces

    # ball
    ball_mass: float = param(0.057, "kg", "a tennis ball (ITF: 56.0-59.4 g)", gt=0)
    ball_radius: float = param(0.0335, "m", "a tennis ball (ITF: 65.4-68.6 mm across)", gt=0)
    restitution: float = param(BALL_SURFACES.restitution, "", "the ball's coefficient of restitution on the racket's "
                               "head when the context gives none (its elasticity)", ge=0, lt=1)
    # racket (a tennis racket held by its throat, the head over the wrist)
    head_radius: float = param(0.125, "m", "radius of the racket's round head", gt=0)
    head_thickness: float = param(0.02, "m", "the head's depth", gt=0)
    head_mass: float = param(0.2, "kg", "frame and strings of the head", gt=0)
    handle_length: float = param(0.2, "m", "rim to the handle's end", gt=0)
    handle_mass: float = param(0.1, "kg", "handle and post", gt=0)
    max_tilt: float = param(0.1, "rad", "the feedback law's largest tilt of the face", gt=0, le=0.5)
    # target and success
    target_apex: float = param(0.45, "m", "the target apex above the ball's start when the context gives none", gt=0)
    apex_band: float = param(0.05, "m", "a good bounce's apex lies within this of the target height", gt=0)
    min_bounces: int = param(10, "", "success: at least this many good bounces in a row", ge=1)
    # sensing (the module docstring)
    sensing_latency: float = param(0.0, "s", "how late the law sees the ball (rounded to control steps)",
                                   ge=0, le=1.0)
    sensing_noise: float = param(0.0, "m", "std of the noise on the ball's sensed x and y", ge=0, le=1.0)
    sensing_noise_rate: float = param(0.0, "m/s", "std of the noise on the ball's sensed vx and vy", ge=0, le=10.0)
    air: str = air_choice()

    def check_params(self) -> None:
        if self.ball_radius >= self.head_radius:
            raise TaskError(f"the ball (ball_radius={self.ball_radius} m) must be smaller than the racket's head "
                            f"(head_radius={self.head_radius} m)")

    # -- scene ------------------------------------------------------------------
    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        half, radius = self.head_thickness / 2, self.head_radius
        # racket frame = flange frame: z the flange axis; the face normal is -x; the head's centre
        # lies HEAD_HEIGHT along it from the wrist's centre, WRIST_OFFSET behind the flange
        centre = np.array([-HEAD_HEIGHT, 0.0, -WRIST_OFFSET])
        along_x = [np.sqrt(0.5), 0.0, np.sqrt(0.5), 0.0]  # turns a geom's z axis onto the flange's x axis
        geoms = [
            dict(name="racket_post", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[POST_RADIUS, 0, 0],
                 fromto=[0, 0, POST_RADIUS, -(HEAD_HEIGHT - half), 0, POST_RADIUS], mass=0.25 * self.handle_mass,
                 rgba=[0.3, 0.3, 0.3, 1]),
            dict(name="racket_handle", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[HANDLE_RADIUS, 0, 0],
                 fromto=[-HEAD_HEIGHT, 0, centre[2] + radius + HANDLE_RADIUS,
                         -HEAD_HEIGHT, 0, centre[2] + radius + self.handle_length - HANDLE_RADIUS],
                 mass=0.75 * self.handle_mass, rgba=[0.15, 0.15, 0.15, 1]),
            dict(name="racket_head", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[radius, half, 0],
                 pos=centre, quat=along_x, mass=self.head_mass, rgba=[0.85, 0.85, 0.8, 1]),
        ]
        body = add_tool_body(spec, robot, "racket", geoms)
        # the face's centre, its x axis the face normal (-x; episodic.task.kinematics.SiteIK turns it)
        body.add_site(name="racket_face", pos=centre + [-half, 0.0, 0.0], quat=[0.0, 0.0, 0.0, 1.0], group=3)
        # the head's volume and a little more: what its touch sensor feels
        body.add_site(name="racket_touch", type=mujoco.mjtGeom.mjGEOM_CYLINDER, pos=centre, quat=along_x,
                      size=[radius + 0.002, half + 0.01, 0], group=4, rgba=[0, 0, 0, 0])

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        add_control_period(spec, robot.control_dt)
        ball = add_free_ball(spec, "ball", [*PARKED, self.ball_radius], self.ball_radius, self.ball_mass,
                             rgba=[0.85, 0.95, 0.2, 1], contype=1, conaffinity=1)
        ball.add_site(name="ball", pos=[0, 0, 0])
        ball.add_site(name="ball_touch", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[self.ball_radius + 0.002, 0, 0],
                      group=4, rgba=[0, 0, 0, 0])
        add_frame_sensors(spec, "ball", mujoco.mjtObj.mjOBJ_SITE, "ball")
        spec.add_sensor(name="face_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname="racket_face")
        spec.add_sensor(name="face_normal", type=mujoco.mjtSensor.mjSENS_FRAMEXAXIS,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname="racket_face")
        spec.add_sensor(name="ball_touch", type=mujoco.mjtSensor.mjSENS_TOUCH, objtype=mujoco.mjtObj.mjOBJ_SITE,
                        objname="ball_touch")
        spec.add_sensor(name="racket_touch", type=mujoco.mjtSensor.mjSENS_TOUCH, objtype=mujoco.mjtObj.mjOBJ_SITE,
                        objname="racket_touch")
        spec.add_sensor(name="clock", type=mujoco.mjtSensor.mjSENS_CLOCK)
        add_target(spec, [0.8, 0.0, 1.75], 0.02, [0.2, 0.8, 0.2, 0.4])
        # every geom the ball can touch (racket, links, floor) gets a calibrated bouncing pair; the
        # head's restitution is set again at every reset from the context
        add_bouncing_pairs(spec, "ball", BALL_SURFACES.restitution, BALL_SURFACES.friction, spec.option.timestep,
                           overrides={"racket_head": dict(restitution=self.restitution)})
        add_air(spec, ["ball"], TENNIS_BALL_DRAG_COEFFICIENT, self.air)

    def start_posture(self, robot: Robot) -> np.ndarray:
        """``START`` on the WAM; on another arm the face's centre where the WAM's is, placed in the
        arm's frame, the face up, in the posture that best strokes it vertically (module docstring)."""
        if RobotFrame.of(robot).is_reference():
            return START.copy()
        key = (robot.sha256, robot.home.tobytes(), robot.range_lower.tobytes(), robot.range_upper.tobytes(),
               robot.velocity_limit.tobytes(), robot.torque_limit.tobytes(), self.head_radius, self.head_thickness,
               self.handle_length, self.ball_radius, self.target_apex)
        if key not in _POSTURES:
            face, _ = tool_ik(load_robot(REFERENCE_ROBOT), self.add_tool, "racket_face").pose(START)
            up = np.array([0.0, 0.0, 1.0])
            ik = tool_ik(robot, self.add_tool, "racket_face")
            q = easiest_posture(ik, robot, RobotFrame.of(robot).from_wam(face), up, np.concatenate([up, np.zeros(3)]),
                                STROKE_SPEED, STROKE_ACCELERATION,
                                clearance=(self.ball_radius, self.target_apex + 2 * self.ball_radius),
                                travel=STROKE_TRAVEL)
            if q is None:
                raise TaskError(f"ball_bouncing cannot hold the racket's face level where it is placed on "
                                f"'{robot.name}'; choose an arm that reaches it")
            _POSTURES[key] = q
        return _POSTURES[key].copy()

    def default_context(self) -> np.ndarray:
        return np.array([self.target_apex, self.restitution, 0.0, 0.0, 0.0, 0.0])

    def initialize_episode(self, model, data, context, rng) -> None:
        apex, restitution, offset, rolling = context[0], context[1], context[2:4], context[4:6]
        if not apex > 0:
            raise TaskError(f"the target apex must be > 0 m above the ball's start, got {apex:g}")
        if not 0 <= restitution < 1:
            raise TaskError(f"the racket's restitution must be in [0, 1), got {restitution:g}")
        if not np.hypot(*offset) < self.head_radius:
            raise TaskError(f"the ball's offset {np.round(offset, 4).tolist()} m puts it off the face "
                            f"(head_radius={self.head_radius} m)")
        if not np.hypot(*rolling) <= MAX_START_SPEED:
            raise TaskError(f"the ball may roll at most {MAX_START_SPEED:g} m/s at the start, got "
                            f"{np.hypot(*rolling):.4g} m/s")
        ids = self.episode.ids
        pair = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_PAIR, "ball-racket_head")
        model.pair_solref[pair] = solref_for_restitution(float(restitution), model.opt.timestep)
        mujoco.mj_kinematics(model, data)
        site = ids.site["racket_face"]
        centre, normal = data.site_xpos[site].copy(), data.site_xmat[site].reshape(3, 3)[:, 0].copy()
        if normal[2] < np.cos(MAX_START_TILT):
            raise TaskError(f"the racket's face is {np.arccos(np.clip(normal[2], -1, 1)):.3f} rad from horizontal "
                            f"at the start posture; start where it is within {MAX_START_TILT} rad")
        along_x = np.array([1.0, 0.0, 0.0]) - normal[0] * normal
        along_x /= np.linalg.norm(along_x)
        along_y = np.cross(normal, along_x)
        position = centre + offset[0] * along_x + offset[1] * along_y + self.ball_radius * normal
        velocity = rolling[0] * along_x + rolling[1] * along_y
        place_free_ball(data, ids, "ball", position, velocity, np.cross(normal, velocity) / self.ball_radius)
        target = np.array([centre[0], centre[1], position[2] + apex])
        place_target(data, ids, target)
        episode = self.episode
        episode.last = (None, position[2], 0.0, True, True, float(np.hypot(*offset)))
        noise = [self.sensing_noise] * 2 + [self.sensing_noise_rate] * 2
        episode.sensing = Sensing.start(model, self.sensing_latency, noise, rng)
        episode.memory = episode.sensing.memory()

    # -- feedback law --------------------------------------------------------------
    def check_gains(self, task_gains: np.ndarray) -> None:
        if task_gains.size != 2:
            raise TaskError(f"ball_bouncing's task gains are {self.gains_help}; got {task_gains.size} values")

    def compiled_law(self, model, task_gains) -> CompiledLaw:
        """The mirror law of the module docstring, in tasks/ball_bouncing.c (what the tracker has
        seen is the episode's ``memory``)."""
        episode = self.episode
        assert episode.sensing is not None  # started by initialize_episode, before any law
        ids = episode.ids
        param = dict(face=ids.site["racket_face"], ball_qpos=ids.qpos["ball"], ball_dof=ids.dof["ball"],
                     k_r=task_gains[0], k_v=task_gains[1], max_tilt=self.max_tilt, damping=WRIST_DAMPING,
                     wrist=ids.arm_dof[-3:], sensing=episode.sensing.param())
        return CompiledLaw(model, self.name, ids.arm_dof.size, param, episode.memory)

    # -- per step ----------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        ball, vel = steps.sensor("ball_pos"), steps.sensor("ball_vel")
        face, normal = steps.sensor("face_pos"), steps.sensor("face_normal")
        rel = ball - face
        along = np.sum(rel * normal, axis=1)
        lateral = np.linalg.norm(rel - along[:, None] * normal, axis=1)
        tilt = np.arccos(np.clip(normal[:, 2], -1.0, 1.0))
        on_racket = (steps.sensor("racket_touch")[:, 0] > 0).astype(float)
        contact = (steps.sensor("ball_touch")[:, 0] > 0).astype(float)
        floor = (ball[:, 2] <= self.ball_radius + FLOOR_CONTACT).astype(float)
        return np.column_stack([ball, vel, face, tilt, along - self.ball_radius, lateral,
                                steps.sensor("target_pos")[:, 2], on_racket, contact, floor])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        n = len(state)
        reward = np.zeros(n)
        memory = self.episode
        if n == 0 or memory.floored:
            return reward
        times = steps.sensor("clock")[:, 0]
        z, vz, lateral, target = state[:, 2], state[:, 5], state[:, 11], state[:, 12]
        contact, on_racket, floor = state[:, 14] > 0, state[:, 13] > 0, state[:, 15] > 0
        # each step with the one before it (the last one seen, if it came right before)
        last = memory.last
        if last is not None and (last[0] is None or abs(times[0] - last[0] - steps.dt) < 0.25 * steps.dt):
            prev_contact = np.concatenate([[last[3]], contact[:-1]])
            prev_on = np.concatenate([[last[4]], on_racket[:-1]])
            prev_z, prev_vz = np.concatenate([[last[1]], z[:-1]]), np.concatenate([[last[2]], vz[:-1]])
            prev_lateral = np.concatenate([[last[5]], lateral[:-1]])
        else:
            prev_contact, prev_on = np.concatenate([[contact[0]], contact[:-1]]), np.concatenate([[on_racket[0]],
                                                                                                  on_racket[:-1]])
            prev_z, prev_vz = np.concatenate([[z[0]], z[:-1]]), np.concatenate([[vz[0]], vz[:-1]])
            prev_lateral = np.concatenate([[lateral[0]], lateral[:-1]])
        take_off = prev_contact & ~contact
        landing = ~prev_contact & contact
        apex = ~prev_contact & ~contact & (prev_vz > 0) & (vz <= 0)
        events = np.flatnonzero(take_off | landing | apex | floor)
        for k in events:
            if floor[k]:
                memory.floored, memory.airborne = True, False
                break
            if landing[k]:
                memory.airborne = False
            if take_off[k]:
                memory.airborne, memory.apex_seen = True, False
                memory.from_racket, memory.take_off = bool(prev_on[k]), float(prev_z[k])
                memory.launch_lateral = float(prev_lateral[k])
            if apex[k] and memory.airborne and not memory.apex_seen:
                memory.apex_seen = True
                height = float(prev_z[k] + prev_vz[k] ** 2 / (2 * GRAVITY))
                if height - memory.take_off < MIN_BOUNCE:
                    continue
                if not memory.from_racket:
                    memory.run = 0
                    continue
                good = abs(height - target[k]) <= self.apex_band
                memory.bounces += 1
                memory.good += int(good)
                memory.run = memory.run + 1 if good else 0
                memory.best_run = max(memory.best_run, memory.run)
                memory.apexes.append((float(times[k]), height, good))
                reward[k] = float(good) - memory.launch_lateral
        memory.last = (float(times[-1]), float(z[-1]), float(vz[-1]), bool(contact[-1]), bool(on_racket[-1]),
                       float(lateral[-1]))
        return reward

    def success(self, state: np.ndarray) -> bool:
        memory = self.episode
        return bool(memory.best_run >= self.min_bounces and not memory.floored and not state[15] > 0)
