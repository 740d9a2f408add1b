"""The end-to-end demo (``episodic demo``) and the learners behind it.

Ball-in-a-cup over the bridge: ``run_demo`` starts a blocking runner for the ball_in_cup task
in a subprocess (``python -m episodic serve --task ball_in_cup --channel demo<pid>-<n> --log
OUT``), waits for its "serving" line, and runs a scripted learner against it through the
shared-memory client: the hand-shaped reference swing (``REFERENCE_SWING``, also
``examples/ball_in_cup_reference.py``) and perturbed variants of it. It then stops the
runner with SIGTERM, checks the log, and removes the channel whatever happens (error,
Ctrl-C).

A swing is a cubic spline through via-points ("knots") of the three pitch joints j2, j4
and j6 (the arm moves in its vertical plane), at rest at the start posture at t = 0 and at
the last knot (the catch posture); the other joints hold the start posture. It is sent as
a start command and three trajectory segments at the control rate (q, qd, qdd): swing back,
up and over, and the catch, whose final posture is held so the ball can settle.

The reach learner (``run_reach_demo``, used by ``examples/reach_learner.py``) is kept at the
end of this module: one episode per target, three trajectory segments that together make
one rest-to-rest minimum-jerk move to a damped-least-squares inverse-kinematics goal.
"""
from __future__ import annotations

import itertools
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import mujoco
import numpy as np
from scipy.interpolate import CubicSpline

from episodic.commands import StartCommand, TrajectoryCommand
from episodic.machine import Flag
from episodic.trajectory import min_jerk, min_jerk_duration

# -- ball in a cup: the swing ----------------------------------------------------------------
SWING_JOINTS = (1, 3, 5)  # j2 (shoulder pitch), j4 (elbow), j6 (wrist pitch)
SEGMENT_KNOTS = (2, 4)    # the segments change at these knots: back | up and over | catch
CATCH_WAIT = 1.0          # s the catch posture is held after the last knot (the ball settles)
DEMO_NOISE = 0.03         # rad, standard deviation of the perturbations of the demo's variants
DEMO_TASK = "ball_in_cup"


@dataclass(frozen=True)
class Swing:
    """Knot k (k = 1..K) of j2, j4, j6 at time k * ``step`` s: ``knots`` (K, 3) rad, absolute
    joint positions; the last knot is the catch posture. The swing starts at rest at the
    start posture at t = 0 and ends at rest at the last knot."""

    step: float
    knots: np.ndarray

    @property
    def duration(self) -> float:
        return self.step * len(self.knots)


# Found by a small CMA-ES search over the knots and the step (scored on catches of the swing
# and of noisy copies of it), then frozen. The ball is swung back towards the robot (knots
# 1-2), forward, up and over the cup (knots 3-4), and the cup moves under it (knot 5).
REFERENCE_SWING = Swing(step=0.4292, knots=np.array([
    # j2      j4       j6     rad, at t = 0.43, 0.86, 1.29, 1.72, 2.15 s
    [0.4663, 2.5415, -0.2721],
    [0.3610, 1.8391, 0.4586],
    [1.1143, 1.5900, -1.3651],
    [0.7203, 1.3288, -0.9532],
    [0.9475, 1.9471, -1.5206],
]))


def start_posture(robot) -> np.ndarray:
    """The ball_in_cup task's start posture (n_dofs,) rad on ``robot``."""
    from episodic.tasks.ball_in_cup import BallInCup

    return BallInCup().start_posture(robot)


def swing_trajectory(start: np.ndarray, swing: Swing, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, qd, qdd (n, n_dofs) of ``swing`` from posture ``start`` sampled every dt s
    (t = dt .. duration)."""
    joints = list(SWING_JOINTS)
    knots = np.vstack([start[joints], np.asarray(swing.knots, float)])
    t = np.arange(len(knots)) * swing.step
    spline = CubicSpline(t, knots, bc_type="clamped", axis=0)
    n = int(round(swing.duration / dt))
    ts = np.arange(1, n + 1) * dt
    q = np.tile(np.asarray(start, float), (n, 1))
    qd, qdd = np.zeros_like(q), np.zeros_like(q)
    q[:, joints], qd[:, joints], qdd[:, joints] = spline(ts), spline(ts, 1), spline(ts, 2)
    return q, qd, qdd


def swing_commands(robot, swing: Swing, episode_id: int = 1, wait: float = CATCH_WAIT) -> list:
    """The commands of one episode: start (the task's start posture, no context) and three
    trajectory segments of ``swing``, the last holding the catch posture ``wait`` s."""
    start = start_posture(robot)
    q, qd, qdd = swing_trajectory(start, swing, robot.control_dt)
    cuts = [int(round(k * swing.step / robot.control_dt)) for k in SEGMENT_KNOTS]
    pieces = np.split(np.arange(len(q)), cuts)
    n = len(pieces)
    commands = [StartCommand(episode_id, n, posture=start)]
    for k, rows in enumerate(pieces, start=1):
        commands.append(TrajectoryCommand(episode_id, k, n, q[rows], qd[rows], qdd[rows],
                                          wait_time=wait if k == n else 0.0))
    return commands


def reference_commands(robot, episode_id: int = 1) -> list:
    """The reference swing's commands (see ``swing_commands``)."""
    return swing_commands(robot, REFERENCE_SWING, episode_id)


def perturbed_swing(swing: Swing, rng: np.random.Generator, noise: float = DEMO_NOISE) -> Swing:
    """``swing`` with Gaussian noise of ``noise`` rad on every knot."""
    return Swing(swing.step, swing.knots + rng.normal(0.0, noise, swing.knots.shape))


def demo_swings(n: int, seed: int = 0, noise: float = DEMO_NOISE) -> list[tuple[str, Swing]]:
    """The reference swing and n - 1 perturbed copies, each with a label."""
    rng = np.random.default_rng(seed)
    out = [("reference", REFERENCE_SWING)]
    out += [(f"perturbed {k}", perturbed_swing(REFERENCE_SWING, rng, noise)) for k in range(1, n)]
    return out


@dataclass
class SwingRow:
    """Outcome of one swing episode. steps: control steps of the trajectory segments."""

    episode_id: int
    label: str
    episode_return: float
    caught: bool
    steps: int
    flag: str
    message: str = ""


def run_swing(send: Callable, commands: list, label: str = "", caught_column: int | None = None) -> SwingRow:
    """Send one episode's ``commands`` through ``send`` (a Runner's ``handle`` or a Client's
    ``send``) and summarise the replies."""
    from episodic.tasks.ball_in_cup import BallInCup

    column = BallInCup.columns.index("caught") if caught_column is None else caught_column
    replies = []
    for command in commands:
        reply = send(command)
        replies.append(reply)
        if reply.flag != Flag.OK or reply.episode_done:
            break
    last = replies[-1]
    caught = bool(last.flag == Flag.OK and last.episode_done and last.state[column] > 0.5)
    return SwingRow(episode_id=commands[0].episode_id, label=label,
                    episode_return=float(sum(r.reward for r in replies)), caught=caught,
                    steps=int(sum(r.n_steps for r in replies[1:])), flag=last.flag.name,
                    message=last.message)


def run_swings(send: Callable, robot, swings: list[tuple[str, Swing]], first_id: int = 1) -> list[SwingRow]:
    """One episode per (label, swing); one SwingRow each."""
    return [run_swing(send, swing_commands(robot, swing, first_id + i), label)
            for i, (label, swing) in enumerate(swings)]


def format_swing_rows(rows: list[SwingRow]) -> str:
    """A plain-text table of swing episodes, with a summary line."""
    head = f"{'episode':>7}  {'swing':<12} {'return':>8} {'caught':>6} {'steps':>6}  flag"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.episode_id:>7}  {r.label:<12} {r.episode_return:>8.3f} "
                     f"{'yes' if r.caught else 'no':>6} {r.steps:>6}  {r.flag}")
    lines.append(f"{sum(r.caught for r in rows)} of {len(rows)} swings caught the ball")
    return "\n".join(lines)


# -- ball in a cup: the runner in a subprocess --------------------------------------------------
_channels = itertools.count()
READY_TIMEOUT = 60.0  # s to wait for the runner's "serving" line
STOP_TIMEOUT = 30.0   # s to wait for it to exit after SIGTERM


class DemoError(RuntimeError):
    """The demo's runner did not start, did not stop cleanly, or wrote no log."""


def demo_channel() -> str:
    """A channel name of this process: demo<pid>-<n>."""
    return f"demo{os.getpid()}-{next(_channels)}"


class ServedRunner:
    """``python -m episodic serve`` for ``task`` in a subprocess, ready once it printed its
    "serving" line. ``stop`` sends SIGTERM and waits; leaving the ``with`` block stops it and
    removes the channel's shared-memory objects even after an error or Ctrl-C."""

    def __init__(self, channel: str, log: str | Path, task: str = DEMO_TASK, seed: int = 0,
                 cwd: str | Path | None = None):
        self.channel = channel
        self._stderr = tempfile.TemporaryFile(mode="w+")
        cmd = [sys.executable, "-m", "episodic", "serve", "--task", task, "--channel", channel,
               "--log", str(log), "--seed", str(seed)]
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.banner = ""

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> str:
        """Wait for the "serving" line; DemoError if the runner exits or stays silent."""
        deadline = time.monotonic() + timeout
        while "serving" not in self.banner:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DemoError(f"the runner printed no 'serving' line within {timeout} s")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    self.proc.wait(timeout=STOP_TIMEOUT)
                    raise DemoError(f"the runner exited (code {self.proc.returncode}) before serving:\n"
                                    f"{self.stderr().strip()}")
                self.banner += line
        return self.banner.strip()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then wait (SIGKILL if it does not exit in time); the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> "ServedRunner":
        return self

    def __exit__(self, *exc) -> None:
        from episodic.bridge.channel import remove

        try:
            self.stop()
        finally:
            self.proc.stdout.close()
            self._stderr.close()
            remove(self.channel)  # nothing left if the runner cleaned up; its leftovers if not


@dataclass
class DemoResult:
    rows: list[SwingRow]
    log: Path
    logged_episodes: int
    channel: str
    seconds: float
    banner: str = ""
    notes: list[str] = field(default_factory=list)


def run_demo(out: str | Path = "runs/demo.h5", n_episodes: int = 5, seed: int = 0, noise: float = DEMO_NOISE,
             echo: Callable[[str], None] = print) -> DemoResult:
    """Serve ball_in_cup in a subprocess, run the reference swing and n_episodes - 1 perturbed
    variants against it over the bridge, stop it, and check the log at ``out``."""
    from episodic.bridge import Client, ProtocolError, RunnerGone
    from episodic.log import read_metadata
    from episodic.robot import load_robot

    t0 = time.perf_counter()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    robot = load_robot("wam")
    swings = demo_swings(n_episodes, seed, noise)
    channel = demo_channel()
    with ServedRunner(channel, out.resolve(), seed=seed) as runner:
        banner = runner.wait_ready()
        echo(f"runner started (pid {runner.proc.pid}), channel '{channel}', log {out}")
        try:
            with Client(channel, timeout=60) as client:
                rows = run_swings(client.send, robot, swings)
        except (RunnerGone, ProtocolError, TimeoutError) as exc:
            runner.stop()
            raise DemoError(f"{exc}\n{runner.stderr().strip()}".strip()) from None
        code = runner.stop()
        if code != 0:
            raise DemoError(f"the runner exited with code {code}:\n{runner.stderr().strip()}")
    if not out.is_file():
        raise DemoError(f"the runner wrote no log at {out}")
    logged = int(read_metadata(out).get("n_episodes", 0))
    if logged != len(rows):
        raise DemoError(f"the log {out} holds {logged} episodes, {len(rows)} were run")
    return DemoResult(rows, out, logged, channel, time.perf_counter() - t0, banner)


# -- reach (examples/reach_learner.py) ---------------------------------------------------------
SEGMENTS = 3
MIN_DURATION = 0.8   # s, shortest move
SETTLE_TIME = 0.4    # s held at the goal after the last segment's samples
TARGET_RADIUS = 0.2  # m, targets lie within this distance of the home end-effector position
MAX_REACH = 0.85     # m, targets lie within this distance of the shoulder (arm length 0.91 m)


@dataclass
class ReachRow:
    """Outcome of one reach episode."""

    number: int
    episode_id: int
    target: np.ndarray
    episode_return: float
    distance: float
    success: bool
    steps: int
    flag: str
    ik_error: float


class ReachIK:
    """Damped-least-squares inverse kinematics of a site's position on a private MjData."""

    def __init__(self, model: mujoco.MjModel, qpos_adr: np.ndarray, dof_adr: np.ndarray,
                 lower: np.ndarray, upper: np.ndarray, site: str = "ee"):
        self.model = model
        self.data = mujoco.MjData(model)
        self.qpos_adr, self.dof_adr = np.asarray(qpos_adr), np.asarray(dof_adr)
        self.lower, self.upper = np.asarray(lower, float), np.asarray(upper, float)
        self.site = model.site(site).id
        self._jacp = np.zeros((3, model.nv))

    def position(self, q: np.ndarray) -> np.ndarray:
        """World position (3,) m of the site at joint posture q (n_dofs,) rad."""
        self.data.qpos[self.qpos_adr] = q
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.site].copy()

    def solve(self, q0: np.ndarray, target: np.ndarray, damping: float = 0.05, max_step: float = 0.2,
              tolerance: float = 1e-4, iterations: int = 100) -> tuple[np.ndarray, float]:
        """Joint posture (n_dofs,) rad within the joint range that puts the site at ``target``
        (3,) m, starting from q0; returns it and the remaining position error m."""
        q = np.clip(np.asarray(q0, float).copy(), self.lower, self.upper)
        target = np.asarray(target, float)
        error = np.inf
        for _ in range(iterations):
            e = target - self.position(q)
            error = float(np.linalg.norm(e))
            if error < tolerance:
                break
            mujoco.mj_comPos(self.model, self.data)
            mujoco.mj_jacSite(self.model, self.data, self._jacp, None, self.site)
            J = self._jacp[:, self.dof_adr]
            dq = J.T @ np.linalg.solve(J @ J.T + damping**2 * np.eye(3), e)
            largest = np.max(np.abs(dq))
            if largest > max_step:
                dq *= max_step / largest
            q = np.clip(q + dq, self.lower, self.upper)
        return q, error


def home_position(runner) -> np.ndarray:
    """End-effector position (3,) m at the task's start posture."""
    ik = _ik(runner)
    return ik.position(runner.task.start_posture(runner.robot))


def shoulder_position(runner) -> np.ndarray:
    """World position (3,) m of the second joint's axis (the shoulder)."""
    m = runner.scene.model
    d = mujoco.MjData(m)
    d.qpos[runner.scene.qpos_adr] = runner.task.start_posture(runner.robot)
    mujoco.mj_kinematics(m, d)
    return d.xanchor[m.joint(runner.robot.joint_names[1]).id].copy()


def demo_targets(runner, n: int, seed: int = 0, radius: float = TARGET_RADIUS) -> list[np.ndarray]:
    """n reachable targets (3,) m, drawn uniformly in a ball of ``radius`` around the home
    end-effector position and within MAX_REACH of the shoulder."""
    rng = np.random.default_rng(seed)
    centre, shoulder = home_position(runner), shoulder_position(runner)
    out = []
    while len(out) < n:
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        target = centre + direction * radius * rng.uniform() ** (1 / 3)
        if np.linalg.norm(target - shoulder) <= MAX_REACH:
            out.append(target)
    return out


def _ik(runner) -> ReachIK:
    r = runner.robot
    return ReachIK(runner.scene.model, runner.scene.qpos_adr, runner.scene.dof_adr,
                   r.range_lower, r.range_upper, r.end_effector_site)


def reach_episode(runner, ik: ReachIK, episode_id: int, target: np.ndarray,
                  segments: int = SEGMENTS) -> tuple[list, float]:
    """One episode toward ``target``; returns the replies and the IK's remaining error m."""
    robot = runner.robot
    q0 = runner.task.start_posture(robot)
    replies = [runner.send(StartCommand(episode_id, segments, context=np.asarray(target, float)))]
    if replies[0].flag != Flag.OK:
        return replies, np.nan
    goal, ik_error = ik.solve(q0, target)
    duration = max(MIN_DURATION, min_jerk_duration(q0, goal, robot.goto.max_velocity,
                                                   robot.goto.max_acceleration))
    move = min_jerk(q0, goal, duration, robot.control_dt)
    pieces = np.array_split(np.arange(len(move)), segments)
    for k, rows in enumerate(pieces, start=1):
        wait = SETTLE_TIME if k == segments else 0.0
        reply = runner.send(TrajectoryCommand(episode_id, k, segments, move.q[rows], move.qd[rows],
                                                move.qdd[rows], wait_time=wait))
        replies.append(reply)
        if reply.flag != Flag.OK:
            break
    return replies, ik_error


def run_reach_demo(runner, targets, first_id: int = 1) -> list[ReachRow]:
    """Run one reach episode per target (3,) m; one ReachRow per episode."""
    ik = _ik(runner)
    rows = []
    distance_col = list(runner.task.columns).index("distance")
    for i, target in enumerate(targets):
        number = runner.machine.episodes_started
        replies, ik_error = reach_episode(runner, ik, first_id + i, target)
        last = replies[-1]
        success = last.flag == Flag.OK and last.episode_done and runner.task.success(last.state)
        rows.append(ReachRow(number=number, episode_id=first_id + i, target=np.asarray(target, float),
                             episode_return=float(sum(r.reward for r in replies)),
                             distance=float(last.state[distance_col]), success=bool(success),
                             steps=int(sum(r.n_steps for r in replies)), flag=last.flag.name,
                             ik_error=ik_error))
    return rows


def format_rows(rows: list[ReachRow], tolerance: float | None = None) -> str:
    """A plain-text table of reach rows, with a summary line."""
    head = f"{'episode':>7} {'id':>4}  {'target x, y, z (m)':<22} {'return':>9} {'distance m':>11} " \
           f"{'success':>7} {'steps':>6}  flag"
    lines = [head, "-" * len(head)]
    for r in rows:
        target = ", ".join(f"{v:.3f}" for v in r.target)
        lines.append(f"{r.number:>7} {r.episode_id:>4}  {target:<22} {r.episode_return:>9.4f} "
                     f"{r.distance:>11.4f} {'yes' if r.success else 'no':>7} {r.steps:>6}  {r.flag}")
    solved = sum(r.success for r in rows)
    tail = f"{solved} of {len(rows)} targets reached"
    if tolerance is not None:
        tail += f" (within {tolerance} m)"
    lines.append(tail)
    return "\n".join(lines)
