"""A scripted ball_bouncing stroke: toss the ball up from the face, hit it to the target height,
then bounce it on a sinusoidal up-and-down stroke that meets it while the racket decelerates,
with the task's mirror law steering it back to the face's centre.

Vertical: passively stable period-1 bouncing (Schaal & Atkeson, "Open loop stable control
strategies for robot juggling", ICRA 1993; Holmes, J. Sound Vib. 84, 173 (1982)). The face's
centre moves on z(t) = c + A sin(w t + p) along the vertical through its start position, with
the face kept horizontal. The period 2 pi / w is the ball's flight time from an impact at
the start height up to the target apex and back (integrated with the task's air drag); the
racket's velocity at the impact, v_r = (u_out - e' u_in) / (1 + e'), sends a ball arriving at
u_in back up at u_out (e' = ``RECOIL`` e: the arm gives a little under an impact); its
acceleration at the impact is in the middle of the band -2 g (1 + e^2) / (1 + e)^2 < a < 0 in
which the period-1 bounce is stable without feedback (``IMPACT_DECELERATION``), and c puts the
impact at the start height. A ball that comes back early or late meets the racket at another
point of its stroke, which gives it less or more energy: the bounce returns to the period by itself.

The start (the ball at rest on the face): a toss, then a first hit. The face rises from rest on
a quintic to ``TOSS_HEIGHT`` m in ``TOSS_TIME`` s, ending with an upward speed (solved so that
the ball peaks ``TOSS_APEX`` m above its start) and a deceleration of 2 g: the ball leaves the face
where the face's deceleration passes g. A second quintic brings the face back to the start
height as the ball comes down, moving up at the speed that sends the ball to the target apex
(the same impact law, for the slower ball), decelerating as on the sinusoid; a third, below the
ball, brings it onto the sinusoid ``JOIN_LEAD`` s before the ball is back: the second impact, the
first of the periodic stroke. (Throwing the ball straight to the apex would need the face at
about 2.4 m/s on the way up and again on the way down, close to the shoulder's and elbow's speed
limits; the toss and the hit need 1.4 m/s, j2 at half its limit.)

Sideways: the task's feedback law (a gains command's task gains ``MIRROR_GAINS``) tilts the face
toward its centre as the ball moves off it (module docstring of episodic/tasks/ball_bouncing.py);
the gains command also switches the feedforward to the inverse dynamics of the desired motion,
which the stroke needs to be followed at 10 rad/s.

Other arms (the UR5, the Puma 560; episodic.tasks.ball_bouncing places the face and refuses the
Panda): the same toss, hit and stroke, planned in task space from that arm's start posture, with
the wrist's gains at least ``WRIST_KP``, ``WRIST_KD`` (theirs are stiffer). The mirror law's gains
are not the WAM's: those were tuned against the WAM's soft wrist, which tilts the face toward an
off-centre hit (a push outward that grows the offset 1.5 to 2 times per bounce); on a stiff wrist
the same gains overshoot, the offset changing sign and growing 1.3 times per bounce (the Puma
loses the ball after 10 good bounces). There the gains are :func:`settling_gains`, from the
bounce's physics: a face tilted by theta sends the ball sideways at about (1 + e) u_in theta, the
ball keeps 5/7 of its sideways speed (it leaves rolling), and the gains make the next impact land
at the face's centre and the one after leave straight up (0.32 rad/m, 0.14 rad s/m for the default
0.45 m and e = 0.75). Returns: UR5 18.91, Puma 17.99 (each 18-19 good bounces in a row).

Joints: inverse kinematics of the face's centre on a grid of heights along its vertical
(episodic.task.kinematics.SiteIK on the site racket_face, whose x axis is the face normal),
interpolated by cubic splines in the height, so q, qd and qdd follow z, z' and z''. The motion
is cut into ``SEGMENTS`` trajectory segments of ``SEGMENT_TIME`` s. Only what a remote learner
could know is used: the robot and task models and the context.

    python examples/ball_bouncing_reference.py [--out runs/ball_bouncing_reference.h5] [--noise 30] [--robot wam]

runs it in-process and prints the return, the bounces and the simulation speed; ``--noise N``
prints the success rate of N copies per noise level with the racket's speed at the impacts,
the stroke's phase and the face's tilt perturbed (episodic.learning.noise).
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from episodic.interface.commands import Feedforward, GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.runtime.scene import build_scene
from episodic.task.contact import AIR_DENSITY, TENNIS_BALL_DRAG_COEFFICIENT
from episodic.task.frame import RobotFrame
from episodic.task.kinematics import SiteIK
from episodic.tasks import make_task

GRAVITY = 9.81
# the rebound off the held racket over e: 0.94-0.955 in drop tests on the still racket (e = 0.6, 0.75,
# 0.9); with it the apexes of the reference came out 2 cm low on average (impacts on the moving arm
# lose a little more), with 0.9 1 cm low, with 0.85 on target but scattered twice as much
RECOIL = 0.9
IMPACT_DECELERATION = 0.5   # the racket's deceleration at impact, as a fraction of the stable band's width
TOSS_APEX = 0.15            # m, the toss's apex above the start
TOSS_TIME = 0.13            # s, from rest to the end of the toss
TOSS_HEIGHT = 0.08          # m, the face's rise during the toss
TOSS_DECELERATION = 2.0 * GRAVITY  # m/s^2, at the toss's end (the ball leaves where it passes g)
JOIN_LEAD = 0.08            # s, the face is on the sinusoid this long before the second impact
MIRROR_GAINS = (0.8, 0.2)   # rad/m, rad s/m: the task's feedback law (see the module docstring)
# the wrist's gains (j5, j6, j7), stiffer than the robot's [10, 10, 2.5] N m/rad, [0.3, 0.3, 0.05] N m s/rad:
# under an impact 2 cm off the centre the racket turns less (the ball leaves 0.009 m/s sideways in x
# and 0.024 in y instead of 0.017 and 0.061: drop tests), which the mirror law must otherwise undo
WRIST_KP = (50.0, 50.0, 20.0)
WRIST_KD = (2.0, 2.0, 1.0)
SEGMENTS = 4
SEGMENT_TIME = 3.0          # s
GRID = 0.01                 # m, the heights of the inverse kinematics


@dataclass(frozen=True)
class Noise:
    """A perturbed stroke: ``speed`` m/s added to the racket's speed at the impacts, ``phase``
    rad added to the sinusoid's phase, ``tilt`` (2,) rad: the face normal's horizontal
    components throughout."""

    speed: float = 0.0
    phase: float = 0.0
    tilt: tuple[float, float] = (0.0, 0.0)


def drag_constant(task) -> float:
    """1/m: the ball's drag deceleration over v^2 (episodic.task.contact's air, a tennis ball's Cd)."""
    area = np.pi * task.ball_radius**2
    return 0.5 * AIR_DENSITY * TENNIS_BALL_DRAG_COEFFICIENT * area / task.ball_mass


def fly(z: float, v: float, k: float, dt: float = 5e-4, until: float = 0.0) -> tuple[float, float, float, float]:
    """A vertical flight with quadratic drag from height z m at v m/s (up > 0), by RK4, until it
    comes down to ``until`` m: (apex m, time to the apex s, time to come down s, speed then m/s)."""
    def acc(vel):
        return -GRAVITY - k * abs(vel) * vel

    t, apex, t_apex = 0.0, z, 0.0
    while True:
        k1 = acc(v)
        k2 = acc(v + 0.5 * dt * k1)
        k3 = acc(v + 0.5 * dt * k2)
        k4 = acc(v + dt * k3)
        z_new = z + dt * (v + dt * (k1 + k2 + k3) / 6)
        v_new = v + dt * (k1 + 2 * k2 + 2 * k3 + k4) / 6
        if v > 0 >= v_new:
            apex, t_apex = z + v * v / (2 * GRAVITY), t + v / GRAVITY
        if v_new < 0 and z_new <= until:
            f = (z - until) / (z - z_new)
            return max(apex, z), t_apex, t + f * dt, -(v + f * (v_new - v))
        z, v, t = z_new, v_new, t + dt


def launch_speed(height: float, k: float, start: float = 0.0) -> float:
    """m/s: the upward speed from ``start`` m that peaks at ``height`` m with drag."""
    low, high = 0.0, 20.0
    for _ in range(50):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if fly(start, mid, k, until=start - 1.0)[0] < height else (low, mid)
    return 0.5 * (low + high)


def quintic(t: np.ndarray, duration: float, start, end) -> np.ndarray:
    """Position, velocity and acceleration (3, len(t)) of the quintic from ``start`` (p, v, a)
    to ``end`` (p, v, a) over ``duration`` s, at times ``t`` s from its start."""
    T = duration
    M = np.array([[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 2, 0, 0, 0],
                  [1, T, T**2, T**3, T**4, T**5], [0, 1, 2 * T, 3 * T**2, 4 * T**3, 5 * T**4],
                  [0, 0, 2, 6 * T, 12 * T**2, 20 * T**3]])
    c = np.linalg.solve(M, np.concatenate([start, end]))
    powers = np.vander(t, 6, increasing=True)
    p = powers @ c
    v = powers[:, :5] @ (c[1:] * np.arange(1, 6))
    a = powers[:, :4] @ (c[2:] * np.array([2, 6, 12, 20]))
    return np.vstack([p, v, a])


@dataclass(frozen=True)
class Stroke:
    """The planned vertical motion of the face's centre, m relative to its start, on the control
    grid: z, zd, zdd (n,); and what it was planned from: the sinusoid's amplitude m, angular
    frequency rad/s, phase rad at the second impact and centre m, the second impact's time s (the
    first on the sinusoid), the toss's release time s and the first impact's time s."""

    z: np.ndarray
    zd: np.ndarray
    zdd: np.ndarray
    amplitude: float
    omega: float
    phase: float
    centre: float
    second_impact: float
    release: float
    first_impact: float


def plan_stroke(task, apex: float, restitution: float, duration: float, dt: float, noise: Noise = Noise()) -> Stroke:
    """The face's vertical motion for ``duration`` s (module docstring)."""
    k = drag_constant(task)
    u_out = launch_speed(apex, k)
    _, _, period, u_in = fly(0.0, u_out, k)
    e = RECOIL * restitution
    omega = 2 * np.pi / period
    v_r = (u_out - e * u_in) / (1 + e) + noise.speed
    decel = IMPACT_DECELERATION * 2 * GRAVITY * (1 + restitution**2) / (1 + restitution) ** 2
    amplitude = np.hypot(decel / omega**2, v_r / omega)
    phase = np.arctan2(decel / omega**2, v_r / omega)  # z = c + A sin(w (t - t2) + phase): v > 0, a < 0 at t2
    centre = -amplitude * np.sin(phase)

    # the toss: the ball leaves the face where its deceleration passes g, and peaks at TOSS_APEX
    steps = np.arange(int(round(TOSS_TIME / dt)) + 1) * dt
    low, high = 0.0, 10.0
    for _ in range(40):
        speed = 0.5 * (low + high)
        p, v, a = quintic(steps, TOSS_TIME, (0.0, 0.0, 0.0), (TOSS_HEIGHT, speed, -TOSS_DECELERATION))
        i = int(np.argmax((a < -GRAVITY) & (steps > 0.5 * TOSS_TIME)))
        low, high = (speed, high) if fly(p[i], v[i], k, until=p[i] - 1.0)[0] < TOSS_APEX else (low, speed)
    toss_end = (TOSS_HEIGHT, speed, -TOSS_DECELERATION)
    release = i * dt
    _, _, fall, u_first = fly(p[i], v[i], k)
    first = release + fall
    # the first impact sends the ball to the apex; the second meets the sinusoid
    v_first = (u_out - e * u_first) / (1 + e)
    first_state = (0.0, v_first, -decel)
    second = first + period
    join = second - JOIN_LEAD

    def sinusoid(tt):
        arg = omega * (tt - second) + phase + noise.phase
        return np.vstack([centre + amplitude * np.sin(arg), amplitude * omega * np.cos(arg),
                          -amplitude * omega**2 * np.sin(arg)])

    t = np.arange(int(round(duration / dt))) * dt
    z = np.empty((3, t.size))
    parts = [(t <= TOSS_TIME, 0.0, TOSS_TIME, (0.0, 0.0, 0.0), toss_end),
             ((t > TOSS_TIME) & (t <= first), TOSS_TIME, first, toss_end, first_state),
             ((t > first) & (t < join), first, join, first_state, sinusoid(np.array([join]))[:, 0])]
    for rows, begin, finish, start_state, end_state in parts:
        z[:, rows] = quintic(t[rows] - begin, finish - begin, start_state, end_state)
    z[:, t >= join] = sinusoid(t[t >= join])
    # the face stays below the ball in its first two flights
    for launched, (z0, v0), landing in ((release, (p[i], v[i]), first), (first, (0.0, u_out), second)):
        flying = (t > launched + 0.02) & (t < landing - 0.02)
        if np.any(z[0, flying] >= _flight_path(z0, v0, k, t[flying] - launched)):
            raise ValueError("the face would catch up with the ball in flight")
    return Stroke(z[0], z[1], z[2], float(amplitude), float(omega), float(phase), float(centre), float(second),
                  float(release), float(first))


def _flight_path(z: float, v: float, k: float, times: np.ndarray, dt: float = 5e-4) -> np.ndarray:
    """Heights m of a vertical flight with drag from (z m, v m/s) at ``times`` s (increasing)."""
    out, t = np.empty(times.size), 0.0
    for j, target in enumerate(times):
        while t + dt <= target:
            a = -GRAVITY - k * abs(v) * v
            v += dt * a
            z += dt * v
            t += dt
        out[j] = z + (target - t) * v
    return out


def joint_path(robot: Robot, task, heights: np.ndarray, tilt=(0.0, 0.0)) -> CubicSpline:
    """Postures (as a cubic spline in the face's rise m) that hold the face's centre on the
    vertical through its start position at each height of ``heights`` (increasing, including
    0), the face normal at ``tilt`` (its horizontal components, rad) from vertical."""
    scene = build_scene(robot, task)
    ik = SiteIK(scene.model, "racket_face", scene.qpos_adr, scene.dof_adr, robot.range_lower, robot.range_upper)
    q0 = task.start_posture(robot)
    centre, _ = ik.pose(q0)
    normal = np.array([tilt[0], tilt[1], 1.0])
    normal /= np.linalg.norm(normal)
    postures = np.empty((heights.size, robot.n_dofs))
    start = int(np.argmin(np.abs(heights)))
    for order in (range(start, heights.size), range(start, -1, -1)):
        q = q0
        for j in order:
            q, err = ik.solve(q, centre + [0.0, 0.0, heights[j]], normal, tolerance=1e-10)
            if err > 1e-6:
                raise ValueError(f"the face cannot reach {heights[j]:+.3f} m above its start (error {err:.2g})")
            postures[j] = q
    return CubicSpline(heights, postures, axis=0)


def settling_gains(task, apex: float, restitution: float) -> tuple[float, float]:
    """The mirror law's gains [k_r rad/m, k_v rad s/m] that centre the ball in two bounces on a
    racket that stays where the law puts it (module docstring): a face tilted by theta sends the
    ball off sideways at about c theta, c = (1 + e) u_in (u_in m/s the ball's speed at the impact),
    and the ball keeps 5/7 of its sideways speed v (it leaves rolling); k_r = 1 / (c T) and
    k_v = 5 / (7 c) make its sideways speed -r / T (T s the flight's time), so the next impact
    is at the centre and the one after it leaves straight up."""
    k = drag_constant(task)
    _, _, period, u_in = fly(0.0, launch_speed(apex, k), k)
    c = (1 + restitution) * u_in
    return 1 / (c * period), 5 / (7 * c)


def reference_commands(robot: Robot | str = "wam", episode_id: int = 1, context=None, params: dict | None = None,
                       noise: Noise = Noise(), segments: int = SEGMENTS, segment_time: float = SEGMENT_TIME) -> list:
    """The reference episode as episodic.interface.commands objects: the start (``context``: None for the
    task's default), the gains command (feedforward, mirror law) and ``segments`` segments."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    task = make_task("ball_bouncing", params)
    full = task.default_context()
    given = np.zeros(0) if context is None else np.asarray(context, float)
    full[: given.size] = given
    dt = robot.control_dt
    stroke = plan_stroke(task, full[0], full[1], segments * segment_time, dt, noise)
    low, high = np.floor(stroke.z.min() / GRID) - 2, np.ceil(stroke.z.max() / GRID) + 2
    path = joint_path(robot, task, np.arange(low, high + 1) * GRID, noise.tilt)
    q = path(stroke.z)
    qd = path(stroke.z, 1) * stroke.zd[:, None]
    qdd = path(stroke.z, 2) * stroke.zd[:, None] ** 2 + path(stroke.z, 1) * stroke.zdd[:, None]
    n = 1 + segments
    kp, kd = robot.kp.copy(), robot.kd.copy()
    kp[-3:], kd[-3:] = np.maximum(kp[-3:], WRIST_KP), np.maximum(kd[-3:], WRIST_KD)  # at least this stiff
    gains = MIRROR_GAINS if RobotFrame.of(robot).is_reference() else settling_gains(task, full[0], full[1])
    commands = [StartCommand(episode_id, n, context=given),
                GainsCommand(episode_id, 1, n, kp, kd, feedforward=Feedforward.FEEDFORWARD,
                             task_gains=np.array(gains))]
    per = q.shape[0] // segments
    for s in range(segments):
        rows = slice(s * per, (s + 1) * per if s < segments - 1 else q.shape[0])
        commands.append(TrajectoryCommand(episode_id, 2 + s, n, q[rows], qd[rows], qdd[rows]))
    return commands


def perturbed(kind: str):
    """For episodic.learning.noise: rng, level -> one perturbed reference episode, the noise of
    ``kind`` ("speed" m/s, "phase" rad, "tilt" rad per horizontal component) drawn at ``level``."""
    def make(rng: np.random.Generator, level: float) -> list:
        draw = rng.normal(0.0, level, 2)
        noise = {"speed": Noise(speed=float(draw[0])), "phase": Noise(phase=float(draw[0])),
                 "tilt": Noise(tilt=(float(draw[0]), float(draw[1])))}[kind]
        return reference_commands("wam", 1, noise=noise)
    return make


NOISE_LEVELS = {"speed": (0.02, 0.05, 0.1), "phase": (0.05, 0.1, 0.2), "tilt": (0.005, 0.01, 0.02)}
NOISE_UNITS = {"speed": "m/s", "phase": "rad", "tilt": "rad"}


def main() -> None:
    from episodic.runtime.runner import Runner

    parser = argparse.ArgumentParser(description="Run the scripted ball_bouncing stroke and log it.")
    parser.add_argument("--out", default=None, help="HDF5 log to write, replaced if it exists (default: none)")
    parser.add_argument("--context", type=float, nargs="*", default=None,
                        help="apex m, restitution, dx m, dy m, vx m/s, vy m/s (any leading part)")
    parser.add_argument("--noise", type=int, default=0, metavar="N",
                        help="also print the success rate of N perturbed copies per noise level")
    parser.add_argument("--robot", default="wam", help="the robot, by name (default: wam)")
    args = parser.parse_args()
    with Runner(make_task("ball_bouncing"), load_robot(args.robot), log=args.out, keep_episodes=True,
                overwrite=True) as runner:
        commands = reference_commands(runner.robot, 1, args.context)
        wall = time.perf_counter()
        replies = [runner.send(c) for c in commands]
        wall = time.perf_counter() - wall
        memory = runner.task.episode
    ep = runner.episodes[-1]
    steps = ep.n_steps
    sim_time = steps * runner.robot.control_dt
    print(f"flags {[r.flag.name for r in replies]}; return {ep.episode_return:.4f}; success {ep.success}")
    print(f"bounces {memory.bounces}, good {memory.good}, best run {memory.best_run}, floor {memory.floored}; "
          f"apexes {[round(float(a[1] - replies[0].state[2]), 3) for a in memory.apexes]} m above the start")
    print(f"{steps} steps ({sim_time:.2f} s simulated) in {wall:.3f} s: {steps / wall:,.0f} steps/s, "
          f"{sim_time / wall:.1f}x real time")
    if args.noise:
        from episodic.learning.noise import noise_table, print_noise_table

        for kind, levels in NOISE_LEVELS.items():
            print(f"noise: {kind}")
            print_noise_table(noise_table("ball_bouncing", perturbed(kind), levels, n=args.noise), NOISE_UNITS[kind])


if __name__ == "__main__":
    main()
