/* episodic's compiled part: the blocking control loop (control.c) and the tasks' feedback laws
 * (tasks/<name>.c), one shared library called through ctypes. episodic/native/__init__.py
 * checks its SegmentArgs against the segment's table declared here, and fills the laws' and the
 * sensing's parameters by name from theirs. */
#ifndef EPISODIC_NATIVE_EPISODIC_H_
#define EPISODIC_NATIVE_EPISODIC_H_

#include <stddef.h>

#include <mujoco/mujoco.h>

/* A task's feedback law: fills offset[n] (rad, zero on entry; n the robot's joints) with the
 * offsets to the desired joint positions at d's present state. d's position and velocity stages
 * are current (after mj_step1 or mj_forward); the law may recompute them but changes nothing
 * else. param: the law's read-only parameters, a struct of its own declared with the law
 * (EPISODIC_LAW_PARAM); memory: what it keeps from one control step to the next (NULL if
 * nothing), its layout documented with the law. */
typedef void (*episodic_law)(const mjModel* m, mjData* d, int n, const void* param, mjtNum* memory,
                             mjtNum* offset);

/* episodic.interface.commands.Feedforward: what the loop adds to u_ff each control step (GRAVITY_COMPENSATION:
 * the inverse dynamics at rest at the measured q, when the plant does not compensate itself) */
enum { EPISODIC_FF_NONE = 0, EPISODIC_FF_GRAVITY_COMPENSATION = 1, EPISODIC_FF_FEEDFORWARD = 2,
       EPISODIC_FF_INVERSE_DYNAMICS = 3 };

/* A struct that crosses into Python is described once, here in C, by a table of its fields
 * (<struct>_fields, ended by a NULL name) and its size (<struct>_size()); episodic.native
 * checks its ctypes mirror (or fills a law's parameters by name) against them when the library
 * loads, so a field added, moved or resized on one side only is refused instead of misread. */
typedef struct {
  const char* name;
  size_t offset;                 /* bytes from the struct's start */
  size_t size;                   /* bytes */
} episodic_field;
#define EPISODIC_FIELD(type, name) {#name, offsetof(type, name), sizeof(((type*)0)->name)},

/* One segment of n control steps for a robot of n_dofs joints: the arguments of
 * episodic_run. Arrays of steps are row-major (n, n_dofs); units as in episodic.runtime.control.
 * Its fields are listed once, as X(type, name): the struct and its table (control.c) come from
 * the list, which SegmentArgs in episodic/native/__init__.py mirrors (checked on load). */
#define EPISODIC_SEGMENT_FIELDS(X)                                                                          \
  X(const mjModel*, model)       /* the scene */                                                           \
  X(mjData*, data)               /* its state, stepped in place */                                         \
  X(const mjModel*, dynamics)    /* the robot and its tool alone, for inverse dynamics */                  \
  X(mjData*, dynamics_data)                                                                                 \
  X(int, n)                      /* control steps */                                                       \
  X(int, n_dofs)                                                                                            \
  X(int, substeps)               /* physics steps per control step */                                      \
  X(int, feedforward)            /* EPISODIC_FF_*: u_ff computed at each step */                           \
  X(int, state_spec)             /* mjtState of the recorded states */                                     \
  X(const int*, qpos_adr)        /* (n_dofs,) the robot joints' qpos addresses */                          \
  X(const int*, dof_adr)         /* (n_dofs,) their dof addresses */                                       \
  X(const int*, actuator)        /* (n_dofs,) their actuators */                                           \
  X(const mjtNum*, lower)        /* (n_dofs,) rad, joint range: q_d is clamped to it */                    \
  X(const mjtNum*, upper)                                                                                   \
  X(const mjtNum*, kp)           /* (n_dofs,) N m/rad */                                                   \
  X(const mjtNum*, kd)           /* (n_dofs,) N m s/rad */                                                 \
  X(const mjtNum*, ki)           /* (n_dofs,) N m/(rad s) */                                               \
  X(const mjtByte*, passive)     /* (n_dofs,) 1: no u_ff on that joint */                                  \
  X(mjtNum, dt)                  /* s, control period */                                                   \
  X(mjtNum, ctrl_bound)          /* N m, |ctrl| at most */                                                 \
  X(mjtNum*, q_d)                /* (n, n_dofs) rad, clamped; row k gets the law's offset at step k */     \
  X(const mjtNum*, qd_d)         /* (n, n_dofs) rad/s */                                                   \
  X(const mjtNum*, qdd_d)        /* (n, n_dofs) rad/s^2 */                                                 \
  X(mjtNum*, reference)          /* (n, n_dofs) N m, kp q_d + kd qd_d; row k updated with q_d */           \
  X(mjtNum*, u_ff)               /* (n, n_dofs) N m; row k set at step k unless feedforward is NONE */     \
  X(mjtNum*, integral)           /* (n_dofs,) rad s, advanced at every step */                             \
  X(episodic_law, law)           /* NULL: no feedback law */                                               \
  X(const void*, law_param)      /* the law's parameters (EPISODIC_LAW_PARAM) */                           \
  X(mjtNum*, law_memory)                                                                                    \
  X(mjtNum*, states)             /* out (n + 1, mj_stateSize(state_spec)): before each step, after the last */ \
  X(mjtNum*, sensordata)         /* out (n, nsensordata): at the state before each step */                 \
  X(mjtNum*, ctrl)               /* out (n, n_dofs) N m: what each step's first physics step got */        \
  X(char*, error)                /* out (EPISODIC_ERROR_SIZE,): MuJoCo's error, if one ended the run */

#define EPISODIC_MEMBER(type, name) type name;
typedef struct {
  EPISODIC_SEGMENT_FIELDS(EPISODIC_MEMBER)
} episodic_segment;

extern const episodic_field episodic_segment_fields[];
size_t episodic_segment_size(void);

/* A law's parameters: a struct of mjtNum fields only (scalars, arrays, an episodic_sensing; an
 * id or an address is stored as a double, exactly), so that it has no padding and Python fills
 * it by name from its table (episodic.native.CompiledLaw). In the law's file, after the
 * struct:
 *   EPISODIC_LAW_PARAM(<law>, <struct>, EPISODIC_FIELD(<struct>, <field>) ... every field)
 * defines episodic_law_<law>_param_fields and episodic_law_<law>_param_size(); a field left
 * out of the table leaves a gap that binding the law refuses. */
#define EPISODIC_LAW_PARAM(law, type, fields)                                      \
  const episodic_field episodic_law_##law##_param_fields[] = {fields{NULL, 0, 0}}; \
  size_t episodic_law_##law##_param_size(void) {                                   \
    return sizeof(type);                                                           \
  }

#define EPISODIC_ERROR_SIZE 1024

/* x clipped to [low, high] as numpy's clip does it: a NaN stays NaN */
static inline mjtNum episodic_clip(mjtNum x, mjtNum low, mjtNum high) {
  return x < low ? low : (x > high ? high : x);
}

/* Sensing (episodic/native/sensing.py fills the parameters by name and makes the memory
 * block): a law reads the tracked object's state as a tracker reports it, a whole number of
 * control steps late and with Gaussian noise.
 *   parameters: an episodic_sensing, m of its std used;
 *   memory block (EPISODIC_SENSING_RING + (D + 1) m values): the control steps sensed so far k,
 *     then the last D + 1 true values, a ring of rows of m.
 * The noise on quantity i of the sample taken at control step j is a pure function of (key, j, i)
 * (a counter-based generator, episodic_gaussian), so the same sample read again gets the same
 * noise, and every run of the same steps, compiled or tick by tick, gets the same numbers. */
enum { EPISODIC_SENSING_MAX = 6 };  /* the most quantities a tracker senses */
typedef struct {
  mjtNum delay;                     /* D, control steps (a whole number) */
  mjtNum count;                     /* m, the quantities sensed (a whole number) */
  mjtNum key[2];                    /* the noise key's two 32-bit halves (whole numbers) */
  mjtNum std[EPISODIC_SENSING_MAX]; /* each quantity's noise std (in its unit; 0: none) */
} episodic_sensing;
extern const episodic_field episodic_sensing_fields[];
size_t episodic_sensing_size(void);
enum { EPISODIC_SENSING_STEPS = 0, EPISODIC_SENSING_RING = 1 };

/* One control step of sensing: truth[m] (the state now) enters the ring; sensed[m] gets the
 * sample of D steps ago (the first sample while fewer than D came before it) plus its noise;
 * the step count advances. */
void episodic_sense(const episodic_sensing* param, mjtNum* memory, const mjtNum* truth, mjtNum* sensed);

/* A standard normal number, a pure function of (key, step, index): Box-Muller on two uniforms
 * from splitmix64 hashes of them. */
mjtNum episodic_gaussian(unsigned long long key, unsigned long long step, unsigned long long index);

/* Run a segment (see episodic.runtime.simulation.Simulation._run_python, which this mirrors step for
 * step). Returns 0, or 1 when MuJoCo met an error (mju_error: the arena overflowing, ...), its
 * text in s->error: the run ends there instead of the process, d is left mid-step; or 2 when a
 * stop signal (episodic_stop_on) came: the run ended before a control step, the text says which. */
int episodic_run(const episodic_segment* s);

/* From now on signal sig also stops runs (episodic_run returns 2 before its next control step),
 * then goes on to the handler it had (a SIG_DFL one: the default action). 0, or -1 with errno.
 * Installing another handler for sig undoes it; episodic_stop_clear forgets a signal received. */
int episodic_stop_on(int sig);
void episodic_stop_clear(void);

/* One call of a law (episodic_law's arguments) with MuJoCo's errors returned as in episodic_run:
 * 0, or 1 with the text in error (EPISODIC_ERROR_SIZE,). */
int episodic_feedback(episodic_law law, const mjModel* m, mjData* d, int n, const void* param, mjtNum* memory,
                      mjtNum* offset, char* error);

/* The numeric of a model whose air drags explicitly: (density kg/m^3, viscosity Pa s); the
 * model's option density and viscosity are then 0 (episodic.task.contact.add_air). */
#define EPISODIC_AIR "episodic_air"

/* MuJoCo's fluid forces (its ellipsoid model for a body with a geom of nonzero fluid
 * coefficients, its inertia-box model for any other body with mass) in the air of the model's
 * EPISODIC_AIR numeric (none: nothing): added to d->qfrc_fluid and d->qfrc_passive. A passive-force callback (mjcb_passive), so the implicit integrators do not
 * differentiate it; episodic_air_install makes it MuJoCo's, for every model of the process. */
void episodic_air_drag(const mjModel* m, mjData* d);
void episodic_air_install(void);

/* mjVERSION_HEADER of the MuJoCo this library was compiled against. */
int episodic_mujoco_version(void);

#endif  /* EPISODIC_NATIVE_EPISODIC_H_ */
