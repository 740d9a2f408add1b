"""The C and Octave/Matlab clients (clients/) against a real `episodic serve`: the C example runs an
episode; an episode sent from Octave gives the same log, bit for bit, as the same commands in
Python; clear errors on a silent or dead runner (also when its pid was reused), a version
mismatch, wrong sizes and another user's channel; a paused lock holder is taken over once; the
Octave learner of clients/README.md runs as printed; round-trip times from Octave and Python
(printed).

Needs a C compiler and make (C client), Octave with mkoctfile (apt-get install -y
--no-install-recommends octave liboctave-dev; .ci/run does). Missing tools skip these tests,
except in CI (CI=true), where they fail.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import Channel, remove
from episodic.bridge.layout import VERSION
from episodic.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.log import read_episodes, read_metadata
from episodic.protocol import Flag
from episodic.robot import load_robot
from episodic.runner import Runner
from episodic.tasks import make_task
from tests.helpers import ROOT, Served, assert_same_steps, channel_name, shm_leftovers, wave
from tests.test_channel_security import (ROOT_USER, LockWatch, foreign_message, impostor_for, planted_by,
                                         second_user, unlink)

pytestmark = pytest.mark.slow  # Octave, a C compiler and served runners

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
CONTEXT = [0.5, 0.2, 1.5]
ROBOT_KP = np.array([200, 300, 100, 100, 10, 10, 2.5])
C_CLIENT = ROOT / "clients" / "c"
MATLAB_CLIENT = ROOT / "clients" / "matlab"
OCTAVE_TESTS = ROOT / "tests" / "octave"
OCTAVE_EXIT_NOISE = "error: ignoring const execution_exception& while preparing to exit"  # Octave bug #62515


def require(*tools: str) -> None:
    """Skip (fail in CI) unless every tool is on PATH."""
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    message = (f"{', '.join(missing)} not found; install Octave and a C toolchain with "
               f"`apt-get install -y --no-install-recommends octave liboctave-dev` (.ci/run does)")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {message}")
    pytest.skip(message)


def my_leftovers() -> list[str]:
    """shm_leftovers() of this process's channels (other test runs may serve theirs meanwhile)."""
    return [n for n in shm_leftovers() if f".test{os.getpid()}-" in n]


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert my_leftovers() == [], "a test left shared-memory objects behind"


@pytest.fixture(scope="session")
def c_example(tmp_path_factory) -> Path:
    require("cc")
    build = tmp_path_factory.mktemp("c-client")
    if shutil.which("make"):
        cmd = ["make", "-s", "-C", str(C_CLIENT), f"BUILD={build}"]
    else:  # the Makefile's by-hand command
        cmd = ["cc", "-std=c99", "-O2", "-o", str(build / "example"), str(C_CLIENT / "example.c"),
               str(C_CLIENT / "episodic_client.c"), "-lrt", "-lpthread", "-lm"]
    out = subprocess.run(cmd, timeout=120, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return build / "example"


@pytest.fixture(scope="session")
def mex_dir(tmp_path_factory) -> Path:
    require("octave", "mkoctfile")
    build = tmp_path_factory.mktemp("mex")
    out = run_octave(f"disp(episodic_build('{build}'))", mex=None)
    assert (build / "episodic_mex.mex").is_file(), out.stdout + out.stderr
    return build


def octave_command() -> list[str]:
    if shutil.which("octave-cli"):
        return ["octave-cli", "--quiet", "--norc", "--no-history"]
    return ["octave", "--no-gui", "--quiet", "--norc", "--no-history"]


def run_octave(code: str, mex: Path | None, timeout: float = 60, check: bool = True, popen: bool = False):
    """Run Octave code with the wrappers, the test scripts and (given) the MEX build on the path;
    with ``popen`` return the running process instead of waiting for it."""
    paths = [MATLAB_CLIENT, OCTAVE_TESTS] + ([mex] if mex is not None else [])
    prelude = "".join(f"addpath('{p}');" for p in paths)
    cmd = octave_command() + ["--eval", prelude + code]
    if popen:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    out.stderr = out.stderr.replace(OCTAVE_EXIT_NOISE, "").strip()
    if check and out.returncode != 0:
        raise AssertionError(f"octave failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def cases(stdout: str) -> dict[str, tuple[str, str]]:
    """The 'CASE name | identifier | message' lines of tests/octave/expect_error.m."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("CASE "):
            name, ident, message = (part.strip() for part in line[5:].split("|", 2))
            out[name] = (ident, message)
    return out


@pytest.fixture(params=[VERSION - 1, VERSION + 1], ids=["previous", "next"])
def wrong_version(request):
    """A served channel whose header claims the previous or the next protocol version; the
    runner and that version."""
    with Served(channel_name()) as s:
        chan = Channel.attach(s.channel)
        blocks = Blocks(chan.mm, chan.layout)
        blocks.header["version"] = request.param
        try:
            yield s, request.param
        finally:
            blocks.header["version"] = VERSION
            blocks.release()
            chan.mm.close()


# -- C ---------------------------------------------------------------------------------------
def test_c_example_runs_a_reach_episode(c_example, tmp_path):
    with Served(channel_name(), tmp_path / "c.h5") as s:
        out = subprocess.run([str(c_example), s.channel], capture_output=True, text=True, timeout=60)
        assert s.stop() == 0
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("flag 0 (OK)") == 4 and "flags 0" in out.stdout
    start = re.search(r"start posture:((?: -?[\d.]+){7}) rad", out.stdout)
    np.testing.assert_allclose([float(x) for x in start.group(1).split()], HOME, rtol=0, atol=5e-5)  # reach's
    rows = int(re.search(r"log: (\d+) rows", out.stdout).group(1))
    (episode,) = read_episodes(tmp_path / "c.h5")
    assert episode.attrs["flag"] == Flag.OK and episode.attrs["n_steps"] == rows >= 1500
    assert [float(x) for x in re.findall(r"reward (-?[\d.]+)", out.stdout)[1:]] == pytest.approx(
        list(episode.segments["reward"]), abs=1e-6)


def test_c_client_errors(c_example, wrong_version):
    served, version = wrong_version
    out = subprocess.run([str(c_example), served.channel], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"channel '{served.channel}' speaks protocol version {version}, this client version {VERSION}" in out.stderr
    out = subprocess.run([str(c_example), "no-such-channel"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "no runner serves channel 'no-such-channel'" in out.stderr


def test_c_client_refuses_another_users_channel(c_example):
    other = second_user()
    channel = channel_name()
    planted = planted_by(other, channel)
    try:
        out = subprocess.run([str(c_example), channel], capture_output=True, text=True, timeout=60)
    finally:
        unlink(planted)
    assert out.returncode == 1 and "runner pid" not in out.stdout
    assert foreign_message(channel, other, ROOT_USER, planted[0]) in out.stderr, out.stderr
    assert "(the channel belongs to another user)" in out.stderr


def test_c_client_sees_a_dead_runner_whose_pid_was_reused(c_example):
    channel = channel_name()
    s = Served(channel)
    impostor = None
    try:
        dead = s.proc.pid
        s.stop(signal.SIGKILL)
        impostor = impostor_for(dead, channel)
        t0 = time.monotonic()
        out = subprocess.run([str(c_example), channel], capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        if impostor is not None:
            impostor.kill()
            impostor.wait()
        remove(channel)
    assert out.returncode == 1 and f"the runner of channel '{channel}' (pid " in out.stderr, out.stderr
    assert "has exited" in out.stderr and elapsed < 5  # a poll or so, not the example's 30 s timeout


def test_c_client_takes_a_paused_lock_holder_over_once(c_example):
    """A process holding the lock is stopped: the C example takes the lock over and runs its
    episode; the holder, continued, releases late; the lock never counts above 1."""
    with Served(channel_name()) as s:
        watch = LockWatch(s.channel)
        try:
            watch.pause()
            out = subprocess.run([str(c_example), s.channel], capture_output=True, text=True, timeout=60)
            assert watch.resume() == "released\nlocked again\n"
        finally:
            value = watch.close()
    assert out.returncode == 0 and out.stdout.count("flag 0 (OK)") == 4, out.stdout + out.stderr
    assert max(watch.values) <= 1 and value == 1, sorted(set(watch.values))


START_AT_THE_POSTURE_C = r"""
/* Start an episode at the task's start posture, print the start reply's posture, hold it for one
 * 0.2 s segment that begins there, print that reply's flag and posture. */
#include "episodic_client.h"
#include <stdio.h>
#include <stdlib.h>

static void print(const char *what, const ep_reply *r)
{
    int j;
    printf("%s %d %d", what, r->flag, r->n_dofs);
    for (j = 0; j < r->n_dofs; j++)
        printf(" %.17g", r->posture[j]);
    printf("\n");
}

int main(int argc, char **argv)
{
    ep_client *c;
    ep_reply r;
    double *q;
    int i, n;
    if (argc < 2 || ep_attach(argv[1], 10.0, &c) != EP_OK || ep_start(c, EP_NEXT, 1, NULL, NULL, 0, &r) != EP_OK) {
        fprintf(stderr, "%s\n", ep_last_error());
        return 1;
    }
    print("START", &r);
    n = r.n_dofs;
    q = malloc(sizeof(double) * 100 * (size_t)n);
    for (i = 0; i < 100 * n; i++)
        q[i] = r.posture[i % n];
    if (ep_send_trajectory(c, EP_NEXT, EP_DEFAULT, q, NULL, NULL, 100, 0.0, 0.0, &r) != EP_OK) {
        fprintf(stderr, "%s\n", ep_last_error());
        return 1;
    }
    print("SEGMENT", &r);
    free(q);
    ep_detach(c);
    return 0;
}
"""


def postures(stdout: str) -> dict[str, tuple[int, np.ndarray]]:
    """The 'NAME flag n_dofs posture...' lines of the start-posture programs: name -> (flag, posture)."""
    out = {}
    for line in stdout.splitlines():
        if not line.startswith(("START ", "SEGMENT ")):
            continue
        name, flag, n, *values = line.split()
        assert int(n) == len(values), line
        out[name] = (int(flag), np.array([float(v) for v in values]))
    return out


def assert_started_at_ball_in_cup_posture(found: dict[str, tuple[int, np.ndarray]]) -> None:
    """The start reply's posture is ball_in_cup's start posture (not home: j6, j7 differ); the
    segment begun there ran and holds it."""
    with Runner(make_task("ball_in_cup")) as r:
        expected, home, tolerance = r.task.start_posture(r.robot), r.robot.home, r.robot.goto.tolerance_q
    flag, start = found["START"]
    assert flag == Flag.OK
    np.testing.assert_allclose(start, expected, rtol=0, atol=tolerance)
    np.testing.assert_array_equal(np.flatnonzero(start != home), [5, 6])
    assert found["SEGMENT"][0] == Flag.OK
    np.testing.assert_array_equal(found["SEGMENT"][1], start)


def test_c_start_reply_gives_the_start_posture(tmp_path):
    require("cc")
    source = tmp_path / "start_posture.c"
    source.write_text(START_AT_THE_POSTURE_C)
    program = tmp_path / "start_posture"
    built = subprocess.run(["cc", "-std=c99", "-O2", "-Wall", f"-I{C_CLIENT}", "-o", str(program), str(source),
                            str(C_CLIENT / "episodic_client.c"), "-lrt", "-lpthread"],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    with Served(channel_name(), task="ball_in_cup") as s:
        out = subprocess.run([str(program), s.channel], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert_started_at_ball_in_cup_posture(postures(out.stdout))


# -- Octave ----------------------------------------------------------------------------------
def test_octave_start_reply_gives_the_start_posture(mex_dir):
    with Served(channel_name(), task="ball_in_cup") as s:
        code = f"""
            SLConnect('{s.channel}');
            [~, ~, f, info] = SLSendTrajectory([], 0, 0, 1, [], 10);
            printf('START %d %d%s\\n', f, columns(info.posture), sprintf(' %.17g', info.posture));
            [~, ~, f, info] = SLSendTrajectory(repmat(info.posture, 100, 1), 0, 1, 1, [], 10);
            printf('SEGMENT %d %d%s\\n', f, columns(info.posture), sprintf(' %.17g', info.posture));
            SLDisconnect();
        """
        out = run_octave(code, mex_dir)
    assert_started_at_ball_in_cup_posture(postures(out.stdout))


def reach_commands(episode_id: int):
    """Start at a posture with a context, a gain set, then three segments: 250 Hz samples; with
    qd and qdd; held at the end."""
    posture = HOME + np.array([0.05, 0, 0, -0.05, 0, 0, 0])  # within max_start_jump of the first segment
    q2 = wave(HOME, phase=0.1)
    qd2 = np.gradient(q2, 1 / 500, axis=0)
    qdd2 = np.gradient(qd2, 1 / 500, axis=0)
    gains = np.column_stack([0.5 * ROBOT_KP, 0.05 * ROBOT_KP, 0.01 * ROBOT_KP])
    commands = [
        StartCommand(episode_id, 4, posture=posture, context=np.array(CONTEXT)),
        GainsCommand(episode_id, 1, 4, gains[:, 0], gains[:, 1], gains[:, 2], feedforward="inverse_dynamics",
                     wait_time=0.05),
        TrajectoryCommand(episode_id, 2, 4, wave(HOME), rate=250.0),
        TrajectoryCommand(episode_id, 3, 4, q2, qd=qd2, qdd=qdd2),
        TrajectoryCommand(episode_id, 4, 4, wave(HOME, phase=0.2), wait_time=0.1),
    ]
    files = {"posture": posture, "context": np.array(CONTEXT), "gains": gains, "q1": commands[2].q,
             "q2": q2, "qd2": qd2, "qdd2": qdd2, "q3": commands[4].q}
    return commands, files


def test_octave_episode_is_bit_identical_to_python(mex_dir, tmp_path):
    episode_id = 4242
    commands, files = reach_commands(episode_id)
    data = tmp_path / "data"
    data.mkdir()
    for name, value in files.items():
        np.ascontiguousarray(value, dtype="<f8").tofile(data / f"{name}.bin")
    with Served(channel_name(), tmp_path / "octave.h5", "--seed", "7") as s:
        run_octave(f"reach_episode('{s.channel}', '{data}', {episode_id})", mex_dir)
        assert s.stop() == 0
    with Runner(make_task("reach"), log=tmp_path / "python.h5", seed=7) as runner:
        python_replies = [runner.send(c) for c in commands]
    assert [r.flag for r in python_replies] == [Flag.OK] * 5

    replies = np.fromfile(data / "replies.bin").reshape(5, -1)  # reward, flag, episode_id, n_steps, state, posture
    assert replies[:, 0].tobytes() == np.array([r.reward for r in python_replies]).tobytes()
    assert list(replies[:, 1]) == [0] * 5 and list(replies[:, 2]) == [episode_id] * 5
    assert list(replies[:, 3]) == [r.n_steps for r in python_replies]
    assert replies[:, 4:-7].tobytes() == np.array([r.state for r in python_replies]).tobytes()
    assert replies[:, -7:].tobytes() == np.array([r.posture for r in python_replies]).tobytes()

    (octave,), (python,) = read_episodes(tmp_path / "octave.h5"), read_episodes(tmp_path / "python.h5")
    assert octave.attrs["episode_id"] == python.attrs["episode_id"] == episode_id
    assert octave.attrs["return"] == python.attrs["return"]
    shapes = {line.split()[0]: (int(line.split()[1]), int(line.split()[2]))
              for line in (data / "fields.txt").read_text().splitlines()}
    fetched = {name: np.fromfile(data / f"{name}.bin").reshape(shape) for name, shape in shapes.items()}
    assert set(python.steps) <= set(fetched)
    assert_same_steps(python, octave, fetched)
    # SLGetEpisode: q is steps x joints, equal to the log's; one field per task state column
    assert fetched["q"].shape == (octave.attrs["n_steps"], 7)
    np.testing.assert_array_equal(fetched["q"], octave.steps["q"])
    for i, name in enumerate(octave.state_columns):
        np.testing.assert_array_equal(fetched[name][:, 0], octave.steps["task_state"][:, i])


def test_c_and_octave_are_refused_a_channel_another_client_holds(c_example, mex_dir):
    """A Python client holds the channel: the C example and SLConnect are refused with the holder's
    pid; once it lets go, the C example runs."""
    with Served(channel_name()) as s:
        with Client(s.channel, timeout=10):
            c = subprocess.run([str(c_example), s.channel], capture_output=True, text=True, timeout=60)
            octave = run_octave(f"expect_error('held', @() SLConnect('{s.channel}'));", mex_dir)
        holder = f"in use by another client (pid {os.getpid()})"
        assert c.returncode != 0 and holder in c.stdout + c.stderr
        assert "CASE held | episodic:channelInUse |" in octave.stdout and holder in octave.stdout
        after = subprocess.run([str(c_example), s.channel], capture_output=True, text=True, timeout=60)
        assert after.returncode == 0, after.stdout + after.stderr


def test_octave_errors_name_the_problem(mex_dir, tmp_path):
    with Served(channel_name(), tmp_path / "errors.h5") as s:
        code = f"""
            home = [0, 0.5876, 0, 1.36, 0, -0.321, -1.57];
            q = repmat(home, 50, 1);
            expect_error('before_connect', @() SLSendTrajectory(q, 0, 1, 1, [], 5));
            expect_error('no_channel', @() SLConnect('no-such-channel'));
            SLConnect('{s.channel}');
            [~, ~, f1, i1] = SLSendTrajectory([], 0, 0, 2, [0.5 0.2 1.5], 10);
            [~, ~, f2, i2] = SLSendTrajectory([], 0, 0, 2, [0.5 0.2 1.5], 10);
            printf('IDS %d %d %d\\n', f1, f2, i2.episode_id - i1.episode_id);
            expect_error('width', @() SLSendTrajectory(q(:, 1:6), 0, 1, 2, [], 5));
            expect_error('transposed', @() SLSendTrajectory(q.', 0, 1, 2, [], 5));
            expect_error('qd_size', @() SLSendTrajectory(struct('q', q, 'qd', q(1:10, :)), 0, 1, 2, [], 5));
            expect_error('posture', @() SLSendTrajectory([1 2 3], 0, 0, 2, [], 5));
            expect_error('context', @() SLSendTrajectory([], 0, 0, 2, zeros(1, 65), 5));
            expect_error('gains', @() SLSendController(ones(6, 3), 0, 1, 2, [], 5));
            expect_error('gains_index', @() SLSendController(ones(7, 3), 0, 0, 2, [], 5));
            expect_error('mode', @() SLSendController(ones(7, 3), 0, 1, 2, [], 5, 'magic'));
            expect_error('timeout_arg', @() SLSendTrajectory(q, 0, 1, 2, [], -1));
            [~, ~, f] = SLSendTrajectory(q, 0, 2, 2, [], 5);
            printf('OUT_OF_ORDER %d\\n', f);
            [~, ~, f, info] = SLSendTrajectory([], 0, 0, 2, 1:5, 5);
            printf('INVALID %d %s\\n', f, info.message);
            SLDisconnect();
            expect_error('after_disconnect', @() SLGetEpisode());
        """
        out = run_octave(code, mex_dir)
    found = cases(out.stdout)
    ch = s.channel
    assert found["before_connect"][0] == "episodic:notConnected" and "SLConnect" in found["before_connect"][1]
    assert found["no_channel"][0] == "episodic:noChannel"
    assert "no runner serves channel 'no-such-channel'" in found["no_channel"][1]
    assert "IDS 0 0 1" in out.stdout  # each start takes the next episode id
    assert found["width"] == ("episodic:size", "SLSendTrajectory: the trajectory must be steps x 7 "
                              "(one row per time step, one column per joint), got 50 x 6")
    assert found["transposed"][0] == "episodic:size" and "got 7 x 50; pass its transpose" in found["transposed"][1]
    assert found["qd_size"][0] == "episodic:size" and "qd must have the trajectory's size 50 x 7" in found["qd_size"][1]
    assert found["posture"][0] == "episodic:size" and "start posture, 1 x 7" in found["posture"][1]
    assert found["context"][0] == "episodic:size" and f"channel '{ch}' takes at most 64" in found["context"][1]
    assert found["gains"][0] == "episodic:size" and "7 x 3 ([kp kd ki]" in found["gains"][1]
    assert found["gains_index"][0] == "episodic:argument" and "trajIdx 0 starts an episode" in found["gains_index"][1]
    assert found["mode"][0] == "episodic:argument" and "feedforward mode" in found["mode"][1]
    assert found["timeout_arg"][0] == "episodic:argument" and "timeOut" in found["timeout_arg"][1]
    assert f"OUT_OF_ORDER {int(Flag.OUT_OF_ORDER)}" in out.stdout  # a runner's refusal is a flag, not an error
    assert f"INVALID {int(Flag.INVALID_PAYLOAD)} " in out.stdout and "reach takes" in out.stdout
    assert found["after_disconnect"][0] == "episodic:notConnected"


def test_octave_version_mismatch(mex_dir, wrong_version):
    served, version = wrong_version
    out = run_octave(f"expect_error('version', @() SLConnect('{served.channel}'))", mex_dir)
    ident, message = cases(out.stdout)["version"]
    assert ident == "episodic:version"
    assert (f"the runner on channel '{served.channel}' speaks protocol version {version}, "
            f"this client version {VERSION}") in message


def test_octave_refuses_another_users_channel(mex_dir):
    other = second_user()
    channel = channel_name()
    planted = planted_by(other, channel)
    try:
        out = run_octave(f"expect_error('foreign', @() SLConnect('{channel}'))", mex_dir)
    finally:
        unlink(planted)
    ident, message = cases(out.stdout)["foreign"]
    assert ident == "episodic:foreignChannel"
    assert foreign_message(channel, other, ROOT_USER, planted[0]) in message


def test_octave_without_the_mex_file_says_how_to_build_it():
    require("octave")
    out = run_octave("expect_error('unbuilt', @() SLConnect('default'))", mex=None)
    ident, message = cases(out.stdout)["unbuilt"]
    assert ident == "episodic:notBuilt" and "episodic_build()" in message


README_PATHS = "addpath('clients/matlab', 'clients/matlab/build');"


def test_readme_octave_learner_runs_as_printed(mex_dir):
    readme = (ROOT / "clients" / "README.md").read_text()
    section = readme.split("### A learner in Octave", 1)[1]
    (learner,) = re.findall(r"^```matlab\n(.*?)^```", section, flags=re.M | re.S)
    assert learner.count(README_PATHS) == 1 and learner.count("SLConnect('default')") == 1
    with Served(channel_name()) as s:
        code = learner.replace(README_PATHS, "").replace("SLConnect('default')", f"SLConnect('{s.channel}')")
        out = run_octave(code, mex_dir)
    lines = [line.split() for line in out.stdout.splitlines() if "reward" in line]
    assert len(lines) == 20 and all(line[-2:] == ["flag", "0"] for line in lines), out.stdout


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"octave exited early:\n{proc.stdout.read()}\n{proc.stderr.read()}")
        assert time.monotonic() < deadline, f"no {path.name} marker from octave"
        time.sleep(0.02)


def test_octave_silent_then_dead_runner(mex_dir, tmp_path):
    sync = tmp_path / "sync"
    sync.mkdir()
    channel = channel_name()
    s = Served(channel)
    octave = None
    try:
        assert s.ready, s.banner
        octave = run_octave(f"dead_runner('{channel}', '{sync}')", mex_dir, popen=True)
        wait_for(sync / "started", octave)
        os.kill(s.proc.pid, signal.SIGSTOP)
        (sync / "stopped").touch()
        wait_for(sync / "timed_out", octave)
        os.kill(s.proc.pid, signal.SIGCONT)
        (sync / "continued").touch()
        wait_for(sync / "restarted", octave)
        s.stop(signal.SIGKILL)  # reaped: its pid is gone
        (sync / "killed").touch()
        stdout, stderr = octave.communicate(timeout=60)
    finally:
        if octave is not None and octave.poll() is None:
            octave.kill()
            octave.wait()
        if s.proc.poll() is None:
            os.kill(s.proc.pid, signal.SIGCONT)
            s.stop(signal.SIGKILL)
        remove(channel)  # the killed runner's objects
    assert octave.returncode == 0, stdout + stderr
    found = cases(stdout)
    assert "START 0" in stdout and "RESTART 0 1" in stdout
    assert found["silent"] == ("episodic:timeout", f"SLSendTrajectory: the runner on channel "
                               f"'{channel}' did not answer within 0.5 s")
    assert 0.5 <= float(re.search(r"ELAPSED silent ([\d.]+)", stdout).group(1)) < 2
    assert found["dead"][0] == "episodic:runnerGone"
    assert f"the runner of channel '{channel}' (pid {s.proc.pid}) has exited" in found["dead"][1]
    assert float(re.search(r"ELAPSED dead ([\d.]+)", stdout).group(1)) < 2  # found out within a poll, not the timeout
    assert found["after"][0] == "episodic:notConnected" and f"channel '{channel}' has exited" in found["after"][1]


def test_round_trip_time_octave_vs_python(mex_dir, capsys):
    """A 2 s segment (1000 x 7) and its log fetch, median of 20, from Octave and from Python."""
    n = 20
    q = wave(HOME, n=1000)
    with Served(channel_name()) as s:
        out = run_octave(f"round_trip('{s.channel}', {n})", mex_dir, timeout=120)
        found = re.search(r"ROUNDTRIP ([\d.]+) SEND ([\d.]+)", out.stdout)
        octave_median, octave_send = float(found.group(1)), float(found.group(2))
        times, sends = [], []
        with Client(s.channel, timeout=10) as client:
            for _ in range(n + 1):
                client.start_episode(context=CONTEXT, max_commands=1)
                t0 = time.perf_counter()
                reply = client.send_trajectory(q)
                sends.append(time.perf_counter() - t0)
                log = client.get_episode()
                times.append(time.perf_counter() - t0)
                assert reply.flag == Flag.OK and len(log["q"]) >= 1000
    python_median, python_send = statistics.median(times[1:]), statistics.median(sends[1:])
    with capsys.disabled():
        print(f"\nround trip of a 2 s segment (1000 x 7) with its log, median of {n}: "
              f"Octave {1e3 * octave_median:.1f} ms (segment alone {1e3 * octave_send:.1f} ms), "
              f"Python {1e3 * python_median:.1f} ms (segment alone {1e3 * python_send:.1f} ms)")
    assert octave_median < 5 * python_median + 0.05  # the MEX adds copies, not another order of magnitude


# -- a six-joint robot: the PUMA 560 -----------------------------------------------------------
PUMA = load_robot("puma560")


def test_c_example_runs_a_puma560_episode(c_example, tmp_path):
    """The C example takes its joint count and rate from the header: six joints on the PUMA."""
    with Served(channel_name(), tmp_path / "c.h5", "--robot", "puma560") as s:
        out = subprocess.run([str(c_example), s.channel], capture_output=True, text=True, timeout=60)
        assert s.stop() == 0
    assert out.returncode == 0, out.stdout + out.stderr
    assert ", 6 joints, 4 state columns, 500 Hz" in out.stdout
    assert out.stdout.count("flag 0 (OK)") == 4 and "flags 0" in out.stdout
    start = re.search(r"start posture:((?: -?[\d.]+)+) rad", out.stdout)
    np.testing.assert_allclose([float(x) for x in start.group(1).split()], PUMA.home, rtol=0, atol=5e-5)
    assert read_metadata(tmp_path / "c.h5")["robot"] == "puma560"
    (episode,) = read_episodes(tmp_path / "c.h5")
    rows = int(re.search(r"log: (\d+) rows", out.stdout).group(1))
    assert episode.attrs["flag"] == Flag.OK and episode.attrs["n_steps"] == rows >= 1500
    assert episode.steps["q"].shape == (rows, 6)
    final = re.search(r"final q\[0\.\.2\] = (-?[\d.]+) (-?[\d.]+) (-?[\d.]+)", out.stdout)
    np.testing.assert_allclose([float(x) for x in final.groups()], episode.steps["q"][-1, :3], rtol=0, atol=5e-5)
    assert [float(x) for x in re.findall(r"reward (-?[\d.]+)", out.stdout)[1:]] == pytest.approx(
        list(episode.segments["reward"]), abs=1e-6)


def puma_commands(episode_id: int) -> list:
    """A start with a context, a 500 Hz wave from home, a 250 Hz wave held 0.1 s at its end."""
    q1 = wave(PUMA.home)
    q2 = wave(q1[-1], n=250, phase=0.1)
    return [StartCommand(episode_id, 2, context=np.array(CONTEXT)),
            TrajectoryCommand(episode_id, 1, 2, q1),
            TrajectoryCommand(episode_id, 2, 2, q2, rate=250.0, wait_time=0.1)]


OCTAVE_PUMA_EPISODE = """
info = SLConnect('{channel}');
printf('NDOFS %d\\n', info.n_dofs);
n = info.n_dofs;
SLEpisodeId({episode_id});
replies = [];
[r, s, f, i] = SLSendTrajectory([], 0, 0, 2, [{context}], 10);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
[r, s, f, i] = SLSendTrajectory(read_rows('{data}/q1.bin', n), 0, 1, 2, [], 10);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
[r, s, f, i] = SLSendTrajectory(read_rows('{data}/q2.bin', n), 0.1, 2, 2, [], 10, 250);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
write_rows('{data}/replies.bin', replies);
episode = SLGetEpisode();
names = fieldnames(episode);
fid = fopen('{data}/fields.txt', 'w');
for k = 1:numel(names)
  value = episode.(names{{k}});
  fprintf(fid, '%s %d %d\\n', names{{k}}, size(value, 1), size(value, 2));
  write_rows(['{data}/' names{{k}} '.bin'], value);
end
fclose(fid);
expect_error('width', @() SLSendTrajectory(zeros(10, 7), 0, 1, 1, [], 5));
expect_error('posture', @() SLSendTrajectory(zeros(1, 7), 0, 0, 1, [], 5));
SLDisconnect();
"""


def test_octave_puma560_episode_is_bit_identical_to_python(mex_dir, tmp_path):
    """An Octave episode on a served PUMA (sizes from SLConnect's info) logs what the same
    commands log in Python, bit for bit; Octave refuses seven-joint arrays naming six joints."""
    episode_id = 560
    commands = puma_commands(episode_id)
    data = tmp_path / "data"
    data.mkdir()
    for name, value in (("q1", commands[1].q), ("q2", commands[2].q)):
        np.ascontiguousarray(value, dtype="<f8").tofile(data / f"{name}.bin")
    with Served(channel_name(), tmp_path / "octave.h5", "--seed", "7", "--robot", "puma560") as s:
        code = OCTAVE_PUMA_EPISODE.format(channel=s.channel, episode_id=episode_id, data=data,
                                          context=" ".join(map(str, CONTEXT)))
        out = run_octave(code, mex_dir)
        assert s.stop() == 0
    assert "NDOFS 6" in out.stdout
    found = cases(out.stdout)
    assert found["width"] == ("episodic:size", "SLSendTrajectory: the trajectory must be steps x 6 "
                              "(one row per time step, one column per joint), got 10 x 7")
    assert found["posture"][0] == "episodic:size" and "start posture, 1 x 6" in found["posture"][1]
    with Runner(make_task("reach"), "puma560", log=tmp_path / "python.h5", seed=7) as runner:
        python_replies = [runner.send(c) for c in commands]
    assert [r.flag for r in python_replies] == [Flag.OK] * 3

    replies = np.fromfile(data / "replies.bin").reshape(3, -1)  # reward, flag, episode_id, n_steps, state, posture
    assert replies.shape[1] == 4 + 4 + 6
    assert replies[:, 0].tobytes() == np.array([r.reward for r in python_replies]).tobytes()
    assert list(replies[:, 1]) == [0] * 3 and list(replies[:, 2]) == [episode_id] * 3
    assert list(replies[:, 3]) == [r.n_steps for r in python_replies]
    assert replies[:, -6:].tobytes() == np.array([r.posture for r in python_replies]).tobytes()

    (octave,), (python,) = read_episodes(tmp_path / "octave.h5"), read_episodes(tmp_path / "python.h5")
    assert octave.attrs["return"] == python.attrs["return"]
    shapes = {line.split()[0]: (int(line.split()[1]), int(line.split()[2]))
              for line in (data / "fields.txt").read_text().splitlines()}
    fetched = {name: np.fromfile(data / f"{name}.bin").reshape(shape) for name, shape in shapes.items()}
    assert_same_steps(python, octave, fetched)
    assert fetched["q"].shape == (octave.attrs["n_steps"], 6) and fetched["u"].shape[1] == 6


def test_readme_octave_learner_runs_on_the_puma560(mex_dir):
    """The README's learner sizes its offsets from SLConnect's info, so it runs on six joints too."""
    readme = (ROOT / "clients" / "README.md").read_text()
    (learner,) = re.findall(r"^```matlab\n(.*?)^```", readme.split("### A learner in Octave", 1)[1],
                            flags=re.M | re.S)
    with Served(channel_name(), None, "--robot", "puma560") as s:
        code = learner.replace(README_PATHS, "").replace("SLConnect('default')", f"SLConnect('{s.channel}')")
        out = run_octave(code, mex_dir)
    lines = [line.split() for line in out.stdout.splitlines() if "reward" in line]
    assert len(lines) == 20 and all(line[-2:] == ["flag", "0"] for line in lines), out.stdout
