"""SL's Matlab interface over an episodic channel (clients/matlab/sl_mex.c), tested from SL's
conventions alone: an Octave learner that calls SL's MEX files as package functions, the way the
IAS toolbox's SL environment does (tests/octave/sl_learner.m: a start with a dummy trajectory and
SL's zero-padded context, a motion, the episode's log, a reset, a controller command, a retry while
the flag is -1), against a real `episodic serve`; its episodes are bit-identical to the same
episodes sent with the native Octave client, and SL's context starts the task where it means."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from tests.helpers import Served, assert_same_steps, channel_name, wave
from tests.test_clients import HOME, cases, mex_dir, run_octave  # noqa: F401 - mex_dir is a fixture

pytestmark = pytest.mark.slow  # Octave and served runners

STATE_ROWS = 12  # the learner asks SLGetEpisodeMex for 12 state rows: SL's 9 and 3 more (zero)


def test_sl_learner_runs_unchanged_and_matches_the_native_client(mex_dir, tmp_path):  # noqa: F811
    q = wave(HOME)
    data = tmp_path / "data"
    data.mkdir()
    np.ascontiguousarray(q, dtype="<f8").tofile(data / "q.bin")
    package = tmp_path / "toolbox" / "+Environments" / "+SL" / "+barrett"
    package.mkdir(parents=True)
    for name in ("SLSendTrajectoryMex", "SLGetEpisodeMex", "SLGetInfoMex"):
        shutil.copy(mex_dir / f"{name}.mex", package)

    with Served(channel_name(), tmp_path / "sl.h5") as s:
        out = run_octave(f"setenv('EPISODIC_CHANNEL', '{s.channel}'); addpath('{tmp_path / 'toolbox'}'); "
                         f"sl_learner('{data}', {s.proc.pid});", mex_dir)
        assert s.stop() == 0
    with Served(channel_name(), tmp_path / "native.h5") as s:
        run_octave(f"""
            q = read_rows('{data}/q.bin', 7);
            epConnect('{s.channel}');
            epSendTrajectory([], 0, 0, 1, [0.5 0.2 1.5]);
            [reward, state, flag] = epSendTrajectory(q, 0, 1, 1);
            write_rows('{data}/native.bin', [reward state flag]);
            epSendTrajectory([], 0, 0, 2, [0.5 0.2 1.5]);
            epSendTrajectory(q, 0, 1, 2);
            epSendTrajectory([], 0, -1, 2);
            epDisconnect();""", mex_dir)
        assert s.stop() == 0

    sl, native = read_episodes(tmp_path / "sl.h5"), read_episodes(tmp_path / "native.h5")
    assert [e.attrs["flag"] for e in native] == [Flag.OK, Flag.ABORTED_BY_LEARNER]
    for k in range(2):  # the same episodes, bit for bit
        assert_same_steps(native[k], sl[k])
        assert sl[k].attrs["return"] == native[k].attrs["return"]
    # SL's context started the task at the target it means, the reply as SL lays it out
    states = np.fromfile(data / "states.bin").reshape(20, 2)
    reward, native_state, flag = np.split(np.fromfile(data / "native.bin"), [1, 5])
    assert flag == 0 and states[0, 1] == reward[0]  # state(1): the motion's reward
    assert list(states[1:4, 0]) == [0.5, 0.2, 1.5] and states[1:5, 1].tobytes() == native_state.tobytes()
    assert not states[5:].any()
    assert sl[2].attrs["flag"] == Flag.INVALID_PAYLOAD
    found = [line for line in out.stdout.splitlines() if line.startswith("CONTROLLER")]
    assert found == [f"CONTROLLER 1 {int(Flag.INVALID_PAYLOAD)} SL's layout: this task has no controller of its own "
                     f"for SL to run (its SL map gives no duration): send a motion command (a trajectory) instead"]
    assert "SILENT -1 20" in out.stdout  # no answer within timeOut: flag -1, not an error

    # SLGetEpisodeMex: width x steps, the motion steps only
    steps = sl[0].steps
    motion = steps["index"] >= 1
    m = int(motion.sum())
    assert m == 500
    rows = np.fromfile(data / "episode.bin").reshape(-1, m)
    assert rows.shape[0] == 7 * 7 + 7 + STATE_ROWS + 2
    for k, name in enumerate(("q", "qd", "qdd", "q_d", "qd_d", "qdd_d", "u")):
        assert rows[7 * k:7 * k + 7].T.tobytes() == steps[name][motion].astype(float).tobytes(), name
    cart = rows[49:56].T
    assert cart.tobytes() == np.hstack([steps["ee_pos"], steps["ee_quat"]])[motion].astype(float).tobytes()
    states = rows[56:56 + STATE_ROWS]
    assert not states[:6].any() and not states[9:].any()  # reach has no ball; rows past SL's 9 are 0
    assert states[6:9].T.tobytes() == steps["task_state"][motion][:, :3].astype(float).tobytes()  # the target
    assert list(rows[-2]) == list(steps["index"][motion] + 1) and list(rows[-1]) == list(steps["step"][motion] + 1)
    assert not cases(out.stdout)
