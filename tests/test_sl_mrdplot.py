"""MRDPLOT as SL writes and reads it: a header whose frequency runs into the first name, as SL's
Matlab writer leaves it; trajectory files with SL's joint names (the WAM's R_SFE ... R_WAA from
robot.toml), whose feedforward torques (<joint>_uff) are refused rather than dropped unless 0;
names and units longer than SL's readers hold are refused."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from episodic.interface.robot import RobotError, load_robot
from episodic.tools.export.mrdplot import NAME_BYTES, MrdplotError, read_mrdplot, trajectory_from_mrdplot, write_mrdplot

SL_JOINTS = ("R_SFE", "R_SAA", "R_HR", "R_EB", "R_WR", "R_WFE", "R_WAA")


def matlab_file(path, names, units, freq: int, rows: np.ndarray):
    """A file laid out as SL's Matlab writer lays it out: no blank between the frequency and the
    first name, each name and unit followed by two blanks."""
    n_rows, n_cols = rows.shape
    head = f"{n_rows * n_cols}  {n_cols}  {n_rows}  {freq}" + "".join(f"{n}  {u}  " for n, u in zip(names, units))
    path.write_bytes(head.encode() + b"\n" + struct.pack(f">{rows.size}f", *rows.ravel()))
    return path


def test_a_header_whose_frequency_runs_into_the_first_name_is_read(tmp_path):
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    path = matlab_file(tmp_path / "d00002", ["time", "R_SFE_th"], ["s", "rad"], 500, rows)
    assert path.read_bytes().startswith(b"6  2  3  500time  s  R_SFE_th")
    names, units, freq, data = read_mrdplot(path)
    assert names == ["time", "R_SFE_th"] and units == ["s", "rad"] and freq == 500.0
    assert data.tobytes() == rows.tobytes()


def test_a_trajectory_file_with_sl_s_joint_names_is_read_for_the_wam(tmp_path):
    wam = load_robot("wam")
    assert wam.sl_joint_names == SL_JOINTS
    q = wam.home + np.linspace(0, 0.1, 20)[:, None]
    names = [f"{j}_th" for j in SL_JOINTS] + [f"{j}_uff" for j in SL_JOINTS]
    path = matlab_file(tmp_path / "traj", names, ["rad"] * 7 + ["Nm"] * 7, 500,
                       np.hstack([q, np.zeros_like(q)]).astype(np.float32))
    command = trajectory_from_mrdplot(path, wam)
    assert command.q.tobytes() == q.astype(np.float32).astype(float).tobytes()
    with pytest.raises(MrdplotError, match="no position column for joint j1, j2, j3, j4, j5, j6 of robot puma560"):
        trajectory_from_mrdplot(path, "puma560")  # six joints named j1..j6 and no SL names
    torques = np.hstack([q, np.full_like(q, 0.5)]).astype(np.float32)
    with pytest.raises(MrdplotError, match="R_SFE_uff ... columns hold feedforward torques"):
        trajectory_from_mrdplot(matlab_file(tmp_path / "uff", names, ["rad"] * 7 + ["Nm"] * 7, 500, torques), wam)
    mixed = matlab_file(tmp_path / "mixed", ["j1_th", *[f"{j}_th" for j in SL_JOINTS[1:]]], ["rad"] * 7, 500,
                        q.astype(np.float32))
    with pytest.raises(MrdplotError, match=r"no position column for joint j2.*or SL's names R_SFE, R_SAA"):
        trajectory_from_mrdplot(mixed, wam)  # one naming for all joints


def test_names_and_units_longer_than_sl_s_readers_hold_are_refused(tmp_path):
    data = np.zeros((2, 1))
    write_mrdplot(tmp_path / "ok.mrd", ["x" * NAME_BYTES], ["m"], 500, data)
    assert read_mrdplot(tmp_path / "ok.mrd")[0] == ["x" * NAME_BYTES]
    for names, units in ((["x" * (NAME_BYTES + 1)], ["m"]), (["x"], ["u" * (NAME_BYTES + 1)])):
        with pytest.raises(MrdplotError, match="at most 40 bytes long"):
            write_mrdplot(tmp_path / "long.mrd", names, units, 500, data)
    assert not (tmp_path / "long.mrd").exists()


def test_a_robot_s_sl_names_must_name_every_joint(tmp_path):
    folder = tmp_path / "wam2"
    source = load_robot("wam").mjcf.parent
    folder.mkdir()
    for f in source.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    toml = folder / "robot.toml"
    toml.write_text(toml.read_text().replace('sl_names = ["R_SFE", ', 'sl_names = ['))
    with pytest.raises(RobotError, match=r"\[joints\] sl_names must give 7 distinct names"):
        load_robot(str(folder))
