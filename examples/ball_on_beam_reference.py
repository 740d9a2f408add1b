"""Reference gain set for ball_on_beam: a PD law on the ball's position and velocity along the
beam, driving the wrist (j7) that tilts the beam, keeps the ball on the beam for a 10 s episode
and brings it to the centre.

    python examples/ball_on_beam_reference.py [--out runs/ball_on_beam_reference.h5]

One start command (default context: the ball at rest 0.1 m from the centre) and one gains
command that sets the joint gains (the robot's defaults, j7 stiffer) and the task gains
[k_x, k_v]; its wait_time is the episode's length. The feedback law is documented in
tasks/ball_on_beam.py: q7_desired = q7_held + clip(k_x x + k_v xd, +-max_tilt).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from episodic.interface.commands import GainsCommand, StartCommand
from episodic.interface.robot import Robot, load_robot
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

# k_x rad/m, k_v rad s/m: with x'' = (5/7) g theta, about 3.2 rad/s and 0.55 damping (chosen from
# a small grid over k_x, k_v, kp7, kd7 for the lowest return from x0 = 0.1 m)
TASK_GAINS = np.array([1.5, 0.5])
KP7, KD7 = 5.0, 0.4  # j7 servo: N m/rad, N m s/rad (another arm's last joint: its own gains if stiffer)
DURATION = 10.0                     # s


def reference_commands(robot: Robot, episode_id: int = 1, context=None, duration: float = DURATION,
                       task_gains=TASK_GAINS) -> list:
    """Start + one gains command holding the start posture under the task's feedback law."""
    kp, kd = robot.kp.copy(), robot.kd.copy()
    kp[-1], kd[-1] = max(kp[-1], KP7), max(kd[-1], KD7)  # the last joint (j7) at least this stiff
    start = StartCommand(episode_id, 1, context=np.zeros(0) if context is None else np.asarray(context, float))
    return [start, GainsCommand(episode_id, 1, 1, kp, kd, wait_time=duration, task_gains=np.asarray(task_gains, float))]


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the ball_on_beam reference gain set.")
    parser.add_argument("--out", default=None, help="HDF5 log to write, replaced if it exists (default: none)")
    args = parser.parse_args()
    robot = load_robot("wam")
    with Runner(make_task("ball_on_beam"), log=args.out, keep_episodes=True, overwrite=True) as runner:
        began = time.perf_counter()
        replies = [runner.send(c) for c in reference_commands(robot)]
        wall = time.perf_counter() - began
        ep = runner.episodes[0]
    x, xd, theta, on = replies[-1].state
    steps = ep.n_steps
    print(f"return {ep.episode_return:.5f}  success {ep.success}  final x {x:+.4f} m  xd {xd:+.4f} m/s  "
          f"on beam {bool(on)}  steps {steps}  {steps / wall:.0f} steps/s  "
          f"real-time factor {steps * robot.control_dt / wall:.1f}")


if __name__ == "__main__":
    main()
