"""tetherball: hit a ball hung from the ceiling on an elastic string through a target.

Scene. A table-tennis racket is bolted to the tool flange (site "ee"): a handle along the
flange axis and a round blade (a thin cylinder) beyond it, whose face normal is the flange's
local x axis (at the home posture the racket points forward and the blade faces sideways).
Its mass and inertia are part of the arm's dynamics, and gravity compensation includes it.
The ball (a free body) hangs from a fixed anchor above the workspace on a string of length
``string_length``: a spatial tendon from the anchor to the ball's centre with a dead-band
spring (MuJoCo's two-value ``springlength`` = [0, L]): no force while the string is slack
(shorter than L), Hooke's law ``F = string_stiffness * (l - L)`` while it is stretched. So the
ball flies freely when the string is slack and the string is elastic and lossless when taut
(the string's internal damping is neglected). The ball collides with the racket and the arm,
not with the string. A translucent mocap sphere of radius ``tolerance`` marks the target.

Other arms. The numbers (anchor, target) are given for the WAM. On another robot the hanging
ball is placed in its frame (episodic.task.frame: where the WAM's is relative to its first joint
and facing, scaled to its reach), and the anchor and the target move with it, turned with the
robot's facing but not scaled (``placed``: the string's length and the swing are physics); the
racket starts where the WAM's does, placed likewise, by inverse kinematics (``start_posture``). A
context's target is a world point on any robot.

Ball, contacts and air (episodic.task.contact; calibrated by drop tests, tests/test_contact.py and
tests/test_task_tetherball.py). The ball is a tennis ball (ITF: 56.0-59.4 g, 65.4-68.6 mm across;
here 60 g, 70 mm). It bounces off every geom it can touch (racket blade and handle, the arm's
links, the floor) through explicit contact pairs with the coefficient of restitution
``restitution``, default 0.75: a tennis ball on a rigid surface (ITF Rules of Tennis, Appendix
I: dropped from 254 cm onto concrete, a type 2 ball rebounds 135-147 cm, e = 0.73-0.76; the
racket's wooden blade and the aluminium links are, like concrete, far stiffer than the ball), and
Coulomb friction 0.6 (a tennis ball on hard courts, 0.5-0.7), acting during the impact: a ball
hit obliquely leaves rolling on the face, as a real one does. The physics runs at 0.5 ms
(``substeps`` 4): there one bounce's restitution lies within about +-0.015 of ``restitution``,
where at 2 ms it would depend on where the impact falls between two steps by -0.02 / +0.08. The
ball flies through still air (1.204 kg/m^3, 20 degC) with a tennis ball's drag coefficient 0.508
(Stepanek, Am. J. Phys. 56, 138 (1988)): at 3 m/s drag is 1.8 % of the ball's weight, and it
takes 4 cm off the rebound of the ball dropped 1 m onto the taut string (tested), so it is kept.

Context (command 0): the target (x, y, z) m of the ball's centre in the world frame, or
nothing for (``target_x``, ``target_y``, ``target_z``); for a moving target, where it starts.

A moving target (the seed's first extension; ``target_speed`` rad/s, 0 by default: still). The
target circles the anchor's vertical axis at ``target_speed`` (positive: counterclockwise seen
from above), at its start's height and horizontal distance from that axis, from the start
command's reset on (the physics time; in realtime mode it also moves while the robot holds
waiting for the learner): at t s, anchor_xy + r (cos(phi0 + w t), sin(phi0 + w t)) at the
start's z (``target_at``). So it keeps to the ball's sphere of swing when it starts on it, and
passes through azimuths the racket cannot send the ball to (a sideways stroke reaches about 30
degrees either side of +-y): the learner has to choose where and when to meet it. Physically a
marker body on two horizontal slide joints with equal springs toward the axis (an isotropic
oscillator), carried by a mocap body on the axis that the context places: its motion is part of
the physics state, logged and replayed, within 0.5 mm of the circle over 10 s (tested). The
reward keeps its meaning with d_t the distance to where the target is at step t.

Start: the ball hangs still below the anchor at its loaded length, anchor - (L + m g / k) e_z,
zero velocity.

Reward (``approaches`` 1, the default: the single stroke). d_t = |p_ball - p_target| at each
control step. Over the steps of the episode's segments so far (since the start command), the
running minimum is m_t = min(d_0..d_t), and the step reward is its decrease, r_t = m_{t-1} - m_t
with m_{-1} = 0 (so r_0 = -d_0 and later steps earn what they bring the closest approach down
by). A segment's reward is thus minus its own closest approach for the first segment and its
improvement on the closest approach so far for later ones, and the episode return is exactly
minus the closest approach of the ball to the target over all segments: return = -min_t d_t.
Steps outside segments (going to the start, a real-time hold while the learner is late) earn
nothing and do not count. Success: that closest approach is below ``tolerance``.

Continuous play (the seed's second extension: after the first hit the task goes on, a periodic
task; ``approaches`` N > 1). The episode scores N approaches of the ball to the target. d_0, the
distance of the first scored step, is where the ball hangs (the start command leaves it hanging
still; a circling target keeps that distance). An approach is one swing of the ball toward the
target: it begins where the last one ended (the first at the first scored step), the ball comes
closer to the target than it hung by at least the target's radius (d_t < d_0 - ``tolerance``:
so the jitter of a ball at rest or a racket's touch never counts as one), and it ends at the
first step after that where the ball is back as far from the target as it hung (d_t >= d_0:
it has swung back through the bottom, away from the target); that step begins the next
approach. The N-th approach never ends: it runs to the episode's end, so N = 1 is exactly the
single stroke above. An approach's score is its closest approach, c_i = min(d_0, min of d_t over
its steps), and the episode return is -(c_1 + ... + c_N), an approach not played (the episode
ended first) counting c_i = d_0, as the hanging ball that was never hit. As step rewards: r_0 =
-N d_0 (every approach charged as the ball hangs), then each step earns what it brings the
closest approach of the approach under way down by (>= 0; 0 on an approach's first step). So
every reward after the first is >= 0 and an episode that ends early (a crash, an abort, a
learner that stops after the first swing) forfeits only what the approaches left would have
earned: ending early never pays and the task keeps the worst reward rate 0. Holding still scores
-N d_0; a swing that comes no closer than the ball hung scores like no swing at all. Success:
all N approaches played, each closer than ``tolerance``. "Infinite horizon": the runner's
episodes are finite, so the periodic task is scored over a fixed number of swings; -return / N,
the mean closest approach per swing, compares runs of different N, and the stability of a
periodic strategy shows as the later approaches' distances (``approach_distances``) staying
small. The string is nearly lossless (only air drag takes energy, the string's damping is
neglected), so with a still target a ball hit once swings back to it on its own: with the default
target the reference's single stroke stays within ``tolerance`` for 8 approaches, the ball's
apex sinking about 1 cm a swing (measured: tests/test_task_tetherball.py); beyond that, or with a
moving target (which does not wait for the ball's fixed plane of swing), the robot must hit the
ball again as it comes back, predicting its position and speed (the state carries both).

State columns: ball_x, ball_y, ball_z m, ball_vx, ball_vy, ball_vz m/s, target_x, target_y,
target_z m, distance m (d_t), min_distance m: the running minimum of d over the rows of the
current command (per segment: it restarts at each segment, and a reply's state, being the
single present state, has min_distance = distance). The episode's closest approach so far
is minus the sum of the segment rewards so far.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot, load_robot
from episodic.task import (
    TARGET,
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
    coordinate,
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
)
from episodic.task.contract import BALL_COLUMNS
from episodic.task.frame import REFERENCE_ROBOT, RobotFrame, posture_along, tool_ik
from episodic.task.sl import SLMap

GRAVITY = 9.81  # m/s^2, MuJoCo's default |gravity|
TARGET_RGBA = [0.2, 0.8, 0.2, 0.25]
TARGET_MASS = 1.0  # kg, the moving target marker's (it touches nothing: any mass moves it alike)
BALL_SURFACES = MATERIALS["tennis_ball_on_rigid"]  # restitution, friction and their sources
START_SEEDS = 16  # postures drawn for another arm's start posture (start_posture)
START_MARGIN = 0.3  # rad, another arm's start posture keeps its joints this far inside their range


@dataclass
class Approach(Episode):
    """The reward's memory, one entry per segment step since the start command (see the module
    docstring): times (k,) s; approach (k,) the 0-based number of the approach the step belongs
    to; mins (k,) m the running minimum of the ball-target distance over that approach's steps so
    far (capped at the hanging distance d_0 for the approaches after the first); near (k,) whether
    the ball has come within d_0 - tolerance of the target during that approach so far."""

    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mins: np.ndarray = field(default_factory=lambda: np.zeros(0))
    approach: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    near: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    hanging: float = np.inf  # m, d_0: the distance of the first scored step (the ball hanging still)


@dataclass
class Tetherball(Task[Approach]):
    name: ClassVar[str] = "tetherball"
    reference: ClassVar[Reference | None] = Reference(  # examples/tetherball_reference.py
        "examples.tetherball_reference:reference_commands",
        return_tolerance=0.005,  # the reference's return is -0.026
        learner="examples.learning.tetherball",
    )
    summary: ClassVar[str] = "hit a ball hung from the ceiling on an elastic string through a target."
    needs: ClassVar[Needs] = Needs(dofs=6)  # the racket's centre and face normal placed for the stroke
    camera: ClassVar[Camera] = {"azimuth": 140, "elevation": -10}  # deg; episodic render frames the rest
    sl: ClassVar[SLMap] = SLMap(("target x m", "target y m", "target z m"), (0, 1, 2),
                                states=tuple(BALL_COLUMNS) + ("target_x", "target_y", "target_z"))
    columns: ClassVar[tuple[str, ...]] = ("ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz",
                                          "target_x", "target_y", "target_z", "distance", "min_distance")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {**BALL_COLUMNS,
        "target_x": ("m", "the target's x (world frame)"), "target_y": ("m", "the target's y (world frame)"),
        "target_z": ("m", "the target's z (world frame)"), "distance": ("m", "ball centre to target"),
        "min_distance": ("m", "the closest approach in this segment")}
    reward_doc: ClassVar[str] = (
        "how much the step brings the closest approach (m) to the target down: return = -closest approach")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 3)
    context_help: ClassVar[str] = "a target (x, y, z) m for the ball's centre, or no context for the default"
    substeps: ClassVar[int] = 4  # 0.5 ms physics: bounces within +-0.015 of ``restitution`` (docstring)
    episode_type: ClassVar[type[Episode]] = Approach
    not_built: ClassVar[str] = ("a target that changes from hit to hit; a scripted return stroke for continuous "
                                "play (the reference hits once, its ball swings back to a still target by itself)")

    # string and ball
    string_length: float = param(1.0, "m", "anchor to ball centre when just taut", gt=0)
    string_stiffness: float = param(300.0, "N/m", "elasticity of the string when stretched", gt=0)
    ball_mass: float = param(0.06, "kg", "about a tennis ball", gt=0)
    ball_radius: float = param(0.035, "m", gt=0)
    restitution: float = param(BALL_SURFACES.restitution, "", "the ball's coefficient of restitution on the racket "
                               "and the arm (0.75: a tennis ball on a rigid surface, ITF)", ge=0, lt=1)
    anchor_x: float = coordinate(0.85, "x", "the string's fixed point on the ceiling")
    anchor_y: float = coordinate(0.0, "y", "the string's fixed point on the ceiling")
    anchor_z: float = coordinate(2.35, "z", "the string's fixed point on the ceiling")
    # racket (table tennis: blade about 15 cm across, 0.17 kg in all)
    blade_radius: float = param(0.075, "m", gt=0)
    blade_thickness: float = param(0.014, "m", "wood and both rubbers", gt=0)
    blade_mass: float = param(0.13, "kg", gt=0)
    handle_length: float = param(0.10, "m", "flange to the blade's edge", gt=0)
    handle_mass: float = param(0.04, "kg", gt=0)
    # target and success
    tolerance: float = param(0.1, "m", "success: the ball's closest approach to the target is below this; "
                             "also the target marker's radius", gt=0)
    target_x: float = coordinate(0.85, "x", "the target without a context")
    target_y: float = coordinate(0.6, "y", "the target without a context")
    target_z: float = coordinate(1.55, "z", "the target without a context")
    # a moving target (the seed's first extension)
    target_speed: float = param(0.0, "rad/s", "0: the target stands still; else it circles the anchor's vertical "
                                "axis at this angular speed (positive: counterclockwise seen from above), at its "
                                "start's height and distance from that axis", ge=-3.0, le=3.0)
    # continuous play (the seed's second extension)
    approaches: int = param(1, "", "how many approaches of the ball to the target an episode scores: 1, the "
                            "single stroke; more, a periodic task of that many swings (module docstring)",
                            ge=1, le=100)
    air: str = air_choice()

    # -- derived quantities ----------------------------------------------------
    @property
    def anchor(self) -> np.ndarray:
        """m, the string's fixed point: (anchor_x, anchor_y, anchor_z), placed for the robot (:meth:`placed`)."""
        return self.placed(np.array([self.anchor_x, self.anchor_y, self.anchor_z]))

    @property
    def default_target(self) -> np.ndarray:
        """m, the target without a context: (target_x, target_y, target_z), placed for the robot (:meth:`placed`)."""
        return self.placed(np.array([self.target_x, self.target_y, self.target_z]))

    def placed(self, point: np.ndarray) -> np.ndarray:
        """A point (3,) m of the scene as its parameters give it (for the WAM), placed for the robot
        the scene was last built for: the hanging ball where :meth:`Task.from_wam` puts its WAM
        place (the same place relative to the robot's base and facing, scaled to its reach), and the
        scene moved with it rigidly, turned with the robot's facing but not scaled, so that the
        string, the ball's swing and the target on it keep their sizes. The point itself on the WAM."""
        point = np.asarray(point, float)
        if self._robot is None or RobotFrame.of(self._robot).is_reference():
            return point.copy()
        frame = RobotFrame.of(self._robot)
        rest = np.array([self.anchor_x, self.anchor_y, self.anchor_z - self.string_length - self.static_stretch])
        return frame.from_wam(rest) + frame.direction_from_wam(point - rest)

    @property
    def static_stretch(self) -> float:
        """m, how far the ball's weight stretches the string."""
        return self.ball_mass * GRAVITY / self.string_stiffness

    @property
    def rest_position(self) -> np.ndarray:
        """Where the ball hangs still: below the anchor at the loaded string length."""
        return self.anchor - np.array([0.0, 0.0, self.string_length + self.static_stretch])

    @property
    def stretch_allowance(self) -> float:
        """m, how far past its length the string may stretch in play: as far as it stretches
        catching the ball dropped from the anchor (a fall of L: 4.4 m/s for L = 1 m, faster
        than the WAM can hit the ball), from m g (L + x) = k x^2 / 2. 6.6 cm with the defaults."""
        mg, k = self.ball_mass * GRAVITY, self.string_stiffness
        return (mg + np.sqrt(mg**2 + 2 * k * mg * self.string_length)) / k

    # -- scene ------------------------------------------------------------------
    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        handle_r, blade_r, half_t = 0.014, self.blade_radius, self.blade_thickness / 2
        centre = self.handle_length + blade_r
        # racket frame = flange frame; the handle runs along +z, the blade's face normal is +x
        geoms = [
            dict(name="racket_handle", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[handle_r, 0, 0],
                 fromto=[0, 0, handle_r, 0, 0, self.handle_length + 0.01], mass=self.handle_mass,
                 rgba=[0.55, 0.35, 0.2, 1]),
            dict(name="racket_blade", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[blade_r, half_t, 0],
                 pos=[0, 0, centre], quat=[np.sqrt(0.5), 0, np.sqrt(0.5), 0], mass=self.blade_mass,
                 rgba=[0.8, 0.1, 0.1, 1]),
        ]
        body = add_tool_body(spec, robot, "racket", geoms)
        body.add_site(name="racket_centre", pos=[0, 0, centre], group=3)

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        anchor = spec.worldbody.add_body(name="anchor", pos=self.anchor)
        anchor.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.04, 0.04, 0.01], pos=[0, 0, 0.01],
                        rgba=[0.4, 0.4, 0.45, 1], contype=0, conaffinity=0)
        anchor.add_site(name="anchor", pos=[0, 0, 0])

        ball = add_free_ball(spec, "ball", self.rest_position, self.ball_radius, self.ball_mass,
                             rgba=[0.95, 0.85, 0.2, 1], contype=1, conaffinity=1)
        ball.add_site(name="ball", pos=[0, 0, 0])
        add_frame_sensors(spec, "ball", mujoco.mjtObj.mjOBJ_SITE, "ball")

        string = spec.add_tendon(name="string", stiffness=self.string_stiffness,
                                 springlength=[0.0, self.string_length], width=0.003,
                                 rgba=[0.9, 0.9, 0.9, 1])
        string.wrap_site("anchor")
        string.wrap_site("ball")

        if self.target_speed == 0:
            add_target(spec, self.default_target, self.tolerance, TARGET_RGBA)
        else:
            self._add_circling_target(spec)
        spec.add_sensor(name="clock", type=mujoco.mjtSensor.mjSENS_CLOCK)
        # every geom the ball can touch (racket, links, floor) gets a calibrated bouncing pair
        add_bouncing_pairs(spec, "ball", self.restitution, BALL_SURFACES.friction, spec.option.timestep)
        add_air(spec, ["ball"], TENNIS_BALL_DRAG_COEFFICIENT, self.air)

    def _add_circling_target(self, spec: mujoco.MjSpec) -> None:
        """The moving target: a mocap body ``target_centre`` on the anchor's vertical axis (at the
        target's height, placed by the context) carrying the marker body ``target`` on two
        horizontal slide joints with springs of equal stiffness toward that axis: an isotropic
        oscillator of angular frequency |target_speed|, which started on the circle with the
        circle's speed stays on it (MuJoCo's step keeps the radius within (omega dt)^2 / 8 of
        it). Touches nothing; its inertia is tiny (a point of TARGET_MASS kg), so the air's drag
        on it is nil. Sensor ``target_pos`` as for a still target."""
        centre = spec.worldbody.add_body(name="target_centre", mocap=True, pos=self.default_target)
        body = centre.add_body(name=TARGET)
        body.explicitinertial = True
        body.mass, body.inertia = TARGET_MASS, [1e-9] * 3
        stiffness = TARGET_MASS * self.target_speed**2
        for name, axis in (("target_x", [1, 0, 0]), ("target_y", [0, 1, 0])):
            body.add_joint(name=name, type=mujoco.mjtJoint.mjJNT_SLIDE, axis=axis, stiffness=stiffness)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[self.tolerance, 0, 0], rgba=TARGET_RGBA,
                      contype=0, conaffinity=0, mass=0.0)
        spec.add_sensor(name=f"{TARGET}_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                        objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=TARGET)

    def target_at(self, start, seconds) -> np.ndarray:
        """(n, 3) m, where the target that starts at ``start`` (3,) m is ``seconds`` (n,) s after the
        episode's start (the physics time since the start command's reset)."""
        t = np.atleast_1d(np.asarray(seconds, float))
        offset = np.asarray(start, float)[:2] - self.anchor[:2]
        angle = np.arctan2(offset[1], offset[0]) + self.target_speed * t
        radius = np.hypot(*offset)
        return np.column_stack([self.anchor[0] + radius * np.cos(angle), self.anchor[1] + radius * np.sin(angle),
                                np.full(len(t), float(start[2]))])

    def start_posture(self, robot: Robot) -> np.ndarray:
        """On the WAM home with the first joint turned -0.5 rad: the racket waits beside the ball.
        On another arm the posture that puts the racket's centre where the WAM's is there, placed in
        the arm's frame (episodic.task.frame), its face turned as the WAM's, reached from the arm's
        home along a straight line (episodic.task.frame.posture_along) or by inverse kinematics from
        START_SEEDS postures drawn within its joint range (seeded): of those with every joint
        START_MARGIN inside its range, the one whose joints are highest above the floor on average
        (an elbow up: the UR5's shoulder is 9 cm above the floor, and with its elbow down its links
        hit the floor in the stroke). Computed once per robot and racket."""
        q = robot.home.copy()
        frame = RobotFrame.of(robot)
        if frame.is_reference():
            q[0] -= 0.5
            return q
        wam = load_robot(REFERENCE_ROBOT)
        centre, normal = tool_ik(wam, self.add_tool, "racket_centre").pose(self.start_posture(wam))
        q, error = _start_posture(robot, self.add_tool, frame.from_wam(centre), frame.direction_from_wam(normal),
                                  (self.blade_radius, self.blade_thickness, self.blade_mass, self.handle_length,
                                   self.handle_mass))
        if error > 1e-6:
            raise TaskError(f"tetherball cannot hold the racket where it is placed on '{robot.name}' "
                            f"(inverse kinematics error {error:.2g}); choose an arm that reaches it")
        return q

    def default_context(self) -> np.ndarray:
        """The default target (x, y, z) m."""
        return self.default_target

    def initialize_episode(self, model, data, context, rng) -> None:
        ids = self.episode.ids
        if self.target_speed == 0:
            place_target(data, ids, context)
        else:  # on its circle about the anchor's axis, moving along it
            data.mocap_pos[ids.mocap["target_centre"]] = [*self.anchor[:2], context[2]]
            offset = np.asarray(context[:2], float) - self.anchor[:2]
            for axis, name in enumerate(("target_x", "target_y")):
                data.qpos[ids.qpos[name]] = offset[axis]
                along = -offset[1] if axis == 0 else offset[0]  # the circle's tangent
                data.qvel[ids.dof[name]] = self.target_speed * along
        place_free_ball(data, ids, "ball", self.rest_position)
        mujoco.mj_forward(model, data)
        ball = ids.geom["ball"]
        for c in data.contact[: data.ncon]:
            if ball in (c.geom1, c.geom2):
                other = c.geom2 if c.geom1 == ball else c.geom1
                raise TaskError(f"the ball's rest position {np.round(self.rest_position, 3).tolist()} touches "
                                f"geom '{model.geom(other).name}' at the start posture; start the robot "
                                f"elsewhere or move the anchor")

    # -- per step ----------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        ball, vel, target = steps.sensor("ball_pos"), steps.sensor("ball_vel"), steps.sensor("target_pos")
        distance = np.linalg.norm(ball - target, axis=1)
        return np.column_stack([ball, vel, target, distance, np.minimum.accumulate(distance)])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        times = steps.sensor("clock")[:, 0]
        if len(times) == 0:
            return np.zeros(0)
        memory = self.episode
        kept = memory.times < times[0]  # drop steps a truncated segment did not keep
        memory.times, memory.mins = memory.times[kept], memory.mins[kept]
        memory.approach, memory.near = memory.approach[kept], memory.near[kept]
        distance, n, first = state[:, 9], len(times), memory.mins.size == 0
        if first:
            memory.hanging = float(distance[0])
        hanging, last = memory.hanging, self.approaches - 1
        approach = 0 if first else int(memory.approach[-1])
        near = False if first else bool(memory.near[-1])
        before = np.inf if first else float(memory.mins[-1])
        mins, approaches, nears = np.empty(n), np.empty(n, int), np.empty(n, bool)
        k = 0
        while k < n:  # one pass per approach that the block's steps belong to
            entered = k if near else _first(distance[k:] < hanging - self.tolerance, k)
            back = None if approach == last or entered is None else _first(distance[entered:] >= hanging, entered)
            stop = n if back is None else back
            nears[k:stop] = np.arange(k, stop) >= (stop if entered is None else entered)
            mins[k:stop] = np.minimum.accumulate(np.minimum(distance[k:stop], before))
            approaches[k:stop] = approach
            if stop < n:  # the ball is back as far from the target as it hung: the next approach
                approach, near, before = approach + 1, False, hanging
            k = stop
        previous = np.concatenate([[0.0 if first else memory.mins[-1]], mins[:-1]])
        previous[np.diff(np.concatenate([[approaches[0] if first else memory.approach[-1]], approaches])) > 0] = hanging
        memory.times = np.concatenate([memory.times, times])
        memory.mins = np.concatenate([memory.mins, mins])
        memory.approach = np.concatenate([memory.approach, approaches])
        memory.near = np.concatenate([memory.near, nears])
        rewards = previous - mins
        if first:  # the approaches still to come, each charged as the ball hangs (module docstring)
            rewards[0] -= last * hanging
        return rewards

    def approach_distances(self) -> np.ndarray:
        """(k,) m, the closest approach of the ball to the target in each approach played so far
        (the one under way included), the ones after the first capped at the hanging distance."""
        memory = self.episode
        ends = np.flatnonzero(np.diff(np.append(memory.approach, -1)) != 0)
        return memory.mins[ends]

    def closest_approach(self) -> float:
        """m, the smallest ball-target distance over the segment steps since the start command."""
        distances = self.approach_distances()
        return float(distances.min()) if distances.size else np.inf

    def unplayed_return(self, state: np.ndarray) -> float:
        """-approaches x the hanging ball's distance from the target: no approach played."""
        return -self.approaches * float(state[9])

    def success(self, state: np.ndarray) -> bool:
        if self.approaches == 1:
            return bool(min(self.closest_approach(), state[10]) < self.tolerance)
        distances = self.approach_distances()
        return bool(distances.size == self.approaches and np.all(distances < self.tolerance))


_STARTS: dict[tuple, tuple[np.ndarray, float]] = {}  # another arm's start postures (Tetherball.start_posture)


def _start_posture(robot: Robot, add_tool: Callable[[mujoco.MjSpec, Robot], None], position: np.ndarray,
                   normal: np.ndarray, racket: tuple[float, ...]) -> tuple[np.ndarray, float]:
    """A posture (n_dofs,) rad of ``robot`` with the racket's centre at ``position`` (3,) m and its
    face normal along ``normal`` (3,), and the remaining error (m + rad): the one
    :meth:`Tetherball.start_posture` describes, cached by robot, ``racket`` (the tool's parameters)
    and place."""
    key = (robot.name, robot.sha256, tuple(robot.home), racket, tuple(position), tuple(normal))
    if key not in _STARTS:
        ik = tool_ik(robot, add_tool, "racket_centre")
        seeds = np.random.default_rng(0).uniform(robot.range_lower, robot.range_upper, (START_SEEDS, robot.n_dofs))
        best = -np.inf
        for q, error in itertools.chain([posture_along(ik, robot.home, position, normal)],
                                        (ik.solve(seed, position, normal, iterations=1000) for seed in seeds)):
            ik.pose(q)
            height = float(np.mean([ik.data.xanchor[ik.model.joint(name).id][2] for name in robot.joint_names]))
            inside = np.all((q >= robot.range_lower + START_MARGIN) & (q <= robot.range_upper - START_MARGIN))
            if key not in _STARTS or (error <= 1e-6 and inside and height > best):
                _STARTS[key] = (q, error)
                best = height if error <= 1e-6 and inside else best
    q, error = _STARTS[key]
    return q.copy(), error


def _first(mask: np.ndarray, offset: int) -> int | None:
    """offset + the index of the first True of ``mask`` (k,), or None if there is none."""
    hit = np.flatnonzero(mask)
    return int(hit[0]) + offset if hit.size else None
