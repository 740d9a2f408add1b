"""The README's learner runs as printed (against a real `episodic serve`), and docs/protocol.md's
layout tables agree with bridge/layout.py byte for byte."""
from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import numpy as np
import pytest

from episodic.interface.columns import step_widths
from episodic.bridge.layout import (BATCH, BATCH_COMMAND, BATCH_REPLY, BATCH_RESULT, COMMAND, HEADER, LOG_COLUMN,
                                   NAME_BYTES, REPLY, Layout, Sizes)
from tests.helpers import ROOT, Served, channel_name, shm_leftovers

README = ROOT / "README.md"
PROTOCOL = ROOT / "docs" / "protocol.md"
CHANNEL_AS_PRINTED = 'Client("default"'


def python_blocks(markdown: str, heading: str) -> list[str]:
    """The fenced python blocks of the section that starts with ``heading``."""
    section = markdown.split(heading, 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    return re.findall(r"^```python\n(.*?)^```", section, flags=re.M | re.S)


@pytest.mark.slow
def test_readme_learner_runs_against_a_served_runner():
    learner, in_process, gym = python_blocks(README.read_text(), "## A learner in Python")
    assert learner.count(CHANNEL_AS_PRINTED) == 1, "the example attaches to the default channel as printed"
    channel = channel_name()
    before = shm_leftovers()
    out = io.StringIO()
    namespace = {"__name__": "__readme__"}
    with Served(channel):
        with contextlib.redirect_stdout(out):
            exec(compile(learner.replace(CHANNEL_AS_PRINTED, f'Client("{channel}"'), "README learner", "exec"),
                 namespace)
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:10]] == [[str(k), "OK"] for k in range(10)]
    steps, width = namespace["log"]["q"].shape
    assert width == 7 and steps >= len(namespace["move"].q)
    assert shm_leftovers() == before

    # the in-process variant runs on its own
    namespace = {"__name__": "__readme__"}
    exec(compile(in_process, "README in-process", "exec"), namespace)
    reply = namespace["reply"]
    assert reply.flag.name == "OK" and reply.episode_done
    np.testing.assert_allclose(reply.state[:3], [0.6, 0.1, 1.5])
    assert namespace["same"].flag.name == "OK"

    # the Gymnasium environment, with the names the in-process variant imported
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(gym, "README gym", "exec"), namespace)
    assert namespace["terminated"] and namespace["info"]["flag"] == "OK"
    assert out.getvalue().startswith("target [") and "return -" in out.getvalue()


@pytest.mark.slow
def test_every_readme_code_block_is_tested():
    """Python blocks run above; every command of a shell block names a program that exists here
    (benchmark scripts answer --help; the install lines are what CI runs)."""
    text = README.read_text()
    assert len(re.findall(r"^```python\n", text, flags=re.M)) == (len(python_blocks(text, "## A learner in Python"))
                                                                  + len(python_blocks(text, "## Learning")))
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.strip().splitlines():
            words = line.split()
            if words[:2] == ["python", "-m"]:
                continue  # the test command
            if words[0] == "python":
                done = subprocess.run([sys.executable, words[1], "--help"], cwd=ROOT, capture_output=True, timeout=60)
                assert done.returncode == 0, (line, done.stderr)
            else:
                assert words[0] in ("pip", "episodic"), line


def test_readme_learning_example_runs_and_improves(tmp_path, monkeypatch):
    (block,) = python_blocks(README.read_text(), "## Learning")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    namespace = {"__name__": "__readme__"}
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README learning", "exec"), namespace)
    curve = namespace["curve"]
    assert len(out.getvalue().splitlines()) == 1 + 1 + 5 + 1  # header, the start, an iteration each, the final
    assert curve.final_return > curve.rows[0].policy_return + 0.03
    assert (tmp_path / "runs" / "reach_power.csv").is_file()


# -- docs/protocol.md -------------------------------------------------------------------------

C_TYPES = {"uint8": "|u1", "uint32": "<u4", "int32": "<i4", "int64": "<i8", "uint64": "<u8", "float64": "<f8"}


def marked_table(text: str, mark: str) -> list[list[str]]:
    """Rows (cells stripped of backticks) of the table right after ``<!-- layout: mark -->``."""
    match = re.search(rf"<!-- layout: {re.escape(mark)} -->\n((?:\|.*\n)+)", text)
    assert match, f"docs/protocol.md has no table marked '{mark}'"
    rows = [[cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
            for line in match.group(1).splitlines()]
    return rows[2:]  # without the header row and the alignment row


def dtype_of(ctype: str) -> str:
    m = re.fullmatch(r"char\[(\d+)\]", ctype)
    assert m or ctype in C_TYPES, f"unknown type '{ctype}' in docs/protocol.md"
    return f"|S{m.group(1)}" if m else C_TYPES[ctype]


@pytest.mark.parametrize("mark, dtype", [("HEADER", HEADER), ("LOG_COLUMN", LOG_COLUMN),
                                         ("COMMAND", COMMAND), ("REPLY", REPLY), ("BATCH", BATCH),
                                         ("BATCH_COMMAND", BATCH_COMMAND), ("BATCH_RESULT", BATCH_RESULT),
                                         ("BATCH_REPLY", BATCH_REPLY)])
def test_protocol_tables_match_the_layout(mark, dtype):
    rows = marked_table(PROTOCOL.read_text(), mark)
    assert [r[1] for r in rows] == list(dtype.names), f"{mark}: fields, in order"
    for offset, name, ctype, *_ in rows:
        field, at = dtype.fields[name][:2]
        assert int(offset) == at, f"{mark}.{name}: offset {offset}, layout.py says {at}"
        assert dtype_of(ctype) == field.str, f"{mark}.{name}: type {ctype}, layout.py says {field.str}"
    last_offset, last_name = int(rows[-1][0]), rows[-1][1]
    assert last_offset + dtype.fields[last_name][0].itemsize == dtype.itemsize  # no trailing padding left out


def test_protocol_sizes_in_the_text_match_the_layout():
    text = PROTOCOL.read_text()
    for dtype, name in ((HEADER, "HEADER"), (COMMAND, "COMMAND"), (REPLY, "REPLY")):
        assert f"{dtype.itemsize} bytes (`{name}`)" in text
    for dtype, name in ((BATCH, "BATCH"), (BATCH_COMMAND, "BATCH_COMMAND"), (BATCH_RESULT, "BATCH_RESULT"),
                        (BATCH_REPLY, "BATCH_REPLY")):
        assert f"`{name}`, {dtype.itemsize} bytes" in text or f"{dtype.itemsize} bytes (`{name}`)" in text, name
    assert f"{LOG_COLUMN.itemsize} bytes (`LOG_COLUMN`)" in text
    assert f"`char[{NAME_BYTES}]` at offset {HEADER.itemsize}" in text


WAM = Sizes(7, 20_000, 60_000, 64, ("target_x", "target_y", "target_z", "distance"), step_widths(7, 4), 500.0)


def test_protocol_worked_example_matches_the_layout():
    text = PROTOCOL.read_text()
    layout = Layout(WAM)
    arrays = layout.command_arrays()
    rows = marked_table(text, "command arrays, WAM")
    assert [r[0] for r in rows] == list(arrays)
    n, c, s = WAM.n_dofs, WAM.max_context, WAM.max_samples
    formula = {"posture": 88, "kp": 88 + 8 * n, "kd": 88 + 16 * n, "ki": 88 + 24 * n, "context": 88 + 32 * n,
               "q": 88 + 32 * n + 8 * c, "qd": 88 + 32 * n + 8 * c + 8 * s * n,
               "qdd": 88 + 32 * n + 8 * c + 16 * s * n}
    for name, shape, offset, absolute in rows:
        at, true_shape = arrays[name]
        assert shape == str(true_shape) and int(offset) == at == formula[name], name
        assert int(absolute) == layout.command_offset + at, name
    assert COMMAND.itemsize == 88
    for number in (layout.header_bytes, layout.command_offset, layout.command_bytes, layout.reply_offset,
                   layout.reply_bytes, layout.log_offset, layout.batch_offset, layout.batch_bytes, layout.total_size,
                   WAM.max_batch, WAM.max_batch_commands, WAM.max_batch_values,
                   *(layout.batch_offset + at for at, _, _ in layout.batch_tables().values())):
        assert re.search(rf"\b{number}\b", text), f"{number} missing from the worked example"
    s, tables = WAM, layout.batch_tables()
    v = 64 + 64 * s.max_batch_commands
    r = v + 8 * s.max_batch_values
    p = r + 288 * s.max_batch
    formula = {"commands": 64, "values": v, "results": r, "replies": p, "states": p + 16 * s.max_batch_commands}
    assert {name: at for name, (at, _, _) in tables.items()} == formula  # (every term a multiple of 64 here)

    rows = marked_table(text, "log columns, WAM")
    assert [(int(r[0]), r[1], int(r[2]), int(r[3]), int(r[4])) for r in rows] == [
        (i, name, width, offset, layout.log_offset + offset)
        for i, (name, width, offset) in enumerate(layout.log_column_offsets())]


def learning_table_row(task: str) -> list[str]:
    """The cells of the README learning table's row of ``task``."""
    readme = (ROOT / "README.md").read_text()
    rows = [line for line in readme.splitlines()
            if line.startswith(f"| {task} | ") and len(line.strip().strip("|").split("|")) == 8]
    assert len(rows) == 1, f"the README's learning table has {len(rows)} rows for {task}"
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


@pytest.mark.slow  # three learning runs of the reach configuration (about a minute on 2 cores)
def test_the_readme_learning_table_reproduces(tmp_path):
    """The reach row of the README's learning table is what `python examples/learn.py reach --seeds
    0 1 2 --quiet` prints at this version, every cell but the wall time."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "learn.py"), "reach", "--seeds", "0", "1", "2",
                          "--quiet", "--out", str(tmp_path)],
                         capture_output=True, text=True, check=True, timeout=900).stdout
    printed = [line for line in out.splitlines() if line.startswith("| reach | ")]
    assert len(printed) == 1, out
    cells = [cell.strip() for cell in printed[0].strip("|").split("|")]
    expected = learning_table_row("reach")
    wall = 6  # the wall-time column, the only one that depends on the machine
    assert cells[:wall] + cells[wall + 1:] == expected[:wall] + expected[wall + 1:]
