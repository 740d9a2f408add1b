"""``episodic robots add``: a robot folder (robot.toml, robot.xml, assets/) from an MJCF or URDF model.

The model is taken as it comes and every change is printed: MuJoCo compiles a URDF
(``mujoco.MjSpec.from_file``) once its ``package://`` mesh paths are resolved the way ROS lays
packages out (the package is a folder of that name above the URDF, or under ``ROS_PACKAGE_PATH``);
the model's own actuators are removed (the runner drives the joints itself: never both), a
keyframe becomes the home posture, ``<option>``, sensors, lights, a ground plane and a sky are
dropped (the scene supplies floor, light and sky for every robot), equality constraints are dropped
(the joints they couple are held), and the robot's collision geoms get the built-in robots'
convention (contype 2, conaffinity 1: never with each other, always with the floor and the tasks'
objects; ``episodic robots check`` looks for self-collision at home). A free or ball joint at the
base, a missing mesh or a missing limit is refused with the fix.

The arm is the chain of hinge and slide joints from the world to the end effector (``--joints``
chooses them); every other joint (gripper fingers, ...) is held at a posture of its own
(robot.toml's ``[extra_joints]``). Limits come from the model (URDF ``<limit effort velocity>``,
MJCF ``actuatorfrcrange`` or the removed actuators' force range) or the options. Gains are derived,
not chosen: a PD of bandwidth ``BANDWIDTH_HZ`` and damping ratio ``DAMPING_RATIO`` on the joint-space
inertia at home, capped so that a ``MAX_START_JUMP`` step stays within ``TORQUE_SHARE`` of the torque
limit, and the physics substeps are the fewest with which the control loop is numerically stable
(the spectral radius of MuJoCo's linearized step below 1). docs/robots.md describes the folder.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from episodic.interface.robot import SETTINGS_FILE, Robot, RobotError, load_robot, user_robots_dir
from episodic.runtime.scene import Scene, build_scene

MODEL_FILE = "robot.xml"
ASSETS = "assets"
CONTROL_RATE = 500.0  # Hz, the built-in robots' control rate (robots/wam/robot.toml)
# The derived PD: closed-loop natural frequency 2 pi BANDWIDTH_HZ on each joint's inertia at home
# (the mass matrix's diagonal, armature included), critically damped. 5 Hz is a hundredth of the
# control rate, so the loop is far from its sampling limit, and a minimum-jerk move at the goto
# accelerations below (at most 2 rad/s^2) lags by about a / omega^2 = 2 mrad, the goto tolerance.
BANDWIDTH_HZ = 5.0
DAMPING_RATIO = 1.0
# A segment may start MAX_START_JUMP rad from the held posture (robot.toml's safety.max_start_jump, as
# the PUMA's): kp is capped so that such a step asks at most TORQUE_SHARE of the joint's torque limit,
# leaving the rest for gravity, which the plant compensates within the same limit.
MAX_START_JUMP = 0.05
TORQUE_SHARE = 0.5
GOTO_VELOCITY_SHARE = 1 / 3  # goto.max_velocity: a third of the velocity limit, as the built-in robots
GOTO_ACCELERATION = 2.0  # rad/s^2, the built-in robots' smallest goto.max_acceleration
GOTO_ACCELERATION_TORQUE_SHARE = 0.1  # ... or what a tenth of the torque limit gives at home, if less
SUBSTEPS = (1, 2, 4, 8, 16)  # tried in turn: the fewest with which the loop is stable
CONTINUOUS_RANGE = 2 * math.pi  # rad either way for a joint the model leaves unlimited
HOME_SEARCH = 200  # random postures tried for a collision-free home when the model has no keyframe
# deeper than this counts as a collision, m: MuJoCo reports touching geoms (closed fingers) at ~1e-5 m
PENETRATION = 1e-3


ARM_TYPES = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))  # joints an arm is made of


# the <option> fields an imported model's are reset from (to MuJoCo's defaults)
OPTIONS = ("timestep", "integrator", "impratio", "tolerance", "gravity", "wind", "magnetic", "density", "viscosity",
           "cone", "jacobian", "solver", "iterations", "noslip_iterations", "disableflags", "enableflags", "o_margin",
           "o_solref", "o_solimp", "ccd_iterations")


class RobotImportError(ValueError):
    """The model cannot be imported as it is; the message names the fix."""


@dataclass
class Imported:
    """What ``import_robot`` wrote: the folder and the notices it printed."""

    folder: Path
    notices: list[str] = field(default_factory=list)


# -- URDF ---------------------------------------------------------------------------------------
def _package_roots() -> list[Path]:
    return [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]


def resolve_mesh(filename: str, urdf: Path) -> Path:
    """The file a URDF mesh ``filename`` names: ``package://NAME/rest`` is ``rest`` inside the folder
    NAME found above the URDF's folder (or inside it, or under ROS_PACKAGE_PATH), ``file://`` and
    relative paths are files. RobotImportError names the mesh and where it looked."""
    if filename.startswith("file://"):
        filename = filename[len("file://"):]
    if not filename.startswith("package://"):
        path = (urdf.parent / filename).resolve()
        if path.is_file():
            return path
        raise RobotImportError(f"{urdf}: mesh {filename} not found (looked for {path}); put it there or fix the "
                               f"filename in the URDF")
    package, _, rest = filename[len("package://"):].partition("/")
    tried = []
    for folder in [*urdf.resolve().parents, *_package_roots()]:
        for candidate in ((folder / rest) if folder.name == package else None, folder / package / rest):
            if candidate is not None:
                tried.append(candidate)
                if candidate.is_file():
                    return candidate
    raise RobotImportError(f"{urdf}: mesh {filename} not found: no folder '{package}' holding {rest} above the URDF "
                           f"or under ROS_PACKAGE_PATH (looked at {tried[0]} and {len(tried) - 1} more places); "
                           f"put the package '{package}' beside the URDF's package or add its parent folder to "
                           f"ROS_PACKAGE_PATH")


def _read_urdf(path: Path, notices: list[str]) -> tuple[mujoco.MjSpec, dict[str, float]]:
    """The URDF at ``path`` compiled by MuJoCo, with its mesh paths resolved, and the velocity limits
    of its ``<limit>`` elements (joint name -> rad/s or m/s)."""
    root = ET.parse(path).getroot()
    floating = [(j.get("name"), j.get("type")) for j in root.iter("joint") if j.get("type") in ("floating", "planar")]
    if floating:
        raise RobotImportError(f"{path}: the joint {floating[0][0]} is {floating[0][1]}: an arm's "
                               f"base must be fixed to the world; make it a fixed joint (or remove it and the "
                               f"world link) and import again")
    dropped = 0
    for link in root.iter("link"):
        for visual in list(link.findall("visual")):
            link.remove(visual)  # MuJoCo would discard them anyway (its URDF default): the collision geometry shows
            dropped += 1
        for collision in link.findall("collision"):
            mesh = collision.find("geometry/mesh")
            if mesh is None:
                continue
            file = resolve_mesh(mesh.get("filename", ""), path)
            if file.suffix.lower() not in (".stl", ".obj", ".msh"):
                raise RobotImportError(f"{path}: the collision mesh {file} is {file.suffix}, which MuJoCo cannot "
                                       f"read; convert it to STL or OBJ (e.g. with meshlab or trimesh) and point "
                                       f"the URDF at it")
            mesh.set("filename", str(file))
    if dropped:
        notices.append(f"{dropped} URDF <visual> elements not imported (MuJoCo cannot read their .dae meshes, "
                       f"and drops visuals of a URDF): the collision geometry is what is simulated and shown")
    velocity = {}
    for joint in root.iter("joint"):
        limit = joint.find("limit")
        if limit is not None and limit.get("velocity") is not None and float(limit.get("velocity", 0)) > 0:
            velocity[joint.get("name", "")] = float(limit.get("velocity", 0))
    mj = root.find("mujoco")
    if mj is None:
        mj = ET.SubElement(root, "mujoco")
    compiler = mj.find("compiler")
    if compiler is None:
        compiler = ET.SubElement(mj, "compiler")
    compiler.attrib.update(strippath="false", fusestatic="false", discardvisual="true")
    with tempfile.TemporaryDirectory() as tmp:
        converted = Path(tmp) / path.name
        ET.ElementTree(root).write(converted)
        try:
            spec = mujoco.MjSpec.from_file(str(converted))
        except ValueError as exc:
            raise RobotImportError(f"{path}: MuJoCo cannot read this URDF: {exc}") from None
    return spec, velocity


# -- models as they come ---------------------------------------------------------------------------
def _limited(flag: int, bounds: np.ndarray) -> bool:
    """Whether a force or control range is in force: limited="true", or "auto" with a range given."""
    return flag == mujoco.mjtLimited.mjLIMITED_TRUE or (
        flag == mujoco.mjtLimited.mjLIMITED_AUTO and bool(bounds[0] < bounds[1]))


def _actuator_limits(spec: mujoco.MjSpec) -> dict[str, float]:
    """Force limits N m (or N) the model's actuators state per joint they drive: forcerange, or a
    motor's ctrlrange times its gear."""
    out: dict[str, float] = {}
    for act in spec.actuators:
        if act.trntype != mujoco.mjtTrn.mjTRN_JOINT or not act.target:
            continue
        if _limited(act.forcelimited, act.forcerange):
            out[act.target] = float(np.max(np.abs(act.forcerange)))
        elif act.gaintype == mujoco.mjtGain.mjGAIN_FIXED and act.biastype == mujoco.mjtBias.mjBIAS_NONE \
                and _limited(act.ctrllimited, act.ctrlrange):
            out[act.target] = float(np.max(np.abs(act.ctrlrange)) * abs(act.gear[0]) * act.gainprm[0])
    return out


def _strip(spec: mujoco.MjSpec, notices: list[str]) -> np.ndarray | None:
    """Remove from ``spec`` what the scene supplies or the runner replaces, each with a notice;
    the first keyframe's qpos (nq,) or None."""
    model = spec.compile()
    free = [model.joint(j).name or f"#{j}" for j in range(model.njnt)
            if int(model.jnt_type[j]) not in ARM_TYPES]
    if free:
        raise RobotImportError(f"the model has a free or ball joint ({', '.join(free)}): an arm's base must be "
                               f"fixed to the world; remove the <freejoint/> (or the ball joint) from the base body "
                               f"and import again")
    if spec.actuators:
        notices.append(f"removed the model's {len(spec.actuators)} actuators: the runner drives the joints itself "
                       f"(PD + gravity compensation, gains in robot.toml), never both")
        for act in list(spec.actuators):
            spec.delete(act)
    key = None
    if spec.keys:
        key = np.array(model.key_qpos[0])
        notices.append(f"keyframe '{spec.keys[0].name or 0}' became the home posture; "
                       f"{len(spec.keys)} keyframe(s) dropped (robot.toml holds postures)")
        for k in list(spec.keys):
            spec.delete(k)
    for what, items in (("sensors", spec.sensors), ("lights", spec.lights), ("equality constraints", spec.equalities)):
        if items:
            why = "the joints they couple are held at their postures" if what == "equality constraints" \
                else "the scene adds its own"
            notices.append(f"dropped the model's {len(items)} {what} ({why})")
            for item in list(items):
                spec.delete(item)
    ground = [g for g in spec.worldbody.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE or g.name in ("floor", "ground")]
    sky = [t for t in spec.textures if t.type == mujoco.mjtTexture.mjTEXTURE_SKYBOX]
    if ground or sky:
        notices.append(f"dropped the model's ground and sky ({', '.join(g.name or 'plane' for g in ground + sky)}): "
                       f"the scene supplies floor, light and sky for every robot")
        for item in ground + sky:
            spec.delete(item)
    default = mujoco.MjSpec().option
    changed = [name for name in OPTIONS
               if not np.array_equal(np.asarray(getattr(spec.option, name)), np.asarray(getattr(default, name)))]
    if changed:
        notices.append(f"<option> reset to MuJoCo's defaults ({', '.join(changed)} differed): the scene sets the "
                       f"timestep and integrator, and the tasks' physics assume the defaults")
        for name in changed:
            setattr(spec.option, name, getattr(default, name))
    return key


def _chain(model: mujoco.MjModel) -> list[int]:
    """Joint ids of the arm: from the world, follow the one child whose subtree holds joints, taking
    its hinge and slide joints, until the tree branches (a gripper's fingers) or ends."""
    has_joint = np.zeros(model.nbody, bool)
    for b in range(model.nbody - 1, 0, -1):
        has_joint[b] |= model.body_jntnum[b] > 0
        has_joint[model.body_parentid[b]] |= has_joint[b]
    joints: list[int] = []
    body = 0
    while True:
        moving = [c for c in range(1, model.nbody) if model.body_parentid[c] == body and c != body and has_joint[c]]
        if len(moving) != 1:
            return joints
        body = moving[0]
        start = model.body_jntadr[body]
        joints += [j for j in range(start, start + model.body_jntnum[body]) if int(model.jnt_type[j]) in ARM_TYPES]


def _default_end_body(model: mujoco.MjModel, last: int) -> int:
    """From the last arm link, the deepest body reached through single fixed children (a flange, a
    hand, its tool centre point)."""
    body = last
    while True:
        fixed = [c for c in range(1, model.nbody) if model.body_parentid[c] == body and c != body
                 and model.body_jntnum[c] == 0]
        if len(fixed) != 1:
            return body
        body = fixed[0]


def _descends(model: mujoco.MjModel, body: int, ancestor: int) -> bool:
    while body != ancestor and body != 0:
        body = int(model.body_parentid[body])
    return body == ancestor


def collision_model(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """``spec`` compiled with every collision geom colliding with every other, and a floor at z = 0:
    what shows self-collision and a posture through the floor (a copy; ``spec`` is unchanged)."""
    probe = spec.copy()
    for geom in probe.geoms:
        if geom.contype or geom.conaffinity:
            geom.contype, geom.conaffinity = 1, 1
    if probe.geom("floor") is None:
        probe.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[3, 3, 0.05])
    for act in list(probe.actuators):
        probe.delete(act)
    return probe.compile()


def collisions(model: mujoco.MjModel, qpos: np.ndarray) -> list[tuple[str, str, float]]:
    """Contacts (body, body, penetration m) at ``qpos`` (nq,) in a collision_model between bodies that
    are not welded together or parent and child (whose geoms touch by design)."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    weld, parent = model.body_weldid, model.body_parentid
    out = []
    for c in data.contact[: data.ncon]:
        a, b = int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2])
        wa, wb = int(weld[a]), int(weld[b])
        neighbours = 0 not in (wa, wb) and (weld[parent[wa]] == wb or weld[parent[wb]] == wa)
        if c.dist >= -PENETRATION or wa == wb or neighbours:
            continue
        if 0 in (wa, wb) and model.geom(c.geom1).name != "floor" and model.geom(c.geom2).name != "floor":
            continue  # the fixed base on its own mount
        out.append((model.body(a).name or "world", model.body(b).name or "world", float(-c.dist)))
    return out


def _find_home(probe: mujoco.MjModel, qpos: np.ndarray, adr: np.ndarray, lower: np.ndarray,
               upper: np.ndarray) -> np.ndarray:
    """A collision-free posture (nq,) from ``qpos`` (nq,), the arm's joints (qpos addresses ``adr``)
    within [lower, upper] rad: ``qpos`` clamped into the ranges, then the ranges' middle, then
    seeded random postures in the middle half of each range (away from the stops, where the report
    card's moves have room)."""
    rng = np.random.default_rng(0)
    candidates = [np.clip(qpos[adr], lower, upper), (lower + upper) / 2]
    candidates += [lower + (upper - lower) * rng.uniform(0.25, 0.75, len(adr)) for _ in range(HOME_SEARCH)]
    for q in candidates:
        full = qpos.copy()
        full[adr] = q
        if not collisions(probe, full):
            return full
    raise RobotImportError("no collision-free home posture found (the model's own posture, the middle of the ranges "
                           f"and {HOME_SEARCH} random ones all collide); give one with --home (or a keyframe in an "
                           "MJCF)")


# -- the folder -------------------------------------------------------------------------------------
def _copy_assets(spec: mujoco.MjSpec, model_dir: Path, folder: Path) -> None:
    """Copy every file the model reads (meshes, textures, height fields) into ``folder``/assets and
    point the model at the copies."""
    (folder / ASSETS).mkdir(parents=True, exist_ok=True)
    taken: dict[str, Path] = {}
    for items, subdir in ((spec.meshes, spec.meshdir), (spec.textures, spec.texturedir), (spec.hfields, spec.meshdir)):
        for item in items:
            if not item.file:
                continue
            source = Path(item.file) if os.path.isabs(item.file) else model_dir / (subdir or "") / item.file
            if not source.is_file():
                raise RobotImportError(f"the model reads {item.file}, which is not at {source}; put it there")
            name = source.name
            while name in taken and taken[name] != source:
                name = f"_{name}"
            taken[name] = source
            shutil.copyfile(source, folder / ASSETS / name)
            item.file = name
    spec.meshdir = ASSETS
    spec.texturedir = ASSETS
    spec.modelfiledir = str(folder)


def _fmt(values: Sequence[float] | np.ndarray) -> str:
    return json.dumps([float(v) for v in values])


def _table(names: Sequence[str], values: Sequence[float] | np.ndarray) -> str:
    return "{" + ", ".join(f"{n} = {float(v)!r}" for n, v in zip(names, values)) + "}"


@dataclass
class _Settings:
    """The numbers robot.toml states, and where each came from (comments)."""

    name: str
    description: str
    joints: list[str]
    site: str
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    torque: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    inertia: np.ndarray
    home: np.ndarray
    substeps: int
    goto_acceleration: np.ndarray
    extra: list[str]
    hold: np.ndarray
    extra_kp: np.ndarray
    extra_kd: np.ndarray
    extra_torque: np.ndarray
    sources: dict[str, str]


def _toml(s: _Settings) -> str:
    omega = 2 * math.pi * BANDWIDTH_HZ
    lines = [
        f"# {s.name}: imported by `episodic robots add` from {s.sources['model']} (docs/robots.md).",
        "# Per-joint arrays are in joint order; angles rad (slide joints m), velocities rad/s, torques N m.",
        "",
        f"description = {json.dumps(s.description)}",
        f'mjcf = "{MODEL_FILE}"',
        "",
        "[joints]",
        f"names = {json.dumps(s.joints)}",
        f'end_effector_site = "{s.site}"   # {s.sources["site"]}',
        "",
        "[limits]",
        f"# ranges: {s.sources['range']}",
        f"range_lower = {_fmt(s.lower)}",
        f"range_upper = {_fmt(s.upper)}",
        f"# {s.sources['velocity']}",
        f"velocity = {_fmt(s.velocity)}",
        f"# {s.sources['torque']}",
        f"torque = {_fmt(s.torque)}",
        "",
        "[gains]",
        f"# Derived (episodic.tools.robot_import): a PD of natural frequency omega = 2 pi {BANDWIDTH_HZ:g} Hz = "
        f"{omega:.4g} rad/s, damping ratio {DAMPING_RATIO:g},",
        "# on each joint's inertia at home (the mass matrix's diagonal with armature, kg m^2: "
        f"{_fmt(np.round(s.inertia, 6))}):",
        "# kp = M omega^2, kd = 2 zeta sqrt(kp M); kp capped so that a max_start_jump step asks at most "
        f"{TORQUE_SHARE:g} of the torque limit.",
        "# `episodic robots check` measures how well they hold and track.",
        f"kp = {_fmt(np.round(s.kp, 6))}",
        f"kd = {_fmt(np.round(s.kd, 6))}",
        f"ki = {_fmt(np.zeros(len(s.joints)))}",
        'feedforward = "gravity_compensation"',
        "",
        "[postures]",
        f"home = {_fmt(s.home)}   # {s.sources['home']}",
        "",
        "[control]",
        f"rate = {CONTROL_RATE}     # Hz, the built-in robots' control rate",
        f"substeps = {s.substeps}     # the fewest physics steps per control step with which the loop is stable "
        "(spectral radius of the linearized step < 1 at home)",
        "",
        "[goto]",
        "# GOTO_START: minimum-jerk move to the start posture within these bounds, then close and slow.",
        f"max_velocity = {_fmt(np.round(s.velocity * GOTO_VELOCITY_SHARE, 6))}   # a third of the velocity limits",
        f"max_acceleration = {_fmt(np.round(s.goto_acceleration, 6))}   # {GOTO_ACCELERATION:g} rad/s^2, or what "
        f"{GOTO_ACCELERATION_TORQUE_SHARE:g} of the torque limit gives on the inertia at home if less",
        "tolerance_q = 0.002    # rad, as the built-in robots",
        "tolerance_qd = 0.01    # rad/s, as the built-in robots",
        "settle_time = 1.0      # s, as the built-in robots",
        "",
        "[safety]",
        f"max_start_jump = {MAX_START_JUMP}   # rad, as the PUMA's; the gains' torque cap uses it",
    ]
    if s.extra:
        lines += [
            "",
            "[extra_joints]",
            "# Joints beyond the arm: not commanded, held at `hold` (rad or m) by a PD of their own, derived as the",
            "# arm's (kp N m/rad or N/m, kd), within their force limit `torque` (from the model).",
            f"# hold: {s.sources['hold']}",
            f"hold = {_table(s.extra, s.hold)}",
            f"kp = {_table(s.extra, np.round(s.extra_kp, 6))}",
            f"kd = {_table(s.extra, np.round(s.extra_kd, 6))}",
            f"torque = {_table(s.extra, s.extra_torque)}",
        ]
    return "\n".join(lines) + "\n"


def _per_joint(value: Sequence[float] | None, n: int, option: str) -> np.ndarray | None:
    if value is None or len(value) == 0:
        return None
    if len(value) not in (1, n):
        raise RobotImportError(f"{option} takes one value or one per arm joint ({n}); got {len(value)}")
    return np.broadcast_to(np.asarray(value, float), (n,)).copy()


def spectral_radius(scene: Scene, robot: Robot) -> float:
    """The largest |eigenvalue| of MuJoCo's linearized physics step (mjd_transitionFD) of ``scene``
    at rest at home under the gains: below 1 when the loop is stable at the scene's timestep."""
    model = scene.model
    data = mujoco.MjData(model)
    data.qpos[scene.qpos_adr] = robot.home
    data.ctrl[scene.actuator] = robot.kp * robot.home
    mujoco.mj_forward(model, data)
    n = 2 * model.nv + model.na
    a = np.zeros((n, n))
    mujoco.mjd_transitionFD(model, data, 1e-6, True, a, None, None, None)
    return float(np.max(np.abs(np.linalg.eigvals(a))))


def _stable_substeps(folder: Path) -> int:
    """The fewest SUBSTEPS with which the robot's scene at home, under its gains, is stable."""
    from episodic.tasks import make_task

    robot = load_robot(str(folder))
    scene = build_scene(robot, make_task("reach", {}))
    for substeps in SUBSTEPS:
        scene.model.opt.timestep = robot.control_dt / substeps
        if spectral_radius(scene, robot) < 1.0:
            return substeps
    raise RobotImportError(f"the control loop is unstable even at {SUBSTEPS[-1]} substeps; lower the gains in "
                           f"{folder / SETTINGS_FILE} (kp, kd) and set [control] substeps by hand")


def import_robot(model_path: str | Path, *, name: str | None = None, joints: Sequence[str] | None = None,
                 end_effector: str | None = None, torque_limit: Sequence[float] | None = None,
                 velocity_limit: Sequence[float] | None = None, hold: dict[str, float] | None = None,
                 home: Sequence[float] | None = None, into: str | Path | None = None, overwrite: bool = False,
                 echo: Callable[[str], object] = print) -> Imported:
    """Write the robot folder of the MJCF or URDF at ``model_path`` into ``into`` (default: the user's
    robot directory) as ``name`` (default: the model file's stem); every change to the model is
    echoed and returned. ``joints``: the arm joints in order (default: the chain from the world to the
    end effector); ``end_effector``: a site, or a body (a site 'ee' is added at its origin);
    ``torque_limit``, ``velocity_limit``: one value or one per arm joint, for a model that states none;
    ``hold``: postures of the joints beyond the arm; ``home``: the arm's home posture (default: the
    model's keyframe, else a collision-free posture found). RobotImportError names what to fix."""
    source = Path(model_path).expanduser().resolve()
    if not source.is_file():
        raise RobotImportError(f"{model_path}: no such file; give the path of an MJCF (.xml) or URDF (.urdf) model")
    notices: list[str] = []

    def notice(text: str) -> None:
        notices.append(text)
        echo(f"notice: {text}")

    name = name or source.stem
    folder = Path(into).expanduser() if into is not None else user_robots_dir()
    folder = folder / name
    if (folder / SETTINGS_FILE).exists() and not overwrite:
        raise RobotImportError(f"{folder} already holds a robot; choose another --name, or --overwrite it")
    is_urdf = source.suffix.lower() == ".urdf"
    found: list[str] = []
    if is_urdf:
        spec, urdf_velocity = _read_urdf(source, found)
    else:
        try:
            spec = mujoco.MjSpec.from_file(str(source))
        except ValueError as exc:
            raise RobotImportError(f"{source}: MuJoCo cannot read this model: {exc}") from None
        urdf_velocity = {}
    actuator_force = _actuator_limits(spec)
    key = _strip(spec, found)
    for text in found:
        notice(text)
    model = spec.compile()
    if model.nq != model.nv:
        raise RobotImportError("the model has joints with more positions than velocities (free or ball); fix the base")
    hinge_slide = [j for j in range(model.njnt) if int(model.jnt_type[j]) in ARM_TYPES]
    if joints:
        unknown = [j for j in joints if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) < 0]
        if unknown:
            raise RobotImportError(f"the model has no joint {', '.join(unknown)}; its joints: "
                                   f"{', '.join(model.joint(j).name for j in hinge_slide)}")
        arm = [model.joint(j).id for j in joints]
    else:
        arm = _chain(model)
    if not arm:
        raise RobotImportError("the model has no hinge or slide joint in a chain from the world; name the arm's "
                               "joints with --joints J1,J2,...")
    if any(model.joint(j).name == "" for j in arm):
        raise RobotImportError("every arm joint needs a name; name the model's joints and import again")
    last = int(model.jnt_bodyid[arm[-1]])
    site_source = "a site of the model"
    if end_effector and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, end_effector) >= 0:
        site, ee_body = end_effector, int(model.site_bodyid[model.site(end_effector).id])
    else:
        if end_effector:
            ee_body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, end_effector)
            if ee_body < 0:
                raise RobotImportError(f"the model has no site or body (URDF link) '{end_effector}'; give one on or "
                                       f"after the last arm link, {model.body(last).name}")
        else:
            ee_body = _default_end_body(model, last)
        taken = {model.site(i).name for i in range(model.nsite)}
        site = next(n for n in ("ee", "ee_site", "episodic_ee") if n not in taken)
        spec.body(model.body(ee_body).name).add_site(name=site, size=[0.01, 0.01, 0.01], group=3)
        site_source = f"added at the origin of {'the body' if end_effector else 'the last link or its fixed tool'} " \
                      f"{model.body(ee_body).name}"
    if not _descends(model, ee_body, last):
        raise RobotImportError(f"the end effector ({end_effector or site}, on {model.body(ee_body).name}) must sit on "
                               f"or after the last arm link {model.body(last).name}; choose another --end-effector "
                               f"or other --joints")
    for geom in spec.geoms:
        if geom.contype or geom.conaffinity:
            geom.contype, geom.conaffinity = 2, 1
    notice("collision geoms set to contype 2, conaffinity 1 (the built-in robots' rule: the arm never collides "
           "with itself, always with the floor and the tasks' objects); `episodic robots check` looks for "
           "self-collision at home")
    model = spec.compile()
    arm_names = [model.joint(j).name for j in arm]
    extra = [j for j in hinge_slide if j not in arm]
    extra_names = [model.joint(j).name for j in extra]
    n = len(arm)
    sources = {"model": source.name, "site": site_source}

    # limits
    limited = model.jnt_limited[arm].astype(bool)
    lower = np.where(limited, model.jnt_range[arm, 0], -CONTINUOUS_RANGE)
    upper = np.where(limited, model.jnt_range[arm, 1], CONTINUOUS_RANGE)
    sources["range"] = "the model's joint ranges"
    if not limited.all():
        unlimited = [arm_names[i] for i in np.flatnonzero(~limited)]
        notice(f"{', '.join(unlimited)} unlimited in the model (continuous): given the range "
               f"[-{CONTINUOUS_RANGE:.4g}, {CONTINUOUS_RANGE:.4g}] rad; edit [limits] if the robot's cables allow less")
        sources["range"] += f"; {', '.join(unlimited)}: unlimited in the model, +-2 pi chosen"
    torque = _per_joint(torque_limit, n, "--torque-limit")
    if torque is not None:
        sources["torque"] = "torque limits given to `episodic robots add --torque-limit`"
    else:
        stated = [float(model.jnt_actfrcrange[j, 1]) if model.jnt_actfrclimited[j]
                  else actuator_force.get(model.joint(j).name, 0.0) for j in arm]
        missing = [arm_names[i] for i, v in enumerate(stated) if v <= 0]
        if missing:
            raise RobotImportError(f"the model states no torque limit for {', '.join(missing)} (URDF <limit effort>, "
                                   f"MJCF actuatorfrcrange or an actuator's forcerange); give them with "
                                   f"--torque-limit T or --torque-limit T1,T2,... (N m, from the arm's data sheet)")
        torque = np.array(stated)
        sources["torque"] = ("the URDF's <limit effort>" if is_urdf else
                             "the model's actuatorfrcrange, else its actuators' force range") + " (N m)"
    velocity = _per_joint(velocity_limit, n, "--velocity-limit")
    if velocity is not None:
        sources["velocity"] = "velocity limits given to `episodic robots add --velocity-limit`"
    else:
        missing = [nm for nm in arm_names if nm not in urdf_velocity]
        if missing:
            raise RobotImportError(f"the model states no velocity limit for {', '.join(missing)} (an MJCF never "
                                   f"does; a URDF in <limit velocity>); give them with --velocity-limit V or "
                                   f"--velocity-limit V1,V2,... (rad/s, from the arm's data sheet)")
        velocity = np.array([urdf_velocity[nm] for nm in arm_names])
        sources["velocity"] = "velocity limits: the URDF's <limit velocity> (rad/s)"
    extra_torque = np.array([float(model.jnt_actfrcrange[j, 1]) if model.jnt_actfrclimited[j]
                             else actuator_force.get(model.joint(j).name, 0.0) for j in extra])
    if np.any(extra_torque <= 0):
        bad = [extra_names[i] for i in np.flatnonzero(extra_torque <= 0)]
        raise RobotImportError(f"the model states no force limit for the held joints {', '.join(bad)}; set their "
                               f"actuatorfrcrange (MJCF) or <limit effort> (URDF), or name them in --joints")

    # postures
    probe = collision_model(spec)
    qpos = np.array(model.qpos0) if key is None else key[: model.nq].copy()
    for i, j in enumerate(extra):
        adr = model.jnt_qposadr[j]
        if hold and extra_names[i] in hold:
            qpos[adr] = hold[extra_names[i]]
        elif key is None and model.jnt_limited[j]:
            qpos[adr] = np.mean(model.jnt_range[j])
    not_extra = set(hold or {}) - set(extra_names)
    if not_extra:
        raise RobotImportError(f"--hold names {', '.join(sorted(not_extra))}, which are not joints beyond the arm "
                               f"({', '.join(extra_names) or 'none'})")
    adr = model.jnt_qposadr[arm]
    if home is not None:
        qpos[adr] = _per_joint(home, n, "--home")
        sources["home"] = "given to `episodic robots add --home`"
    elif key is not None:
        sources["home"] = "the model's keyframe"
    else:
        qpos = _find_home(probe, qpos, adr, lower, upper)
        sources["home"] = ("the first collision-free posture of: the model's zero clamped into the ranges, the "
                           "ranges' middle, seeded random ones in the middle half of the ranges")
    q_home = qpos[adr]
    if np.any(q_home < lower) or np.any(q_home > upper):
        raise RobotImportError(f"the home posture {q_home.tolist()} lies outside the joint ranges; give another "
                               f"with --home")
    sources["hold"] = "given to --hold" if hold else ("the keyframe" if key is not None else
                                                       "the middle of the joint's range")

    # gains
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    inertia = np.diag(full)[model.jnt_dofadr[arm]]
    omega = 2 * math.pi * BANDWIDTH_HZ
    kp = np.minimum(inertia * omega**2, TORQUE_SHARE * torque / MAX_START_JUMP)
    kd = 2 * DAMPING_RATIO * np.sqrt(kp * inertia)
    extra_inertia = np.diag(full)[model.jnt_dofadr[extra]]
    span = np.array([model.jnt_range[j, 1] - model.jnt_range[j, 0] if model.jnt_limited[j] else 1.0 for j in extra])
    extra_kp = np.minimum(extra_inertia * omega**2, extra_torque / np.maximum(span, 1e-9))
    extra_kd = 2 * DAMPING_RATIO * np.sqrt(extra_kp * extra_inertia)
    goto_acceleration = np.minimum(GOTO_ACCELERATION, GOTO_ACCELERATION_TORQUE_SHARE * torque / inertia)

    settings = _Settings(
        name=name, description=f"{model.names[:model.names.index(0)].decode() or name}, imported from {source.name}",
        joints=arm_names, site=site, lower=lower, upper=upper, velocity=velocity, torque=torque, kp=kp, kd=kd,
        inertia=inertia, home=q_home, substeps=1, goto_acceleration=goto_acceleration, extra=extra_names,
        hold=qpos[model.jnt_qposadr[extra]], extra_kp=extra_kp, extra_kd=extra_kd, extra_torque=extra_torque,
        sources=sources)
    if folder.exists() and overwrite:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        _copy_assets(spec, source.parent, folder)
        spec.compile()
        (folder / MODEL_FILE).write_text(spec.to_xml())
        (folder / SETTINGS_FILE).write_text(_toml(settings))
        settings.substeps = _stable_substeps(folder)
        (folder / SETTINGS_FILE).write_text(_toml(settings))
        load_robot(str(folder))
    except (RobotImportError, RobotError, ValueError):
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Imported(folder, notices)
