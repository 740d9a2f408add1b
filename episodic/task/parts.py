"""Scene parts that task modules share: a tool on the flange (:func:`add_tool_body`), a free ball
(:func:`add_free_ball`, :func:`place_free_ball`), a target marker (:func:`add_target`,
:func:`place_target`), frame sensors (:func:`add_frame_sensors`), and what task code reads of a
state (:func:`update_kinematics`, :func:`body_velocity`)."""
from __future__ import annotations

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.task.contract import Ids

TARGET = "target"  # the target marker's mocap body, and the prefix of its position sensor


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

