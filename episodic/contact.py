"""Bouncing ball contacts and air drag, from stated physical values.

MuJoCo's default contact is nearly inelastic: a ball dropped on a fixed surface does not rebound
at all (tested), into a cup carried by the arm with a restitution of about 0.13 (design.md). A ball that should bounce like a real one gets an explicit contact pair
(:func:`add_bouncing_pair`) with

* a normal direction that is a linear, mass-normalised spring-damper (MuJoCo's direct solref
  (-stiffness 1/s^2, -damping 1/s), at full impedance 1 mm in, :data:`BALL_SOLIMP`): natural
  frequency :data:`CONTACT_OMEGA` and the damping that rebounds with the wanted restitution at the
  model's physics timestep (:func:`solref_for_restitution`, calibrated below);
* an elliptic friction cone whose tangential direction has its own time constant
  (``solreffriction``, :data:`FRICTION_TIMECONST_OMEGA`), so friction acts during the impact: a
  ball hitting a surface obliquely leaves it rolling (v_t' = 5/7 v_t for a solid sphere) as a real
  one does, instead of skidding on as with the contact's own, light damping (v_t' = 0.9 v_t).
  Up to 45 degrees from the normal the normal rebound is unaffected (within 0.04); at steeper,
  sliding impacts the elliptic cone takes some of it (-0.05 at 56 degrees).

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
drag.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import mujoco

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
# 1/omega: 2.4 / 300 rad/s = 8 ms. Fitted by the oblique-impact test: a solid ball hitting at up
# to 45 degrees leaves rolling (v_t' within 0.045 of 5/7 v_t, spin within 8 % of v_t'/r) at 2 ms
# and 0.5 ms. Shorter constants overshoot into backspin and, while the ball slides, take energy out
# of the normal rebound (the elliptic cone couples the two); longer ones leave it skidding.
FRICTION_TIMECONST_OMEGA = 2.4

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
    frequency ``stiffness_omega`` rad/s: :data:`FRICTION_TIMECONST_OMEGA` / omega, critically
    damped."""
    omega = CONTACT_OMEGA if stiffness_omega is None else float(stiffness_omega)
    return (FRICTION_TIMECONST_OMEGA / omega, 1.0)


def use_elliptic_cones(spec: mujoco.MjSpec) -> None:
    """Make the model's friction cones elliptic: a whole-model option, and the one under which
    MuJoCo uses solreffriction (:func:`add_bouncing_pair` calls this)."""
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC


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
    mostly rolls on the surface. Also makes the whole model's friction cones elliptic
    (:func:`use_elliptic_cones`)."""
    if condim not in (1, 3, 4, 6):
        raise ValueError(f"condim is 1, 3, 4 or 6, got {condim}")
    if not friction >= 0:
        raise ValueError(f"the friction coefficient must be >= 0, got {friction}")
    use_elliptic_cones(spec)
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


def add_air(spec: mujoco.MjSpec, geoms: list[str] | None = None,
            drag_coefficient: float = SPHERE_DRAG_COEFFICIENT) -> None:
    """Fill the world with still dry air (:data:`AIR_DENSITY`, :data:`AIR_VISCOSITY`) and give
    each ball geom named in ``geoms`` (None: none) the drag of a sphere of ``drag_coefficient``
    (:func:`add_air_drag`). Once the air has a density, MuJoCo's default fluid model (a box of
    the body's inertia) acts on every other body too, e.g. a robot's links: small at arm speeds."""
    spec.option.density = AIR_DENSITY
    spec.option.viscosity = AIR_VISCOSITY
    for geom in geoms or ():
        add_air_drag(spec, geom, drag_coefficient)


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
