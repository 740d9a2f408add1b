"""The benchmark tasks on other arms (issue 29, item 5): each task declares what it needs of a
robot (Task.needs), places its scene in the robot's frame (episodic.task.frame) and `episodic
tasks` shows a task x robot table. Every ✔ cell of the Panda and the UR5 (imported from
example-robot-data as tests/test_robot_import.py does) is backed here: the task's reference
succeeds there and its log replays bit-identically; every other cell is refused with its reason.
The WAM keeps its scene numbers exactly (tests/test_history.py and the per-task tests check its
results)."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.robot import load_robot
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.task import RobotFrame, TaskError
from episodic.tasks import make_task, reference_commands, registry
from episodic.tools.replay import replay
from episodic.tools.robot_import import import_robot
from tests.test_robot_import import PANDA, PANDA_READY, UR5

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("panda", "ur5", "puma560")  # the two imported arms and the built-in Puma
CELLS = [(task, arm) for task in registry() for arm in ARMS]
# the cells of a task tied to other robots by definition (refused at once); the rest run a reference
TIED = [(task, arm) for task, arm in CELLS if arm not in (registry()[task].needs.robots or ARMS)]


@pytest.fixture(scope="module")
def arms(tmp_path_factory):
    """The Panda and the UR5 imported once into a user robot directory (EPISODIC_ROBOTS for the
    module), loaded."""
    folder = tmp_path_factory.mktemp("robots")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EPISODIC_ROBOTS", str(folder))
        import_robot(PANDA, home=PANDA_READY, hold={"panda_finger_joint1": 0.04, "panda_finger_joint2": 0.04},
                     echo=str)
        import_robot(UR5, name="ur5", echo=str)
        yield {name: load_robot(name) for name in ARMS}  # the Puma is built in


def test_the_wam_frame_leaves_the_scene_numbers_as_they_are():
    wam = load_robot("wam")
    point = np.array([0.1, 0.45, 1.55])
    assert RobotFrame.of(wam).from_wam(point).tobytes() == point.tobytes()
    task = make_task("reach")
    build_scene(wam, task)
    assert task.default_context().tobytes() == np.array([0.0, 0.45, 1.55]).tobytes()


def test_another_arm_gets_the_point_relative_to_its_base_facing_and_reach(arms):
    """The WAM's default reach target, 0.84 m from its first joint's anchor, is as far from the
    Panda's anchor in proportion to the reaches, and as high above it in proportion."""
    wam, panda = RobotFrame.of(load_robot("wam")), RobotFrame.of(arms["panda"])
    target = np.array([0.0, 0.45, 1.55])
    moved = panda.from_wam(target)
    scale = panda.reach / wam.reach
    np.testing.assert_allclose(np.linalg.norm(moved - panda.anchor), scale * np.linalg.norm(target - wam.anchor))
    np.testing.assert_allclose(moved[2] - panda.anchor[2], scale * (target[2] - wam.anchor[2]))
    # the facing turns with the flange at home: the UR5's home points its flange away from +x
    ur5 = RobotFrame.of(arms["ur5"])
    flange = ur5.flange - ur5.anchor
    np.testing.assert_allclose(ur5.rotation[:2, 0], flange[:2] / np.linalg.norm(flange[:2]), atol=1e-12)


@pytest.mark.parametrize("task,arm", TIED)
def test_a_task_tied_to_other_robots_says_why(arms, task, arm):
    cls = registry()[task]
    robots = " or ".join(cls.needs.robots)
    with pytest.raises(TaskError, match=f"built for the {robots} robot \\({cls.needs.why[:20]}.*not '{arm}'"):
        build_scene(arms[arm], cls())


@pytest.mark.slow  # a reference and its replay: 2 x 1.2 s of simulation
@pytest.mark.parametrize("task,arm", [cell for cell in CELLS if cell not in TIED])
def test_each_cell_runs_its_reference_or_says_why_not(arms, task, arm, tmp_path):
    robot, cls = arms[arm], registry()[task]
    why = cls.needs.unmet(robot)
    if why:
        with pytest.raises(TaskError, match=f"cannot run on '{arm}'"):
            build_scene(robot, cls())
        return
    assert cls.reference is not None, f"{task} runs on {arm} (✔) but declares no reference to show it"
    log = tmp_path / f"{task}-{arm}.h5"
    with Runner(make_task(task), robot, log=log) as runner:
        replies = [runner.send(c) for c in reference_commands(cls)(runner.robot, 1)]
    assert replies[-1].episode_done and replies[-1].success, [(r.flag, r.message) for r in replies]
    report = replay(log)
    assert report.identical, report.differences
    shown = doc_table(ROOT / "docs" / "tasks.md", "## On other arms")[task][arm].split()
    number = shown[1].replace("−", "-")  # as printed: rounded to the decimals shown
    assert shown[0] == "✔" and float(number) == round(replies[-1].episode_return, len(number.split(".")[1])), \
        f"docs/tasks.md shows {shown} for {task} on {arm}; the reference returns {replies[-1].episode_return}"


def doc_table(path: Path, heading: str) -> dict[str, dict[str, str]]:
    """The task x robot table after ``heading`` in a Markdown file: task -> robot -> cell (a row
    may name several tasks)."""
    text = path.read_text().split(heading, 1)[1]
    start = text.index("\n|") + 1
    lines = list(itertools.takewhile(lambda line: line.startswith("|"), text[start:].splitlines()))
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    table: dict[str, dict[str, str]] = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for task in cells[0].replace("`", "").split(", "):
            table[task] = dict(zip(header[1:], cells[1:]))
    return table


def test_the_readme_table_is_what_the_tasks_need(arms):
    """README's task x robot table: ✔ exactly where the task's needs are met (each ✔ of an arm
    other than the WAM is then run by the test above), every task of the registry in it."""
    table = doc_table(ROOT / "README.md", "**The benchmark on other arms:**")
    assert set(table) == set(registry())
    robots = {**arms, "wam": load_robot("wam")}
    for task, row in table.items():
        for arm, cell in row.items():
            assert (cell == "✔") == (not registry()[task].needs.unmet(robots[arm])), (task, arm, cell)


def test_episodic_tasks_shows_the_table(arms):
    out = CliRunner().invoke(main, ["tasks"], catch_exceptions=False).output
    table = out.split("task x robot", 1)[1].splitlines()
    header = table[1].split()
    row = {line.split()[0]: line.split()[1:] for line in table[2:] if line and not line.startswith("(")}
    for task, arm in CELLS:
        cell = row[task][header.index(arm) - 1]
        assert (cell == "✔") == (not registry()[task].needs.unmet(arms[arm])), (task, arm, cell)
    assert row["reach"][header.index("panda") - 1] == "✔" and row["ball_in_cup"][header.index("wam") - 1] == "✔"
