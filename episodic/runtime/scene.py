"""The simulated scene: the robot's MJCF with the controller's actuators and sensors added
from its settings, plus the task's tool and objects, compiled into one MuJoCo model.

The control law (SL's PD + feedforward; docs/architecture.md) runs inside MuJoCo: each joint gets a
general actuator with force ``ctrl - kp q - kd qd`` (gain 1, affine bias), so
``ctrl = kp q_d + kd qd_d + ki I + u_ff``; gravity compensation is MuJoCo's body
gravcomp routed through the actuators (``actuatorgravcomp``), and the total joint torque
saturates at the robot's torque limit (``actuatorfrcrange``). A blocking segment runs whole in
C (``episodic.native``), the task's feedback law and any state-dependent u_ff included.

Passive joints (a task's ``passive_joints``, and joints that fail during an episode) keep their
actuator, sensor and log columns but get no torque at all: :meth:`Scene.set_passive` zeroes the
actuator's gain and bias and the joint's ``actuatorfrcrange``. The range matters: MuJoCo routes a
joint's share of the bodies' gravity compensation through its actuator (``actuatorgravcomp``)
and clips the sum to that range, so [0, 0] removes it exactly, where switching
``actuatorgravcomp`` off would only move it into the passive force. The joint then moves under
gravity and the forces of the rest of the arm, against its own damping and friction. (MuJoCo's
compiler refuses an empty range, so it is set on the compiled model: the scene's XML shows the
joint's torque limits, and the actuator's zero gain and bias.)

Joints beyond the arm (``Robot.extra_joints``: gripper fingers, ...) are not commanded: each gets an
actuator ``hold/<joint>`` of its own whose force ``kp (hold - q) - kd qd`` does not read ctrl,
its force limit, and the hold posture as the model's qpos0 (so an exact start puts it there). The
inverse-dynamics model has them frozen at the hold posture (their bodies welded where the posture
puts them), so it keeps exactly the arm's joints.

Every scene has a floor, light and sky: a robot model without a geom named ``floor`` (an imported
robot, docs/robots.md) gets them from :func:`_add_environment`; the built-in robots bring their own.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.task import Task

STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
ROLLOUT_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


@dataclass
class Scene:
    """A compiled scene and where the robot lives in it.

    qpos_adr, dof_adr: (n_dofs,) addresses of the robot joints; actuator, joint: (n_dofs,) ids;
    passive: (n_dofs,) bool, the joints the task leaves without actuation (see set_passive);
    arm_bodies: ids of the bodies whose gravity the controller may compensate (the robot's
    and any tool the task marks with gravcomp);
    sensors: name -> slice of sensordata; dynamics: model of the robot and its tool alone,
    for inverse dynamics.
    """

    robot: Robot
    model: mujoco.MjModel
    dynamics: mujoco.MjModel
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    actuator: np.ndarray
    arm_bodies: np.ndarray
    sensors: dict[str, slice]
    xml: str
    substeps: int  # physics steps per control step
    joint: np.ndarray
    passive: np.ndarray

    def set_passive(self, model: mujoco.MjModel, passive: np.ndarray) -> None:
        """Leave the robot joints where ``passive`` (n_dofs,) bool is true, and the task's passive
        joints, without actuation in ``model`` (this scene's model or a copy): actuator gain, kp
        and kd 0 and the joint's actuator force range [0, 0], so that the joint torque, gravity
        compensation included, is exactly 0. The other joints get gain 1 and their torque limits
        back (their kp and kd are the gains' to set)."""
        passive = np.asarray(passive, bool) | self.passive
        act, limit = self.actuator, self.robot.torque_limit
        model.actuator_gainprm[act, 0] = np.where(passive, 0.0, 1.0)
        model.actuator_biasprm[act[passive], 1:3] = 0.0
        low, high = np.where(passive, 0.0, -limit), np.where(passive, 0.0, limit)
        model.jnt_actfrcrange[self.joint] = np.column_stack([low, high])

    def sensor(self, sensordata: np.ndarray, name: str) -> np.ndarray:
        """Columns of sensor ``name`` from sensordata (..., nsensordata)."""
        return sensordata[..., self.sensors[name]]

    def applied_torque(self, sensordata: np.ndarray) -> np.ndarray:
        """Joint torques u (..., n_dofs) N m after saturation, gravity compensation included
        (C-ordered)."""
        return _take(sensordata, self._torque_columns)

    def qpos(self, states: np.ndarray) -> np.ndarray:
        """All qpos (..., nq) from mjSTATE_FULLPHYSICS rows (time, qpos, qvel, ...)."""
        return states[..., 1 : 1 + self.model.nq]

    def qvel(self, states: np.ndarray) -> np.ndarray:
        """All qvel (..., nv) from mjSTATE_FULLPHYSICS rows."""
        nq = self.model.nq
        return states[..., 1 + nq : 1 + nq + self.model.nv]

    def joint_positions(self, states: np.ndarray) -> np.ndarray:
        """The robot's joint positions (..., n_dofs) rad from mjSTATE_FULLPHYSICS rows (C-ordered)."""
        return _take(states, self._q_columns)

    def joint_velocities(self, states: np.ndarray) -> np.ndarray:
        """The robot's joint velocities (..., n_dofs) rad/s from mjSTATE_FULLPHYSICS rows (C-ordered)."""
        return _take(states, self._qd_columns)

    # where the robot's columns are in a state row and in sensordata (see _columns)
    @cached_property
    def _q_columns(self) -> slice | np.ndarray:
        return _columns(1 + self.qpos_adr)

    @cached_property
    def _qd_columns(self) -> slice | np.ndarray:
        return _columns(1 + self.model.nq + self.dof_adr)

    @cached_property
    def _torque_columns(self) -> slice | np.ndarray:
        return _columns(np.array([self.sensors[f"u/{name}"].start for name in self.robot.joint_names]))


def _columns(index: np.ndarray) -> slice | np.ndarray:
    """``index`` (k,) as a slice when it is a run of consecutive columns (the usual case: the
    robot's joints come first and in order), else as it is."""
    start = int(index[0])
    return slice(start, start + len(index)) if np.array_equal(index, start + np.arange(len(index))) else index


def _take(values: np.ndarray, columns: slice | np.ndarray) -> np.ndarray:
    """values[..., columns] as a fresh C-ordered array (an index array on the last axis would give a
    column-major one, which costs every later row-wise copy of it a strided read)."""
    if isinstance(columns, slice):
        return values[..., columns].copy()
    return np.take(values, columns, axis=-1)


def _robot_spec(robot: Robot, substeps: int, frozen: bool = False) -> mujoco.MjSpec:
    """The robot's model with the settings' ranges, torque limits, timestep and gravity
    compensation; its extra joints held (``frozen``: welded at their hold posture)."""
    spec = mujoco.MjSpec.from_file(str(robot.mjcf))
    spec.option.timestep = robot.control_dt / substeps
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    for i, name in enumerate(robot.joint_names):
        joint = spec.joint(name)
        if joint is None:
            raise ValueError(f"{robot.mjcf} has no joint '{name}' named in the robot's settings")
        joint.range = [robot.range_lower[i], robot.range_upper[i]]
        joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.actfrcrange = [-robot.torque_limit[i], robot.torque_limit[i]]
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.actgravcomp = True
    extra = robot.extra_joints
    for i, name in enumerate(extra.names):
        joint = spec.joint(name)
        if joint is None:
            raise ValueError(f"{robot.mjcf} has no joint '{name}' named in the robot's [extra_joints]")
        joint.actfrcrange = [-extra.torque[i], extra.torque[i]]
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
    if frozen and extra.names:
        _freeze(spec, extra.names, extra.hold)
    for body in spec.bodies:
        if body.name != "world":
            body.gravcomp = 1.0
    return spec


def _freeze(spec: mujoco.MjSpec, names: tuple[str, ...], hold: np.ndarray) -> None:
    """Weld the joints ``names`` at the postures ``hold`` (k,) rad or m: each joint's body gets the
    pose relative to its parent that the posture gives it, and the joint (and any equality
    constraint naming it) is deleted."""
    model = spec.compile()
    data = mujoco.MjData(model)
    for name, value in zip(names, hold):
        data.qpos[model.joint(name).qposadr[0]] = value
    mujoco.mj_kinematics(model, data)
    for name in names:
        body_id = int(model.jnt_bodyid[model.joint(name).id])
        parent = int(model.body_parentid[body_id])
        to_parent = np.empty(4)
        mujoco.mju_negQuat(to_parent, data.xquat[parent])
        pos, quat = np.empty(3), np.empty(4)
        mujoco.mju_rotVecQuat(pos, data.xpos[body_id] - data.xpos[parent], to_parent)
        mujoco.mju_mulQuat(quat, to_parent, data.xquat[body_id])
        body = spec.body(model.body(body_id).name)
        body.pos, body.quat = pos, quat
        body.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
        for eq in list(spec.equalities):
            if name in (eq.name1, eq.name2):
                spec.delete(eq)
        spec.delete(spec.joint(name))


def _add_environment(spec: mujoco.MjSpec) -> None:
    """A floor, a light and a sky for a model that brings none (no geom named 'floor'), as the
    built-in robots' own: a 6 m x 6 m grid floor at z = 0 that every default geom and the robot
    collide with, a directional light from above and a gradient sky."""
    if spec.geom("floor") is not None:
        return
    spec.add_texture(name="episodic_sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
                     builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT, rgb1=[0.6, 0.75, 0.9], rgb2=[0.1, 0.15, 0.2],
                     width=256, height=256)
    spec.add_texture(name="episodic_grid", type=mujoco.mjtTexture.mjTEXTURE_2D,
                     builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, rgb1=[0.32, 0.34, 0.36],
                     rgb2=[0.26, 0.28, 0.3], width=512, height=512, mark=mujoco.mjtMark.mjMARK_EDGE,
                     markrgb=[0.5, 0.5, 0.5])
    material = spec.add_material(name="episodic_floor", texrepeat=[8, 8], reflectance=0.05)
    material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "episodic_grid"
    spec.worldbody.add_light(name="episodic_sun", pos=[0, -1.5, 4], dir=[0, 0.35, -1],
                             type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, diffuse=[0.8, 0.8, 0.8])
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[3, 3, 0.05],
                            material="episodic_floor")


def passive_mask(robot: Robot, names: Iterable[str]) -> np.ndarray:
    """(n_dofs,) bool: true for the robot joints ``names``; ValueError names one the robot lacks."""
    unknown = [name for name in names if name not in robot.joint_names]
    if unknown:
        raise ValueError(f"the robot '{robot.name}' has no joint {', '.join(map(repr, unknown))}; "
                         f"its joints: {', '.join(robot.joint_names)}")
    return np.isin(np.array(robot.joint_names), list(names))


def _add_controller(spec: mujoco.MjSpec, robot: Robot, passive: np.ndarray) -> None:
    for i, name in enumerate(robot.joint_names):
        act = spec.add_actuator(name=f"ctrl/{name}", target=name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.gainprm[0] = 0.0 if passive[i] else 1.0
        act.biasprm[:3] = [0.0, 0.0, 0.0] if passive[i] else [0.0, -robot.kp[i], -robot.kd[i]]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        spec.add_sensor(name=f"u/{name}", type=mujoco.mjtSensor.mjSENS_JOINTACTFRC,
                        objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=name)
    extra = robot.extra_joints
    for i, name in enumerate(extra.names):  # held: force kp (hold - q) - kd qd, whatever ctrl is
        act = spec.add_actuator(name=f"hold/{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.gainprm[0] = 0.0
        act.biasprm[:3] = [extra.kp[i] * extra.hold[i], -extra.kp[i], -extra.kd[i]]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
    for suffix, kind in (("pos", mujoco.mjtSensor.mjSENS_FRAMEPOS),
                         ("quat", mujoco.mjtSensor.mjSENS_FRAMEQUAT)):
        spec.add_sensor(name=f"ee_{suffix}", type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE,
                        objname=robot.end_effector_site)


def build_scene(robot: Robot, task: Task) -> Scene:
    """Compile robot + controller + task into a Scene. ``task`` follows episodic.task.Task."""
    task.check_robot(robot)
    substeps = max(robot.substeps, task.substeps)
    dyn_spec = _robot_spec(robot, substeps, frozen=True)
    task.add_tool(dyn_spec, robot)
    dynamics = dyn_spec.compile()
    dynamics.body_gravcomp[:] = 0.0
    # inverse dynamics of the arm alone: joint stops and contacts are the world's business
    dynamics.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT | mujoco.mjtDisableBit.mjDSBL_CONTACT
    if dynamics.nq != robot.n_dofs:
        raise ValueError(f"{robot.mjcf} with the task's tool must have exactly the {robot.n_dofs} robot joints "
                         f"besides those held in [extra_joints]; found nq={dynamics.nq}: list every other joint "
                         f"of the model (gripper fingers, ...) in robot.toml's [extra_joints] hold, with its posture "
                         f"(`episodic robots add MODEL` does this; docs/robots.md)")

    passive = passive_mask(robot, task.passive_joints)
    spec = _robot_spec(robot, substeps)
    task.add_tool(spec, robot)
    _add_controller(spec, robot, passive)
    _add_environment(spec)
    task.add_scene(spec, robot)
    model = spec.compile()
    xml = spec.to_xml()  # (passive joints' actuator force range [0, 0] is set below: the compiler refuses it)

    joints = [model.joint(name) for name in robot.joint_names]
    for name, value in zip(robot.extra_joints.names, robot.extra_joints.hold):
        model.qpos0[model.joint(name).qposadr[0]] = value  # where an exact start puts a held joint
    sensors = {}
    for i in range(model.nsensor):
        s = model.sensor(i)
        sensors[s.name] = slice(int(s.adr[0]), int(s.adr[0] + s.dim[0]))
    scene = Scene(
        robot=robot,
        model=model,
        dynamics=dynamics,
        qpos_adr=np.array([int(j.qposadr[0]) for j in joints]),
        dof_adr=np.array([int(j.dofadr[0]) for j in joints]),
        actuator=np.array([model.actuator(f"ctrl/{n}").id for n in robot.joint_names]),
        arm_bodies=np.flatnonzero(model.body_gravcomp > 0),
        sensors=sensors,
        xml=xml,
        substeps=substeps,
        joint=np.array([j.id for j in joints]),
        passive=passive,
    )
    scene.set_passive(model, passive)
    return scene
