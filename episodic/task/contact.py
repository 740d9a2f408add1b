"""Bouncing ball contacts and air drag, from stated physical values.

MuJoCo's default contact is nearly inelastic: a ball dropped on a fixed surface does not rebound
at all (tested), into a cup carried by the arm with a restitution of about 0.13 (design.md). A
ball that should bounce like a real one gets an explicit contact pair (:func:`add_bouncing_pair`)
with

* a normal direction that is a linear, mass-normalised spring-damper (MuJoCo's direct solref
  (-stiffness 1/s^2, -damping 1/s), at full impedance 1 mm in, :data:`BALL_SOLIMP`): natural
  frequency :data:`CONTACT_OMEGA` and the damping that rebounds with the wanted restitution at the
  model's physics timestep (:func:`solref_for_restitution`, calibrated below);
* Coulomb friction that acts during the impact and leaves the normal rebound alone
  (:func:`use_coulomb_friction`, :func:`friction_solref`): a ball hitting a surface obliquely
  leaves it rolling (v_t' = 5/7 v_t for a solid sphere) or, at grazing angles, sliding with the
  Coulomb impulse mu (1 + e) m v_n taken off, as rigid-body impulse theory says, and rebounds
  normally with its restitution at any angle (tests/test_contact.py sweeps v_t/v_n from 0 to 3;
  benchmarks/restitution.py prints the sweep for every task's pairs).

Why friction needs more than a cone. MuJoCo solves a contact's normal and friction forces
together, each soft (a regulariser R per row, a reference acceleration -b v - k x). While the ball
slides, the unconstrained solution lies outside the elliptic friction cone and the solver returns
its projection onto the cone in the metric A + R (MuJoCo documentation, Computation, "Friction
cones" and "Parameters"); for a ball on a flat that gives the normal row the force (D_n + mu D_t)
/ (A_nn + R_n + mu^2 (A_tt + R_t)), D_n and D_t the rows' reference accelerations (derived here;
MuJoCo's efc_force agrees: 28.4 N against 28.2 N at the first step of a tennis ball hitting at
v_t/v_n = 3, where the spring-damper alone asks for 9.3 N): the friction row's wish to stop the
slip, D_t = b_f v_t, feeds the normal force. Early in an impact, where the spring is barely
compressed, that is several times the spring-damper's force (3x for a tennis ball at v_t/v_n =
3), a push the spring never stores; so a sliding impact rebounds with a restitution that depends
on the angle and the friction: 0.80-0.86 instead of 0.90 for the beer-pong table, 0.58 instead of
0.75 for the tennis ball at v_t/v_n = 3, 0.57 instead of 0.40 for the beer-pong cup (the first
commit of benchmarks/restitution.py). Real Coulomb friction does not change the normal force of
a sliding contact: the normal and tangential problems of an elastic sphere's impact uncouple when
Dundurs' constant beta vanishes (elastically similar bodies, or a nearly incompressible rubber
ball on a rigid surface) and nearly so otherwise (Johnson, Contact Mechanics, 1985, ch. 7; Maw,
Barber & Fawcett, "The oblique impact of elastic spheres", Wear 38, 101 (1976)). So the pairs
split the two, as MuJoCo's options allow (model-wide, :func:`use_coulomb_friction`):

* the friction rows are made so soft in the main solve (``impratio`` :data:`FRICTION_IMPRATIO`:
  R_t = R_n / impratio) that their force stays inside the cone: the normal force is the
  calibrated spring-damper's, whatever the slip;
* MuJoCo's ``noslip`` pass (:data:`NOSLIP_ITERATIONS` sweeps) then re-solves the friction rows
  alone as hard constraints (R = 0) inside the cone of the normal force just found: Coulomb's law
  applied step by step, the friction that stops the slip at the rate of ``solreffriction``
  (:func:`friction_solref`) when the cone allows it, mu times the normal force against the slip
  otherwise.

What that costs: the noslip pass runs at every step that has a contact or a joint with dry
friction (the WAM's ``frictionloss``, which it also makes hard), and every contact of the model,
not only the ball's, gets its friction from it.

Calibration (tests/test_contact.py drops balls in MuJoCo and checks each number here). The
damping ratio of a linear spring-damper that ends its half cycle with speed ratio e is
z0 = -ln e / sqrt(pi^2 + ln^2 e). MuJoCo rebounds differently in two ways:

1. The contact lets go when its force would pull (the damping force exceeds the spring's),
   before the spring is back at zero length, so a given damping loses less energy than the
   formula says.
2. It steps the spring-damper at the timestep dt (semi-implicit Euler, omega dt up to 0.6) and
   the first step in contact starts at a depth anywhere between 0 and v dt, so a bounce depends
   on where the impact falls between two steps: at 2 ms and omega = 300 rad/s one bounce's
   restitution lies within -0.02 / +0.03 of the mean at e = 0.86, -0.02 / +0.07 at 0.75 and
   -0.05 / +0.10 at 0.6; at 0.5 ms within +-0.02.

:func:`solref_for_restitution` therefore solves for the damping ratio at which MuJoCo's discrete
update (:func:`discrete_restitution`: the same update, unilateral, averaged over where the impact
falls within a step) rebounds with the wanted mean restitution. The correction over z0 is +3 % at
e = 0.89, +5 % at 0.75, +10 % at 0.6 and +15 % at 0.5 (slightly more at smaller timesteps);
gravity during the impact adds up to +0.02 at impact speeds below 1 m/s.

:data:`MATERIALS` holds the physical ball-surface pairs the tasks use, each with its source.
:func:`add_air` fills the world with air and :func:`add_air_drag` gives a ball a real sphere's
drag; by default the drag is applied explicitly (episodic.native.air: the implicit integrator's
derivatives of every body's drag took two thirds of a step).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import mujoco

from episodic.native import air
from episodic.task.params import choice

GRAVITY = 9.81  # m/s^2, MuJoCo's default |gravity| (standard gravity 9.80665 rounded)

# Natural frequency of a ball contact's normal spring, rad/s: stiff enough that a ball sinks in
# by v/omega (7 mm at 2 m/s) and an impact lasts about pi/omega (10 ms, the order of a tennis
# ball's 4-6 ms on a rigid surface), soft enough that omega * dt <= 0.6 keeps the stepped
# spring-damper stable and calibratable at 2 ms (design.md, section 6).
CONTACT_OMEGA = 300.0
MAX_OMEGA_DT = 0.6

# Impedance of a ball contact (solimp: dmin, dmax, width m, midpoint, power): MuJoCo's default,
# rising from 0.9 to 0.95 over the first millimetre of depth. With the direct solref (scaled by
# dmax) the normal direction is then exactly the spring-damper of solref once the ball is 1 mm
# in, i.e. for nearly all of any impact faster than 0.3 m/s, so the drop tests find the
# calibration below unchanged (within 0.001 of a constant impedance).
BALL_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
# For a ball that mostly rolls on a moving surface (ball_on_beam's beam, carried by the PD-held
# arm): a softer first millimetre (impedance from 0.5). With BALL_SOLIMP such a ball, bouncy
# (restitution 0.86), kept hopping at 70 Hz in 5 of 8 starts, losing the plank in up to a quarter
# of the steps; with this it stays in contact in all of them (tests/test_task_ball_on_beam.py).
# The cost: impacts slower than 1 m/s rebound up to 0.02 (at 1 m/s) to 0.05 (at 0.5 m/s) higher.
ROLLING_SOLIMP = (0.5, 0.95, 0.001, 0.5, 2.0)

# Tangential time constant of a ball contact (standard solreffriction, s) as a multiple of
# 1/omega. With the friction rows hard (the noslip pass, module docstring) the slip's reference
# deceleration b_f v_t, b_f = 2 / (dmax * timeconst) 1/s, is met exactly when the cone allows it:
# b_f dt = 1 stops the slip in one step, more would reverse it. 2 MAX_OMEGA_DT / dmax (1.26 /
# omega: 4.2 ms at 300 rad/s) gives b_f = omega / MAX_OMEGA_DT, so b_f dt = omega dt / 0.6 <= 1:
# the slip is stopped in one step at the largest omega dt the contacts allow and within a fifth
# of an impact's duration (pi / omega) at the smallest used (omega dt = 0.15); never reversed.
# It is also over MuJoCo's floor of 2 dt for any time constant (refsafe). dmax: BALL_SOLIMP's
# and ROLLING_SOLIMP's (0.95).
FRICTION_TIMECONST_OMEGA = 2.0 * MAX_OMEGA_DT / BALL_SOLIMP[1]
# impratio (friction rows' impedance over the normal's) in the main solve: small enough that a
# sliding ball's friction stays inside the cone there, so the normal force is the spring-damper's
# (measured: the normal restitution moves by at most 0.001 up to v_t/v_n = 3 at 1e-6, by 0.007 at
# 1e-4). The friction itself comes from the noslip pass.
FRICTION_IMPRATIO = 1e-6
# Sweeps of MuJoCo's noslip pass (projected Gauss-Seidel, which stops earlier once the change is
# below option.noslip_tolerance): one is exact for a ball touching one surface; a few more let
# several simultaneous contacts (a ball against a cup's wall and bottom, a chain of string
# segments) settle.
NOSLIP_ITERATIONS = 10

# Dry air at 20 degC and 101.325 kPa: density 1.204 kg/m^3 and dynamic viscosity 1.81e-5 Pa s
# (CRC Handbook of Chemistry and Physics, "Properties of dry air"; the same in the Engineering
# ToolBox tables of air density and viscosity).
AIR_DENSITY = 1.204
AIR_VISCOSITY = 1.81e-5
# Drag coefficient of a smooth sphere at Reynolds numbers 1e3 to 2e5 (every ball speed here): 0.47
# (Hoerner, Fluid-Dynamic Drag, 1965, ch. 3; White, Fluid Mechanics, fig. 7.16).
SPHERE_DRAG_COEFFICIENT = 0.47
# A tennis ball's felt raises it: C_D = 0.508 without spin (Stepanek, "The aerodynamics of tennis
# balls - the topspin lob", Am. J. Phys. 56, 138 (1988), fit C_D = 0.508 + ... at spin parameter 0).
TENNIS_BALL_DRAG_COEFFICIENT = 0.508
# MuJoCo's ellipsoid fluid model pushes a sphere of radius r with the quadratic ("blunt") drag
# C_blunt rho pi r^2 v^2 (MuJoCo documentation, "Fluid forces", ellipsoid model), a real one
# with Cd rho pi r^2 v^2 / 2: C_blunt = Cd / 2 (the default 0.5 means Cd = 1.0, twice a sphere's;
# measured by the terminal-velocity test).
# Its Magnus force is C_M rho (4/3 pi r^3) (omega x v), i.e. a lift coefficient C_L = (8/3) C_M S
# with the spin parameter S = r omega / v; spinning balls have C_L close to S at small S (Stepanek
# 1988: C_L = 1 / (2 + 1/S)), so C_M = 3/8 instead of MuJoCo's default 1.
MAGNUS_COEFFICIENT = 0.375
# Slender drag (0.25), angular drag (1.5) and Kutta lift (1.0, none on a sphere) are MuJoCo's
# defaults: not calibrated here.
FLUID_SLENDER_DRAG, FLUID_ANGULAR_DRAG, FLUID_KUTTA_LIFT = 0.25, 1.5, 1.0


@dataclass(frozen=True)
class MaterialPair:
    """A ball on a surface as a task meets it: the normal coefficient of ``restitution``
    (rebound speed / impact speed at a few m/s), the Coulomb ``friction`` coefficient, the ball's
    ``radius`` m and ``mass`` kg it was measured for, and where the numbers come from
    (``source``)."""

    ball: str
    surface: str
    restitution: float
    friction: float
    radius: float
    mass: float
    source: str


MATERIALS: dict[str, MaterialPair] = {
    # tetherball: the ball on the racket (wooden blade, handle) and on the arm's links
    "tennis_ball_on_rigid": MaterialPair(
        ball="tennis ball (56.0-59.4 g, 65.4-68.6 mm)", surface="a rigid surface: racket blade, arm links",
        restitution=0.75, friction=0.6, radius=0.035, mass=0.06,
        source="ITF Rules of Tennis, Appendix I: a type 2 ball dropped from 254 cm onto concrete rebounds "
               "135-147 cm, e = sqrt(h1/h0) = 0.73-0.76; friction: about 0.6, a tennis ball sliding on a "
               "hard court (the friction the ITF Court Pace Rating measures, 0.5-0.7 on hard courts)"),
    # ball_on_beam: the ball on the wooden plank and rails, and on the floor when it falls off
    "golf_ball_on_hard": MaterialPair(
        ball="golf ball (at most 45.93 g, at least 42.67 mm)", surface="hardwood beam, concrete floor",
        restitution=0.86, friction=1.0, radius=0.02, mass=0.05,
        source="The Physics Factbook (G. Elert, ed.), 'Coefficient of restitution': golf ball on a hard "
               "floor 0.86; friction: ball_on_beam's parameter (high, so that the ball rolls)"),
    # ball_in_cup (applied by that task): a wooden ball of 40 mm, 24 g (beech, about 720 kg/m^3)
    "wooden_ball_on_cup": MaterialPair(
        ball="solid wooden ball (40 mm, 24 g)", surface="a rigid cup",
        restitution=0.60, friction=0.4, radius=0.02, mass=0.024,
        source="The Physics Factbook (G. Elert, ed.), 'Coefficient of restitution': wooden ball on a hard "
               "floor 0.60; friction: wood on wood, clean and dry, 0.25-0.5 (Marks' Standard Handbook "
               "for Mechanical Engineers, table of friction coefficients)"),
}


def _check_timestep(timestep: float, omega: float) -> None:
    if not timestep > 0:
        raise ValueError(f"the physics timestep must be positive, got {timestep}")
    if omega * timestep > MAX_OMEGA_DT + 1e-12:
        raise ValueError(f"a contact of natural frequency {omega:g} rad/s needs a timestep of at most "
                         f"{MAX_OMEGA_DT / omega:g} s (omega dt <= {MAX_OMEGA_DT}), got {timestep:g} s")


def _check_restitution(restitution: float) -> None:
    if not 0.0 <= restitution < 1.0:
        raise ValueError(f"a coefficient of restitution lies in [0, 1), got {restitution}")


def damping_ratio(restitution: float) -> float:
    """The damping ratio z of a linear spring-damper whose free half cycle ends with the speed
    ratio ``restitution``: e = exp(-pi z / sqrt(1 - z^2)), the standard result for a linear
    (Kelvin-Voigt) spring-dashpot contact. MuJoCo needs more, see the module docstring."""
    _check_restitution(restitution)
    if restitution == 0.0:
        return 1.0
    log_e = math.log(restitution)
    return -log_e / math.sqrt(math.pi**2 + log_e**2)


_PHASES = 32  # where the impact falls within a step: midpoints of 32 equal parts of a step


def discrete_restitution(z: float, omega: float, timestep: float) -> float:
    """The mean restitution of a ball bouncing off a fixed surface on MuJoCo's contact of natural
    frequency ``omega`` rad/s and damping ratio ``z`` (direct solref, full impedance), stepped
    at ``timestep`` s: MuJoCo's update, velocity first, then position, the force never pulling
    (the contact lets go when it would), averaged over where the impact falls within a step.
    Gravity is left out (it matters below 1 m/s)."""
    k, b, h = omega**2, 2.0 * z * omega, timestep
    total = 0.0
    for i in range(_PHASES):
        x, v = -(i + 0.5) / _PHASES * h, -1.0  # first step in contact: depth up to v dt
        for _ in range(100_000):
            a = -b * v - k * x
            v += h * max(a, 0.0)
            x += h * v
            if x >= 0.0:
                break
        total += v
    return total / _PHASES


@functools.lru_cache(maxsize=256)
def _calibrated_damping_ratio(restitution: float, omega: float, timestep: float) -> float:
    if restitution == 0.0:
        return 1.0
    low, high = 0.0, 2.0
    for _ in range(50):
        mid = 0.5 * (low + high)
        if discrete_restitution(mid, omega, timestep) > restitution:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def solref_for_restitution(restitution: float, timestep: float,
                           stiffness_omega: float | None = None) -> tuple[float, float]:
    """MuJoCo's direct solref (-k 1/s^2, -b 1/s) for a ball contact (with :data:`BALL_SOLIMP`)
    that rebounds with ``restitution`` (mean over impacts) at the physics ``timestep`` s: a
    spring of natural frequency ``stiffness_omega`` rad/s (default :data:`CONTACT_OMEGA`;
    omega * timestep <= 0.6) and the damping ratio calibrated to MuJoCo's update (module
    docstring; :func:`damping_ratio` gives the uncalibrated textbook value)."""
    _check_restitution(restitution)
    omega = CONTACT_OMEGA if stiffness_omega is None else float(stiffness_omega)
    _check_timestep(timestep, omega)
    z = _calibrated_damping_ratio(float(restitution), omega, float(timestep))
    return (-omega**2, -2.0 * z * omega)


def friction_solref(stiffness_omega: float | None = None) -> tuple[float, float]:
    """The standard solreffriction (time constant s, damping ratio) of a ball contact of natural
    frequency ``stiffness_omega`` rad/s (default :data:`CONTACT_OMEGA`):
    :data:`FRICTION_TIMECONST_OMEGA` / omega, critically damped. Under
    :func:`use_coulomb_friction` it sets how fast friction stops a slip the cone allows it to
    stop: at the rate omega / 0.6 1/s, in one step at the largest omega dt allowed."""
    omega = CONTACT_OMEGA if stiffness_omega is None else float(stiffness_omega)
    return (FRICTION_TIMECONST_OMEGA / omega, 1.0)


def use_coulomb_friction(spec: mujoco.MjSpec) -> None:
    """Set the model-wide options under which ball contacts have Coulomb friction that leaves
    their normal rebound alone (module docstring): elliptic friction cones (the ones under which
    MuJoCo uses solreffriction), friction rows nearly free in the main solve (``impratio``
    :data:`FRICTION_IMPRATIO`) and re-solved hard by the noslip pass
    (:data:`NOSLIP_ITERATIONS`). :func:`add_bouncing_pair` calls this."""
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = FRICTION_IMPRATIO
    spec.option.noslip_iterations = NOSLIP_ITERATIONS


def add_bouncing_pair(spec: mujoco.MjSpec, geom1: str, geom2: str, restitution: float, friction: float,
                      timestep: float, name: str | None = None, condim: int = 3,
                      torsional: float = 0.0, rolling: float = 0.0,
                      solimp: tuple[float, ...] = BALL_SOLIMP) -> mujoco.MjsPair:
    """Add an explicit contact pair between the geoms named ``geom1`` and ``geom2`` that rebounds
    with ``restitution`` and has Coulomb ``friction`` acting during the impact, at the physics
    ``timestep`` s (the model's option.timestep: the calibration depends on it).

    ``condim``: 1 (frictionless, e.g. a guide rail), 3 (sliding friction: a ball that should roll
    freely), 4 (and ``torsional`` friction, m) or 6 (and ``rolling`` friction, m). The pair
    replaces the contact the geoms' own contype/conaffinity would give them, and its parameters
    replace the geoms'. ``solimp``: :data:`BALL_SOLIMP`, or :data:`ROLLING_SOLIMP` for a ball that
    mostly rolls on the surface. Also sets the whole model's friction options
    (:func:`use_coulomb_friction`)."""
    if condim not in (1, 3, 4, 6):
        raise ValueError(f"condim is 1, 3, 4 or 6, got {condim}")
    if not friction >= 0:
        raise ValueError(f"the friction coefficient must be >= 0, got {friction}")
    use_coulomb_friction(spec)
    pair = spec.add_pair(geomname1=geom1, geomname2=geom2, condim=condim)
    if name is not None:
        pair.name = name
    pair.solref = list(solref_for_restitution(restitution, timestep))
    pair.solreffriction = list(friction_solref())
    pair.solimp = list(solimp)
    pair.friction = [friction, friction, torsional, rolling, rolling]
    return pair


def colliding_geoms(spec: mujoco.MjSpec, geom_name: str) -> list[str]:
    """The names of the geoms of ``spec`` that the geom ``geom_name`` touches through its
    contype/conaffinity bits (either way round), leaving out the geoms of its own body. A
    colliding geom without a name is given one, "<body>_geom<k>" (a pair needs names)."""
    ball = spec.geom(geom_name)
    if ball is None:
        raise ValueError(f"no geom named '{geom_name}'")
    names = []
    for k, geom in enumerate(spec.geoms):
        if geom.parent.name == ball.parent.name:
            continue
        if not (geom.contype & ball.conaffinity or ball.contype & geom.conaffinity):
            continue
        if not geom.name:
            geom.name = f"{geom.parent.name or 'world'}_geom{k}"
        names.append(geom.name)
    return names


def add_bouncing_pairs(spec: mujoco.MjSpec, ball: str, restitution: float, friction: float, timestep: float,
                       condim: int = 3, overrides: dict[str, dict] | None = None,
                       solimp: tuple[float, ...] = BALL_SOLIMP) -> dict[str, mujoco.MjsPair]:
    """Give the ball geom ``ball`` a bouncing pair (:func:`add_bouncing_pair`, ``restitution``,
    ``friction``, ``condim``, ``solimp``) with every geom it touches now (:func:`colliding_geoms`), and then
    clear its contype/conaffinity so that it touches exactly those, through the pairs. Call it
    once the scene is complete. ``overrides``: geom name -> keyword arguments of
    :func:`add_bouncing_pair` for that geom's pair (restitution, friction, condim, ...).
    Returns geom name -> its pair."""
    overrides = dict(overrides or {})
    pairs = {}
    for other in colliding_geoms(spec, ball):
        kw = dict(restitution=restitution, friction=friction, condim=condim, solimp=solimp) | overrides.pop(other, {})
        pairs[other] = add_bouncing_pair(spec, ball, other, timestep=timestep, name=f"{ball}-{other}", **kw)
    if overrides:
        raise ValueError(f"the ball '{ball}' does not touch {sorted(overrides)}")
    geom = spec.geom(ball)
    geom.contype, geom.conaffinity = 0, 0
    return pairs


def add_material_pair(spec: mujoco.MjSpec, geom1: str, geom2: str, material: str | MaterialPair,
                      timestep: float, name: str | None = None, condim: int = 3) -> mujoco.MjsPair:
    """:func:`add_bouncing_pair` with the restitution and friction of ``material`` (a key of
    :data:`MATERIALS` or a :class:`MaterialPair`)."""
    pair = MATERIALS[material] if isinstance(material, str) else material
    return add_bouncing_pair(spec, geom1, geom2, pair.restitution, pair.friction, timestep, name=name,
                             condim=condim)


# How air drags (the tasks' choice ``air``): "explicit", MuJoCo's fluid forces applied as
# passive forces that the implicit integrator does not differentiate (episodic.native.air; the
# default since issue 33: ball_in_cup about 3x faster); "implicit", MuJoCo's own, whose
# derivatives for every body the integrator takes every step (the physics of logs written
# before, which record no ``air`` and replay with it).
AIR_MODES = ("explicit", "implicit")


def air_choice() -> Any:
    """The tasks' parameter ``air``: how air drags (:data:`AIR_MODES`, "explicit" by default), a
    choice recorded in every log; a log written before it records none and replays "implicit"
    (episodic.tools.replay)."""
    return choice("explicit", AIR_MODES, "explicit: MuJoCo's drag applied as a force, not differentiated (fast); "
                                         "implicit: differentiated every step (the physics before issue 33)")


def add_air(spec: mujoco.MjSpec, geoms: list[str] | None = None,
            drag_coefficient: float = SPHERE_DRAG_COEFFICIENT, mode: str = "explicit") -> None:
    """Fill the world with still dry air (:data:`AIR_DENSITY`, :data:`AIR_VISCOSITY`) and give
    each ball geom named in ``geoms`` (None: none) the drag of a sphere of ``drag_coefficient``
    (:func:`add_air_drag`). MuJoCo's default fluid model (a box of the body's inertia) acts on
    every other body too, e.g. a robot's links: small at arm speeds. ``mode`` (:data:`AIR_MODES`):
    "explicit", the air is the model's numeric ``episodic_air`` and the forces come from
    episodic's passive-force callback (episodic.native.air, installed here), not differentiated;
    "implicit", the air is the model's option density and viscosity, MuJoCo's own forces, their
    derivatives taken by the implicit integrator every step."""
    if mode not in AIR_MODES:
        raise ValueError(f"air drags in one of the modes {', '.join(AIR_MODES)}; got {mode!r}")
    if mode == "explicit":
        spec.add_numeric(name=air.AIR, data=[AIR_DENSITY, AIR_VISCOSITY])
        air.install()
    else:
        spec.option.density = AIR_DENSITY
        spec.option.viscosity = AIR_VISCOSITY
    for geom in geoms or ():
        add_air_drag(spec, geom, drag_coefficient)


def model_air(model: mujoco.MjModel) -> tuple[float, float]:
    """The air of a compiled ``model`` (:func:`add_air`): its density kg/m^3 and viscosity Pa s,
    from its numeric ``episodic_air`` (explicit) or else its options (implicit; 0, 0: no air)."""
    found = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, air.AIR)
    if found >= 0:
        density, viscosity = model.numeric_data[model.numeric_adr[found]: model.numeric_adr[found] + 2]
        return float(density), float(viscosity)
    return float(model.opt.density), float(model.opt.viscosity)


def add_air_drag(spec: mujoco.MjSpec, geom_name: str, drag_coefficient: float = SPHERE_DRAG_COEFFICIENT) -> None:
    """Give the sphere geom ``geom_name`` MuJoCo's ellipsoid fluid model with the drag of a sphere
    of ``drag_coefficient`` (default :data:`SPHERE_DRAG_COEFFICIENT`, 0.47) and a Magnus lift of
    C_L = S (:data:`MAGNUS_COEFFICIENT`); the air itself is set by :func:`add_air`."""
    geom = spec.geom(geom_name)
    if geom is None:
        raise ValueError(f"no geom named '{geom_name}'")
    if not drag_coefficient > 0:
        raise ValueError(f"the drag coefficient must be positive, got {drag_coefficient}")
    geom.fluid_ellipsoid = 1.0
    geom.fluid_coefs = [drag_coefficient / 2, FLUID_SLENDER_DRAG, FLUID_ANGULAR_DRAG, FLUID_KUTTA_LIFT,
                        MAGNUS_COEFFICIENT]


# -- measuring (the tests', and anyone's, check of a pair) ----------------------------------------
@dataclass(frozen=True)
class Bounce:
    """Restitution measured by dropping a ball: ``mean``, ``low`` and ``high`` over where the
    impact falls within a physics step."""

    mean: float
    low: float
    high: float


def measure_restitution(restitution: float, timestep: float, radius: float, mass: float,
                        impact_speed: float = 2.45, friction: float = 0.5, phases: int = 16,
                        integrator: mujoco.mjtIntegrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST) -> Bounce:
    """Drop a solid ball (``radius`` m, ``mass`` kg) in MuJoCo on a fixed box through a pair made
    by :func:`add_bouncing_pair` for ``restitution`` at ``timestep`` s, at ``impact_speed`` m/s
    (2.45 m/s: a drop from 305 mm), ``phases`` times with the impact falling at evenly spread
    points of a step, and measure each rebound from energy, e = sqrt(E_after / E_before) with
    E = v_z^2 / 2 + g (height above the touching point): the rebound apex height over the drop
    height, as a drop test measures it."""
    from episodic.task import add_free_ball  # the tasks' own ball

    spec = mujoco.MjSpec()
    spec.option.timestep = timestep
    spec.option.integrator = integrator
    spec.worldbody.add_geom(name="surface", type=mujoco.mjtGeom.mjGEOM_BOX, size=[1.0, 1.0, 0.05],
                            pos=[0.0, 0.0, -0.05])
    add_free_ball(spec, "ball", [0.0, 0.0, 1.0], radius, mass)
    add_bouncing_pair(spec, "ball", "surface", restitution, friction, timestep)
    model = spec.compile()
    data = mujoco.MjData(model)
    g = -model.opt.gravity[2]
    values = []
    for i in range(phases):
        mujoco.mj_resetData(model, data)
        gap = (1.0 - (i + 0.5) / phases) * impact_speed * timestep  # the impact's place in a step
        data.qpos[2], data.qvel[2] = radius + gap, -impact_speed
        before = 0.5 * impact_speed**2 + g * gap
        touched = False
        for _ in range(int(1.0 / timestep)):
            mujoco.mj_step(model, data)
            touched = touched or data.ncon > 0
            if touched and data.ncon == 0 and data.qpos[2] > radius:
                break
        after = 0.5 * data.qvel[2] ** 2 + g * (data.qpos[2] - radius)
        values.append(math.sqrt(max(after, 0.0) / before))
    return Bounce(sum(values) / len(values), min(values), max(values))


# Options of a model that shape how a contact pair acts (copied by measure_oblique_impact).
CONTACT_OPTIONS = ("timestep", "integrator", "cone", "impratio", "noslip_iterations", "noslip_tolerance", "solver",
                   "iterations", "tolerance")


@dataclass(frozen=True)
class ObliqueBounce:
    """A ball's oblique impact without spin on a fixed surface, means over where the impact
    falls within a physics step: the ``normal`` restitution v_n' / v_n, the ``tangential`` speed
    ratio v_t' / v_t and the ``spin`` omega' r / v_t (both nan when v_t = 0)."""

    normal: float
    tangential: float
    spin: float


def pair_restitution(model: mujoco.MjModel, pair: int) -> float:
    """The restitution the direct solref (-k, -b) of the compiled contact pair ``pair`` was
    calibrated for (:func:`solref_for_restitution`) at the model's timestep."""
    k, b = model.pair_solref[pair]
    if not (k < 0 and b < 0):
        raise ValueError(f"pair {pair} has no direct solref (-stiffness, -damping): not a calibrated ball pair")
    omega = math.sqrt(-k)
    return discrete_restitution(-b / (2.0 * omega), omega, float(model.opt.timestep))


def measure_oblique_impact(model: mujoco.MjModel, pair: int, ball: str, normal_speed: float,
                           tangential_speed: float, phases: int = 8) -> ObliqueBounce:
    """Hit a fixed box with the ball geom ``ball`` (a sphere on a free body) of ``model``
    through a copy of the model's contact pair ``pair`` (solref, solreffriction, solimp,
    friction, condim) under the model's contact options (:data:`CONTACT_OPTIONS`), without
    gravity, at ``normal_speed`` and ``tangential_speed`` m/s and no spin, ``phases`` times with
    the impact falling at evenly spread points of a step; measured once the ball has left."""
    ball_id = model.geom(ball).id
    if ball_id not in (model.pair_geom1[pair], model.pair_geom2[pair]):
        raise ValueError(f"pair {pair} is not the ball '{ball}''s")
    body = model.geom_bodyid[ball_id]
    radius = float(model.geom_size[ball_id][0])
    spec = mujoco.MjSpec()
    for option in CONTACT_OPTIONS:
        setattr(spec.option, option, getattr(model.opt, option))
    spec.option.gravity = [0.0, 0.0, 0.0]  # the impact alone
    spec.worldbody.add_geom(name="surface", type=mujoco.mjtGeom.mjGEOM_BOX, size=[5.0, 5.0, 0.05],
                            pos=[0.0, 0.0, -0.05], contype=0, conaffinity=0)
    copy = spec.worldbody.add_body(name="ball", pos=[0.0, 0.0, 1.0])
    copy.add_freejoint()
    copy.explicitinertial = True
    copy.mass, copy.ipos, copy.iquat = float(model.body_mass[body]), [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
    copy.inertia = list(model.body_inertia[body])
    copy.add_geom(name="ball", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0], contype=0, conaffinity=0)
    made = spec.add_pair(geomname1="ball", geomname2="surface", condim=int(model.pair_dim[pair]))
    made.solref, made.solreffriction = list(model.pair_solref[pair]), list(model.pair_solreffriction[pair])
    made.solimp, made.friction = list(model.pair_solimp[pair]), list(model.pair_friction[pair])
    impact = spec.compile()
    data = mujoco.MjData(impact)
    dt = impact.opt.timestep
    runs = []
    for i in range(phases):
        mujoco.mj_resetData(impact, data)
        gap = (1.0 - (i + 0.5) / phases) * normal_speed * dt  # the impact's place in a step
        data.qpos[2], data.qvel[0], data.qvel[2] = radius + gap, tangential_speed, -normal_speed
        touched = False
        for _ in range(int(0.2 / dt)):
            mujoco.mj_step(impact, data)
            touched = touched or data.ncon > 0
            if touched and data.ncon == 0:
                break
        # qvel[3:6] is the angular velocity in the ball's frame; the ball turned about y only
        runs.append((data.qvel[2], data.qvel[0], data.qvel[4] * radius))
    normal, tangential, spin = (sum(values) / phases for values in zip(*runs))
    per_vt = (lambda v: v / tangential_speed) if tangential_speed else (lambda v: math.nan)
    return ObliqueBounce(normal / normal_speed, per_vt(tangential), per_vt(spin))


def rigid_sphere_impact(restitution: float, friction: float, inertia_factor: float,
                        speed_ratio: float) -> tuple[float, float]:
    """Rigid-body impact of a sphere without spin on a fixed flat at v_t / v_n = ``speed_ratio``
    > 0, with Coulomb ``friction`` and normal ``restitution``; ``inertia_factor`` I / (m r^2)
    (0.4 solid, 2/3 a thin shell). The friction impulse is at most mu (1 + e) m v_n; if that
    stops the contact point's slip (it takes m v_t k / (1 + k)) the ball leaves rolling,
    v_t' = v_t / (1 + k), else it slides throughout, v_t' = v_t - mu (1 + e) v_n, spun up by the
    same impulse (e.g. Cross, Am. J. Phys. 70, 482 (2002); Brach, Mechanical Impact Dynamics,
    1991, ch. 4). Returns (v_t' / v_t, omega' r / v_t)."""
    impulse = friction * (1.0 + restitution) / speed_ratio  # the most friction can take, over m v_t
    if impulse >= inertia_factor / (1.0 + inertia_factor):
        rolling = 1.0 / (1.0 + inertia_factor)
        return rolling, rolling
    return 1.0 - impulse, impulse / inertia_factor
