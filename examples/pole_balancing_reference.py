"""Reference for pole_balancing: a nudge, an energy-pumping swing-up and an LQR balance law, all
moving the pole's pivot along the swing plane with the shoulder and elbow while the pole hangs
from the passive j7 (see tasks/pole_balancing.py for the feedback law).

    python examples/pole_balancing_reference.py [--out runs/pole_balancing_reference.h5]
                                                [--pole-length 0.5] [--sensing-latency 0]
                                                [--sensing-noise 0] [--sensing-noise-rate 0]

Without --pole-length it runs the default 0.5 m pole and then prints the table of success
against pole length (0.2-1.0 m) and start that tasks/pole_balancing.py records.

Three commands: the start (default context: the pole hanging at rest), a 0.3 s bump of 0.1 rad
on the elbow j4 (a pole hanging at rest gives an energy pump nothing to pump) and one gains
command of ``duration`` s: the joint gains KP, KD (stiff, well damped shoulder and elbow; j7's
are ignored, it is passive) and the task gains [k_phi, k_phid, k_s, k_sd, k_E, a_swing,
phi_catch, theta_back].

Balance gains: a discrete LQR design for the whole arm and pole under these joint gains, from
MuJoCo's linearisation at the upright (mjd_transitionFD, one control period, friction losses
left out), with the task law's structure: u = K y on y = (phi, phi_d, s, s_d) only. K starts
from the LQR of the cart-pole model the linearisation gives when the arm moves only along the
law's pivot direction v (the pole's state and the pivot's), and is then improved on the full
model (BFGS on the closed loop's quadratic cost, Q = diag(10, 1, 1, 0.3) on y, R = 10 on u).
For a law that sees the pole late (the task's ``sensing_latency``, D control steps), the balance
gains can be designed for that delay (``latency``): the same weights on the linearisation with
the pole's angle and rate passed through a delay line of D steps (the state extended by the last
D values of (phi, phi_d)), the cost taken over the first 2^11 control steps (4.1 s) and
minimised by Nelder-Mead from the gains without delay, the horizon lengthened in stages from 2^5
steps (the delay-free gains are unstable under a delay, and over a long horizon every unstable
loop's cost overflows alike).
Swing gains: k_E from a small search per pole length (SWING_GAIN), a_swing 0.2 m, phi_catch
0.6 rad and theta_back 2.2 rad (j7's upper stop lies 2.46 rad from hanging on the WAM with its
+-3.0 rad j7).

What it reaches (12 s episodes, measured; main() prints it again): see the table in
tasks/pole_balancing.py; with a sensing latency, by pole length: benchmarks/pole_latency.py.
"""
from __future__ import annotations

import argparse
import functools
import time

import mujoco
import numpy as np
import scipy.linalg
import scipy.optimize

from episodic.interface.commands import Feedforward, GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.runtime.control import Gains
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.runtime.simulation import Simulation
from episodic.tasks import make_task

KP = np.array([400, 600, 200, 200, 100, 100, 0.0])  # N m/rad (j7: passive, ignored)
KD = np.array([10, 60, 7, 12, 0.95, 0.95, 0.0])     # N m s/rad: j2, j4 damped near critically along v
SWING_GAIN = {0.3: 0.1, 0.4: 0.08, 0.5: 0.06, 0.6: 0.06, 0.8: 0.06, 1.0: 0.06}  # k_E m by pole length m
A_SWING, PHI_CATCH, THETA_BACK = 0.2, 0.6, 2.2  # m, rad, rad
Q_Y, R_U = np.diag([10.0, 1.0, 1.0, 0.3]), 10.0  # LQR weights on (phi, phi_d, s, s_d) and on u
HORIZON_STAGES = (5, 7, 9, 11)  # doublings: the delayed design's cost horizon, 2^n control steps, in stages
NUDGE = (3, 0.1, 0.3)  # joint index (j4), rad, s: the bump that starts the swing
DURATION = 12.0        # s
CONTEXTS = {"hanging at rest": None, "pi - 0.2": [np.pi - 0.2], "pi + 0.3, -1 rad/s": [np.pi + 0.3, -1.0],
            "pi - 0.1, +1 rad/s": [np.pi - 0.1, 1.0]}
LENGTHS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)


def linearise(robot: Robot, pole_length: float, kp=KP, kd=KD):
    """(A, B, C, v, hinge): the closed loop under joint gains kp, kd with the pole upright, one
    control period, state (dq, dqd); input u m (the law's pivot offset, joint offsets v u); C
    maps the state to y = (phi, phi_d, s, s_d); hinge: the pole's (passive) dof."""
    task = make_task("pole_balancing", {"pole_length": pole_length})
    scene = build_scene(robot, task)
    sim = Simulation(scene)
    sim.reset(robot.clamp(task.start_posture(robot)))
    gains = Gains(kp, kd, np.zeros(robot.n_dofs), Feedforward.GRAVITY_COMPENSATION).with_passive(scene.passive)
    sim.apply_gains(gains)
    model, data = sim.model, sim.data
    model.dof_frictionloss[:] = 0.0  # Coulomb friction has no linearisation; it is small here
    task.reset(model, data, np.array([0.0, 0.0]), np.random.default_rng(0))
    data.ctrl[scene.actuator] = gains.reference(data.qpos[scene.qpos_adr], np.zeros(robot.n_dofs))
    mujoco.mj_forward(model, data)
    nv, v = model.nv, task.episode.v
    a_step, b_step = np.zeros((2 * nv, 2 * nv)), np.zeros((2 * nv, model.nu))
    mujoco.mjd_transitionFD(model, data, 1e-6, True, a_step, b_step, None, None)
    b_u = b_step[:, scene.actuator] @ (gains.kp * v)
    a, b = np.eye(2 * nv), np.zeros(2 * nv)
    for _ in range(scene.substeps):  # the offset is held over the control period
        a, b = a_step @ a, a_step @ b + b_u
    pole = model.body("pole").id
    jacp, jacr = np.zeros((3, nv)), np.zeros((3, nv))
    mujoco.mj_jac(model, data, jacp, jacr, data.xpos[pole], pole)
    hinge, h, zero = data.xmat[pole].reshape(3, 3)[:, 0], task.episode.h, np.zeros(nv)
    c = np.array([np.r_[hinge @ jacr, zero], np.r_[zero, hinge @ jacr], np.r_[h @ jacp, zero], np.r_[zero, h @ jacp]])
    return a, b[:, None], c, v, int(scene.dof_adr[np.flatnonzero(scene.passive)[0]])


def _cost(k: np.ndarray, a, b, c, x0) -> float:
    """The closed loop's quadratic cost from the initial spread x0 (1e12 when unstable)."""
    closed = a + b @ k[None] @ c
    if np.max(np.abs(np.linalg.eigvals(closed))) >= 1:
        return 1e12
    q = c.T @ (Q_Y + R_U * np.outer(k, k)) @ c + 1e-9 * np.eye(len(a))
    return float(np.trace(scipy.linalg.solve_discrete_lyapunov(closed.T, q) @ x0))


def delayed(a, b, c, delay: int):
    """(A, B, C) of the loop ``a``, ``b`` whose law reads the first two outputs of ``c``
    (phi, phi_d) ``delay`` control steps late and the others (s, s_d) at once: the state extended
    by the last ``delay`` values of (phi, phi_d), the newest first."""
    n, m = len(a), 2 * delay
    a_d, b_d = np.zeros((n + m, n + m)), np.zeros((n + m, 1))
    a_d[:n, :n], b_d[:n] = a, b
    a_d[n : n + 2, :n] = c[:2]
    a_d[n + 2 :, n : n + m - 2] = np.eye(m - 2)
    c_d = np.zeros((4, n + m))
    c_d[:2, n + m - 2 :] = np.eye(2)
    c_d[2:, :n] = c[2:]
    return a_d, b_d, c_d


def _horizon_cost(k: np.ndarray, a, b, c, x0, doublings: int) -> float:
    """The closed loop's quadratic cost over its first 2^doublings control steps from the initial
    spread x0 (the sum of the step costs by repeated doubling; 1e200 when it overflows)."""
    closed = a + b @ k[None] @ c
    total = c.T @ (Q_Y + R_U * np.outer(k, k)) @ c
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(doublings):
            total = total + closed.T @ total @ closed
            closed = closed @ closed
            if not np.all(np.isfinite(total)) or np.abs(total).max() > 1e200:
                return 1e200
    return float(np.trace(total @ x0))


@functools.cache
def balance_gains(pole_length: float, robot_name: str = "wam", delay: int = 0) -> np.ndarray:
    """[k_phi, k_phid, k_s, k_sd] for a pole of ``pole_length`` m whose law sees phi and phi_d
    ``delay`` control steps late (see the module docstring)."""
    if delay > 0:
        a, b, c, _, _ = linearise(load_robot(robot_name), pole_length)
        a, b, c = delayed(a, b, c, delay)
        x0 = c.T @ c + 1e-6 * np.eye(len(a))
        k = balance_gains(pole_length, robot_name)
        for doublings in HORIZON_STAGES:
            k = scipy.optimize.minimize(lambda g, n: np.log(_horizon_cost(g, a, b, c, x0, n)), k, args=(doublings,),
                                        method="Nelder-Mead", options=dict(maxiter=2000, xatol=1e-5, fatol=1e-7)).x
        if _cost(k, a, b, c, x0) < 1e12:  # stable: on to the whole (infinite-horizon) cost, as without delay
            k = scipy.optimize.minimize(lambda g: np.log(_cost(g, a, b, c, x0)), k, method="Nelder-Mead",
                                        options=dict(maxiter=2000, xatol=1e-5, fatol=1e-7)).x
        return k
    a, b, c, v, dof = linearise(load_robot(robot_name), pole_length)
    nv = len(a) // 2
    # the cart-pole model: the arm moves along v only, the hinge keeping the pole's angle
    hinge = np.zeros(nv)
    hinge[dof] = 1.0 / c[0, dof]
    turn = c[0, :nv] @ v
    basis = np.zeros((2 * nv, 4))
    basis[:nv, 0] = basis[nv:, 1] = hinge
    basis[:nv, 2] = basis[nv:, 3] = v - turn * hinge
    a_r, b_r = c @ a @ basis, c @ b
    p = scipy.linalg.solve_discrete_are(a_r, b_r, Q_Y, np.array([[R_U]]))
    start = -np.linalg.solve(R_U + b_r.T @ p @ b_r, b_r.T @ p @ a_r).ravel()
    x0 = c.T @ c + 1e-6 * np.eye(len(a))
    if _cost(start, a, b, c, x0) >= 1e12:
        start = start * np.array([1.5, 1.2, 1.0, 1.5])  # the short poles' cart-pole gains are too timid
    found = scipy.optimize.minimize(lambda k: np.log(_cost(k, a, b, c, x0)), start, method="BFGS")
    return found.x


def task_gains(pole_length: float = 0.5, delay: int = 0) -> np.ndarray:
    """The eight task gains for a pole of ``pole_length`` m seen ``delay`` control steps late
    (k_E of the nearest length in SWING_GAIN)."""
    nearest = min(SWING_GAIN, key=lambda length: abs(length - pole_length))
    return np.r_[balance_gains(float(pole_length), delay=delay), SWING_GAIN[nearest], A_SWING, PHI_CATCH,
                 THETA_BACK]


def nudge(posture: np.ndarray, control_rate: float) -> np.ndarray:
    """A smooth bump of NUDGE's joint away from ``posture`` (n_dofs,) rad and back, (n, n_dofs)."""
    joint, amplitude, seconds = NUDGE
    t = np.arange(1, int(round(seconds * control_rate)) + 1) / (seconds * control_rate)
    q = np.repeat(np.asarray(posture, float)[None], t.size, axis=0)
    q[:, joint] += amplitude * np.sin(np.pi * t) ** 2
    return q


def reference_commands(robot: Robot, episode_id: int = 1, context=None, pole_length: float = 0.5,
                       duration: float = DURATION, latency: float = 0.0) -> list:
    """Start (pole hanging unless ``context`` says otherwise), the nudge, and one gains command
    running the swing-up and balance law for ``duration`` s, its balance gains designed for a
    law that sees the pole ``latency`` s late."""
    if robot.n_dofs != 7:
        raise ValueError("the reference gains are for the 7-DoF WAM")
    start = StartCommand(episode_id, 2, context=np.zeros(0) if context is None else np.asarray(context, float))
    posture = robot.clamp(make_task("pole_balancing").start_posture(robot))
    return [start, TrajectoryCommand(episode_id, 1, 2, nudge(posture, robot.control_rate)),
            GainsCommand(episode_id, 2, 2, KP.copy(), KD.copy(), wait_time=duration,
                         task_gains=task_gains(pole_length, int(round(latency / robot.control_dt))))]


def run(pole_length: float, context=None, out=None, duration: float = DURATION, sensing: dict | None = None,
        designed: bool = True) -> dict:
    """One reference episode: success, when the pole first came up (s after the motion started,
    nan if never), whether it stayed up the last 2 s, whether j7 met a stop, the return and the
    episode's flag. ``sensing``: the task's sensing parameters (sensing_latency s, sensing_noise
    rad, sensing_noise_rate rad/s; none: the defaults, the pole seen at once); ``designed``: the
    balance gains designed for that latency (else for none)."""
    robot = load_robot("wam")
    params = {"pole_length": pole_length, **(sensing or {})}
    with Runner(make_task("pole_balancing", params), log=out, keep_episodes=True, overwrite=True) as runner:
        began = time.perf_counter()
        latency = runner.task.sensing_latency if designed else 0.0
        replies = [runner.send(c) for c in reference_commands(robot, context=context, pole_length=pole_length,
                                                              duration=duration, latency=latency)]
        wall = time.perf_counter() - began
        episode = runner.episodes[0]
        upright = runner.task.upright
        low, high = runner.sim.model.jnt_range[runner.sim.model.joint("j7").id]
    steps = episode.steps()
    motion = steps["index"] >= 1
    phi = steps["task_state"][motion, 0]
    up = np.abs(phi) < upright
    q7 = steps["q"][motion, 6]
    last = int(round(2.0 / robot.control_dt))
    return dict(success=bool(episode.success), up_after=float(np.argmax(up) * robot.control_dt) if up.any() else np.nan,
                stays_up=bool(up[-last:].all()), stop=bool(q7.min() < low + 0.01 or q7.max() > high - 0.01),
                episode_return=episode.episode_return, flag=replies[-1].flag.name,
                final_phi=float(replies[-1].state[0]), steps=episode.n_steps, wall=wall)


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the pole_balancing reference swing-up and balance.")
    parser.add_argument("--out", default=None, help="HDF5 log to write, replaced if it exists (default: none)")
    parser.add_argument("--pole-length", type=float, default=None,
                        help="pole length, m: run this one episode only (default: 0.5 m, then the table of "
                             f"success against pole length, {', '.join(map(str, LENGTHS))} m, and start)")
    parser.add_argument("--sensing-latency", type=float, default=0.0, help="s the law sees the pole late (default 0)")
    parser.add_argument("--sensing-noise", type=float, default=0.0, help="rad, noise std on the sensed angle")
    parser.add_argument("--sensing-noise-rate", type=float, default=0.0, help="rad/s, noise std on the sensed rate")
    args = parser.parse_args()
    sensing = {"sensing_latency": args.sensing_latency, "sensing_noise": args.sensing_noise,
               "sensing_noise_rate": args.sensing_noise_rate}
    r = run(0.5 if args.pole_length is None else args.pole_length, out=args.out, sensing=sensing)
    print(f"return {r['episode_return']:.4f}  success {r['success']}  upright after {r['up_after']:.2f} s  "
          f"upright for the last 2 s {r['stays_up']}  j7 met a stop {r['stop']}  "
          f"final phi {r['final_phi']:+.4f} rad  steps {r['steps']}  {r['steps'] / r['wall']:.0f} steps/s")
    if args.pole_length is not None:
        return
    print("\npole m | " + " | ".join(CONTEXTS) + " | solved")
    for length in LENGTHS:
        cells, solved = [], 0
        for context in CONTEXTS.values():
            r = run(length, context, sensing=sensing)
            solved += r["success"]
            note = ("" if r["stays_up"] else ", only just") + (", hit j7's stop" if r["stop"] else "")
            cells.append(f"yes, up at {r['up_after']:.1f} s{note}" if r["success"]
                         else f"no ({'never up' if np.isnan(r['up_after']) else 'fell'}"
                              f"{'' if r['flag'] == 'OK' else ', ' + r['flag']})")
        print(f"{length:.1f} | " + " | ".join(cells) + f" | {solved}/{len(CONTEXTS)}", flush=True)


if __name__ == "__main__":
    main()
