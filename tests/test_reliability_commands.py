"""Issue 31 item 10: a Fortran-ordered trajectory is validated into the C-ordered copy the compiled
loop reads, as the bridge's decoding gives."""
from __future__ import annotations

import numpy as np

from episodic.interface.commands import Limits, TrajectoryCommand, validate
from episodic.interface.robot import load_robot

ROBOT = load_robot("wam")


def test_fortran_ordered_trajectory_is_validated_into_a_c_ordered_copy():
    q = np.asfortranarray(np.tile(ROBOT.home, (100, 1)))
    cmd = validate(TrajectoryCommand(episode_id=3, index=1, max_commands=2, q=q), ROBOT, Limits())
    assert cmd.q.flags.c_contiguous and np.array_equal(cmd.q, q) and not np.shares_memory(cmd.q, q)
