"""ball_in_cup: swing a ball on an elastic string up and catch it in a cup on the hand.

Scene. A cup (``add_tool``) is fixed to the tool flange by a short bracket, its opening
along the flange's -y axis: at the start posture (the WAM's home posture with the wrist
pitched to j6 = -0.3768 rad and j7 = -pi/2) the flange points forward and the cup stands
upright in front of it, 1.65 m up. The cup is ``cup_mass`` kg (part of the arm's dynamics
and gravity compensation), ``cup_radius`` m inner radius and ``cup_depth`` m from the inner
bottom to the rim, built from a bottom disc, ``WALL_BOXES`` thin boxes around a circle (MuJoCo
has no hollow cylinder) and a rounded rim of as many capsules on top of them. A ball of
``ball_radius`` m and ``ball_mass`` kg hangs from a point 2 mm under the cup's bottom (the
"anchor") by a string of ``string_length`` m (anchor to ball centre), modelled one of two ways
(``string_model``):

* "chain" (the default): ``CHAIN_LINKS`` = 8 capsules of a 2 mm cotton cord (2.9 g/m, 1.2 g in
  all; sources at ``STRING_DENSITY``), each on a universal joint (two hinges: the string bends
  every way, it does not twist) on the one before, the first on the cup; the ball sits at the
  end of the last one on a slide joint along it, the string's stretch. The links collide with
  the cup (not with the arm, the ball or each other), so the string cannot pass through the cup:
  it drapes over the rim and lies along the wall (tested geometrically over the reference and
  perturbed swings). The ball turns with the last link.
* "tendon": a free ball and a massless straight MuJoCo tendon from the anchor to its centre,
  limited to [0, ``string_length``] m: about 4 times faster to simulate, but it passes through the
  cup's wall and bottom (in more than 50 of the reference swing's states each; tested).

Slack, the ball flies freely; taut, the string pulls it back like a spring of
``string_stiffness`` N/m (the cord's EA over its length) with a damper of ``string_dampratio``
times the critical damping of the ball on it, 2 sqrt(``string_stiffness`` ``ball_mass``) N s/m
(the chain's slide joint; the tendon's limit, MuJoCo's direct solref (-stiffness, -damping) per
kg of the ball), so a snapping string stretches a little and loses radial speed. A more elastic
string is a less stiff one: under the same pull it stretches further (hanging still, by
``ball_mass`` g / ``string_stiffness``; tested), and the two parameters are independent.

The real cord and what the step holds. Cotton fibre's initial modulus is 350 cN/tex and more
(Handbook of Properties of Textile and Technical Fibres, 2nd ed., 2018, ch. 7 section 7.8,
after Morton & Hearle, Physical Properties of Textile Fibres; intrinsic moduli of 5-13 GPa are
also reported): times cellulose's 1.54 g/cm^3, E >= 5.4 GPa; over the 2 mm cord's fibre
cross-section (0.6 pi (1 mm)^2 = 1.9 mm^2, ``STRING_DENSITY``'s packing) EA = ``STRING_EA`` =
10 kN, so k = EA / L = 25 kN/m for the 0.4 m string (1 N stretches it 0.04 mm). That is an upper
estimate, good to a factor of about 2-3: a twisted cord's fibres lie at the twist angle and slip
on one another, which makes it softer (by how much was not found measured for a cord like this).
The ball on the string alone, a spring stepped explicitly with its damper implicit (MuJoCo's
implicitfast), is stable at the 0.5 ms step while sqrt(k / m) dt < 2 zeta + 2 sqrt(1 + zeta^2):
up to 0.47 MN/m at zeta = 0.1, far above the cord. The chain holds less: a snap's tension (about
the radial speed times sqrt(k m), tens of N) bends each link against the next at a frequency that
grows with the tension and reaches what the step can follow. Measured at 0.5 ms (the reference
swing, a vigorous swing and 8 perturbed reference swings each): no instability at 200-5000 N/m
with damping ratios 0.25-2, nor at 10 and 25 kN/m with 0.5-2; but unstable simulations at 5 kN/m
with damping ratios 0.1 and 0.2, at 20 kN/m with 0.5, at 67 kN/m with 0.1 and 100 kN/m with 0.2
and 0.3 (a vigorous swing, or every swing). So the step cannot be trusted with the cord's own
stiffness: ``string_stiffness`` is at most ``STRING_STIFFNESS`` = 5 kN/m, its default, a factor of
4 below the first instability seen at a damping ratio within ``string_dampratio``'s range
[0.5, 2], and ``string_dampratio`` is at least 0.5, a factor of 2.5 above the first seen at
5 kN/m. The model's string is therefore more elastic than a cotton cord, by up to about 5 (a snap
stretches it about 2.2 times as far; the hanging ball stretches it 0.05 mm). The damping ratio's
default, 1 (a snap takes the ball's radial speed, as a cord's slack fibres do), is a choice: no
measured figure for a cord was found. The whole range is tested (stiffness 20 and 5000 N/m and
their geometric middle, damping ratios 0.5 and 2, on both string models).

Elastic allowance: with the default string the ball stretches it at most ``STRETCH_ALLOWANCE`` =
0.02 m (5 %) past its length in a vigorous swing and in the reference swing (tested; measured:
chain 1.6 and 1.2 mm, tendon 2.6 mm in both).

Contacts. The ball meets the cup (bottom, wall, rim and bracket) through explicit bouncing pairs
(``episodic.task.contact``) of restitution ``cup_restitution`` and friction ``cup_friction``,
calibrated at the task's physics step. A drop test on the cup's bottom measures 0.59 relative
to the cup at the default 0.60, and the stated value at 0.3 and 0.8 (tested; MuJoCo's default
contact gave 0.12). The defaults: a wooden ball on a hard surface, restitution 0.60 (The Physics
Factbook, G. Elert ed., "Coefficient of restitution": wooden ball on a hard floor) and friction
0.4 (wood on wood, clean and dry, 0.25-0.5: Marks' Standard Handbook for Mechanical Engineers).
How sure: the restitution is a compiled figure for an unspecified wooden ball and floor, good
to perhaps +-0.1; no measured figure was found for a wooden ball in a wooden (kendama,
bilboquet) or plastic cup, nor for a cup held in a hand or a gripper, and Kober & Peters'
papers, as far as they were found, give the toy's 40 cm string but neither the cup's material
nor its restitution. What was found around it: a ball's rebound off wood depends on the wood's
density and can be inelastic, with permanent dents (J. Soc. Mater. Sci. Japan 71(7), 603-607,
2022: balls dropped on wood species, filmed at high speed); croquet balls, once wooden, must
rebound from 60 in onto a steel plate to 30-45 in (US Croquet Association), e = 0.71-0.87, a
harder pair than wood on wood. The hand's or
gripper's compliance is modelled, not folded into the number: the cup is carried by the
PD-held arm and recoils (0.14 m/s in the drop test). Learning depends on this number (see the
learning table in docs/learning.md); it is a parameter, so a benchmark states the value it ran. The
ball hits the arm and the floor with MuJoCo's default contact; the cup and the arm never collide
with each other; the chain's links touch the cup with a stiff, critically damped contact and
friction 0.3 (cord on wood). Air (``contact.add_air``): 1.204 kg/m^3 and 1.81e-5 Pa s; the ball
has a smooth sphere's drag, C_D = 0.47, through MuJoCo's ellipsoid fluid model; the string's
links and the arm get MuJoCo's default (inertia-box) model of the same air.

Physics step. ``substeps`` = 4: 0.5 ms physics steps under the 500 Hz control (the controller's
reference ramps within each control step, see episodic/runtime/simulation.py). With the earlier, softer
string (0.67 kN/m) that was the fewest that converged: at 2 ms the chain was not stable (3 of 17
perturbed and vigorous swings ended in an unstable simulation), at 1 ms its peak stretch was
5.3 mm against 6.1 mm at a quarter of that step. At the default 5 kN/m, against 0.125 ms: the
string's peak stretch is 1.15 vs 1.62 mm in the reference swing and 1.59 vs 1.98 mm in the
vigorous one (a snap resolved to 20-30 %; 5-9 % at 0.67-2 kN/m, 17-26 % at 3-3.5 kN/m), within
the 0.6 mm tests/test_convergence.py allows; the tendon's 2.57 vs 2.94 mm. Where the ball ends
is not converged: a swing near the edge of the catch region ends differently at the two steps
(the reference swing catches at 0.5 ms, 4.336, and misses at 0.125 ms, 1.150; 4 of 8 swings
perturbed by 0.03 rad differ at 5 kN/m, 1 of 8 at 0.67 kN/m; the tendon's reference catches at
both, 4.359 and 4.357).

Other arms. The cup is bolted to any arm's flange as to the WAM's; another arm starts with the
rim's centre where the WAM's is, placed in the arm's frame (episodic.task.frame: relative to its
first joint and facing, scaled to its reach), the cup upright. The catching swing is the WAM's
cup path (``arm_swing_trajectory``): turned with the arm's facing, not scaled (the
string sets the swing), by inverse kinematics at every control step. The path cannot be slowed:
the ball's flight over the rim is set by gravity and the string. It moves the cup at up to 1.48
m/s while tilting it at 3.6 rad/s, which the WAM does with j4 at 69 % of its limit; ``needs``
refuses an arm whose joints that path would take past their velocity limits or range, with the
joint and the speed (the Panda, the UR5 and the Puma 560; benchmarks/ball_in_cup_arms.py finds
no placement of the path that any of them could follow within its limits).

Start state. After GOTO_START the ball hangs still below the anchor: at the anchor minus
``string_length`` along gravity, zero velocity. Context (command 0): nothing, or
(dx, dy) m, a horizontal offset of the ball from straight below the anchor with the string
kept taut (|(dx, dy)| < string_length), still at zero velocity.

State columns. ball_x, ball_y, ball_z m and ball_vx, ball_vy, ball_vz m/s (the ball's
centre, world frame); cup_x, cup_y, cup_z m: the rim centre (centre of the cup's opening);
distance m: ball centre to rim centre; height m: the ball centre above the rim plane along
the cup's axis (negative below the rim); radial m: the ball centre's distance from the
cup's axis; string m: the straight distance from the anchor to the ball's centre (the
string's length when it is taut and straight); caught: 1 when the ball is in the cup and at
rest, else 0. "In the cup": the ball's centre lies inside the
cup's inner cylinder (radial < cup_radius, between the inner bottom and the rim plane);
"at rest": its speed relative to the cup (the cup's velocity at the ball's centre) is below
``rest_speed`` m/s.

Rewards (Kober & Peters 2009, plus a catch bonus). A step's reward is
``exp(-CROSSING_ALPHA * radial**2)`` (CROSSING_ALPHA = 20 / m^2) when the ball's centre
crosses the rim plane going down during that step (radial measured at the crossing: 1 for a
ball dropping in on the axis, 0.82 at 0.1 m, 0.45 at 0.2 m, 0.04 at 0.4 m), plus
``CATCH_BONUS`` = 3 once per segment that catches the ball: at the step where it has been
caught for ``rest_time`` s without a break, or at the segment's last step if it is caught
there; no bonus when the ball was already caught as the segment began. Otherwise 0. The
segment ends early once the ball has been caught for ``rest_time`` s. The episode return is
the sum: 4 to 5.4 for a catch (a ball that bounces up over the rim and falls back in crosses
twice), below 2.3 for a ball that falls near the cup or bounces out of it, 0 for one that never
rises above the rim. Success: the episode ends with ``caught`` = 1, so a learner's last
segment should hold the cup still while the ball settles (about 1 s).

Ending early. Every reward is earned and none is negative, so an episode cut short (a crash, an
abort, a refused segment) is charged nothing (``worst_reward_rate`` and ``unplayed_return`` 0):
it forfeits what the rest would have earned and returns no more than the same episode completed
by holding still (holding still from the start returns 0; tests/test_early_end.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot, load_robot
from episodic.task import (
    Camera,
    Needs,
    Reference,
    StepView,
    Task,
    TaskError,
    add_frame_sensors,
    add_free_ball,
    choice,
    contact,
    param,
    place_free_ball,
)
from episodic.task.contract import BALL_COLUMNS
from episodic.task.frame import REFERENCE_ROBOT, RobotFrame, posture_along, reference_frame, tool_ik
from episodic.task.sl import SLMap

WALL_BOXES = 16          # boxes that make the cup's wall
WALL_THICKNESS = 0.004   # m
BOTTOM_THICKNESS = 0.006  # m
BRACKET_LENGTH = 0.02    # m, gap between the flange face and the cup's wall
# cup frame in the flange (link 7) frame: origin at the inner bottom centre, z along the
# cup's opening = the flange's -y axis (x rotated by +90 degrees)
CUP_QUAT = (np.sqrt(0.5), np.sqrt(0.5), 0.0, 0.0)
CUP_AXIS = np.array([0.0, 0.0, 1.0])  # the cup's opening in the frame of its sites (cup_rim, cup_anchor)
START_J6 = -0.3768  # rad, wrist pitch that makes the cup upright at the WAM's home posture
BALL_START = (0.766, 0.0, 1.136)  # m, hanging below the cup at home, before the first episode resets it

# -- the string --------------------------------------------------------------------------------
STRING_MODELS = ("chain", "tendon")
CHAIN_LINKS = 8  # capsules of the chain model, 50 mm each for the default 0.4 m string
# The string: a cotton cord of 2 mm diameter (the chain needs about that much thickness, see the
# end of this note; the example was a 1 mm string of ~1 g/m). Its linear density: cotton
# fibre (cellulose) 1.54 g/cm^3 (Morton & Hearle, Physical Properties of Textile Fibres, table of
# fibre densities) times a twisted cord's packing fraction of about 0.6 (Hearle, Grosberg &
# Backer, Structural Mechanics of Fibers, Yarns and Fabrics: 0.5-0.7) times pi (1 mm)^2: 2.9 g/m,
# 1.2 g for the 0.4 m string (5 % of the ball). (A 1 mm string, 0.7 g/m, was tried: the soft
# contact lets a link thrown against the rim at 4 m/s sink in by more than its 0.5 mm radius, and
# 2 of 26 perturbed swings pulled the string through the rim; with 1 mm, none.)
STRING_RADIUS = 0.001    # m
STRING_DENSITY = 2.9e-3  # kg/m
# Coulomb friction of the string on the cup: a cord on a wooden roller measured 0.28-0.31 by the
# capstan method (International Guild of Knot Tyers forum, "Measurement of the coefficient of
# friction for the capstan equation", 2021: paracord on pine).
STRING_FRICTION = 0.3
# The string's contact with the cup: as stiff as MuJoCo allows at the task's 0.5 ms step (time
# constant 1 ms = 2 steps), critically damped (a string does not bounce) and with a constant
# impedance of 0.995, so that a link sinks into the cup by a fraction of its radius.
STRING_CONTACT_SOLREF = (0.001, 1.0)
STRING_CONTACT_SOLIMP = (0.995, 0.995, 0.001, 0.5, 2.0)
# The string's bending joints: damping N m s/rad and armature kg m^2 per hinge. Not measured
# properties of a string: numerical regularisation. A link (145 mg, 50 mm) kinked between two
# joints under the string's tension T has a stiffness of about T x 50 mm and an inertia of about
# 4e-7 kg m^2: at the snap's 10-30 N it rings at 1-2 krad/s, near what a 0.5 ms step can follow
# (explicitly: the tension comes through the joints' inertial coupling). The armature (3e-7)
# slows that ringing and the damping (1e-4, implicit) takes its energy out. Measured at 0.5 ms:
# no instability in 16 swings perturbed by 0.06 rad and a vigorous swing (with 2e-5 and no
# armature on a 1 mm string, 4 of 8 swings blew up). They cost the hanging ball's swing little:
# it decays with 1/e in 2 x 3.9e-3 kg m^2 / 1e-4 = 78 s, its period changes by 0.004 %.
STRING_BEND_DAMPING = 1e-4
STRING_BEND_ARMATURE = 3e-7
# The string's stretch (module docstring): the cotton cord's EA, N (an upper estimate), and what
# the chain holds at the 0.5 ms step, the stiffest value held with a margin (measured), N/m; the
# damping ratio's range, where that stiffness is held (not a measured property of a cord)
STRING_EA = 10.2e3
STRING_STIFFNESS = 5000.0
STRING_STIFFNESS_RANGE = (20.0, STRING_STIFFNESS)
STRING_DAMPRATIO = 1.0
STRING_DAMPRATIO_RANGE = (0.5, 2.0)


def string_stiffness_param():
    """The declaration of a chain string's ``string_stiffness`` N/m (ball_in_cup, casting)."""
    return param(STRING_STIFFNESS, "N/m", "axial stiffness of the taut string (EA / its length: the pull per "
                 "metre of stretch); lower is more elastic", ge=STRING_STIFFNESS_RANGE[0], le=STRING_STIFFNESS_RANGE[1])


def string_dampratio_param():
    """The declaration of a chain string's ``string_dampratio`` (ball_in_cup, casting)."""
    return param(STRING_DAMPRATIO, "", "damping ratio of the ball bouncing on the taut string: damping "
                 "2 string_dampratio sqrt(string_stiffness ball_mass)",
                 ge=STRING_DAMPRATIO_RANGE[0], le=STRING_DAMPRATIO_RANGE[1])
# geom bitmasks: the ball collides with the arm and the floor by contype/conaffinity, with the cup
# only through explicit bouncing pairs; the string's links collide with the cup only
BALL_BITS = dict(contype=1, conaffinity=1)
CUP_BITS = dict(contype=2, conaffinity=1 | 4)
STRING_BITS = dict(contype=4, conaffinity=0)
# the anchor: the string's end under the cup's bottom, one string diameter below it, so that the
# first link can turn up against the bottom without starting in contact with it
ANCHOR_GAP = 2 * STRING_RADIUS
# the ball on the cup: the defaults of cup_restitution and cup_friction (a wooden ball on a hard
# surface: restitution 0.60, friction 0.4; sources in contact.py and the module docstring)
CUP_MATERIAL = contact.MATERIALS["wooden_ball_on_cup"]


# -- the swing (episodic.tasks.ball_in_cup_swing builds its episodes) --------------------------------
SWING_JOINTS = (1, 3, 5)  # j2 (shoulder pitch), j4 (elbow), j6 (wrist pitch)


@dataclass(frozen=True)
class Swing:
    """Knot k (k = 1..K) of j2, j4, j6 at time k * ``step`` s: ``knots`` (K, 3) rad, absolute
    joint positions; the last knot is the catch posture. The swing starts at rest at the
    start posture at t = 0 and ends at rest at the last knot."""

    step: float
    knots: np.ndarray

    @property
    def duration(self) -> float:
        """s from the start posture to the last knot."""
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


def swing_trajectory(start: np.ndarray, swing: Swing, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, qd, qdd (n, n_dofs) of ``swing`` from posture ``start`` sampled every dt s
    (t = dt .. duration)."""
    from scipy.interpolate import CubicSpline  # SciPy's interpolators take a second to import: only here

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


def cup_path(swing: Swing, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """The rim's centre (n + 1, 3) m and the cup's axis (n + 1, 3) in the world as the WAM moves
    them through ``swing`` from its start posture, at t = 0, dt, ..., the swing's duration."""
    wam, task = load_robot(REFERENCE_ROBOT), BallInCup()
    ik = tool_ik(wam, task.add_tool, "cup_rim")
    start = task.start_posture(wam)
    poses = [ik.pose(q, CUP_AXIS) for q in np.vstack([start, swing_trajectory(start, swing, dt)[0]])]
    return np.array([rim for rim, _ in poses]), np.array([axis for _, axis in poses])


def arm_swing_trajectory(robot: Robot, swing: Swing, offset: np.ndarray | None = None, turn: float = 0.0,
                         dt: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, qd, qdd (n, n_dofs) of ``swing`` on an arm other than the WAM, t = dt .. duration (dt s,
    the robot's control period unless given): the cup's path as the WAM moves it (``cup_path``), its start placed in
    the arm's frame (the task's start posture) and the path turned with the arm's facing but not
    scaled (the string's length sets the swing), followed by inverse kinematics of the rim's centre
    and the cup's axis at every control step from the posture of the step before; qd and qdd by
    central differences. ``offset`` (3,) m, along the arm's facing, sideways and up, moves the
    path's start and ``turn`` rad turns the path about the vertical (other placements, tried by
    benchmarks/ball_in_cup_arms.py); the start posture is then reached from the arm's home as the
    task's is. ValueError when the arm cannot follow the path."""
    dt, frame, task = robot.control_dt if dt is None else dt, RobotFrame.of(robot), BallInCup()
    rims, axes = cup_path(swing, dt)
    ik = tool_ik(robot, task.add_tool, "cup_rim")
    c, s = np.cos(turn), np.sin(turn)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ frame.rotation @ reference_frame().rotation.T
    if offset is None and turn == 0.0:
        postures = [task.start_posture(robot)]
    else:
        start = frame.from_wam(rims[0]) + frame.rotation @ (np.zeros(3) if offset is None else offset)
        posture, error = posture_along(ik, robot.home, start, rotation @ axes[0], axis=CUP_AXIS)
        if error > 1e-6:
            raise ValueError(f"'{robot.name}' cannot hold the cup upright at {np.round(start, 3).tolist()} m")
        postures = [posture]
    start = ik.pose(postures[0], CUP_AXIS)[0]
    for rim, axis in zip(rims[1:], axes[1:]):
        q, error = ik.solve(postures[-1], start + rotation @ (rim - rims[0]), rotation @ axis, tolerance=1e-10,
                            axis=CUP_AXIS)
        if error > 1e-6:
            stuck = [name for name, a, low, high in zip(robot.joint_names, q, robot.range_lower, robot.range_upper)
                     if np.isclose(a, low) or np.isclose(a, high)]
            raise ValueError(f"'{robot.name}' cannot follow the cup's path: at {len(postures) * dt:.3f} s of the "
                             f"swing its inverse kinematics is {error:.2g} off"
                             + (f", {' and '.join(stuck)} at the end of its range" if stuck else ""))
        postures.append(q)
    q = np.array(postures)
    qd = np.gradient(q, dt, axis=0)
    return q[1:], qd[1:], np.gradient(qd, dt, axis=0)[1:]


_UNFOLLOWED: dict[tuple[str, str], str] = {}  # why a robot cannot swing the cup (_swing_unfollowed), by model
# s between the points of the swing's path the robot check follows (5 control periods: a fifth of
# the inverse kinematics, for `episodic tasks`; the reference follows every control period)
NEEDS_STEP = 0.01


def _swing_unfollowed(robot: Robot) -> str:
    """Why ``robot`` cannot move the cup along the reference swing's path ("" when it can: the WAM
    at once; another arm by the swing's inverse kinematics in its frame every NEEDS_STEP s,
    ``arm_swing_trajectory``, within its joint velocity limits; once per robot model)."""
    if RobotFrame.of(robot).is_reference():
        return ""
    key = (robot.name, robot.sha256)
    if key not in _UNFOLLOWED:
        rims, axes = cup_path(REFERENCE_SWING, robot.control_dt)
        speed = float(np.max(np.linalg.norm(np.gradient(rims, robot.control_dt, axis=0), axis=1)))
        tilt = float(np.max(np.linalg.norm(np.gradient(axes, robot.control_dt, axis=0), axis=1)))
        path = f"the WAM's catching swing (the cup at up to {speed:.2f} m/s, tilting at up to {tilt:.1f} rad/s)"
        try:
            _, qd, _ = arm_swing_trajectory(robot, REFERENCE_SWING, dt=NEEDS_STEP)
        except (TaskError, ValueError) as error:
            _UNFOLLOWED[key] = f"cannot move the cup along {path}: {error}"
        else:
            share = np.max(np.abs(qd), axis=0) / robot.velocity_limit
            joint = int(np.argmax(share))
            _UNFOLLOWED[key] = "" if share[joint] <= 1 else (
                f"would need {robot.joint_names[joint]} at {np.max(np.abs(qd[:, joint])):.1f} rad/s to move the "
                f"cup along {path}; its limit is {robot.velocity_limit[joint]:g}")
    return _UNFOLLOWED[key]


@dataclass
class BallInCup(Task):
    name: ClassVar[str] = "ball_in_cup"
    reference: ClassVar[Reference | None] = Reference(  # examples/ball_in_cup_reference.py
        "examples.ball_in_cup_reference:reference_commands",
        return_tolerance=0.1,  # a catch is 4-5.4, a miss below 2.3
        learner="examples.learning.ball_in_cup",
        not_converged="the 5 kN/m string's outcome depends on the step (tests/test_convergence.py)",
    )
    summary: ClassVar[str] = "swing a ball on an elastic string up and catch it in a cup on the hand."
    needs: ClassVar[Needs] = Needs(dofs=6, placed=_swing_unfollowed,  # the cup's place and axis: 5 constraints
                                   placed_doc="joints fast enough to move the cup along the WAM's catching swing")
    camera: ClassVar[Camera] = {"azimuth": 120, "elevation": -10}  # deg; episodic render frames the rest
    sl: ClassVar[SLMap] = SLMap(  # SL's ball-in-a-cup start values: only the ball hanging straight down is modelled
        ("ball angle x rad", "ball angle y rad", "ball angular velocity x rad/s", "ball angular velocity y rad/s"),
        states=tuple(BALL_COLUMNS) + ("cup_x", "cup_y", "cup_z"))
    columns: ClassVar[tuple[str, ...]] = (
        "ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz",
        "cup_x", "cup_y", "cup_z", "distance", "height", "radial", "string", "caught")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {**BALL_COLUMNS,
        "cup_x": ("m", "the rim centre's x (world frame)"), "cup_y": ("m", "the rim centre's y (world frame)"),
        "cup_z": ("m", "the rim centre's z (world frame)"), "distance": ("m", "ball centre to rim centre"),
        "height": ("m", "ball centre above the rim plane (negative below)"),
        "radial": ("m", "ball centre from the cup's axis"),
        "string": ("m", "anchor to ball centre (the string's length when taut)"),
        "caught": ("", "1 while the ball is in the cup at rest")}
    reward_doc: ClassVar[str] = (
        "exp(-20 radial^2) as the ball falls through the rim plane, +3 once it has rested in the cup; else 0")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 2)
    context_help: ClassVar[str] = ("no context (ball hanging straight down), or a horizontal ball "
                                   "offset (dx, dy) m with the string taut")
    substeps: ClassVar[int] = 4  # 0.5 ms physics steps at 500 Hz: the string and the bounces converge
    CROSSING_ALPHA: ClassVar[float] = 20.0  # 1/m^2, width of the rim-crossing reward
    CATCH_BONUS: ClassVar[float] = 3.0
    STRETCH_ALLOWANCE: ClassVar[float] = 0.02  # m, for the default string (tested)

    string_model: str = choice("chain", STRING_MODELS, "chain: 8 jointed capsules with the string's mass that "
                               "collide with the cup; tendon: a massless straight tendon that passes through "
                               "the cup (faster)")
    string_length: float = param(0.40, "m", "anchor to ball centre when taut (the anchor is 1.54 m above "
                                 "the floor at the start on the WAM)", gt=0, le=1.5)
    string_stiffness: float = string_stiffness_param()
    string_dampratio: float = string_dampratio_param()
    ball_radius: float = param(0.02, "m", gt=0)
    ball_mass: float = param(0.024, "kg", gt=0)
    cup_radius: float = param(0.045, "m", "inner radius, larger than ball_radius", gt=0)
    cup_depth: float = param(0.10, "m", "inner bottom to rim", gt=0)
    cup_mass: float = param(0.1, "kg", "cup and bracket", gt=0)
    cup_restitution: float = param(CUP_MATERIAL.restitution, "", "the ball's coefficient of restitution on the "
                                   "cup (bottom, wall, rim, bracket): rebound / impact speed, head-on", ge=0, le=0.9)
    cup_friction: float = param(CUP_MATERIAL.friction, "", "Coulomb friction coefficient of the ball on the cup",
                                ge=0, le=1.5)
    rest_speed: float = param(0.1, "m/s", "'at rest' below this speed relative to the cup", gt=0)
    rest_time: float = param(0.2, "s", "caught this long ends the segment with the bonus", ge=0)
    air: str = contact.air_choice()

    def check_params(self) -> None:
        if not self.cup_radius > self.ball_radius:
            raise TaskError(f"parameter 'cup_radius' of task 'ball_in_cup' must be larger than ball_radius, "
                            f"got {self.cup_radius}")
        if not self.cup_depth > WALL_THICKNESS:
            raise TaskError(f"parameter 'cup_depth' of task 'ball_in_cup' must be larger than the wall's "
                            f"thickness {WALL_THICKNESS} m (the rounded rim sits on the wall), got {self.cup_depth}")

    # -- scene ---------------------------------------------------------------
    @property
    def outer_radius(self) -> float:
        return self.cup_radius + WALL_THICKNESS

    @property
    def chain(self) -> bool:
        return self.string_model == "chain"

    def cup_offset(self) -> np.ndarray:
        """Cup frame origin (inner bottom centre) in the flange frame, m."""
        return np.array([0.0, 0.0, BRACKET_LENGTH + self.outer_radius])

    def cup_geoms(self) -> list[str]:
        """The names of the cup's geoms: bottom, wall boxes, rim capsules, bracket."""
        around = [f"cup_wall{k}" for k in range(WALL_BOXES)] + [f"cup_rim{k}" for k in range(WALL_BOXES)]
        return ["cup_bottom"] + around + ["cup_bracket"]

    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        flange = spec.site(robot.end_effector_site)
        parent = flange.parent
        cup = parent.add_body(name="cup", pos=np.asarray(flange.pos) + self.cup_offset(), quat=CUP_QUAT)
        cup.gravcomp = 1.0  # part of the arm: the controller compensates its weight
        R, H, t, w = self.cup_radius, self.cup_depth, BOTTOM_THICKNESS, WALL_THICKNESS
        Ro = R + w
        look = dict(condim=3, rgba=[0.85, 0.55, 0.2, 1.0], solref=list(STRING_CONTACT_SOLREF),
                    solimp=list(STRING_CONTACT_SOLIMP), friction=[STRING_FRICTION, 0.005, 0.0001], **CUP_BITS)
        cup.add_geom(name="cup_bottom", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[Ro, t / 2, 0],
                     pos=[0, 0, -t / 2], **look)
        half_width = Ro * np.tan(np.pi / WALL_BOXES) + 1e-4
        rim = H - w / 2  # the wall boxes end here; a rounded rim of capsules lies on them up to H
        for k in range(WALL_BOXES):
            phi = 2 * np.pi * k / WALL_BOXES
            centre = (R + w / 2) * np.array([np.cos(phi), np.sin(phi)])
            cup.add_geom(name=f"cup_wall{k}", type=mujoco.mjtGeom.mjGEOM_BOX,
                         size=[w / 2, half_width, (rim + t) / 2], pos=[*centre, (rim - t) / 2],
                         quat=[np.cos(phi / 2), 0, 0, np.sin(phi / 2)], **look)
            # the rim along the wall box's top: capsules of the wall's thickness, meeting at the
            # polygon's corners. (MuJoCo's capsule-box collision misses a thin capsule whose axis
            # cuts through a box's edge, which a string pulled over a box rim soon does;
            # capsule-capsule contacts are exact.)
            along = (R + w / 2) * np.tan(np.pi / WALL_BOXES) * np.array([-np.sin(phi), np.cos(phi)])
            cup.add_geom(name=f"cup_rim{k}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[w / 2, 0, 0],
                         fromto=[*(centre - along), rim, *(centre + along), rim], **look)
        # bracket from the flange face to the cup's wall, along the cup's -y (the flange's -z)
        cup.add_geom(name="cup_bracket", type=mujoco.mjtGeom.mjGEOM_BOX,
                     size=[0.012, (BRACKET_LENGTH + w) / 2, 0.012],
                     pos=[0, -(Ro + BRACKET_LENGTH - (BRACKET_LENGTH + w) / 2), 0.012 - t], **look)
        cup.add_site(name="cup_anchor", pos=[0, 0, -t - ANCHOR_GAP], size=[0.004, 0, 0])
        cup.add_site(name="cup_rim", pos=[0, 0, H], size=[0.004, 0, 0])
        mass, com, inertia = self._cup_inertia()
        cup.explicitinertial = True
        cup.mass, cup.ipos, cup.iquat, cup.inertia = mass, com, [1.0, 0.0, 0.0, 0.0], inertia

    def _cup_inertia(self) -> tuple[float, np.ndarray, np.ndarray]:
        """Mass kg, centre of mass m and principal inertia kg m^2 (cup frame) of a thin-walled
        cup: wall and bottom share ``cup_mass`` by area (the bracket is counted in the wall)."""
        R, H, t = self.cup_radius + WALL_THICKNESS / 2, self.cup_depth, BOTTOM_THICKNESS
        area_wall, area_bottom = 2 * np.pi * R * H, np.pi * R**2
        m_w = self.cup_mass * area_wall / (area_wall + area_bottom)
        m_b = self.cup_mass - m_w
        z_w, z_b = H / 2, -t / 2
        z = (m_w * z_w + m_b * z_b) / self.cup_mass
        izz = m_w * R**2 + m_b * R**2 / 2
        ixx = (m_w * (R**2 / 2 + H**2 / 12) + m_w * (z_w - z) ** 2
               + m_b * (R**2 / 4 + t**2 / 12) + m_b * (z_b - z) ** 2)
        return self.cup_mass, np.array([0.0, 0.0, z]), np.array([ixx, ixx, izz])

    def string_damping(self) -> float:
        """N s/m, the taut string's damping: string_dampratio times the critical damping of the
        ball on a spring of string_stiffness, 2 sqrt(string_stiffness ball_mass)."""
        return 2 * self.string_dampratio * float(np.sqrt(self.string_stiffness * self.ball_mass))

    def link_length(self) -> float:
        """Length m of each of the chain's links."""
        return self.string_length / CHAIN_LINKS

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        if self.chain:
            self._add_chain(spec)
        else:
            self._add_tendon(spec)
        timestep = spec.option.timestep
        spec.add_exclude(bodyname1="cup", bodyname2="ball")  # the pairs below replace that contact
        for geom in self.cup_geoms():
            contact.add_bouncing_pair(spec, "ball", geom, self.cup_restitution, self.cup_friction, timestep,
                                      name=f"ball/{geom}")
        contact.add_air(spec, ["ball"], mode=self.air)
        add_frame_sensors(spec, "bic_ball", mujoco.mjtObj.mjOBJ_XBODY, "ball")
        add_frame_sensors(spec, "bic_rim", mujoco.mjtObj.mjOBJ_SITE, "cup_rim")
        rim = dict(objtype=mujoco.mjtObj.mjOBJ_SITE, objname="cup_rim")
        spec.add_sensor(name="bic_cup_angvel", type=mujoco.mjtSensor.mjSENS_FRAMEANGVEL, **rim)
        spec.add_sensor(name="bic_cup_axis", type=mujoco.mjtSensor.mjSENS_FRAMEZAXIS, **rim)
        spec.add_sensor(name="bic_string", type=mujoco.mjtSensor.mjSENS_TENDONPOS,
                        objtype=mujoco.mjtObj.mjOBJ_TENDON, objname="string")

    def _ball_geom(self) -> dict:
        return dict(condim=3, friction=[CUP_MATERIAL.friction, 0.005, 0.0001],
                    rgba=[0.9, 0.15, 0.15, 1.0], **BALL_BITS)

    def _add_tendon(self, spec: mujoco.MjSpec) -> None:
        """A free ball and a straight spatial tendon from the anchor to its centre, limited to
        string_length: stiff when taut, nothing when slack, through any geometry."""
        ball = add_free_ball(spec, "ball", list(BALL_START), self.ball_radius, self.ball_mass, **self._ball_geom())
        ball.add_site(name="ball_centre", size=[0.004, 0, 0])
        string = spec.add_tendon(name="string", limited=mujoco.mjtLimited.mjLIMITED_TRUE,
                                 range=[0.0, self.string_length], width=STRING_RADIUS,
                                 rgba=[0.9, 0.9, 0.85, 1.0])
        # MuJoCo's direct solref (-stiffness, -damping) of the limit, per unit of the ball's mass
        string.solref_limit = [-self.string_stiffness / self.ball_mass, -self.string_damping() / self.ball_mass]
        string.solimp_limit = [0.95, 0.99, 0.001, 0.5, 2.0]
        string.wrap_site("cup_anchor")
        string.wrap_site("ball_centre")

    def _add_chain(self, spec: mujoco.MjSpec) -> None:
        """CHAIN_LINKS capsules from the anchor, each on a universal joint (two hinges) on the one
        before (the first on the cup), and the ball at the last one's end on a slide joint along
        it: the string's stretch, a spring of string_stiffness N/m and a damper of
        string_damping() N s/m, as the tendon's limit. The links have the string's mass and
        collide with the cup (not with the ball, the arm or each other); at rest (joints at zero)
        the chain hangs straight down the cup's -z."""
        cup = spec.body("cup")
        ell, r = self.link_length(), STRING_RADIUS
        m_link = STRING_DENSITY * ell
        free = dict(limited=mujoco.mjtLimited.mjLIMITED_FALSE, actfrclimited=mujoco.mjtLimited.mjLIMITED_FALSE)
        parent, pos = cup, spec.site("cup_anchor").pos
        for i in range(CHAIN_LINKS):
            link = parent.add_body(name=f"string{i}", pos=pos)
            for axis in "xy":  # a universal joint: the string bends every way but does not twist
                link.add_joint(name=f"string{i}_{axis}", type=mujoco.mjtJoint.mjJNT_HINGE,
                               axis=[1.0, 0.0, 0.0] if axis == "x" else [0.0, 1.0, 0.0],
                               damping=STRING_BEND_DAMPING, armature=STRING_BEND_ARMATURE, **free)
            link.explicitinertial = True  # a thin rod
            link.mass, link.ipos, link.iquat = m_link, [0.0, 0.0, -ell / 2], [1.0, 0.0, 0.0, 0.0]
            link.inertia = [m_link * (ell**2 / 12 + r**2 / 4)] * 2 + [m_link * r**2 / 2]
            link.add_geom(name=f"string{i}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[0, 0, 0, 0, 0, -ell],
                          size=[r, 0, 0], condim=3, friction=[STRING_FRICTION, 0.005, 0.0001],
                          solref=list(STRING_CONTACT_SOLREF), solimp=list(STRING_CONTACT_SOLIMP),
                          rgba=[0.9, 0.9, 0.85, 1.0], **STRING_BITS)
            parent, pos = link, [0.0, 0.0, -ell]
        # the first link hangs from the cup: MuJoCo leaves parent and child out of its automatic
        # collisions, so its contact with the cup's bottom is an explicit pair
        spec.add_pair(name="string0/cup_bottom", geomname1="string0", geomname2="cup_bottom", condim=3,
                      friction=[STRING_FRICTION, STRING_FRICTION, 0.005, 0.0001, 0.0001],
                      solref=list(STRING_CONTACT_SOLREF), solimp=list(STRING_CONTACT_SOLIMP))
        ball = parent.add_body(name="ball", pos=pos)
        m = self.ball_mass
        ball.add_joint(name="string_stretch", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[0, 0, -1],
                       stiffness=self.string_stiffness, damping=self.string_damping(), **free)
        ball.explicitinertial = True
        ball.mass, ball.ipos, ball.iquat = m, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
        ball.inertia = [0.4 * m * self.ball_radius**2] * 3
        ball.add_geom(name="ball", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[self.ball_radius, 0, 0],
                      **self._ball_geom())
        ball.add_site(name="ball_centre", size=[0.004, 0, 0])
        # the straight distance from the anchor to the ball's centre, for the "string" column
        string = spec.add_tendon(name="string", width=STRING_RADIUS, rgba=[0.0, 0.0, 0.0, 0.0])
        string.wrap_site("cup_anchor")
        string.wrap_site("ball_centre")

    # -- start ---------------------------------------------------------------
    def start_posture(self, robot: Robot) -> np.ndarray:
        """On the WAM the home posture with the wrist pitched so that the cup's axis is vertical.
        On another arm the posture that puts the rim's centre where the WAM's is there, placed in
        the arm's frame (episodic.task.frame), the cup upright, reached from the arm's home along a
        straight line (episodic.task.frame.posture_along)."""
        q = robot.home.copy()
        frame = RobotFrame.of(robot)
        if frame.is_reference():
            q[5], q[6] = START_J6, -np.pi / 2
            return q
        wam = load_robot(REFERENCE_ROBOT)
        rim, up = tool_ik(wam, self.add_tool, "cup_rim").pose(self.start_posture(wam), CUP_AXIS)
        q, error = posture_along(tool_ik(robot, self.add_tool, "cup_rim"), q, frame.from_wam(rim),
                                 frame.direction_from_wam(up), axis=CUP_AXIS)
        if error > 1e-6:
            raise TaskError(f"ball_in_cup cannot hold the cup upright where it is placed on '{robot.name}' "
                            f"(inverse kinematics error {error:.2g}); choose an arm that reaches it")
        return q

    def default_context(self) -> np.ndarray:
        """No offset: the ball hangs straight down."""
        return np.zeros(2)

    def initialize_episode(self, model, data, context, rng) -> None:
        offset = context  # (dx, dy) m
        if not np.hypot(*offset) < self.string_length:
            raise TaskError(f"ball offset {np.round(offset, 4).tolist()} m must be shorter than the "
                            f"string ({self.string_length} m)")
        ids = self.episode.ids
        mujoco.mj_kinematics(model, data)
        anchor = data.site_xpos[ids.site["cup_anchor"]]
        down = np.asarray(model.opt.gravity, float)
        down = down / np.linalg.norm(down)
        # horizontal offset (dx, dy) in the plane normal to gravity (world x, y for -z gravity)
        ex = np.array([1.0, 0.0, 0.0]) - down * down[0]
        ex /= np.linalg.norm(ex)
        ey = np.cross(down, ex) * -1.0
        drop = np.sqrt(self.string_length**2 - offset @ offset)
        ball = anchor + drop * down + offset[0] * ex + offset[1] * ey
        if not self.chain:
            place_free_ball(data, ids, "ball", ball)
            return
        # the chain straight from the anchor to the ball, everything at rest, the string unstretched
        for name in self.string_joints():
            data.qpos[ids.qpos[name]] = data.qvel[ids.dof[name]] = 0.0
        # the first link's direction u in the cup's frame: R_x(a) R_y(b) (0, 0, -1)
        u = data.xmat[ids.body["cup"]].reshape(3, 3).T @ (ball - anchor)
        u /= np.linalg.norm(u)
        data.qpos[ids.qpos["string0_x"]] = np.arctan2(u[1], -u[2])
        data.qpos[ids.qpos["string0_y"]] = -np.arcsin(np.clip(u[0], -1.0, 1.0))
        # the ball at rest although the arm may still move a little (within the start tolerance):
        # the first link turns and the string stretches against the cup's motion
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        jac = np.zeros((3, model.nv))
        mujoco.mj_jacBody(model, data, jac, None, ids.body["ball"])
        own = [ids.dof["string0_x"], ids.dof["string0_y"], ids.dof["string_stretch"]]
        data.qvel[own] = np.linalg.solve(jac[:, own], -jac @ data.qvel)

    def string_joints(self) -> list[str]:
        """The chain model's joints: each link's two bending hinges, then the stretch."""
        return [f"string{i}_{axis}" for i in range(CHAIN_LINKS) for axis in "xy"] + ["string_stretch"]

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        ball, ball_v = steps.sensor("bic_ball_pos"), steps.sensor("bic_ball_vel")
        rim, axis = steps.sensor("bic_rim_pos"), steps.sensor("bic_cup_axis")
        string = steps.sensor("bic_string")[:, 0]
        rel = ball - rim
        height = np.sum(rel * axis, axis=1)
        radial = np.linalg.norm(rel - height[:, None] * axis, axis=1)
        distance = np.linalg.norm(rel, axis=1)
        speed = np.linalg.norm(self._relative_velocity(steps, rel), axis=1)
        inside = (radial < self.cup_radius) & (height < 0) & (height > -self.cup_depth)
        caught = (inside & (speed < self.rest_speed)).astype(float)
        return np.column_stack([ball, ball_v, rim, distance, height, radial, string, caught])

    @staticmethod
    def _relative_velocity(steps: StepView, rel: np.ndarray) -> np.ndarray:
        """The ball's velocity (n, 3) m/s relative to the cup's point where the ball is."""
        cup_v = steps.sensor("bic_rim_vel") + np.cross(steps.sensor("bic_cup_angvel"), rel)
        return steps.sensor("bic_ball_vel") - cup_v

    def _crossing(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        """Reward of each step for the ball's centre crossing the rim plane downward during it
        (its height one step earlier estimated from the relative velocity along the axis)."""
        rel = state[:, 0:3] - state[:, 6:9]
        axial_v = np.sum(self._relative_velocity(steps, rel) * steps.sensor("bic_cup_axis"), axis=1)
        height = state[:, 10]
        crossed = (height <= 0) & (height - axial_v * steps.dt > 0)
        return np.where(crossed, np.exp(-self.CROSSING_ALPHA * state[:, 11] ** 2), 0.0)

    def _rest_step(self, steps: StepView, state: np.ndarray) -> int | None:
        """Index of the first step at which the ball has been caught for rest_time s, or None."""
        need = max(int(round(self.rest_time / steps.dt)), 1)
        caught = state[:, 13] > 0.5
        if caught.sum() < need:
            return None
        # length of the run of caught steps ending at each step
        idx = np.arange(len(caught))
        last_miss = np.maximum.accumulate(np.where(caught, -1, idx))
        hits = np.flatnonzero(idx - last_miss >= need)
        return int(hits[0]) if hits.size else None

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        reward = self._crossing(steps, state)
        caught = state[:, 13] > 0.5
        if len(caught) and not caught[0]:  # a catch in this segment, not one carried over
            rest = self._rest_step(steps, state)
            if rest is None and caught[-1]:
                rest = len(caught) - 1
            if rest is not None:
                reward[rest] += self.CATCH_BONUS
        return reward

    def segment_end(self, steps: StepView, state: np.ndarray) -> int | None:
        rest = self._rest_step(steps, state)
        return None if rest is None else rest + 1

    def success(self, state: np.ndarray) -> bool:
        return bool(state[13] > 0.5)
