"""Robot descriptions: a folder holding the settings file ``robot.toml``, its MJCF model and
any meshes the model reads (``assets/``).

Nothing outside a robot's folder holds robot numbers; the runner, controllers and safety checks
read them from a :class:`Robot`. A robot is found by name (docs/robots.md), in this order: a
path to a folder or to its robot.toml; a built-in robot (``robots/`` of the package); a robot in
the user's robot directory (``EPISODIC_ROBOTS``, else the platform's data folder, e.g.
``~/.local/share/episodic/robots``; ``episodic robots add`` writes there); a Python entry point
of the group ``episodic.robots`` (a pip package shipping robots: the value is a module whose
folder holds robot.toml, or a callable returning such a folder).

A loaded Robot records where it was found and the sha256 of every file of its folder, so a
run log names exactly the robot it ran on and a replay elsewhere finds it or says which file is
missing or differs (:func:`load_recorded_robot`).

The model is read as it is, never altered on load: a model with its own actuators, keyframes,
``<option>``, sensors or a free or ball joint is refused with the command that imports it
(``episodic robots add``), which converts it. The reading here is plain XML (this layer loads
no MuJoCo); the scene builder compiles the model.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import os
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from episodic.interface.vocabulary import CommandError, Feedforward

ROBOTS_DIR = Path(__file__).parents[1] / "robots"  # the robots/ folder, installed as episodic.robots
SETTINGS_FILE = "robot.toml"
DEFAULT_ROBOT = "wam"  # the robot a runner (and `episodic serve`) uses when none is named
USER_ROBOTS_ENV = "EPISODIC_ROBOTS"  # a folder of robot folders; else user_robots_dir()'s default
ENTRY_POINT_GROUP = "episodic.robots"
# where a robot was found (Robot.source), in the order load_robot looks
PATH, BUILT_IN, USER, ENTRY_POINT = "path", "built-in", "user", "entry point"


class RobotError(ValueError):
    """A robot's settings file is missing or inconsistent."""


@dataclass(frozen=True)
class GotoSettings:
    """How GOTO_START moves to the start posture (rest-to-rest minimum jerk).

    max_velocity, max_acceleration: (n_dofs,) rad/s, rad/s^2 bounds for the planned motion;
    tolerance_q rad and tolerance_qd rad/s: "close and slow" test; settle_time s: longest
    extra hold after the planned motion before the start counts as reached anyway.
    """

    max_velocity: np.ndarray
    max_acceleration: np.ndarray
    tolerance_q: float
    tolerance_qd: float
    settle_time: float


@dataclass(frozen=True)
class ExtraJoints:
    """Joints of the model beyond the arm (gripper fingers, ...): not commanded by episodes,
    held by the runner at ``hold`` under a PD of their own. Arrays are (k,) in ``names`` order;
    hold rad or m, kp N m/rad or N/m, kd N m s/rad or N s/m, torque N m or N (the held joint's
    force limit)."""

    names: tuple[str, ...] = ()
    hold: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kp: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kd: np.ndarray = field(default_factory=lambda: np.zeros(0))
    torque: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class Robot:
    """One robot: joint names and limits, default gains, home posture, control rate.

    Arrays are (n_dofs,) in joint order; angles rad, velocities rad/s, torques N m.
    """

    name: str
    description: str
    mjcf: Path
    joint_names: tuple[str, ...]
    end_effector_site: str
    range_lower: np.ndarray
    range_upper: np.ndarray
    velocity_limit: np.ndarray
    torque_limit: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray
    feedforward: str
    home: np.ndarray
    control_rate: float
    substeps: int
    goto: GotoSettings
    max_start_jump: float  # rad: a segment may start at most this far from the held posture
    extra_joints: ExtraJoints = field(default_factory=ExtraJoints)
    sl_joint_names: tuple[str, ...] = ()  # SL's names of the joints ([joints] sl_names); () when it has none
    # where it was found: PATH, BUILT_IN, USER or ENTRY_POINT, and the name or path it was asked by
    source: str = BUILT_IN
    spec: str = ""
    # sha256 of each file of the robot's folder (path relative to the folder -> hex digest) and
    # of them all together (robot_sha256): what a replay checks
    files: dict[str, str] = field(default_factory=dict)
    sha256: str = ""

    @property
    def n_dofs(self) -> int:
        return len(self.joint_names)

    @property
    def control_dt(self) -> float:
        """Control period, s."""
        return 1.0 / self.control_rate

    def clamp(self, q: np.ndarray) -> np.ndarray:
        """Desired positions clamped to the joint range (SL's check_range). q: (..., n_dofs) rad."""
        return np.minimum(np.maximum(q, self.range_lower), self.range_upper)  # np.clip's result, 40 % sooner

    def settings_dict(self) -> dict:
        """JSON-ready settings, for run metadata."""
        out = {}
        for key, value in self.__dict__.items():
            if isinstance(value, GotoSettings | ExtraJoints):
                value = {k: _plain(v) for k, v in value.__dict__.items()}
            out[key] = _plain(value)
        return out


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (Path, tuple)):
        return str(value) if isinstance(value, Path) else list(value)
    return value


def available_robots() -> list[str]:
    """Names of the built-in robot folders (robots/ of the package) that hold a settings file."""
    return sorted(p.parent.name for p in ROBOTS_DIR.glob(f"*/{SETTINGS_FILE}"))


def user_robots_dir() -> Path:
    """The user's robot directory: ``$EPISODIC_ROBOTS`` if set, else the platform's data folder
    for episodic (platformdirs), ``robots/`` in it. It need not exist yet."""
    chosen = os.environ.get(USER_ROBOTS_ENV)
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs

    return platformdirs.user_data_path("episodic") / "robots"


@dataclass(frozen=True)
class RobotEntry:
    """One robot that load_robot can find: its name, where it lives (source) and its folder."""

    name: str
    source: str
    folder: Path


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _entry_point_folder(ep: importlib.metadata.EntryPoint) -> Path:
    """The folder an ``episodic.robots`` entry point names: its module's folder, or what its
    callable returns."""
    try:
        value: ModuleType | Callable[[], str | Path] = ep.load()
    except Exception as exc:  # a broken package: say which, not why Python could not import it deep down
        raise RobotError(f"the entry point '{ep.name}' ({ep.value}) of group {ENTRY_POINT_GROUP} cannot be "
                         f"loaded ({type(exc).__name__}: {exc}); reinstall the package that provides it") from None
    if isinstance(value, ModuleType):
        return Path(value.__file__ or "").parent
    return Path(value())


def list_robots() -> list[RobotEntry]:
    """Every robot found by name: built-in, then the user directory, then entry points (a name
    found earlier hides a later one, as in load_robot)."""
    seen: dict[str, RobotEntry] = {}
    for name in available_robots():
        seen[name] = RobotEntry(name, BUILT_IN, ROBOTS_DIR / name)
    user = user_robots_dir()
    if user.is_dir():
        for p in sorted(user.glob(f"*/{SETTINGS_FILE}")):
            seen.setdefault(p.parent.name, RobotEntry(p.parent.name, USER, p.parent))
    for name, ep in sorted(_entry_points().items()):
        if name not in seen:
            try:
                seen[name] = RobotEntry(name, ENTRY_POINT, _entry_point_folder(ep))
            except RobotError:
                seen[name] = RobotEntry(name, ENTRY_POINT, Path(ep.value))
    return list(seen.values())


def is_path(spec: str) -> bool:
    """Whether ``spec`` names a robot by path (it holds a path separator or ends in .toml): a bare
    name is never taken for a folder of the current directory (give ``./NAME`` for that), so a
    folder planted there cannot stand in for a built-in or user robot."""
    return os.sep in spec or "/" in spec or spec.endswith(".toml")


def find_robot(spec: str) -> RobotEntry:
    """Where the robot named ``spec`` lives: a path (it contains a path separator or ends in
    .toml) > built-in > user directory > entry point. RobotError lists what there is otherwise."""
    if is_path(spec):
        path = Path(spec).expanduser().resolve()
        folder = path.parent if path.name == SETTINGS_FILE or path.suffix == ".toml" else path
        if not (folder / SETTINGS_FILE).is_file():
            raise RobotError(f"{spec}: no {SETTINGS_FILE} there; a robot is a folder holding {SETTINGS_FILE} and "
                             f"its MJCF model (import a URDF or MJCF with `episodic robots add MODEL`)")
        return RobotEntry(folder.name, PATH, folder)
    if (ROBOTS_DIR / spec / SETTINGS_FILE).is_file():
        return RobotEntry(spec, BUILT_IN, ROBOTS_DIR / spec)
    user = user_robots_dir()
    if (user / spec / SETTINGS_FILE).is_file():
        return RobotEntry(spec, USER, user / spec)
    ep = _entry_points().get(spec)
    if ep is not None:
        return RobotEntry(spec, ENTRY_POINT, _entry_point_folder(ep))
    names = ", ".join(entry.name for entry in list_robots()) or "none"
    raise RobotError(f"unknown robot '{spec}'; available: {names} (`episodic robots` lists them; import your "
                     f"own with `episodic robots add MODEL`, it then lives in {user})")


def folder_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (hidden files and __pycache__ left out), by path
    relative to it with '/' separators, sorted."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts) \
                and p.suffix not in (".py", ".pyc"):
            out[rel.as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _combined(files: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(files.items())).encode()).hexdigest()


def _vector(table: dict, key: str, n: int, where: str) -> np.ndarray:
    if key not in table:
        raise RobotError(f"{where}: missing '{key}'")
    value = np.asarray(table[key], dtype=float)
    if value.shape == ():
        value = np.full(n, float(value))
    if value.shape != (n,):
        raise RobotError(f"{where}: '{key}' needs {n} values (one per joint), got {value.shape}")
    if not np.all(np.isfinite(value)):
        raise RobotError(f"{where}: '{key}' must be finite")
    return value


def load_robot(name: str = DEFAULT_ROBOT) -> Robot:
    """The robot ``name`` (a name or a path, as :func:`find_robot` resolves it), read from its
    folder's robot.toml; raises RobotError naming the bad entry and what to do."""
    entry = find_robot(name)
    path = entry.folder / SETTINGS_FILE
    where = str(path)
    try:
        with path.open("rb") as f:
            cfg = tomllib.load(f)
        robot = _from_settings(entry.name, path, cfg)
    except tomllib.TOMLDecodeError as exc:
        raise RobotError(f"{where}: not valid TOML: {exc}") from None
    except KeyError as exc:
        raise RobotError(f"{where}: missing setting {exc}") from None
    _check(robot, where)
    _check_model(robot)
    files = folder_hashes(entry.folder)
    return dataclasses.replace(robot, source=entry.source, spec=name, files=files, sha256=_combined(files))


def check_named_by_file(name: str) -> None:
    """Raise RobotError when ``name``, a robot named by a file (a log, a batch file), is a path: a
    file names its robot, and a path it names is never loaded (the file could be crafted)."""
    if is_path(name):
        raise RobotError(f"the file names its robot by the path '{name}'; a file's robot is looked up by name only, "
                         f"never loaded from a path the file names: give --robot PATH")


def load_recorded_robot(name: str, settings: dict, path: str | None = None) -> Robot:
    """The robot a run log recorded (its ``robot`` name and ``robot_settings``), checked file by
    file against the recorded sha256: RobotError says which file is missing or differs and what to
    do. A log names its robot, it never leads to a path: the robot is found by its name as
    load_robot finds it (built-in, user directory, entry point), or at ``path`` when the user
    gives one (``--robot PATH``). A log recorded before robots were hashed is not checked."""
    if path is not None:
        robot = load_robot(path)
    else:
        check_named_by_file(name)
        try:
            robot = load_robot(name)
        except RobotError as exc:
            spec = settings.get("spec")
            where = f" (it was loaded from '{spec}' when the log was written)" if spec and spec != name else ""
            raise RobotError(f"{exc}; the log ran on the robot '{name}'{where}: put its folder into "
                             f"{user_robots_dir()}, or pass the folder's path (--robot PATH)") from None
    recorded = settings.get("files") or {}
    if not recorded or settings.get("sha256") == robot.sha256:
        return robot
    missing = sorted(set(recorded) - set(robot.files))
    differ = sorted(k for k in recorded if k in robot.files and recorded[k] != robot.files[k])
    added = sorted(set(robot.files) - set(recorded))
    what = "; ".join(part for part in (
        f"missing: {', '.join(missing)}" if missing else "",
        f"different: {', '.join(differ)}" if differ else "",
        f"not in the recorded robot: {', '.join(added)}" if added else "") if part)
    folder = robot.mjcf.parent
    raise RobotError(f"the robot '{name}' found here ({robot.source}, {folder}) is not the one the log ran on "
                     f"({what}); copy the recorded robot's folder (robot.toml, its model and assets/) from the "
                     f"machine that ran it into {user_robots_dir()}, or pass its folder's path")


def _from_settings(name: str, path: Path, cfg: dict) -> Robot:
    where = str(path)
    joints = tuple(cfg["joints"]["names"])
    n = len(joints)
    lim = cfg["limits"]
    gains = cfg["gains"]
    goto = cfg["goto"]
    return Robot(
        name=name,
        description=cfg.get("description", ""),
        mjcf=path.parent / cfg["mjcf"],
        joint_names=joints,
        end_effector_site=cfg["joints"]["end_effector_site"],
        range_lower=_vector(lim, "range_lower", n, where),
        range_upper=_vector(lim, "range_upper", n, where),
        velocity_limit=_vector(lim, "velocity", n, where),
        torque_limit=_vector(lim, "torque", n, where),
        kp=_vector(gains, "kp", n, where),
        kd=_vector(gains, "kd", n, where),
        ki=_vector(gains, "ki", n, where),
        feedforward=gains.get("feedforward", "gravity_compensation"),
        home=_vector(cfg["postures"], "home", n, where),
        control_rate=float(cfg["control"]["rate"]),
        substeps=int(cfg["control"].get("substeps", 1)),
        max_start_jump=float(cfg["safety"]["max_start_jump"]),
        goto=GotoSettings(
            max_velocity=_vector(goto, "max_velocity", n, where),
            max_acceleration=_vector(goto, "max_acceleration", n, where),
            tolerance_q=float(goto["tolerance_q"]),
            tolerance_qd=float(goto["tolerance_qd"]),
            settle_time=float(goto["settle_time"]),
        ),
        extra_joints=_extra_joints(cfg.get("extra_joints", {}), where),
        sl_joint_names=_sl_names(cfg["joints"].get("sl_names", []), n, where),
    )


def _sl_names(names: list, n: int, where: str) -> tuple[str, ...]:
    """[joints] sl_names: none, or one distinct name per joint."""
    if names and (len(names) != n or len(set(names)) != n or not all(isinstance(s, str) and s for s in names)):
        raise RobotError(f"{where}: [joints] sl_names must give {n} distinct names (SL's, one per joint), got {names}")
    return tuple(names)


def _extra_joints(table: dict, where: str) -> ExtraJoints:
    """[extra_joints]: hold = {name = value}, and kp, kd, torque as {name = value} tables or one
    value for all."""
    hold = table.get("hold", {})
    if not isinstance(hold, dict):
        raise RobotError(f"{where}: [extra_joints] hold must be a table {{joint = posture}}")
    names = tuple(hold)

    def values(key: str) -> np.ndarray:
        if key not in table:
            raise RobotError(f"{where}: [extra_joints] needs '{key}' for the held joints {', '.join(names)}")
        given = table[key]
        if isinstance(given, dict):
            unknown = set(given) - set(names)
            if unknown or set(names) - set(given):
                raise RobotError(f"{where}: [extra_joints] {key} must name exactly the held joints "
                                 f"{', '.join(names)} (the keys of 'hold')")
            return np.array([float(given[k]) for k in names])
        return np.full(len(names), float(given))

    if not names:
        return ExtraJoints()
    out = ExtraJoints(names, np.array([float(v) for v in hold.values()]), values("kp"), values("kd"),
                      values("torque"))
    if not all(np.all(np.isfinite(v)) for v in (out.hold, out.kp, out.kd, out.torque)):
        raise RobotError(f"{where}: [extra_joints] values must be finite")
    if min(out.kp.min(), out.kd.min()) < 0 or out.torque.min() <= 0:
        raise RobotError(f"{where}: [extra_joints] kp and kd must be non-negative and torque positive")
    return out


def _check(robot: Robot, where: str) -> None:
    try:
        Feedforward.parse(robot.feedforward)
    except CommandError as exc:
        raise RobotError(f"{where}: {exc}") from None
    if len(set(robot.joint_names)) != robot.n_dofs:
        raise RobotError(f"{where}: joint names must be unique")
    if min(robot.kp.min(), robot.kd.min(), robot.ki.min()) < 0:
        raise RobotError(f"{where}: gains must be non-negative")
    g = robot.goto
    if min(g.max_velocity.min(), g.max_acceleration.min(), g.tolerance_q, g.tolerance_qd) <= 0:
        raise RobotError(f"{where}: goto bounds and tolerances must be positive")
    if not robot.mjcf.is_file():
        raise RobotError(f"{where}: model file {robot.mjcf} not found")
    if np.any(robot.range_lower >= robot.range_upper):
        raise RobotError(f"{where}: every range_lower must be below its range_upper")
    if np.any(robot.home < robot.range_lower) or np.any(robot.home > robot.range_upper):
        raise RobotError(f"{where}: the home posture lies outside the joint range")
    if robot.max_start_jump <= 0:
        raise RobotError(f"{where}: safety.max_start_jump must be positive")
    if np.any(robot.velocity_limit <= 0) or np.any(robot.torque_limit <= 0):
        raise RobotError(f"{where}: velocity and torque limits must be positive")
    if robot.control_rate <= 0 or robot.substeps < 1:
        raise RobotError(f"{where}: control rate must be positive and substeps at least 1")
    if set(robot.extra_joints.names) & set(robot.joint_names):
        raise RobotError(f"{where}: a joint cannot be both an arm joint and held in [extra_joints]")


# what a robot folder's model leaves to the scene builder, and the fix for each
_IMPORT = "import the model with `episodic robots add MODEL`, which converts it (docs/robots.md)"
_REFUSED = {
    "actuator": "has its own actuators, which would fight the runner's controller",
    "keyframe": "has keyframes (their sizes would not fit the scene; the home posture belongs in robot.toml)",
    "option": "sets <option> (the scene sets the timestep and integrator; other options would go unnoticed)",
    "sensor": "has sensors (the scene adds the runner's own)",
}


def _check_model(robot: Robot) -> None:
    """Refuse a robot folder's model that is not as the scene builder takes it (plain XML: the
    model is not compiled here), naming the fix."""
    if robot.mjcf.suffix.lower() == ".urdf":
        raise RobotError(f"{robot.mjcf}: a robot folder holds an MJCF model; {_IMPORT}")
    try:
        root = ET.parse(robot.mjcf).getroot()
    except ET.ParseError as exc:
        raise RobotError(f"{robot.mjcf}: not valid XML: {exc}") from None
    for tag, why in _REFUSED.items():
        if any(len(element) or (tag == "option" and element.attrib) for element in root.iter(tag)):
            raise RobotError(f"{robot.mjcf} {why}; {_IMPORT}")
    free = [j.get("name", "?") for j in root.iter("joint") if j.get("type") in ("free", "ball")]
    if free or any(True for _ in root.iter("freejoint")):
        raise RobotError(f"{robot.mjcf} has a free or ball joint ({', '.join(free) or 'freejoint'}): an arm's base "
                         f"must be fixed to the world. Remove the joint from the base body (and for a URDF, mount the "
                         f"base link with a fixed joint), then {_IMPORT}")
