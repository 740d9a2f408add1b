"""ball_on_beam: keep a ball rolling on a beam at the beam's centre with little effort.

The gain-set task: the learner does not send a trajectory but a gains command whose
``task_gains`` are feedback gains on the ball's position and velocity along the beam.

Scene. A framed beam (a plank of ``beam_length`` m between two side rails, ``beam_mass`` kg,
gravity-compensated like the arm) is bolted to the tool flange (site "ee", link 7) by a
bracket: the beam is perpendicular to the flange axis, and its centre line (the line the
ball's centre rolls along) crosses the flange axis 0.05 m + half the channel width in front
of the flange, so j7 turns the beam about its own centre. At the default start posture
``[0, 0.8, 0, 1.6, 0, pi/2 - 2.4, 0]`` the flange axis points horizontally forward (world +x);
with j7 = 0 the beam is level and runs sideways (world y), and j7 tilts it about the flange axis:
near this posture the beam angle equals q7. Another arm whose last joint turns about its flange's
axis (``needs``) starts with the flange where the WAM's is, placed in its frame
(episodic.task.frame), and its last joint turned until the beam is level (the law and the reward
use the last joint, j7 on the WAM). The ball (``ball_radius`` m, ``ball_mass`` kg, a
solid sphere, inertia 2/5 m r^2) is a free body lying in the channel; it rolls on the plank
without slipping (Coulomb friction ``friction``), so on a beam tilted by theta it accelerates
at (5/7) g sin(theta) (tested); the side rails are frictionless guides that only keep it in
line. The ends are open: a ball rolling past an end falls to the floor.

Contacts (episodic.task.contact: explicit pairs calibrated by drop tests, tests/test_contact.py). The
ball stands for a golf ball (the closest standard ball: at most 45.93 g, at least 42.67 mm; Rules
of Golf, equipment rules). It touches only the plank, the two rails and the floor, each with the
coefficient of restitution 0.86 of a golf ball on a hard floor (The Physics Factbook, G. Elert
ed., "Coefficient of restitution"; the hardwood beam and the concrete floor are both much stiffer
than the ball): plank and floor with the Coulomb friction ``friction``, acting during impacts
too; the rails frictionless (they only guide). A bounce at the 2 ms timestep has a restitution
within about -0.02 / +0.04 of 0.86, by where the impact falls in a step (slow impacts, below
1 m/s, up to 0.03 more). Rolling stays smooth: the contact's first millimetre is soft
(episodic.task.contact.ROLLING_SOLIMP), so the rolling ball keeps touching the plank at every step
instead of hopping, sunk in by about 0.2 mm; the 5/7 g sin(theta) rolling, the ball at rest on
a level beam and the absence of hopping are tested. Air drag is left out: at 1 m/s a sphere's
drag (Cd 0.47 in air of 1.204 kg/m^3) is 3.6e-4 N, 2 % of the force that accelerates the ball
(m 5/7 g sin(theta)) on a beam tilted by 0.05 rad, and under 0.2 % at the usual 0.1-0.3 m/s.

Frames and signs. x is the ball centre's coordinate along the beam, m, from the beam centre,
positive towards the beam end at world +y at the start posture; xd = dx/dt m/s in the
(moving) beam frame; the beam angle theta rad is positive when the +x end is higher, so the
ball accelerates towards -x when theta > 0.

Context (command 0): nothing (the ball starts at rest at ``x0``), [x0] m, or [x0, xd0] m, m/s:
the ball's start position and rolling velocity along the beam (|x0| < beam_length/2 - ball_radius).
The ball is placed on the beam, rolling without slipping, once the arm has reached the start.

Feedback law (task_gains of a gains command; in C, tasks/ball_on_beam.c): [k_x, k_v] in rad/m
and rad s/m:
    q7_desired = q7_held + clip(k_x * x + k_v * xd, -max_tilt, max_tilt)
with x, xd measured each control step (all other joints keep their held posture), from the ball's
world position and velocity as a tracker senses them and the beam's present pose and velocity (the
joint encoders). Sensing (episodic/native/sensing.py): the ball's position and velocity reach the
law ``sensing_latency`` s late (rounded to control steps of 2 ms), each coordinate with independent
Gaussian noise of std ``sensing_noise`` m and ``sensing_noise_rate`` m/s, drawn from the episode's
random generator (seeded by the run's seed and the episode's number, so a replay repeats it); the
defaults, 0, give the true state at once and keep the reference's figures comparable (a camera
tracker is 6-17 ms late: sensing.py). Near the start posture the beam angle is q7, so positive gains
are restoring: a ball at x > 0 raises the +x end and rolls back towards the centre. The joint gains
kp, kd of the same command set how stiffly j7 follows (the reference uses kp7 = 5 N m/rad, kd7 = 0.4
N m s/rad).

State columns: ball_x m, ball_xd m/s, beam_angle rad, on_beam (1 while |x| <= beam_length/2 and
the ball lies in the channel, else 0).

Step reward, while the ball is on the beam: r = -(x^2 + effort * u7^2) * dt, with u7 N m the
torque applied at j7 (the energy spent tilting the beam and carrying the ball). The first step
at which the ball is off the beam ends the segment and gets -fall_cost * (n - k) * dt: the
off-beam cost rate ``fall_cost`` (per second, larger than any on-beam cost rate) for the
n - k planned steps of the segment the ball no longer spends on the beam (a later segment
that starts with the ball off is charged its whole planned length at its first step and ends
at once). The episode return is the sum: minus the time-integrated squared distance from
the centre and effort, with falling off always worse than staying on.
Success: the ball is on the beam at the end of the episode (it cannot come back after
falling, so it stayed on the whole time) and |x| < ``tolerance``.
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
    add_free_ball,
    body_velocity,
    param,
    place_free_ball,
)
from episodic.task.contact import MATERIALS, ROLLING_SOLIMP, add_bouncing_pairs
from episodic.task.frame import REFERENCE_ROBOT, RobotFrame
from episodic.task.kinematics import SiteIK
from episodic.task.sl import SLMap

BEAM = "beam"
BALL = "ball"
_BEAM_TYPE = 4       # contype bit of the beam's geoms: the ball touches them, the arm does not
_BALL_TYPE = 8       # contype bit of the ball
_FLOOR_AFFINITY = 1  # the ball also lands on the floor
# the ball's contacts: a golf ball on hard surfaces (restitution and its source: the docstring)
BALL_SURFACES = MATERIALS["golf_ball_on_hard"]
# beam frame (x along the beam, y = -flange axis, z = up at the start posture) in the flange frame
_BEAM_QUAT = np.empty(4)
mujoco.mju_mat2Quat(_BEAM_QUAT, np.array([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]).ravel())


def _flange_axis(ik: SiteIK) -> np.ndarray:
    """(3,) the z axis of the body holding the end-effector site (what the beam is bolted along),
    in the site's frame."""
    rotation = np.empty(9)
    mujoco.mju_quat2Mat(rotation, ik.model.site_quat[ik.site])
    return rotation.reshape(3, 3).T @ np.array([0.0, 0.0, 1.0])


@dataclass
class BeamEpisode(Episode):
    """What the feedback law keeps in an episode: the tracker (``sensing``) and its ``memory``
    (the sensing memory block, changed in place by the compiled law)."""

    sensing: Sensing | None = None
    memory: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class BallOnBeam(Task[BeamEpisode]):
    name: ClassVar[str] = "ball_on_beam"
    reference: ClassVar[Reference | None] = Reference(  # examples/ball_on_beam_reference.py
        "examples.ball_on_beam_reference:reference_commands",
        return_tolerance=0.001,  # the reference's return is -0.004
        learner="examples.learning.ball_on_beam",
    )
    summary: ClassVar[str] = "keep a ball rolling on a beam at the beam's centre with little effort."
    needs: ClassVar[Needs] = Needs(dofs=6, flange_hinge=True)  # the beam level, turned by the last joint
    camera: ClassVar[Camera] = {"azimuth": 140, "elevation": -20}  # deg; episodic render frames the rest
    sl: ClassVar[SLMap] = SLMap(("ball position m", "ball velocity m/s"), (0, 1), gains=2, duration="horizon",
                                states=("ball_x", None, None, "ball_xd", None, None, None, None, None))
    columns: ClassVar[tuple[str, ...]] = ("ball_x", "ball_xd", "beam_angle", "on_beam")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {
        "ball_x": ("m", "the ball along the beam from its centre"),
        "ball_xd": ("m/s", "the ball's velocity along the beam"), "beam_angle": ("rad", "the beam's tilt"),
        "on_beam": ("", "1 while the ball lies in the beam's channel")}
    reward_doc: ClassVar[str] = (
        "-(x^2 + effort u7^2) dt on the beam; at the fall, the off-beam cost of the segment's remaining steps")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 1, 2)
    context_help: ClassVar[str] = ("nothing, [x0] m or [x0, xd0] m, m/s: the ball's start position and "
                                   "velocity along the beam")
    gains_help: ClassVar[str] = ("[k_x, k_v] rad/m, rad s/m: q7_desired = q7_held + "
                                 "clip(k_x x + k_v xd, +-max_tilt), x m and xd m/s the ball along the beam")
    episode_type: ClassVar[type[Episode]] = BeamEpisode

    beam_length: float = param(0.8, "m", "plank and rails, at least 8 ball radii", gt=0)
    beam_mass: float = param(0.3, "kg", gt=0)
    ball_radius: float = param(0.02, "m", gt=0)
    ball_mass: float = param(0.05, "kg", gt=0)
    friction: float = param(1.0, "", "Coulomb friction coefficient of ball and plank", gt=0)
    x0: float = param(0.1, "m", "the ball's start along the beam without a context, "
                      "|x0| < beam_length/2 - ball_radius")
    max_tilt: float = param(0.3, "rad", "the feedback law's largest offset of j7 (short of a right "
                            "angle, which would stand the beam on end)", gt=0, le=1.5)
    effort: float = param(0.01, "m^2/(N m)^2", "weight of u7^2 against x^2 in the step reward", ge=0)
    fall_cost: float = param(1.0, "m^2", "cost rate (like x^2) of the steps left when the ball falls off", ge=0)
    tolerance: float = param(0.03, "m", "success: |x| at the end below this", gt=0)
    horizon: float = param(10.0, "s", "motion every episode is scored over: one that ends sooner is charged "
                           "the rest at the worst cost rate (the reference's length)", ge=0)
    sensing_latency: float = param(0.0, "s", "how late the law sees the ball (rounded to control steps)",
                                   ge=0, le=1.0)
    sensing_noise: float = param(0.0, "m", "std of the noise on each coordinate of the ball's sensed position",
                                 ge=0, le=1.0)
    sensing_noise_rate: float = param(0.0, "m/s", "std of the noise on each coordinate of the ball's sensed "
                                      "velocity", ge=0, le=10.0)

    def check_params(self) -> None:
        if self.ball_radius * 8 > self.beam_length:
            raise TaskError(f"ball_radius {self.ball_radius} m is too large for a {self.beam_length} m beam")
        if not abs(self.x0) < self.half_length - self.ball_radius:
            raise TaskError(f"x0 must lie on the beam: |x0| < {self.half_length - self.ball_radius:g} m, got {self.x0}")

    # -- geometry ------------------------------------------------------------
    @property
    def half_length(self) -> float:
        return 0.5 * self.beam_length

    @property
    def channel_width(self) -> float:
        """Gap between the rails, m (the ball has 10 % of its radius of play on each side)."""
        return 2.2 * self.ball_radius

    @property
    def beam_offset(self) -> float:
        """Distance of the ball's rolling line from the flange along the flange axis, m."""
        return 0.05 + 0.5 * self.channel_width

    def start_posture(self, robot: Robot) -> np.ndarray:
        """On the WAM ``[0, 0.8, 0, 1.6, 0, pi/2 - 2.4, 0]`` (module docstring); on another arm the
        posture nearest its home that puts the flange where the WAM's is, placed in the arm's
        frame (episodic.task.frame), its axis along the WAM's turned with the arm, then the last
        joint turned until the beam is level and its channel faces up."""
        q2, q4 = 0.8, 1.6
        wam = np.array([0.0, q2, 0.0, q4, 0.0, 0.5 * np.pi - q2 - q4, 0.0])
        frame = RobotFrame.of(robot)
        if frame.is_reference():
            return wam
        reference = self._flange_ik(load_robot(REFERENCE_ROBOT))
        flange_wam, axis_wam = reference.pose(wam, _flange_axis(reference))
        ik = self._flange_ik(robot)
        q, error = ik.solve(robot.home, frame.from_wam(flange_wam), frame.direction_from_wam(axis_wam),
                            iterations=1000, axis=_flange_axis(ik))
        if error > 1e-6:
            raise TaskError(f"ball_on_beam cannot hold the beam where it is placed on '{robot.name}' "
                            f"(inverse kinematics error {error:.2g}); choose an arm that reaches it")
        # turn the last joint about the flange's axis a until the beam's up direction u points up
        ik.pose(q)
        beam = ik.data.xmat[ik.model.body(BEAM).id].reshape(3, 3)
        flange = ik.data.xmat[ik.model.site(robot.end_effector_site).bodyid[0]].reshape(3, 3)
        a, u = flange[:, 2], beam[:, 2]
        q[-1] += np.arctan2(np.cross(a, u)[2], u[2]) * np.sign(frame.last_axis[2])
        middle = 0.5 * (robot.range_lower[-1] + robot.range_upper[-1])
        q[-1] -= 2 * np.pi * np.round((q[-1] - middle) / (2 * np.pi))  # the same turn, nearest mid-range
        if not robot.range_lower[-1] + self.max_tilt <= q[-1] <= robot.range_upper[-1] - self.max_tilt:
            raise TaskError(f"on '{robot.name}' the beam is level with {robot.joint_names[-1]} at {q[-1]:.3f} rad, "
                            f"less than max_tilt from its range; ball_on_beam cannot tilt it both ways there")
        return q

    def _flange_ik(self, robot: Robot) -> SiteIK:
        """Inverse kinematics of the end-effector site on ``robot`` with this beam (no scene)."""
        spec = mujoco.MjSpec.from_file(str(robot.mjcf))
        self.add_tool(spec, robot)
        model = spec.compile()
        joints = [model.joint(name) for name in robot.joint_names]
        return SiteIK(model, robot.end_effector_site, [j.qposadr[0] for j in joints], [j.dofadr[0] for j in joints],
                      robot.range_lower, robot.range_upper)

    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        flange = spec.site(robot.end_effector_site).parent
        r, half, w = self.ball_radius, self.half_length, self.channel_width
        plank_h, rail_t, rail_h = 0.01, 0.006, 0.8 * r
        beam = flange.add_body(name=BEAM, pos=[0, 0, self.beam_offset], quat=_BEAM_QUAT)
        beam.gravcomp = 1.0
        beam.explicitinertial = True
        beam.mass = self.beam_mass
        width = w + 2 * rail_t
        beam.ipos = [0, 0, -r - plank_h / 2]
        beam.inertia = self.beam_mass / 12 * np.array([width**2 + plank_h**2, self.beam_length**2 + plank_h**2,
                                                       self.beam_length**2 + width**2])
        look = dict(contype=_BEAM_TYPE, conaffinity=_BALL_TYPE, friction=[self.friction, 0.005, 0.0001],
                    rgba=[0.55, 0.45, 0.3, 1])
        box = mujoco.mjtGeom.mjGEOM_BOX
        beam.add_geom(name="beam_plank", type=box, size=[half, w / 2 + rail_t, plank_h / 2],
                      pos=[0, 0, -r - plank_h / 2], **look)
        # frictionless guide rails (condim 1 wins by priority): they only keep the ball in line
        rails = dict(look, condim=1, priority=1)
        for side in (-1, 1):
            beam.add_geom(name=f"beam_rail{'_neg' if side < 0 else '_pos'}", type=box,
                          size=[half, rail_t / 2, rail_h / 2], pos=[0, side * (w / 2 + rail_t / 2), -r + rail_h / 2],
                          **rails)
        # the bracket from the flange plate to the back rail (looks only)
        gap = self.beam_offset - w / 2 - rail_t
        beam.add_geom(name="beam_bracket", type=box, size=[0.03, gap / 2, 0.02],
                      pos=[0, w / 2 + rail_t + gap / 2, -r], contype=0, conaffinity=0, rgba=[0.3, 0.3, 0.33, 1])

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        add_control_period(spec, robot.control_dt)
        r = self.ball_radius
        add_free_ball(spec, BALL, [0.8, 0, 0.5 + r], r, self.ball_mass,
                      contype=_BALL_TYPE, conaffinity=_BEAM_TYPE | _FLOOR_AFFINITY,
                      friction=[self.friction, 0.005, 0.0001], rgba=[0.85, 0.85, 0.9, 1])
        ref = dict(objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=BALL, reftype=mujoco.mjtObj.mjOBJ_XBODY, refname=BEAM)
        spec.add_sensor(name="ball_in_beam", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, **ref)
        spec.add_sensor(name="ball_vel_in_beam", type=mujoco.mjtSensor.mjSENS_FRAMELINVEL, **ref)
        spec.add_sensor(name="beam_axis", type=mujoco.mjtSensor.mjSENS_FRAMEXAXIS,
                        objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=BEAM)
        # every contact of the ball (plank, rails, floor) bounces like a golf ball; the rails
        # stay frictionless guides
        add_bouncing_pairs(spec, BALL, BALL_SURFACES.restitution, self.friction, spec.option.timestep,
                           overrides={name: dict(condim=1) for name in ("beam_rail_neg", "beam_rail_pos")},
                           solimp=ROLLING_SOLIMP)

    # -- episode start -------------------------------------------------------
    def default_context(self) -> np.ndarray:
        """The ball at rest at ``x0``: [x0 m, 0 m/s]."""
        return np.array([self.x0, 0.0])

    def initialize_episode(self, model, data, context, rng) -> None:
        x0, v0 = context.tolist()
        if not abs(x0) < self.half_length - self.ball_radius:
            raise TaskError(f"the ball's start x0 must lie on the beam: |x0| < "
                            f"{self.half_length - self.ball_radius:g} m, got {x0}")
        if abs(v0) > 5.0:
            raise TaskError(f"the ball's start velocity must be within +-5 m/s, got {v0}")
        mujoco.mj_forward(model, data)
        ids = self.episode.ids
        beam = ids.body[BEAM]
        origin, frame = data.xpos[beam].copy(), data.xmat[beam].reshape(3, 3).copy()
        along, up = frame[:, 0], frame[:, 2]
        spin_lin = body_velocity(model, data, beam)
        omega, v_origin = spin_lin[:3], spin_lin[3:]
        pos = origin + x0 * along
        place_free_ball(data, ids, BALL, pos, v_origin + np.cross(omega, pos - origin) + v0 * along,
                        omega + np.cross(up, v0 * along) / self.ball_radius)
        noise = [self.sensing_noise] * 3 + [self.sensing_noise_rate] * 3
        episode = self.episode
        episode.sensing = Sensing.start(model, self.sensing_latency, noise, rng)
        episode.memory = episode.sensing.memory()

    # -- feedback law --------------------------------------------------------
    def check_gains(self, task_gains: np.ndarray) -> None:
        if task_gains.size != 2:
            raise TaskError(f"ball_on_beam's task gains are {self.gains_help}; got {task_gains.size} values")

    def compiled_law(self, model, task_gains) -> CompiledLaw:
        """The law of the module docstring, in tasks/ball_on_beam.c (what the tracker has seen is
        the episode's ``memory``)."""
        episode = self.episode
        assert episode.sensing is not None  # started by initialize_episode, before any law
        ids = episode.ids
        param = dict(beam=ids.body[BEAM], ball_qpos=ids.qpos[BALL], ball_dof=ids.dof[BALL], k_x=task_gains[0],
                     k_v=task_gains[1], max_tilt=self.max_tilt, sensing=episode.sensing.param())
        return CompiledLaw(model, self.name, ids.arm_dof.size, param, episode.memory)

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        pos = steps.sensor("ball_in_beam")
        vel = steps.sensor("ball_vel_in_beam")
        axis = steps.sensor("beam_axis")
        on = ((np.abs(pos[:, 0]) <= self.half_length) & (np.abs(pos[:, 2]) < self.ball_radius)
              & (np.abs(pos[:, 1]) < self.channel_width))
        return np.column_stack([pos[:, 0], vel[:, 0], np.arcsin(np.clip(axis[:, 2], -1, 1)), on.astype(float)])

    def _first_off(self, state: np.ndarray) -> int | None:
        off = np.flatnonzero(state[:, 3] < 0.5)
        return int(off[0]) if off.size else None

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        reward = -(state[:, 0] ** 2 + self.effort * steps.u[:, -1] ** 2) * steps.dt  # u7: the last joint
        k = self._first_off(state)
        if k is not None:
            reward[k] = -self.fall_cost * (len(state) - k) * steps.dt
            reward[k + 1 :] = 0.0
        return reward

    def segment_end(self, steps: StepView, state: np.ndarray) -> int | None:
        k = self._first_off(state)
        return None if k is None else k + 1

    def scored_duration(self) -> float:
        return self.horizon

    def worst_reward_rate(self, model: mujoco.MjModel, robot: Robot) -> float:
        """-(the larger of fall_cost and the largest on-beam cost rate: the ball at an end, j7 at
        its torque limit) /s."""
        on_beam = (self.beam_length / 2) ** 2 + self.effort * robot.torque_limit[-1] ** 2
        return -max(self.fall_cost, on_beam)

    def success(self, state: np.ndarray) -> bool:
        return bool(state[3] > 0.5 and abs(state[0]) < self.tolerance)
