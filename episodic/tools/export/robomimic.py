"""A run log in robomimic's HDF5 layout (robomimic's documentation, "Datasets > Overview >
Dataset Structure"), for imitation and offline learning with robomimic:

    data/                    attrs total (samples over all demos), env_args (a JSON string)
        demo_<i>/            one per exported episode, i = 0, 1, ... in log order;
                             attrs num_samples (N), and episode, episode_id, success (the
                             episode's number and id in the log, whether it succeeded)
            states           (N, 2 n_dofs + n_state) float64
            actions          (N, n_dofs) float64, in [-1, 1]
            rewards          (N,) float64
            dones            (N,) int64, 1 at the episode's last step, else 0
            obs/<key>        (N, d) float64 per key
            next_obs/<key>   (N, d) float64: the observation after the step
    mask/success             the names of the demos of successful episodes (bytes), a filter key

What a sample is, for this system. One sample per control step of the learner's part of an
episode: the steps of its commands 1, 2, ... (the segments and gain sets); the move to the
start (command 0) is the runner's, planned from the start command, and is left out, so a demo
begins at the start posture as a robomimic rollout would after a reset (an episode with no
step after its start, e.g. aborted during the move, gives no demo and is reported skipped).
Each row is the log's: the state before the step and what was commanded during it.

- **state**: the joint positions q (rad), velocities qd (rad/s) and the task's state columns,
  ``[q, qd, task_state]`` per step as logged. Not MuJoCo's full physics state, which the log
  keeps only at the start of each episode (robomimic needs raw MuJoCo states only to reset
  robosuite environments; for other datasets its documentation asks for any state vector).
  The columns are named in ``env_args``.
- **action**: the desired joint positions q_d, normalised by the joint range,
  ``a = 2 (q_d - range_lower) / (range_upper - range_lower) - 1``. The desired positions are
  what this runner takes from a learner (trajectory commands); the torques come from its
  PD-plus-feedforward law, so a torque action could not be executed and would carry the gains
  in it. q_d is clamped to the joint range, so every action lies in [-1, 1], the range
  robomimic requires of actions. To run a policy's action: ``q_d = range_lower + (a + 1) / 2
  (range_upper - range_lower)``, sent as a trajectory at the control rate (velocities by the
  runner's finite differences). range_lower and range_upper are in ``env_args``.
- **observations**: ``joint_pos`` (N, n_dofs) rad, ``joint_vel`` (N, n_dofs) rad/s,
  ``eef_pos`` (N, 3) m and ``eef_quat`` (N, 4) (w, x, y, z) of the end effector in the world
  frame, and one (N, 1) key per task state column, named by it (reach: ``target_x``,
  ``target_y``, ``target_z``, ``distance``). ``next_obs`` is the next step's observation; the
  log holds no state after an episode's last step, so the last row repeats that step's
  observation (as robomimic's own D4RL conversion does).
- **reward**: the task's step reward; a demo's rewards sum to the episode's return (the move
  to the start has none). **done**: 1 at the last step of the episode, whatever ended it.

``env_args``: ``env_name`` (the task), ``type`` (robomimic's key in its code and datasets) and
``env_type`` (its documentation's name for the same), both 2, robomimic's type for
environments outside robosuite and iGibson (robomimic has no wrapper for this runner: train
with its rollouts off), and ``env_kwargs``: the run (robot, task parameters, seed, control
rate, mode, source log, episodic version), the joint names and ranges, and the names of the
state columns and observation keys.

The ``mask`` group holds robomimic's filter keys; ``success`` lets a training run take only
the successful episodes of a learner's run (robomimic's ``train.hdf5_filter_key``).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from episodic.interface.files import SHARED, replacing
from episodic.logs import StoredEpisode, iter_episodes, read_metadata
from episodic.tools.export import ExportError, check_target, select_episodes

GYM_TYPE = 2  # robomimic's EnvType for environments outside robosuite and iGibson
OBS_KEYS = (("joint_pos", "q"), ("joint_vel", "qd"), ("eef_pos", "ee_pos"), ("eef_quat", "ee_quat"))
SUCCESS_KEY = "success"


@dataclass
class RobomimicExport:
    """What an export wrote: its file, (demo name, episode number) per demo, the samples in all,
    and the episodes left out (number as group name -> why)."""

    path: Path
    demos: list[tuple[str, int]] = field(default_factory=list)
    total: int = 0
    skipped: dict[str, str] = field(default_factory=dict)


def learner_steps(episode: StoredEpisode) -> np.ndarray:
    """Boolean mask of the steps of an episode's commands 1, 2, ... (the move to the start left out)."""
    steps = episode.steps  # {} for an episode that ended at its start, with no steps at all
    return steps["index"] >= 1 if "index" in steps else np.zeros(0, bool)


def demo_arrays(episode: StoredEpisode, lower: np.ndarray, upper: np.ndarray) -> dict[str, np.ndarray]:
    """One episode's demo: states, actions, rewards, dones, obs/<key> and next_obs/<key>
    (see the module docstring), over its learner steps; {} when it has none."""
    sel = learner_steps(episode)
    n = int(sel.sum())
    if n == 0:
        return {}
    s = {k: v[sel] for k, v in episode.steps.items()}
    task = s["task_state"] if "task_state" in s else np.zeros((n, 0))
    out = {"states": np.hstack([s["q"], s["qd"], task]),
           "actions": 2.0 * (s["q_d"] - lower) / (upper - lower) - 1.0,
           "rewards": s["reward"].astype(np.float64), "dones": np.zeros(n, dtype=np.int64)}
    out["dones"][-1] = 1
    obs = {key: s[column] for key, column in OBS_KEYS}
    for i, name in enumerate(episode.state_columns):
        if name in obs:
            raise ExportError(f"episode {episode.name}: the task state column '{name}' is named like an "
                              f"observation key of its own; it cannot be exported")
        obs[name] = task[:, i:i + 1]
    for key, values in obs.items():
        out[f"obs/{key}"] = values
        out[f"next_obs/{key}"] = np.concatenate([values[1:], values[-1:]])
    return out


def env_args(meta: dict, log: str | Path, state_columns: list[str]) -> dict:
    """The ``env_args`` attribute (a dict; stored as JSON)."""
    settings = meta.get("robot_settings", {})
    joints = list(settings.get("joint_names", []))
    kwargs = {
        "robot": meta.get("robot"), "task_params": meta.get("task_params", {}), "seed": meta.get("seed"),
        "task_source": meta.get("task_source", {}),  # the task's module:Class and its package (episodic.tasks)
        "control_rate": meta.get("control_rate"), "mode": meta.get("mode"), "source_log": Path(log).name,
        "episodic_version": meta.get("versions", {}).get("episodic"), "joint_names": joints,
        "range_lower": settings.get("range_lower"), "range_upper": settings.get("range_upper"),
        "states": [f"{j}_q" for j in joints] + [f"{j}_qd" for j in joints] + list(state_columns),
        "actions": "2 (q_d - range_lower) / (range_upper - range_lower) - 1, q_d the desired joint positions",
        "obs_keys": [k for k, _ in OBS_KEYS] + list(state_columns),
    }
    return {"env_name": meta.get("task"), "type": GYM_TYPE, "env_type": GYM_TYPE, "env_kwargs": kwargs}


def export_robomimic(log: str | Path, out: str | Path | None = None, numbers: list[int] | None = None,
                     overwrite: bool = False, progress: Callable[[int, int], None] | None = None) -> RobomimicExport:
    """Write episodes of ``log`` (all those written whole, or ``numbers``) to ``out`` (default:
    ``<log stem>_robomimic.hdf5`` beside the log) in robomimic's layout. An existing ``out`` is
    refused unless ``overwrite``; the file appears only once it is complete.
    ``progress(done, total)`` is called after each episode read."""
    meta = read_metadata(log)
    settings = meta.get("robot_settings", {})
    try:
        lower = np.asarray(settings["range_lower"], dtype=float)
        upper = np.asarray(settings["range_upper"], dtype=float)
    except KeyError:
        raise ExportError(f"{log} records no joint range (robot_settings.range_lower/upper); the actions "
                          f"cannot be normalised") from None
    path = Path(log).with_name(f"{Path(log).stem}_robomimic.hdf5") if out is None else Path(out)
    check_target(path, overwrite)
    wanted, skipped = select_episodes(log, numbers)
    result = RobomimicExport(path, skipped=dict(skipped))
    path.parent.mkdir(parents=True, exist_ok=True)
    columns: list[str] | None = None
    with replacing(path, overwrite, mode=SHARED) as tmp:  # never through a link planted at path
        with h5py.File(tmp, "w") as f:
            data = f.create_group("data")
            successful = []
            for done, episode in enumerate(iter_episodes(log, wanted), start=1):
                if progress is not None:
                    progress(done, len(wanted))
                arrays = demo_arrays(episode, lower, upper)
                if not arrays:
                    result.skipped[episode.name] = ("it has no step after the start (it ended during the move to "
                                                    "the start)")
                    continue
                if columns is None:
                    columns = list(episode.state_columns)
                name = f"demo_{len(result.demos)}"
                g = data.create_group(name)
                for key, values in arrays.items():
                    g.create_dataset(key, data=values)
                n = len(arrays["actions"])
                g.attrs.update(num_samples=n, episode=int(episode.name),
                               episode_id=int(episode.attrs.get("episode_id", -1)),
                               success=int(bool(episode.attrs.get("success", False))))
                if episode.attrs.get("success"):
                    successful.append(name)
                result.demos.append((name, int(episode.name)))
                result.total += n
            data.attrs["total"] = result.total
            data.attrs["env_args"] = json.dumps(env_args(meta, log, columns or list(meta.get("state_columns", []))))
            f.create_group("mask").create_dataset(SUCCESS_KEY, data=np.array(successful, dtype="S"))
    return result
