"""Helpers shared by the test modules: smooth segments, whole episodes, and real `episodic serve`
processes and channels for the bridge tests (fixtures live in conftest.py)."""
from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import mujoco
import numpy as np
import pytest

from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import Channel
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.tools.served import ServedRunner, fresh_channel

ROOT = Path(__file__).parent.parent
_seq = itertools.count(1_000_000)


def wave(home: np.ndarray, n: int = 500, amplitude: float = 0.2, phase: float = 0.0) -> np.ndarray:
    """A smooth (n, n_dofs) rad segment around ``home``; starts at home when phase is 0."""
    t = np.arange(1, n + 1) / n
    shape = np.sin(np.pi * t + phase) - np.sin(phase)
    return home + amplitude * shape[:, None] * np.linspace(1.0, 0.3, home.size)


def posed(model: mujoco.MjModel, q) -> mujoco.MjData:
    """Fresh data of ``model`` with qpos = ``q`` rad and everything derived from it (mj_forward)."""
    data = mujoco.MjData(model)
    data.qpos[:] = q
    mujoco.mj_forward(model, data)
    return data


def run_episode(runner, episode_id: int, n_segments: int = 3, context=(0.5, 0.2, 1.5)) -> list:
    """A start with ``context`` and ``n_segments`` wave segments from the robot's home; the replies."""
    home = runner.robot.home
    replies = [runner.send(StartCommand(episode_id, n_segments, context=np.array(context)))]
    for k in range(1, n_segments + 1):
        replies.append(runner.send(TrajectoryCommand(episode_id, k, n_segments, wave(home))))
    return replies


def run_commands(runner, commands: list) -> tuple[list, object, dict]:
    """Send one episode's ``commands`` to an in-process runner that keeps its episodes; the
    replies, the episode and its per-step columns."""
    runner.episodes.clear()
    replies = [runner.send(c) for c in commands]
    (episode,) = runner.episodes
    return replies, episode, episode.steps()


@contextlib.contextmanager
def each_case() -> Iterator[Callable[[str], contextlib.AbstractContextManager[None]]]:
    """Many cases checked in one test: ``with each_case() as case:`` then ``with case("name"): ...``
    per case. A failing case does not stop the others; on leaving, one AssertionError lists every
    failing case by name with its message (and how many cases ran), so no case hides another."""
    failures: list[str] = []
    count = 0

    @contextlib.contextmanager
    def case(name: str) -> Iterator[None]:
        nonlocal count
        count += 1
        try:
            yield
        except (Exception, pytest.fail.Exception) as e:  # pytest.raises that saw nothing raises Failed
            failures.append(f"{name}: {type(e).__name__}: {e}")

    yield case
    assert count, "no case was checked"
    assert not failures, f"{len(failures)} of {count} cases failed:\n" + "\n".join(failures)


def require_matplotlib() -> None:
    """Skip the test without matplotlib (the plot extra); under CI=true fail instead."""
    if importlib.util.find_spec("matplotlib") is None:
        message = "matplotlib is not installed: pip install 'episodic[plot]'"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {message}")
        pytest.skip(message)


def channel_name() -> str:
    """A fresh channel of this test process: test<pid>-<n>."""
    return fresh_channel("test")


def shm_leftovers() -> list[str]:
    """Shared-memory objects (and semaphores) of the channels this test process named."""
    prefix = f"episodic.{os.getuid()}.test{os.getpid()}-"
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix) or n.startswith("sem." + prefix))


class Served(ServedRunner):
    """`episodic serve --task TASK --channel CHANNEL [--log LOG] ARGS...` in a subprocess, its
    "serving" line already read when constructed (``ready`` says whether it came; a runner that
    failed to start is left for the test to examine, its stderr in ``proc.stderr``)."""

    def __init__(self, channel: str, log: Path | None = None, *args: str, task: str = "reach"):
        super().__init__(channel, task=task, log=log, args=args, stderr=subprocess.PIPE)
        self.read_banner()


def assert_same_steps(expected, other, fetched: dict | None = None) -> None:
    """Every per-step dataset of StoredEpisode ``other`` (and of a client's fetched log, whose
    columns come back as float64) is bit-identical to ``expected``'s."""
    for name, values in expected.steps.items():
        assert other.steps[name].tobytes() == values.tobytes(), name
        if fetched is not None:
            assert fetched[name].astype(values.dtype).reshape(values.shape).tobytes() == values.tobytes(), name


@contextlib.contextmanager
def raw_channel(channel: str):
    """The channel's memory and its block views, attached without a Client (to write raw blocks)."""
    chan = Channel.attach(channel)
    blocks = Blocks(chan.mm, chan.layout)
    try:
        yield chan, blocks
    finally:
        blocks.release()
        chan.mm.close()


def raw_exchange(channel: Channel, blocks: Blocks, seq: int | None = None, timeout: float = 10) -> np.void:
    """Post whatever the command block holds (under a new sequence number unless given) and
    return the reply."""
    seq = next(_seq) if seq is None else seq
    blocks.command["seq"] = seq
    channel.cmd_ready.release()
    channel.reply_ready.acquire(timeout)
    assert int(blocks.reply["seq"]) == seq
    return blocks.reply.copy()


def reference_cases(expect_convergence: bool = False) -> list:
    """The tasks of the registry (built-in and installed, episodic.tasks.registry) as test cases
    of their scripted references: a task that declares none (Task.reference) skipped, saying so;
    with ``expect_convergence``, one whose reference declares it does not converge in the timestep
    expected to fail (strictly: the test fails once it passes)."""
    from episodic.tasks import registry

    cases = []
    for name, cls in registry().items():
        marks = []
        if cls.reference is None:
            marks.append(pytest.mark.skip(reason=f"task '{name}' declares no scripted reference (Task.reference)"))
        elif expect_convergence and cls.reference.not_converged:
            marks.append(pytest.mark.xfail(strict=True, reason=cls.reference.not_converged))
        cases.append(pytest.param(name, marks=marks))
    return cases


@contextlib.contextmanager
def shared_runner(log: Path | None = None, *args: str, task: str = "reach") -> Iterator[ServedRunner]:
    """`episodic serve --task TASK [--log LOG] ARGS...` serving, for the tests of a module that
    need a runner that serves and leave it serving (a module-scoped fixture: one start-up, about
    1.3 s of CPU, instead of one per test). Each test starts its own episodes (a start aborts an
    episode left running). Its stderr goes to a temporary file (a long run never fills a pipe). On
    leaving, the runner must still serve, exit with code 0 on SIGTERM and leave no shared-memory
    object behind."""
    before = shm_leftovers()
    with ServedRunner(channel_name(), task=task, log=log, args=args) as runner:
        yield runner
        assert runner.proc.poll() is None, f"the shared runner exited:\n{runner.stderr_text()}"
        assert runner.stop() == 0, runner.stderr_text()
    assert shm_leftovers() == before, "the shared runner left shared-memory objects behind"
