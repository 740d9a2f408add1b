"""Real-time scheduling of a control loop, as robot controllers run their control thread (SL,
ros2_control): SCHED_FIFO at a fixed priority, so no ordinary process on its core delays a tick,
and locked memory, so no page fault does. Linux only.

    obtained = set_realtime(80)   # SchedulingError (saying what to do) when not allowed
    print(obtained.summary())     # "SCHED_FIFO priority 80, memory locked"

``describe()`` tells how a process is scheduled without changing it (what a run's log records).
The kernel's RT throttling (``kernel.sched_rt_runtime_us``, 950000 by default, -1 = off) may
still stop a SCHED_FIFO task for the rest of each ``sched_rt_period_us`` (1 s) while other tasks
wait for its core: ``Scheduling.throttling_warning`` says so and how to turn it off.
"""
from __future__ import annotations

import ctypes
import os
import resource
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")  # us of each period RT tasks may use; -1: all
RT_PERIOD = Path("/proc/sys/kernel/sched_rt_period_us")
CAP_IPC_LOCK = 14  # bit of the capability in /proc/PID/status's CapEff (linux/capability.h)
MCL_CURRENT, MCL_FUTURE = 1, 2  # mlockall flags (sys/mman.h)
POLICIES = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR",
            os.SCHED_BATCH: "SCHED_BATCH", os.SCHED_IDLE: "SCHED_IDLE"}


class SchedulingError(RuntimeError):
    """The real-time priority asked for cannot be had; the message says what would allow it."""


@dataclass(frozen=True)
class Scheduling:
    """How a process is scheduled. ``policy``: "SCHED_FIFO", "SCHED_OTHER", ...; ``priority``:
    its real-time priority (1..99; 0 outside SCHED_FIFO/SCHED_RR); ``memory_locked``: whether its
    memory is locked in RAM (VmLck > 0 in /proc/PID/status); ``rt_runtime_us`` and
    ``rt_period_us``: the kernel's RT throttling, us of each period real-time tasks may use
    (-1: no throttling; None: unreadable); ``memory_note``: why memory asked to be locked was not
    ("" otherwise)."""

    policy: str
    priority: int
    memory_locked: bool
    rt_runtime_us: int | None
    rt_period_us: int | None
    memory_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """E.g. "SCHED_FIFO priority 80, memory locked" or "SCHED_OTHER, memory not locked"."""
        policy = f"{self.policy} priority {self.priority}" if self.priority else self.policy
        return f"{policy}, memory {'locked' if self.memory_locked else 'not locked'}"

    def throttling_warning(self) -> str:
        """A warning when a real-time task is under the kernel's RT throttling, saying how long it
        may be stopped and how to turn it off; "" otherwise."""
        if not self.priority or self.rt_runtime_us in (None, -1) or self.rt_period_us is None:
            return ""
        stop_ms = (self.rt_period_us - self.rt_runtime_us) / 1000
        return (f"warning: the kernel's RT throttling is on (kernel.sched_rt_runtime_us = {self.rt_runtime_us} of "
                f"{self.rt_period_us}): it may stop the runner for {stop_ms:g} ms of every "
                f"{self.rt_period_us / 1e6:g} s "
                f"while other tasks wait for its core; turn it off with `sysctl kernel.sched_rt_runtime_us=-1` "
                f"(as root). A real robot wants a PREEMPT_RT kernel as well")


REALTIME_PRIORITY = 50  # SCHED_FIFO priority of episodic's paced loops: a realtime runner, robot-server, the relay


def realtime_where_permitted(priority: int | None, warn: Callable[[str], object]) -> None:
    """SCHED_FIFO with locked memory for the calling thread's process (``set_realtime``): at
    ``priority`` (SchedulingError when not permitted), or when None at REALTIME_PRIORITY as far as
    the process may: when it may not, ``warn`` gets the reason and goes on (expect more jitter)."""
    try:
        set_realtime(REALTIME_PRIORITY if priority is None else priority)
    except SchedulingError as exc:
        if priority is not None:
            raise
        warn(str(exc))


def set_realtime(priority: int, pid: int = 0) -> Scheduling:
    """Put ``pid`` (0: the calling thread; else that process's main thread; threads it starts
    later inherit it) under SCHED_FIFO at ``priority`` (1..99), and lock all the calling
    process's memory (mlockall MCL_CURRENT | MCL_FUTURE) when ``pid`` is the calling process and
    that cannot make later allocations fail: RLIMIT_MEMLOCK unlimited, or CAP_IPC_LOCK (root);
    otherwise nothing is locked and ``memory_note`` says why. What was obtained.

    SchedulingError when the priority is not allowed (not root and no CAP_SYS_NICE, and
    RLIMIT_RTPRIO below ``priority``), with what to do about it."""
    if not 1 <= priority <= 99:
        raise ValueError(f"a SCHED_FIFO priority is 1 to 99, not {priority}")
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError as exc:
        raise SchedulingError(
            f"cannot run under SCHED_FIFO priority {priority} ({exc.strerror}): run as root, or give the "
            f"interpreter the capability (sudo setcap cap_sys_nice+ep {os.path.realpath(sys.executable)}), or "
            f"allow your user real-time priorities (a line '<user> - rtprio {priority}' in "
            f"/etc/security/limits.conf, then log in again)") from None
    note = _lock_memory() if pid in (0, os.getpid()) else "mlockall locks only the calling process's memory"
    return describe(pid, memory_note=note)


def describe(pid: int = 0, memory_note: str = "") -> Scheduling:
    """How ``pid`` (0: the calling thread) is scheduled now; changes nothing."""
    policy = os.sched_getscheduler(pid)
    return Scheduling(POLICIES.get(policy, str(policy)), os.sched_getparam(pid).sched_priority,
                      _status_field(pid, "VmLck", 10) > 0, _read_int(RT_RUNTIME), _read_int(RT_PERIOD), memory_note)


def _lock_memory() -> str:
    """Lock the calling process's memory, present and future, when that is safe; "" when it was
    locked, else why not and what would allow it."""
    limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    if limit != resource.RLIM_INFINITY and not _has_capability(CAP_IPC_LOCK):
        return (f"memory not locked: RLIMIT_MEMLOCK is {limit // 1024} KiB and the process lacks CAP_IPC_LOCK, "
                f"so later allocations would fail; run as root or allow unlimited locked memory "
                f"('<user> - memlock unlimited' in /etc/security/limits.conf)")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
        return f"memory not locked: mlockall failed ({os.strerror(ctypes.get_errno())})"
    return ""


def _has_capability(bit: int) -> bool:
    """Whether the calling process has capability ``bit`` in its effective set."""
    return bool(_status_field(0, "CapEff", 16) >> bit & 1)


def _status_field(pid: int, field: str, base: int) -> int:
    """The number (in ``base``) that follows ``field:`` in /proc/PID/status (0 when absent)."""
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0], base)
    return 0


def _read_int(path: Path) -> int | None:
    """The integer in ``path``; None when it cannot be read."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None
