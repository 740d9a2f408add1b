"""A Fortran-ordered trajectory (np.asfortranarray, or an MRDPLOT file's columns) is validated into
the C-ordered copy the compiled loop reads, as the bridge's decoding gives: in-process it runs
exactly as a C-ordered one."""
from __future__ import annotations

import numpy as np

from episodic.interface.commands import Limits, StartCommand, TrajectoryCommand, validate
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag
from tests.helpers import wave

ROBOT = load_robot("wam")


def test_fortran_ordered_trajectory_is_validated_into_a_c_ordered_copy():
    q = np.asfortranarray(np.tile(ROBOT.home, (100, 1)))
    cmd = validate(TrajectoryCommand(episode_id=3, index=1, max_commands=2, q=q), ROBOT, Limits())
    assert cmd.q.flags.c_contiguous and np.array_equal(cmd.q, q) and not np.shares_memory(cmd.q, q)


def test_a_fortran_ordered_trajectory_runs_in_process_as_a_c_ordered_one(runner):
    q = wave(runner.robot.home, n=100)
    replies = []
    for episode_id, order in ((1, "C"), (2, "F")):
        runner.send(StartCommand(episode_id, 1))
        replies.append(runner.send(TrajectoryCommand(episode_id, 1, 1, np.array(q, order=order))))
    assert [r.flag for r in replies] == [Flag.OK, Flag.OK]
    assert replies[0].reward == replies[1].reward and np.array_equal(replies[0].posture, replies[1].posture)
