"""Episode logs: buffered in numpy while an episode runs, written to HDF5 once it ends.

File layout (one file per run; see the README):
  /                     attrs: format, task, task_params, robot, robot_settings, mode, seed,
                        control_rate, timestep, versions (JSON where structured), created
  /model_xml            the compiled scene, as MJCF text
  /episodes/NNNNNN/     attrs: episode_id, flag, flag_name, message, return, success, n_steps,
                        wall_time, rng_seed
      initial_state     mjSTATE_INTEGRATION vector the episode started from
      steps/<column>    per control step (episodic.columns.STEP_COLUMNS, plus task_state with attr 'columns')
      segments/<field>  per segment (index >= 1): index, kind, flag, reward, n_steps, state (n_seg, n_state)
      commands/NNN/     each command as received: attrs kind, episode_id, index, ...; arrays
  /rejected             commands refused outside any episode: episode_id, index, flag (table)
"""
from __future__ import annotations

import errno
import json
import logging
import platform
import shutil
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from episodic.columns import STEP_DTYPES
from episodic.commands import Kind

FORMAT = "episodic-log/1"
_log = logging.getLogger("episodic.log")
SPACE_MARGIN = 4 << 20  # bytes kept free on the log's disk beyond twice an episode's data

SEGMENT_FIELDS = {"index": np.int32, "kind": np.int8, "flag": np.int8, "reward": np.float64,
                  "n_steps": np.int32}
COMMAND_ATTRS = ("episode_id", "index", "max_commands", "rate", "wait_time", "feedforward", "reason")
COMMAND_ARRAYS = ("posture", "context", "q", "qd", "qdd", "kp", "kd", "ki", "task_gains")


def software_versions() -> dict[str, str]:
    import mujoco, scipy  # noqa: E401  (imported here: only needed for metadata)
    import episodic

    return {"episodic": episodic.__version__, "mujoco": mujoco.__version__, "numpy": np.__version__,
            "scipy": scipy.__version__, "h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version,
            "python": platform.python_version()}


@dataclass
class EpisodeBuffer:
    """Everything one episode produced, kept in memory until it ends."""

    number: int
    episode_id: int
    initial_state: np.ndarray
    rng_seed: tuple[int, int]
    state_columns: tuple[str, ...]
    blocks: list[dict[str, np.ndarray]] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)
    commands: list = field(default_factory=list)
    flag: int = 0
    flag_name: str = "OK"
    message: str = ""
    timing: dict = field(default_factory=dict)  # tick statistics (non-blocking mode), see episodic.pacing
    success: bool = False
    wall_time: float = 0.0

    @property
    def n_steps(self) -> int:
        return sum(len(b["time"]) for b in self.blocks)

    @property
    def episode_return(self) -> float:
        return float(sum(s["reward"] for s in self.segments))

    def column(self, name: str) -> np.ndarray:
        """One per-step column over the episode."""
        return np.concatenate([b[name] for b in self.blocks])

    def steps(self) -> dict[str, np.ndarray]:
        """Per-step columns concatenated over the episode."""
        return {k: self.column(k) for k in self.blocks[0]} if self.blocks else {}

    def segment_table(self) -> dict[str, np.ndarray]:
        out = {k: np.array([s[k] for s in self.segments], dtype=t) for k, t in SEGMENT_FIELDS.items()}
        n_state = len(self.state_columns)
        out["state"] = np.array([s["state"] for s in self.segments], dtype=float).reshape(-1, n_state)
        return out


def _command_record(cmd) -> tuple[dict, dict]:
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


def _scalar(value):
    if isinstance(value, str):
        return value[:1000]
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)[:1000]


class RunLog:
    """One HDF5 file per run. Each finished episode is written whole and flushed, so a run
    stopped mid-episode leaves a readable file holding every finished episode.

    ``incremental``: ``write_episode`` only queues the episode and ``work(budget)`` writes it a
    dataset at a time, so a paced loop can spend its spare time per tick on it instead of
    stalling for the milliseconds a whole episode takes (h5py holds the interpreter while it
    writes, so a thread would not help). A write that fails (e.g. a full disk) is reported on
    the ``episodic.log`` logger and counted in ``failed_writes``; the run goes on.
    """

    def __init__(self, path: str | Path, metadata: dict, incremental: bool = False):
        self.path = Path(path)
        self.failed_writes = 0
        self.incremental = incremental
        self._pending: deque[Iterator[None]] = deque()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = h5py.File(self.path, "w")
        for key, value in metadata.items():
            if key == "model_xml":
                self._file.create_dataset("model_xml", data=value)
            else:
                self._file.attrs[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
        self._file.attrs["format"] = FORMAT
        self._episodes = self._file.create_group("episodes")
        self._rejected: list[tuple[int, int, int]] = []
        self._file.flush()

    def _submit(self, job: Iterator[None]) -> None:
        self._pending.append(job)
        if not self.incremental:
            self.work()

    def work(self, budget: float = float("inf")) -> bool:
        """Write pending pieces for up to ``budget`` s; True while some remain."""
        end = time.perf_counter() + budget
        while self._pending and time.perf_counter() < end:
            try:
                next(self._pending[0])
            except StopIteration:
                self._pending.popleft()
            except (OSError, ValueError, RuntimeError, KeyError) as exc:
                self._pending.popleft()
                self.failed_writes += 1
                _log.error("could not write to %s (%s); the run goes on", self.path, exc)
        return bool(self._pending)

    def write_episode(self, ep: EpisodeBuffer) -> None:
        """Write a finished episode (queued when incremental)."""
        self._submit(self._write_episode(ep))

    def reject(self, episode_id, index, flag: int) -> None:
        """Note a command refused while no episode ran."""
        self._submit(self._reject(episode_id, index, flag))

    def set_attrs(self, attrs: dict) -> None:
        """Run-level attributes known only at the end (e.g. the whole run's tick timing)."""
        self._submit(self._set_attrs(attrs))

    def _check_space(self, n_bytes: int) -> None:
        """Refuse a write the disk cannot take: HDF5 does not survive running out of space
        mid-write, so an episode that does not fit is left out whole and the file stays sound."""
        free = shutil.disk_usage(self.path.parent).free
        if free < 2 * n_bytes + SPACE_MARGIN:
            raise OSError(errno.ENOSPC, f"{free} bytes free, about {n_bytes} needed; free some space "
                          f"or log elsewhere (--log)")

    def _write_episode(self, ep: EpisodeBuffer) -> Iterator[None]:
        self._check_space(sum(v.nbytes for b in ep.blocks for v in b.values()) + ep.initial_state.nbytes)
        g = self._episodes.create_group(f"{ep.number:06d}")
        g.attrs.update(episode_id=ep.episode_id, flag=ep.flag, flag_name=ep.flag_name, message=ep.message,
                       n_steps=ep.n_steps, wall_time=ep.wall_time, rng_seed=list(ep.rng_seed),
                       success=ep.success)
        g.attrs["return"] = ep.episode_return
        g.attrs.update(ep.timing)
        g.create_dataset("initial_state", data=ep.initial_state)
        yield
        steps = g.create_group("steps")
        for name in ep.blocks[0] if ep.blocks else ():
            steps.create_dataset(name, data=ep.column(name).astype(STEP_DTYPES[name], copy=False))
            yield
        if "task_state" in steps:
            steps["task_state"].attrs["columns"] = list(ep.state_columns)
        seg = g.create_group("segments")
        for name, values in ep.segment_table().items():
            seg.create_dataset(name, data=values)
        yield
        cmds = g.create_group("commands")
        for i, cmd in enumerate(ep.commands):
            attrs, arrays = _command_record(cmd)
            c = cmds.create_group(f"{i:03d}")
            c.attrs.update(attrs)
            for name, value in arrays.items():
                c.create_dataset(name, data=value)
            yield
        self._file.flush()

    def _reject(self, episode_id, index, flag: int) -> Iterator[None]:
        self._check_space(24 * (len(self._rejected) + 1))
        self._rejected.append((_int_or(episode_id), _int_or(index), flag))
        if "rejected" in self._file:
            del self._file["rejected"]
        self._file.create_dataset("rejected", data=np.array(self._rejected, dtype=np.int64).reshape(-1, 3))
        self._file["rejected"].attrs["columns"] = ["episode_id", "index", "flag"]
        self._file.flush()
        yield

    def _set_attrs(self, attrs: dict) -> Iterator[None]:
        self._file.attrs.update(attrs)
        self._file.flush()
        yield

    def close(self) -> None:
        """Finish pending writes and close the file."""
        if self._file.id.valid:
            self.work()
            self._file.close()


def _int_or(value, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


# -- reading ------------------------------------------------------------------
@dataclass
class StoredEpisode:
    """One episode read back from a log."""

    name: str
    attrs: dict
    initial_state: np.ndarray
    steps: dict[str, np.ndarray]
    segments: dict[str, np.ndarray]
    commands: list[tuple[dict, dict]]
    state_columns: tuple[str, ...]


def read_metadata(path: str | Path) -> dict:
    with h5py.File(path, "r") as f:
        meta = {k: _decode(v) for k, v in f.attrs.items()}
        meta["n_episodes"] = len(f["episodes"]) if "episodes" in f else 0
        return meta


def _decode(value):
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_episodes(path: str | Path, numbers: list[int] | None = None) -> list[StoredEpisode]:
    """Episodes of a log, all or those whose sequence numbers are given."""
    out = []
    with h5py.File(path, "r") as f:
        if "episodes" not in f:
            raise ValueError(f"{path} is not an episodic log (no /episodes group)")
        names = sorted(f["episodes"])
        if numbers is not None:
            wanted = {f"{n:06d}" for n in numbers}
            missing = wanted - set(names)
            if missing:
                raise ValueError(f"{path} has no episode {', '.join(sorted(missing))}; it holds {len(names)}")
            names = [n for n in names if n in wanted]
        for name in names:
            g = f["episodes"][name]
            steps = {k: v[()] for k, v in g["steps"].items()}
            columns = tuple(_decode(c) for c in g["steps"]["task_state"].attrs.get("columns", [])) \
                if "task_state" in g["steps"] else ()
            commands = []
            for cname in sorted(g["commands"]):
                c = g["commands"][cname]
                commands.append(({k: _decode(v) for k, v in c.attrs.items()},
                                 {k: v[()] for k, v in c.items()}))
            out.append(StoredEpisode(
                name=name, attrs={k: _decode(v) for k, v in g.attrs.items()},
                initial_state=g["initial_state"][()], steps=steps,
                segments={k: v[()] for k, v in g["segments"].items()}, commands=commands,
                state_columns=columns))
    return out


def command_from_record(attrs: dict, arrays: dict):
    """Rebuild a command from its stored form (inverse of what write_episode stores)."""
    from episodic import commands as c

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
        return c.GainsCommand(**head, kp=arrays.get("kp"), kd=arrays.get("kd"), ki=arrays.get("ki"),
                              feedforward=attrs.get("feedforward", 1), wait_time=attrs.get("wait_time", 0.0),
                              task_gains=arrays.get("task_gains"))
    return c.TrajectoryCommand(**head, q=arrays.get("q"), qd=arrays.get("qd"), qdd=arrays.get("qdd"),
                               rate=attrs.get("rate"), wait_time=attrs.get("wait_time", 0.0))
