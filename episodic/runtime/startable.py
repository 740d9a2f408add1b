"""A task's scene, refused at build time when it cannot work.

A task's parameters each lie in their declared range (episodic.task.params), but values can
still not go together in ways only the built scene shows: a ball too small for MuJoCo to give it
a mass, a size whose geometry overflows, a cup placed off its table. :func:`build_startable_scene`
builds the scene and tries the task's default start (its start posture and default context) on
scratch simulation data, so that such a task is refused with a message when a runner is built,
rather than by every start of the run, or by a crash.
"""
from __future__ import annotations

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.runtime.scene import Scene, build_scene
from episodic.task import Task, TaskError


def _values(task: Task) -> str:
    """The parameters set away from their defaults, as "name=value, ..." ("its defaults" if none)."""
    default = type(task)().params()
    changed = [f"{k}={v}" for k, v in task.params().items() if v != default.get(k)]
    return ", ".join(changed) or "its defaults"


def build_startable_scene(robot: Robot, task: Task) -> Scene:
    """Build ``task``'s scene on ``robot`` (episodic.runtime.scene.build_scene) and start its
    default episode once on scratch data; TaskError, naming the task, its parameters and what
    went wrong, when MuJoCo refuses the scene, its geometry overflows, or the task refuses its
    own default start. The scratch start uses its own random generator: the run's episodes do
    not see it."""
    try:
        scene = build_scene(robot, task)
    except TaskError:
        raise
    except (ValueError, ArithmeticError) as e:  # MuJoCo's compiler refusal, or geometry out of float range
        raise TaskError(f"task '{task.name}' cannot be built with {_values(task)}: {e}; choose values nearer "
                        f"the defaults (`episodic tasks` lists each parameter's default and range)") from None
    data = mujoco.MjData(scene.model)
    data.qpos[scene.qpos_adr] = task.start_posture(robot)
    mujoco.mj_forward(scene.model, data)
    try:
        task.reset(scene.model, data, task.default_context(), np.random.default_rng(0))
    except (TaskError, ValueError, ArithmeticError) as e:
        raise TaskError(f"task '{task.name}' with {_values(task)} cannot start an episode: {e}; change the "
                        f"parameters named there (`episodic tasks` lists them)") from None
    return scene
