/* ball_bouncing's feedback law (tasks/ball_bouncing.py), a mirror law: the face tilts toward its
 * centre by the horizontal vector t = -(k_r r + k_v v) rad, clipped to max_tilt, r m the ball's
 * horizontal offset from the face's centre and v m/s its horizontal velocity relative to the
 * face, from the ball's horizontal position and velocity as the tracker senses them
 * (episodic_sense: late and noisy) and the face's present pose and velocity (the joint
 * encoders); the last three joints (the wrist) get the offsets that turn the face normal by t,
 * by damped least squares on the wrist's angular Jacobian J: J^T (J J^T + damping I)^-1 (z x t).
 * param: a param (BallBouncing.compiled_law fills it by name); memory: the sensing memory block. */
#include <math.h>

#include "episodic.h"

typedef struct {
  mjtNum face;        /* the racket face's site id */
  mjtNum ball_qpos;   /* the ball's qpos address */
  mjtNum ball_dof;    /* the ball's dof address */
  mjtNum k_r;         /* rad/m */
  mjtNum k_v;         /* rad s/m */
  mjtNum max_tilt;    /* rad */
  mjtNum damping;     /* rad^2 */
  mjtNum wrist[3];    /* the wrist joints' dof addresses */
  episodic_sensing sensing;  /* the tracker of the ball's x, y m and vx, vy m/s */
} param;

EPISODIC_LAW_PARAM(ball_bouncing, param, EPISODIC_FIELD(param, face) EPISODIC_FIELD(param, ball_qpos)
                   EPISODIC_FIELD(param, ball_dof) EPISODIC_FIELD(param, k_r) EPISODIC_FIELD(param, k_v)
                   EPISODIC_FIELD(param, max_tilt) EPISODIC_FIELD(param, damping) EPISODIC_FIELD(param, wrist)
                   EPISODIC_FIELD(param, sensing))

void episodic_law_ball_bouncing(const mjModel* m, mjData* d, int n, const void* parameters, mjtNum* memory,
                                mjtNum* offset) {
  const param* p = parameters;
  int site = (int)p->face, qa = (int)p->ball_qpos, va = (int)p->ball_dof, nv = m->nv;
  mjtNum truth[4] = {d->qpos[qa], d->qpos[qa + 1], d->qvel[va], d->qvel[va + 1]}, ball[4];
  episodic_sense(&p->sensing, memory, truth, ball);
  mj_markStack(d);
  mjtNum* jacp = mj_stackAllocNum(d, 3 * nv);
  mjtNum* jacr = mj_stackAllocNum(d, 3 * nv);
  mj_jacSite(m, d, jacp, jacr, site);
  mjtNum tilt[2];
  for (int i = 0; i < 2; i++) {
    mjtNum r = ball[i] - d->site_xpos[3 * site + i];
    mjtNum v = ball[2 + i] - mju_dot(jacp + i * nv, d->qvel, nv);
    tilt[i] = -(p->k_r * r + p->k_v * v);
  }
  mjtNum size = hypot(tilt[0], tilt[1]);
  if (size > p->max_tilt) {
    mju_scl(tilt, tilt, p->max_tilt / size, 2);
  }
  /* J (3 x 3): the wrist's columns of the angular Jacobian; A = J J^T + damping I */
  mjtNum wrist[9], a[9];
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++) {
      wrist[3 * i + j] = jacr[i * nv + (int)p->wrist[j]];
    }
  }
  mju_mulMatMatT(a, wrist, wrist, 3, 3, 3);
  for (int i = 0; i < 3; i++) {
    a[4 * i] += p->damping;
  }
  /* turn the normal about z x t, not about the normal itself */
  mjtNum turn[3] = {-tilt[1], tilt[0], 0.0}, x[3];
  mju_cholFactor(a, 3, 0.0);
  mju_cholSolve(x, a, turn, 3);
  mju_mulMatTVec(offset + n - 3, wrist, x, 3, 3);
  mj_freeStack(d);
}
