"""SL's conventions on a served runner: ``SLRunner`` answers commands in SL's layout (the IAS lab's
SL bridge, clients/README.md) by the served task's SL map (episodic.task.sl), so that a learner
written for SL, through SLSendTrajectoryMex (clients/matlab/sl_mex.c), runs unchanged against
``episodic serve``. What it runs, and so what the log records, is the task's own command."""
from __future__ import annotations

from episodic.interface.commands import Command, MalformedCommand
from episodic.interface.vocabulary import Reply
from episodic.runtime.runner import Runner
from episodic.task.sl import sl_command


class SLRunner(Runner):
    """A Runner that also takes SL's layout: a start context or task gains of SL_VALUES values."""

    def _deliver(self, command: Command | MalformedCommand) -> Reply:
        return super()._deliver(sl_command(self.task, self.robot, command))
