"""A live 3D view of a serving runner (`episodic serve --view`): MuJoCo's passive viewer in a window
showing the arm, the task's objects and the running episode's number as the runner runs it.

The view only reads the runner. A thread of the runner's process copies the simulation's
positions (qpos, the mocap bodies, the time: mj_getState) and the episode's label VIEW_FPS times a
second into shared memory; a separate process (``python -m episodic.tools.view``) owns the window:
it loads a copy of the model, puts each copied state into an MjData of its own and hands that to
MuJoCo's viewer. What a person does in the window (dragging a body, changing an option) acts on
those copies, never on the runner's model or data, and the window's drawing, its GUI library and
its shutdown (GLX can crash a process that closes a window while it draws) stay out of the
runner's process: the runner computes and logs the same numbers with the view as without
(tests/test_view.py). In blocking mode the runner runs faster than real time and the view shows
where it is VIEW_FPS times a second; in realtime mode it follows the motion. The episodes of a
batch run in runners of their own on the batch's threads and are not shown.

Needs a display (DISPLAY or WAYLAND_DISPLAY; on a machine without one, a virtual one: ``xvfb-run
episodic serve --view``) and GLFW: ``pip install 'episodic[view]'``.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

import mujoco
import numpy as np

from episodic.runtime.runner import Runner

VIEW_EXTRA = "pip install 'episodic[view]'"
VIEW_FPS = 30.0  # pictures a second the view copies and shows
CLOSE_WAIT = 5.0  # s the window's process has to close its window before it is killed
LABEL_BYTES = 256  # bytes of shared memory for the episode's label (UTF-8, zero-padded)
# what the view copies of the runner's state: enough to draw it
SHOWN = mujoco.mjtState.mjSTATE_TIME | mujoco.mjtState.mjSTATE_QPOS | mujoco.mjtState.mjSTATE_MOCAP_POS | \
    mujoco.mjtState.mjSTATE_MOCAP_QUAT
AZIMUTH, ELEVATION = 140.0, -15.0  # deg: as episodic render's default view, from the front right
DISTANCE = 0.8  # times the model's extent (m), the camera's distance when the task gives none


class ViewError(Exception):
    """The view cannot be opened here; the message says what to install or set."""


def check_viewable() -> None:
    """ViewError unless a window can be opened: a display, and GLFW for MuJoCo's viewer."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ViewError("--view needs a display and there is none (DISPLAY is not set); on a machine "
                        "without one run it in a virtual display: xvfb-run episodic serve --view ...")
    if importlib.util.find_spec("glfw") is None:
        raise ViewError(f"--view needs GLFW for MuJoCo's viewer: {VIEW_EXTRA}")


def label(runner: Runner) -> str:
    """What the view writes about the runner's episode: its number in the run and the learner's
    id while one runs, else how many have run."""
    episode = runner.machine.episode
    if episode is not None:
        return f"episode {episode.number} (id {episode.episode_id})"
    started = runner.machine.episodes_started
    return f"waiting for the learner: {started} episode{'s' if started != 1 else ''} run"


class Board:
    """The shared memory the runner's process writes and the window's process reads: the state
    (mj_stateSize(model, SHOWN) float64), then LABEL_BYTES of label, then a stop byte."""

    def __init__(self, n_state: int, name: str | None = None):
        size = 8 * n_state + LABEL_BYTES + 1
        self.memory = shared_memory.SharedMemory(name=name, create=name is None, size=size)
        if name is not None:  # attached: the creator unlinks it (Python < 3.13 would have this process's tracker do it)
            resource_tracker.unregister(self.memory._name, "shared_memory")  # type: ignore[attr-defined]
        self.state = np.ndarray((n_state,), np.float64, self.memory.buf, 0)
        self._label = np.ndarray((LABEL_BYTES,), np.uint8, self.memory.buf, 8 * n_state)
        self._stop = np.ndarray((1,), np.uint8, self.memory.buf, 8 * n_state + LABEL_BYTES)

    @property
    def label(self) -> str:
        return self._label.tobytes().rstrip(b"\0").decode(errors="replace")

    @label.setter
    def label(self, text: str) -> None:
        raw = text.encode()[:LABEL_BYTES]
        self._label[: len(raw)] = np.frombuffer(raw, np.uint8)
        self._label[len(raw):] = 0

    @property
    def stopped(self) -> bool:
        return bool(self._stop[0])

    def stop(self) -> None:
        self._stop[0] = 1

    def close(self, unlink: bool = False) -> None:
        del self.state, self._label, self._stop  # no view of the buffer may outlive it
        self.memory.close()
        if unlink:
            self.memory.unlink()


class LiveView:
    """A window showing ``runner`` (see the module's description) with ``title`` (e.g. the task
    and robot) and the running episode; ``close`` ends it."""

    def __init__(self, runner: Runner, title: str):
        check_viewable()
        self.runner = runner
        self.model, self.data = runner.sim.model, runner.sim.data
        self.board = Board(mujoco.mj_stateSize(self.model, SHOWN))
        self.frames = 0
        self._copy()
        folder = Path(tempfile.mkdtemp(prefix="episodic-view."))
        model_file = folder / "model.mjb"
        mujoco.mj_saveModel(self.model, str(model_file), None)
        self._folder = folder
        self.process = subprocess.Popen(
            [sys.executable, "-m", "episodic.tools.view", self.board.memory.name, str(model_file), title,
             json.dumps(dict(runner.task.camera))],
            stdin=subprocess.DEVNULL, start_new_session=True)  # a terminal's Ctrl-C reaches the runner only
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="episodic-view", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        """The runner's positions and episode now onto the board (only reads of the runner's data)."""
        mujoco.mj_getState(self.model, self.data, self.board.state, SHOWN)
        self.board.label = label(self.runner)
        self.frames += 1

    def _loop(self) -> None:
        period = 1.0 / VIEW_FPS
        while not self._stop.wait(period) and self.process.poll() is None:
            self._copy()
        if not self._stop.is_set():  # the window went first: closed by its user, or failed
            print(f"episodic: the view's window closed (its process exited with code {self.process.returncode}); "
                  f"the runner goes on without it", file=sys.stderr, flush=True)

    @property
    def running(self) -> bool:
        """Whether the window's process runs."""
        return self.process.poll() is None

    def close(self) -> None:
        """Stop copying, ask the window's process to close its window, wait for it up to
        CLOSE_WAIT s (then kill it) and free the shared memory."""
        self._stop.set()
        self._thread.join()
        self.board.stop()
        try:
            self.process.wait(timeout=CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.board.close(unlink=True)
        for path in self._folder.iterdir():
            path.unlink()
        self._folder.rmdir()

    def __enter__(self) -> LiveView:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def aim(cam: mujoco.MjvCamera, model: mujoco.MjModel, camera: dict) -> None:
    """``cam`` as the task's ``camera`` (episodic.task.Camera) describes it, the rest as episodic
    render chooses it."""
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:] = camera.get("lookat", model.stat.center)
    cam.distance = camera.get("distance", DISTANCE * model.stat.extent)
    cam.azimuth = camera.get("azimuth", AZIMUTH)
    cam.elevation = camera.get("elevation", ELEVATION)


def window(board_name: str, model_file: str, title: str, camera: dict) -> None:
    """The window's process: MuJoCo's passive viewer on a copy of the model, showing the board's
    state and label VIEW_FPS times a second until the board says stop, the window is closed or
    the runner's process is gone."""
    import mujoco.viewer

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner closes the window when it stops
    parent = os.getppid()
    model = mujoco.MjModel.from_binary_path(model_file)
    data = mujoco.MjData(model)
    board = Board(mujoco.mj_stateSize(model, SHOWN), board_name)
    handle = mujoco.viewer.launch_passive(model, data, show_left_ui=False, show_right_ui=False)
    period, aimed = 1.0 / VIEW_FPS, False
    while handle.is_running() and not board.stopped and os.getppid() == parent:
        with handle.lock():
            mujoco.mj_setState(model, data, board.state, SHOWN)
            mujoco.mj_kinematics(model, data)
            if not aimed:  # the viewer sets its own camera as it starts
                aim(handle.cam, model, camera)
                aimed = True
        handle.set_texts((mujoco.mjtFontScale.mjFONTSCALE_150, mujoco.mjtGridPos.mjGRID_TOPLEFT, board.label,
                          title))  # takes the lock itself
        handle.sync()
        time.sleep(period)
    handle.close()
    deadline = time.monotonic() + CLOSE_WAIT
    while handle.is_running() and time.monotonic() < deadline:  # closing under a drawing viewer crashes GLX
        time.sleep(0.02)
    with contextlib.suppress(BufferError):
        board.close()


if __name__ == "__main__":
    window(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
