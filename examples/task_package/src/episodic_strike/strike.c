/* strike's feedback law (episodic_strike.Strike.compiled_law), run by episodic's compiled loop
 * without the interpreter lock: it pulls the tip toward the target through the transposed
 * Jacobian of the tip's position,
 *   offset_j = gain * sum_k J_kj (target_k - tip_k)   rad
 * with J (3, n) m/rad over the arm's joints and gain rad/m^2. Built into _strike_law.so by the
 * package's setup.py against episodic.h (episodic.native.include_dir) and the installed MuJoCo. */
#include "episodic.h"

#define STRIKE_MAX_JOINTS 16

typedef struct {
  mjtNum site;                    /* the tip's site id */
  mjtNum gain;                    /* rad/m^2 */
  mjtNum target[3];               /* m, world frame */
  mjtNum dof[STRIKE_MAX_JOINTS];  /* the arm's dof addresses, the first n used */
} param;

EPISODIC_LAW_PARAM(strike, param, EPISODIC_FIELD(param, site) EPISODIC_FIELD(param, gain)
                   EPISODIC_FIELD(param, target) EPISODIC_FIELD(param, dof))

void episodic_law_strike(const mjModel* m, mjData* d, int n, const void* parameters, mjtNum* memory,
                         mjtNum* offset) {
  (void)memory;
  const param* p = parameters;
  int site = (int)p->site, nv = m->nv;
  const mjtNum* tip = d->site_xpos + 3 * site;
  mjtNum e[3] = {p->target[0] - tip[0], p->target[1] - tip[1], p->target[2] - tip[2]};
  mj_markStack(d);
  mjtNum* jacp = mj_stackAllocNum(d, 3 * nv);
  mj_jacSite(m, d, jacp, NULL, site);
  for (int j = 0; j < n; j++) {
    int v = (int)p->dof[j];
    offset[j] = p->gain * (jacp[v] * e[0] + jacp[nv + v] * e[1] + jacp[2 * nv + v] * e[2]);
  }
  mj_freeStack(d);
}
