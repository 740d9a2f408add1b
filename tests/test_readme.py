"""The README and docs/*.md as printed: every python block runs on its own in a fresh process (the
README's bridge learner against a real `episodic serve`), every shell command names a program and
options that exist, every link, module path and file named resolves, the README's tables are the
installed tasks and robots and the commands' options, the numbers it quotes are the docs' tables',
the docs' tables of flags, machine states and step columns are the code's, and docs/protocol.md's
layout tables agree with bridge/layout.py byte for byte."""
from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from episodic.bridge.layout import (
    BATCH,
    BATCH_COMMAND,
    BATCH_REPLY,
    BATCH_RESULT,
    COMMAND,
    HEADER,
    LOG_COLUMN,
    NAME_BYTES,
    REPLY,
    Layout,
    Sizes,
)
from episodic.interface.columns import STEP_COLUMNS, step_widths
from episodic.interface.vocabulary import Flag, MachineState
from episodic.tasks import TASKS
from tests.helpers import ROOT, Served, channel_name, shm_leftovers

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PROTOCOL = DOCS / "protocol.md"
LEARNING = DOCS / "learning.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
CHANNEL_AS_PRINTED = 'Client("default"'
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\n$")
BLOCK_SECONDS = 300  # the longest block (the learning example) takes a few seconds


@dataclass(frozen=True)
class Block:
    """A fenced code block: its page, first line (1-based, the fence's), language, text, and why
    it is not run when the line above it says ``<!-- not run: why -->`` (None: it is run)."""

    page: Path
    line: int
    language: str
    text: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def code_blocks(page: Path, language: str) -> list[Block]:
    """The fenced blocks of ``language`` in ``page``, in order."""
    text = page.read_text()
    blocks = []
    for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S):
        before = text[:match.start()]
        reason = NOT_RUN.search(before)
        blocks.append(Block(page, before.count("\n") + 1, language, match.group(1),
                            reason.group(1) if reason else None))
    return blocks


PYTHON_BLOCKS = [block for page in PAGES for block in code_blocks(page, "python")]


def block_named(fragment: str) -> Block:
    """The one python block that contains ``fragment``."""
    found = [block for block in PYTHON_BLOCKS if fragment in block.text]
    assert len(found) == 1, f"{len(found)} python blocks contain {fragment!r}: {[b.name for b in found]}"
    return found[0]


def first_learner_prints(out: str, tmp: Path) -> None:
    flag, done, *_ = out.split()
    assert (flag, done) == ("OK", "True"), out


def gym_prints(out: str, tmp: Path) -> None:
    assert out.startswith("target [") and "return -" in out and out.rstrip().endswith("OK"), out


def learning_improves(out: str, tmp: Path) -> None:
    lines = out.splitlines()
    assert len(lines) == 1 + 1 + 5 + 1, out  # header, the start, an iteration each, the final
    start, final = float(lines[1].split()[5]), float(lines[-1].split()[2])
    assert final > start + 0.03, out
    assert (tmp / "runs" / "reach_power.csv").is_file()


def log_read_back(out: str, tmp: Path) -> None:
    assert out.splitlines()[0] == "reach" and "(600, 7)" in out, out
    assert (tmp / "reach.h5").is_file()


def batch_prints(out: str, tmp: Path) -> None:
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == 4 and all(row[0] == "OK" and float(row[1]) < 0 for row in rows), out


def commands_print(out: str, tmp: Path) -> None:
    assert out.splitlines() == ["OK True [0.6 0.1 1.5]", "OK"], out


# what some blocks print, beyond running without an error (keyed by a fragment of the block)
PRINTS = {"print(reply.flag.name, reply.episode_done, reply.reward": first_learner_prints,
          "BlackBoxEnv(": gym_prints,
          "learn(learner, rollouts, iterations=5)": learning_improves,
          'log="reach.h5"': log_read_back,
          "runner.send(StartCommand(": commands_print,
          'evaluate(episodes, "reach", threads=2)': batch_prints}


def test_blocks_that_are_not_run_are_few_and_covered():
    """A block not run says why, and the one kind allowed (a learner that needs a served runner) is
    run by the test below."""
    skipped = [block for block in PYTHON_BLOCKS if block.not_run]
    assert [block.name for block in skipped] == [block_named(CHANNEL_AS_PRINTED).name]
    assert "served runner" in skipped[0].not_run
    for fragment in PRINTS:
        assert not block_named(fragment).not_run


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if not b.not_run], ids=lambda b: b.name)
def test_python_block_runs_on_its_own(block, tmp_path):
    """Each block as printed, alone, in a fresh interpreter and an empty folder."""
    script = tmp_path / "block.py"
    script.write_text(block.text)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=BLOCK_SECONDS)
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr}"
    for fragment, check in PRINTS.items():
        if fragment in block.text:
            check(done.stdout, tmp_path)


@pytest.mark.slow
def test_readme_learner_runs_against_a_served_runner():
    learner = block_named(CHANNEL_AS_PRINTED)
    assert learner.page == README and learner.text.count(CHANNEL_AS_PRINTED) == 1, \
        "the example attaches to the default channel as printed"
    channel = channel_name()
    before = shm_leftovers()
    out = io.StringIO()
    namespace = {"__name__": "__readme__"}
    with Served(channel):
        with contextlib.redirect_stdout(out):
            exec(compile(learner.text.replace(CHANNEL_AS_PRINTED, f'Client("{channel}"'), learner.name, "exec"),
                 namespace)
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:10]] == [[str(k), "OK"] for k in range(10)]
    steps, width = namespace["log"]["q"].shape
    assert width == 7 and steps >= len(namespace["move"].q)
    assert shm_leftovers() == before


# -- shell blocks ------------------------------------------------------------------------------

def options(words: list[str]) -> list[str]:
    """The long options of a command line as printed (``[--seeds N]``, ``--param=X``: ``--seeds``,
    ``--param``)."""
    return [m.group(0) for word in words if (m := re.match(r"--[\w-]+", word.strip("[]")))]


def help_text(argv: list[str]) -> str:
    done = subprocess.run([*argv, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


SHELL_LINES = [(block, line) for page in PAGES for block in code_blocks(page, "sh")
               for line in block.text.strip().splitlines()]


def test_the_install_and_test_commands_are_what_ci_runs():
    """`.ci/run` says it runs "the same commands as the README's": the README's test block, part by
    part, is lines of it."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    (tests,) = [line for block, line in SHELL_LINES if block.page == README and "pytest" in line]
    for part in tests.split("&&"):
        assert part.strip() in ci, part


@pytest.mark.slow
@pytest.mark.parametrize("block, line", SHELL_LINES, ids=[f"{b.name} {line[:40]}" for b, line in SHELL_LINES])
def test_shell_command_exists_with_its_options(block, line):
    """Every command of a shell block is pip, the test command, or an `episodic` command or a
    script of this repository that answers --help and knows every option the line uses."""
    for part in line.split("&&"):
        words = shlex.split(part)
        if words[0] == "pip" or words[:3] == ["python", "-m", "pytest"]:
            continue  # the install and test lines: what CI runs (above)
        if words[0] == "episodic":
            command = [w for w in words[1:] if not w.startswith("-")][:1]
            argv = [sys.executable, "-m", "episodic", *command]
        else:
            assert words[0] == "python" and (ROOT / words[1]).is_file(), line
            argv = [sys.executable, words[1]]
        text = help_text(argv)
        for option in options(words):
            assert option in text, f"{line}: {' '.join(argv[1:])} --help has no {option}"


@pytest.mark.slow
@pytest.mark.parametrize("page", [README, DOCS / "cli.md"], ids=lambda p: p.name)
def test_cli_table_options_exist(page):
    """The command tables of the README and docs/cli.md: every command, and every option each row
    gives it, as `episodic COMMAND --help` lists them."""
    rows = re.findall(r"`episodic ([a-z-]+)([^|`]*(?:\\\|[^|`]*)*)`", "\n".join(
        line.split(" | ")[0] for line in page.read_text().splitlines() if line.startswith("| `episodic ")))
    commands: dict[str, list[str]] = {}
    for command, rest in rows:
        commands.setdefault(command, []).extend(options(rest.replace("\\|", " ").split()))
    assert len(commands) >= 11, sorted(commands)
    for command, used in commands.items():
        text = help_text([sys.executable, "-m", "episodic", command])
        missing = [option for option in used if option not in text]
        assert not missing, f"docs/cli.md: episodic {command} has no {missing}"


# -- links, names and files --------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", [*PAGES, ROOT / "clients" / "README.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    """Every relative link names a file that exists and, with #anchor, a heading of it."""
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(file), f"{page.name}: {target}: no heading with that anchor"


def resolves(dotted: str) -> bool:
    """Whether ``episodic.a.b.c`` is a module or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


TOP_FOLDERS = ("episodic", "bridge", "tasks", "robots", "clients", "examples", "benchmarks", "docs", "tests", ".ci")


@pytest.mark.parametrize("page", [*PAGES, ROOT / "clients" / "README.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_names_and_files_exist(page):
    """Every dotted `episodic.x.y` name the page writes in backticks imports, and every repository
    path it writes (`episodic/logs/reader.py`, `examples/learn.py`) exists: the reorganisation
    moved modules, and a page that names the old place fails here."""
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S))
    for span in spans:
        for dotted in re.findall(r"(?<![\w/.])episodic(?:\.\w+)+", span):
            assert resolves(dotted), f"{page.name}: `{span}` names {dotted}, which does not import"
        for word in span.split():
            path = word.strip("(),;:'\"")
            # a build folder (clients/matlab/build) is made by a build step, and .gitignore keeps it out
            if (re.fullmatch(r"[\w.-]+(/[\w.-]+)+/?", path) and path.split("/")[0] in TOP_FOLDERS
                    and "build" not in path.split("/")):
                assert (ROOT / path).exists(), f"{page.name}: `{span}` names {path}, which does not exist"


def test_readme_lists_every_task_and_robot():
    """The README's task table is the installed tasks, its robot list the robots/ folders."""
    text = README.read_text()
    tasks = [row[0].strip("`") for row in table_rows(text, "| task | the robot")]
    assert tasks and sorted(tasks) == sorted(TASKS)
    robots = re.findall(r"^- `(\w+)`", text.split("## Robots", 1)[1].split("\n## ", 1)[0], flags=re.M)
    assert sorted(robots) == sorted(p.name for p in (ROOT / "robots").iterdir() if (p / "robot.toml").is_file())


def test_log_format_step_table_is_the_step_columns():
    """docs/log-format.md's per-step table: every column of STEP_COLUMNS in order, with its type and,
    on the WAM (7 joints), its shape."""
    rows = table_rows((DOCS / "log-format.md").read_text(), "| column | shape, type")
    names = [name.strip("` ") for row in rows for name in row[0].split(",")]
    assert names == [c.name for c in STEP_COLUMNS]
    widths = dict(step_widths(7, 0))
    for row in rows:
        shape, kind = row[1].rsplit(" ", 1)
        for name in (name.strip("` ") for name in row[0].split(",")):
            column = next(c for c in STEP_COLUMNS if c.name == name)
            assert kind == np.dtype(column.dtype).name, name
            expected = "(n, n_state)" if column.width == "state" else (
                "(n,)" if widths[name] == 1 else f"(n, {widths[name]})")
            assert shape == expected, name


def test_clients_page_lists_every_flag_and_machine_state():
    """docs/clients.md's flag table and machine-state line are Flag and MachineState, values included."""
    text = (DOCS / "clients.md").read_text()
    assert [(row[0], int(row[1])) for row in table_rows(text, "| flag | value")] == [(f.name, f.value) for f in Flag]
    states = plain(text.split("Machine states (`MachineState`, logged per step):", 1)[1].split(".", 1)[0])
    assert states == ", ".join(f"{m.name} {m.value}" for m in MachineState)


# -- numbers quoted twice ----------------------------------------------------------------------

def table_rows(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose header row starts with ``header``."""
    lines = text[text.index(header):].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def plain(text: str) -> str:
    """Whitespace as single spaces, the typographic minus as ASCII."""
    return " ".join(text.replace("\u2212", "-").split())


def test_readme_task_table_quotes_the_reference_returns():
    """The README's task table's returns are the early-end table's reference column (both what
    `python examples/early_end.py` prints)."""
    readme = {row[0].strip("`"): plain(row[2]).split()[0]
              for row in table_rows(README.read_text(), "| task | the robot")}
    control = {row[0]: plain(row[4]) for row in table_rows((DOCS / "control.md").read_text(), "| task | crash")}
    assert readme == control


def test_readme_results_quote_the_docs():
    """Every number in the README's Results section is in the docs page it summarises, and the reach
    learning figures are the learning table's reach row."""
    text = README.read_text()
    results = plain(text.split("## Results", 1)[1].split("\n## ", 1)[0])
    docs = plain(" ".join(page.read_text() for page in DOCS.glob("*.md")))
    for number in re.findall(r"\d+(?:\.\d+)?", re.sub(r"\([^()]*`[^`]*`[^()]*\)", "", results)):
        assert number in docs, f"the README's Results quote {number}, which no docs page has"
    start, final = learning_table_row("reach")[4].split(" -> ")
    assert f"reach from {start} to {final}" in results


def learning_table_row(task: str) -> list[str]:
    """The cells of docs/learning.md's learning table's row of ``task``."""
    rows = [line for line in LEARNING.read_text().splitlines()
            if line.startswith(f"| {task} | ") and len(line.strip().strip("|").split("|")) == 8]
    assert len(rows) == 1, f"docs/learning.md's learning table has {len(rows)} rows for {task}"
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


@pytest.mark.slow  # three learning runs of the reach configuration (about a minute on 2 cores)
def test_the_learning_table_reproduces(tmp_path):
    """The reach row of docs/learning.md's learning table is what `python examples/learn.py reach
    --seeds 0 1 2 --quiet` prints at this version, every cell but the wall time."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "learn.py"), "reach", "--seeds", "0", "1", "2",
                          "--quiet", "--out", str(tmp_path)],
                         capture_output=True, text=True, check=True, timeout=900).stdout
    printed = [line for line in out.splitlines() if line.startswith("| reach | ")]
    assert len(printed) == 1, out
    cells = [cell.strip() for cell in printed[0].strip("|").split("|")]
    expected = learning_table_row("reach")
    wall = 6  # the wall-time column, the only one that depends on the machine
    assert cells[:wall] + cells[wall + 1:] == expected[:wall] + expected[wall + 1:]


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
