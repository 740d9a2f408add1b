"""The in-process runner: a task on a robot in MuJoCo, the episode state machine and the
HDF5 run log, behind one ``handle(command) -> Reply`` call (what the bridge serves).

    with Runner("reach", log="runs/reach.h5", seed=0) as runner:
        runner.handle(StartCommand(episode_id=1, max_commands=1))
        reply = runner.handle(TrajectoryCommand(1, 1, 1, q))
"""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Callable

from episodic.backend import DriverBackend, JointDriver
from episodic.commands import Limits
from episodic.log import EpisodeBuffer, RunLog, software_versions
from episodic.machine import EpisodeMachine, Flag, Reply
from episodic.pacing import Pacer
from episodic.robot import load_robot
from episodic.scene import Scene, build_scene
from episodic.simulation import Simulation
from tasks import make_task

MODES = ("blocking", "realtime")


class Runner:
    """Episodes of task ``task`` (name) with parameters ``params`` on robot ``robot`` (name).

    ``log``: HDF5 file for the run (None keeps episodes in memory only, in ``episodes``).
    ``seed``: the run's seed; episode k's random generator is seeded with (seed, k).
    ``mode``: "blocking" (time stops between commands; results depend only on the commands)
    or "realtime" (the simulation is paced to the wall clock and the robot holds while the
    learner is silent: the stand-in for a real robot). ``driver(scene)``: build the JointDriver
    of a robot driven tick by tick (episodic.backend); the run is then in realtime mode.
    """

    def __init__(self, task: str = "reach", robot: str = "wam", params: dict | None = None,
                 log: str | Path | None = None, seed: int = 0, limits: Limits = Limits(),
                 keep_episodes: bool | None = None, mode: str = "blocking",
                 driver: Callable[[Scene], JointDriver] | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown mode '{mode}'; use one of {', '.join(MODES)}")
        self.mode = "realtime" if driver is not None else mode
        self.robot = load_robot(robot)
        self.task = make_task(task, params)
        self.scene = build_scene(self.robot, self.task)
        if driver is not None:
            self.sim = DriverBackend(self.scene, driver(self.scene))
        else:
            self.sim = Simulation(self.scene, Pacer(self.robot.control_dt) if mode == "realtime" else None)
        self.seed = int(seed)
        self.limits = limits
        self.keep_episodes = log is None if keep_episodes is None else keep_episodes
        self.episodes: list[EpisodeBuffer] = []
        self.log = RunLog(log, self.metadata(), incremental=mode == "realtime") if log is not None else None
        self.machine = EpisodeMachine(self.scene, self.sim, self.task, self.seed, limits,
                                      on_episode=self._episode_done, on_reject=self._rejected)

    def metadata(self) -> dict:
        """What a log records about the run (enough to rebuild this runner for replay)."""
        return {
            "task": self.task.name, "task_params": self.task.params(), "robot": self.robot.name,
            "robot_settings": self.robot.settings_dict(), "mode": self.mode, "seed": self.seed,
            "control_rate": self.robot.control_rate, "timestep": self.scene.model.opt.timestep,
            "substeps": self.scene.substeps, "state_columns": list(self.task.columns),
            "limits": dict(self.limits.__dict__), "versions": software_versions(),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "model_xml": self.scene.xml,
        }

    def handle(self, command) -> Reply:
        """Run one command; never raises on bad input (the reply's flag says what went wrong)."""
        return self.machine.handle(command)

    def spare_time(self, budget: float) -> None:
        """Use up to ``budget`` s of a tick's spare time (writing queued log pieces)."""
        if self.log is not None:
            self.log.work(budget)

    def abort(self, flag: Flag, message: str) -> None:
        """Abort the running episode (e.g. a silent learner: Flag.TIMEOUT)."""
        self.machine.abort(flag, message)

    def _episode_done(self, ep: EpisodeBuffer) -> None:
        if self.keep_episodes:
            self.episodes.append(ep)
        if self.log is not None:
            self.log.write_episode(ep)

    def _rejected(self, command, flag: Flag) -> None:
        if self.log is not None:
            self.log.reject(getattr(command, "episode_id", -1), getattr(command, "index", -1), int(flag))

    def close(self) -> None:
        """End a running episode with Flag.INTERRUPTED (so its steps are kept) and close the log."""
        self.machine.abort(Flag.INTERRUPTED, "the runner stopped during the episode")
        if self.log is not None and self.sim.pacer is not None:
            self.log.set_attrs(self.sim.pacer.timing().as_attrs())
        if self.log is not None:
            self.log.close()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
