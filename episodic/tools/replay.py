"""Replay: re-run a log's recorded commands and compare the new episodes with the stored
ones bit for bit (blocking mode depends only on the commands, task, seed and versions; an
episode evaluated in a batch is re-run as the first episode of a fresh runner, as it ran)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from episodic.interface.columns import STEP_DTYPES
from episodic.interface.commands import Limits
from episodic.interface.robot import load_recorded_robot
from episodic.interface.vocabulary import Flag
from episodic.logs import StoredEpisode, iter_episodes, read_metadata, read_summary
from episodic.logs.episode import EpisodeBuffer
from episodic.logs.layout import command_from_record, software_versions
from episodic.runtime.runner import Runner
from episodic.tasks import logged_task


@dataclass
class Difference:
    episode: str
    what: str
    detail: str


@dataclass
class ReplayReport:
    episodes: list[str] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # episodes not written whole: name -> why
    version_changes: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return not self.differences

    def install_recorded(self) -> str:
        """A pip command that installs the recorded versions of the packages that differ ('' when
        none can be installed that way; Python and HDF5 itself come with the interpreter and h5py)."""
        pins = [f"{DISTRIBUTIONS[k]}=={old}" for k, (old, _) in sorted(self.version_changes.items())
                if k in DISTRIBUTIONS]
        return f"pip install {' '.join(pins)}" if pins else ""


# the packages software_versions() records, by the name pip installs them under
DISTRIBUTIONS = {"mujoco": "mujoco-core", "numpy": "numpy", "scipy": "scipy", "h5py": "h5py"}


def _compare_array(name: str, old: np.ndarray, new: np.ndarray) -> str | None:
    if old.shape != new.shape:
        return f"shape {old.shape} in the log, {new.shape} on replay"
    if old.tobytes() == new.tobytes():
        return None
    with np.errstate(invalid="ignore"):
        diff = np.abs(old.astype(float) - new.astype(float))
    bad = np.flatnonzero(~(old == new).reshape(old.shape[0], -1).all(axis=1)) if old.ndim else [0]
    first = int(bad[0]) if len(bad) else 0
    return (f"{len(bad)} of {old.shape[0] if old.ndim else 1} rows differ, first at row {first}; "
            f"max |difference| {np.nanmax(diff):.3g}")


def compare(stored: StoredEpisode, new: EpisodeBuffer) -> list[Difference]:
    """Differences between a stored episode and a re-run one (empty when bit-identical)."""
    out = []
    steps: dict[str, np.ndarray] = {k: v.astype(STEP_DTYPES[k], copy=False) for k, v in new.steps().items()}
    for name in sorted(set(stored.steps) | set(steps)):
        if name not in stored.steps or name not in steps:
            out.append(Difference(stored.name, f"steps/{name}", "present on one side only"))
            continue
        detail = _compare_array(name, stored.steps[name], steps[name])
        if detail:
            out.append(Difference(stored.name, f"steps/{name}", detail))
    table = new.segment_table()
    for name, old in stored.segments.items():
        detail = _compare_array(name, old, table[name])
        if detail:
            out.append(Difference(stored.name, f"segments/{name}", detail))
    old_flag, old_return = stored.attrs["flag"], stored.attrs["return"]
    if old_flag != new.flag:
        out.append(Difference(stored.name, "flag",
                              f"{Flag(old_flag).name} in the log, {Flag(new.flag).name} on replay"))
    if np.float64(old_return).tobytes() != np.float64(new.episode_return).tobytes():
        out.append(Difference(stored.name, "return", f"{old_return!r} in the log, {new.episode_return!r} on replay"))
    return out


def check_replayable(path: str | Path, meta: dict) -> None:
    """ValueError unless the log at ``path`` (metadata ``meta``) was recorded in blocking mode:
    in realtime mode the motion depended on wall-clock timing, so it cannot be re-run."""
    if meta.get("mode", "blocking") != "blocking":
        raise ValueError(f"{path} was recorded in {meta['mode']} mode, where the robot's motion depends "
                         f"on wall-clock timing; only blocking-mode logs replay bit-identically")


def runner_for(path: str | Path, meta: dict, robot: str | None = None) -> Runner:
    """A runner (no log file) rebuilt from the metadata ``meta`` of the log at ``path``: its task
    and parameters, robot, seed and limits (ValueError as ``check_replayable``; TaskError naming the
    package to install when the log's task cannot be imported: episodic.tasks.logged_task; RobotError,
    a ValueError, saying which file of the robot is missing or differs from the recorded one:
    episodic.interface.robot.load_recorded_robot). The robot is found by the name the log records,
    or at the path ``robot`` when the user gives one."""
    check_replayable(path, meta)
    lacking = [key for key in ("robot", "seed", "task") if key not in meta]
    if lacking:
        raise ValueError(f"{path} records no {', '.join(lacking)} (a damaged log, or not a run's); its episodes "
                         f"cannot be re-run")
    limits = meta.get("limits", {})
    try:
        limits = Limits(**limits)
    except TypeError:
        raise ValueError(f"{path} records limits this version does not know ({limits!r}); use the episodic "
                         f"version that wrote it") from None
    recorded = load_recorded_robot(meta["robot"], meta.get("robot_settings") or {}, robot)
    task, params = logged_task(meta), meta.get("task_params") or {}
    if "air" in task.declared() and "air" not in params:  # written before air's choice: MuJoCo's own drag
        params = {**params, "air": "implicit"}  # (episodic.task.contact.AIR_MODES)
    return Runner(task.with_params(params), recorded, seed=meta["seed"], limits=limits, keep_episodes=False)


def replay_commands(runner: Runner, ep: StoredEpisode) -> list[EpisodeBuffer]:
    """Re-run the stored episode ``ep``'s commands on ``runner`` from its recorded initial state;
    the episodes that produced (one, when the replay matches the recording). An episode evaluated
    in a batch (attribute batch >= 0) ran as the first episode of a fresh runner (episodic.tools.batch),
    so it is replayed as that: after ``runner.start_afresh()``, as episode 0. Its go-to-start is
    simulated or skipped as it was (attribute goto_start; absent, in a log written before the skip:
    simulated, waiting as it did then, without the carried load's allowance: episodic.runtime.start)."""
    commands = (command_from_record(attrs, arrays) for attrs, arrays in ep.commands)
    number = int(ep.name)
    if ep.attrs.get("batch", -1) >= 0:
        runner.start_afresh()
        number = 0
    recorded = ep.attrs.get("goto_start")
    runner.machine.skip_goto_start = recorded == "skipped"
    runner.machine.allow_carried_sag = recorded is not None
    return runner.replay_episode(number, ep.initial_state, commands, Flag(ep.attrs["flag"]))


def replay(path: str | Path, episodes: list[int] | None = None,
           progress: Callable[[int, int], None] | None = None, robot: str | None = None) -> ReplayReport:
    """Re-execute the commands of ``episodes`` (sequence numbers; all when None) of the log
    at ``path`` from each episode's recorded initial state, and compare. Episodes not written
    whole are skipped (listed in the report's ``skipped``) when all are replayed, and a
    ValueError when asked for by number. The episodes are read one at a time as they are
    replayed, so the cost and the memory grow with what is replayed, not with the log.
    ``progress(done, total)`` is called after each episode replayed (e.g. a progress bar's
    update). ``robot``: the path of the robot's folder, when the log's robot is not found by its
    name here (runner_for)."""
    meta = read_metadata(path, count_episodes=False)
    check_replayable(path, meta)
    if episodes is None:
        rows, skipped = read_summary(path)
        total = len(rows) - len(skipped)
    else:
        skipped, total = {}, len(set(episodes))
    report = ReplayReport(skipped=skipped)
    now = software_versions()
    report.version_changes = {k: (v, now.get(k, "missing")) for k, v in meta.get("versions", {}).items()
                              if now.get(k) != v and k != "episodic"}
    stored = iter_episodes(path, episodes)
    with runner_for(path, meta, robot) as runner:
        for done, ep in enumerate(stored, 1):
            produced = replay_commands(runner, ep)
            report.episodes.append(ep.name)
            if len(produced) != 1:
                report.differences.append(Difference(ep.name, "episodes",
                                                     f"replay produced {len(produced)} episodes, expected 1"))
            else:
                report.differences += compare(ep, produced[0])
            if progress is not None:
                progress(done, total)
    return report
