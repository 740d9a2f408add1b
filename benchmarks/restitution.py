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
  solref was calibrated for, episodic.task.contact.pair_restitution);
* ``v_t'``: v_t' / v_t after the impact, and what the rigid-body impulse theory of a sphere with
  Coulomb friction gives for the pair's e, mu and I / (m r^2) (in brackets);
* ``spin``: omega' r / v_t, and the theory's.

Rigid-body theory (e.g. Cross, Am. J. Phys. 70, 482 (2002); Brach, Mechanical Impact Dynamics,
1991, ch. 4): the friction impulse is at most mu (1 + e) m v_n; if that is enough to bring the
contact point to rest (v_t k / (1 + k) with k = I / (m r^2)) the ball leaves rolling,
v_t' = v_t / (1 + k); otherwise it slides throughout, v_t' = v_t - mu (1 + e) v_n and
omega' r = mu (1 + e) v_n / k (episodic.task.contact.rigid_sphere_impact).

The measurement is episodic.task.contact.measure_oblique_impact; the first version of this script
(commit f7abada) measured the same way before ball contacts had their friction re-solved apart
from the normal force.
"""
from __future__ import annotations

import argparse
import math

from episodic.interface.robot import load_robot
from episodic.runtime.scene import build_scene
from episodic.task.contact import measure_oblique_impact, pair_restitution, rigid_sphere_impact
from episodic.tasks import make_task

BALL_TASKS = ("beer_pong", "tetherball", "ball_bouncing", "ball_paddling", "casting", "ball_in_cup", "ball_on_beam")
RATIOS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)


def ball_pairs(model, ball: str = "ball") -> list[int]:
    """The model's frictional (condim > 1) contact pairs of the geom ``ball``, one of each set
    of parameters."""
    ball_id = model.geom(ball).id
    pairs, seen = [], set()
    for i in range(model.npair):
        if ball_id not in (model.pair_geom1[i], model.pair_geom2[i]) or model.pair_dim[i] == 1:
            continue
        key = (tuple(model.pair_solref[i]), tuple(model.pair_solreffriction[i]), tuple(model.pair_solimp[i]),
               tuple(model.pair_friction[i]), int(model.pair_dim[i]))
        if key not in seen:
            seen.add(key)
            pairs.append(i)
    return pairs


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
        model = build_scene(load_robot("wam"), make_task(task)).model
        ball = model.geom("ball")
        body = ball.bodyid[0]
        k = model.body_inertia[body][0] / (model.body_mass[body] * ball.size[0] ** 2)
        for pair in ball_pairs(model):
            e, mu = pair_restitution(model, pair), float(model.pair_friction[pair][0])
            ends = (model.pair_geom1[pair], model.pair_geom2[pair])
            surface = model.geom(ends[1] if ends[0] == ball.id else ends[0]).name
            rows = [measure_oblique_impact(model, pair, "ball", args.vn, r * args.vn, args.phases) for r in args.ratios]
            theory = [rigid_sphere_impact(e, mu, k, r) if r else (math.nan, math.nan) for r in args.ratios]
            solreffriction = model.pair_solreffriction[pair]
            print(f"\n{task} ball/{surface}: stated e {e:.3f}, mu {mu:g}, I/(m r^2) {k:.3f}, "
                  f"dt {model.opt.timestep * 1e3:g} ms, impratio {model.opt.impratio:g}, "
                  f"noslip {model.opt.noslip_iterations}, "
                  f"solreffriction ({solreffriction[0]:.4g}, {solreffriction[1]:g})")
            print("  e_n  :", " ".join(f"{row.normal:6.3f}" for row in rows))
            print("  v_t' :", " ".join(f"{row.tangential:6.3f}" for row in rows), "  (theory",
                  " ".join(f"{t:.3f}" for t, _ in theory) + ")")
            print("  spin :", " ".join(f"{row.spin:6.3f}" for row in rows), "  (theory",
                  " ".join(f"{s:.3f}" for _, s in theory) + ")")
            worst = max(worst, max(abs(row.normal - e) for row in rows))
    print(f"\nlargest |e_n - stated e| over every pair and ratio: {worst:.3f}")


if __name__ == "__main__":
    main()
