"""The channel against other users and stale processes, with real processes and real shared
memory: objects another user created under this user's names are refused (runner and client,
with a message, no traceback); a dead runner's pid taken by another process does not keep the
channel; a lock holder paused past the take-over leaves the lock counting at most 1.

The other-user tests need root (they create the user `episodic-other` and run processes as it
with setpriv); elsewhere they are skipped, saying so. CI runs as root (.ci/run makes its
virtual environment readable to that user).
"""
from __future__ import annotations

import functools
import mmap
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
import posix_ipc
import pytest

from episodic.bridge import Client, RunnerGone
from episodic.bridge.channel import LOCK_TIMEOUT, SHM_DIR, ForeignChannel, object_names, pid_alive, remove
from episodic.bridge.layout import Layout, Sizes, write_header
from episodic.interface.columns import step_widths
from episodic.interface.vocabulary import Flag
from tests.helpers import ROOT, Served, channel_name, raw_channel, shm_leftovers, wave

pytestmark = pytest.mark.slow  # real `episodic serve` processes

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
OTHER_USER = "episodic-other"


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers() == before, "a test left shared-memory objects behind"


# -- another user ------------------------------------------------------------------------------
@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    read_all: bool  # processes keep CAP_DAC_READ_SEARCH (see command)

    def command(self, *args: str) -> list[str]:
        """``args`` run as this user (started through env: setpriv itself may still pass root's
        path checks when it executes them). With ``read_all`` the process keeps
        CAP_DAC_READ_SEARCH, only to reach the interpreter and the sources where the user may
        not (e.g. under /root): it can read any file, but neither write nor remove another user's."""
        caps = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"] if self.read_all else []
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", *caps, "--",
                "env", *args]


@functools.cache
def _second_user() -> User | str:
    """The user, or why it cannot run this interpreter."""
    try:
        entry = pwd.getpwnam(OTHER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                       check=True, capture_output=True, timeout=60)
        entry = pwd.getpwnam(OTHER_USER)
    tried = []
    for read_all in (False, True):
        user = User(OTHER_USER, entry.pw_uid, entry.pw_gid, read_all)
        probe = subprocess.run(user.command(sys.executable, "-c", "import episodic.bridge"), cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
        if probe.returncode == 0:
            return user
        tried.append(probe.stderr.strip().splitlines()[-1:])
    return f"{OTHER_USER} cannot run {sys.executable} with episodic ({tried}); make them readable to it"


def second_user() -> User:
    """The user `episodic-other`, created (a system user without home) if it does not exist.
    Skips the test unless this process is root with useradd and setpriv at hand; also when the
    user cannot run this interpreter, except in CI (CI=true), where that fails."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a second user and runs processes as it (CI runs as root)")
    missing = [tool for tool in ("useradd", "setpriv") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {' and '.join(missing)} (Debian: packages passwd and util-linux)")
    user = _second_user()
    if isinstance(user, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {user}")
        pytest.skip(user)
    return user


def plant_channel(channel: str, names_uid: int, owner: int, group: int, mode: int) -> list[str]:
    """What anybody can do in the world-writable /dev/shm: a complete episodic channel (a valid
    header, the three semaphores) under the names meant for user ``names_uid``, owned by
    ``owner``:``group`` with ``mode``; the paths of its four files."""
    base = f"/episodic.{names_uid}.{channel}"
    layout = Layout(Sizes(7, 100, 100, 8, ("distance",), step_widths(7, 1), 500.0))
    shm = posix_ipc.SharedMemory(base, posix_ipc.O_CREX, mode=0o600, size=layout.total_size)
    with mmap.mmap(shm.fd, layout.total_size) as mm:
        write_header(mm, layout, os.getpid())
    shm.close_fd()
    for suffix, value in (("cmd", 0), ("reply", 0), ("lock", 1)):
        posix_ipc.Semaphore(f"{base}.{suffix}", posix_ipc.O_CREX, mode=0o600, initial_value=value).close()
    paths = [f"{SHM_DIR}{base}"] + [f"{SHM_DIR}/sem.{base[1:]}.{s}" for s in ("cmd", "reply", "lock")]
    for path in paths:
        os.chown(path, owner, group)
        os.chmod(path, mode)
    return paths


def planted_by(user: User, channel: str) -> list[str]:
    """``user``'s channel under this (root) process's names, open to all as an attacker's would be."""
    return plant_channel(channel, os.getuid(), user.uid, user.gid, 0o666)


def unlink(paths: list[str]) -> None:
    for path in paths:
        if os.path.lexists(path):
            os.unlink(path)


def foreign_message(channel: str, owner: User | str, me: User | str, path: str) -> str:
    """The start of the refusal: which file belongs to whom, and that it is not yours."""
    def who(u):
        return f"{u.name} (uid {u.uid})" if isinstance(u, User) else u
    return f"channel '{channel}': {path} belongs to {who(owner)}, not to you, {who(me)};"


ROOT_USER = f"{pwd.getpwuid(0).pw_name} (uid 0)"


def test_serve_and_client_refuse_objects_another_user_planted():
    """Another user pre-created the objects under root's names (a full channel, mode 0666):
    root's runner refuses to start, with a message and status 1; root's client refuses to attach
    (it would otherwise talk to whatever the other user runs); the objects stay."""
    other = second_user()
    channel = channel_name()
    planted = planted_by(other, channel)
    try:
        runner = Served(channel)
        assert runner.proc.wait(timeout=60) == 1
        stderr = runner.proc.stderr.read()
        runner.close()
        message = foreign_message(channel, other, ROOT_USER, planted[0])
        assert message in stderr and "Traceback" not in stderr, stderr
        assert "Have that user (or root) remove it, or choose another channel" in stderr
        with pytest.raises(ForeignChannel, match=re.escape(message)):
            Client(channel)
        assert all(os.stat(p).st_uid == other.uid for p in planted)
    finally:
        unlink(planted)


def test_a_semaphore_of_another_user_is_refused_too():
    """Only the lock semaphore is foreign: the client names it."""
    other = second_user()
    channel = channel_name()
    with Served(channel):
        lock = f"{SHM_DIR}/sem.{object_names(channel)['lock'][1:]}"
        os.chown(lock, other.uid, other.gid)
        try:
            with pytest.raises(ForeignChannel, match=re.escape(f"{lock} belongs to {other.name} (uid {other.uid})")):
                Client(channel)
        finally:
            os.chown(lock, 0, 0)


REFUSED_AS_OTHER = """
import sys
from episodic.bridge import Client
from episodic.bridge.channel import ForeignChannel
try:
    Client(sys.argv[1])
except ForeignChannel as exc:
    print(exc)
"""


def test_serve_as_another_user_refuses_objects_root_created(tmp_path):
    """Root created mode-0600 objects under the other user's names: that user's `episodic serve`
    cannot even open them; it says whose they are (no permission traceback) and exits with
    status 1; that user's client says the same."""
    other = second_user()
    channel = channel_name()
    planted = plant_channel(channel, other.uid, 0, 0, 0o600)
    env = {**os.environ, "HOME": str(tmp_path)}
    try:
        serve = subprocess.run(other.command(sys.executable, "-m", "episodic", "serve", "--channel", channel),
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        client = subprocess.run(other.command(sys.executable, "-c", REFUSED_AS_OTHER, channel),
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:
        unlink(planted)
    message = foreign_message(channel, ROOT_USER, other, planted[0])
    assert serve.returncode == 1 and message in serve.stderr, serve.stderr
    assert "Traceback" not in serve.stderr
    assert client.returncode == 0 and message in client.stdout, client.stdout + client.stderr


def test_another_users_channel_of_the_same_name_is_no_obstacle():
    """The other user's channel of the same name (its own uid in the names) is no obstacle:
    names are per user, and root's runner starts beside it."""
    other = second_user()
    channel = channel_name()
    theirs = plant_channel(channel, other.uid, other.uid, other.gid, 0o600)
    try:
        with Served(channel) as s, Client(channel, timeout=10) as client:
            assert client.runner_pid == s.proc.pid and client.start_episode().flag == Flag.OK
        assert all(os.path.exists(p) for p in theirs)
    finally:
        unlink(theirs)


# -- a reused pid --------------------------------------------------------------------------------
def impostor_for(dead_pid: int, channel: str) -> subprocess.Popen:
    """A live process that is no runner, where the dead runner ``dead_pid`` of ``channel`` is
    recorded: one that got the very pid (made the kernel's next pid through
    /proc/sys/kernel/ns_last_pid, where this process may write it), or else one whose pid is
    written into the dead runner's header."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(dead_pid - 1))
    except OSError:
        pass
    proc = subprocess.Popen(["sleep", "120"])
    if proc.pid != dead_pid:
        with raw_channel(channel) as (_, blocks):
            blocks.header["runner_pid"] = proc.pid
    return proc


@pytest.mark.serial
def test_a_dead_runners_pid_reused_neither_holds_the_channel_nor_keeps_a_client_waiting():
    channel = channel_name()
    s = Served(channel)
    impostor = None
    try:
        with Client(channel, timeout=20) as waiting:
            waiting.start_episode(max_commands=2, episode_id=1)
            dead = s.proc.pid
            s.stop(signal.SIGKILL)  # reaped: its pid is free
            impostor = impostor_for(dead, channel)
            with raw_channel(channel) as (_, blocks):
                assert pid_alive(int(blocks.header["runner_pid"])), "the recorded pid names a live process"
            t0 = time.monotonic()
            with pytest.raises(RunnerGone, match=channel):
                waiting.send_trajectory(wave(HOME))
            assert time.monotonic() - t0 < 2  # within a poll or so, not the 20 s timeout
        with Served(channel) as again, Client(channel, timeout=10) as client:
            assert client.runner_pid == again.proc.pid
            assert client.start_episode().flag == Flag.OK
    finally:
        if impostor is not None:
            impostor.kill()
            impostor.wait()
        remove(channel)


# -- the lock ------------------------------------------------------------------------------------
LOCK_HOLDER = """
import sys, time
from episodic.bridge.channel import Channel, locked
chan = Channel.attach(sys.argv[1])
with locked(chan.lock):
    print("holding", flush=True)
    time.sleep(1.0)  # the test stops this process here, for longer than the take-over timeout
print("released", flush=True)
with locked(chan.lock):
    pass
print("locked again", flush=True)
"""


class LockWatch:
    """A process holding ``channel``'s lock (LOCK_HOLDER), and a thread sampling the lock
    semaphore's value until ``close``."""

    def __init__(self, channel: str):
        self.values: list[int] = []
        self._sem = posix_ipc.Semaphore(object_names(channel)["lock"])
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        self.holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, channel], cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.holder.stdout.readline() == "holding\n", self.holder.stderr.read()

    def _sample(self) -> None:
        while not self._done.is_set():
            self.values.append(self._sem.value)
            time.sleep(0.0005)

    def pause(self) -> None:
        os.kill(self.holder.pid, signal.SIGSTOP)

    def resume(self) -> str:
        """Let the holder go on: it releases the lock late, then takes it once more; its output."""
        os.kill(self.holder.pid, signal.SIGCONT)
        out, err = self.holder.communicate(timeout=30)
        assert self.holder.returncode == 0, err
        return out

    def close(self) -> int:
        """Stop sampling (and the holder, if still there); the lock's value now."""
        if self.holder.poll() is None:
            os.kill(self.holder.pid, signal.SIGCONT)
            self.holder.kill()
            self.holder.communicate()
        self._done.set()
        self._thread.join()
        value = self._sem.value
        self._sem.close()
        return value


@pytest.mark.serial
def test_a_paused_lock_holder_is_taken_over_once_and_the_lock_never_counts_two():
    """A process takes the lock and is stopped past the take-over timeout: the client takes the
    lock over, the runner serves; the holder, continued, releases late, and the count stays at
    most 1 throughout; runner, client and holder all keep working."""
    with Served(channel_name()) as s, Client(s.channel, timeout=20) as client:
        watch = LockWatch(s.channel)
        try:
            watch.pause()
            t0 = time.monotonic()
            start = client.start_episode(max_commands=2, episode_id=7)  # waits LOCK_TIMEOUT, takes over
            assert start.flag == Flag.OK and time.monotonic() - t0 >= LOCK_TIMEOUT
            assert watch.resume() == "released\nlocked again\n"
            replies = [client.send_trajectory(wave(HOME, phase=0.1 * k)) for k in range(2)]
            assert [r.flag for r in replies] == [Flag.OK, Flag.OK] and replies[-1].episode_done
            assert len(client.get_episode()["time"]) >= 1000
        finally:
            value = watch.close()
    assert len(watch.values) > 100 and max(watch.values) <= 1, sorted(set(watch.values))
    assert value == 1
