/* ball_on_beam's feedback law (tasks/ball_on_beam.py):
 *   q7_desired = q7_held + clip(k_x x + k_v xd, -max_tilt, max_tilt)
 * with x m, xd m/s the ball's centre along the beam and its rate in the beam's frame, from the
 * ball's world position and velocity as the tracker senses them (episodic_sense: late and noisy)
 * and the beam's present pose and velocity (the joint encoders).
 * param: a param (BallOnBeam.compiled_law fills it by name); memory: the sensing memory block. */
#include "episodic.h"

typedef struct {
  mjtNum beam;        /* the beam's body id */
  mjtNum ball_qpos;   /* the ball's qpos address */
  mjtNum ball_dof;    /* the ball's dof address */
  mjtNum k_x;         /* rad/m */
  mjtNum k_v;         /* rad s/m */
  mjtNum max_tilt;    /* rad */
  episodic_sensing sensing;  /* the tracker of the ball's position (3) m and velocity (3) m/s */
} param;

EPISODIC_LAW_PARAM(ball_on_beam, param, EPISODIC_FIELD(param, beam) EPISODIC_FIELD(param, ball_qpos)
                   EPISODIC_FIELD(param, ball_dof) EPISODIC_FIELD(param, k_x) EPISODIC_FIELD(param, k_v)
                   EPISODIC_FIELD(param, max_tilt) EPISODIC_FIELD(param, sensing))

void episodic_law_ball_on_beam(const mjModel* m, mjData* d, int n, const void* parameters, mjtNum* memory,
                               mjtNum* offset) {
  const param* p = parameters;
  int beam = (int)p->beam, qa = (int)p->ball_qpos, va = (int)p->ball_dof;
  mjtNum truth[6], ball[6];
  mju_copy(truth, d->qpos + qa, 3);
  mju_copy(truth + 3, d->qvel + va, 3);
  episodic_sense(&p->sensing, memory, truth, ball);
  mjtNum spin[6];
  mj_objectVelocity(m, d, mjOBJ_XBODY, beam, spin, 0);
  mjtNum wx = spin[0], wy = spin[1], wz = spin[2], vx = spin[3], vy = spin[4], vz = spin[5];
  const mjtNum* o = d->xpos + 3 * beam;
  const mjtNum* r = d->xmat + 9 * beam;
  mjtNum ex = r[0], ey = r[3], ez = r[6];  /* the beam's axis, world frame */
  mjtNum rx = ball[0] - o[0], ry = ball[1] - o[1], rz = ball[2] - o[2];
  const mjtNum* b = ball + 3;
  mjtNum x = rx * ex + ry * ey + rz * ez;
  /* d/dt ((p - o) . e) = (v_ball - v_o) . e + (p - o) . (w x e) */
  mjtNum xd = (b[0] - vx) * ex + (b[1] - vy) * ey + (b[2] - vz) * ez
              + rx * (wy * ez - wz * ey) + ry * (wz * ex - wx * ez) + rz * (wx * ey - wy * ex);
  offset[n - 1] = episodic_clip(p->k_x * x + p->k_v * xd, -p->max_tilt, p->max_tilt);
}
