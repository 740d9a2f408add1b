/* The blocking control loop: SL's law one control tick at a time, with the task's feedback law,
 * inverse dynamics at the measured state and the integral term, in C. It mirrors
 * episodic.runtime.simulation.Simulation._run_python (and episodic.runtime.control.Controller.tick) operation for
 * operation, in the same order, so both give bit-identical results (tested; compiled without
 * floating-point contraction, see setup.py). */
#define _DEFAULT_SOURCE  /* POSIX sigaction and NSIG under -std=c11 (declarations only) */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "episodic.h"

/* MuJoCo's thread-local log handler and its global one: exported by libmujoco and declared in
 * its Python bindings' private header, which use them the same way (an error inside MuJoCo
 * otherwise ends the process) */
MJAPI mjfLogHandler _mjPRIVATE_setTlsLogHandler(mjfLogHandler handler);
MJAPI mjfLogHandler _mjPRIVATE_getGlobalLogHandler(void);

int episodic_mujoco_version(void) {
  return mjVERSION_HEADER;
}

#define EPISODIC_SEGMENT_FIELD(type, name) EPISODIC_FIELD(episodic_segment, name)
const episodic_field episodic_segment_fields[] = {EPISODIC_SEGMENT_FIELDS(EPISODIC_SEGMENT_FIELD) {NULL, 0, 0}};

size_t episodic_segment_size(void) {
  return sizeof(episodic_segment);
}

/* what guarded() needs to come back from an error: where to jump, the handler it replaced,
 * where the error's text goes, and d's stack to put back */
typedef struct {
  jmp_buf back;
  mjfLogHandler outer;
  char* text;
  size_t pstack, pbase;
} guard;

static _Thread_local guard* active;

/* errors jump back to guarded(); warnings and the rest go where they went before */
static void on_log(const mjLogMessage* msg) {
  if (msg->level == mjLOG_ERROR) {
    snprintf(active->text, EPISODIC_ERROR_SIZE, "%s", msg->subject);
    longjmp(active->back, 1);
  }
  (active->outer ? active->outer : _mjPRIVATE_getGlobalLogHandler())(msg);
}

/* body(arg) on d with MuJoCo's errors turned into a return of 1 (the text in text, d's stack
 * frames released) instead of the end of the process; 0 when it ran through */
static int guarded(void (*body)(void*), void* arg, mjData* d, char* text) {
  guard g = {.text = text, .pstack = d->pstack, .pbase = d->pbase};
  guard* enclosing = active;
  g.outer = _mjPRIVATE_setTlsLogHandler(on_log);
  active = &g;
  int failed = setjmp(g.back);
  if (!failed) {
    body(arg);
  } else {
    d->pstack = g.pstack;
    d->pbase = g.pbase;
  }
  active = enclosing;
  _mjPRIVATE_setTlsLogHandler(g.outer);
  return failed;
}

/* u_ff (n_dofs,) N m of step k (Controller._feedforward): inverse dynamics of the desired state
 * (FEEDFORWARD), at the measured q, qd with the desired qdd (INVERSE_DYNAMICS) or at rest at the
 * measured q (GRAVITY_COMPENSATION); 0 on passive joints */
static void feedforward(const episodic_segment* s, int k, const mjtNum* q, mjtNum* u_ff) {
  int nd = s->n_dofs;
  mjData* dd = s->dynamics_data;
  if (s->feedforward == EPISODIC_FF_FEEDFORWARD) {
    mju_copy(dd->qpos, s->q_d + k * nd, nd);
    mju_copy(dd->qvel, s->qd_d + k * nd, nd);
    mju_copy(dd->qacc, s->qdd_d + k * nd, nd);
  } else if (s->feedforward == EPISODIC_FF_INVERSE_DYNAMICS) {
    mju_copy(dd->qpos, q, nd);
    for (int j = 0; j < nd; j++) {
      dd->qvel[j] = s->data->qvel[s->dof_adr[j]];
    }
    mju_copy(dd->qacc, s->qdd_d + k * nd, nd);
  } else {
    mju_copy(dd->qpos, q, nd);
    mju_zero(dd->qvel, nd);
    mju_zero(dd->qacc, nd);
  }
  mj_inverse(s->dynamics, dd);
  for (int j = 0; j < nd; j++) {
    u_ff[j] = s->passive[j] ? 0.0 : dd->qfrc_inverse[j];
  }
}

/* Stop signals (episodic_stop_on): set by the signal, read by a run before each control step.
 * A process's Python handlers run only once a run has returned, so a long run would otherwise
 * keep a stopping runner alive for as long as it lasts. */
static volatile sig_atomic_t stop_requested = 0;
static struct sigaction chained[NSIG];  /* the handler each stop signal had before, called after ours */

static void on_stop(int sig, siginfo_t* info, void* context) {
  stop_requested = 1;
  const struct sigaction* next = &chained[sig];
  if (next->sa_flags & SA_SIGINFO) {
    if (next->sa_sigaction) next->sa_sigaction(sig, info, context);
  } else if (next->sa_handler == SIG_DFL) {  /* no handler before ours: the default action, as before */
    sigaction(sig, next, NULL);
    raise(sig);
  } else if (next->sa_handler != SIG_IGN) {
    next->sa_handler(sig);
  }
}

int episodic_stop_on(int sig) {
  struct sigaction now;
  if (sig <= 0 || sig >= NSIG || sigaction(sig, NULL, &now) != 0) return -1;
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_stop) return 0;  /* armed already */
  chained[sig] = now;
  struct sigaction mine = now;
  mine.sa_sigaction = on_stop;
  mine.sa_flags = (now.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
  return sigaction(sig, &mine, NULL);
}

void episodic_stop_clear(void) {
  stop_requested = 0;
}

static void run(void* arg) {
  const episodic_segment* s = arg;
  const mjModel* m = s->model;
  mjData* d = s->data;
  int n = s->n, nd = s->n_dofs, sub = s->substeps;
  int nstate = mj_stateSize(m, s->state_spec);
  mjtNum q[nd], offset[nd], u_i[nd], planned[nd], step[nd];
  mj_getState(m, d, s->states, s->state_spec);
  for (int k = 0; k < n; k++) {
    if (stop_requested) {
      snprintf(s->error, EPISODIC_ERROR_SIZE, "a stop signal ended the run before control step %d of %d", k, n);
      longjmp(active->back, 2);
    }
    mjtNum* q_d = s->q_d + k * nd;
    mjtNum* reference = s->reference + k * nd;
    mjtNum* u_ff = s->u_ff + k * nd;
    mjtNum* ctrl = s->ctrl + k * nd;
    mj_step1(m, d);  /* the present state's positions and velocities: what the tick reads */
    /* the tick (Controller.tick) */
    for (int j = 0; j < nd; j++) {
      q[j] = d->qpos[s->qpos_adr[j]];
      planned[j] = reference[j];
    }
    if (s->feedforward != EPISODIC_FF_NONE) {
      feedforward(s, k, q, u_ff);
    }
    if (s->law) {
      mju_zero(offset, nd);
      s->law(m, d, nd, s->law_param, s->law_memory, offset);
      for (int j = 0; j < nd; j++) {
        q_d[j] = episodic_clip(q_d[j] + offset[j], s->lower[j], s->upper[j]);
        reference[j] = s->kp[j] * q_d[j] + s->kd[j] * s->qd_d[k * nd + j];
      }
    }
    for (int j = 0; j < nd; j++) {
      u_i[j] = s->ki[j] * s->integral[j];
      s->integral[j] += (q_d[j] - q[j]) * s->dt;
    }
    /* the physics steps of the control step, the reference ramping towards the next step's */
    for (int j = 0; j < nd; j++) {
      ctrl[j] = episodic_clip(reference[j] + u_i[j] + u_ff[j], -s->ctrl_bound, s->ctrl_bound);
      d->ctrl[s->actuator[j]] = ctrl[j];
      step[j] = k + 1 < n ? s->reference[(k + 1) * nd + j] - planned[j] : 0.0;
    }
    mj_step2(m, d);
    mju_copy(s->sensordata + k * m->nsensordata, d->sensordata, m->nsensordata);
    for (int i = 1; i < sub; i++) {
      mjtNum weight = (mjtNum)i / sub;
      for (int j = 0; j < nd; j++) {
        d->ctrl[s->actuator[j]] = episodic_clip(reference[j] + weight * step[j] + u_i[j] + u_ff[j],
                                                -s->ctrl_bound, s->ctrl_bound);
      }
      mj_step(m, d);
    }
    mj_getState(m, d, s->states + (k + 1) * nstate, s->state_spec);
  }
}

int episodic_run(const episodic_segment* s) {
  return guarded(run, (void*)s, s->data, s->error);
}

typedef struct {
  episodic_law law;
  const mjModel* m;
  mjData* d;
  int n;
  const void* param;
  mjtNum* memory;
  mjtNum* offset;
} law_call;

static void call_law(void* arg) {
  const law_call* c = arg;
  c->law(c->m, c->d, c->n, c->param, c->memory, c->offset);
}

int episodic_feedback(episodic_law law, const mjModel* m, mjData* d, int n, const void* param, mjtNum* memory,
                      mjtNum* offset, char* error) {
  law_call call = {law, m, d, n, param, memory, offset};
  return guarded(call_law, &call, d, error);
}

/* splitmix64's output function (Steele, Lea & Flood, OOPSLA 2014): a bijective 64-bit mix */
static uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

mjtNum episodic_gaussian(unsigned long long key, unsigned long long step, unsigned long long index) {
  uint64_t base = mix(key ^ mix(step));
  uint64_t a = mix(base + 2 * index), b = mix(base + 2 * index + 1);
  mjtNum u1 = ((a >> 11) + 1) * 0x1.0p-53;  /* (0, 1] */
  mjtNum u2 = (b >> 11) * 0x1.0p-53;        /* [0, 1) */
  return sqrt(-2.0 * log(u1)) * cos(2.0 * mjPI * u2);
}

const episodic_field episodic_sensing_fields[] = {
    EPISODIC_FIELD(episodic_sensing, delay) EPISODIC_FIELD(episodic_sensing, count)
    EPISODIC_FIELD(episodic_sensing, key) EPISODIC_FIELD(episodic_sensing, std) {NULL, 0, 0}};

size_t episodic_sensing_size(void) {
  return sizeof(episodic_sensing);
}

void episodic_sense(const episodic_sensing* param, mjtNum* memory, const mjtNum* truth, mjtNum* sensed) {
  int delay = (int)param->delay, m = (int)param->count;
  uint64_t key = (uint64_t)param->key[0] << 32 | (uint64_t)param->key[1];
  uint64_t k = (uint64_t)memory[EPISODIC_SENSING_STEPS];
  uint64_t j = k > (uint64_t)delay ? k - delay : 0;  /* the step of the sample read */
  mjtNum* ring = memory + EPISODIC_SENSING_RING;
  mju_copy(ring + (k % (delay + 1)) * m, truth, m);
  const mjtNum* sample = ring + (j % (delay + 1)) * m;
  for (int i = 0; i < m; i++) {
    mjtNum std = param->std[i];
    sensed[i] = std > 0 ? sample[i] + std * episodic_gaussian(key, j, i) : sample[i];
  }
  memory[EPISODIC_SENSING_STEPS] = (mjtNum)(k + 1);
}

/* Air drag applied explicitly (episodic.task.contact.add_air): MuJoCo's fluid forces
 * (engine_passive.c: mj_fluid, mj_ellipsoidFluidModel with mj_addedMassForces and
 * mj_viscousForces, mj_inertiaBoxFluidModel, ported operation for operation) on every body with
 * mass, in the still air of the model's numeric EPISODIC_AIR (density kg/m^3, viscosity Pa s),
 * the model's own option density and viscosity being 0. As a passive callback the forces are
 * not differentiated by the implicit integrators, which otherwise differentiate the fluid forces
 * of every body, every step. It adds to qfrc_fluid and qfrc_passive, as MuJoCo does. */
static void semiaxes_of(mjtNum semiaxes[3], const mjtNum size[3], int type) {
  switch (type) {
    case mjGEOM_SPHERE:
      semiaxes[0] = semiaxes[1] = semiaxes[2] = size[0];
      break;
    case mjGEOM_CAPSULE:
      semiaxes[0] = semiaxes[1] = size[0];
      semiaxes[2] = size[1] + size[0];
      break;
    case mjGEOM_CYLINDER:
      semiaxes[0] = semiaxes[1] = size[0];
      semiaxes[2] = size[1];
      break;
    default:
      mju_copy3(semiaxes, size);
  }
}

static mjtNum pow4(mjtNum x) {
  return (x * x) * (x * x);
}

static mjtNum pow2(mjtNum x) {
  return x * x;
}

static mjtNum max_moment(const mjtNum size[3], int dir) {
  mjtNum d0 = size[dir], d1 = size[(dir + 1) % 3], d2 = size[(dir + 2) % 3];
  return 8.0 / 15.0 * mjPI * d0 * pow4(mju_max(d1, d2));
}

/* lfrc (6,): torque and force in the geom's frame, of local velocity lvel (6,: angular, linear)
 * of an ellipsoid of semiaxes s with fluid coefficients c (geom_fluid) */
static void ellipsoid_force(const mjtNum lvel[6], mjtNum density, mjtNum viscosity, const mjtNum s[3],
                            const mjtNum* c, mjtNum lfrc[6]) {
  mjtNum blunt = c[1], slender = c[2], angular = c[3], kutta = c[4], magnus = c[5];
  const mjtNum* virtual_mass = c + 6;
  const mjtNum* virtual_inertia = c + 9;
  const mjtNum* w = lvel;
  const mjtNum* v = lvel + 3;
  /* added mass (mj_addedMassForces without accelerations) */
  mjtNum lin_mom[3], ang_mom[3], force[3], torque1[3], torque2[3];
  for (int i = 0; i < 3; i++) {
    lin_mom[i] = density * virtual_mass[i] * v[i];
    ang_mom[i] = density * virtual_inertia[i] * w[i];
  }
  mju_cross(force, lin_mom, w);
  mju_cross(torque1, lin_mom, v);
  mju_cross(torque2, ang_mom, w);
  mju_addTo3(lfrc, torque1);
  mju_addTo3(lfrc, torque2);
  mju_addTo3(lfrc + 3, force);
  /* lift and drag (mj_viscousForces) */
  mjtNum volume = 4.0 / 3.0 * mjPI * s[0] * s[1] * s[2];
  mjtNum d_max = mju_max(mju_max(s[0], s[1]), s[2]);
  mjtNum d_min = mju_min(mju_min(s[0], s[1]), s[2]);
  mjtNum d_mid = s[0] + s[1] + s[2] - d_max - d_min;
  mjtNum a_max = mjPI * d_max * d_mid;
  mjtNum magnus_force[3];
  mju_cross(magnus_force, w, v);
  for (int i = 0; i < 3; i++) {
    magnus_force[i] *= magnus * density * volume;
  }
  mjtNum proj_denom = pow4(s[1] * s[2]) * pow2(v[0]) + pow4(s[2] * s[0]) * pow2(v[1]) + pow4(s[0] * s[1]) * pow2(v[2]);
  mjtNum proj_num = pow2(s[1] * s[2] * v[0]) + pow2(s[2] * s[0] * v[1]) + pow2(s[0] * s[1] * v[2]);
  mjtNum a_proj = mjPI * mju_sqrt(proj_denom / mju_max(mjMINVAL, proj_num));
  mjtNum norm[3] = {pow2(s[1] * s[2]) * v[0], pow2(s[2] * s[0]) * v[1], pow2(s[0] * s[1]) * v[2]};
  mjtNum cos_alpha = proj_num / mju_max(mjMINVAL, mju_norm3(v) * proj_denom);
  mjtNum kutta_circ[3], kutta_force[3];
  mju_cross(kutta_circ, norm, v);
  for (int i = 0; i < 3; i++) {
    kutta_circ[i] *= kutta * density * cos_alpha * a_proj;
  }
  mju_cross(kutta_force, kutta_circ, v);
  mjtNum sphere_d = 2.0 / 3.0 * (s[0] + s[1] + s[2]);
  mjtNum visc_force = 3.0 * mjPI * sphere_d;
  mjtNum visc_torque = mjPI * sphere_d * sphere_d * sphere_d;
  mjtNum i_max = 8.0 / 15.0 * mjPI * d_mid * pow4(d_max);
  mjtNum ii[3] = {max_moment(s, 0), max_moment(s, 1), max_moment(s, 2)};
  mjtNum mom_visc[3];
  for (int i = 0; i < 3; i++) {
    mom_visc[i] = w[i] * (angular * ii[i] + slender * (i_max - ii[i]));
  }
  mjtNum drag_lin = viscosity * visc_force + density * mju_norm3(v) * (a_proj * blunt + slender * (a_max - a_proj));
  mjtNum drag_ang = viscosity * visc_torque + density * mju_norm3(mom_visc);
  for (int i = 0; i < 3; i++) {
    lfrc[i] -= drag_ang * w[i];
    lfrc[3 + i] += magnus_force[i] + kutta_force[i] - drag_lin * v[i];
  }
}

/* mj_inertiaBoxFluidModel: body b as the box of its inertia, into qfrc_fluid */
static void inertia_box(const mjModel* m, mjData* d, int b, mjtNum density, mjtNum viscosity) {
  mjtNum lvel[6], wind[6] = {0}, lwind[6], lfrc[6] = {0}, bfrc[6], box[3];
  const mjtNum* inertia = m->body_inertia + 3 * b;
  for (int i = 0; i < 3; i++) {
    mjtNum across = inertia[(i + 1) % 3] + inertia[(i + 2) % 3] - inertia[i];
    box[i] = mju_sqrt(mju_max(mjMINVAL, across) / m->body_mass[b] * 6.0);
  }
  mj_objectVelocity(m, d, mjOBJ_BODY, b, lvel, 1);
  mju_copy3(wind + 3, m->opt.wind);
  mju_transformSpatial(lwind, wind, 0, d->xipos + 3 * b, d->subtree_com + 3 * m->body_rootid[b], d->ximat + 9 * b);
  mju_subFrom3(lvel + 3, lwind + 3);
  if (viscosity > 0) {
    mjtNum diam = (box[0] + box[1] + box[2]) / 3.0;
    mju_scl3(lfrc, lvel, -mjPI * diam * diam * diam * viscosity);
    mju_scl3(lfrc + 3, lvel + 3, -3.0 * mjPI * diam * viscosity);
  }
  if (density > 0) {  /* each axis against the box's two others, in MuJoCo's order */
    static const int lo[3] = {1, 0, 0}, hi[3] = {2, 2, 1};
    for (int i = 0; i < 3; i++) {
      lfrc[3 + i] -= 0.5 * density * box[lo[i]] * box[hi[i]] * mju_abs(lvel[3 + i]) * lvel[3 + i];
    }
    for (int i = 0; i < 3; i++) {
      mjtNum b1 = box[lo[i]], b2 = box[hi[i]];
      lfrc[i] -= density * box[i] * (b1 * b1 * b1 * b1 + b2 * b2 * b2 * b2) * mju_abs(lvel[i]) * lvel[i] / 64.0;
    }
  }
  mju_mulMatVec3(bfrc, d->ximat + 9 * b, lfrc);
  mju_mulMatVec3(bfrc + 3, d->ximat + 9 * b, lfrc + 3);
  mj_applyFT(m, d, bfrc + 3, bfrc, d->xipos + 3 * b, b, d->qfrc_fluid);
}

/* mj_ellipsoidFluidModel: each geom of body b with fluid coefficients, into qfrc_fluid */
static void ellipsoids(const mjModel* m, mjData* d, int b, mjtNum density, mjtNum viscosity) {
  for (int j = 0; j < m->body_geomnum[b]; j++) {
    int g = m->body_geomadr[b] + j;
    const mjtNum* c = m->geom_fluid + mjNFLUID * g;
    if (c[0] == 0.0) continue;
    mjtNum semiaxes[3], lvel[6], wind[6] = {0}, lwind[6], lfrc[6] = {0}, bfrc[6];
    semiaxes_of(semiaxes, m->geom_size + 3 * g, m->geom_type[g]);
    mj_objectVelocity(m, d, mjOBJ_GEOM, g, lvel, 1);
    mju_copy3(wind + 3, m->opt.wind);
    mju_transformSpatial(lwind, wind, 0, d->geom_xpos + 3 * g, d->subtree_com + 3 * m->body_rootid[b],
                         d->geom_xmat + 9 * g);
    mju_subFrom3(lvel + 3, lwind + 3);
    ellipsoid_force(lvel, density, viscosity, semiaxes, c, lfrc);
    mju_scl(lfrc, lfrc, c[0], 6);
    mju_mulMatVec3(bfrc, d->geom_xmat + 9 * g, lfrc);
    mju_mulMatVec3(bfrc + 3, d->geom_xmat + 9 * g, lfrc + 3);
    mj_applyFT(m, d, bfrc + 3, bfrc, d->geom_xpos + 3 * g, b, d->qfrc_fluid);
  }
}

void episodic_air_drag(const mjModel* m, mjData* d) {
  if (!m->nnumeric) return;
  int air = mj_name2id(m, mjOBJ_NUMERIC, EPISODIC_AIR);
  if (air < 0 || m->numeric_size[air] != 2) return;
  mjtNum density = m->numeric_data[m->numeric_adr[air]], viscosity = m->numeric_data[m->numeric_adr[air] + 1];
  for (int b = 1; b < m->nbody; b++) {
    if (m->body_mass[b] < mjMINVAL) continue;
    int ellipsoid = 0;
    for (int j = 0; j < m->body_geomnum[b] && !ellipsoid; j++) {
      ellipsoid = m->geom_fluid[mjNFLUID * (m->body_geomadr[b] + j)] > 0;
    }
    (ellipsoid ? ellipsoids : inertia_box)(m, d, b, density, viscosity);
  }
  mju_addTo(d->qfrc_passive, d->qfrc_fluid, m->nv);
}

void episodic_air_install(void) {
  mjcb_passive = episodic_air_drag;
}
