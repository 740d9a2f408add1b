/* ball_bouncing's feedback law (tasks/ball_bouncing.py), a mirror law: the face tilts toward its
 * centre by the horizontal vector t = -(k_r r + k_v v) rad, clipped to max_tilt, r m the ball's
 * horizontal offset from the face's centre and v m/s its horizontal velocity relative to the
 * face, from the ball's horizontal position and velocity as the tracker senses them
 * (episodic_sense: late and noisy) and the face's present pose and velocity (the joint
 * encoders); the last three joints (the wrist) get the offsets that turn the face normal by t,
 * by damped least squares on the wrist's angular Jacobian J: J^T (J J^T + damping I)^-1 (z x t).
 * param: the face's site id, the ball's qpos and dof addresses, k_r rad/m, k_v rad s/m,
 * max_tilt rad, damping rad^2, the wrist joints' three dof addresses, then the sensing block of
 * the ball's x, y m and vx, vy m/s (BallBouncing.compiled_law builds it); memory: the sensing
 * block. */
#include <math.h>

#include "episodic.h"

enum { SITE, BALL_QPOS, BALL_DOF, K_R, K_V, MAX_TILT, DAMPING, WRIST, SENSING = WRIST + 3 };

void episodic_law_ball_bouncing(const mjModel* m, mjData* d, int n, const mjtNum* param, mjtNum* memory,
                                mjtNum* offset) {
  int site = (int)param[SITE], qa = (int)param[BALL_QPOS], va = (int)param[BALL_DOF], nv = m->nv;
  mjtNum truth[4] = {d->qpos[qa], d->qpos[qa + 1], d->qvel[va], d->qvel[va + 1]}, ball[4];
  episodic_sense(param + SENSING, memory, truth, ball);
  mj_markStack(d);
  mjtNum* jacp = mj_stackAllocNum(d, 3 * nv);
  mjtNum* jacr = mj_stackAllocNum(d, 3 * nv);
  mj_jacSite(m, d, jacp, jacr, site);
  mjtNum tilt[2];
  for (int i = 0; i < 2; i++) {
    mjtNum r = ball[i] - d->site_xpos[3 * site + i];
    mjtNum v = ball[2 + i] - mju_dot(jacp + i * nv, d->qvel, nv);
    tilt[i] = -(param[K_R] * r + param[K_V] * v);
  }
  mjtNum size = hypot(tilt[0], tilt[1]);
  if (size > param[MAX_TILT]) {
    mju_scl(tilt, tilt, param[MAX_TILT] / size, 2);
  }
  /* J (3 x 3): the wrist's columns of the angular Jacobian; A = J J^T + damping I */
  mjtNum wrist[9], a[9];
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++) {
      wrist[3 * i + j] = jacr[i * nv + (int)param[WRIST + j]];
    }
  }
  mju_mulMatMatT(a, wrist, wrist, 3, 3, 3);
  for (int i = 0; i < 3; i++) {
    a[4 * i] += param[DAMPING];
  }
  /* turn the normal about z x t, not about the normal itself */
  mjtNum turn[3] = {-tilt[1], tilt[0], 0.0}, x[3];
  mju_cholFactor(a, 3, 0.0);
  mju_cholSolve(x, a, turn, 3);
  mju_mulMatTVec(offset + n - 3, wrist, x, 3, 3);
  mj_freeStack(d);
}
