"""A reach learner driving the runner in-process: one episode per target, each a start
command (context = the target) and three trajectory segments that together make one
rest-to-rest minimum-jerk move to a damped-least-squares inverse-kinematics goal.

    python examples/reach_learner.py [--out runs/reach_learner.h5] [--episodes 8] [--seed 1]
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import mujoco
import numpy as np

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.trajectory import min_jerk, min_jerk_duration
from episodic.runtime.machine import Flag
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

SEGMENTS = 3         # trajectory segments per episode
MIN_DURATION = 0.8   # s, shortest move
SETTLE_TIME = 0.4    # s held at the goal after the last segment's samples
TARGET_RADIUS = 0.2  # m, targets lie within this distance of the home end-effector position
MAX_REACH = 0.85     # m, targets lie within this distance of the shoulder (arm length 0.91 m)


@dataclass
class ReachRow:
    """Outcome of one reach episode: ``number`` (the runner's episode count when it started),
    ``target`` (3,) m, ``distance`` m from the end effector to the target at the end,
    ``steps`` control steps, ``ik_error`` m left by the inverse kinematics."""

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
        number = runner.episodes_started
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


def main() -> None:
    parser = argparse.ArgumentParser(description="Reach random targets with the WAM and log the run.")
    parser.add_argument("--out", default="runs/reach_learner.h5", help="HDF5 log to write, replaced if it exists")
    parser.add_argument("--episodes", type=int, default=8, help="number of targets (episodes)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the run and of the targets")
    args = parser.parse_args()

    with Runner(make_task("reach"), log=args.out, seed=args.seed, overwrite=True) as runner:
        targets = demo_targets(runner, args.episodes, args.seed)
        rows = run_reach_demo(runner, targets)
        tolerance = runner.task.tolerance
    print(format_rows(rows, tolerance))
    print(f"log written to {args.out}; try: episodic info {args.out}")


if __name__ == "__main__":
    main()
