"""Air drag applied explicitly: MuJoCo's own fluid forces as a passive force that the implicit
integrators do not differentiate.

With air in the model's options (``option.density`` > 0), MuJoCo pushes every body with mass
through its fluid model, and its implicit integrators (implicitfast, the scenes') differentiate
those forces for every body, every physics step: two thirds of a ball_in_cup step, where the
forces themselves cost about 2 us (issue 33; benchmarks/air_drag.py measures it). A scene built
with explicit air (``episodic.task.contact.add_air``) instead keeps the options' density and
viscosity at 0 and records the air in its numeric :data:`AIR` (density kg/m^3, viscosity Pa s);
:func:`install` makes ``episodic_air_drag`` (episodic/native/control.c) MuJoCo's passive-force
callback, which applies MuJoCo's fluid forces (mj_fluid: its ellipsoid model for a body with a
geom of fluid coefficients, the balls; its inertia-box model for every other body with mass,
ported operation for operation: they agree with MuJoCo's to 1e-16, tests/test_contact_air.py) in
that air, at the state each step starts from, as explicit forces.

MuJoCo's callbacks are global: the callback acts on every model of the process, and does
nothing for a model without the numeric. Without the compiled library it is :func:`air_drag`,
the same operations in Python (bit-identical, tested; slower).
"""
from __future__ import annotations

import math

import mujoco
import numpy as np

from episodic import native

AIR = "episodic_air"  # EPISODIC_AIR in episodic.h: the numeric (density kg/m^3, viscosity Pa s)


def install() -> None:
    """Make the explicit air drag MuJoCo's passive-force callback (mjcb_passive) in this process:
    the compiled ``episodic_air_drag`` when the library is built, else :func:`air_drag`."""
    if native.compiled():
        native.library().episodic_air_install()
    else:
        mujoco.set_mjcb_passive(air_drag)


def _pow4(x: float) -> float:
    return (x * x) * (x * x)


def _pow2(x: float) -> float:
    return x * x


def _max_moment(s: tuple[float, float, float], axis: int) -> float:
    return 8.0 / 15.0 * math.pi * s[axis] * _pow4(max(s[(axis + 1) % 3], s[(axis + 2) % 3]))


def _cross(a: tuple[float, ...], b: tuple[float, ...]) -> list[float]:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _norm3(v: tuple[float, ...] | list[float]) -> float:
    return math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])


def _semiaxes(size: np.ndarray, kind: int) -> tuple[float, float, float]:
    r = float(size[0])
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return r, r, r
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return r, r, float(size[1]) + r
    if kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return r, r, float(size[1])
    return r, float(size[1]), float(size[2])


def ellipsoid_force(lvel: np.ndarray, density: float, viscosity: float, s: tuple[float, float, float],
                    c: np.ndarray) -> list[float]:
    """Torque and force (6,) N m, N in the geom's frame on an ellipsoid of semiaxes ``s`` (3,) m
    moving at ``lvel`` (6,: angular rad/s, linear m/s, in its frame) with fluid coefficients ``c``
    (geom_fluid, 12,): episodic_air_drag's ellipsoid_force, the same operations in the same order."""
    blunt, slender, angular, kutta, magnus = (float(x) for x in c[1:6])
    virtual_mass, virtual_inertia = [float(x) for x in c[6:9]], [float(x) for x in c[9:12]]
    w, v = tuple(float(x) for x in lvel[:3]), tuple(float(x) for x in lvel[3:])
    lin_mom = tuple(density * virtual_mass[i] * v[i] for i in range(3))
    ang_mom = tuple(density * virtual_inertia[i] * w[i] for i in range(3))
    force, torque1, torque2 = _cross(lin_mom, w), _cross(lin_mom, v), _cross(ang_mom, w)
    lfrc = [0.0] * 6
    for i in range(3):
        lfrc[i] += torque1[i]
    for i in range(3):
        lfrc[i] += torque2[i]
    for i in range(3):
        lfrc[3 + i] += force[i]
    volume = 4.0 / 3.0 * math.pi * s[0] * s[1] * s[2]
    d_max, d_min = max(max(s[0], s[1]), s[2]), min(min(s[0], s[1]), s[2])
    d_mid = s[0] + s[1] + s[2] - d_max - d_min
    a_max = math.pi * d_max * d_mid
    magnus_force = [f * (magnus * density * volume) for f in _cross(w, v)]
    proj_denom = (_pow4(s[1] * s[2]) * _pow2(v[0]) + _pow4(s[2] * s[0]) * _pow2(v[1])
                  + _pow4(s[0] * s[1]) * _pow2(v[2]))
    proj_num = _pow2(s[1] * s[2] * v[0]) + _pow2(s[2] * s[0] * v[1]) + _pow2(s[0] * s[1] * v[2])
    a_proj = math.pi * math.sqrt(proj_denom / max(mujoco.mjMINVAL, proj_num))
    norm = (_pow2(s[1] * s[2]) * v[0], _pow2(s[2] * s[0]) * v[1], _pow2(s[0] * s[1]) * v[2])
    cos_alpha = proj_num / max(mujoco.mjMINVAL, _norm3(v) * proj_denom)
    kutta_circ = [f * (kutta * density * cos_alpha * a_proj) for f in _cross(norm, v)]
    kutta_force = _cross(tuple(kutta_circ), v)
    sphere_d = 2.0 / 3.0 * (s[0] + s[1] + s[2])
    visc_force, visc_torque = 3.0 * math.pi * sphere_d, math.pi * sphere_d * sphere_d * sphere_d
    i_max = 8.0 / 15.0 * math.pi * d_mid * _pow4(d_max)
    ii = [_max_moment(s, i) for i in range(3)]
    mom_visc = [w[i] * (angular * ii[i] + slender * (i_max - ii[i])) for i in range(3)]
    drag_lin = viscosity * visc_force + density * _norm3(v) * (a_proj * blunt + slender * (a_max - a_proj))
    drag_ang = viscosity * visc_torque + density * _norm3(mom_visc)
    for i in range(3):
        lfrc[i] -= drag_ang * w[i]
        lfrc[3 + i] += magnus_force[i] + kutta_force[i] - drag_lin * v[i]
    return lfrc


def _apply(m: mujoco.MjModel, d: mujoco.MjData, lfrc: np.ndarray, mat: np.ndarray, point: np.ndarray,
           body: int) -> None:
    """Rotate ``lfrc`` (6,: torque, force) from the frame ``mat`` (9,) to the world's and apply it
    at ``point`` (3,) to ``body``, into d.qfrc_fluid."""
    bfrc = np.zeros(6)
    mujoco.mju_mulMatVec3(bfrc[:3], mat, lfrc[:3])
    mujoco.mju_mulMatVec3(bfrc[3:], mat, lfrc[3:])
    mujoco.mj_applyFT(m, d, bfrc[3:], bfrc[:3], point, body, d.qfrc_fluid)


def _local_velocity(m: mujoco.MjModel, d: mujoco.MjData, kind: int, index: int, point: np.ndarray,
                    mat: np.ndarray, body: int) -> np.ndarray:
    """The object's 6D velocity (6,) in its own frame, less the wind's (mj_objectVelocity, local)."""
    lvel, wind, lwind = np.zeros(6), np.zeros(6), np.zeros(6)
    mujoco.mj_objectVelocity(m, d, kind, index, lvel, 1)
    wind[3:] = m.opt.wind
    mujoco.mju_transformSpatial(lwind, wind, 0, point, d.subtree_com[m.body_rootid[body]], mat)
    lvel[3:] -= lwind[3:]
    return lvel


def inertia_box(m: mujoco.MjModel, d: mujoco.MjData, b: int, density: float, viscosity: float) -> None:
    """Body ``b`` as the box of its inertia (mj_inertiaBoxFluidModel; inertia_box in C), into d.qfrc_fluid."""
    inertia, mass = [float(x) for x in m.body_inertia[b]], float(m.body_mass[b])
    box = [math.sqrt(max(mujoco.mjMINVAL, inertia[(i + 1) % 3] + inertia[(i + 2) % 3] - inertia[i]) / mass * 6.0)
           for i in range(3)]
    lvel = _local_velocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, d.xipos[b], d.ximat[b], b)
    lfrc = np.zeros(6)
    if viscosity > 0:
        diam = (box[0] + box[1] + box[2]) / 3.0
        lfrc[:3] = lvel[:3] * (-math.pi * diam * diam * diam * viscosity)
        lfrc[3:] = lvel[3:] * (-3.0 * math.pi * diam * viscosity)
    if density > 0:
        lo, hi = (1, 0, 0), (2, 2, 1)
        for i in range(3):
            v = float(lvel[3 + i])
            lfrc[3 + i] -= 0.5 * density * box[lo[i]] * box[hi[i]] * abs(v) * v
        for i in range(3):
            w, b1, b2 = float(lvel[i]), box[lo[i]], box[hi[i]]
            lfrc[i] -= density * box[i] * (b1 * b1 * b1 * b1 + b2 * b2 * b2 * b2) * abs(w) * w / 64.0
    _apply(m, d, lfrc, d.ximat[b], d.xipos[b], b)


def ellipsoids(m: mujoco.MjModel, d: mujoco.MjData, b: int, density: float, viscosity: float) -> None:
    """Each geom of body ``b`` with fluid coefficients (mj_ellipsoidFluidModel; ellipsoids in C), into
    d.qfrc_fluid."""
    for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b]):
        c = m.geom_fluid[g]
        if c[0] == 0.0:
            continue
        lvel = _local_velocity(m, d, mujoco.mjtObj.mjOBJ_GEOM, g, d.geom_xpos[g], d.geom_xmat[g], b)
        lfrc = np.array(ellipsoid_force(lvel, density, viscosity, _semiaxes(m.geom_size[g], m.geom_type[g]), c))
        lfrc *= c[0]
        _apply(m, d, lfrc, d.geom_xmat[g], d.geom_xpos[g], b)


def air_drag(m: mujoco.MjModel, d: mujoco.MjData) -> None:
    """episodic_air_drag in Python (the passive callback without the compiled library): MuJoCo's
    fluid forces in the air of ``m``'s numeric :data:`AIR`, added to d.qfrc_fluid and
    d.qfrc_passive; nothing for a model without it."""
    if not m.nnumeric:
        return
    air = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_NUMERIC, AIR)
    if air < 0 or m.numeric_size[air] != 2:
        return
    adr = m.numeric_adr[air]
    density, viscosity = float(m.numeric_data[adr]), float(m.numeric_data[adr + 1])
    for b in range(1, m.nbody):
        if m.body_mass[b] < mujoco.mjMINVAL:
            continue
        geoms = range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b])
        (ellipsoids if any(m.geom_fluid[g, 0] > 0 for g in geoms) else inertia_box)(m, d, b, density, viscosity)
    d.qfrc_passive += d.qfrc_fluid
