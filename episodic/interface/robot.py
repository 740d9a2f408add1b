"""Robot descriptions: the settings TOML and MJCF model of each folder under ``robots/``.

Nothing outside ``robots/`` holds robot numbers; the runner, controllers and
safety checks read them from a :class:`Robot`.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from episodic.interface.vocabulary import CommandError, Feedforward

ROBOTS_DIR = Path(__file__).parents[1] / "robots"  # the robots/ folder, installed as episodic.robots
SETTINGS_FILE = "robot.toml"
DEFAULT_ROBOT = "wam"  # the robot a runner (and `episodic serve`) uses when none is named


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
            if isinstance(value, GotoSettings):
                value = {k: _plain(v) for k, v in value.__dict__.items()}
            out[key] = _plain(value)
        return out


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (Path, tuple)):
        return str(value) if isinstance(value, Path) else list(value)
    return value


def available_robots() -> list[str]:
    """Names of the robot folders that hold a settings file."""
    return sorted(p.parent.name for p in ROBOTS_DIR.glob(f"*/{SETTINGS_FILE}"))


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
    """Read ``robots/<name>/robot.toml``; raises RobotError naming the bad entry."""
    path = ROBOTS_DIR / name / SETTINGS_FILE
    if not path.is_file():
        raise RobotError(
            f"unknown robot '{name}'; available: {', '.join(available_robots()) or 'none'}"
        )
    where = str(path)
    try:
        with path.open("rb") as f:
            cfg = tomllib.load(f)
        robot = _from_settings(name, path, cfg)
    except tomllib.TOMLDecodeError as exc:
        raise RobotError(f"{where}: not valid TOML: {exc}") from None
    except KeyError as exc:
        raise RobotError(f"{where}: missing setting {exc}") from None
    _check(robot, where)
    return robot


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
    )


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
