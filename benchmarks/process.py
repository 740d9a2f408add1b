"""What the benchmark scripts read and set about processes: resident memory and core pinning."""
from __future__ import annotations

import os

MULTI_CORE = (os.cpu_count() or 1) > 1  # pin only where there are two cores to pin to


def rss_kib(pid: int | str = "self") -> int:
    """The resident set size of process ``pid`` (this one by default), KiB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def pin(core: int) -> None:
    """Run this process on ``core`` alone (on a multi-core machine)."""
    if MULTI_CORE:
        os.sched_setaffinity(0, {core})
