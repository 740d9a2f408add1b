"""What a run log holds: its format name, the tables it is made of, the summary table, how a
command is kept as a record and read back, and the software versions a log records.

File layout, format "episodic-log/2" (one file per run; docs/log-format.md): an episode is a row
of /episodes and row ranges of run-wide tables, so writing one is a few row appends
  /                     attrs: format, task, task_params, robot, robot_settings, mode, seed,
                        control_rate, timestep, versions (JSON where structured), created
  /model_xml            the compiled scene, as MJCF text
  /episodes             one row per episode written whole, appended last (EPISODE_DTYPE): its
                        number, its attributes as JSON text (episode_id, flag, flag_name, message,
                        return, early_end, success, n_steps, wall_time, rng_seed, batch,
                        batch_position, goto_start, timing_*), and where its rows are in:
  /initial_states       (n, n_state) mjSTATE_INTEGRATION vectors the episodes started from
  /steps                per control step (a compound table: episodic.interface.columns.STEP_COLUMNS,
                        plus task_state (n_state,); attr 'columns' its names)
  /segments             per segment (index >= 1): index, kind, flag, reward, n_steps, state (n_state,)
  /commands             each command as received, as JSON text: {"attrs": {kind, episode_id, index,
                        ...}, "arrays": {name: [offset, shape]}}, its arrays' values in
  /command_values       float64, one after the other
  /summary              one row per episode written whole, appended after it (SUMMARY_DTYPE)
  /rejected             commands refused outside any episode: episode_id, index, flag (table, appended)
Every table but /episodes holds rows that no episode names once a write failed part-way or a
process was killed mid-write; readers only read the ranges /episodes gives.

Format "episodic-log/1" (READ_FORMATS; read by episodic.logs.reader, no longer written) kept an
episode as a group /episodes/NNNNNN: its attributes as HDF5 attributes (and complete, 0 until
written whole), initial_state, steps/<column>, segments/<field> and commands/NNN/ (attributes
and arrays) inside it.
"""
from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import platform
import threading

import h5py
import numpy as np

from episodic.interface.commands import Kind
from episodic.logs.episode import SEGMENT_FIELDS

FORMAT = "episodic-log/2"  # the format written
READ_FORMATS = ("episodic-log/1", FORMAT)  # the formats read


# A row of /episodes (format 2): where an episode's rows are in the run-wide tables (start row,
# row count), and its attributes as JSON text
EPISODE_DTYPE = np.dtype([("number", "<i8"), ("attrs", h5py.string_dtype()), ("initial_state", "<i8"),
                          ("steps_start", "<i8"), ("n_steps", "<i8"), ("segments_start", "<i8"),
                          ("n_segments", "<i8"), ("commands_start", "<i8"), ("n_commands", "<i8")])


def segment_dtype(n_state: int) -> np.dtype:
    """A row of /segments (format 2) of a task of ``n_state`` state columns: SEGMENT_FIELDS and
    the task's state after the segment (none when it has no state columns)."""
    state = [("state", "<f8", (n_state,))] if n_state else []
    return np.dtype([(name, np.dtype(kind)) for name, kind in SEGMENT_FIELDS.items()] + state)


# One row of /summary per episode: what `episodic info` shows, so it reads one dataset instead
# of every episode's group. wall_time and timing_period_error_* in s; timing_* 0 / NaN in blocking mode;
# batch and batch_position -1 for an episode not evaluated in a batch.
SUMMARY_DTYPE = np.dtype([("number", "<i8"), ("episode_id", "<i8"), ("return", "<f8"), ("flag", "<i4"),
                          ("success", "i1"), ("n_steps", "<i8"), ("wall_time", "<f8"), ("timing_ticks", "<i8"),
                          ("timing_period_error_p50", "<f8"), ("timing_period_error_p99", "<f8"),
                          ("timing_period_error_max", "<f8"), ("timing_missed", "<i8"), ("batch", "<i8"),
                          ("batch_position", "<i8")])
SUMMARY_NAMES: tuple[str, ...] = SUMMARY_DTYPE.names or ()  # its fields in order (a record dtype's are never None)


# what a summary field is when an episode's attributes (or an older log's /summary) lack it
SUMMARY_DEFAULTS = {"success": 0, "timing_ticks": 0, "timing_missed": 0, "batch": -1, "batch_position": -1}


# bytes of HDF5's metadata cache for a log being written (fixed; HDF5's default starts at 2 MB and
# grows, each cached entry taking several times its size in memory: a runner's memory then grew by
# about 100 kB per episode written for its first few hundred episodes)
METADATA_CACHE = 1 << 17


COMMAND_ATTRS = ("episode_id", "index", "max_commands", "rate", "wait_time", "feedforward", "reason")
COMMAND_ARRAYS = ("posture", "context", "q", "qd", "qdd", "kp", "kd", "ki", "task_gains")


def software_versions() -> dict[str, str]:
    """The versions an episode's numbers depend on, by package (a fresh dict each call)."""
    return dict(_software_versions())


@functools.cache
def _software_versions() -> dict[str, str]:  # asked per batch chunk and per log: looked up once
    import mujoco  # imported here: only needed for metadata

    import episodic

    # scipy's version from its metadata: importing it would cost a runner's start-up a third
    return {"episodic": episodic.__version__, "mujoco": mujoco.__version__, "numpy": np.__version__,
            "scipy": importlib.metadata.version("scipy"), "h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version,
            "python": platform.python_version()}


def command_record(cmd) -> tuple[dict, dict]:
    """attrs and arrays of a command as received (unvalidated values kept as far as numeric)."""
    attrs = {"kind": int(getattr(cmd, "kind", -1)), "type": type(cmd).__name__}
    arrays = {}
    for name in COMMAND_ATTRS:
        if hasattr(cmd, name) and getattr(cmd, name) is not None:
            value = getattr(cmd, name)
            attrs[name] = int(value) if isinstance(value, (bool, int, np.integer)) else _scalar(value)
    for name in COMMAND_ARRAYS:
        value = getattr(cmd, name, None)
        if value is not None:
            try:
                arrays[name] = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                attrs[f"{name}_repr"] = repr(value)[:1000]
    return attrs, arrays


def attrs_text(attrs: dict) -> str:
    """``attrs`` (names -> numbers, bools, text, or lists of them; numpy's as Python's) as the JSON
    text a format-2 log keeps them in (NaN and infinities as JavaScript's NaN, Infinity)."""
    return json.dumps(attrs, default=_plain)


def _plain(value):
    """A numpy value as the Python value JSON writes."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} cannot be kept in a log's attributes")


def command_entry(cmd, offset: int) -> tuple[str, list[np.ndarray]]:
    """How a format-2 log keeps a command as received: its /commands text (command_record's
    attributes, and each array's place in /command_values from row ``offset`` on and its shape)
    and its arrays' values, flat, in that order."""
    attrs, arrays = command_record(cmd)
    places: dict[str, list] = {}
    for name, value in arrays.items():
        places[name] = [offset, list(value.shape)]
        offset += value.size
    return attrs_text({"attrs": attrs, "arrays": places}), [v.ravel() for v in arrays.values()]


def command_from_entry(text: str, values: np.ndarray, first: int) -> tuple[dict, dict]:
    """The attributes and arrays of a command kept as ``command_entry`` made ``text``, its arrays
    read from ``values``, the rows of /command_values from row ``first`` on (ValueError when
    one lies outside them)."""
    record = json.loads(text)
    arrays = {}
    for name, (start, shape) in record["arrays"].items():
        size = int(np.prod(shape, dtype=np.int64))
        if start < first or start + size > first + len(values):
            raise ValueError(f"the command's {name} lies outside /command_values")
        arrays[name] = values[start - first : start - first + size].reshape(shape)
    return record["attrs"], arrays


def _scalar(value):
    if isinstance(value, str):
        return value[:1000]
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)[:1000]


def fix_metadata_cache(f: h5py.File, n_bytes: int) -> None:
    """Hold the metadata cache of ``f`` at ``n_bytes`` bytes (no adaptive resizing)."""
    config = f.id.get_mdc_config()
    config.set_initial_size = True
    config.initial_size = config.min_size = config.max_size = n_bytes
    config.incr_mode = config.flash_incr_mode = config.decr_mode = 0  # the modes' "off" values
    f.id.set_mdc_config(config)


def summary_row(number: int, attrs) -> np.ndarray:
    """The /summary row of episode ``number`` from its attributes (a mapping such as its group's
    attrs; absent fields as SUMMARY_DEFAULTS says, else NaN: the timing fields 0 ticks and NaN s,
    as in blocking mode). A value the field cannot hold (a damaged episode's: NaN or text for a
    whole number) is taken as absent, with -1 for a whole number without a default."""
    row = np.zeros((), dtype=SUMMARY_DTYPE)
    row["number"] = number
    for name in SUMMARY_NAMES[1:]:
        absent = SUMMARY_DEFAULTS.get(name, np.nan if SUMMARY_DTYPE[name].kind == "f" else -1)
        try:
            row[name] = attrs.get(name, absent)
        except (TypeError, ValueError, OverflowError):
            row[name] = absent
    return row


def int_or(value, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def decode_attr(value):
    """An HDF5 attribute's value as Python: text for bytes, JSON parsed, numpy scalars as Python's."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):  # not JSON, or nested too deep to parse
            return value
    if isinstance(value, np.generic):
        return value.item()
    return value


def command_from_record(attrs: dict, arrays: dict):
    """Rebuild a command from its stored form (inverse of what write_episode stores)."""
    from episodic.interface import commands as c

    kind = Kind(attrs["kind"]) if attrs["kind"] in Kind._value2member_map_ else Kind.MALFORMED
    head = dict(episode_id=attrs.get("episode_id", -1), max_commands=attrs.get("max_commands", 0))
    if kind == Kind.MALFORMED:
        return c.MalformedCommand(**head, index=attrs.get("index", -1),
                                  reason=attrs.get("reason", "stored as malformed"))
    if kind == Kind.START:
        return c.StartCommand(**head, posture=arrays.get("posture"),
                              context=arrays.get("context", np.zeros(0)))
    head["index"] = attrs["index"]
    if kind == Kind.RESET:
        return c.ResetCommand(**head)
    if kind == Kind.GAINS:
        return c.GainsCommand(**head, kp=c.unchecked(arrays.get("kp")), kd=c.unchecked(arrays.get("kd")),
                              ki=arrays.get("ki"),
                              feedforward=attrs.get("feedforward", 1), wait_time=attrs.get("wait_time", 0.0),
                              task_gains=arrays.get("task_gains"))
    return c.TrajectoryCommand(**head, q=c.unchecked(arrays.get("q")), qd=arrays.get("qd"), qdd=arrays.get("qdd"),
                               rate=attrs.get("rate"), wait_time=attrs.get("wait_time", 0.0))


# -- one process's writer and readers of a log take turns ---------------------------------------
# HDF5 locks a file against other processes only: in the process that writes it, a reader's open
# shares the writer's open file, and reading it while the writer thread changes or closes it can
# crash. So a writer opens the log only while no reader of this process has it open, and a reader
# opens it only while the writer of this process does not (both under IN_PROCESS).
IN_PROCESS = threading.Lock()
_WRITING: set[tuple[int, int]] = set()  # (device, inode) of the logs this process's writers have open


def file_key(st: os.stat_result) -> tuple[int, int]:
    """A file's identity in this process's bookkeeping: (device, inode)."""
    return st.st_dev, st.st_ino


def read_in_process(key: tuple[int, int]) -> bool:
    """Whether this process has the file ``key`` (file_key) open for reading (HDF5's own list of
    open files)."""
    for file_id in h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE):
        try:
            if file_key(os.stat(file_id.name)) == key:
                return True
        except (OSError, ValueError):
            continue
    return False


def writing(key: tuple[int, int], now: bool) -> None:
    """Note that this process's writer has the file ``key`` open (``now``) or closed it (call
    under IN_PROCESS)."""
    if now:
        _WRITING.add(key)
    else:
        _WRITING.discard(key)


def written_in_process(key: tuple[int, int]) -> bool:
    """Whether this process's writer has the file ``key`` open (call under IN_PROCESS)."""
    return key in _WRITING
