"""Two blocking reach episodes through the loop this install has; prints whether the compiled
loop is built, the replies' flags and the final state's SHA-256. Run by .ci/run in an install made
without a C compiler (the warning must come once, on stderr) and by tests/test_native.py in
both kinds of install (the states must be equal)."""
import hashlib

import numpy as np

from episodic import native
from episodic.interface.commands import Feedforward, GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.trajectory import min_jerk
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

for _ in range(2):  # the warning, if any, comes once
    with Runner(make_task("reach")) as runner:
        robot = runner.robot
        move = min_jerk(robot.home, robot.home + 0.2, 0.5, robot.control_dt)
        replies = [runner.send(StartCommand(1, 2, context=np.array([0.6, 0.1, 1.5]))),
                   runner.send(GainsCommand(1, 1, 2, robot.kp, robot.kd, 0.5 * robot.kp, Feedforward.INVERSE_DYNAMICS)),
                   runner.send(TrajectoryCommand(1, 2, 2, move.q, move.qd, move.qdd, wait_time=0.2))]
        state = runner.sim.get_state()
print(native.compiled(), ",".join(r.flag.name for r in replies), hashlib.sha256(state.tobytes()).hexdigest())
