"""Real-time scheduling (episodic.runtime.scheduling, `episodic serve --priority`), with real processes:
a served realtime runner under SCHED_FIFO and its log's record of it, the refusals (blocking
mode; a process that may not have the priority), and the description of a process's scheduling."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from episodic.logs import read_metadata
from episodic.runtime.scheduling import Scheduling, describe, set_realtime
from episodic.tools.served import ServedRunner
from tests.helpers import ROOT, channel_name, shm_leftovers

# starts runners; paced or timed, so alone on the machine
pytestmark = [pytest.mark.slow, pytest.mark.serial]
SERVE = [sys.executable, "-m", "episodic", "serve"]
RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")
RT_PERIOD = Path("/proc/sys/kernel/sched_rt_period_us")


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers() == before


def may_run_fifo(priority: int) -> bool:
    """Whether a process started from here may put itself under SCHED_FIFO at ``priority``."""
    probe = f"import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param({priority}))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def locked_kib(pid: int) -> int:
    """VmLck of process ``pid``, kB."""
    line = next(s for s in Path(f"/proc/{pid}/status").read_text().splitlines() if s.startswith("VmLck:"))
    return int(line.split()[1])


def read_int(path: Path) -> int | None:
    return int(path.read_text()) if path.exists() else None


def serve_run(*args: str, prefix: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    """`episodic serve ARGS` run to its end (these runs fail before serving), its output as text."""
    return subprocess.run([*prefix, *SERVE, "--channel", channel_name(), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, **kwargs)


def test_realtime_runner_serves_under_sched_fifo_and_logs_it(tmp_path):
    if not may_run_fifo(10):
        pytest.skip("this user may not use SCHED_FIFO (not root, no CAP_SYS_NICE, RLIMIT_RTPRIO 0)")
    log = tmp_path / "rt.h5"
    with ServedRunner(channel_name(), task="reach", log=log, mode="realtime", priority=10) as runner:
        pid = runner.proc.pid
        assert os.sched_getscheduler(pid) == os.SCHED_FIFO
        assert os.sched_getparam(pid).sched_priority == 10
        locked = locked_kib(pid) > 0
        assert ", realtime mode, SCHED_FIFO priority 10, memory " in runner.banner
        runner.stop(check=True)
        warned = "sysctl kernel.sched_rt_runtime_us=-1" in runner.stderr_text()
    scheduling = read_metadata(log)["scheduling"]
    assert (scheduling["policy"], scheduling["priority"], scheduling["memory_locked"]) == ("SCHED_FIFO", 10, locked)
    assert scheduling["rt_runtime_us"] == read_int(RT_RUNTIME)
    assert warned == (scheduling["rt_runtime_us"] not in (None, -1))  # the RT throttling warning


def test_a_run_without_priority_logs_normal_scheduling(tmp_path):
    log = tmp_path / "blocking.h5"
    with ServedRunner(channel_name(), task="reach", log=log) as runner:
        assert "SCHED" not in runner.banner
        runner.stop(check=True)
    scheduling = read_metadata(log)["scheduling"]
    assert (scheduling["policy"], scheduling["priority"], scheduling["memory_locked"]) == ("SCHED_OTHER", 0, False)


def test_priority_needs_realtime_mode():
    result = serve_run("--mode", "blocking", "--priority", "10")
    assert result.returncode == 1
    assert "--priority is for --mode realtime" in result.stderr and "Traceback" not in result.stderr
    assert "serving" not in result.stdout


def without_sys_nice() -> tuple[str, ...]:
    """A command prefix under which a process may not have a real-time priority (with
    RLIMIT_RTPRIO 0): root drops CAP_SYS_NICE with setpriv; another user has none already."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: CAP_SYS_NICE cannot be dropped, so EPERM cannot be produced")
    return ("setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice")


def no_rtprio() -> None:
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))


def test_a_priority_not_permitted_is_refused_with_what_to_do(tmp_path):
    log = tmp_path / "refused.h5"
    result = serve_run("--mode", "realtime", "--priority", "10", "--log", str(log), prefix=without_sys_nice(),
                       preexec_fn=no_rtprio)
    assert result.returncode == 1, result.stderr
    message = " ".join(result.stderr.split())
    assert "cannot run under SCHED_FIFO priority 10 (Operation not permitted)" in message
    for advice in ("run as root", "setcap cap_sys_nice+ep", "rtprio 10' in /etc/security/limits.conf",
                   "leave out --priority"):
        assert advice in message
    assert "Traceback" not in result.stderr and "serving" not in result.stdout
    assert not log.exists()  # refused before the runner (and its log) existed


def test_memory_is_left_unlocked_when_locking_it_could_make_allocations_fail():
    """Without CAP_IPC_LOCK and with a finite RLIMIT_MEMLOCK, MCL_FUTURE would make allocations
    past the limit fail: the priority is set, memory is not locked, and the process still
    allocates 80 MB (ten times the limit)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (to hold CAP_SYS_NICE without CAP_IPC_LOCK)")
    child = ("import json, numpy; from episodic.runtime.scheduling import set_realtime; s = set_realtime(5); "
             "numpy.ones(10_000_000); print(json.dumps(s.as_dict()))")
    limit = 8 << 20  # bytes

    def small_memlock() -> None:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (limit, limit))

    result = subprocess.run(["setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", sys.executable, "-c",
                             child], capture_output=True, text=True, timeout=60, preexec_fn=small_memlock)
    assert result.returncode == 0, result.stderr
    obtained = json.loads(result.stdout)
    assert (obtained["policy"], obtained["priority"], obtained["memory_locked"]) == ("SCHED_FIFO", 5, False)
    assert "RLIMIT_MEMLOCK is 8192 KiB" in obtained["memory_note"]


def test_describe_the_current_process():
    assert os.sched_getscheduler(0) == os.SCHED_OTHER, "the tests run under normal scheduling"
    assert describe() == Scheduling("SCHED_OTHER", 0, locked_kib(os.getpid()) > 0, read_int(RT_RUNTIME),
                                    read_int(RT_PERIOD))
    assert describe().summary() == "SCHED_OTHER, memory not locked"
    assert describe().throttling_warning() == ""  # no real-time priority to throttle


def test_describe_another_process():
    with subprocess.Popen(["sleep", "30"], preexec_fn=lambda: os.sched_setscheduler(0, os.SCHED_IDLE,
                                                                                    os.sched_param(0))) as child:
        try:
            assert describe(child.pid).policy == "SCHED_IDLE"
            assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        finally:
            child.kill()


def test_throttling_warning_says_how_long_and_how_to_turn_it_off():
    throttled = Scheduling("SCHED_FIFO", 80, True, 950_000, 1_000_000)
    assert throttled.summary() == "SCHED_FIFO priority 80, memory locked"
    warning = throttled.throttling_warning()
    assert "50 ms of every 1 s" in warning and "sysctl kernel.sched_rt_runtime_us=-1" in warning
    assert "PREEMPT_RT" in warning
    assert Scheduling("SCHED_FIFO", 80, True, -1, 1_000_000).throttling_warning() == ""


@pytest.mark.parametrize("priority", [0, 100])
def test_priority_out_of_range_is_refused(priority):
    with pytest.raises(ValueError, match="1 to 99"):
        set_realtime(priority)
