/* episodic's compiled part: the blocking control loop (control.c) and the tasks' feedback laws
 * (tasks/<name>.c), one shared library called through ctypes. episodic/runtime/native/__init__.py
 * mirrors the types declared here; change both together. */
#ifndef EPISODIC_NATIVE_EPISODIC_H_
#define EPISODIC_NATIVE_EPISODIC_H_

#include <mujoco/mujoco.h>

/* A task's feedback law: fills offset[n] (rad, zero on entry; n the robot's joints) with the
 * offsets to the desired joint positions at d's present state. d's position and velocity stages
 * are current (after mj_step1 or mj_forward); the law may recompute them but changes nothing
 * else. param: the law's read-only parameters, memory: what it keeps from one control step to
 * the next (NULL if nothing); their layouts are the law's, documented with it. */
typedef void (*episodic_law)(const mjModel* m, mjData* d, int n, const mjtNum* param, mjtNum* memory,
                             mjtNum* offset);

/* episodic.interface.commands.Feedforward: what the loop adds to u_ff each control step (GRAVITY_COMPENSATION:
 * the inverse dynamics at rest at the measured q, when the plant does not compensate itself) */
enum { EPISODIC_FF_NONE = 0, EPISODIC_FF_GRAVITY_COMPENSATION = 1, EPISODIC_FF_FEEDFORWARD = 2,
       EPISODIC_FF_INVERSE_DYNAMICS = 3 };

/* One segment of n control steps for a robot of n_dofs joints: the arguments of
 * episodic_run. Arrays of steps are row-major (n, n_dofs); units as in episodic.runtime.control. */
typedef struct {
  const mjModel* model;          /* the scene */
  mjData* data;                  /* its state, stepped in place */
  const mjModel* dynamics;       /* the robot and its tool alone, for inverse dynamics */
  mjData* dynamics_data;
  int n;                         /* control steps */
  int n_dofs;
  int substeps;                  /* physics steps per control step */
  int feedforward;               /* EPISODIC_FF_*: u_ff computed at each step */
  int state_spec;                /* mjtState of the recorded states */
  const int* qpos_adr;           /* (n_dofs,) the robot joints' qpos addresses */
  const int* dof_adr;            /* (n_dofs,) their dof addresses */
  const int* actuator;           /* (n_dofs,) their actuators */
  const mjtNum* lower;           /* (n_dofs,) rad, joint range: q_d is clamped to it */
  const mjtNum* upper;
  const mjtNum* kp;              /* (n_dofs,) N m/rad */
  const mjtNum* kd;              /* (n_dofs,) N m s/rad */
  const mjtNum* ki;              /* (n_dofs,) N m/(rad s) */
  const mjtByte* passive;        /* (n_dofs,) 1: no u_ff on that joint */
  mjtNum dt;                     /* s, control period */
  mjtNum ctrl_bound;             /* N m, |ctrl| at most */
  mjtNum* q_d;                   /* (n, n_dofs) rad, clamped; row k gets the law's offset at step k */
  const mjtNum* qd_d;            /* (n, n_dofs) rad/s */
  const mjtNum* qdd_d;           /* (n, n_dofs) rad/s^2 */
  mjtNum* reference;             /* (n, n_dofs) N m, kp q_d + kd qd_d; row k updated with q_d */
  mjtNum* u_ff;                  /* (n, n_dofs) N m; row k set at step k unless feedforward is NONE */
  mjtNum* integral;              /* (n_dofs,) rad s, advanced at every step */
  episodic_law law;              /* NULL: no feedback law */
  const mjtNum* law_param;
  mjtNum* law_memory;
  mjtNum* states;                /* out (n + 1, mj_stateSize(state_spec)): before each step, after the last */
  mjtNum* sensordata;            /* out (n, nsensordata): at the state before each step */
  mjtNum* ctrl;                  /* out (n, n_dofs) N m: what each step's first physics step got */
  char* error;                   /* out (EPISODIC_ERROR_SIZE,): MuJoCo's error, if one ended the run */
} episodic_segment;

#define EPISODIC_ERROR_SIZE 1024

/* x clipped to [low, high] as numpy's clip does it: a NaN stays NaN */
static inline mjtNum episodic_clip(mjtNum x, mjtNum low, mjtNum high) {
  return x < low ? low : (x > high ? high : x);
}

/* Sensing (episodic/runtime/native/sensing.py builds the blocks): a law reads the tracked object's state
 * as a tracker reports it, a whole number of control steps late and with Gaussian noise.
 *   param block (EPISODIC_SENSING_STD + m values): the delay D in control steps, m the number of
 *     quantities sensed, the noise key's two 32-bit halves, then each quantity's noise std (in
 *     its unit; 0: none);
 *   memory block (EPISODIC_SENSING_RING + (D + 1) m values): the control steps sensed so far k,
 *     then the last D + 1 true values, a ring of rows of m.
 * The noise on quantity i of the sample taken at control step j is a pure function of (key, j, i)
 * (a counter-based generator, episodic_gaussian), so the same sample read again gets the same
 * noise, and every run of the same steps, compiled or tick by tick, gets the same numbers. */
enum { EPISODIC_SENSING_DELAY = 0, EPISODIC_SENSING_COUNT = 1, EPISODIC_SENSING_KEY = 2, EPISODIC_SENSING_STD = 4 };
enum { EPISODIC_SENSING_STEPS = 0, EPISODIC_SENSING_RING = 1 };

/* One control step of sensing: truth[m] (the state now) enters the ring; sensed[m] gets the
 * sample of D steps ago (the first sample while fewer than D came before it) plus its noise;
 * the step count advances. */
void episodic_sense(const mjtNum* param, mjtNum* memory, const mjtNum* truth, mjtNum* sensed);

/* A standard normal number, a pure function of (key, step, index): Box-Muller on two uniforms
 * from splitmix64 hashes of them. */
mjtNum episodic_gaussian(unsigned long long key, unsigned long long step, unsigned long long index);

/* Run a segment (see episodic.runtime.simulation.Simulation._run_python, which this mirrors step for
 * step). Returns 0, or 1 when MuJoCo met an error (mju_error: the arena overflowing, ...), its
 * text in s->error: the run ends there instead of the process, d is left mid-step. */
int episodic_run(const episodic_segment* s);

/* One call of a law (episodic_law's arguments) with MuJoCo's errors returned as in episodic_run:
 * 0, or 1 with the text in error (EPISODIC_ERROR_SIZE,). */
int episodic_feedback(episodic_law law, const mjModel* m, mjData* d, int n, const mjtNum* param, mjtNum* memory,
                      mjtNum* offset, char* error);

/* mjVERSION_HEADER of the MuJoCo this library was compiled against. */
int episodic_mujoco_version(void);

#endif  /* EPISODIC_NATIVE_EPISODIC_H_ */
