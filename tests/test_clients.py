"""The C and Octave/Matlab clients (clients/) against a real `episodic serve`: the C example runs an
episode; an episode sent from Octave gives the same log, bit for bit, as the same commands in
Python; a population sent in batches from C (ep_evaluate) and Octave (epEvaluateBatch) gives the
results and logs of episodic.tools.batch.evaluate and Client.evaluate, bit for bit, also split into
several batches; clear errors on a silent or dead runner (also when its pid was reused), a version
mismatch, wrong sizes, another user's channel and a batch to a realtime runner; a paused lock
holder is taken over once; the Octave learners of clients/README.md run as printed; round-trip
times from Octave and Python (printed).

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
from episodic.bridge.batches import ARRAYS
from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import Channel, remove
from episodic.bridge.codec import command_parts
from episodic.bridge.layout import BATCH_COMMAND, MESSAGE_BYTES, VERSION
from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.batch import evaluate
from tests.helpers import ROOT, Served, assert_same_steps, channel_name, shared_runner, shm_leftovers, wave
from tests.test_bridge import ENDINGS, Seen, assert_endings, reachable_target
from tests.test_channel_security import (
    ROOT_USER,
    LockWatch,
    foreign_message,
    impostor_for,
    planted_by,
    second_user,
    unlink,
)

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
    before = my_leftovers()  # the module's shared runners' channels
    yield
    assert my_leftovers() == before, "a test left shared-memory objects behind"


# Runners shared by the tests that need one serving and leave it serving (each test starts its own
# episodes); the tests that read a runner's log, stop or kill it start their own.
@pytest.fixture(scope="module")
def reach_runner():
    """reach on the WAM, evaluating batches on two threads (as clients/README.md serves the
    population learner)."""
    with shared_runner(None, "--threads", "2") as runner:
        yield runner


@pytest.fixture(scope="module")
def ball_in_cup_runner():
    with shared_runner(task="ball_in_cup") as runner:
        yield runner


@pytest.fixture(scope="module")
def small_batch_runner():
    """reach taking at most two episodes per batch (clients split larger populations)."""
    with shared_runner(None, "--max-batch", "2") as runner:
        yield runner


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
def wrong_version(request, reach_runner):
    """The shared runner's channel, its header claiming the previous or the next protocol version
    while the test runs; the runner and that version."""
    chan = Channel.attach(reach_runner.channel)
    blocks = Blocks(chan.mm, chan.layout)
    blocks.header["version"] = request.param
    try:
        yield reach_runner, request.param
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
    ended = re.search(r"^episode \d+: return (-?[\d.]+), flags 0, (solved|not solved)$", out.stdout, flags=re.M)
    assert float(ended.group(1)) == pytest.approx(episode.attrs["return"], abs=1e-6)  # the ending reply's
    assert (ended.group(2) == "solved") == bool(episode.attrs["success"])


def test_c_example_evaluates_a_population(c_example, reach_runner):
    """`example CHANNEL 3`: after its episode, three episodes in one ep_evaluate call, with the
    next episode ids, each a 1 s segment of its own amplitude."""
    out = subprocess.run([str(c_example), reach_runner.channel, "3"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    episode = int(re.search(r"^episode (\d+): return", out.stdout, flags=re.M).group(1))
    found = re.findall(r"^population episode (\d) \(id (\d+)\): return (-?[\d.]+), flag 0 \(OK\), 500 steps, "
                       r"not solved$", out.stdout, flags=re.M)
    assert [(int(k), int(i)) for k, i, _ in found] == [(k, episode + 1 + k) for k in range(3)], out.stdout
    assert len({r for _, _, r in found}) == 3


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


@pytest.mark.serial
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


def test_c_client_takes_a_paused_lock_holder_over_once(c_example, reach_runner):
    """A process holding the lock is stopped: the C example takes the lock over and runs its
    episode; the holder, continued, releases late; the lock never counts above 1."""
    watch = LockWatch(reach_runner.channel)
    try:
        watch.pause()
        out = subprocess.run([str(c_example), reach_runner.channel], capture_output=True, text=True, timeout=60)
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


def build_c(source: str, folder: Path, name: str) -> Path:
    """The C program ``source`` built with the C client as ``folder/name`` (skipped without cc)."""
    require("cc")
    (folder / f"{name}.c").write_text(source)
    built = subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wno-unused-result", f"-I{C_CLIENT}", "-o",
                            str(folder / name), str(folder / f"{name}.c"), str(C_CLIENT / "episodic_client.c"),
                            "-lrt", "-lpthread"], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0 and not built.stderr, built.stderr
    return folder / name


def test_c_start_reply_gives_the_start_posture(ball_in_cup_runner, tmp_path):
    program = build_c(START_AT_THE_POSTURE_C, tmp_path, "start_posture")
    out = subprocess.run([str(program), ball_in_cup_runner.channel], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert_started_at_ball_in_cup_posture(postures(out.stdout))


ENDINGS_C = r"""
/* The episodes of tests/test_bridge.py's ENDINGS:
 *     endings CHANNEL [X Y Z MOTION SAMPLES]...
 * one episode per group: start with the target X Y Z (m, the context; max_commands 1), then the
 * start posture held SAMPLES samples (MOTION "hold"), or with joint 1 stepped by 1.5 rad after 10
 * samples ("jump"), or a reset ("reset"). Prints each reply as "REPLY episode flag episode_done
 * success reward episode_return n_steps". */
#include "episodic_client.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print(int episode, const ep_reply *r)
{
    printf("REPLY %d %d %d %d %.17g %.17g %d\n", episode, r->flag, r->episode_done, r->success, r->reward,
           r->episode_return, r->n_steps);
}

int main(int argc, char **argv)
{
    ep_client *c;
    ep_reply r;
    int e, i, n, samples, rc = EP_OK;
    if (argc < 2 || (argc - 2) % 5 != 0 || ep_attach(argv[1], 10.0, &c) != EP_OK) {
        fprintf(stderr, "usage: endings CHANNEL [X Y Z MOTION SAMPLES]... (%s)\n", ep_last_error());
        return 1;
    }
    for (e = 0; 2 + 5 * e < argc && rc == EP_OK; e++) {
        char **a = argv + 2 + 5 * e;
        double target[3] = {atof(a[0]), atof(a[1]), atof(a[2])}, *q;
        if ((rc = ep_start(c, EP_NEXT, 1, NULL, target, 3, &r)) != EP_OK)
            break;
        print(e, &r);
        if (strcmp(a[3], "reset") == 0) {
            if ((rc = ep_reset(c, &r)) == EP_OK)
                print(e, &r);
            continue;
        }
        samples = atoi(a[4]);
        n = r.n_dofs;
        q = malloc(sizeof(double) * (size_t)(samples * n));
        for (i = 0; i < samples * n; i++)
            q[i] = r.posture[i % n] + (strcmp(a[3], "jump") == 0 && i % n == 0 && i / n >= 10 ? 1.5 : 0.0);
        if ((rc = ep_send_trajectory(c, EP_NEXT, EP_DEFAULT, q, NULL, NULL, samples, 0.0, 0.0, &r)) == EP_OK)
            print(e, &r);
        free(q);
    }
    if (rc != EP_OK)
        fprintf(stderr, "%s\n", ep_last_error());
    ep_detach(c);
    return rc != EP_OK;
}
"""


def ending_arguments(target: np.ndarray) -> list[list[str]]:
    """Per episode of ENDINGS: its target x y z (m, 17 digits), motion and samples, as text."""
    out = []
    for ending in ENDINGS:
        xyz = target if ending.at_target else np.array(CONTEXT, dtype=float)
        out.append([f"{v:.17g}" for v in xyz] + [ending.motion, str(ending.samples)])
    return out


def seen_replies(stdout: str) -> list[list[Seen]]:
    """The "REPLY episode flag done success reward return n_steps" lines, one list per episode."""
    out: list[list[Seen]] = [[] for _ in ENDINGS]
    for line in stdout.splitlines():
        if line.startswith("REPLY "):
            episode, flag, done, success, reward, total, n_steps = line.split()[1:]
            out[int(episode)].append(Seen(int(flag), bool(int(done)), bool(int(success)), float(reward),
                                          float(total), int(n_steps)))
    return out


def test_c_reply_that_ends_an_episode_says_how_and_the_logs_return(tmp_path):
    program = build_c(ENDINGS_C, tmp_path, "endings")
    arguments = [a for episode in ending_arguments(reachable_target()) for a in episode]
    with Served(channel_name(), tmp_path / "c.h5") as s:
        out = subprocess.run([str(program), s.channel, *arguments], capture_output=True, text=True, timeout=60)
        assert s.stop() == 0
    assert out.returncode == 0, out.stdout + out.stderr
    assert_endings(seen_replies(out.stdout), read_episodes(tmp_path / "c.h5"))


# -- Octave ----------------------------------------------------------------------------------
def test_octave_start_reply_gives_the_start_posture(mex_dir, ball_in_cup_runner):
    code = f"""
        epConnect('{ball_in_cup_runner.channel}');
        [~, ~, f, info] = epSendTrajectory([], 0, 0, 1, [], 10);
        printf('START %d %d%s\\n', f, columns(info.posture), sprintf(' %.17g', info.posture));
        [~, ~, f, info] = epSendTrajectory(repmat(info.posture, 100, 1), 0, 1, 1, [], 10);
        printf('SEGMENT %d %d%s\\n', f, columns(info.posture), sprintf(' %.17g', info.posture));
        epDisconnect();
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


def test_octave_reply_that_ends_an_episode_says_how_and_the_logs_return(mex_dir, tmp_path):
    episodes = ending_arguments(reachable_target())
    targets = "; ".join(" ".join(e[:3]) for e in episodes)
    motions = ", ".join(f"'{e[3]}'" for e in episodes)
    samples = " ".join(e[4] for e in episodes)
    with Served(channel_name(), tmp_path / "octave.h5") as s:
        out = run_octave(f"ending_episodes('{s.channel}', [{targets}], {{{motions}}}, [{samples}])", mex_dir)
        assert s.stop() == 0
    assert_endings(seen_replies(out.stdout), read_episodes(tmp_path / "octave.h5"))


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
    # epGetEpisode: q is steps x joints, equal to the log's; one field per task state column
    assert fetched["q"].shape == (octave.attrs["n_steps"], 7)
    np.testing.assert_array_equal(fetched["q"], octave.steps["q"])
    for i, name in enumerate(octave.state_columns):
        np.testing.assert_array_equal(fetched[name][:, 0], octave.steps["task_state"][:, i])


def test_c_and_octave_are_refused_a_channel_another_client_holds(c_example, mex_dir, reach_runner):
    """A Python client holds the channel: the C example and epConnect are refused with the holder's
    pid; once it lets go, the C example runs."""
    with Client(reach_runner.channel, timeout=10):
        c = subprocess.run([str(c_example), reach_runner.channel], capture_output=True, text=True, timeout=60)
        octave = run_octave(f"expect_error('held', @() epConnect('{reach_runner.channel}'));", mex_dir)
    holder = f"in use by another client (pid {os.getpid()})"
    assert c.returncode != 0 and holder in c.stdout + c.stderr
    assert "CASE held | episodic:channelInUse |" in octave.stdout and holder in octave.stdout
    after = subprocess.run([str(c_example), reach_runner.channel], capture_output=True, text=True, timeout=60)
    assert after.returncode == 0, after.stdout + after.stderr


def test_octave_errors_name_the_problem(mex_dir, reach_runner):
    code = f"""
        home = [0, 0.5876, 0, 1.36, 0, -0.321, -1.57];
        q = repmat(home, 50, 1);
        expect_error('before_connect', @() epSendTrajectory(q, 0, 1, 1, [], 5));
        expect_error('no_channel', @() epConnect('no-such-channel'));
        epConnect('{reach_runner.channel}');
        [~, ~, f1, i1] = epSendTrajectory([], 0, 0, 2, [0.5 0.2 1.5], 10);
        [~, ~, f2, i2] = epSendTrajectory([], 0, 0, 2, [0.5 0.2 1.5], 10);
        printf('IDS %d %d %d\\n', f1, f2, i2.episode_id - i1.episode_id);
        expect_error('width', @() epSendTrajectory(q(:, 1:6), 0, 1, 2, [], 5));
        expect_error('transposed', @() epSendTrajectory(q.', 0, 1, 2, [], 5));
        expect_error('qd_size', @() epSendTrajectory(struct('q', q, 'qd', q(1:10, :)), 0, 1, 2, [], 5));
        expect_error('posture', @() epSendTrajectory([1 2 3], 0, 0, 2, [], 5));
        expect_error('context', @() epSendTrajectory([], 0, 0, 2, zeros(1, 65), 5));
        expect_error('gains', @() epSendController(ones(6, 3), 0, 1, 2, [], 5));
        expect_error('gains_index', @() epSendController(ones(7, 3), 0, 0, 2, [], 5));
        expect_error('mode', @() epSendController(ones(7, 3), 0, 1, 2, [], 5, 'magic'));
        expect_error('timeout_arg', @() epSendTrajectory(q, 0, 1, 2, [], -1));
        [~, ~, f] = epSendTrajectory(q, 0, 2, 2, [], 5);
        printf('OUT_OF_ORDER %d\\n', f);
        [~, ~, f, info] = epSendTrajectory([], 0, 0, 2, 1:5, 5);
        printf('INVALID %d %s\\n', f, info.message);
        [~, ~, fs] = epSendTrajectory([], 0, 0, 2);     % stateBuffer and timeOut left out: [], 30 s
        [~, ~, fr] = epSendTrajectory([], 0, -1, 2);    % -1 resets
        printf('NO_TIMEOUT %d RESET %d\\n', fs, fr);
        expect_error('empty', @() epSendTrajectory([], 0, 1, 2));
        expect_error('index', @() epSendTrajectory(q, 0, -2, 2));
        epDisconnect();
        expect_error('after_disconnect', @() epGetEpisode());
    """
    out = run_octave(code, mex_dir)
    found = cases(out.stdout)
    ch = reach_runner.channel
    assert found["before_connect"][0] == "episodic:notConnected" and "epConnect" in found["before_connect"][1]
    assert found["no_channel"][0] == "episodic:noChannel"
    assert "no runner serves channel 'no-such-channel'" in found["no_channel"][1]
    assert "IDS 0 0 1" in out.stdout  # each start takes the next episode id
    assert found["width"] == ("episodic:size", "epSendTrajectory: the trajectory must be steps x 7 "
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
    assert f"NO_TIMEOUT 0 RESET {int(Flag.ABORTED_BY_LEARNER)}" in out.stdout
    assert found["empty"][0] == "episodic:size" and "To start an episode use trajIdx 0" in found["empty"][1]
    assert found["index"] == ("episodic:argument", "epSendTrajectory: trajIdx must be 0 (start an episode), "
                              "1..maxCommands (its segments) or -1 (reset), got -2")
    assert f"INVALID {int(Flag.INVALID_PAYLOAD)} " in out.stdout and "reach takes" in out.stdout
    assert found["after_disconnect"][0] == "episodic:notConnected"


def test_octave_version_mismatch(mex_dir, wrong_version):
    served, version = wrong_version
    out = run_octave(f"expect_error('version', @() epConnect('{served.channel}'))", mex_dir)
    ident, message = cases(out.stdout)["version"]
    assert ident == "episodic:version"
    assert (f"the runner on channel '{served.channel}' speaks protocol version {version}, "
            f"this client version {VERSION}") in message


def test_octave_refuses_another_users_channel(mex_dir):
    other = second_user()
    channel = channel_name()
    planted = planted_by(other, channel)
    try:
        out = run_octave(f"expect_error('foreign', @() epConnect('{channel}'))", mex_dir)
    finally:
        unlink(planted)
    ident, message = cases(out.stdout)["foreign"]
    assert ident == "episodic:foreignChannel"
    assert foreign_message(channel, other, ROOT_USER, planted[0]) in message


def test_octave_without_the_mex_file_says_how_to_build_it():
    require("octave")
    out = run_octave("expect_error('unbuilt', @() epConnect('default'))", mex=None)
    ident, message = cases(out.stdout)["unbuilt"]
    assert ident == "episodic:notBuilt" and "episodic_build()" in message


README_PATHS = "addpath('clients/matlab', 'clients/matlab/build');"


def readme_learner(heading: str, channel: str) -> str:
    """The Octave code of clients/README.md's section ``heading`` (its one matlab block), for the
    test's paths and ``channel``."""
    readme = (ROOT / "clients" / "README.md").read_text()
    section = readme.split(f"### {heading}\n", 1)[1].split("\n#", 1)[0]
    (learner,) = re.findall(r"^```matlab\n(.*?)^```", section, flags=re.M | re.S)
    assert learner.count(README_PATHS) == 1 and learner.count("epConnect('default')") == 1
    return learner.replace(README_PATHS, "").replace("epConnect('default')", f"epConnect('{channel}')")


def test_readme_octave_learner_runs_as_printed(mex_dir, reach_runner):
    out = run_octave(readme_learner("A learner in Octave", reach_runner.channel), mex_dir)
    lines = [line.split() for line in out.stdout.splitlines() if "reward" in line]
    assert len(lines) == 20 and all(line[-2:] == ["flag", "0"] for line in lines), out.stdout


def test_readme_octave_population_learner_runs_as_printed(mex_dir, reach_runner):
    out = run_octave(readme_learner("A population learner in Octave", reach_runner.channel), mex_dir)
    lines = re.findall(r"^(\d)  best return +(-?[\d.]+)  distance [\d.]+ m  flags \[0 0 0 0 0 0 0 0\]$", out.stdout,
                       flags=re.M)
    assert [int(g) for g, _ in lines] == [1, 2, 3, 4, 5], out.stdout


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
    assert found["silent"] == ("episodic:timeout", f"epSendTrajectory: the runner on channel "
                               f"'{channel}' did not answer within 0.5 s")
    assert 0.5 <= float(re.search(r"ELAPSED silent ([\d.]+)", stdout).group(1)) < 2
    assert found["dead"][0] == "episodic:runnerGone"
    assert f"the runner of channel '{channel}' (pid {s.proc.pid}) has exited" in found["dead"][1]
    assert float(re.search(r"ELAPSED dead ([\d.]+)", stdout).group(1)) < 2  # found out within a poll, not the timeout
    assert found["after"][0] == "episodic:notConnected" and f"channel '{channel}' has exited" in found["after"][1]


@pytest.mark.serial
def test_round_trip_time_octave_vs_python(mex_dir, reach_runner, capsys):
    """A 2 s segment (1000 x 7) and its log fetch, median of 20, from Octave and from Python."""
    n = 20
    q = wave(HOME, n=1000)
    out = run_octave(f"round_trip('{reach_runner.channel}', {n})", mex_dir, timeout=120)
    found = re.search(r"ROUNDTRIP ([\d.]+) SEND ([\d.]+)", out.stdout)
    octave_median, octave_send = float(found.group(1)), float(found.group(2))
    times, sends = [], []
    with Client(reach_runner.channel, timeout=10) as client:
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
    ended = re.search(r"^episode \d+: return (-?[\d.]+), flags 0, (solved|not solved)$", out.stdout, flags=re.M)
    assert float(ended.group(1)) == pytest.approx(episode.attrs["return"], abs=1e-6)  # the ending reply's
    assert (ended.group(2) == "solved") == bool(episode.attrs["success"])


def puma_commands(episode_id: int) -> list:
    """A start with a context, a 500 Hz wave from home, a 250 Hz wave held 0.1 s at its end."""
    q1 = wave(PUMA.home)
    q2 = wave(q1[-1], n=250, phase=0.1)
    return [StartCommand(episode_id, 2, context=np.array(CONTEXT)),
            TrajectoryCommand(episode_id, 1, 2, q1),
            TrajectoryCommand(episode_id, 2, 2, q2, rate=250.0, wait_time=0.1)]


OCTAVE_PUMA_EPISODE = """
info = epConnect('{channel}');
printf('NDOFS %d\\n', info.n_dofs);
n = info.n_dofs;
epEpisodeId({episode_id});
replies = [];
[r, s, f, i] = epSendTrajectory([], 0, 0, 2, [{context}], 10);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
[r, s, f, i] = epSendTrajectory(read_rows('{data}/q1.bin', n), 0, 1, 2, [], 10);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
[r, s, f, i] = epSendTrajectory(read_rows('{data}/q2.bin', n), 0.1, 2, 2, [], 10, 250);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
write_rows('{data}/replies.bin', replies);
episode = epGetEpisode();
names = fieldnames(episode);
fid = fopen('{data}/fields.txt', 'w');
for k = 1:numel(names)
  value = episode.(names{{k}});
  fprintf(fid, '%s %d %d\\n', names{{k}}, size(value, 1), size(value, 2));
  write_rows(['{data}/' names{{k}} '.bin'], value);
end
fclose(fid);
expect_error('width', @() epSendTrajectory(zeros(10, 7), 0, 1, 1, [], 5));
expect_error('posture', @() epSendTrajectory(zeros(1, 7), 0, 0, 1, [], 5));
epDisconnect();
"""


def test_octave_puma560_episode_is_bit_identical_to_python(mex_dir, tmp_path):
    """An Octave episode on a served PUMA (sizes from epConnect's info) logs what the same
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
    assert found["width"] == ("episodic:size", "epSendTrajectory: the trajectory must be steps x 6 "
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
    """The README's learner sizes its offsets from epConnect's info, so it runs on six joints too."""
    with Served(channel_name(), None, "--robot", "puma560") as s:
        out = run_octave(readme_learner("A learner in Octave", s.channel), mex_dir)
    lines = [line.split() for line in out.stdout.splitlines() if "reward" in line]
    assert len(lines) == 20 and all(line[-2:] == ["flag", "0"] for line in lines), out.stdout


# -- batches -----------------------------------------------------------------------------------
BATCH_C = r"""
/* Evaluate the population in DIR with one ep_evaluate call and write its results there:
 *     batch_file CHANNEL DIR [LOG_EPISODE...]
 * DIR/commands.txt has one line per command, "episode kind episode_id index max_commands feedforward
 * n_samples n_context has_posture has_qd has_qdd has_ki rate wait_time", DIR/values.bin their arrays
 * in a batch value pool's order (float64). Writes DIR/results.bin (per episode: return, flag,
 * success, n_steps, n_replies, episode_id), DIR/replies.bin (per command sent: reward, flag, steps,
 * state), DIR/messages.txt and, keeping the logs, per LOG_EPISODE k its log columns (rows x width)
 * as DIR/log<k>_<column>.bin; prints SIZES (the batch sizes), FIT (ep_batch_fit) and per log
 * "LOG k rows truncated" (or "LOGERROR k message" on stderr). */
#include "episodic_client.h"
#include <stdio.h>
#include <stdlib.h>

static FILE *in_dir(const char *dir, const char *name, const char *mode)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return fopen(path, mode);
}

static int failed(const char *what, int rc)
{
    fprintf(stderr, "%s: %s (%s)\n", what, ep_last_error(), ep_strerror(rc));
    return 1;
}

/* The next `count` values of the pool when `present` (*at advances past them), else NULL. */
static const double *take(const double **at, int count, int present)
{
    const double *values = *at;
    if (!present)
        return NULL;
    *at += count;
    return values;
}

int main(int argc, char **argv)
{
    enum { MOST = 10000, VALUES = 1 << 22 };
    static ep_command commands[MOST];
    static ep_episode episodes[MOST];
    static ep_result results[MOST];
    static double pool[VALUES];
    const double *at = pool;
    const ep_info *info;
    ep_client *c;
    FILE *f;
    int n_episodes = 0, n, i, j, k, rc, rows, width, truncated, episode, has[4];
    long long id;

    if (argc < 3 || (rc = ep_attach(argv[1], 30.0, &c)) != EP_OK)
        return argc < 3 ? 2 : failed("attach", rc);
    info = ep_get_info(c);
    n = info->n_dofs;
    printf("SIZES %d %d %lld\n", info->max_batch, info->max_batch_commands, (long long)info->max_batch_values);
    f = in_dir(argv[2], "values.bin", "rb");
    fread(pool, sizeof(double), VALUES, f);
    fclose(f);
    f = in_dir(argv[2], "commands.txt", "r");
    for (i = 0; i < MOST; i++) {
        ep_command *m = &commands[i];
        if (fscanf(f, "%d %d %lld %d %d %d %d %d %d %d %d %d %lf %lf", &episode, &m->kind, &id, &m->index,
                   &m->max_commands, &m->feedforward, &m->n_samples, &m->n_context, &has[0], &has[1], &has[2],
                   &has[3], &m->rate, &m->wait_time) != 14)
            break;
        m->episode_id = id;   /* the arrays in the pool's order: posture kp kd ki context q qd qdd */
        m->posture = take(&at, n, m->kind == EP_KIND_START && has[0]);
        m->kp = take(&at, n, m->kind == EP_KIND_GAINS);
        m->kd = take(&at, n, m->kind == EP_KIND_GAINS);
        m->ki = take(&at, n, m->kind == EP_KIND_GAINS && has[3]);
        m->context = take(&at, m->n_context, m->n_context > 0);
        m->q = take(&at, m->n_samples * n, m->kind == EP_KIND_TRAJECTORY);
        m->qd = take(&at, m->n_samples * n, m->kind == EP_KIND_TRAJECTORY && has[1]);
        m->qdd = take(&at, m->n_samples * n, m->kind == EP_KIND_TRAJECTORY && has[2]);
        if (episode == n_episodes)
            episodes[n_episodes++].commands = m;
        episodes[n_episodes - 1].n_commands++;
    }
    fclose(f);
    if ((rc = ep_evaluate(c, episodes, n_episodes, argc > 3, 0.0, results)) != EP_OK)
        return failed("evaluate", rc);
    printf("FIT %d\n", ep_batch_fit(c, episodes, n_episodes));
    f = in_dir(argv[2], "results.bin", "wb");
    for (i = 0; i < n_episodes; i++) {
        double row[6];
        row[0] = results[i].episode_return, row[1] = results[i].flag, row[2] = results[i].success;
        row[3] = (double)results[i].n_steps, row[4] = results[i].n_replies, row[5] = (double)results[i].episode_id;
        fwrite(row, sizeof(double), 6, f);
    }
    fclose(f);
    f = in_dir(argv[2], "replies.bin", "wb");
    for (i = 0; i < n_episodes; i++)
        for (j = 0; j < results[i].n_replies; j++) {
            double row[3];
            row[0] = results[i].rewards[j], row[1] = results[i].flags[j], row[2] = results[i].steps[j];
            fwrite(row, sizeof(double), 3, f);
            fwrite(results[i].states + j * results[i].n_state, sizeof(double), (size_t)results[i].n_state, f);
        }
    fclose(f);
    f = in_dir(argv[2], "messages.txt", "w");
    for (i = 0; i < n_episodes; i++)
        fprintf(f, "%s\n", results[i].message);
    fclose(f);
    for (k = 3; k < argc; k++) {
        episode = atoi(argv[k]);
        if (ep_get_batch_log(c, episode, &truncated) != EP_OK) {
            fprintf(stderr, "LOGERROR %d %s\n", episode, ep_last_error());
            continue;
        }
        rows = ep_log_rows(c);
        printf("LOG %d %d %d\n", episode, rows, truncated);
        for (i = 0; i < info->n_log_columns; i++) {
            const char *name = ep_log_column_name(c, i, &width);
            double *column = malloc(sizeof(double) * (size_t)(rows * width + 1));
            char file[128];
            if ((rc = ep_get_log(c, name, column, rows, &rows)) != EP_OK)
                return failed("log", rc);
            snprintf(file, sizeof file, "log%d_%s.bin", episode, name);
            f = in_dir(argv[2], file, "wb");
            fwrite(column, sizeof(double), (size_t)(rows * width), f);
            fclose(f);
            free(column);
        }
    }
    ep_detach(c);
    return 0;
}
"""


@pytest.fixture(scope="session")
def c_batch(tmp_path_factory) -> Path:
    """BATCH_C built with the C client."""
    require("cc")
    return build_c(BATCH_C, tmp_path_factory.mktemp("c-batch"), "batch_file")


def batch_population() -> list[list]:
    """Six reach episodes: the bit-identity test's episode (a start posture, a gain set, segments at
    250 Hz, with qd and qdd, held); one segment; a gain set refused (negative kp); a context out of
    range (refused at the start); a segment with qd at 1000 Hz and another held; a segment that
    starts too far from the start posture (DISCONTINUOUS)."""
    q = wave(HOME, n=150, amplitude=0.1)
    qd = np.gradient(q, 1 / 1000, axis=0)
    return [
        reach_commands(101)[0],
        [StartCommand(102, 1, context=np.array(CONTEXT)), TrajectoryCommand(102, 1, 1, q)],
        [StartCommand(103, 2, context=np.array(CONTEXT)), GainsCommand(103, 1, 2, -ROBOT_KP, 0.05 * ROBOT_KP),
         TrajectoryCommand(103, 2, 2, q)],
        [StartCommand(104, 1, context=np.array([1e7, 0.2, 1.5])), TrajectoryCommand(104, 1, 1, q)],
        [StartCommand(105, 2), TrajectoryCommand(105, 1, 2, q, qd=qd, rate=1000.0),
         TrajectoryCommand(105, 2, 2, wave(HOME, n=100, amplitude=0.05), wait_time=0.05)],
        [StartCommand(106, 1, context=np.array([0.4, 0.3, 1.4])), TrajectoryCommand(106, 1, 1, wave(HOME) + 0.5)],
    ]


BATCH_FLAGS = [Flag.OK, Flag.OK, Flag.INVALID_PAYLOAD, Flag.INVALID_PAYLOAD, Flag.OK, Flag.DISCONTINUOUS]


@pytest.fixture(scope="module")
def batch_reference():
    """The population and its results in-process (episodic.tools.batch.evaluate), with their logs."""
    population = batch_population()
    results = evaluate(population, "reach", keep_steps=True)
    assert [r.flag for r in results] == BATCH_FLAGS
    return population, results


def write_population(folder: Path, sizes, episodes: list[list]) -> None:
    """BATCH_C's input: one line of fields per command, the arrays in a value pool (the Python
    client's encoding of each command)."""
    lines, values = [], []
    for position, episode in enumerate(episodes):
        for command in episode:
            fields, arrays = command_parts(sizes, command)
            f = dict.fromkeys(BATCH_COMMAND.names, 0) | fields
            lines.append(" ".join(str(f[name]) for name in (
                "kind", "episode_id", "index", "max_commands", "feedforward", "n_samples", "n_context", "has_posture",
                "has_qd", "has_qdd", "has_ki")))
            lines[-1] = f"{position} {lines[-1]} {float(f['rate'])!r} {float(f['wait_time'])!r}"
            values += [arrays[name].ravel() for name in ARRAYS if name in arrays]
    (folder / "commands.txt").write_text("\n".join(lines) + "\n")
    np.concatenate(values).astype("<f8").tofile(folder / "values.bin")


def record(result) -> dict:
    """What a client reports of an EpisodeResult, as bytes where bit-identity is asked (the message
    cut to the batch block's 256 bytes)."""
    return {"return": np.float64(result.episode_return).tobytes(), "flag": int(result.flag),
            "success": bool(result.success), "n_steps": int(result.n_steps),
            "rewards": np.asarray(result.rewards, dtype=float).tobytes(), "flags": [int(f) for f in result.flags],
            "steps": [int(s) for s in result.command_steps],
            "states": np.asarray(result.task_states, dtype=float).tobytes(),
            "message": result.message.encode()[:MESSAGE_BYTES].decode(errors="replace")}


def c_records(folder: Path, n_state: int) -> tuple[list[dict], list[int]]:
    """BATCH_C's results as records, and the episode ids."""
    results = np.fromfile(folder / "results.bin").reshape(-1, 6)
    replies = np.fromfile(folder / "replies.bin").reshape(-1, 3 + n_state)
    messages = (folder / "messages.txt").read_bytes().decode(errors="replace").split("\n")
    out, row = [], 0
    for (ret, flag, success, n_steps, n_replies, _), message in zip(results, messages):
        sent = replies[row : row + int(n_replies)]
        row += int(n_replies)
        out.append({"return": ret.tobytes(), "flag": int(flag), "success": bool(success), "n_steps": int(n_steps),
                    "rewards": sent[:, 0].tobytes(), "flags": sent[:, 1].astype(int).tolist(),
                    "steps": sent[:, 2].astype(int).tolist(), "states": sent[:, 3:].tobytes(), "message": message})
    return out, results[:, 5].astype(int).tolist()


def assert_same_log(folder: Path, prefix: str, steps: dict, shapes: dict | None = None) -> None:
    """The log columns a client wrote (prefix<column>.bin, row-major) are bit-identical to an
    in-process episode's ``steps``."""
    for name, values in steps.items():
        path = folder / f"{prefix}{name}.bin"
        if shapes is None and not path.exists():
            continue  # a task state column: BATCH_C writes only the log block's columns
        fetched = np.fromfile(path)
        assert fetched.astype(values.dtype).reshape(values.shape).tobytes() == values.tobytes(), name
        if shapes is not None:
            assert shapes[name] == (len(values), 1 if values.ndim == 1 else values.shape[1]), name


def run_c_batch(program: Path, channel: str, folder: Path, *logs: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), channel, str(folder), *map(str, logs)], capture_output=True, text=True,
                          timeout=60)


def test_c_batch_is_bit_identical_to_python(c_batch, batch_reference, reach_runner, tmp_path):
    """A population sent with ep_evaluate (episode 0 and 3's logs fetched with ep_get_batch_log)
    gives, bit for bit, the results of episodic.tools.batch.evaluate and of Client.evaluate."""
    population, reference = batch_reference
    with Client(reach_runner.channel, timeout=30) as client:
        sizes = client.sizes
        bridged = client.evaluate(population)
    write_population(tmp_path, sizes, population)
    out = run_c_batch(c_batch, reach_runner.channel, tmp_path, 0, 3)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SIZES 256 4096 2097152" in out.stdout and "FIT 6" in out.stdout
    found, ids = c_records(tmp_path, len(sizes.state_names))
    assert found == [record(r) for r in reference] == [record(r) for r in bridged]
    assert ids == [101, 102, 103, 104, 105, 106]
    assert f"LOG 0 {reference[0].n_steps} 0" in out.stdout and "LOG 3 0 0" in out.stdout  # 3: refused at its start
    assert_same_log(tmp_path, "log0_", reference[0].steps)


def test_c_batch_larger_than_the_runner_takes_is_split(c_batch, batch_reference, small_batch_runner, tmp_path):
    """Against `episodic serve --max-batch 2` the population goes in three batches with the same
    results; the last batch's logs are kept, an earlier one's log is refused saying why."""
    population, reference = batch_reference
    with Client(small_batch_runner.channel, timeout=30) as client:
        write_population(tmp_path, client.sizes, population)
    out = run_c_batch(c_batch, small_batch_runner.channel, tmp_path, 4, 0)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SIZES 2 4096 2097152" in out.stdout and "FIT 2" in out.stdout
    found, _ = c_records(tmp_path, 4)
    assert found == [record(r) for r in reference]
    assert f"LOG 4 {reference[4].n_steps} 0" in out.stdout
    assert_same_log(tmp_path, "log4_", reference[4].steps)
    assert (f"LOGERROR 0 ep_get_batch_log: episode 0 went to the runner on channel '{small_batch_runner.channel}' "
            f"in an earlier batch than the last (episodes 4 to 5)") in out.stderr


def test_c_batch_to_a_realtime_runner_is_refused(c_batch, tmp_path):
    population = batch_population()[:1]
    with Served(channel_name(), None, "--mode", "realtime") as s:
        with Client(s.channel, timeout=30) as client:
            write_population(tmp_path, client.sizes, population)
        out = run_c_batch(c_batch, s.channel, tmp_path)
    assert out.returncode == 1 and "FIT" not in out.stdout
    assert (f"evaluate: the runner on channel '{s.channel}' refused a batch of 1 episodes: this runner evaluates no "
            f"batches") in out.stderr and "send the episodes one by one" in out.stderr
    assert "(the runner refused the batch)" in out.stderr


def octave_population(episode_id: int) -> tuple[dict, list[list], list[list]]:
    """epEvaluateBatch's two populations (tests/octave/batch_episodes.m): five episodes with start
    postures, qd and qdd (the second's context out of range, the fifth's segment too far from its
    posture), and three at 250 Hz held 0.1 s with one context; their files and their commands."""
    postures = np.array([HOME + np.array([0.02 * k, 0, 0, -0.02, 0, 0, 0]) for k in range(5)])
    contexts = np.array([CONTEXT, [1e7, 0.2, 1.5], [0.4, 0.3, 1.4], [0.6, 0.1, 1.3], CONTEXT])
    q = np.array([wave(p, n=150, amplitude=0.05 + 0.03 * k) for k, p in enumerate(postures)])
    q[4] += 0.5
    qd = np.gradient(q, 1 / 500, axis=1)
    qdd = np.gradient(qd, 1 / 500, axis=1)
    q2 = np.array([wave(HOME, n=150, amplitude=0.1 + 0.05 * k) for k in range(3)])
    first = [[StartCommand(episode_id + k, 1, posture=postures[k], context=contexts[k]),
              TrajectoryCommand(episode_id + k, 1, 1, q[k], qd=qd[k], qdd=qdd[k])] for k in range(5)]
    second = [[StartCommand(episode_id + 5 + k, 1, context=np.array(CONTEXT)),
               TrajectoryCommand(episode_id + 5 + k, 1, 1, q2[k], rate=250.0, wait_time=0.1)] for k in range(3)]
    files = {"postures": postures, "contexts": contexts, "Q": q, "Qd": qd, "Qdd": qdd, "Q2": q2}
    return files, first, second


def octave_records(folder: Path, name: str, n_state: int) -> tuple[list[dict], list[int]]:
    """batch_episodes.m's results of one population as records, and the episode ids; checks that
    the commands not sent are NaN and the final state is the last command's."""
    rows = np.fromfile(folder / f"{name}.bin").reshape(-1, 12 + 3 * n_state)
    messages = (folder / f"{name}.txt").read_bytes().decode(errors="replace").split("\n")
    out = []
    for row, message in zip(rows, messages):
        ret, flag, success, n_steps, _, n = row[:6]
        n = int(n)
        rewards, flags, steps = row[6:8], row[8:10], row[10:12]
        final, states = row[12 : 12 + n_state], row[12 + n_state :].reshape(2, n_state)
        assert np.isnan(np.concatenate([rewards[n:], flags[n:], steps[n:], states[n:].ravel()])).all()
        assert final.tobytes() == states[n - 1].tobytes()
        out.append({"return": ret.tobytes(), "flag": int(flag), "success": bool(success), "n_steps": int(n_steps),
                    "rewards": rewards[:n].tobytes(), "flags": flags[:n].astype(int).tolist(),
                    "steps": steps[:n].astype(int).tolist(), "states": states[:n].tobytes(), "message": message})
    return out, rows[:, 4].astype(int).tolist()


def test_octave_batch_is_bit_identical_to_python(mex_dir, small_batch_runner, tmp_path):
    """epEvaluateBatch, split into batches of two by the runner's size, gives the results and
    the logs of episodic.tools.batch.evaluate bit for bit, with and without the options."""
    episode_id = 7000
    files, first, second = octave_population(episode_id)
    for name, value in files.items():
        np.ascontiguousarray(value, dtype="<f8").tofile(tmp_path / f"{name}.bin")
    out = run_octave(f"""
        batch_episodes('{small_batch_runner.channel}', '{tmp_path}', {episode_id});
        epConnect('{small_batch_runner.channel}');
        Q = zeros(10, 7, 2);
        expect_error('width', @() epEvaluateBatch(Q(:, 1:6, :), []));
        expect_error('qd', @() epEvaluateBatch(Q, [], 'Qd', Q(:, :, 1)));
        expect_error('contexts', @() epEvaluateBatch(Q, ones(3, 3)));
        expect_error('postures', @() epEvaluateBatch(Q, [], 'postures', ones(6, 2)));
        expect_error('option', @() epEvaluateBatch(Q, [], 'speed', 2));
        epDisconnect();""", mex_dir)
    found = cases(out.stdout)
    assert found["width"] == ("episodic:size", "epEvaluateBatch: Q must be samples x 7 x N (one row per time step, "
                              "one column per joint, one page per episode), got 10 x 6 x 2")
    assert found["qd"] == ("episodic:size", "epEvaluateBatch: Qd must have Q's size 10 x 7 x 2, got 10 x 7")
    assert found["contexts"] == ("episodic:size", "epEvaluateBatch: contexts must have one column per episode (2) "
                                 "or one column for all, got 3 x 3")
    assert found["postures"] == ("episodic:size", "epEvaluateBatch: postures must be 7 x N (one start posture per "
                                 "column), got 6 x 2")
    assert found["option"][0] == "episodic:argument" and "unknown option 'speed'" in found["option"][1]
    expected_first = evaluate(first, "reach", keep_steps=True)
    expected_second = evaluate(second, "reach")
    assert [r.flag for r in expected_first] == [Flag.OK, Flag.INVALID_PAYLOAD, Flag.OK, Flag.OK, Flag.DISCONTINUOUS]
    found, ids = octave_records(tmp_path, "first", 4)
    assert found == [record(r) for r in expected_first] and ids == list(range(episode_id, episode_id + 5))
    found, ids = octave_records(tmp_path, "second", 4)
    assert found == [record(r) for r in expected_second] and ids == list(range(episode_id + 5, episode_id + 8))
    shapes: dict[int, dict] = {}
    for line in (tmp_path / "logs.txt").read_text().splitlines():
        k, name, rows, cols = line.split()
        shapes.setdefault(int(k), {})[name] = (int(rows), int(cols))
    assert sorted(shapes) == list(range(5))
    for k, result in enumerate(expected_first):
        if result.steps is None:  # refused at its start: an empty log
            assert {rows for rows, _ in shapes[k].values()} == {0} and result.n_steps == 0
        else:
            assert shapes[k].keys() == result.steps.keys()
            assert_same_log(tmp_path, f"log{k}_", result.steps, shapes[k])
