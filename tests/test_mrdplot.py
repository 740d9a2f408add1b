"""SL's MRDPLOT format: files written byte by byte from the format's definition are read, the
export of a real log parses back byte by byte, trajectory files run through a real Runner, and
malformed files are refused with the problem named. Real HDF5 logs and files, no mocks."""
from __future__ import annotations

import struct
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.export.mrdplot import MrdplotError, export_mrdplot, read_mrdplot, trajectory_from_mrdplot
from tests.helpers import run_episode, wave

JOINTS = [f"j{i}" for i in range(1, 8)]  # the WAM's joint names
SL_JOINTS = ["R_SFE", "R_SAA", "R_HR", "R_EB", "R_WR", "R_WFE", "R_WAA"]  # SL's, which the export writes


def spec_file(path: Path, names, units, freq: float, rows, sep: bytes = b"  ", tail: bytes = b"  \n") -> Path:
    """An MRDPLOT file made from the format's definition alone: the ASCII header (rows·cols,
    cols, rows, frequency, then name and unit per column, blank-separated) and the values as
    big-endian IEEE-754 float32, row by row."""
    rows = [list(r) for r in rows]
    n_rows, n_cols = len(rows), len(names)
    head = sep.join([str(n_rows * n_cols).encode(), str(n_cols).encode(), str(n_rows).encode(),
                     repr(float(freq)).encode()]) + b"\n"
    head += sep.join(n.encode() + sep + u.encode() for n, u in zip(names, units)) + tail
    body = b"".join(struct.pack(">f", float(v)) for r in rows for v in r)
    path.write_bytes(head + body)
    return path


def parse_bytes(path: Path) -> tuple[list[str], list[bytes], tuple[int, int, int, str], bytes, tuple]:
    """A file as SL's writer lays it out, split by hand: the header's first line (four items),
    its second (name, unit pairs, each followed by two blanks), and the big-endian data."""
    raw = path.read_bytes()
    first, rest = raw.split(b"\n", 1)
    items = first.decode().split()
    total, cols, rows = int(items[0]), int(items[1]), int(items[2])
    # the names line has exactly cols pairs; the data follows its two blanks and newline
    tokens = rest[: len(rest) - 4 * total].decode("ascii").split()
    assert len(tokens) == 2 * cols
    assert rest[len(rest) - 4 * total - 3: len(rest) - 4 * total] == b"  \n"
    data = rest[len(rest) - 4 * total:]
    return tokens[0::2], tokens[1::2], (total, cols, rows, items[3]), data, struct.unpack(f">{total}f", data)


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    """A reach run: an episode from home (no move to the start) and one from another posture
    (a move to the start, then two segments)."""
    path = tmp_path_factory.mktemp("mrd") / "run.h5"
    with Runner(make_task("reach"), log=path, seed=1) as r:
        run_episode(r, 1, n_segments=2)
        posture = r.robot.home + np.array([0.2, -0.1, 0.1, 0.2, 0.0, 0.1, 0.1])
        r.machine.skip_goto_start = False  # the move to the start simulated and logged (episodic.runtime.start)
        r.send(StartCommand(2, 2, posture=posture, context=np.array([0.5, 0.2, 1.4])))
        for k in (1, 2):
            r.send(TrajectoryCommand(2, k, 2, wave(posture, n=300, phase=0.0 if k == 1 else np.pi)))
    return path


def expected_table(episode) -> tuple[list[str], list[str], np.ndarray]:
    """The documented columns of an exported episode, built from the log's arrays."""
    s = episode.steps
    names = ["time", "index"]
    units = ["s", "-"]
    blocks = [s["time"][:, None], s["index"][:, None]]
    for column, suffix, unit in (("q", "th", "rad"), ("qd", "thd", "rad/s"), ("qdd", "thdd", "rad/s^2"),
                                 ("u", "u", "Nm"), ("q_d", "des_th", "rad"), ("qd_d", "des_thd", "rad/s"),
                                 ("qdd_d", "des_thdd", "rad/s^2"), ("u_ff", "uff", "Nm")):
        names += [f"{j}_{suffix}" for j in SL_JOINTS]
        units += [unit] * 7
        blocks.append(s[column])
    names += ["ee_x", "ee_y", "ee_z", "ee_q0", "ee_q1", "ee_q2", "ee_q3"]
    units += ["m"] * 3 + ["-"] * 4
    blocks += [s["ee_pos"], s["ee_quat"]]
    names += ["target_x", "target_y", "target_z", "distance", "reward"]
    units += ["-"] * 5
    blocks += [s["task_state"], s["reward"][:, None]]
    return names, units, np.hstack(blocks)


# -- reading files made from the definition -----------------------------------------------------
@pytest.mark.parametrize("sep,tail", [(b"  ", b"  \n"), (b" ", b"\n"), (b"\n", b" \n\n")])
def test_a_file_written_from_the_definition_is_read(tmp_path, sep, tail):
    # the first value's big-endian bytes are blanks (0x20), the last's a newline (0x0a): the data
    # is found by its length, not by where the blanks end
    blank = struct.unpack(">f", b"    ")[0]
    newline = struct.unpack(">f", b"\n\n\n\n")[0]
    rows = [[blank, 1.5, -2.25, 7.0], [0.001, -1e-8, 3.0e38, 12345.678], [0.0, -0.0, 2.0 ** -20, newline]]
    names, units = ["time", "R_SFE_th", "R_SFE_thd", "R_SFE_u"], ["s", "rad", "rad/s", "Nm"]
    path = spec_file(tmp_path / "d00001", names, units, 480.5, rows, sep, tail)
    columns, got_units, freq, data = read_mrdplot(path)
    assert columns == names and got_units == units and freq == 480.5
    assert data.dtype == np.float32 and data.shape == (3, 4)
    assert data.tobytes() == np.array(rows, dtype=np.float32).tobytes()


# -- the export parses back byte by byte ---------------------------------------------------------
def test_export_writes_one_sl_file_per_episode_that_parses_back_byte_by_byte(log, tmp_path):
    result = CliRunner().invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    episodes = read_episodes(log)
    files = sorted(tmp_path.glob("*.mrd"))
    assert [f.name for f in files] == ["run_ep000000.mrd", "run_ep000001.mrd"]
    assert "wrote 2 MRDPLOT files" in result.output
    for episode, path in zip(episodes, files):
        names, units, values = expected_table(episode)
        n = episode.attrs["n_steps"]
        got_names, got_units, (total, cols, rows, freq), _, floats = parse_bytes(path)
        assert (total, cols, rows) == (n * len(names), len(names), n)
        assert float(freq) == 500.0 and path.read_bytes().startswith(f"{total}  {cols}  {rows}  500.000000\n".encode())
        assert got_names == names and got_units == units
        assert np.array(floats, dtype=np.float32).tobytes() == values.astype(np.float32).tobytes()
        columns, _, rate, data = read_mrdplot(path)
        assert columns == names and rate == 500.0 and data.tobytes() == values.astype(np.float32).tobytes()
    second = read_mrdplot(files[1])[3]
    assert (second[:, 1] == 0).any() and (second[:, 1] == 2).any()  # the move to the start is included


def test_export_refuses_to_overwrite_and_selects_episodes(log, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(tmp_path), "-e", "1"])
    assert ok.exit_code == 0 and [p.name for p in tmp_path.iterdir()] == ["run_ep000001.mrd"]
    before = (tmp_path / "run_ep000001.mrd").read_bytes()
    again = runner.invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(tmp_path)])
    assert again.exit_code == 1 and "run_ep000001.mrd exists" in again.output and "--overwrite" in again.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_ep000001.mrd"]  # nothing written
    forced = runner.invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(tmp_path), "--overwrite"])
    assert forced.exit_code == 0 and (tmp_path / "run_ep000001.mrd").read_bytes() == before
    missing = runner.invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(tmp_path), "-e", "7"])
    assert missing.exit_code == 1 and "no episode 7" in missing.output


def test_export_reports_progress_per_episode(log, tmp_path):
    calls = []
    result = export_mrdplot(log, tmp_path, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 2), (2, 2)] and len(result.files) == 2


def test_export_skips_an_episode_not_written_whole_and_says_so(log, tmp_path):
    copy = tmp_path / "cut.h5"
    copy.write_bytes(log.read_bytes())
    with h5py.File(copy, "r+") as f:  # a damaged file: episode 1's steps cut off
        second = f["episodes"][1]
        f["steps"].resize(second["steps_start"] + 1, axis=0)
        f["summary"].resize(1, axis=0)
    start, end = second["steps_start"], second["steps_start"] + second["n_steps"] - 1
    why = f"its rows {start}..{end} of /steps are not in the file"
    result = CliRunner().invoke(main, ["export", str(copy), "--format", "mrdplot", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert f"episode 1 not exported: it was not written whole ({why})" in result.output
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["cut_ep000000.mrd"]
    asked = CliRunner().invoke(main, ["export", str(copy), "--format", "mrdplot", "--out", str(tmp_path), "-e", "1"])
    assert asked.exit_code == 1 and f"episode 1 ({why}) of" in asked.output
    assert "not written whole" in asked.output and not list(tmp_path.glob("*.mrd"))


# -- trajectory files -> commands ------------------------------------------------------------------
def test_an_sl_trajectory_file_runs_unchanged_through_a_runner(tmp_path):
    """A trajectory file as SL's trajectory task reads it (time and <joint>_th columns at 100 Hz)
    becomes a command at the control rate that a real runner executes."""
    robot = load_robot("wam")
    t = np.arange(101) / 100.0
    q = robot.home + 0.15 * np.sin(np.pi * t)[:, None] * np.linspace(1.0, 0.4, 7)
    names = ["time"] + [f"{j}_th" for j in JOINTS]
    path = spec_file(tmp_path / "traj.mrd", names, ["s"] + ["rad"] * 7, 100, np.column_stack([t, q]))
    cmd = trajectory_from_mrdplot(path, robot, episode_id=4)
    stored = q.astype(np.float32).astype(float)
    assert isinstance(cmd, TrajectoryCommand) and (cmd.episode_id, cmd.index, cmd.max_commands) == (4, 1, 1)
    assert cmd.rate == 500.0 and cmd.q.shape == (501, 7) and cmd.qd is None and cmd.qdd is None
    np.testing.assert_allclose(cmd.q[::5], stored, rtol=0, atol=1e-12)  # through the file's samples
    t_out = np.arange(501) / 500.0  # and between them along the motion (a cubic spline)
    np.testing.assert_allclose(cmd.q, robot.home + 0.15 * np.sin(np.pi * t_out)[:, None] * np.linspace(1.0, 0.4, 7),
                               rtol=0, atol=2e-6)
    with Runner(make_task("reach"), robot, seed=0) as runner:
        assert runner.send(StartCommand(4, 1)).flag == Flag.OK
        reply = runner.send(cmd)
        assert reply.flag == Flag.OK and reply.episode_done, reply.message
        steps = runner.episodes[-1].steps()
    mine = steps["index"] == 1
    np.testing.assert_array_equal(steps["q_d"][mine], cmd.q)
    assert np.abs(steps["q"][mine] - cmd.q).max() < 0.05


def test_velocities_and_accelerations_come_from_the_file_at_the_control_rate(tmp_path):
    robot = load_robot("wam")
    t = np.arange(250) / 500.0
    q = robot.home + 0.1 * np.sin(2 * np.pi * t)[:, None]
    qd = 0.2 * np.pi * np.cos(2 * np.pi * t)[:, None] * np.ones(7)
    names = [f"{j}_th" for j in JOINTS] + [f"{j}_thd" for j in JOINTS] + ["R_HAND_x"]
    rows = np.column_stack([q, qd, np.zeros(len(t))])
    cmd = trajectory_from_mrdplot(spec_file(tmp_path / "t.mrd", names, ["rad"] * 7 + ["rad/s"] * 7 + ["m"], 500, rows),
                                  robot)
    assert cmd.q.tobytes() == q.astype(np.float32).astype(float).tobytes()
    assert cmd.qd.tobytes() == qd.astype(np.float32).astype(float).tobytes() and cmd.qdd is None


def test_the_desired_columns_of_an_exported_log_are_preferred(log, tmp_path):
    CliRunner().invoke(main, ["export", str(log), "--format", "mrdplot", "--out", str(tmp_path), "-e", "0"])
    (episode,) = read_episodes(log, [0])
    cmd = trajectory_from_mrdplot(tmp_path / "run_ep000000.mrd", "wam")
    s = episode.steps
    assert cmd.q.tobytes() == s["q_d"].astype(np.float32).astype(float).tobytes()
    assert cmd.qd.tobytes() == s["qd_d"].astype(np.float32).astype(float).tobytes()
    assert cmd.qdd.tobytes() == s["qdd_d"].astype(np.float32).astype(float).tobytes()
    assert not np.array_equal(cmd.q, s["q"].astype(np.float32).astype(float))


# -- refusals --------------------------------------------------------------------------------------
def test_a_missing_joint_column_is_named(tmp_path):
    names = [f"{j}_th" for j in JOINTS if j != "j5"]
    path = spec_file(tmp_path / "t.mrd", names, ["rad"] * 6, 500, np.zeros((3, 6)))
    with pytest.raises(MrdplotError, match=r"no position column for joint j5 of robot wam.*j5_des_th.*j5_th"):
        trajectory_from_mrdplot(path, "wam")


def test_velocities_for_some_joints_only_are_refused(tmp_path):
    names = [f"{j}_th" for j in JOINTS] + ["j1_thd", "j2_thd"]
    path = spec_file(tmp_path / "t.mrd", names, ["rad"] * 7 + ["rad/s"] * 2, 500, np.zeros((3, 9)))
    with pytest.raises(MrdplotError, match=r"j1_thd, j2_thd but no j3_thd"):
        trajectory_from_mrdplot(path, "wam")


def test_a_trajectory_in_degrees_is_refused(tmp_path):
    names = [f"{j}_th" for j in JOINTS]
    path = spec_file(tmp_path / "t.mrd", names, ["deg"] * 7, 500, np.zeros((3, 7)))
    with pytest.raises(MrdplotError, match=r"j1_th is in deg"):
        trajectory_from_mrdplot(path, "wam")


DATA = struct.pack(">6f", *([-1e-30] * 6))  # bytes 0x8d 0xa2 ...: no text


@pytest.mark.parametrize("content,problem", [
    (b"6 two 3 100\nt s x m\n" + DATA, r"header item 2 \(cols\) is 'two', not a whole number"),
    (b"7 2 3 100\nt s x m\n" + DATA, r"number of values, 7, is not rows·cols = 3·2 = 6"),
    (b"6 2 3 fast\nt s x m\n" + DATA, r"header item 4 \(the sampling frequency\) is 'fast'"),
    (b"6 2 3 -5\nt s x m\n" + DATA, r"sampling frequency in the header is -5"),
    (b"6 2 0 100\n", r"0 rows; both must be at least 1"),
    (b"6 2 3 ", r"header ends before item 4"),
    (b"6 2 3 100\nt s x m", r"only 0 bytes follow the header"),
    (b"6 3 2 100\nt s x m\n" + DATA, r"name of column 3 of 3 is not text"),
    (b"", r"header ends before item 1"),
])
def test_a_malformed_header_is_named(tmp_path, content, problem):
    path = tmp_path / "bad.mrd"
    path.write_bytes(content)
    with pytest.raises(MrdplotError, match=problem):
        read_mrdplot(path)


@pytest.mark.parametrize("n_values,problem", [
    (5, r"only \d+ bytes follow the header, but its 3 rows × 2 columns of float32 need 24 bytes"),
    (7, r"4 bytes more than the header's 3 rows × 2 columns of float32 \(24 bytes\)"),
])
def test_a_wrong_data_length_is_named(tmp_path, n_values, problem):
    path = tmp_path / "bad.mrd"
    path.write_bytes(b"6  2  3  100.0\nt  s  x  m  \n" + struct.pack(f">{n_values}f", *([1.5] * n_values)))
    with pytest.raises(MrdplotError, match=problem):
        read_mrdplot(path)
