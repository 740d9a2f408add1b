"""pole_balancing: swing up a pole on a passive hinge at the wrist and balance it upright, saving energy.

A Furuta pendulum on the arm's last joint.

Scene. A lever (``lever_length`` m, ``lever_mass`` kg, gravity-compensated like the arm) is
bolted to the tool flange (site "ee", link 7) at right angles to the flange axis, so j7 swings
it round; at its end a pole (a uniform solid cylinder of ``pole_length`` m, ``pole_mass`` kg,
radius ``pole_radius`` m) turns on a passive, unactuated hinge (joint "pole", damping
``pole_damping`` N m s/rad) whose axis runs along the lever. The pole and its hinge are world
objects (task.add_scene), not part of the arm's inverse-dynamics model; the pole collides with
nothing. At the default start posture ``[0, 0.6, 0, 1.9, 0, pi - 2.5, 0]`` the flange faces the
floor, so j7 turns about the vertical, the lever points forward (world +x) 0.03 m below the
flange and the pivot is 1.31 m above the floor: j7 moves the pivot sideways, across the pole's
swing plane, like the rotary arm of a Furuta pendulum. A free pole swings with the
physical-pendulum period 2 pi sqrt(I_p / (m g l/2)), I_p = m (l^2/3 + r^2/4) about the pivot
(tested). Pole length sets the difficulty (a longer pole is slower but loads the 2 N m wrist
more; a shorter one is quicker): see examples/pole_balancing_reference.py for what its
swing-up reaches at 0.3-0.8 m.

Pole angle phi rad: the angle from world up to the pole (pivot to tip) about the hinge axis,
wrapped to (-pi, pi]: 0 upright, +-pi hanging; phi > 0 leans the pole towards the side to which
j7 > 0 moves the pivot. phi_d rad/s: the pole's angular velocity about the hinge axis.

Context (command 0): nothing (the pole hangs at rest), [phi0] rad, or [phi0, phi_d0] rad, rad/s,
set once the arm has reached the start (the pivot's motion at that moment is kept).

Feedback law (task_gains of a gains command): an offset dq7 rad added to the held j7 angle,
computed from the present state every control step:
    4 values [k_phi, k_phid, k_s, k_sd]: balance,
        dq7 = k_phi phi + k_phid phi_d + k_s s + k_sd s_d
    7 values [k_phi, k_phid, k_s, k_sd, k_E, a_swing, phi_catch]: swing up, then balance:
        the balance law while |phi| < phi_catch, otherwise the energy pump
        dq7 = clip(-k_E (1 - E) sgn(phi_d cos phi), -a_swing, a_swing),   sgn(0) = 1,
with s = q7 - q7_start rad (j7 when command 0's start was reached), s_d = qd7 rad/s, and
E = phi_d^2 / (2 w0^2) + cos(phi), w0^2 = m g (l/2) / I_p, the pole's energy in units of
m g l/2 (1 upright at rest, -1 hanging at rest); dq7 is clipped to +-``max_offset`` rad.
Balancing gains are positive (a pole leaning to phi > 0 needs the pivot moved under it); so is
a k_E that pumps energy in. The joint gains of the same command set how j7 follows (the
reference: kp7 = 5 N m/rad, kd7 = 0.1 N m s/rad, a stiffer wrist, j5/j6 at 100 N m/rad).

State columns: pole_angle rad, pole_velocity rad/s, pivot_x, pivot_y, pivot_z m (world).

Step reward: r = -((1 - cos phi) + effort * sum_i |u_i qd_i|) * dt: 0 upright, -2 dt hanging,
minus ``effort`` times the mechanical power the joints spend, W (motoring and braking alike).
Success: the episode ends with the pole upright and nearly still, |phi| < ``upright`` rad and
|phi_d| < 1 rad/s (a task sees only the final state; the tests also check the last seconds).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from episodic.robot import Robot
from episodic.task import Episode, StepView, Task, TaskError, body_velocity, param, update_kinematics

POLE = "pole"
LEVER = "pole_lever"
LEVER_DROP = 0.03  # m: the lever runs this far below the flange face, along the flange axis
# pole frame in the lever (= flange) frame: x = hinge axis = along the lever (-x7), z = along the
# pole (pivot to tip), hanging down at hinge angle 0 when the flange faces the floor (+z7)
_POLE_QUAT = np.array([0.0, 0.0, 0.0, 1.0])
_UP = np.array([0.0, 0.0, 1.0])
QD_SENSOR = "qd/"  # prefix of the robot's joint velocity sensors (rad/s) the effort term reads


def wrap(angle):
    """Angle(s) wrapped to (-pi, pi]."""
    return np.pi - np.mod(np.pi - angle, 2 * np.pi)


@dataclass
class PoleEpisode(Episode):
    """q_start: j7 rad when command 0's start was reached (s = q7 - q_start in the feedback law)."""

    q_start: float = 0.0


@dataclass
class PoleBalancing(Task):
    name: ClassVar[str] = "pole_balancing"
    summary: ClassVar[str] = ("swing up a pole on a passive hinge at the wrist and balance it upright, "
                              "saving energy.")
    robots: ClassVar[tuple[str, ...]] = ("wam",)
    columns: ClassVar[tuple[str, ...]] = ("pole_angle", "pole_velocity", "pivot_x", "pivot_y", "pivot_z")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 1, 2)
    context_help: ClassVar[str] = "nothing (hanging at rest), [phi0] rad or [phi0, phi_d0] rad, rad/s"
    gains_help: ClassVar[str] = (
        "[k_phi, k_phid, k_s, k_sd] (balance) or [k_phi, k_phid, k_s, k_sd, k_E, a_swing, phi_catch] "
        "(energy swing-up, then balance): offset of j7, see tasks/pole_balancing.py")
    episode_type: ClassVar[type[Episode]] = PoleEpisode

    pole_length: float = param(0.5, "m", "pivot to tip (the pivot is 1.31 m above the floor at the start)", gt=0,
                               le=1.2)
    pole_mass: float = param(0.1, "kg", gt=0)
    pole_radius: float = param(0.01, "m", gt=0)
    pole_damping: float = param(0.0, "N m s/rad", "viscous damping of the hinge", ge=0)
    lever_length: float = param(0.25, "m", "flange axis to hinge", gt=0)
    lever_mass: float = param(0.15, "kg", gt=0)
    effort: float = param(0.01, "1/W", "weight of the joints' mechanical power in the step reward", ge=0)
    upright: float = param(0.2, "rad", "success: |phi| at the end below this (a pole past the horizontal, "
                           "1.57 rad, is not upright)", gt=0, le=1.5)
    max_offset: float = param(1.0, "rad", "the feedback law's largest offset of j7", gt=0)

    # -- physics -------------------------------------------------------------
    @property
    def pivot_inertia(self) -> float:
        """Moment of inertia about the hinge, kg m^2 (solid cylinder about an end diameter)."""
        m, l, r = self.pole_mass, self.pole_length, self.pole_radius
        return m * (l * l / 3 + r * r / 4)

    @property
    def omega0(self) -> float:
        """Small-swing angular frequency of the free pole, rad/s."""
        return float(np.sqrt(self.pole_mass * 9.81 * self.pole_length / 2 / self.pivot_inertia))

    @property
    def period(self) -> float:
        """Small-swing period of the free pole, s."""
        return 2 * np.pi / self.omega0

    @property
    def pivot(self) -> np.ndarray:
        """The hinge's position in the flange frame, m."""
        return np.array([-self.lever_length, 0.0, LEVER_DROP])

    def start_posture(self, robot: Robot) -> np.ndarray:
        q2, q4 = 0.6, 1.9
        return np.array([0.0, q2, 0.0, q4, 0.0, np.pi - q2 - q4, 0.0])

    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """The lever: a bar from the flange axis out to the pole's hinge, turned by j7."""
        flange = spec.site(robot.end_effector_site).parent
        lever = flange.add_body(name=LEVER)
        lever.gravcomp = 1.0
        lever.explicitinertial = True
        m, length, width = self.lever_mass, self.lever_length + 0.02, 0.02
        lever.mass = m
        lever.ipos = [-length / 2 + 0.01, 0, LEVER_DROP]
        lever.inertia = m / 12 * np.array([2 * width**2, length**2 + width**2, length**2 + width**2])
        box = mujoco.mjtGeom.mjGEOM_BOX
        lever.add_geom(name="lever_bar", type=box, size=[length / 2, width / 2, width / 2],
                       pos=[-length / 2 + 0.01, 0, LEVER_DROP], contype=0, conaffinity=0, rgba=[0.3, 0.3, 0.33, 1])
        lever.add_geom(name="lever_hub", type=box, size=[0.02, 0.02, LEVER_DROP / 2], pos=[0, 0, LEVER_DROP / 2],
                       contype=0, conaffinity=0, rgba=[0.3, 0.3, 0.33, 1])

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """The pole on its passive hinge at the lever's end (a world object: not in the arm's
        inverse-dynamics model)."""
        m, l, r = self.pole_mass, self.pole_length, self.pole_radius
        pole = spec.body(LEVER).add_body(name=POLE, pos=self.pivot, quat=_POLE_QUAT)
        pole.explicitinertial = True
        pole.mass = m
        pole.ipos = [0, 0, l / 2]
        side = m * (3 * r * r + l * l) / 12
        pole.inertia = [side, side, m * r * r / 2]
        # (the arm's default class would make the joint limited: a passive hinge turns freely)
        pole.add_joint(name=POLE, type=mujoco.mjtJoint.mjJNT_HINGE, axis=[1, 0, 0], damping=self.pole_damping,
                       limited=mujoco.mjtLimited.mjLIMITED_FALSE, actfrclimited=mujoco.mjtLimited.mjLIMITED_FALSE,
                       armature=0.0, frictionloss=0.0)
        pole.add_geom(name=POLE, type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[r, l / 2, 0], pos=[0, 0, l / 2],
                      contype=0, conaffinity=0, rgba=[0.85, 0.35, 0.2, 1])
        pole.add_geom(name="pole_axle", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.012, 0.02, 0],
                      quat=[0.70710678, 0, 0.70710678, 0], contype=0, conaffinity=0, rgba=[0.2, 0.2, 0.2, 1])
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
        qa, va = episode.ids.qpos[POLE], episode.ids.dof[POLE]
        data.qpos[qa] = 0.0
        data.qvel[va] = 0.0
        update_kinematics(model, data)
        phi, phid = self._pole(model, data)
        data.qpos[qa] = wrap(phi0 - phi)
        data.qvel[va] = phid0 - phid
        episode.q_start = float(data.qpos[episode.ids.arm_qpos[-1]])

    # -- feedback law --------------------------------------------------------
    def check_gains(self, task_gains: np.ndarray) -> None:
        if task_gains.size not in (4, 7):
            raise TaskError(f"pole_balancing's task gains are {self.gains_help}; got {task_gains.size} values")
        if task_gains.size == 7 and not (task_gains[5] >= 0 and 0 <= task_gains[6] <= np.pi):
            raise TaskError("a_swing must be >= 0 rad and phi_catch in [0, pi] rad")

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
        """The pole's energy in units of m g l/2: 1 upright at rest, -1 hanging at rest."""
        return phid**2 / (2 * self.omega0**2) + np.cos(phi)

    def feedback(self, model, data, task_gains) -> np.ndarray:
        update_kinematics(model, data)
        phi, phid = self._pole(model, data)
        episode = self.episode
        qa, va = episode.ids.arm_qpos[-1], episode.ids.arm_dof[-1]
        s = float(data.qpos[qa]) - episode.q_start
        sd = float(data.qvel[va])
        k_phi, k_phid, k_s, k_sd = task_gains[:4].tolist()
        if task_gains.size == 4 or abs(phi) < task_gains[6]:
            dq7 = k_phi * phi + k_phid * phid + k_s * s + k_sd * sd
        else:
            k_e, a_swing = float(task_gains[4]), float(task_gains[5])
            direction = 1.0 if phid * math.cos(phi) >= 0 else -1.0
            energy = phid * phid / (2 * self.omega0**2) + math.cos(phi)  # as energy() does
            pump = -k_e * (1.0 - energy) * direction
            dq7 = min(max(pump, -a_swing), a_swing)
        return self.last_joint_offset(dq7, self.max_offset)

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

    def success(self, state: np.ndarray) -> bool:
        return bool(abs(state[0]) < self.upright and abs(state[1]) < 1.0)
