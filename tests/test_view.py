"""`episodic serve --view`: MuJoCo's viewer beside a serving runner, in a real virtual display
(Xvfb), shows the arm and follows it, and changes no logged number: the same episodes served
with and without the view log the same values, bit for bit. Real runners, a real Client, a
real window; no mocks.

Without Xvfb or GLFW these tests skip with the reason, except in CI (CI=true), where they fail."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from episodic.bridge import Client
from episodic.cli.main import main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.logs import read_episodes
from tests.helpers import Served, assert_same_steps, channel_name, wave

SCREEN = (1024, 768)
AMPLITUDES = (0.1, 0.25)  # rad: the half waves of the two episodes, which end 2x this from home


def needs(what: str, present: bool) -> None:
    if not present:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {what}")
        pytest.skip(what)


@pytest.fixture(scope="module")
def display():
    """A virtual X display (Xvfb) for the module's tests: its name (":N")."""
    needs("Xvfb is not installed: apt-get install xvfb", shutil.which("Xvfb") is not None)
    needs("GLFW is not installed: pip install 'episodic[view]'", importlib.util.find_spec("glfw") is not None)
    read, write = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24",
                               "-nolisten", "tcp"], pass_fds=(write,), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as numbers:
        number = numbers.readline().strip()
    try:
        assert number.isdigit(), "Xvfb printed no display number"
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def screenshot(display: str) -> np.ndarray:
    """The whole virtual screen, (height, width, 3) uint8."""
    from PIL import ImageGrab

    return np.asarray(ImageGrab.grab(xdisplay=display).convert("RGB"))


def run_episodes(channel: str, shoot=None) -> list:
    """Two reach episodes of one wave segment each, sent through a Client; ``shoot(shots)`` after
    each, with the results of the earlier calls: its results."""
    home = load_robot("wam").home
    shots = []
    with Client(channel) as client:
        for episode_id, amplitude in enumerate(AMPLITUDES, start=1):
            client.send(StartCommand(episode_id, 1, context=np.array([0.5, 0.2, 1.5])))
            client.send(TrajectoryCommand(episode_id, 1, 1, wave(home, amplitude=amplitude, phase=-np.pi / 2)))
            if shoot is not None:
                shots.append(shoot(shots))
    return shots


def changed(a: np.ndarray, b: np.ndarray) -> int:
    """Pixels that differ between two pictures."""
    return int(np.abs(a.astype(int) - b.astype(int)).max(axis=2).astype(bool).sum())


def arm_pixels(picture: np.ndarray) -> int:
    """Pixels of the arm's light grey links, lit (rgba 0.75 0.75 0.78 in robots/wam/wam.xml):
    bright and nearly grey; the floor, the sky and the text are darker or smaller."""
    rgb = picture.astype(int)
    grey = (np.ptp(rgb, axis=2) < 30) & (rgb.min(axis=2) > 150)
    return int(grey[40:].sum())  # below the labels' line


def shown(display: str, wanted, timeout: float = 60.0, describe=arm_pixels) -> np.ndarray:
    """The first screenshot of ``display`` for which ``wanted(picture)`` holds, taken every
    0.2 s; fails after ``timeout`` s saying what ``describe`` makes of the last one."""

    deadline = time.monotonic() + timeout
    while True:
        picture = screenshot(display)
        if wanted(picture):
            return picture
        assert time.monotonic() < deadline, \
            f"the view did not show what was expected within {timeout} s; the last screenshot: {describe(picture)}"
        time.sleep(0.2)


@pytest.mark.slow
def test_the_view_shows_the_arm_and_changes_no_logged_number(display, tmp_path, monkeypatch):
    monkeypatch.setenv("DISPLAY", display)
    logs = {name: tmp_path / f"{name}.h5" for name in ("plain", "viewed")}
    with contextlib.ExitStack() as stack:
        plain = stack.enter_context(Served(channel_name(), logs["plain"]))
        viewed = stack.enter_context(Served(channel_name(), logs["viewed"], "--view"))
        assert plain.ready and viewed.ready, viewed.proc.stderr

        def shoot(earlier: list) -> np.ndarray:
            """The screen once it shows the arm where this episode left it (the window's process
            starts in seconds on a busy machine; then the view follows within 1/30 s)."""
            return shown(display, lambda shot: arm_pixels(shot) > 500 and all(changed(shot, e) > 500 for e in earlier),
                         describe=lambda shot: f"{arm_pixels(shot)} arm pixels, "
                                               f"{[changed(shot, e) for e in earlier]} changed from the earlier shots")

        run_episodes(plain.channel)
        try:
            shots = run_episodes(viewed.channel, shoot)
        except AssertionError as failure:  # with what the runner and the window's process said
            viewed.stop()
            raise AssertionError(f"{failure}\nthe viewed runner's stderr:\n{viewed.stderr_text()}") from None
        for runner in (plain, viewed):
            assert runner.stop() == 0, runner.stderr_text()  # the view closes cleanly on SIGTERM
    assert len(shots) == len(AMPLITUDES)  # each showed the arm, the second moved from the first
    from PIL import Image

    Image.fromarray(shots[1]).save(tmp_path / "view.png")
    a, b = read_episodes(logs["plain"]), read_episodes(logs["viewed"])
    assert len(a) == len(b) == len(AMPLITUDES)
    for x, y in zip(a, b, strict=True):
        assert_same_steps(x, y)
        assert x.initial_state.tobytes() == y.initial_state.tobytes()
        assert x.attrs["return"] == y.attrs["return"] and x.attrs["flag"] == y.attrs["flag"]


@pytest.mark.slow
def test_the_view_in_realtime_mode(display, tmp_path, monkeypatch):
    monkeypatch.setenv("DISPLAY", display)
    with Served(channel_name(), tmp_path / "realtime.h5", "--view", "--mode", "realtime") as runner:
        assert runner.ready, runner.proc.stderr
        run_episodes(runner.channel)
        shown(display, lambda shot: arm_pixels(shot) > 500)
        window = [pid for pid in children(runner.proc.pid)
                  if b"episodic.tools.view" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(window) == 1, window
        os.kill(window[0], signal.SIGKILL)  # the window dies: the runner says so and goes on
        time.sleep(0.5)
        run_episodes(runner.channel)
        assert runner.stop() == 0
        said = runner.stderr_text()
        assert "the view's window closed (its process exited with code -9)" in said, said
    assert len(read_episodes(tmp_path / "realtime.h5")) == 2 * len(AMPLITUDES)


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux: /proc/PID/task/*/children)."""
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def test_without_a_display_the_view_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    log = tmp_path / "never.h5"
    result = CliRunner().invoke(main, ["serve", "--view", "--log", str(log), "--channel", "view-test"])
    assert result.exit_code == 2 and "xvfb-run episodic serve --view" in result.output, result.output
    assert not Path(log).exists()  # refused before the runner (and its log) existed
