"""Batch evaluation: a population of episodes evaluated on k threads, on worker processes or a
cluster through an executor, and optionally written to a run's log.

    from episodic.tools.batch import evaluate
    results = evaluate([swing_commands(robot, s) for s in swings], "ball_in_cup", threads=2)
    returns = [r.episode_return for r in results]

Each episode is a list of command objects (episodic.interface.commands) as a learner would send them: a
start command, then its segments and gain sets. Each thread evaluates its share of the episodes
on a Runner of its own (no log file); MuJoCo models and data are never shared between threads,
and MuJoCo releases the GIL while it steps. Runners are kept per process for the next batch of
the same setup (``RUNNERS``), so a worker builds its runners once.

Every episode is evaluated as the first episode of a fresh Runner (blocking simulation): before
it, the thread's runner starts afresh (``Runner.start_afresh``: a new episode machine, the
simulation as it was built), so an episode's result depends only on its own commands, the task, the robot
and the seed: bit-identical to running it alone in a fresh ``Runner(task, robot, seed=seed)``,
whatever the order of the batch, the number of threads, the executor and the episode ids in the
commands (the episode's random generator is seeded with (seed, 0), as in a fresh runner).

The commands of an episode are sent in order until one of them ends the episode (its reply's
``episode_done``: the last segment, or a refusal that aborts it); the rest are not sent. An
episode still running after its last command is ended with Flag.INTERRUPTED (BATCH_END_MESSAGE).

Beyond one process: ``executor`` is anything with ``submit(fn, *args)`` returning a future with
``result()`` (a ``concurrent.futures`` pool, a Dask ``Client.get_executor()``, a small adapter
for Ray). The population is cut into chunks of ``chunk_size`` episodes; each is sent as one
picklable ``Chunk`` (the task by name and parameters, the robot by name, the commands) to
``evaluate_chunk``, which evaluates it in the worker on ``threads`` threads. Each result carries
the worker's software versions, and results from other versions of the packages an episode's
numbers depend on (RESULT_PACKAGES) are refused (VersionMismatch).

Into a run's log: ``evaluate_into(runner, episodes)`` evaluates on workers built like
``runner`` and hands each evaluated episode to ``runner`` as its next episode (its log, its
kept episodes), recording the batch's number in the run and the episode's position in it;
``episodic replay`` re-runs such an episode as the first of a fresh runner, bit-identically.
``read_batch`` reads a BATCH.h5 file of episodes' commands (``episodic evaluate``).
"""
from episodic.tools.batch.evaluation import (
                                             BATCH_ABORT_MESSAGE,
                                             BATCH_END_MESSAGE,
                                             DEFAULT_CHUNK_SIZE,
                                             Chunk,
                                             ChunkResult,
                                             Executor,
                                             ProgressCallback,
                                             VersionMismatch,
                                             check_versions,
                                             evaluate,
                                             evaluate_chunk,
                                             evaluate_into,
)
from episodic.tools.batch.files import BatchFile, BatchFileError, read_batch
from episodic.tools.batch.setups import RUNNERS, Runners, Setup, TaskSpec, runner_setup, setup_for

__all__ = ["BATCH_ABORT_MESSAGE", "BATCH_END_MESSAGE", "DEFAULT_CHUNK_SIZE", "RUNNERS", "BatchFile", "BatchFileError",
           "Chunk", "ChunkResult", "Executor", "ProgressCallback", "Runners", "Setup", "TaskSpec", "VersionMismatch",
           "check_versions", "evaluate", "evaluate_chunk", "evaluate_into", "read_batch", "runner_setup", "setup_for"]
