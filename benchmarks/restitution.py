"""Oblique impacts of every calibrated ball contact pair, as the tasks build them.

    python benchmarks/restitution.py [--ratios 0 0.5 1 1.5 2 2.5 3] [--phases 8] [--vn 2.0]
                                     [--tasks beer_pong tetherball ...]

For each task, its model is built (the WAM, the task's scene) and every contact pair of its ball
with friction (condim > 1) and a distinct set of parameters is taken as compiled: solref,
solreffriction, solimp, friction, and the model's options that shape a contact (timestep,
integrator, friction cone, impratio, noslip iterations and tolerance). The same pair, between
the task's ball (its radius, mass and inertia) and a fixed box, is then hit without gravity at the
normal speed ``--vn`` m/s and the tangential speed ratio x vn, without spin, ``--phases`` times
with the impact falling at evenly spread points of a physics step. Printed per pair and ratio
v_t/v_n (means over the phases):

* ``e_n``: the normal restitution v_n' / v_n, next to the pair's stated restitution (the one its
  solref was calibrated for, episodic.contact.discrete_restitution);
* ``v_t'``: v_t' / v_t after the impact, and what the rigid-body impulse theory of a sphere with
  Coulomb friction gives for the pair's e, mu and I / (m r^2) (in brackets);
* ``spin``: omega' r / v_t, and the theory's.

Rigid-body theory (e.g. Cross, Am. J. Phys. 70, 482 (2002); Brach, Mechanical Impact Dynamics,
1991, ch. 4): the friction impulse is at most mu (1 + e) m v_n; if that is enough to bring the
contact point to rest (v_t k / (1 + k) with k = I / (m r^2)) the ball leaves rolling,
v_t' = v_t / (1 + k); otherwise it slides throughout, v_t' = v_t - mu (1 + e) v_n and
omega' r = mu (1 + e) v_n / k.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import mujoco
import numpy as np

from episodic.contact import discrete_restitution
from episodic.robot import load_robot
from episodic.scene import build_scene
from episodic.tasks import make_task

BALL_TASKS = ("beer_pong", "tetherball", "ball_bouncing", "ball_paddling", "casting", "ball_in_cup", "ball_on_beam")
RATIOS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)


@dataclass
class CompiledPair:
    """A ball's contact pair as a task's compiled model has it, with the ball and the options."""

    task: str
    surface: str
    solref: np.ndarray
    solreffriction: np.ndarray
    solimp: np.ndarray
    friction: np.ndarray
    condim: int
    radius: float
    mass: float
    inertia: np.ndarray
    options: dict

    @property
    def restitution(self) -> float:
        """The restitution the pair's direct solref (-k, -b) was calibrated for."""
        omega = math.sqrt(-self.solref[0])
        return discrete_restitution(-self.solref[1] / (2 * omega), omega, self.options["timestep"])

    @property
    def inertia_factor(self) -> float:
        """k = I / (m r^2): 0.4 for a solid sphere, 2/3 for a thin shell."""
        return float(self.inertia[0] / (self.mass * self.radius**2))


OPTIONS = ("timestep", "integrator", "cone", "impratio", "noslip_iterations", "noslip_tolerance", "solver",
           "iterations", "tolerance")


def ball_pairs(task: str, ball: str = "ball") -> list[CompiledPair]:
    """The distinct frictional contact pairs of the geom ``ball`` in ``task``'s model."""
    model = build_scene(load_robot("wam"), make_task(task)).model
    ball_id = model.geom(ball).id
    body = model.geom_bodyid[ball_id]
    options = {name: getattr(model.opt, name) for name in OPTIONS}
    pairs, seen = [], set()
    for i in range(model.npair):
        ends = (model.pair_geom1[i], model.pair_geom2[i])
        if ball_id not in ends or model.pair_dim[i] == 1:
            continue
        key = (tuple(model.pair_solref[i]), tuple(model.pair_solreffriction[i]), tuple(model.pair_solimp[i]),
               tuple(model.pair_friction[i]), int(model.pair_dim[i]))
        if key in seen:
            continue
        seen.add(key)
        other = ends[1] if ends[0] == ball_id else ends[0]
        pairs.append(CompiledPair(task, model.geom(other).name, model.pair_solref[i].copy(),
                                  model.pair_solreffriction[i].copy(), model.pair_solimp[i].copy(),
                                  model.pair_friction[i].copy(), int(model.pair_dim[i]),
                                  float(model.geom_size[ball_id][0]), float(model.body_mass[body]),
                                  model.body_inertia[body].copy(), options))
    return pairs


def impact(pair: CompiledPair, vn: float, vt: float, phase: float) -> tuple[float, float, float]:
    """The ball of ``pair`` hits a fixed box through the pair at normal speed ``vn`` and
    tangential speed ``vt`` m/s, without spin or gravity, the impact falling at ``phase`` (0-1)
    of a physics step: (v_n' / v_n, v_t' m/s, omega' r m/s) once it has left."""
    spec = mujoco.MjSpec()
    for name, value in pair.options.items():
        setattr(spec.option, name, value)
    spec.option.gravity = [0.0, 0.0, 0.0]
    spec.worldbody.add_geom(name="surface", type=mujoco.mjtGeom.mjGEOM_BOX, size=[5.0, 5.0, 0.05],
                            pos=[0.0, 0.0, -0.05], contype=0, conaffinity=0)
    body = spec.worldbody.add_body(name="ball", pos=[0.0, 0.0, 1.0])
    body.add_freejoint()
    body.explicitinertial = True
    body.mass, body.ipos, body.iquat, body.inertia = pair.mass, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], list(pair.inertia)
    body.add_geom(name="ball", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[pair.radius, 0, 0], contype=0, conaffinity=0)
    compiled = spec.add_pair(geomname1="ball", geomname2="surface", condim=pair.condim)
    compiled.solref, compiled.solreffriction = list(pair.solref), list(pair.solreffriction)
    compiled.solimp, compiled.friction = list(pair.solimp), list(pair.friction)
    model = spec.compile()
    data = mujoco.MjData(model)
    dt = model.opt.timestep
    data.qpos[2], data.qvel[0], data.qvel[2] = pair.radius + (1.0 - phase) * vn * dt, vt, -vn
    touched = False
    for _ in range(int(0.2 / dt)):
        mujoco.mj_step(model, data)
        touched = touched or data.ncon > 0
        if touched and data.ncon == 0:
            break
    return data.qvel[2] / vn, data.qvel[0], data.qvel[4] * pair.radius  # free joint: spin about y in the ball's frame


def rigid_impact(restitution: float, friction: float, inertia_factor: float, ratio: float) -> tuple[float, float]:
    """Rigid-body impact of a sphere without spin at v_t / v_n = ``ratio`` > 0 (module
    docstring): (v_t' / v_t, omega' r / v_t)."""
    impulse = friction * (1.0 + restitution) / ratio  # the most friction can take, over v_t
    if impulse >= inertia_factor / (1.0 + inertia_factor):
        rolling = 1.0 / (1.0 + inertia_factor)
        return rolling, rolling
    return 1.0 - impulse, impulse / inertia_factor


def sweep(pair: CompiledPair, ratios, vn: float, phases: int) -> list[tuple[float, float, float]]:
    """(e_n, v_t' / v_t, omega' r / v_t) per ratio, means over ``phases`` impacts."""
    rows = []
    for ratio in ratios:
        runs = np.array([impact(pair, vn, ratio * vn, (i + 0.5) / phases) for i in range(phases)])
        normal, tangential, spin = runs.mean(axis=0)
        rows.append((normal, tangential / (ratio * vn) if ratio else math.nan, spin / (ratio * vn) if ratio else math.nan))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratios", type=float, nargs="+", default=list(RATIOS), help="v_t / v_n values")
    parser.add_argument("--phases", type=int, default=8, help="impacts per ratio, spread over a physics step")
    parser.add_argument("--vn", type=float, default=2.0, help="normal impact speed, m/s")
    parser.add_argument("--tasks", nargs="+", default=list(BALL_TASKS), choices=BALL_TASKS)
    args = parser.parse_args()
    print("v_t/v_n:", " ".join(f"{r:g}" for r in args.ratios))
    worst = 0.0
    for task in args.tasks:
        for pair in ball_pairs(task):
            e, mu, k = pair.restitution, float(pair.friction[0]), pair.inertia_factor
            rows = sweep(pair, args.ratios, args.vn, args.phases)
            opts = pair.options
            print(f"\n{task} ball/{pair.surface}: stated e {e:.3f}, mu {mu:g}, I/(m r^2) {k:.3f}, dt {opts['timestep'] * 1e3:g} ms, "
                  f"impratio {opts['impratio']:g}, noslip {opts['noslip_iterations']}, "
                  f"solreffriction ({pair.solreffriction[0]:.4g}, {pair.solreffriction[1]:g})")
            print("  e_n  :", " ".join(f"{n:6.3f}" for n, _, _ in rows))
            theory = [rigid_impact(e, mu, k, r) if r else (math.nan, math.nan) for r in args.ratios]
            print("  v_t' :", " ".join(f"{t:6.3f}" for _, t, _ in rows), "  (theory",
                  " ".join(f"{t:.3f}" for t, _ in theory) + ")")
            print("  spin :", " ".join(f"{s:6.3f}" for _, _, s in rows), "  (theory",
                  " ".join(f"{s:.3f}" for _, s in theory) + ")")
            worst = max(worst, max(abs(n - e) for n, _, _ in rows))
    print(f"\nlargest |e_n - stated e| over every pair and ratio: {worst:.3f}")


if __name__ == "__main__":
    main()
