"""A channel: one shared-memory object and three semaphores, named per user.

Names: ``/episodic.<uid>.<channel>`` for the memory and the same with ``.cmd`` (command
ready), ``.reply`` (reply ready) and ``.lock`` (guards the blocks) for the semaphores,
all created with mode 0600. The runner creates them, the client attaches.
"""
from __future__ import annotations

import logging
import mmap
import os
import re

import numpy as np
import posix_ipc

from episodic.bridge.layout import HEADER, MAGIC, Layout, LayoutError, read_header, write_header

log = logging.getLogger("episodic.bridge")
LOCK_TIMEOUT = 2.0  # s; a lock held longer belongs to a dead process and is taken over
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_CHANNEL = "default"


class ChannelBusy(RuntimeError):
    """A live runner already serves this channel."""


def object_names(channel: str) -> dict[str, str]:
    """The POSIX names of a channel's memory and semaphores (per user)."""
    if not NAME_PATTERN.match(channel):
        raise ValueError(f"channel name {channel!r}: use 1-64 letters, digits, '_' or '-'")
    base = f"/episodic.{os.getuid()}.{channel}"
    return {"shm": base, "cmd": base + ".cmd", "reply": base + ".reply", "lock": base + ".lock"}


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie, exited but not yet reaped by
    its parent, counts as gone: a learner that started its own runner would otherwise wait)."""
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


def runner_pid_of(channel: str) -> int | None:
    """The pid written in an existing channel's header, or None when there is none."""
    names = object_names(channel)
    try:
        shm = posix_ipc.SharedMemory(names["shm"])
    except posix_ipc.ExistentialError:
        return None
    try:
        if shm.size < HEADER.itemsize:
            return None
        with mmap.mmap(shm.fd, HEADER.itemsize, prot=mmap.PROT_READ) as mm:
            head = np.frombuffer(mm, HEADER, count=1)[0].copy()
        return int(head["runner_pid"]) if head["magic"] == MAGIC else None
    finally:
        shm.close_fd()


class locked:
    """``with locked(sem):`` holds the blocks' lock. A lock not released within LOCK_TIMEOUT
    belonged to a dead process: it is taken over, and on leaving it is given back only if
    nobody else did, so the semaphore never counts above 1. (A class: cheaper than contextlib.)"""

    __slots__ = ("sem", "taken_over")

    def __init__(self, sem: posix_ipc.Semaphore):
        self.sem = sem
        self.taken_over = False

    def __enter__(self) -> None:
        try:
            self.sem.acquire(LOCK_TIMEOUT)
        except posix_ipc.BusyError:
            log.warning("the channel lock was held for over %.1f s; taking it over", LOCK_TIMEOUT)
            self.taken_over = True

    def __exit__(self, *exc) -> None:
        if not self.taken_over or self.sem.value == 0:
            self.sem.release()


def remove(channel: str) -> list[str]:
    """Unlink every object of ``channel``; returns the names that existed."""
    removed = []
    for key, name in object_names(channel).items():
        try:
            if key == "shm":
                posix_ipc.unlink_shared_memory(name)
            else:
                posix_ipc.unlink_semaphore(name)
            removed.append(name)
        except posix_ipc.ExistentialError:
            pass
    return removed


class Channel:
    """Mapped memory plus semaphores of one channel. Use ``create`` (runner) or ``attach`` (client)."""

    def __init__(self, channel: str, mm: mmap.mmap, layout: Layout, sems: dict, owner: bool):
        self.name = channel
        self.mm = mm
        self.layout = layout
        self.cmd_ready: posix_ipc.Semaphore = sems["cmd"]
        self.reply_ready: posix_ipc.Semaphore = sems["reply"]
        self.lock: posix_ipc.Semaphore = sems["lock"]
        self.owner = owner

    @classmethod
    def create(cls, channel: str, layout: Layout) -> "Channel":
        """Create the channel for this process's runner. Leftovers of a dead runner are replaced;
        raises ChannelBusy when a live runner holds the name."""
        pid = runner_pid_of(channel)
        if pid is not None and pid != os.getpid() and pid_alive(pid):
            raise ChannelBusy(f"channel '{channel}' is served by a live runner (pid {pid}); "
                              f"stop it or choose another --channel")
        remove(channel)
        names = object_names(channel)
        flags = posix_ipc.O_CREX
        try:
            shm = posix_ipc.SharedMemory(names["shm"], flags, mode=0o600, size=layout.total_size)
            try:
                mm = mmap.mmap(shm.fd, layout.total_size)
            finally:
                shm.close_fd()
            write_header(mm, layout, os.getpid())
            sems = {k: posix_ipc.Semaphore(names[k], flags, mode=0o600, initial_value=1 if k == "lock" else 0)
                    for k in ("cmd", "reply", "lock")}
        except posix_ipc.ExistentialError:
            raise ChannelBusy(f"another runner is starting on channel '{channel}' at the same time; "
                              f"choose another --channel") from None
        return cls(channel, mm, layout, sems, owner=True)

    @classmethod
    def attach(cls, channel: str) -> "Channel":
        """Attach to a runner's channel; raises FileNotFoundError when none is served."""
        names = object_names(channel)
        try:
            shm = posix_ipc.SharedMemory(names["shm"])
            sems = {k: posix_ipc.Semaphore(names[k]) for k in ("cmd", "reply", "lock")}
        except posix_ipc.ExistentialError:
            raise FileNotFoundError(f"no runner serves channel '{channel}'; start one with "
                                    f"'episodic serve --channel {channel}'") from None
        try:
            mm = mmap.mmap(shm.fd, shm.size)
        finally:
            shm.close_fd()
        try:
            layout = read_header(mm)
        except LayoutError:
            mm.close()
            raise
        return cls(channel, mm, layout, sems, owner=False)

    def close(self) -> None:
        """Unmap and close; the owner also unlinks every object."""
        for sem in (self.cmd_ready, self.reply_ready, self.lock):
            sem.close()
        try:
            self.mm.close()
        except BufferError:
            pass  # numpy views still alive; the mapping goes with the process
        if self.owner:
            remove(self.name)
