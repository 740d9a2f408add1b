"""``episodic robots check NAME``: a robot's report card, each check PASS or FAIL with what to change.

The robot runs one logged episode of the ``reach`` task (its target on the end effector at home) in
a blocking simulation, as a learner would drive it:

- **hold**: 2 s holding home right after the exact start; the drift is the largest |q - home|
  (mrad), which must stay inside the goto tolerance (``goto.tolerance_q``);
- **track**: each joint in turn makes a minimum-jerk move out and back (``TRACK_AMPLITUDE`` rad or
  less, toward the farther stop, at the goto bounds); the tracking error is the largest
  |q - q_d| (mrad), which must stay under ``TRACK_LIMIT`` times the goto tolerance;
- **gravity**: the controller's torque at rest on target (gravity compensation routed through the
  actuators) against MuJoCo's inverse dynamics (``mj_rne``) of the arm at home and at every
  posture the track check reaches, and the gravity torque's share of the torque limit;
- **self-collision**: no two links that are not neighbours interpenetrate at home (every collision
  geom against every other; the run itself never lets the arm collide with itself);
- **stable**: every eigenvalue of MuJoCo's linearized physics step at home under the gains inside
  the unit circle;
- **replay**: the logged episode replays bit for bit (``episodic.tools.replay``).
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from episodic.interface.robot import Robot, is_path, load_robot
from episodic.interface.trajectory import min_jerk, min_jerk_duration
from episodic.interface.vocabulary import Flag
from episodic.runtime.runner import Runner
from episodic.runtime.scene import Scene
from episodic.tasks import make_task
from episodic.tools.replay import replay
from episodic.tools.robot_import import collision_model, collisions, spectral_radius

HOLD_TIME = 2.0  # s
TRACK_AMPLITUDE = 0.3  # rad (m for a slide joint): each joint's move, or 0.4 of its way to the farther stop if less
TRACK_LIMIT = 5.0  # the tracking error may reach this many goto tolerances (10 mrad for the usual 2 mrad)
GRAVITY_MATCH = 1e-9  # the compensation must equal mj_rne's gravity to this fraction of the torque limit
GRAVITY_SHARE = 0.8  # gravity at home may need at most this share of a joint's torque limit


@dataclass
class Check:
    """One line of the report card: what was measured, whether it passed, and the fix if not."""

    name: str
    passed: bool
    measured: str
    fix: str = ""


@dataclass
class ReportCard:
    robot: Robot
    checks: list[Check] = field(default_factory=list)
    hold_drift: float = 0.0  # mrad
    tracking_error: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (n_dofs,) mrad
    seconds: float = 0.0  # wall-clock time of the check

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def text(self) -> str:
        r = self.robot
        lines = [f"robot {r.name} ({r.source}, {r.mjcf.parent}): {r.n_dofs} joints, {r.control_rate:g} Hz, "
                 f"{r.substeps} substep(s)",
                 f"  gains: kp {np.round(r.kp, 3).tolist()}", f"         kd {np.round(r.kd, 3).tolist()}"]
        if r.extra_joints.names:
            held = ", ".join(f"{n} = {v:g}" for n, v in zip(r.extra_joints.names, r.extra_joints.hold))
            lines.append(f"  held joints: {held}")
        for c in self.checks:
            lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {c.name:15s} {c.measured}")
            if not c.passed:
                lines.append(f"        fix: {c.fix}")
        lines.append(f"{'all checks passed' if self.passed else 'some checks FAILED'} ({self.seconds:.1f} s)")
        return "\n".join(lines)


def _track_targets(robot: Robot) -> np.ndarray:
    """Per joint, the posture (n_dofs,) its move goes to: home plus TRACK_AMPLITUDE toward the farther stop."""
    up, down = robot.range_upper - robot.home, robot.home - robot.range_lower
    step = np.where(up >= down, 1.0, -1.0) * np.minimum(TRACK_AMPLITUDE, 0.4 * np.maximum(up, down))
    return robot.home + np.diag(step)


def _gravity(scene: Scene, postures: np.ndarray) -> tuple[float, np.ndarray]:
    """The largest |controller torque - mj_rne gravity| N m over ``postures`` (k, n_dofs), at rest on
    target, and the gravity torques (k, n_dofs) N m."""
    robot, model = scene.robot, scene.model
    data, dyn = mujoco.MjData(model), mujoco.MjData(scene.dynamics)
    worst, torques = 0.0, []
    for q in postures:
        mujoco.mj_resetData(model, data)
        data.qpos[scene.qpos_adr] = q
        data.ctrl[scene.actuator] = robot.kp * q  # the PD's share is 0 on target at rest
        mujoco.mj_forward(model, data)
        applied = scene.applied_torque(data.sensordata)
        dyn.qpos[:] = q
        dyn.qvel[:] = 0.0
        mujoco.mj_forward(scene.dynamics, dyn)  # the positions and velocities mj_rne reads
        rne = np.zeros(scene.dynamics.nv)
        mujoco.mj_rne(scene.dynamics, dyn, 0, rne)
        worst = max(worst, float(np.max(np.abs(applied - rne))))
        torques.append(rne)
    return worst, np.array(torques)


def check_robot(name: str, *, log_dir: str | Path | None = None) -> ReportCard:
    """Run the report card of the robot ``name`` (as load_robot finds it); the episode's log goes to
    ``log_dir`` (default: a temporary folder, removed)."""
    started = time.perf_counter()
    robot = load_robot(name)
    card = ReportCard(robot)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(log_dir or tmp) / f"check_{robot.name}.h5"
        targets = _track_targets(robot)
        with Runner(make_task("reach", {}), robot, log=log, keep_episodes=True, overwrite=True) as runner:
            scene, dt = runner.scene, robot.control_dt
            data = mujoco.MjData(scene.model)
            data.qpos[scene.qpos_adr] = robot.home
            mujoco.mj_forward(scene.model, data)
            ee_home = np.array(data.site(robot.end_effector_site).xpos)
            reply = runner.start_episode(1 + robot.n_dofs, posture=robot.home, context=ee_home)
            hold_steps = round(HOLD_TIME / dt)
            replies = [reply, runner.send_trajectory(np.tile(robot.home, (hold_steps, 1)))]
            for target in targets:
                duration = min_jerk_duration(robot.home, target, robot.goto.max_velocity, robot.goto.max_acceleration)
                out, back = min_jerk(robot.home, target, duration, dt), min_jerk(target, robot.home, duration, dt)
                q = np.vstack([out.q, back.q])
                replies.append(runner.send_trajectory(q, qd=np.vstack([out.qd, back.qd]),
                                                      qdd=np.vstack([out.qdd, back.qdd])))
            episode = runner.episodes[-1] if runner.episodes else None
            refused = [r for r in replies if r.flag != Flag.OK]
            radius = spectral_radius(scene, robot)
            gravity_error, gravity = _gravity(scene, np.vstack([robot.home[None], targets]))
        if refused or episode is None:
            why = refused[0].message if refused else "the episode did not finish"
            card.checks.append(Check("run", False, f"{Flag(refused[0].flag).name if refused else ''}: {why}",
                                     "see the message; the goto bounds, gains or limits in robot.toml do not fit"))
        else:
            steps = episode.steps()
            index, q, q_d = steps["index"], steps["q"], steps["q_d"]
            held = q[index == 1]
            card.hold_drift = float(np.max(np.abs(held - robot.home))) * 1e3
            tol = robot.goto.tolerance_q * 1e3
            card.checks.append(Check(
                "hold home", card.hold_drift <= tol, f"drift {card.hold_drift:.3g} mrad over {HOLD_TIME:g} s "
                f"(limit {tol:g})",
                "the arm sags or creeps: check the model's masses and that gravity compensation passes; raise kp"))
            card.tracking_error = np.array([np.max(np.abs(q[index == 2 + i, i] - q_d[index == 2 + i, i]))
                                            for i in range(robot.n_dofs)]) * 1e3
            worst = int(np.argmax(card.tracking_error))
            limit = TRACK_LIMIT * tol
            card.checks.append(Check(
                "track moves", bool(card.tracking_error.max() <= limit),
                f"max error {card.tracking_error.max():.3g} mrad ({robot.joint_names[worst]}; per joint "
                f"{np.round(card.tracking_error, 2).tolist()}; limit {limit:g})",
                f"raise kp and kd of {robot.joint_names[worst]} (the bandwidth), lower its goto.max_acceleration, or "
                f"use feedforward = \"inverse_dynamics\""))
            card.checks.append(_replay_check(log, robot))
    share = float(np.max(np.abs(gravity[0]) / robot.torque_limit))
    match = GRAVITY_MATCH * float(robot.torque_limit.max())
    card.checks.append(Check(
        "gravity", gravity_error <= match and share <= GRAVITY_SHARE,
        f"compensation vs mj_rne {gravity_error:.2g} N m (limit {match:.2g}); gravity at home {share:.0%} of the "
        f"torque limit (limit {GRAVITY_SHARE:.0%})",
        "gravity needs too much of a joint's torque at home: choose another home posture, or check the torque "
        "limits and the model's masses" if gravity_error <= match else
        "the compensation differs from the model's gravity: a joint outside the arm is not held ([extra_joints])"))
    probe = collision_model(mujoco.MjSpec.from_file(str(robot.mjcf)))
    qpos = np.array(probe.qpos0)
    for joint, q in zip(robot.joint_names + robot.extra_joints.names,
                        np.concatenate([robot.home, robot.extra_joints.hold])):
        qpos[probe.joint(joint).qposadr[0]] = q
    hits = collisions(probe, qpos)
    card.checks.append(Check(
        "self-collision", not hits, "none at home" if not hits else
        "; ".join(f"{a} into {b} by {depth * 1e3:.1f} mm" for a, b, depth in hits[:3]),
        "choose a home posture where the links stand apart ([postures] home), or hold the fingers more open"))
    card.checks.append(Check(
        "stable", radius < 1.0, f"spectral radius of the step {radius:.6f} at {robot.substeps} substep(s)",
        "raise [control] substeps or lower kp, kd"))
    card.seconds = time.perf_counter() - started
    return card


def _replay_check(log: Path, robot: Robot) -> Check:
    report = replay(log, robot=robot.spec if is_path(robot.spec) else None)  # a robot checked by its path
    detail = "; ".join(f"{d.what}: {d.detail}" for d in report.differences[:2])
    return Check("replay", report.identical, f"{len(report.episodes)} episode(s) bit-identical" if report.identical
                 else detail, "the simulation is not deterministic: report it with the log")
