"""episodic.task.contact with real MuJoCo: balls dropped, thrown obliquely and falling through air in
models built with MjSpec, measured against the stated restitutions, the rigid-body impact of a
solid sphere and a sphere's drag."""
from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from episodic.interface.robot import load_robot
from episodic.runtime.scene import build_scene
from episodic.task import add_free_ball, contact
from episodic.task.contact import MATERIALS, measure_restitution
from episodic.tasks import make_task

G = 9.81
IMPLICITFAST = mujoco.mjtIntegrator.mjINT_IMPLICITFAST

# every ball-surface pair a task uses, at the physics timestep it runs at: tetherball 2 ms / 4
# substeps, ball_on_beam 2 ms; ball_in_cup's wooden ball at 2 ms and at 0.5 ms (4 substeps), the
# two timesteps that task may choose
CASES = [("tennis_ball_on_rigid", 0.0005), ("golf_ball_on_hard", 0.002),
         ("wooden_ball_on_cup", 0.002), ("wooden_ball_on_cup", 0.0005)]


def case_id(case) -> str:
    return f"{case[0]}-{case[1] * 1e3:g}ms"


def test_the_tasks_run_at_the_timesteps_their_pairs_are_tested_at():
    wam = load_robot("wam")
    for task, dt in (("tetherball", 0.0005), ("ball_on_beam", 0.002)):
        model = build_scene(wam, make_task(task)).model
        assert model.opt.timestep == pytest.approx(dt)
        assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
        assert model.opt.impratio == contact.FRICTION_IMPRATIO
        assert model.opt.noslip_iterations == contact.NOSLIP_ITERATIONS


def test_solref_is_the_direct_spring_damper_and_refuses_what_it_cannot_calibrate():
    k, b = contact.solref_for_restitution(0.75, 0.002)
    assert k == -contact.CONTACT_OMEGA**2 and b < 0
    z = -b / (2 * contact.CONTACT_OMEGA)
    # MuJoCo needs more damping than the textbook linear spring-damper: +5 % at e = 0.75
    assert z / contact.damping_ratio(0.75) == pytest.approx(1.05, abs=0.02)
    assert contact.damping_ratio(math.exp(-math.pi * 0.2 / math.sqrt(1 - 0.04))) == pytest.approx(0.2)
    assert contact.solref_for_restitution(0.0, 0.002)[1] == -2 * contact.CONTACT_OMEGA  # critical
    # a softer spring for a larger step
    assert contact.solref_for_restitution(0.75, 0.004, stiffness_omega=150)[0] == -150**2
    with pytest.raises(ValueError, match="timestep of at most 0.002"):
        contact.solref_for_restitution(0.75, 0.0025)
    for e in (-0.1, 1.0):
        with pytest.raises(ValueError, match=r"\[0, 1\)"):
            contact.solref_for_restitution(e, 0.002)


def test_mujocos_default_contact_does_not_bounce():
    """The 'before': a ball on MuJoCo's default contact (no pair) stops dead."""
    spec = mujoco.MjSpec()
    spec.option.timestep, spec.option.integrator = 0.002, IMPLICITFAST
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1, 1, 0.1])
    add_free_ball(spec, "ball", [0, 0, 0.02 + 0.305], 0.02, 0.024)
    model = spec.compile()
    data = mujoco.MjData(model)
    heights = []
    while data.time < 1.0:
        mujoco.mj_step(model, data)
        heights.append(data.qpos[2] - 0.02)
    after = np.array(heights)[int(0.3 / 0.002):]  # the impact is at 0.25 s
    assert after.max() < 0.01 * 0.305  # rebounds under 1 % of the drop: e < 0.1


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_dropped_ball_rebounds_with_its_materials_restitution(case):
    """Dropped from 305 mm (the ITTF drop height; 2.45 m/s at impact) sixteen times, the impact
    falling at evenly spread points of a physics step: the mean restitution (rebound apex over
    drop height, square-rooted) is within 0.03 of the stated one; single bounces spread by where
    the impact falls, -0.05 / +0.11 at 2 ms (the most at the lowest restitution), +-0.03 at
    0.5 ms."""
    name, dt = case
    pair = MATERIALS[name]
    bounce = measure_restitution(pair.restitution, dt, pair.radius, pair.mass)
    assert bounce.mean == pytest.approx(pair.restitution, abs=0.03)
    wide = (0.05, 0.11) if dt > 0.001 else (0.03, 0.03)
    assert pair.restitution - wide[0] < bounce.low <= bounce.high < pair.restitution + wide[1]


@pytest.mark.parametrize("speed", [1.0, 2.45, 5.0])
@pytest.mark.parametrize("restitution", [0.5, 0.75, 0.9])
def test_the_restitution_holds_across_impact_speeds_and_values(restitution, speed):
    """The calibration is a property of the contact, not of one drop: at 0.5 ms a 40 mm ball
    rebounds with the restitution asked for within 0.03 from 1 to 5 m/s, for restitutions from
    0.5 to 0.9 (the textbook damping ratio alone would give up to 0.04 too much at 0.5)."""
    bounce = measure_restitution(restitution, 0.0005, 0.02, 0.024, impact_speed=speed, phases=8)
    assert bounce.mean == pytest.approx(restitution, abs=0.03)


def test_the_textbook_damping_ratio_would_bounce_too_high():
    """What the calibration corrects: with z = -ln e / sqrt(pi^2 + ln^2 e) MuJoCo's contact lets
    go early (when its force would pull) and a ball asked for 0.5 rebounds with about 0.54."""
    z = contact.damping_ratio(0.5)
    assert contact.discrete_restitution(z, contact.CONTACT_OMEGA, 0.0005) > 0.53
    calibrated = -contact.solref_for_restitution(0.5, 0.0005)[1] / (2 * contact.CONTACT_OMEGA)
    assert contact.discrete_restitution(calibrated, contact.CONTACT_OMEGA, 0.0005) == pytest.approx(0.5, abs=1e-6)


def ball_on_box(restitution: float, friction: float, dt: float, radius: float, mass: float) -> mujoco.MjModel:
    """A solid ball ("ball") and a fixed box joined by a bouncing pair (pair 0), at timestep dt s."""
    spec = mujoco.MjSpec()
    spec.option.timestep, spec.option.integrator = dt, IMPLICITFAST
    spec.worldbody.add_geom(name="surface", type=mujoco.mjtGeom.mjGEOM_BOX, size=[2, 2, 0.05], pos=[0, 0, -0.05])
    add_free_ball(spec, "ball", [0, 0, 1], radius, mass)
    contact.add_bouncing_pair(spec, "ball", "surface", restitution, friction, dt)
    return spec.compile()


def oblique_impact(restitution: float, friction: float, dt: float, radius: float, mass: float,
                   vn: float, vt: float) -> contact.ObliqueBounce:
    """A solid ball without spin hits a fixed box at normal speed vn and tangential speed vt m/s
    through a bouncing pair (means over where the impact falls within a step)."""
    return contact.measure_oblique_impact(ball_on_box(restitution, friction, dt, radius, mass), 0, "ball", vn, vt)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("vt", [0.5, 2.0])
def test_friction_acts_during_an_oblique_impact_until_the_ball_rolls(case, vt):
    """A solid sphere hitting a surface at up to 45 degrees with enough friction leaves it
    rolling: angular momentum about the contact point is kept, so v_t' = 5/7 v_t and
    omega' r = v_t' (rigid-body impact; e.g. Cross, Am. J. Phys. 70, 482 (2002)). Measured: v_t'
    within 0.045 of 5/7 v_t, the spin within 8 % of rolling, and the normal rebound unspoiled
    (within 0.03 of the restitution)."""
    name, dt = case
    pair = MATERIALS[name]
    bounce = oblique_impact(pair.restitution, pair.friction, dt, pair.radius, pair.mass, vn=2.0, vt=vt)
    assert bounce.tangential == pytest.approx(5 / 7, abs=0.045)
    assert bounce.spin / bounce.tangential == pytest.approx(1.0, abs=0.08)
    assert bounce.normal == pytest.approx(pair.restitution, abs=0.03)


RATIOS = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]  # v_t / v_n: head-on to grazing (72 degrees from the normal)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_normal_rebound_is_the_restitution_at_every_angle(case):
    """Swept from head-on to v_t/v_n = 3 with the pair's friction: the normal restitution stays
    within 0.03 of the stated one, and the ball leaves as rigid-body impulse theory says
    (contact.rigid_sphere_impact: rolling, or sliding with the Coulomb impulse mu (1 + e) m v_n
    taken off): v_t' within 0.045 of it, the spin within 12 % (the friction's lever is the radius
    less half the penetration, up to 1/6 of a 20 mm ball's radius at 2 m/s: the spin of a ball
    that slides throughout comes out that much short)."""
    name, dt = case
    pair = MATERIALS[name]
    model = ball_on_box(pair.restitution, pair.friction, dt, pair.radius, pair.mass)
    for ratio in RATIOS:
        bounce = contact.measure_oblique_impact(model, 0, "ball", 2.0, 2.0 * ratio)
        assert bounce.normal == pytest.approx(pair.restitution, abs=0.03), f"v_t/v_n = {ratio}"
        if ratio:
            tangential, spin = contact.rigid_sphere_impact(pair.restitution, pair.friction, 0.4, ratio)
            assert bounce.tangential == pytest.approx(tangential, abs=0.045), f"v_t/v_n = {ratio}"
            assert bounce.spin == pytest.approx(spin, rel=0.12), f"v_t/v_n = {ratio}"


BALL_TASKS = ["beer_pong", "tetherball", "ball_bouncing", "ball_paddling", "casting", "ball_in_cup", "ball_on_beam"]


@pytest.mark.parametrize("task", BALL_TASKS)
def test_every_tasks_ball_pairs_rebound_with_their_restitution_at_every_angle(task):
    """Each task's frictional ball pairs as its model compiles them (benchmarks/restitution.py
    prints the same sweep): the normal restitution within 0.03 of the one the pair was calibrated
    for from head-on to v_t/v_n = 3, and v_t' within 0.06 of rigid-body theory for the task's
    ball (hollow or solid; the 15 mm paddle ball, the smallest, is the furthest off: its
    penetration shortens the friction's lever most)."""
    model = build_scene(load_robot("wam"), make_task(task)).model
    ball = model.geom("ball")
    body = ball.bodyid[0]
    k = model.body_inertia[body][0] / (model.body_mass[body] * ball.size[0] ** 2)
    pairs = [i for i in range(model.npair)
             if ball.id in (model.pair_geom1[i], model.pair_geom2[i]) and model.pair_dim[i] > 1]
    assert pairs
    for pair in {tuple(model.pair_solref[i]) + tuple(model.pair_friction[i]): i for i in pairs}.values():
        e, mu = contact.pair_restitution(model, pair), model.pair_friction[pair][0]
        for ratio in RATIOS:
            bounce = contact.measure_oblique_impact(model, pair, "ball", 2.0, 2.0 * ratio, phases=4)
            assert bounce.normal == pytest.approx(e, abs=0.03), f"pair {pair}, v_t/v_n = {ratio}"
            if ratio:
                tangential, _ = contact.rigid_sphere_impact(e, mu, k, ratio)
                assert bounce.tangential == pytest.approx(tangential, abs=0.06), f"pair {pair}, v_t/v_n = {ratio}"


def test_friction_is_coulomb_limited_during_the_impact():
    """With little friction (0.1) the ball slides all through the impact and loses the Coulomb
    impulse mu (1 + e) m v_n of tangential momentum: v_t' = v_t - mu (1 + e) v_n."""
    e, mu, vn, vt = 0.75, 0.1, 2.0, 3.0
    bounce = oblique_impact(e, mu, 0.0005, 0.035, 0.06, vn, vt)
    expected = (vt - mu * (1 + bounce.normal) * vn) / vt
    assert bounce.tangential == pytest.approx(expected, abs=0.01)
    assert bounce.spin == pytest.approx(2.5 * (1 - bounce.tangential), abs=0.02)  # the same impulse spins it up
    assert bounce.tangential > 5 / 7 + 0.1


def test_mujocos_soft_cone_alone_takes_the_normal_rebound_of_a_sliding_ball():
    """Why the noslip pass and the small impratio (contact module docstring), each: a tennis ball
    at v_t/v_n = 3 (friction 0.6, restitution 0.75) under MuJoCo's plain soft cone (impratio 1,
    no noslip pass) rebounds with 0.60 at most, the friction's wish feeding its normal force;
    with the noslip pass but impratio 1 the main solve still couples the two (0.70 at most);
    with the small impratio but no noslip pass friction is all but gone (the ball skids on
    at 0.99 v_t). Both together: the restitution, and the theory's v_t'."""
    pair = MATERIALS["tennis_ball_on_rigid"]
    model = ball_on_box(pair.restitution, pair.friction, 0.0005, pair.radius, pair.mass)

    def hit(impratio: float, noslip: int) -> contact.ObliqueBounce:
        model.opt.impratio, model.opt.noslip_iterations = impratio, noslip
        return contact.measure_oblique_impact(model, 0, "ball", 2.0, 6.0)

    assert hit(1.0, 0).normal < 0.60
    assert hit(1.0, contact.NOSLIP_ITERATIONS).normal < 0.70
    assert hit(contact.FRICTION_IMPRATIO, 0).tangential > 0.99
    both = hit(contact.FRICTION_IMPRATIO, contact.NOSLIP_ITERATIONS)
    assert both.normal == pytest.approx(pair.restitution, abs=0.01)
    assert both.tangential == pytest.approx(5 / 7, abs=0.03)


def test_a_hard_friction_row_stops_the_slip_without_reversing_it():
    """The friction time constant (contact.friction_solref): the noslip pass decelerates a
    slip the cone can stop at b_f = omega / 0.6 1/s, i.e. by b_f dt <= 1 of it per step, exactly
    1 at the largest omega dt allowed (0.6), never more (which would turn the slip around)."""
    for omega in (300.0, 1000.0):
        timeconst, ratio = contact.friction_solref(omega)
        b = 2 / (contact.BALL_SOLIMP[1] * timeconst)  # MuJoCo's damping of a standard solref
        assert ratio == 1.0 and b == pytest.approx(omega / contact.MAX_OMEGA_DT)
        assert timeconst >= 2 * contact.MAX_OMEGA_DT / omega  # over MuJoCo's floor of 2 dt


def falling_ball(radius: float, mass: float, drag_coefficient: float | None, seconds: float,
                 dt: float = 0.002, air: str = "explicit") -> np.ndarray:
    """Downward speed (n,) m/s of a ball dropped in air (``drag_coefficient`` None: MuJoCo's
    default ellipsoid coefficients; ``air``: contact.AIR_MODES), each step."""
    spec = mujoco.MjSpec()
    spec.option.timestep, spec.option.integrator = dt, IMPLICITFAST
    add_free_ball(spec, "ball", [0, 0, 100], radius, mass)
    if drag_coefficient is None:
        contact.add_air(spec, mode=air)
        spec.geom("ball").fluid_ellipsoid = 1.0  # MuJoCo's defaults: blunt drag 0.5
    else:
        contact.add_air(spec, ["ball"], drag_coefficient, air)
    model = spec.compile()
    assert contact.model_air(model) == (1.204, 1.81e-5)
    assert (model.opt.density == 0) == (air == "explicit")
    data = mujoco.MjData(model)
    speeds = np.empty(int(seconds / dt))
    for i in range(len(speeds)):
        mujoco.mj_step(model, data)
        speeds[i] = -data.qvel[2]
    return speeds


@pytest.mark.parametrize("ball, cd", [((0.02, 0.0027), contact.SPHERE_DRAG_COEFFICIENT),
                                      ((0.035, 0.06), contact.TENNIS_BALL_DRAG_COEFFICIENT)],
                         ids=["table-tennis-ball", "tennis-ball"])
@pytest.mark.parametrize("air", contact.AIR_MODES)
def test_a_falling_ball_reaches_a_spheres_terminal_velocity(ball, cd, air):
    """v_t = sqrt(2 m g / (rho Cd pi r^2)), within 3 %: 8.6 m/s for a 2.7 g, 40 mm ball with
    Cd 0.47; the tennis ball (Cd 0.508) is followed for 6 s of its approach, where the speed
    is v_t tanh(g t / v_t). The same in either air (explicit or MuJoCo's own)."""
    radius, mass = ball
    terminal = math.sqrt(2 * mass * G / (contact.AIR_DENSITY * cd * math.pi * radius**2))
    speeds = falling_ball(radius, mass, cd, 6.0, air=air)
    t = np.arange(1, len(speeds) + 1) * 0.002
    np.testing.assert_allclose(speeds, terminal * np.tanh(G * t / terminal), rtol=0.03)
    if terminal < 10:
        assert speeds[-1] == pytest.approx(terminal, rel=0.03)


def test_mujocos_default_blunt_drag_is_twice_a_spheres():
    """Why the coefficient is set: MuJoCo's default ellipsoid coefficients give a sphere Cd 1.0."""
    radius, mass = 0.02, 0.0027
    speed = falling_ball(radius, mass, None, 6.0)[-1]
    cd = 2 * mass * G / (contact.AIR_DENSITY * speed**2 * math.pi * radius**2)
    assert cd == pytest.approx(1.0, rel=0.03)


def test_pairs_cover_every_geom_the_ball_touched_and_nothing_else():
    spec = mujoco.MjSpec()
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1, 1, 0.1])
    spec.worldbody.add_geom(name="ghost", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1] * 3, pos=[1, 0, 0.5],
                            contype=0, conaffinity=0)
    wall = spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1] * 3, pos=[-1, 0, 0.5])
    add_free_ball(spec, "ball", [0, 0, 0.5], 0.02, 0.024)
    pairs = contact.add_bouncing_pairs(spec, "ball", 0.6, 0.4, 0.002, overrides={"floor": dict(condim=1)})
    assert set(pairs) == {"floor", wall.name} and wall.name  # the unnamed wall was named
    model = spec.compile()
    ball = model.geom("ball")
    assert ball.contype[0] == 0 and ball.conaffinity[0] == 0
    assert sorted(model.pair_dim.tolist()) == [1, 3]
    with pytest.raises(ValueError, match="does not touch"):
        contact.add_bouncing_pairs(spec, "ball", 0.6, 0.4, 0.002, overrides={"ghost": {}})
