"""pole_balancing: swing up a pole hanging from the wrist's unpowered last joint and balance it
upright with the other joints, saving energy.

Scene. An aluminium tube (``pole_length`` m from the hinge axis to its tip, outer diameter
``pole_diameter`` m, bore ``pole_bore`` times that, density ``pole_density`` kg/m^3; the
defaults, a 20 x 2 mm tube, a stock size of extruded round tube (EN 755-7), of 6060/6061
aluminium, 2700 kg/m^3 (ASM Handbook Vol. 2: 2.70 g/cm^3), weigh 0.305 kg/m: 0.153 kg for
0.5 m) is clamped at right angles
across the end of a hub (a 25 x 2 mm aluminium tube, 0.1 m long, 0.039 kg) bolted to the tool
flange along its axis, so pole and hub turn with link 7 and the WAM's j7 is the pole's hinge. j7
is passive (``passive_joints``): its motor gives no torque at all, so the pole swings against
j7's own damping and friction (0.0027 N m s/rad, 0.001 N m: Barrett's motor 7 friction seen
through its 14.93:1 drive) and carries the motor's reflected rotor inertia (j7's armature), all
from robots/wam/wam.xml. Pole and hub are part of the arm's dynamics and its gravity
compensation (j7's share of which is removed with its actuator), and they collide with the arm
and the floor. At the start posture ``[0, 0.3, 0, 2.5, -pi/2, -pi/2, q7]`` the forearm points down
and forward, and the wrist turns the flange to the side (world +y), so the hinge lies horizontal
at (0.35, 0.16, 1.43) m, parallel to the shoulder and elbow axes: the pole swings in the
vertical plane 0.16 m beside the arm's, clear of its links, and j2 and j4 move the pivot in that
plane like the cart of a cart-pole. The pole is clamped so that it hangs at q7 = lower + pi +
0.4 rad (lower: j7's lower stop): swung up over the front it stands upright 0.4 rad short of
that stop, and from hanging it can swing back towards the robot by upper - q7 rad before it
meets the upper stop (2.46 rad for j7's +-3.0 rad). A free pole swings with the
physical-pendulum period 2 pi sqrt(I / (m g d)), I the inertia about the hinge of pole, hub and
link 7 plus j7's armature, m d their first moment (tested). A shorter pole swings faster and is
more damped by j7's drive: the reference below swings none shorter than 0.3 m up.

Joint failure: ``fail_joint`` = k in 1..n_dofs makes joint k passive too, ``fail_time`` s after
the motion starts (the first step of index 1), for the rest of the episode (Task.joint_failures:
the runner splits a run at that step, so replays repeat it exactly).

Pole angle phi rad: the angle from world up to the pole (hinge to tip) about the hinge axis a
(link 7's axis, world +y at the start), wrapped to (-pi, pi]: 0 upright, +-pi hanging; phi > 0
leans the pole towards h = a x up (horizontal, in the swing plane: world +x, forward, at the
start). phi_d rad/s: the pole's angular velocity about a. q7 grows with phi: from hanging, q7
falling swings the pole over the front to upright, q7 rising swings it back towards the robot and
j7's upper stop.

Context (command 0): nothing (the pole hangs at rest), [phi0] rad, or [phi0, phi_d0] rad, rad/s,
set once the arm has reached the start; a phi0 that lies beyond j7's stops is refused.

Feedback law (task_gains of a gains command; in C, tasks/pole_balancing.c): a pivot offset u m
along h, added to the desired posture as joint offsets v u rad every control step. v (n_dofs,)
rad/m is fixed at the start of the episode: the joint motion of least kinetic energy that moves
the pivot 1 m along h keeping its height and the hinge's direction, passive joints left out (at
the start posture [0, 1.11, 0, -2.72, 0, 0, 0] rad/m). s = h.(p - p0) m is the pivot's travel
along h since the start (p0), s_d = h.p_dot m/s.
    4 values [k_phi, k_phid, k_s, k_sd]: balance,
        u_b = k_phi phi + k_phid phi_d + k_s s + k_sd s_d
    8 values [k_phi, k_phid, k_s, k_sd, k_E, a_swing, phi_catch, theta_back]: swing up, then
        balance: u = w u_b + (1 - w) clip(u_E, -a_swing, a_swing), w = clip(2 - 2 |phi| / phi_catch,
        0, 1) (the balance law inside phi_catch / 2, the energy pump outside phi_catch, blended
        between), with the pump
        u_E = k_E g phi_d cos(phi) / w0   (moves the pivot with the pole's centre of mass),
        its gain g set at every turning point of the swing (phi_d changing sign) and held for
        the half swing that follows: g = clip((E_ref - E) / 0.45, 0, 1) / max(sqrt((E + 1) / 2),
        0.1), where E_ref = 1 for a half swing over the front (phi_d < 0) and -cos(theta_back)
        for one back towards the robot, so that it never swings back further than about
        theta_back rad from hanging (j7's upper stop is upper - q7_hanging rad away); 0.45 is
        about the energy one half swing at full gain adds, and the square root keeps the pivot's
        stroke about the same at every amplitude;
with E = phi_d^2 / (2 w0^2) + cos(phi) the pole's energy in units of m g d (1 upright at rest, -1
hanging at rest; w0 = sqrt(m g d / I) from the model). u is clipped to +-``max_offset`` m.
Balance gains: k_phi, k_phid > 0 (a pole leaning towards +h needs the pivot moved under it), and
k_s, k_sd > 0 too (to bring the pivot back, first let the pole lean back); k_E > 0 pumps energy
in. The law keeps g and the last phi_d in the episode (its ``memory``) between control steps.
phi and phi_d are the pole's angle and rate as a tracker senses them, s and s_d the pivot's
present travel and rate (the joint encoders). Sensing (episodic/native/sensing.py): phi and phi_d
reach the law ``sensing_latency`` s late (rounded to control steps of 2 ms), with independent
Gaussian noise of std ``sensing_noise`` rad and ``sensing_noise_rate`` rad/s, drawn from the
episode's random generator (seeded by the run's seed and the episode's number, so a replay
repeats it); the defaults, 0, give the true state at once and keep the reference's figures
comparable (a camera tracker is 6-17 ms late: sensing.py). What a latency does: below.

State columns: pole_angle rad, pole_velocity rad/s, pivot_x, pivot_y, pivot_z m (world).

Step reward: r = -((1 - cos phi) + effort * sum_i |u_i qd_i|) * dt: 0 upright, -2 dt hanging,
minus ``effort`` times the mechanical power the joints spend, W (motoring and braking alike).
Success: the episode ends with the pole upright and nearly still, |phi| < ``upright`` rad and
|phi_d| < 1 rad/s (a task sees only the final state; the tests also check the last seconds).

Reference (examples/pole_balancing_reference.py: a 0.3 s nudge of the elbow, then the law above
with LQR balance gains for 12 s), measured success by pole length and start (``python
examples/pole_balancing_reference.py``):
    pole m | hanging at rest | pi - 0.2     | pi + 0.3, -1 rad/s  | pi - 0.1, +1 rad/s | solved
    0.2    | never up        | never up     | never up            | never up           | 0/4
    0.3    | up at 4.1 s     | 4.1 s, stop  | never up            | 3.9 s, stop        | 3/4
    0.4    | 6.1 s           | 4.4 s, stop  | 5.2 s               | 4.1 s, stop        | 4/4
    0.5    | 7.7 s           | 6.1 s        | 5.3 s               | 5.9 s              | 4/4
    0.6    | 8.3 s           | 6.7 s        | 5.6 s, SAFETY_ABORT | 6.5 s              | 3/4
    0.8    | 11.3 s, late    | 7.2 s        | 8.3 s               | 6.9 s              | 4/4
    1.0    | 11.7 s, late    | 10.2 s       | 9.0 s               | 9.8 s              | 4/4
("up at": when |phi| first fell below 0.2 rad, after the motion started; "stop": the pole touched
one of j7's stops on the way, the law caught it all the same; "late": caught under 2 s before the
end; SAFETY_ABORT: up, then the law drove the elbow past its speed limit.) A shorter pole is harder:
the 0.2 m pole's damping ratio on j7 is 0.16 (0.066 at 0.3 m, 0.019 at 0.5 m, 0.0035 at 1 m), so
j7's drive takes out faster than the pump, bound by the arm's speed, can put in, and the pole never
passes the horizontal; the balance law alone still holds it near upright. Longer poles swing slower,
so they take longer to come up. The default episode (0.5 m, hanging at rest) returns -12.16, upright
from 7.7 s. With a joint failing 8 s after the motion starts (pole 0.5 m, start pi - 0.2, caught at
6.1 s): without j1 or j3 the pole stays up; without j2, j5 or j6 the arm sags or the hand turns
under the pole and the law drives the elbow past its speed limit (SAFETY_ABORT); without j4, the
law's main joint, the pole falls.

Sensing latency (benchmarks/pole_latency.py, hanging at rest, no noise): success and "up" (when
|phi| first fell below 0.2 rad), with the reference's balance gains as published and designed
for the delay (the reference's ``latency``):
    pole m | 0 ms       | 10 ms, published | 10 ms, designed | 20, 40, 60 ms, either
    0.3    | yes, 4.1 s | no, never up     | no, never up    | no, SAFETY_ABORT, never up
    0.4    | yes, 6.1 s | no, SAFETY_ABORT | yes, 7.5 s      | no, SAFETY_ABORT, never up
    0.5    | yes, 7.7 s | no, SAFETY_ABORT | yes, 11.3 s     | no, SAFETY_ABORT, never up
    0.7    | yes, 8.8 s | no, SAFETY_ABORT | yes, 10.7 s     | no, SAFETY_ABORT, never up
    1.0    | yes, 11.7 s| no, never up     | no, never up    | no, SAFETY_ABORT, never up
The reference's law is built for a pole seen at once and its loop is fast: its balance gains hold
a pole seen one control step (2 ms) late (chattering) but not two, and at 20 ms and more the
energy pump, whose gain is largest near hanging, drives the elbow into an oscillation that
passes its speed limit within 0.1 s, on every pole length. The balance law alone from 0.1 rad
(gains designed for the delay) holds every length at 10 ms but 1.0 m, and at 20 ms and more
fails on every length (but 0.3 m at 40 ms), the pivot drifting until the elbow passes its speed
limit. So this reference does not show "shorter is harder" through reaction time: the latencies
it fails at are set by its own loop (the pump, and the pivot's travel through the stiff arm),
far below the pole's own limit (an inverted pendulum of unstable rate lambda under delayed PD
feedback can be stabilised only for a delay under sqrt(2) / lambda: Stepan, Phil. Trans. R. Soc.
A 367, 1195 (2009); with this model's omega0 0.22 s for 0.3 m, 0.37 s for 1.0 m). A law for a
late tracker (a predictor, a gentler pump) is the learner's to find.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot
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
    body_velocity,
    param,
    update_kinematics,
)

POLE = "pole"          # the body of pole and hub, rigidly fixed to link 7
HINGE = "j7"           # the WAM joint the pole turns on (passive)
G = 9.81               # m/s^2, standard gravity (MuJoCo's default)
ALUMINIUM = 2700.0     # kg/m^3, 6060/6061 aluminium (ASM Handbook Vol. 2: 2.70 g/cm^3)
# the hub: a 25 x 2 mm aluminium tube, 0.1 m long, along the flange axis from the flange face to
# the pole's clamp (design values: it puts the pole's swing plane 0.16 m from the wrist centre,
# clear of every link of the arm in its plane, the shoulder's drum reaching 0.14 m the furthest)
HUB_LENGTH = 0.1       # m
HUB_RADIUS = 0.0125    # m, outer
HUB_WALL = 0.002       # m
UPRIGHT_TO_STOP = 0.4  # rad from upright (over the front) on to j7's lower stop: the pole's clamp angle
# the start posture but j7: the upper arm leaning 0.3 rad forward, the forearm pointing down and
# forward (j2 + j4 = 2.8 rad), j5 turning the wrist so that j6 = -pi/2 swings the flange to the side:
# the hinge (link 7's axis) is then parallel to j2 and j4, world +y (j6's stop lies at 1.5707 or
# 1.6 rad in versions of the model; a posture beyond it is clamped, 0.1 mrad off)
START = (0.0, 0.3, 0.0, 2.5, -math.pi / 2, -math.pi / 2)
_UP = np.array([0.0, 0.0, 1.0])
QD_SENSOR = "qd/"  # prefix of the robot's joint velocity sensors (rad/s) the effort term reads


def wrap(angle):
    """Angle(s) wrapped to (-pi, pi]."""
    return np.pi - np.mod(np.pi - angle, 2 * np.pi)


@dataclass
class PoleEpisode(Episode):
    """What the feedback law uses, fixed when command 0's start was reached: the joint direction
    v (n_dofs,) rad/m that moves the pivot along h (3,) (unit, world), the pivot's start position
    p0 (3,) m and the pole's small-swing frequency omega0 rad/s; the tracker (``sensing``); and
    what it carries from one control step to the next, ``memory``: the last sensed phi_d rad/s,
    the pump's gain for the present half swing, then the sensing memory block (the compiled law
    changes it in place)."""

    v: np.ndarray = field(default_factory=lambda: np.zeros(0))
    h: np.ndarray = field(default_factory=lambda: np.zeros(3))
    p0: np.ndarray = field(default_factory=lambda: np.zeros(3))
    omega0: float = 1.0
    sensing: Sensing | None = None
    memory: np.ndarray = field(default_factory=lambda: np.zeros(2))


@dataclass
class PoleBalancing(Task[PoleEpisode]):
    name: ClassVar[str] = "pole_balancing"
    reference: ClassVar[Reference | None] = Reference(  # examples/pole_balancing_reference.py
        "examples.pole_balancing_reference:reference_commands",
        return_tolerance=0.1,  # the reference's return is -12.1
        learner="examples.learning.pole_balancing",
    )
    summary: ClassVar[str] = ("swing up a pole hanging from the wrist's unpowered last joint and balance it "
                              "upright with the other joints, saving energy.")
    needs: ClassVar[Needs] = Needs(robots=("wam",), why=(
            "the pole turns on the WAM's unpowered j7, whose wrist geometry and feedback law's gains "
            "are the WAM's"))
    passive_joints: ClassVar[tuple[str, ...]] = (HINGE,)
    camera: ClassVar[Camera] = {"azimuth": 110, "elevation": -10}  # deg; episodic render frames the rest
    columns: ClassVar[tuple[str, ...]] = ("pole_angle", "pole_velocity", "pivot_x", "pivot_y", "pivot_z")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {"pole_angle": ("rad", "the pole from upright"),
        "pole_velocity": ("rad/s", "the pole's angular velocity"), "pivot_x": ("m", "the pivot's x (world frame)"),
        "pivot_y": ("m", "the pivot's y (world frame)"), "pivot_z": ("m", "the pivot's z (world frame)")}
    reward_doc: ClassVar[str] = (
        "-((1 - cos angle) + effort sum |u qd|) dt: 0 upright, -2 dt hanging, minus the joints' power")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 1, 2)
    context_help: ClassVar[str] = "nothing (hanging at rest), [phi0] rad or [phi0, phi_d0] rad, rad/s"
    gains_help: ClassVar[str] = (
        "[k_phi, k_phid, k_s, k_sd] (balance) or [k_phi, k_phid, k_s, k_sd, k_E, a_swing, phi_catch, theta_back] "
        "(energy swing-up, then balance): a pivot offset, see tasks/pole_balancing.py")
    episode_type: ClassVar[type[Episode]] = PoleEpisode

    pole_length: float = param(0.5, "m", "hinge axis to tip (the hinge is 1.43 m above the floor at the start)",
                               gt=0, le=1.2)
    pole_diameter: float = param(0.02, "m", "outer diameter of the tube", gt=0, le=0.05)
    pole_bore: float = param(0.8, "", "inner diameter / outer diameter (0: a solid rod)", ge=0, lt=1)
    pole_density: float = param(ALUMINIUM, "kg/m^3", "of the pole's material (aluminium; beech wood about 720)",
                                gt=0, le=20000)
    effort: float = param(0.01, "1/W", "weight of the joints' mechanical power in the step reward", ge=0)
    upright: float = param(0.2, "rad", "success: |phi| at the end below this (a pole past the horizontal, "
                           "1.57 rad, is not upright)", gt=0, le=1.5)
    max_offset: float = param(0.3, "m", "the feedback law's largest pivot offset", gt=0, le=1.0)
    fail_joint: int = param(0, "", "the joint (1..n_dofs) that fails, going passive at fail_time; 0: none", ge=0)
    fail_time: float = param(4.0, "s", "when fail_joint fails, after the motion starts", ge=0)
    horizon: float = param(12.0, "s", "motion every episode is scored over: one that ends sooner is charged "
                           "the rest at the worst cost rate (the reference's balancing time)", ge=0)
    sensing_latency: float = param(0.0, "s", "how late the law sees the pole's angle and rate (rounded to "
                                   "control steps)", ge=0, le=1.0)
    sensing_noise: float = param(0.0, "rad", "std of the noise on the pole's sensed angle", ge=0, le=1.0)
    sensing_noise_rate: float = param(0.0, "rad/s", "std of the noise on the pole's sensed rate", ge=0, le=10.0)

    def check_robot(self, robot: Robot) -> None:
        super().check_robot(robot)
        if self.fail_joint > robot.n_dofs:
            raise TaskError(f"fail_joint {self.fail_joint} is not a joint of the {robot.name} "
                            f"(1..{robot.n_dofs}, or 0 for none)")
        if self.fail_joint and robot.joint_names[self.fail_joint - 1] in self.passive_joints:
            raise TaskError(f"fail_joint {self.fail_joint} ({robot.joint_names[self.fail_joint - 1]}) is the "
                            f"pole's hinge, passive already; choose another joint or 0")

    def joint_failures(self, robot: Robot) -> dict[str, float]:
        return {robot.joint_names[self.fail_joint - 1]: self.fail_time} if self.fail_joint else {}

    # -- physics -------------------------------------------------------------
    @property
    def pole_mass(self) -> float:
        """Mass of the tube, kg."""
        r_o, r_i = self.pole_diameter / 2, self.pole_diameter / 2 * self.pole_bore
        return self.pole_density * math.pi * (r_o**2 - r_i**2) * self.pole_length

    @property
    def pole_inertia(self) -> float:
        """The tube's moment of inertia about the hinge axis (a diameter through its end), kg m^2:
        m (l^2 / 3 + (r_o^2 + r_i^2) / 4)."""
        r_o, r_i = self.pole_diameter / 2, self.pole_diameter / 2 * self.pole_bore
        return self.pole_mass * (self.pole_length**2 / 3 + (r_o**2 + r_i**2) / 4)

    @property
    def hub_mass(self) -> float:
        """Mass of the hub, kg."""
        return ALUMINIUM * math.pi * (HUB_RADIUS**2 - (HUB_RADIUS - HUB_WALL) ** 2) * HUB_LENGTH

    def start_posture(self, robot: Robot) -> np.ndarray:
        """START, then j7 with the pole hanging: UPRIGHT_TO_STOP + pi above j7's lower stop."""
        hinge = robot.joint_names.index(HINGE)
        q = np.array(START + (0.0,))
        q[hinge] = robot.range_lower[hinge] + math.pi + UPRIGHT_TO_STOP
        return robot.clamp(q)

    def _pole_frame(self, robot: Robot) -> np.ndarray:
        """Orientation (quaternion) of the pole's frame in the flange's: x along the flange axis
        (the hinge), z along the pole, which hangs straight down at the start posture."""
        model = mujoco.MjModel.from_xml_path(str(robot.mjcf))
        data = mujoco.MjData(model)
        for name, q in zip(robot.joint_names, self.start_posture(robot)):
            data.qpos[model.jnt_qposadr[model.joint(name).id]] = q
        mujoco.mj_kinematics(model, data)
        flange = data.site_xmat[model.site(robot.end_effector_site).id].reshape(3, 3)
        down = flange.T @ -_UP  # world down in the flange frame
        along = np.array([down[0], down[1], 0.0])
        x, z = np.array([0.0, 0.0, 1.0]), along / np.linalg.norm(along)
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, np.column_stack([x, np.cross(z, x), z]).ravel())
        return quat

    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """Hub and pole, one rigid body on link 7 (part of the arm's dynamics and gravity
        compensation; its share through the passive j7 is removed with j7's actuator)."""
        site = spec.site(robot.end_effector_site)
        length, r_o = self.pole_length, self.pole_diameter / 2
        r_i = r_o * self.pole_bore
        pole = site.parent.add_body(name=POLE, pos=np.asarray(site.pos) + [0.0, 0.0, HUB_LENGTH],
                                    quat=self._pole_frame(robot))
        pole.gravcomp = 1.0
        pole.explicitinertial = True
        # composite inertial in the pole frame (x: hinge, z: along the pole, origin on the hinge axis)
        m_p, m_h = self.pole_mass, self.hub_mass
        hub_r2 = HUB_RADIUS**2 + (HUB_RADIUS - HUB_WALL) ** 2
        parts = [(m_p, np.array([0.0, 0.0, length / 2]),
                  np.diag([m_p * (3 * (r_o**2 + r_i**2) + length**2) / 12] * 2 + [m_p * (r_o**2 + r_i**2) / 2])),
                 (m_h, np.array([-HUB_LENGTH / 2, 0.0, 0.0]),
                  np.diag([m_h * hub_r2 / 2] + [m_h * (3 * hub_r2 + HUB_LENGTH**2) / 12] * 2))]
        mass = m_p + m_h
        com = sum(m * c for m, c, _ in parts) / mass
        inertia = sum(i + m * (np.dot(c - com, c - com) * np.eye(3) - np.outer(c - com, c - com))
                      for m, c, i in parts)
        pole.mass, pole.ipos = mass, com
        pole.fullinertia = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]]
        cylinder = mujoco.mjtGeom.mjGEOM_CYLINDER
        # contype 1, conaffinity 1: touches the floor and the arm's links (contype 2, conaffinity 1)
        pole.add_geom(name=POLE, type=cylinder, size=[r_o, length / 2, 0], pos=[0, 0, length / 2], contype=1,
                      conaffinity=1, rgba=[0.85, 0.35, 0.2, 1], mass=0, density=0)
        pole.add_geom(name="pole_hub", type=cylinder, size=[HUB_RADIUS, HUB_LENGTH / 2, 0],
                      pos=[-HUB_LENGTH / 2, 0, 0], quat=[0.70710678, 0, 0.70710678, 0], contype=1, conaffinity=1,
                      rgba=[0.6, 0.6, 0.62, 1], mass=0, density=0)

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        add_control_period(spec, robot.control_dt)
        obj = dict(objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=POLE)
        spec.add_sensor(name="pole_axis", type=mujoco.mjtSensor.mjSENS_FRAMEZAXIS, **obj)
        spec.add_sensor(name="pole_hinge", type=mujoco.mjtSensor.mjSENS_FRAMEXAXIS, **obj)
        spec.add_sensor(name="pole_angvel", type=mujoco.mjtSensor.mjSENS_FRAMEANGVEL, **obj)
        spec.add_sensor(name="pivot_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, **obj)
        for name in robot.joint_names:
            spec.add_sensor(name=f"{QD_SENSOR}{name}", type=mujoco.mjtSensor.mjSENS_JOINTVEL,
                            objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=name)

    # -- episode start -------------------------------------------------------
    def default_context(self) -> np.ndarray:
        """The pole hanging at rest: [pi rad, 0 rad/s]."""
        return np.array([np.pi, 0.0])

    def initialize_episode(self, model, data, context, rng) -> None:
        phi0, phid0 = context.tolist()
        if abs(phid0) > 20.0:
            raise TaskError(f"the pole's start velocity must be within +-20 rad/s, got {phid0}")
        episode = self.episode
        qa, va = episode.ids.qpos[HINGE], episode.ids.dof[HINGE]
        joint = model.joint(HINGE).id
        low, high = model.jnt_range[joint]
        update_kinematics(model, data)
        phi, _ = self._pole(model, data)
        near = float(data.qpos[qa]) + float(wrap(phi0 - phi))  # rad, j7 with the pole at phi0, up to a turn
        q7 = next((q for q in (near - 2 * np.pi, near, near + 2 * np.pi) if low <= q <= high), None)
        if q7 is None:
            raise TaskError(f"phi0 = {phi0} rad lies beyond j7's stops: a pole leaning back past upright by "
                            f"{float(UPRIGHT_TO_STOP):.2f} to {float(2 * np.pi - (high - low) + UPRIGHT_TO_STOP):.2f} "
                            f"rad cannot be reached over the front nor from the back")
        data.qpos[qa] = q7
        data.qvel[va] = 0.0
        update_kinematics(model, data)
        _, phid = self._pole(model, data)
        data.qvel[va] = phid0 - phid
        update_kinematics(model, data)
        self._bind(model, data)
        episode.sensing = Sensing.start(model, self.sensing_latency, [self.sensing_noise, self.sensing_noise_rate],
                                        rng)
        episode.memory = np.concatenate([np.zeros(2), episode.sensing.memory()])

    def _bind(self, model, data) -> None:
        """Fix the feedback law's v, h, p0 and omega0 at the present state (kinematics current)."""
        episode, ids = self.episode, self.episode.ids
        pole = ids.body[POLE]
        hinge = data.xmat[pole].reshape(3, 3)[:, 0]
        h = np.cross(hinge, _UP)
        h /= np.linalg.norm(h)
        episode.h, episode.p0 = h, data.xpos[pole].copy()
        # the joint motion of least kinetic energy that moves the pivot along h, keeping its
        # height and the direction of the hinge (the angular velocity of j7's parent body about
        # h and about up), passive joints left out
        nv = model.nv
        jacp, jacr = np.zeros((3, nv)), np.zeros((3, nv))
        mujoco.mj_jac(model, data, jacp, None, data.xpos[pole], pole)
        carrier = model.body_parentid[model.jnt_bodyid[model.joint(HINGE).id]]
        mujoco.mj_jacBody(model, data, None, jacr, carrier)
        arm = ids.arm_dof
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in model.actuator_trnid[:, 0]]
        driven = np.array([i for i, name in enumerate(names) if name not in self.passive_joints])
        cols = arm[driven]
        c = np.vstack([jacp[:, cols], h @ jacr[:, cols], _UP @ jacr[:, cols]])
        target = np.concatenate([h, [0.0, 0.0]])
        mass = np.zeros((nv, nv))
        mujoco.mj_makeM(model, data)
        mujoco.mj_fullM(model, data, mass)
        m_inv_ct = np.linalg.solve(mass[np.ix_(cols, cols)], c.T)
        v = np.zeros(arm.size)
        v[driven] = m_inv_ct @ np.linalg.lstsq(c @ m_inv_ct, target, rcond=None)[0]
        episode.v = v
        # small swings: I phi_dd = -m g d phi, I = M[j7, j7] (the bodies j7 turns, and its armature)
        body = model.jnt_bodyid[model.joint(HINGE).id]
        dof = ids.dof[HINGE]
        offset = data.subtree_com[body] - data.xpos[pole]
        offset -= np.dot(offset, hinge) * hinge
        episode.omega0 = float(np.sqrt(model.body_subtreemass[body] * G * np.linalg.norm(offset) / mass[dof, dof]))

    # -- feedback law --------------------------------------------------------
    def check_gains(self, task_gains: np.ndarray) -> None:
        if task_gains.size not in (4, 8):
            raise TaskError(f"pole_balancing's task gains are {self.gains_help}; got {task_gains.size} values")
        if task_gains.size == 8 and not (task_gains[5] > 0 and 0 <= task_gains[6] <= np.pi
                                         and 0 <= task_gains[7] <= np.pi):
            raise TaskError("a_swing must be > 0 m, and phi_catch and theta_back in [0, pi] rad")

    def _pole(self, model, data) -> tuple[float, float]:
        """(phi, phi_d) from data's kinematics and com velocities (must be current)."""
        pole = self.episode.ids.body[POLE]
        r = data.xmat[pole].tolist()
        hx, hy, hz = r[0], r[3], r[6]  # hinge axis (the pole frame's x), world
        ax, ay, az = r[2], r[5], r[8]  # along the pole (its z), world
        # angle about the hinge from up to the pole: atan2(((up x along) . hinge), along . up)
        phi = math.atan2(-ay * hx + ax * hy, az)
        wx, wy, wz = body_velocity(model, data, pole)[:3].tolist()
        return phi, wx * hx + wy * hy + wz * hz

    def energy(self, phi, phid):
        """The pole's energy in units of m g d: 1 upright at rest, -1 hanging at rest."""
        return phid**2 / (2 * self.episode.omega0**2) + np.cos(phi)

    def compiled_law(self, model, task_gains) -> CompiledLaw:
        """The law of the module docstring, in tasks/pole_balancing.c (what it carries between
        control steps is the episode's ``memory``)."""
        episode = self.episode
        assert episode.sensing is not None  # started by initialize_episode, before any law
        param = dict(pole=episode.ids.body[POLE], n_gains=task_gains.size, max_offset=self.max_offset,
                     omega0=episode.omega0, h=episode.h, p0=episode.p0, gains=task_gains,
                     sensing=episode.sensing.param(), v=episode.v)
        return CompiledLaw(model, self.name, episode.v.size, param, episode.memory)

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        along = steps.sensor("pole_axis")
        hinge = steps.sensor("pole_hinge")
        phi = np.arctan2(np.einsum("ij,ij->i", np.cross(_UP, along), hinge), along[:, 2])
        phid = np.einsum("ij,ij->i", steps.sensor("pole_angvel"), hinge)
        return np.column_stack([phi, phid, steps.sensor("pivot_pos")])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        qd = np.column_stack([steps.sensor(name) for name in steps.sensors if name.startswith(QD_SENSOR)])
        power = np.sum(np.abs(steps.u * qd), axis=1)
        return -((1 - np.cos(state[:, 0])) + self.effort * power) * steps.dt

    def scored_duration(self) -> float:
        return self.horizon

    def worst_reward_rate(self, model: mujoco.MjModel, robot: Robot) -> float:
        """-(2, the pole hanging, + effort times the most power the joints can spend: each at its
        torque limit and velocity limit) /s."""
        return -(2.0 + self.effort * float(np.sum(robot.torque_limit * robot.velocity_limit)))

    def success(self, state: np.ndarray) -> bool:
        return bool(abs(state[0]) < self.upright and abs(state[1]) < 1.0)
