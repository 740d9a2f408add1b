"""Progress on long command-line work: `episodic serve` prints a line per finished episode
(unless --quiet) and never waits for a pipe nobody reads; `replay` shows a progress bar on a
terminal (a real pseudo-terminal here) and nothing in a pipe or under CI. Real processes, no
mocks."""
from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.progress import Lines, Progress, on_terminal
from tests.helpers import ROOT, Served, channel_name, run_episode, wave

N_EPISODES = 3
PAGE = 4096  # bytes: a pipe buffer's page on Linux
PIPE = 2 * PAGE  # a small pipe: select calls a pipe writable while one of its pages is free


def read_lines(proc: subprocess.Popen, n: int, timeout: float = 60) -> list[str]:
    """The next ``n`` whole lines of the process's stdout (fewer if it stays silent for
    ``timeout`` s), read from its file descriptor (the text stream's own buffer would hide
    lines from select)."""
    fd = proc.stdout.fileno()
    text = b""
    while text.count(b"\n") < n and select.select([fd], [], [], timeout)[0]:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        text += chunk
    assert text.endswith(b"\n") or not text, "a line came in part"
    return text.decode().splitlines()


def one_episode(client: Client, episode_id: int, home: np.ndarray, n: int = 100) -> None:
    assert client.send(StartCommand(episode_id, 1)).flag.name == "OK"
    assert client.send(TrajectoryCommand(episode_id, 1, 1, wave(home, n))).flag.name == "OK"


# -- serve's line per episode -------------------------------------------------------------
@pytest.mark.slow
def test_serve_prints_a_line_per_finished_episode(tmp_path):
    log = tmp_path / "run.h5"
    home = load_robot("wam").home
    with Served(channel_name(), log) as served, Client(served.channel) as client:
        one_episode(client, 11, home)
        first = read_lines(served.proc, 1)
        one_episode(client, 12, home, n=300)
        second = read_lines(served.proc, 1)
        assert client.send(StartCommand(13, 2)).flag.name == "OK"  # still running when the runner stops
        served.stop(check=True)
        rest = served.proc.stdout.read().splitlines()
    episodes = read_episodes(log)
    assert [e.attrs["episode_id"] for e in episodes] == [11, 12, 13]
    lines = first + second + rest
    assert len(lines) == 3
    for line, ep in zip(lines, episodes):
        assert line == (f"episode {int(ep.name)}: id {ep.attrs['episode_id']}, return {ep.attrs['return']:.6g}, "
                        f"flag {ep.attrs['flag_name']}, {ep.attrs['n_steps']} steps, "
                        f"success {'yes' if ep.attrs['success'] else 'no'}")
    # the episode the stop cut short before it moved: charged its horizon at reach's worst rate
    assert lines[2].startswith("episode 2: id 13, return -") and "flag INTERRUPTED" in lines[2]
    assert episodes[2].attrs["return"] == episodes[2].attrs["early_end"] < 0


@pytest.mark.slow
def test_serve_quiet_prints_no_episode_lines():
    home = load_robot("wam").home
    with Served(channel_name(), None, "--quiet") as served, Client(served.channel) as client:
        one_episode(client, 1, home)
        one_episode(client, 2, home)
        served.stop(check=True)
        assert served.proc.stdout.read() == ""
        assert "serving task reach" in served.banner


@pytest.mark.slow
def test_serve_never_waits_for_a_full_pipe():
    """A learner that never reads the runner's stdout (as the demo's) gets every episode served:
    the lines the pipe has no room for are dropped, and the next one says how many were."""
    home = load_robot("wam").home
    n = 200  # over 12 kB of lines
    with Served(channel_name(), None) as served, Client(served.channel) as client:
        fcntl.fcntl(served.proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, PIPE)
        start = time.monotonic()
        for episode_id in range(1, n + 1):
            one_episode(client, episode_id, home, n=10)
        assert time.monotonic() - start < 60
        shown = read_lines(served.proc, n, timeout=1)
        assert PAGE // 100 < len(shown) < n and shown[0].startswith("episode 0: id 1,")
        one_episode(client, n + 1, home, n=10)  # after the pipe was read: the count comes first
        note, last = read_lines(served.proc, 2)
        assert note == f"({n - len(shown)} lines not shown: the output was not read)"
        assert last.startswith(f"episode {n}: id {n + 1},")
        served.stop(check=True)


def test_lines_drop_what_a_full_pipe_cannot_take_and_count_it():
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE)
    with os.fdopen(read_end, "r") as reader, os.fdopen(write_end, "w") as writer:
        lines = Lines(writer)
        written = [lines(f"line {i:03d} " + "x" * 80) for i in range(100)]
        assert written[0] and not all(written)
        dropped = written.count(False)
        assert lines.dropped == dropped
        os.set_blocking(read_end, False)
        got = reader.read().splitlines()
        assert len(got) == written.count(True) and got[0].startswith("line 000")
        assert lines("after")
        assert reader.read().splitlines() == [f"({dropped} lines not shown: the output was not read)", "after"]
        assert lines.dropped == 0


# -- progress bars -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reach_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "reach.h5"
    with Runner(make_task("reach"), log=path, seed=0) as runner:
        for episode_id in range(1, N_EPISODES + 1):
            run_episode(runner, episode_id, n_segments=1)
    return path


def on_a_terminal(args: list[str], env: dict) -> tuple[int, str, str]:
    """Run ``python -m episodic ARGS`` with stderr on a pseudo-terminal: exit code, stdout, and
    what reached the terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "episodic", *args], stdout=subprocess.PIPE, stderr=slave,
                            text=True, env=env, cwd=ROOT)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = proc.stdout.read()
    proc.stdout.close()
    return proc.wait(60), out, seen.decode(errors="replace")


@pytest.mark.slow
def test_replay_shows_a_progress_bar_on_a_terminal_only(reach_log):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    code, out, terminal = on_a_terminal(["replay", str(reach_log)], env)
    assert code == 0 and out == f"{N_EPISODES} episodes replayed bit-identically\n"
    assert "replaying  [" in terminal and f"]  {N_EPISODES}/{N_EPISODES}" in terminal
    code, out, terminal = on_a_terminal(["replay", str(reach_log)], {**env, "CI": "true"})
    assert code == 0 and terminal == ""
    piped = subprocess.run([sys.executable, "-m", "episodic", "replay", str(reach_log)], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=120)
    assert piped.returncode == 0 and piped.stderr == ""
    assert piped.stdout == f"{N_EPISODES} episodes replayed bit-identically\n"


def test_progress_is_shown_only_on_a_terminal_outside_ci(monkeypatch, tmp_path):
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty, open(tmp_path / "file", "w") as plain:
            monkeypatch.delenv("CI", raising=False)
            assert on_terminal(tty) and not on_terminal(plain)
            for value in ("true", "1", "yes"):
                monkeypatch.setenv("CI", value)
                assert not on_terminal(tty)
            monkeypatch.setenv("CI", "false")
            assert on_terminal(tty)
            with Progress("counting", stream=plain) as bar:
                for k in range(1, 4):
                    bar(k, 3)
        assert (tmp_path / "file").read_text() == ""
    finally:
        os.close(master)
        os.close(slave)
