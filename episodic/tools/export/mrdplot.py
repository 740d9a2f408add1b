"""SL's MRDPLOT data files (read by clmcplot and by SL's trajectory task): episodes written as
such files, and such files read back, as data or as a trajectory command.

The format (SL manual, section 5.5.3): an ASCII header of blank-separated items -- rows·cols
(the number of values), cols, rows, the sampling frequency in Hz, then a name and a unit per
column (neither with blanks inside) -- followed by the values as IEEE-754 float32, big-endian,
row by row. The writer lays the header out as SL's own writer does (items separated by two
blanks, a newline after the frequency, two blanks after each name and unit and a newline
before the data), so SL's reader and clmcplot, which skip exactly three characters after the
last unit, read its files. The reader takes the last rows·cols·4 bytes of the file as the data
and accepts any blanks and newlines between the last unit and them.

Episodes (``episodic export LOG.h5 --format mrdplot``): one file per episode,
``<log stem>_ep<NNNNNN>.mrd`` (NNNNNN: the episode's number in the log, as its group is
named; ``run.h5`` -> ``run_ep000003.mrd``), at the control rate, one row per control step
(all of the episode's steps, the move to the start included). Columns, SL-style, with ``<j>``
each of the robot's SL joint names from the log's metadata (the WAM's ``R_SFE`` ... ``R_WAA``,
robot.toml's ``[joints] sl_names``), or its joint names where it has none (or the log predates them):

    time s, index - (the command the step belongs to; 0: the move to the start),
    <j>_th rad, <j>_thd rad/s, <j>_thdd rad/s^2, <j>_u Nm        (measured; u: applied torque)
    <j>_des_th rad, <j>_des_thd rad/s, <j>_des_thdd rad/s^2, <j>_uff Nm   (desired; feedforward)
    ee_x, ee_y, ee_z m, ee_q0 ... ee_q3 - (end-effector position and orientation w x y z, world),
    the task's state columns - (their own names; the log holds no units for them), reward -

each block joint by joint (all joints' ``_th`` .. ``_u``, then all joints' ``_des_th`` ..
``_uff``). The values are the log's per-step arrays cast to float32.

Names and units longer than NAME_BYTES (40) are refused: SL's readers hold no more. The reader
also takes a header whose frequency runs into the first name (``500time``), as SL's Matlab writer
leaves it and SL's readers accept.

Trajectory files (:func:`trajectory_from_mrdplot`): columns are named by the robot's joint names
or by its SL names (one naming for all joints); a joint's positions are the column
``<joint>_des_th`` when every joint has one (a recorded data file holds the desired motion
there and the measured one in ``_th``: the commanded motion is what is meant to run again),
otherwise ``<joint>_th`` (how SL's trajectory-task files name the desired positions);
``<joint>_uff`` beside ``_th`` (SL's trajectory task adds it as feedforward torque) must be 0 or
absent: a trajectory command carries no torques, so a file that needs them is refused rather than
run without them (beside ``_des_th``, as `episodic export` writes it, ``_uff`` is the feedforward the
runner computed, and is not read); velocities and accelerations come from ``_des_thd``/``_des_thdd``
(or ``_thd``/``_thdd``) when the file has them for every joint and are otherwise left to the runner. Rows are
samples at the header's frequency (a ``time`` column, if any, is not used); at another
frequency than the robot's control rate they are resampled to it with
:func:`episodic.interface.trajectory.resample` (scipy's cubic spline, Hermite when velocities are
given: the runner's own resampling), so the command holds one sample per control step.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from episodic.interface.commands import Limits, TrajectoryCommand
from episodic.interface.files import SHARED, check_regular, replacing
from episodic.interface.robot import Robot, load_robot
from episodic.interface.trajectory import resample
from episodic.logs import StoredEpisode, iter_episodes, read_metadata
from episodic.tools.export import ExportError, check_target, select_episodes

SUFFIX = ".mrd"
FLOAT = np.dtype(">f4")  # IEEE-754 single precision, big-endian
# the measured and the desired joint columns: (log column, SL suffix, unit), joint by joint
MEASURED = (("q", "th", "rad"), ("qd", "thd", "rad/s"), ("qdd", "thdd", "rad/s^2"), ("u", "u", "Nm"))
DESIRED = (("q_d", "des_th", "rad"), ("qd_d", "des_thd", "rad/s"), ("qdd_d", "des_thdd", "rad/s^2"),
           ("u_ff", "uff", "Nm"))
END_EFFECTOR = (("ee_pos", ("ee_x", "ee_y", "ee_z"), "m"), ("ee_quat", ("ee_q0", "ee_q1", "ee_q2", "ee_q3"), "-"))
# the columns a trajectory is read from, preferred family first: (position, velocity, acceleration)
TRAJECTORY_FAMILIES = (("des_th", "des_thd", "des_thdd"), ("th", "thd", "thdd"))
_TOKEN = re.compile(rb"\s*(\S+)")
# the frequency: a number, which SL's Matlab writer runs into the first name ("500time")
_NUMBER = re.compile(rb"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
NAME_BYTES = 40  # longest name or unit SL's readers hold (clmcplot, SL's own reader): longer ones corrupt them
_BLANKS = b" \t\r\n\v\f"
_HEADER_ITEMS = ("rows·cols (the number of values)", "cols", "rows", "the sampling frequency")


class MrdplotError(ValueError):
    """A file is not a readable MRDPLOT file, or not a trajectory for the robot; the message
    names the file and the problem."""


# -- writing -------------------------------------------------------------------
def write_mrdplot(path: str | Path, columns, units, freq: float, data: np.ndarray, overwrite: bool = True) -> None:
    """Write ``data`` (rows, cols) as an MRDPLOT file at ``path``: column names and units
    (strings without blanks), ``freq`` Hz. The values are stored as big-endian float32. The
    file is written beside ``path`` and renamed onto it when whole (a link planted at ``path``
    is replaced, never written through); without ``overwrite`` an existing ``path`` is refused
    (episodic.interface.files.HostileFileError)."""
    data = np.asarray(data)
    columns, units = [str(c) for c in columns], [str(u) if str(u) else "-" for u in units]
    if data.ndim != 2 or data.shape[1] != len(columns) or len(units) != len(columns):
        raise MrdplotError(f"{len(columns)} names and {len(units)} units for data of shape {data.shape}; "
                           f"give one name and one unit per column of (rows, cols) data")
    bad = [s for s in (*columns, *units) if not s or re.search(r"\s", s) or not s.isascii() or len(s) > NAME_BYTES]
    if bad:
        raise MrdplotError(f"{bad[0]!r} cannot be an MRDPLOT name or unit: names and units are ASCII without "
                           f"blanks, at most {NAME_BYTES} bytes long (SL's readers hold no more)")
    freq = float(freq)
    if not np.isfinite(freq) or freq <= 0:
        raise MrdplotError(f"the sampling frequency must be a positive number of Hz, got {freq}")
    rows, cols = data.shape
    rate = f"{freq:f}" if float(f"{freq:f}") == freq else repr(freq)
    header = f"{rows * cols}  {cols}  {rows}  {rate}\n" + "".join(f"{c}  {u}  " for c, u in zip(columns, units)) + "\n"
    with np.errstate(over="ignore"):
        values = data.astype(FLOAT)
    with replacing(path, overwrite, mode=SHARED) as tmp:
        tmp.write_bytes(header.encode("ascii") + values.tobytes())


def episode_table(episode: StoredEpisode, joint_names) -> tuple[list[str], list[str], np.ndarray]:
    """The SL-style columns of one episode (see the module docstring): names, units and the
    (n_steps, n_columns) float64 values."""
    steps = episode.steps
    names, units, blocks = ["time", "index"], ["s", "-"], [steps["time"][:, None], steps["index"][:, None]]
    n = len(joint_names)
    for table in (MEASURED, DESIRED):
        for column, suffix, unit in table:
            values = steps[column]
            if values.shape[1:] != (n,):
                raise ExportError(f"episode {episode.name}: steps/{column} has {values.shape[1:]} values per step, "
                                  f"the robot {n} joints ({', '.join(joint_names)})")
            names += [f"{j}_{suffix}" for j in joint_names]
            units += [unit] * n
            blocks.append(values)
    for column, labels, unit in END_EFFECTOR:
        names += labels
        units += [unit] * len(labels)
        blocks.append(steps[column])
    if "task_state" in steps:
        names += list(episode.state_columns)
        units += ["-"] * len(episode.state_columns)
        blocks.append(steps["task_state"])
    names.append("reward")
    units.append("-")
    blocks.append(steps["reward"][:, None])
    doubled = sorted({c for c in names if names.count(c) > 1})
    if doubled:
        raise ExportError(f"episode {episode.name}: the column name {', '.join(doubled)} would appear twice "
                          f"(a task state column named like a logged one)")
    return names, units, np.hstack([np.asarray(b, dtype=float) for b in blocks])


def episode_file(log: str | Path, number: int) -> str:
    """The file name of episode ``number`` of ``log``: ``<log stem>_ep<NNNNNN>.mrd``."""
    return f"{Path(log).stem}_ep{number:06d}{SUFFIX}"


@dataclass
class MrdplotExport:
    """What an export wrote: one file per episode, and the episodes left out (name -> why)."""

    files: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def export_mrdplot(log: str | Path, out_dir: str | Path | None = None, numbers: list[int] | None = None,
                   overwrite: bool = False, progress: Callable[[int, int], None] | None = None) -> MrdplotExport:
    """Write episodes of ``log`` (all those written whole, or ``numbers``) as MRDPLOT files in
    ``out_dir`` (default: the log's folder, created if missing), named by
    :func:`episode_file`. Existing files are refused, before anything is written, unless
    ``overwrite``. ``progress(done, total)`` is called after each episode written."""
    meta = read_metadata(log)
    settings = meta.get("robot_settings", {})
    joints = list(settings.get("sl_joint_names") or settings.get("joint_names", []))  # SL's names where it has them
    if not joints:
        raise ExportError(f"{log} records no joint names (robot_settings.joint_names); it cannot be exported")
    freq = float(meta["control_rate"])
    out = Path(log).parent if out_dir is None else Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is not a directory; --out names the folder the .mrd files go to")
    wanted, skipped = select_episodes(log, numbers)
    targets = {n: out / episode_file(log, n) for n in wanted}
    for path in targets.values():
        check_target(path, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    result = MrdplotExport(skipped=skipped)
    for episode in iter_episodes(log, wanted):
        if not episode.steps:  # ended at its start, no step logged (a skipped go-to-start: episodic.runtime.start)
            result.skipped[episode.name] = "it has no steps (it ended at its start)"
            continue
        names, units, data = episode_table(episode, joints)
        path = targets[int(episode.name)]
        write_mrdplot(path, names, units, freq, data, overwrite)
        result.files.append(path)
        if progress is not None:
            progress(len(result.files), len(wanted))
    return result


# -- reading -------------------------------------------------------------------
def read_mrdplot(path: str | Path) -> tuple[list[str], list[str], float, np.ndarray]:
    """An MRDPLOT file's column names, units, sampling frequency (Hz) and data, a (rows, cols)
    float32 array (the stored values, in native byte order). MrdplotError naming the problem
    when the header is malformed or the data is not rows·cols float32 values."""
    check_regular(path)  # a FIFO would block the read
    raw = Path(path).read_bytes()
    pos = 0

    def item(what: str, pattern: re.Pattern = _TOKEN) -> str:
        nonlocal pos
        m = pattern.match(raw, pos)
        if m is None:
            raise MrdplotError(f"{path}: the header ends before {what}: not an MRDPLOT file, or cut short")
        token = m[1]
        if not all(0x21 <= b <= 0x7E for b in token):
            raise MrdplotError(f"{path}: the header's {what} is not text ({token[:12]!r}): not an MRDPLOT file, "
                               f"or its header names fewer columns than it says")
        pos = m.end()
        return token.decode("ascii")

    counts: list[int] = []  # rows·cols, cols, rows
    freq = np.nan  # Hz
    for k, what in enumerate(_HEADER_ITEMS):
        text = item(f"item {k + 1}, {what}", _NUMBER if k == 3 and _NUMBER.match(raw, pos) else _TOKEN)
        try:
            if k < 3:
                counts.append(int(text))
            else:
                freq = float(text)
        except ValueError:
            kind = "a whole number" if k < 3 else "a number"
            raise MrdplotError(f"{path}: header item {k + 1} ({what}) is {text!r}, not {kind}: not an "
                               f"MRDPLOT file") from None
    total, cols, rows = counts
    if cols < 1 or rows < 1:
        raise MrdplotError(f"{path}: the header gives {cols} columns and {rows} rows; both must be at least 1")
    if total != rows * cols:
        raise MrdplotError(f"{path}: the header's number of values, {total}, is not rows·cols = {rows}·{cols} "
                           f"= {rows * cols}")
    if not np.isfinite(freq) or freq <= 0:
        raise MrdplotError(f"{path}: the sampling frequency in the header is {freq:g}; it must be a positive "
                           f"number of Hz")
    names, units = [], []
    for c in range(1, cols + 1):
        names.append(item(f"name of column {c} of {cols}"))
        units.append(item(f"unit of column {c} ({names[-1]})"))
    need = total * FLOAT.itemsize
    left = len(raw) - pos
    if left < need:
        raise MrdplotError(f"{path}: only {left} bytes follow the header, but its {rows} rows × {cols} columns "
                           f"of float32 need {need} bytes (a file cut short, or a header that does not match "
                           f"the data)")
    extra = raw[pos:len(raw) - need].lstrip(_BLANKS)  # what is not the separator before the data
    if extra:
        raise MrdplotError(f"{path}: {len(extra)} bytes more than the header's {rows} rows × {cols} columns of "
                           f"float32 ({need} bytes) follow it (a header that does not match the data)")
    data = np.frombuffer(raw, dtype=FLOAT, count=total, offset=len(raw) - need).reshape(rows, cols)
    return names, units, freq, data.astype(np.float32)


def trajectory_from_mrdplot(path: str | Path, robot: Robot | str, *, episode_id: int = 0, index: int = 1,
                            max_commands: int = 1, wait_time: float = 0.0) -> TrajectoryCommand:
    """A trajectory command from an MRDPLOT trajectory file (an SL trajectory file or a data
    file such as `episodic export` writes): joint columns matched to ``robot``'s joint names
    and resampled to its control rate (see the module docstring). ``episode_id``, ``index``,
    ``max_commands`` and ``wait_time`` s go into the command as given. MrdplotError naming the
    missing columns when the file lacks a joint."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    columns, units, freq, data = read_mrdplot(path)
    where = {c: i for i, c in reversed(list(enumerate(columns)))}
    doubled = sorted({c for c in columns if columns.count(c) > 1})
    # the robot's joint names, or SL's (the WAM's R_SFE ... R_WAA): the first whose positions the file has
    namings = [names for names in (robot.joint_names, robot.sl_joint_names) if names]
    joints, family = next(((names, f) for f in TRAJECTORY_FAMILIES for names in namings
                           if all(f"{j}_{f[0]}" in where for j in names)), (robot.joint_names, None))
    if family is None:
        lacking = [j for j in joints if not any(f"{j}_{f[0]}" in where for f in TRAJECTORY_FAMILIES)]
        lacking = lacking or [j for j in joints if f"{j}_{TRAJECTORY_FAMILIES[0][0]}" not in where]
        shown = ", ".join(columns[:24]) + (", ..." if len(columns) > 24 else "")
        sl_names = f", or SL's names {', '.join(robot.sl_joint_names)}" if robot.sl_joint_names else ""
        raise MrdplotError(
            f"{path}: no position column for joint {', '.join(lacking)} of robot {robot.name}: looked for "
            f"{', '.join(f'{j}_des_th or {j}_th' for j in lacking)} (<joint>_des_th preferred, the same kind "
            f"for every joint of {', '.join(joints)}{sl_names}); the file's columns: {shown}")

    def block(suffix: str) -> np.ndarray | None:
        names = [f"{j}_{suffix}" for j in joints]
        present = [n for n in names if n in where]
        if not present:
            return None
        if len(present) < len(names):
            missing = [n for n in names if n not in where]
            raise MrdplotError(f"{path}: has {', '.join(present)} but no {', '.join(missing)}; give the {suffix} "
                               f"column for every joint or for none")
        twice = [n for n in names if n in doubled]
        if twice:
            raise MrdplotError(f"{path}: the column {', '.join(twice)} appears more than once; which one is meant?")
        for n in names:
            if "deg" in units[where[n]].lower():
                raise MrdplotError(f"{path}: column {n} is in {units[where[n]]}; trajectory files are in rad")
        values = data[:, [where[n] for n in names]].astype(float)
        bad = np.argwhere(~np.isfinite(values))
        if len(bad):
            row, col = bad[0]
            raise MrdplotError(f"{path}: column {names[col]} holds {values[row, col]} at row {row}; a trajectory "
                               f"is finite numbers")
        return values

    q, qd, qdd = (block(s) for s in family)
    assert q is not None  # family was chosen for having every joint's position column
    uff = block("uff") if family == TRAJECTORY_FAMILIES[1] else None  # SL's trajectory task adds these
    if uff is not None and uff.any():
        raise MrdplotError(f"{path}: the {joints[0]}_uff ... columns hold feedforward torques, which SL's trajectory "
                           f"task adds and a trajectory command cannot carry (the runner computes its own "
                           f"feedforward: robot.toml [gains] feedforward, or a gain set's mode); zero them or leave "
                           f"them out")
    if qdd is not None and qd is None:
        raise MrdplotError(f"{path}: has accelerations ({joints[0]}_{family[2]} ...) but no velocities "
                           f"({joints[0]}_{family[1]} ...); a trajectory gives velocities with accelerations")
    if freq != robot.control_rate and len(q) > 1:
        samples = (len(q) - 1) * robot.control_rate / freq + 1  # what resampling would allocate, per column
        if samples > Limits().max_segment_steps:
            raise MrdplotError(f"{path}: {len(q)} rows at {freq:g} Hz last {(len(q) - 1) / freq:g} s, "
                               f"{samples:.4g} samples at the control rate of {robot.control_rate:g} Hz; "
                               f"a trajectory holds at most {Limits().max_segment_steps} (check the sampling "
                               f"frequency in the header)")
        desired = resample(q, qd, qdd, freq, robot.control_rate)
        q, qd, qdd = desired.q, None if qd is None else desired.qd, None if qdd is None else desired.qdd
    return TrajectoryCommand(episode_id, index, max_commands, q, qd, qdd, rate=robot.control_rate,
                             wait_time=wait_time)
