"""`episodic serve --sl-shm`: SL's own SysV transport (bridge/sl_shm.py), tested with a clean-room C
learner written from SL's layout alone (clients/c/sl_shm_learner.c): its episodes, refusals
included, are bit-identical to the same commands sent natively; the reply and the episode's steps
are where SL puts them; a second runner on the same keys is refused and the keys are gone after."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from episodic.bridge.channel import ChannelError
from episodic.interface.commands import ResetCommand, StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import ROOT, Served, assert_same_steps, channel_name, wave

sysv_ipc = pytest.importorskip("sysv_ipc", reason="the 'sl' extra: pip install 'episodic[sl]'")
from episodic.bridge.sl_shm import SLKeys, SLShm  # noqa: E402 - needs sysv_ipc

pytestmark = pytest.mark.slow  # a C compiler, a served runner

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
CONTEXT = np.array([0.5, 0.2, 1.5])


def native_commands(q: np.ndarray, bad: np.ndarray) -> list:
    """What sl_shm_learner sends, as the runner's own commands (SLShm's episode ids)."""
    return [StartCommand(1, 1, context=CONTEXT), TrajectoryCommand(1, 1, 1, bad), TrajectoryCommand(1, 1, 1, q),
            StartCommand(2, 1, context=CONTEXT), TrajectoryCommand(2, 1, 1, q),
            StartCommand(3, 2, context=CONTEXT), TrajectoryCommand(3, 1, 2, q), ResetCommand(3)]


@pytest.fixture(scope="module")
def learner(tmp_path_factory) -> Path:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc)")
    program = tmp_path_factory.mktemp("sl") / "sl_shm_learner"
    source = ROOT / "clients" / "c" / "sl_shm_learner.c"
    build = subprocess.run(["cc", "-std=c99", "-O2", "-o", str(program), str(source), "-lm"], capture_output=True,
                           text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    return program


def run_learner(learner: Path, folder: Path, keys: SLKeys, *args: str) -> np.ndarray:
    """sl_shm_learner against a runner served on ``keys``; its replies (8 x 21)."""
    q = wave(HOME)
    np.ascontiguousarray(q, dtype="<f8").tofile(folder / "q.bin")
    with Served(channel_name(), folder / "sl.h5", "--sl-shm", "--sl-keys", str(keys.state), str(keys.command),
                *args) as s:
        assert "SL's SysV keys" in s.banner
        out = subprocess.run([str(learner), str(folder / "q.bin"), str(folder), str(keys.state), str(keys.command)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        if not args:
            with Runner(make_task("reach")) as other, pytest.raises(ChannelError, match="another runner serves"):
                SLShm(other, keys)  # a second runner on the same keys
        assert s.stop() == 0
    for key in (keys.state, keys.trajectory, keys.steps):  # removed at exit
        with pytest.raises(sysv_ipc.ExistentialError):
            sysv_ipc.SharedMemory(key)
    return np.fromfile(folder / "replies.bin").reshape(8, 21)


def own_keys(offset: int) -> SLKeys:
    """Keys no other test process uses."""
    return SLKeys.numbered(0x5100_0000 + os.getpid() % 100_000 * 16 + offset,
                           0x5200_0000 + os.getpid() % 100_000 * 16 + offset)


def test_a_c_learner_speaking_sl_s_sysv_layout_runs_as_the_native_commands(learner, tmp_path):
    q = wave(HOME)
    bad = q[:2].copy()
    bad[0, 3] = np.nan
    replies = run_learner(learner, tmp_path, own_keys(0))

    with Runner(make_task("reach"), log=tmp_path / "native.h5") as runner:
        native = [runner.send(c) for c in native_commands(q, bad)]
    flags = [r.flag for r in native]  # the NaN and the motion after that episode ended are refused
    assert flags[:2] == [Flag.OK, Flag.INVALID_PAYLOAD] and flags[2] != Flag.OK
    assert flags[3:] == [Flag.OK] * 4 + [Flag.ABORTED_BY_LEARNER]
    sl, reference = read_episodes(tmp_path / "sl.h5"), read_episodes(tmp_path / "native.h5")
    assert len(sl) == len(reference) == 3
    for ours, theirs in zip(sl, reference):  # bit for bit, the refused motion's episode too
        assert_same_steps(theirs, ours)
        assert (ours.attrs["return"], ours.attrs["flag"]) == (theirs.attrs["return"], theirs.attrs["flag"])

    # episode_state: flag 1 (answered), state[0] the command's reward, then the task state
    assert list(replies[:, 20]) == [1] * 8
    assert replies[:, 0].tobytes() == np.array([r.reward for r in native]).tobytes()
    assert replies[:, 1:5].tobytes() == np.array([r.state for r in native]).tobytes()
    assert not replies[:, 5:20].any()

    # episode_steps after the second episode's motion: its motion steps, as SL lays them out
    steps = reference[1].steps
    motion = steps["index"] >= 1
    rows = np.fromfile(tmp_path / "steps.bin").reshape(-1, 67)
    assert len(rows) == motion.sum() == len(q)
    for k, name in enumerate(("q", "qd", "qdd", "q_d", "qd_d", "qdd_d", "u")):
        assert rows[:, 7 * k:7 * k + 7].tobytes() == steps[name][motion].astype(float).tobytes(), name
    assert rows[:, 49:56].tobytes() == np.hstack([steps["ee_pos"], steps["ee_quat"]])[motion].astype(float).tobytes()
    assert not rows[:, 56:62].any()  # reach has no ball
    assert rows[:, 62:65].tobytes() == steps["task_state"][motion][:, :3].astype(float).tobytes()  # the target
    assert list(rows[:, 65]) == list(steps["index"][motion] + 1)  # SL's command index: the start is 1
    assert list(rows[:, 66]) == list(steps["step"][motion] + 1)


def test_a_realtime_runner_answers_sl_s_learner(learner, tmp_path):
    replies = run_learner(learner, tmp_path, own_keys(8), "--mode", "realtime")
    assert list(replies[:, 20]) == [1] * 8  # every command answered, the robot held between them
    assert list(replies[[0, 3, 5], 1]) == [0.5] * 3 and np.isfinite(replies[[4, 6, 7], 0]).all()
