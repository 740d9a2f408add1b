"""A channel: one shared-memory object, three semaphores and a client-lock object, named per user.

Names: ``/episodic.<uid>.<channel>`` for the memory and the same with ``.cmd`` (command
ready), ``.reply`` (reply ready) and ``.lock`` (guards the blocks) for the semaphores and
``.client`` for an empty shared-memory object a client holds an exclusive ``flock`` on while
it is attached (one client per channel), all created with mode 0600. The runner creates them,
the client attaches; both refuse objects that belong to another user (``/dev/shm`` is
world-writable, so anybody can create a file under a name meant for someone else). The runner
holds an exclusive ``flock`` on the memory object for its lifetime: that lock, not the pid in
the header, says whether it lives.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import mmap
import os
import pwd
import re

import numpy as np
import posix_ipc

from episodic.bridge.layout import HEADER, MAGIC, Layout, LayoutError, read_header, write_header

log = logging.getLogger("episodic.bridge")
LOCK_TIMEOUT = 2.0  # s; a lock held longer belongs to a dead process and is taken over
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
SHM_KEYS = ("shm", "client")  # the channel's shared-memory objects; the other keys are semaphores
DEFAULT_CHANNEL = "default"
SHM_DIR = "/dev/shm"  # where Linux keeps POSIX shared memory (<name>) and named semaphores (sem.<name>)


class ChannelError(RuntimeError):
    """The channel cannot be created or used."""


class ChannelBusy(ChannelError):
    """A live runner already serves this channel."""


class ForeignChannel(ChannelError):
    """An object of the channel belongs to another user."""


class ChannelInUse(ChannelError):
    """Another live client is attached to the channel."""


def check_name(channel) -> str:
    """``channel`` when it is a valid channel name; ValueError saying what a name may hold."""
    if not isinstance(channel, str) or not NAME_PATTERN.fullmatch(channel):
        raise ValueError(f"channel name {channel!r}: use 1-64 letters, digits, '_' or '-'")
    return channel


def object_names(channel: str) -> dict[str, str]:
    """The POSIX names of a channel's memory, semaphores and client-lock object (per user)."""
    base = f"/episodic.{os.getuid()}.{check_name(channel)}"
    return {"shm": base, "cmd": base + ".cmd", "reply": base + ".reply", "lock": base + ".lock",
            "client": base + ".client"}


def object_paths(channel: str) -> dict[str, str]:
    """The files behind a channel's objects on Linux: ``/dev/shm/<name>`` for the memory,
    ``/dev/shm/sem.<name>`` for a semaphore."""
    return {key: f"{SHM_DIR}/{'' if key in SHM_KEYS else 'sem.'}{name[1:]}"
            for key, name in object_names(channel).items()}


def _user(uid: int) -> str:
    """'name (uid N)', or 'uid N' for a uid without a name."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def refuse_foreign(channel: str, path: str, owner: int) -> None:
    """Raise ForeignChannel unless ``owner`` (the uid owning ``path``) is this process's user."""
    if owner != os.getuid():
        raise ForeignChannel(f"channel '{channel}': {path} belongs to {_user(owner)}, not to you, "
                             f"{_user(os.getuid())}; another user created it, so it is not used. "
                             f"Have that user (or root) remove it, or choose another channel")


def check_owned(channel: str) -> None:
    """Raise ForeignChannel when an existing object of ``channel`` belongs to another user."""
    for path in object_paths(channel).values():
        try:
            owner = os.lstat(path).st_uid
        except FileNotFoundError:
            continue
        refuse_foreign(channel, path, owner)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie, exited but not yet reaped by
    its parent, counts as gone: a learner that started its own runner would otherwise wait).
    Used for the learner's pid; a runner's liveness is its lock (``runner_holds``)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def runner_holds(fd: int) -> bool:
    """Whether a live runner holds the memory object open as ``fd``: the runner keeps an
    exclusive ``flock`` on it, which the kernel drops when the runner's process ends (also when
    it is killed, and whatever process gets its pid later). Probed with a shared lock that is
    given back at once."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def runner_pid_of(channel: str) -> int | None:
    """The pid of the live runner serving ``channel`` (from its header; 0 while it starts), or
    None when none does: no objects, another user's, or the leftovers of a dead runner."""
    names = object_names(channel)
    try:
        shm = posix_ipc.SharedMemory(names["shm"])
    except (posix_ipc.ExistentialError, posix_ipc.PermissionsError):
        return None
    try:
        if os.fstat(shm.fd).st_uid != os.getuid() or not runner_holds(shm.fd):
            return None
        if shm.size < HEADER.itemsize:
            return 0
        with mmap.mmap(shm.fd, HEADER.itemsize, prot=mmap.PROT_READ) as mm:
            head = np.frombuffer(mm, HEADER, count=1)[0].copy()
        return int(head["runner_pid"]) if head["magic"] == MAGIC else 0
    finally:
        shm.close_fd()


class locked:
    """``with locked(sem):`` holds the blocks' lock. A lock not released within LOCK_TIMEOUT
    is presumed to belong to a dead process and is taken over, once: the block is entered
    without it. Whoever leaves gives the lock back only while its count is 0, so that when the
    presumed-dead holder was merely paused, its late release and the taker's together leave the
    count at 1, never 2 (two holders at once). (A class: cheaper than contextlib.)"""

    __slots__ = ("sem",)

    def __init__(self, sem: posix_ipc.Semaphore):
        self.sem = sem

    def __enter__(self) -> None:
        try:
            self.sem.acquire(LOCK_TIMEOUT)
        except posix_ipc.BusyError:
            log.warning("the channel lock was held for over %.1f s; taking it over", LOCK_TIMEOUT)

    def __exit__(self, *exc) -> None:
        if self.sem.value == 0:
            self.sem.release()


def remove(channel: str) -> list[str]:
    """Unlink every object of ``channel`` that belongs to this user (another user's are left
    alone); returns the names unlinked."""
    removed = []
    paths = object_paths(channel)
    for key, name in object_names(channel).items():
        try:
            if os.lstat(paths[key]).st_uid != os.getuid():
                continue
            if key in SHM_KEYS:
                posix_ipc.unlink_shared_memory(name)
            else:
                posix_ipc.unlink_semaphore(name)
            removed.append(name)
        except (FileNotFoundError, posix_ipc.ExistentialError):
            pass
    return removed


def no_room(channel: str, layout: Layout, exc: OSError) -> ChannelError:
    """The error for a channel that ``/dev/shm`` has no room for: how much it needs, how much is
    free, and what to do."""
    try:
        stat = os.statvfs(SHM_DIR)
        free = f"{stat.f_bavail * stat.f_frsize / 2**20:.1f} MiB free"
    except OSError:
        free = "its free space unknown"
    s, mib = layout.sizes, 2**20
    return ChannelError(
        f"channel '{channel}' needs {layout.total_size / mib:.1f} MiB of shared memory in {SHM_DIR} ({free}; "
        f"{exc.strerror}): make room there (remove files no longer needed from {SHM_DIR}), or serve with "
        f"smaller blocks: the episode-log block takes {layout.log_bytes / mib:.1f} MiB (--max-log-steps "
        f"{s.max_log_steps}), the batch block {layout.batch_bytes / mib:.1f} MiB (--max-batch-values "
        f"{s.max_batch_values})")


class Channel:
    """Mapped memory plus semaphores of one channel. Use ``create`` (runner) or ``attach`` (client).
    ``shm`` stays open: the runner's flock is on it, and a client probes that flock through it."""

    def __init__(self, channel: str, shm: posix_ipc.SharedMemory, mm: mmap.mmap, layout: Layout, sems: dict,
                 owner: bool):
        self.name = channel
        self.shm = shm
        self.mm = mm
        self.layout = layout
        self.cmd_ready: posix_ipc.Semaphore = sems["cmd"]
        self.reply_ready: posix_ipc.Semaphore = sems["reply"]
        self.lock: posix_ipc.Semaphore = sems["lock"]
        self.owner = owner
        self.client_fd: int | None = None  # the client-lock object, while this client holds it

    @classmethod
    def create(cls, channel: str, layout: Layout) -> Channel:
        """Create the channel for this process's runner, which holds its flock until ``close``.
        Leftovers of a dead runner are replaced; raises ForeignChannel when an object of that name
        belongs to another user, ChannelBusy when a live runner holds the name, ChannelError when
        ``/dev/shm`` has no room for it. Its memory is reserved here, so a ``/dev/shm`` filled
        later cannot fail a write into it; a channel that could not be made leaves nothing behind."""
        check_owned(channel)
        pid = runner_pid_of(channel)
        if pid is not None:
            raise ChannelBusy(f"channel '{channel}' is served by a live runner{f' (pid {pid})' if pid else ''}; "
                              f"stop it or choose another --channel")
        remove(channel)
        names = object_names(channel)
        flags = posix_ipc.O_CREX
        busy = f"another runner is starting on channel '{channel}' at the same time; choose another --channel"
        try:
            shm = posix_ipc.SharedMemory(names["shm"], flags, mode=0o600, size=layout.total_size)
        except posix_ipc.ExistentialError:
            raise ChannelBusy(busy) from None
        sems: dict[str, posix_ipc.Semaphore] = {}
        try:
            fcntl.flock(shm.fd, fcntl.LOCK_EX)  # blocks only while a client's probe holds it
            # every page allocated now: a page of a sparse object is allocated when first written,
            # and a write into the mapping that finds /dev/shm full is a SIGBUS, not an error
            os.posix_fallocate(shm.fd, 0, layout.total_size)
            mm = mmap.mmap(shm.fd, layout.total_size)
            write_header(mm, layout, os.getpid())
            for k in ("cmd", "reply", "lock"):
                sems[k] = posix_ipc.Semaphore(names[k], flags, mode=0o600, initial_value=1 if k == "lock" else 0)
            posix_ipc.SharedMemory(names["client"], flags, mode=0o600).close_fd()
        except BaseException as exc:
            # nothing of a channel that could not be made stays behind (this runner created the
            # memory object, so the name is its own)
            for sem in sems.values():
                sem.close()
            remove(channel)
            shm.close_fd()
            if isinstance(exc, posix_ipc.ExistentialError):
                raise ChannelBusy(busy) from None
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise no_room(channel, layout, exc) from None
            raise
        return cls(channel, shm, mm, layout, sems, owner=True)

    @classmethod
    def attach(cls, channel: str) -> Channel:
        """Attach to a runner's channel; raises FileNotFoundError when none is served,
        ForeignChannel when an object of the channel belongs to another user."""
        names = object_names(channel)
        check_owned(channel)
        try:
            shm = posix_ipc.SharedMemory(names["shm"])
            try:
                sems = {k: posix_ipc.Semaphore(names[k]) for k in ("cmd", "reply", "lock")}
                # again after opening: an object may have appeared since the check
                refuse_foreign(channel, object_paths(channel)["shm"], os.fstat(shm.fd).st_uid)
                check_owned(channel)
                if shm.size < HEADER.itemsize:
                    raise LayoutError(f"the shared-memory object holds {shm.size} bytes, less than a header")
                mm = mmap.mmap(shm.fd, shm.size)
            except BaseException:
                shm.close_fd()
                raise
        except posix_ipc.ExistentialError:
            raise FileNotFoundError(f"no runner serves channel '{channel}'; start one with "
                                    f"'episodic serve --channel {channel}'") from None
        except posix_ipc.PermissionsError as exc:
            raise ChannelError(f"channel '{channel}': {exc}") from None
        try:
            layout = read_header(mm)
        except LayoutError:
            mm.close()
            shm.close_fd()
            raise
        return cls(channel, shm, mm, layout, sems, owner=False)

    def hold_client(self) -> None:
        """Take the channel for this client: an exclusive ``flock`` on the client-lock object,
        kept until ``close`` (the kernel drops it when the process dies), and this pid in the
        header's ``client_pid``. ChannelInUse, naming the holder, when another client has it."""
        try:
            client = posix_ipc.SharedMemory(object_names(self.name)["client"])
        except posix_ipc.ExistentialError:
            raise FileNotFoundError(f"no runner serves channel '{self.name}' (its client-lock object is "
                                    f"missing); start one with 'episodic serve --channel {self.name}'") from None
        try:
            refuse_foreign(self.name, object_paths(self.name)["client"], os.fstat(client.fd).st_uid)
            fcntl.flock(client.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            client.close_fd()
            holder = int(np.ndarray((), HEADER, buffer=self.mm)["client_pid"])
            raise ChannelInUse(f"channel '{self.name}' is in use by another client (pid {holder}); one client "
                               f"per channel: stop that client, or serve another channel for this "
                               f"one") from None
        except BaseException:
            client.close_fd()
            raise
        self.client_fd = client.fd
        np.ndarray((), HEADER, buffer=self.mm)["client_pid"] = os.getpid()

    def runner_alive(self) -> bool:
        """Whether the runner that created this channel's memory object still lives."""
        return runner_holds(self.shm.fd)

    def close(self) -> None:
        """Unmap and close; the owner also unlinks every object, then drops its flock."""
        for sem in (self.cmd_ready, self.reply_ready, self.lock):
            sem.close()
        try:
            self.mm.close()
        except BufferError:
            pass  # numpy views still alive; the mapping goes with the process
        if self.owner:
            remove(self.name)
        if self.client_fd is not None:
            os.close(self.client_fd)  # drops the client lock
            self.client_fd = None
        self.shm.close_fd()
