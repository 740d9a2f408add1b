/* pole_balancing's feedback law (tasks/pole_balancing.py): a pivot offset u m along h, sent as
 * joint offsets v u rad,
 *   u_b = k_phi phi + k_phid phi_d + k_s s + k_sd s_d                     (balance)
 *   u = w u_b + (1 - w) clip(u_E, -a_swing, a_swing)                      (with the swing-up)
 * clipped to +-max_offset, with phi and phi_d as the tracker senses them (episodic_sense: late
 * and noisy) and s, s_d the pivot's present travel and rate (the joint encoders). param: a
 * param (PoleBalancing.compiled_law fills it by name); memory: the last sensed phi_d rad/s, the
 * pump's gain, then the sensing memory block. */
#include <math.h>

#include "episodic.h"

enum { MAX_JOINTS = 16 };  /* the most joints a robot may have for this law (v's room) */

typedef struct {
  mjtNum pole;        /* the pole's body id */
  mjtNum n_gains;     /* 4 (balance) or 8 (with the swing-up) */
  mjtNum max_offset;  /* m */
  mjtNum omega0;      /* rad/s, the pole's natural frequency */
  mjtNum h[3];        /* the pivot's direction of travel, world */
  mjtNum p0[3];       /* m, the pole's start position, world */
  mjtNum gains[8];    /* k_phi, k_phid, k_s, k_sd, then k_e, a_swing, phi_catch, theta_back (unused with 4) */
  episodic_sensing sensing;  /* the tracker of phi rad and phi_d rad/s */
  mjtNum v[MAX_JOINTS];  /* rad/m, the joint offsets of a unit pivot offset (n of them) */
} param;

EPISODIC_LAW_PARAM(pole_balancing, param, EPISODIC_FIELD(param, pole) EPISODIC_FIELD(param, n_gains)
                   EPISODIC_FIELD(param, max_offset) EPISODIC_FIELD(param, omega0) EPISODIC_FIELD(param, h)
                   EPISODIC_FIELD(param, p0) EPISODIC_FIELD(param, gains) EPISODIC_FIELD(param, sensing)
                   EPISODIC_FIELD(param, v))

enum { LAST_PHID, PUMP_GAIN, SENSED };
/* the pump's energy (units of m g d) per half swing at full gain, about */
static const mjtNum SWING_BAND = 0.45;

/* Python's max(x, y): a NaN x stays NaN */
static mjtNum larger(mjtNum x, mjtNum y) {
  return y > x ? y : x;
}

void episodic_law_pole_balancing(const mjModel* m, mjData* d, int n, const void* parameters, mjtNum* memory,
                                 mjtNum* offset) {
  const param* p = parameters;
  int pole = (int)p->pole;
  const mjtNum *h = p->h, *p0 = p->p0, *g = p->gains, *v = p->v;
  mjtNum omega0 = p->omega0;
  const mjtNum* r = d->xmat + 9 * pole;
  mjtNum hx = r[0], hy = r[3], hz = r[6];  /* hinge axis (the pole frame's x), world */
  mjtNum ax = r[2], ay = r[5], az = r[8];  /* along the pole (its z), world */
  /* angle about the hinge from up to the pole: atan2((up x along) . hinge, along . up) */
  mjtNum vel[6];
  mj_objectVelocity(m, d, mjOBJ_XBODY, pole, vel, 0);
  mjtNum truth[2] = {atan2(-ay * hx + ax * hy, az), vel[0] * hx + vel[1] * hy + vel[2] * hz}, sensed[2];
  episodic_sense(&p->sensing, memory + SENSED, truth, sensed);
  mjtNum phi = sensed[0], phid = sensed[1];
  const mjtNum* x = d->xpos + 3 * pole;
  mjtNum s = h[0] * (x[0] - p0[0]) + h[1] * (x[1] - p0[1]) + h[2] * (x[2] - p0[2]);
  mjtNum sd = h[0] * vel[3] + h[1] * vel[4] + h[2] * vel[5];
  mjtNum u = g[0] * phi + g[1] * phid + g[2] * s + g[3] * sd;
  if (p->n_gains == 8) {
    mjtNum k_e = g[4], a_swing = g[5], phi_catch = g[6], theta_back = g[7];
    if (phid * memory[LAST_PHID] <= 0 && phid != 0) {  /* a turning point: the next half swing's gain */
      mjtNum energy = phid * phid / (2 * (omega0 * omega0)) + cos(phi);
      mjtNum target = phid < 0 ? 1.0 : -cos(theta_back);
      memory[PUMP_GAIN] = episodic_clip((target - energy) / SWING_BAND, 0.0, 1.0)
                          / larger(sqrt(larger(energy + 1.0, 0.0) / 2), 0.1);
    }
    mjtNum pump = k_e * memory[PUMP_GAIN] * phid * cos(phi) / omega0;
    mjtNum weight = phi_catch > 0 ? episodic_clip(2.0 - 2.0 * fabs(phi) / phi_catch, 0.0, 1.0) : 0.0;
    u = weight * u + (1.0 - weight) * episodic_clip(pump, -a_swing, a_swing);
  }
  memory[LAST_PHID] = phid;
  u = episodic_clip(u, -p->max_offset, p->max_offset);
  for (int j = 0; j < n; j++) {
    offset[j] = v[j] * u;
  }
}
