"""Where a robot is and how far it reaches (:class:`RobotFrame`), so a task can place its scene in
the robot's frame: a task's scene numbers are given for the WAM (the robot the benchmark's
scenarios were written for), and :meth:`RobotFrame.from_wam` moves a point of them to the same
place relative to another robot's base, scaled to its reach. For the WAM it is the point itself,
so the WAM's scenes keep their numbers exactly. What a task asks of a robot (joints, reach, a
hinge) is :class:`Needs`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import mujoco
import numpy as np

from episodic.interface.robot import Robot, load_robot
from episodic.task.kinematics import SiteIK

REFERENCE_ROBOT = "wam"  # the robot whose frame the tasks' scene numbers are given in
_PLACED: dict[tuple, str] = {}  # Needs.placed's answers, by test and robot (a process asks again and again)
REACH_SAMPLES = 4096  # postures RobotFrame samples for an arm's reach (0.08 s)


def arm_reach(model: mujoco.MjModel, joint_names: tuple[str, ...], site_name: str) -> tuple[np.ndarray, float]:
    """The anchor (3,) m of the arm's first joint (of ``joint_names``, the robot's), fixed in the
    world, and a bound m of the distance of the end-effector site ``site_name`` from it in any
    posture: the lengths of the offsets along the chain from that joint to the site added up (no
    posture can make the chain longer)."""
    joints = [model.joint(name) for name in joint_names]
    first = joints[0]
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    site = model.site(site_name)
    radius, body = float(np.linalg.norm(site.pos)), int(site.bodyid[0])
    while body != int(first.bodyid[0]) and body > 0:
        radius += float(np.linalg.norm(model.body_pos[body]))
        body = int(model.body_parentid[body])
    radius += float(np.linalg.norm(first.pos)) + sum(float(np.linalg.norm(j.pos)) for j in joints[1:])
    return data.xanchor[first.id].copy(), radius


@dataclass(frozen=True)
class RobotFrame:
    """A robot's base and reach, from its model alone (no task's tool) at its home posture.

    anchor (3,) m: the first joint's anchor in the world; rotation (3, 3): the robot's facing,
    its axes in world coordinates: the base's orientation (of the body the first joint moves,
    at every joint angle 0) turned about the base's z axis until its x axis points from the
    anchor towards the flange at home; flange (3,) m: the end-effector site at home; reach m: the
    farthest the site is from the anchor over REACH_SAMPLES postures drawn uniformly within the
    joint range (seeded: the same every time; a little short of the true reach, alike for every
    arm). A scene placed relative to the anchor and this facing keeps its place relative to where
    the arm starts. last_axis (3,): the last joint's axis in the frame of the body that holds the
    end-effector site (a tool is bolted to that body)."""

    robot: str
    anchor: np.ndarray
    rotation: np.ndarray
    flange: np.ndarray
    reach: float
    last_axis: np.ndarray

    @classmethod
    def of(cls, robot: Robot) -> RobotFrame:
        """The frame of ``robot`` (computed once per robot folder and home posture)."""
        return _frame(robot.name, str(robot.mjcf), robot.sha256, robot.joint_names, robot.end_effector_site,
                      tuple(robot.home.tolist()), tuple(robot.range_lower.tolist()), tuple(robot.range_upper.tolist()))

    def is_reference(self) -> bool:
        """Whether this is the frame of the robot the scene numbers are given for (the WAM)."""
        wam = reference_frame()
        return (self.robot == wam.robot and self.reach == wam.reach and np.array_equal(self.anchor, wam.anchor)
                and np.array_equal(self.rotation, wam.rotation))

    def from_wam(self, point: np.ndarray) -> np.ndarray:
        """``point`` (3,) m of a scene placed for the WAM, moved to the same place relative to
        this robot's anchor and facing, its offset from the anchor turned with the facing and
        scaled by the ratio of the reaches; the point itself (a copy) on the WAM."""
        point = np.asarray(point, float)
        if self.is_reference():
            return point.copy()
        wam = reference_frame()
        offset = wam.rotation.T @ (point - wam.anchor)
        return self.anchor + self.reach / wam.reach * (self.rotation @ offset)

    def direction_from_wam(self, direction: np.ndarray) -> np.ndarray:
        """A direction (3,) of a WAM scene turned with this robot's facing (itself on the WAM)."""
        direction = np.asarray(direction, float)
        if self.is_reference():
            return direction.copy()
        return self.rotation @ (reference_frame().rotation.T @ direction)


@cache
def _frame(name: str, mjcf: str, sha256: str, joints: tuple[str, ...], site: str, home: tuple[float, ...],
           lower: tuple[float, ...], upper: tuple[float, ...]) -> RobotFrame:
    model = mujoco.MjSpec.from_file(mjcf).compile()
    data = mujoco.MjData(model)
    first = model.joint(joints[0])
    mujoco.mj_kinematics(model, data)  # the base's pose, every joint at 0
    base = data.xmat[int(first.bodyid[0])].reshape(3, 3).copy()
    for joint, q in zip(joints, home):
        data.qpos[model.joint(joint).qposadr[0]] = q
    mujoco.mj_kinematics(model, data)
    anchor, _ = arm_reach(model, joints, site)
    reach = _farthest(model, joints, site, anchor, lower, upper)
    flange = data.site(site).xpos.copy()
    x, y, _ = base.T @ (flange - anchor)  # the flange in the base's frame
    heading = np.arctan2(y, x)
    turn = np.array([[np.cos(heading), -np.sin(heading), 0.0], [np.sin(heading), np.cos(heading), 0.0],
                     [0.0, 0.0, 1.0]])
    last = model.joint(joints[-1])
    holder = int(model.site(site).bodyid[0])
    axis = data.xmat[holder].reshape(3, 3).T @ data.xmat[int(last.bodyid[0])].reshape(3, 3) @ last.axis
    return RobotFrame(name, anchor, base @ turn, flange, reach, axis)


def _farthest(model: mujoco.MjModel, joints: tuple[str, ...], site: str, anchor: np.ndarray,
              lower: tuple[float, ...], upper: tuple[float, ...]) -> float:
    """m, the largest distance of ``site`` from ``anchor`` over REACH_SAMPLES postures drawn
    uniformly within the joint range [lower, upper] (a generator seeded with 0)."""
    data = mujoco.MjData(model)
    adr = [model.joint(name).qposadr[0] for name in joints]
    site_id, farthest = model.site(site).id, 0.0
    for q in np.random.default_rng(0).uniform(lower, upper, (REACH_SAMPLES, len(joints))):
        data.qpos[adr] = q
        mujoco.mj_kinematics(model, data)
        farthest = max(farthest, float(np.linalg.norm(data.site_xpos[site_id] - anchor)))
    return farthest


@cache
def reference_frame() -> RobotFrame:
    """The WAM's frame: the one the tasks' scene numbers are given in."""
    return RobotFrame.of(load_robot(REFERENCE_ROBOT))


@dataclass(frozen=True)
class Needs:
    """What a task asks of a robot; :meth:`Task.check_robot` refuses one that lacks it and
    `episodic tasks` shows it per robot.

    dofs: the fewest arm joints; reach m: the least reach (RobotFrame.reach); hinge: a robot
    joint (name) the task uses as a hinge ("" none); robots: the robots the task is tied to (()
    any robot that has the rest), why: the reason it is tied to them; flange_hinge: the last
    joint must turn about the z axis of the body holding the end-effector site (the axis a tool
    bolted along the flange turns about); placed: the task's own test of a robot that the rest
    cannot make (e.g. whether inverse kinematics puts its tool where its scene needs it), which
    returns why the robot does not suit ("" when it does), and placed_doc what it asks in a few
    words (None, "": no such test)."""

    dofs: int = 1
    reach: float = 0.0
    hinge: str = ""
    flange_hinge: bool = False
    robots: tuple[str, ...] = ()
    why: str = ""
    placed: Callable[[Robot], str] | None = None
    placed_doc: str = ""

    def unmet(self, robot: Robot) -> str:
        """Why ``robot`` does not suit the task ("" when it does)."""
        if self.robots and robot.name not in self.robots:
            return f"built for the {' or '.join(self.robots)} robot only: {self.why}"
        if robot.n_dofs < self.dofs:
            return f"needs {self.dofs} arm joints, '{robot.name}' has {robot.n_dofs}"
        if self.hinge and self.hinge not in robot.joint_names:
            return f"needs the wrist joint '{self.hinge}' as a hinge, which '{robot.name}' lacks"
        axis = RobotFrame.of(robot).last_axis
        if self.flange_hinge and abs(axis[2]) < 1 - 1e-9:
            return (f"needs its last joint to turn about the flange's z axis (a tool is bolted along it); "
                    f"{robot.name}'s {robot.joint_names[-1]} turns about {np.round(axis, 3).tolist()} of the "
                    f"flange's frame")
        if self.reach > 0 and RobotFrame.of(robot).reach < self.reach:
            return f"needs a reach of {self.reach:g} m, '{robot.name}' reaches {RobotFrame.of(robot).reach:.2f} m"
        if self.placed is None:
            return ""
        key = (self.placed, robot.name, robot.sha256, robot.mjcf, robot.home.tobytes(), robot.range_lower.tobytes(),
               robot.range_upper.tobytes(), robot.velocity_limit.tobytes(), robot.torque_limit.tobytes())
        if key not in _PLACED:  # the task's own test may take seconds (inverse kinematics along a path)
            _PLACED[key] = self.placed(robot)
        return _PLACED[key]

    def describe(self) -> str:
        """One line: the needs as `episodic tasks` shows them."""
        if self.robots:
            return f"the {' or '.join(self.robots)} robot ({self.why})"
        parts = [f"{self.dofs}+ arm joints"] + ([f"reach {self.reach:g} m"] if self.reach else []) \
            + ([f"wrist hinge '{self.hinge}'"] if self.hinge else []) \
            + (["the last joint turning about the flange's axis"] if self.flange_hinge else []) \
            + ([self.placed_doc] if self.placed_doc else [])
        return ", ".join(parts)


def tool_ik(robot: Robot, add_tool: Callable[[mujoco.MjSpec, Robot], None], site: str) -> SiteIK:
    """Inverse kinematics of ``site`` (a site of a task's tool) on ``robot`` with the tool that
    ``add_tool`` (a task's :meth:`add_tool`) mounts on its flange, and no scene."""
    spec = mujoco.MjSpec.from_file(str(robot.mjcf))
    add_tool(spec, robot)
    model = spec.compile()
    joints = [model.joint(name) for name in robot.joint_names]
    return SiteIK(model, site, [j.qposadr[0] for j in joints], [j.dofadr[0] for j in joints],
                  robot.range_lower, robot.range_upper)


def easiest_posture(ik: SiteIK, robot: Robot, position: np.ndarray, normal: np.ndarray, twist: np.ndarray,
                    speed: float, acceleration: float = 0.0, seeds: int = 64, margin: float = 0.2,
                    clearance: tuple[float, float] = (0.0, 0.0), travel: float = 0.0) -> np.ndarray | None:
    """A posture (n_dofs,) rad putting ``ik``'s site at ``position`` (3,) m with its x axis along
    ``normal`` (3,), not against it, and at least ``margin`` rad from every joint's limits (room
    to move): of the inverse kinematics solutions from the robot's home and ``seeds`` postures
    drawn uniformly within its joint range (a generator seeded with 0; each solve at most 100
    iterations: a start that needs more is dropped), the one that best moves
    the site along ``twist`` (6,: a unit motion, m and rad) at ``speed`` (per s) and accelerates it
    along it at +-``acceleration`` (per s^2): the least of the larger of the joint rates (least
    squares) over the velocity limits and the torques (gravity and the accelerated joints'
    inertia, the arm at rest) over the torque limits, on any joint. ``clearance`` (radius m,
    height m): the cylinder of that size over the site along ``normal`` is free of the robot's
    geoms (rays along its axis and its edge: room for a ball over a racket's face); ``travel`` m:
    the score is the worst of the posture's and those of the postures that move the site that far
    along ``twist`` either way (a stroke's ends). None when no start reaches it (error 1e-6) with
    that room."""
    best, lowest = None, np.inf
    starts = np.vstack([robot.home, np.random.default_rng(0).uniform(robot.range_lower, robot.range_upper,
                                                                     (seeds, robot.n_dofs))])
    for start in starts:
        q, error = ik.solve(start, position, normal, iterations=100)
        if (error > 1e-6 or ik.pose(q)[1] @ normal < 0  # not there, or the x axis against the normal
                or np.any(q < robot.range_lower + margin) or np.any(q > robot.range_upper - margin)
                or not _clear(ik, position, normal, *clearance)):
            continue
        ratio = max(map(np.max, stroke_shares(ik, robot, q, twist, speed, acceleration)))
        for offset in (-travel, travel) if travel > 0 else ():
            moved, error = ik.solve(q, position + offset * twist[:3], normal, iterations=100)
            ratio = max(ratio, max(map(np.max, stroke_shares(ik, robot, moved, twist, speed, acceleration)))
                        if error < 1e-6 else np.inf)
        if ratio < lowest:
            best, lowest = q, ratio
    return best


def stroke_shares(ik: SiteIK, robot: Robot, q: np.ndarray, twist: np.ndarray, speed: float,
                  acceleration: float) -> tuple[np.ndarray, np.ndarray]:
    """The shares (n_dofs,) of each joint's velocity and torque limits that posture ``q`` (n_dofs,)
    rad needs to move ik's site along ``twist`` (6,: a unit motion) at ``speed`` (per s: the joint
    rates by least squares) and to hold the arm at rest and accelerate the site along it at
    +-``acceleration`` (per s^2: gravity plus the mass matrix times those rates' accelerations)."""
    rates = np.linalg.lstsq(ik.jacobian(q), twist, rcond=None)[0]
    mujoco.mj_forward(ik.model, ik.data)  # qvel 0: the bias force is gravity alone
    mass = np.zeros((ik.model.nv, ik.model.nv))
    mujoco.mj_fullM(ik.model, ik.data, mass)
    gravity, inertia = ik.data.qfrc_bias[ik.dof_adr], mass[np.ix_(ik.dof_adr, ik.dof_adr)] @ rates * acceleration
    torque = np.maximum(np.abs(gravity + inertia), np.abs(gravity - inertia))
    return np.abs(rates) * speed / robot.velocity_limit, torque / robot.torque_limit


def _clear(ik: SiteIK, position: np.ndarray, normal: np.ndarray, radius: float, height: float) -> bool:
    """Whether rays of ``height`` m along ``normal`` (3,) from ``position`` (3,) m and from 8
    points ``radius`` m around it meet no geom but the site's body's (ik's kinematics current)."""
    if height <= 0:
        return True
    side = np.cross(normal, [1.0, 0.0, 0.0] if abs(normal[0]) < 0.9 else [0.0, 1.0, 0.0])
    side /= np.linalg.norm(side)
    other = np.cross(normal, side)
    body, hit = int(ik.model.site_bodyid[ik.site]), np.zeros(1, np.int32)
    angles = np.linspace(0.0, 2 * np.pi, 8, endpoint=False)
    for start in [position] + [position + radius * (np.cos(a) * side + np.sin(a) * other) for a in angles]:
        distance = mujoco.mj_ray(ik.model, ik.data, start, normal, None, 0, body, hit)
        if 0 <= distance < height:
            return False
    return True


def posture_along(ik: SiteIK, q0: np.ndarray, position: np.ndarray, normal: np.ndarray, steps: int = 20,
                  axis: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """The posture (n_dofs,) rad reached from ``q0`` by moving ``ik``'s site along the straight
    line to ``position`` (3,) m, its x axis (or the direction ``axis`` (3,) of its frame) turned
    evenly to ``normal`` (3,), by inverse kinematics at ``steps`` points of the way, each from the
    last: small steps, which keep to q0's branch of the solutions where one solve over a long way
    may jump to another; returns it and the remaining error (m + rad, as :meth:`SiteIK.solve`)."""
    start, turned = ik.pose(q0, axis)
    turned = turned if turned @ normal >= 0 else -turned
    q, error = np.asarray(q0, float), np.inf
    for s in np.linspace(0.0, 1.0, steps + 1)[1:]:
        direction = (1 - s) * turned + s * np.asarray(normal, float)
        q, error = ik.solve(q, (1 - s) * start + s * np.asarray(position, float),
                            direction / np.linalg.norm(direction), iterations=1000, axis=axis)
    return q, error


def least_share_rates(jacobian: np.ndarray, twist: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """Joint rates (n_dofs,) rad/s that give ``jacobian`` (m, n_dofs) the motion ``twist`` (m,)
    with the smallest largest share of the joints' velocity ``limits`` (n_dofs,) rad/s (a linear
    program over the rates and that share); ValueError when no rates give it."""
    from scipy.optimize import linprog  # SciPy's optimizers take a second to import: only here
    n = len(limits)
    bounds = np.hstack([np.vstack([np.eye(n), -np.eye(n)]), -np.concatenate([limits, limits])[:, None]])
    result = linprog(np.append(np.zeros(n), 1.0), A_ub=bounds, b_ub=np.zeros(2 * n),
                     A_eq=np.hstack([jacobian, np.zeros((len(twist), 1))]), b_eq=twist, bounds=[(None, None)] * (n + 1))
    if not result.success:
        raise ValueError(f"no joint rates give the motion {np.round(twist, 3).tolist()}: {result.message}")
    return result.x[:n]


def flange_extent(robot: Robot) -> float:
    """m, how far the robot's own colliding geoms (on the body holding its end-effector site and
    the bodies it carries: a hand, fingers, a flange plate) reach beyond the site along the site's
    z axis (the flange's axis, where a tool points), their bounding boxes at every joint angle 0;
    -inf when it holds none. A tool that must stay clear of them starts that far out."""
    return _flange_extent(str(robot.mjcf), robot.sha256, robot.end_effector_site)


@cache
def _flange_extent(mjcf: str, sha256: str, site: str) -> float:
    model = mujoco.MjSpec.from_file(mjcf).compile()
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    holder = int(model.site(site).bodyid[0])
    axis, origin = data.site(site).xmat.reshape(3, 3)[:, 2], data.site(site).xpos
    carried = {holder}
    for body in range(holder + 1, model.nbody):  # bodies come after their parents
        if int(model.body_parentid[body]) in carried:
            carried.add(body)
    extent = -np.inf
    for geom in range(model.ngeom):
        colliding = model.geom_contype[geom] or model.geom_conaffinity[geom]
        if int(model.geom_bodyid[geom]) not in carried or not colliding:
            continue
        frame = data.geom_xmat[geom].reshape(3, 3)
        centre, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
        reach = (data.geom_xpos[geom] + frame @ centre - origin) @ axis + np.abs(frame.T @ axis) @ half
        extent = max(extent, float(reach))
    return extent
