"""A runner's memory stays bounded whatever a learner sends within the limits, in every mode: a
runner that logs without keeping its episodes streams a long episode's steps to the log (blocking:
tests/test_writer_bound.py; realtime here); any other holds at most Limits.max_held_steps control
steps, the running episode's and the kept episodes' together, refusing the command that could
pass it and letting the oldest kept episodes go."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from episodic.interface.commands import Limits
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

HOLD = 1.0  # s each one-sample segment holds its posture: 500 control steps on the WAM


def segments_until_refused(runner: Runner, episode_id: int, most: int = 100) -> tuple[int, object]:
    """Start episode ``episode_id`` and send one-sample segments each held HOLD s until one is
    refused (at most ``most``); the segments accepted and the last reply."""
    posture = runner.start_episode(most, episode_id=episode_id).posture
    for accepted in range(most):
        reply = runner.send_trajectory(posture[None], wait_time=HOLD)
        if reply.flag != Flag.OK:
            return accepted, reply
    return most, reply


def test_a_runner_without_a_log_refuses_the_command_that_would_hold_too_many_steps():
    cap = 3000
    with Runner(make_task("reach"), limits=Limits(max_held_steps=cap)) as runner:
        accepted, reply = segments_until_refused(runner, 1)
        assert reply.flag == Flag.INVALID_PAYLOAD and reply.episode_done, reply
        assert "no log to stream them to" in reply.message and "its limit of 3,000 (max_held_steps" in reply.message
        held = runner.machine.last_episode.n_steps
        assert accepted == 5 and held <= cap < held + 502  # 5 segments of 501 steps (and no go-to-start)
        assert runner.episodes[-1].flag_name == "INVALID_PAYLOAD"
        # the next episode runs as usual
        posture = runner.start_episode(1, episode_id=2).posture
        assert runner.send_trajectory(posture[None], wait_time=HOLD).flag == Flag.OK


def test_kept_episodes_are_let_go_oldest_first_and_the_log_keeps_them_all(tmp_path, caplog):
    cap = 1600
    with Runner(make_task("reach"), log=tmp_path / "kept.h5", keep_episodes=True,
                limits=Limits(max_held_steps=cap)) as runner:
        for episode_id in range(3):  # each 3 segments (1503 steps), the fourth refused
            accepted, reply = segments_until_refused(runner, episode_id)
            assert accepted == 3 and reply.flag == Flag.INVALID_PAYLOAD and "it keeps its episodes" in reply.message
            kept = [ep.number for ep in runner.episodes]
            assert kept == [episode_id]  # the earlier ones let go: two never fit together
    assert "letting kept episodes go, oldest first (episode 0 now)" in caplog.text
    assert [ep.attrs["n_steps"] for ep in read_episodes(tmp_path / "kept.h5")] == [1503] * 3


@pytest.mark.slow  # paced: about 3 s of wall-clock time
def test_a_realtime_runner_streams_to_its_log_and_bounds_a_silent_hold_without_one(tmp_path):
    with Runner(make_task("reach"), log=tmp_path / "rt.h5", mode="realtime", keep_episodes=False) as runner:
        runner.stream_bytes = 1  # stream whatever is held before each command
        posture = runner.start_episode(3).posture
        for _ in range(3):
            assert runner.send_trajectory(posture[None], wait_time=0.2).flag == Flag.OK
        ep = runner.machine.last_episode
        assert ep.streamed_steps > 200 and ep.n_steps == ep.streamed_steps + ep.held_steps
        steps = runner.get_episode()
    (logged,) = read_episodes(tmp_path / "rt.h5")
    assert len(steps["q"]) == logged.attrs["n_steps"] == ep.n_steps
    np.testing.assert_array_equal(logged.steps["q"], steps["q"])
    # without a log, a silent learner's hold ends its episode once it reaches the bound
    with Runner(make_task("reach"), mode="realtime", limits=Limits(max_held_steps=600)) as runner:
        runner.start_episode(1)
        for _ in range(700):
            runner.idle(1)
        (ep,) = runner.episodes
        assert ep.flag_name == "TIMEOUT" and "max_held_steps" in ep.message and ep.n_steps <= 600


CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    from episodic.interface.commands import Limits
    from episodic.interface.vocabulary import Flag
    from episodic.runtime.runner import Runner
    from episodic.tasks import make_task

    CAP, ROOM = int(sys.argv[1]), int(sys.argv[2])
    runner = Runner(make_task("reach"), limits=Limits(max_held_steps=CAP))  # no log: episodes kept
    posture = runner.start_episode(1).posture
    runner.send_trajectory(posture[None])
    vm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + ROOM, resource.RLIM_INFINITY))
    flags = []
    for episode in range(2, 4):  # the worst command inside every limit: one sample held max_wait_time
        runner.start_episode(1000, episode_id=episode)
        for _ in range(12):
            reply = runner.send_trajectory(posture[None], wait_time=runner.limits.max_wait_time)
            flags.append(reply.flag.name)
            if reply.flag != Flag.OK:
                break
    held = sum(ep.n_steps for ep in runner.episodes)
    print(json.dumps({"flags": flags, "kept": held, "message": reply.message}))
""")


@pytest.mark.slow  # a subprocess simulating about 120,000 steps, 5 to 15 s
def test_the_worst_episodes_without_a_log_fit_in_a_memory_limit():
    # a runner without a log, kept episodes and all, under an address-space limit (RLIMIT_AS: the
    # session's memory cgroup belongs to whoever runs the tests, so none is made here) of what it
    # had once built plus 192 MiB: two episodes of one-sample segments each held 60 s (30,001
    # steps), which would hold 12 segments each (about 280 MB per episode at 0.77 kB per step)
    # without the bound, may hold 70,000 steps together (about 54 MB)
    cap, room = 70_000, 192 << 20
    done = subprocess.run([sys.executable, "-c", CHILD, str(cap), str(room)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    # each episode: 2 segments of 30,001 steps, then the one that would pass the bound refused
    assert out["flags"] == ["OK", "OK", "INVALID_PAYLOAD"] * 2, out
    assert "max_held_steps" in out["message"] and 0 < out["kept"] <= cap, out
