/*
 * episodic_client.h: a C client for `episodic serve` (the shared-memory protocol of
 * docs/protocol.md, version 5). It mirrors the Python client, bridge/client.py.
 *
 *     ep_client *c;
 *     ep_reply r;
 *     if (ep_attach("default", 30.0, &c) != EP_OK) { fprintf(stderr, "%s\n", ep_last_error()); ... }
 *     ep_start(c, EP_NEXT, 1, NULL, context, 3, &r);          start posture of the task, context
 *     (r.posture: the start posture reached, n_dofs rad; start the first segment there)
 *     ep_send_trajectory(c, EP_NEXT, EP_DEFAULT, q, NULL, NULL, n_samples, 0.0, 0.0, &r);
 *     rows = ep_log_rows(c);  ep_get_log(c, "q", buffer, rows, &rows);
 *     ep_evaluate(c, episodes, n, 0, 0.0, results);          a population: one result per episode
 *     ep_detach(c);
 *
 * Arrays are C row order (row-major), as on the wire: a trajectory is n_samples x n_dofs with
 * q[r * n_dofs + j] the sample r of joint j; a log column is rows x width.
 *
 * Every function returning int returns EP_OK (0) or a negative error code (enum ep_error);
 * ep_last_error() then says what went wrong (naming the channel), ep_strerror(code) the code.
 * Whether the runner executed a command is the reply's `flag` (enum ep_flag), not the return code.
 * A client is attached once and used by one thread at a time; one client per channel: while one is
 * attached (it holds the channel's client lock), ep_attach of a second fails with EP_ERR_IN_USE.
 *
 * Build: cc -std=c99 -O2 -c episodic_client.c; link with -lrt -lpthread (see Makefile).
 */
#ifndef EPISODIC_CLIENT_H
#define EPISODIC_CLIENT_H

#include <stdint.h>

#include "episodic_layout.h" /* the wire layout: EP_PROTOCOL_VERSION, EP_NAME_BYTES, EP_MESSAGE_BYTES, ... */

#ifdef __cplusplus
extern "C" {
#endif

#define EP_NEXT (-1)         /* episode id: the client's next one; index: the next of the episode (ep_command: see there) */
#define EP_DEFAULT (-1)      /* max_commands: the running episode's, as given to ep_start (ep_command: see there) */

enum ep_error {
    EP_OK = 0,
    EP_ERR_ARGUMENT = -1,    /* a bad argument: NULL, wrong size, out of range (nothing sent) */
    EP_ERR_NO_CHANNEL = -2,  /* no runner serves the channel (its objects do not exist) */
    EP_ERR_SYSTEM = -3,      /* a system call failed (errno in the message) */
    EP_ERR_NOT_EPISODIC = -4,/* the object's magic is not EPISODIC */
    EP_ERR_VERSION = -5,     /* the runner speaks another protocol version */
    EP_ERR_LAYOUT = -6,      /* the header is inconsistent (corrupt channel) */
    EP_ERR_TIMEOUT = -7,     /* no reply within the timeout (the runner is alive but silent) */
    EP_ERR_RUNNER_GONE = -8, /* the runner process exited while the client waited */
    EP_ERR_PROTOCOL = -9,    /* the reply is for another command (kind, index, episode) than the one sent,
                                or a batch's results do not fit its commands */
    EP_ERR_NO_COLUMN = -10,  /* no log column of that name */
    EP_ERR_FOREIGN = -11,    /* an object of the channel belongs to another user (not used) */
    EP_ERR_IN_USE = -12,     /* another client is attached to the channel (the message names its pid) */
    EP_ERR_BATCH = -13       /* the runner refused a batch as a whole, or an episode's log (the message says why) */
};

/* The kinds of command; an episode (and so a batch's episodes) consists of the first four. */
enum ep_kind {
    EP_KIND_START = 0, EP_KIND_TRAJECTORY = 1, EP_KIND_GAINS = 2, EP_KIND_RESET = 3,
    EP_KIND_BATCH = 4,     /* sent by ep_evaluate */
    EP_KIND_BATCH_LOG = 5  /* sent by ep_get_batch_log */
};

enum ep_feedforward {
    EP_FF_NONE = 0,                 /* PD only */
    EP_FF_GRAVITY_COMPENSATION = 1,
    EP_FF_FEEDFORWARD = 2,          /* inverse dynamics of the desired state */
    EP_FF_INVERSE_DYNAMICS = 3      /* inverse dynamics at the measured state */
};

enum ep_flag {
    EP_FLAG_OK = 0, EP_FLAG_OUT_OF_ORDER = 1, EP_FLAG_STALE_EPISODE = 2, EP_FLAG_INVALID_PAYLOAD = 3,
    EP_FLAG_SAFETY_ABORT = 4, EP_FLAG_TIMEOUT = 5, EP_FLAG_ABORTED_BY_LEARNER = 6, EP_FLAG_INTERRUPTED = 7,
    EP_FLAG_DISCONTINUOUS = 8, /* the segment starts too far from the held posture */
    EP_FLAG_INTERNAL_ERROR = 9, /* the runner failed on the command; the episode ended, the robot holds */
    EP_FLAG_LEARNER_GONE = 10   /* the process of the learner died with its episode running */
};

enum ep_machine_state {
    EP_RESTART = 0, EP_GOTO_START = 1, EP_WAIT_FOR_START = 2, EP_DO_MOTION = 3, EP_WAIT_FOR_COMMAND = 4
};

typedef struct ep_client ep_client;

/* The channel's sizes, from the runner's header. */
typedef struct {
    const char *channel;
    int64_t runner_pid;
    int n_dofs;          /* joints */
    int max_samples;     /* longest segment, samples */
    int max_log_steps;   /* rows of the log block */
    int max_context;     /* longest context / task gains */
    int n_state;         /* task state columns (names: ep_state_name) */
    int n_log_columns;   /* log columns (ep_log_column_name) */
    double control_rate; /* Hz */
    int max_batch;       /* most episodes in one batch (ep_evaluate splits larger populations) */
    int max_batch_commands;   /* most commands in one batch, all its episodes together */
    int64_t max_batch_values; /* most float64 values (trajectories, gains, contexts) in one batch */
} ep_info;

/* A reply. `state` (n_state values) and `posture` (n_dofs values) point into the client and stay
 * valid until the next command. `posture` is the posture the robot holds after the command, rad:
 * after a start, the start posture reached; after a segment, a gain set or a refusal, where the
 * next segment must start (its first sample within the robot's max_start_jump from its robot.toml, else
 * EP_FLAG_DISCONTINUOUS). The reply that ends an episode (episode_done 1) says how it ended in
 * `flag` and whether the task counts it as solved in `success`; its `episode_return` is the
 * episode's return as the runner's log records it, the charge for ending early included (a task
 * scored over a horizon charges the part an episode leaves out, e.g. after a safety abort). */
typedef struct {
    uint64_t seq;
    int kind;            /* enum ep_kind of the command answered */
    int64_t episode_id;
    int index;
    int flag;            /* enum ep_flag; in the reply that ends an episode, how it ended */
    double reward;       /* of the command (in the reply that ends an episode, its early end's charge included) */
    double episode_return;/* return of the command's episode so far: the rewards of its replies up to this one */
    int success;         /* 1 only in the reply that ends an episode the task counts as solved (flag EP_FLAG_OK) */
    int n_steps;
    int episode_done;
    int machine_state;   /* enum ep_machine_state */
    int log_rows;
    int log_truncated;
    char message[EP_MESSAGE_BYTES + 1];
    int n_state;
    const double *state;  /* task state after the command (NaN when refused) */
    int n_dofs;
    const double *posture;/* posture held after the command, rad */
} ep_reply;

/* Attach to `channel` (1-64 of A-Z a-z 0-9 _ -): map the object, open the semaphores, check
 * that they belong to this user, check magic and version, take the channel's client lock (held
 * until ep_detach or the process ends). `timeout` s: longest wait for a reply (<= 0: 30 s); a
 * command sent while the runner has not yet taken this client's previous one (it timed out)
 * waits for that within the same timeout, and is not sent when it runs out (EP_ERR_TIMEOUT). */
int ep_attach(const char *channel, double timeout, ep_client **out);
/* Unmap and close (the runner's objects stay). NULL is ignored. */
void ep_detach(ep_client *c);

const ep_info *ep_get_info(const ep_client *c);
const char *ep_state_name(const ep_client *c, int i);                /* NULL when out of range */
const char *ep_log_column_name(const ep_client *c, int i, int *width);/* NULL when out of range */
int ep_find_log_column(const ep_client *c, const char *name, int *width); /* index, or EP_ERR_NO_COLUMN */

void ep_set_timeout(ep_client *c, double seconds);
/* The current episode id (the last started, or set); ep_start(EP_NEXT) uses this + 1, and so does
 * the next episode of ep_evaluate whose commands have episode id EP_NEXT. */
int64_t ep_episode_id(const ep_client *c);
void ep_set_episode_id(ep_client *c, int64_t episode_id);

/* Index 0: go to `posture` (n_dofs rad; NULL = the task's start posture), reset the task from
 * `context` (n_context values); reply->posture is the start posture reached, where the first
 * segment must start. episode_id EP_NEXT: the current id + 1. */
int ep_start(ep_client *c, int64_t episode_id, int max_commands, const double *posture,
             const double *context, int n_context, ep_reply *reply);

/* A segment: q (and optionally qd, qdd; NULL = not given) n_samples x n_dofs row-major, rad,
 * rad/s, rad/s^2, at `rate` Hz (0: the control rate); the final posture is held `wait_time` s.
 * index EP_NEXT: the next of the episode; max_commands EP_DEFAULT: the episode's. */
int ep_send_trajectory(ep_client *c, int index, int max_commands, const double *q, const double *qd,
                       const double *qdd, int n_samples, double rate, double wait_time, ep_reply *reply);

/* A gain set for the next segments: kp, kd, ki (n_dofs each; ki NULL = 0), the feedforward mode
 * (enum ep_feedforward), task gains for the task's feedback law (n_task_gains, 0 = none); the
 * posture is then held `wait_time` s. */
int ep_send_gains(ep_client *c, int index, int max_commands, const double *kp, const double *kd,
                  const double *ki, int feedforward, const double *task_gains, int n_task_gains,
                  double wait_time, ep_reply *reply);

/* Abort the running episode. */
int ep_reset(ep_client *c, ep_reply *reply);

/* Valid rows of the log block according to the last reply (0 before any). */
int ep_log_rows(const ep_client *c);
/* Take the valid rows of the log block from the reply on the channel now, whichever client's
 * command it answered, and return them: for a client attached anew for each call (as SL's
 * learners attach), whose own last reply came through an earlier attachment. */
int ep_adopt_log_rows(ep_client *c);
/* Copy the first ep_log_rows() rows of one log column, row-major (rows x width), into `out`
 * (room for max_rows rows); *rows gets the count. */
int ep_get_log(ep_client *c, const char *column, double *out, int max_rows, int *rows);
/* The same for n columns (indices from ep_find_log_column) under one take of the lock. */
int ep_get_log_columns(ep_client *c, int n, const int *columns, double *const *out, int max_rows,
                       int *rows);

/* -- batches: a population of episodes in one command (docs/protocol.md section 8) --------------
 *
 *     ep_command cmds[2] = {
 *         {.kind = EP_KIND_START, .episode_id = EP_NEXT, .index = EP_NEXT, .max_commands = EP_DEFAULT,
 *          .context = target, .n_context = 3},
 *         {.kind = EP_KIND_TRAJECTORY, .episode_id = EP_NEXT, .index = EP_NEXT, .max_commands = EP_DEFAULT,
 *          .q = q, .n_samples = n_samples}};
 *     ep_episode episodes[N] = {{cmds, 2}, ...};                 one entry per episode
 *     ep_result results[N];
 *     ep_evaluate(c, episodes, N, 0, 0.0, results);               results[i].episode_return, .flag, ...
 *
 * The runner evaluates each episode as the first episode of a fresh runner of its task, robot and
 * seed (on its threads, `episodic serve --threads`): a result is bit-identical to the same
 * commands sent one by one to a freshly started runner. Every episode is in the runner's HDF5 log.
 * A realtime runner (`episodic serve --mode realtime`) evaluates no batches (EP_ERR_BATCH). */

/* One command of an episode. Only the members its kind uses are read (as in ep_start,
 * ep_send_trajectory, ep_send_gains, ep_reset); zero the rest, e.g. with a designated initializer.
 * Arrays are not copied until ep_evaluate, and are only read. */
typedef struct {
    int kind;                   /* EP_KIND_START, EP_KIND_TRAJECTORY, EP_KIND_GAINS or EP_KIND_RESET */
    int64_t episode_id;         /* EP_NEXT: the episode's id, the client's next (one per episode) */
    int index;                  /* 0 start, 1..max_commands segments; EP_NEXT: its position in the episode */
    int max_commands;           /* segments of the episode, 1..1000; EP_DEFAULT: the episode's commands - 1 */
    const double *posture;      /* start: n_dofs rad, NULL = the task's start posture */
    const double *context;      /* start: the context; gains: the task gains (NULL = none) */
    int n_context;              /* values of `context`, 0..max_context */
    const double *q, *qd, *qdd; /* trajectory: n_samples x n_dofs row-major, rad, rad/s, rad/s^2 (qd, qdd NULL = not given) */
    int n_samples;
    double rate;                /* trajectory: Hz of the samples, 0 = the control rate */
    const double *kp, *kd, *ki; /* gains: n_dofs each, N m/rad, N m s/rad, N m/(rad s) (ki NULL = 0) */
    int feedforward;            /* gains: enum ep_feedforward */
    double wait_time;           /* trajectory, gains: s the final posture is held afterwards, 0..60 */
} ep_command;

/* An episode: its commands in the order they are sent (a start, then segments and gain sets). */
typedef struct {
    const ep_command *commands;
    int n_commands;             /* 1..max_batch_commands */
} ep_episode;

/* The result of one episode. The per-command arrays hold one entry per command sent (the start
 * included; commands after the one that ended the episode are not sent); they point into the
 * client and stay valid until the next ep_evaluate or ep_detach. */
typedef struct {
    int64_t episode_id;         /* the id of the episode's first command (EP_NEXT resolved) */
    double episode_return;      /* the sum of `rewards` (an early end's charge is in the last one's) */
    int flag;                   /* how it ended: EP_FLAG_OK when it ran to its last segment, else the flag that ended it */
    int success;                /* 1 when the task counts the episode as solved */
    int64_t n_steps;            /* control steps of the whole episode, the move to the start included */
    char message[EP_MESSAGE_BYTES + 1]; /* why the flag is not OK */
    int n_replies;              /* commands sent */
    const double *rewards;      /* n_replies: each command's reward */
    const int *flags;           /* n_replies: each command's flag (enum ep_flag) */
    const int *steps;           /* n_replies: control steps each command ran */
    int n_state;
    const double *states;       /* n_replies x n_state row-major: the task state after each command (NaN when refused) */
} ep_result;

/* Evaluate a population of n_episodes episodes; results[i] (room for n_episodes) is episode i's.
 * The population is sent in as few batches as the runner's sizes allow (ep_batch_fit); all of it
 * is checked before anything is sent (EP_ERR_ARGUMENT names the episode and the command).
 * keep_logs 1: the runner keeps the per-step logs of the last batch for ep_get_batch_log.
 * timeout s: longest wait for one batch; <= 0: as long as the runner lives. A command the runner
 * refuses is an episode's flag (e.g. EP_FLAG_INVALID_PAYLOAD), not an error; EP_ERR_BATCH when it
 * refuses a batch as a whole (e.g. a realtime runner). Episode ids EP_NEXT advance ep_episode_id. */
int ep_evaluate(ep_client *c, const ep_episode *episodes, int n_episodes, int keep_logs, double timeout,
                ep_result *results);

/* How many of the leading episodes one batch takes (0 when n_episodes is 0), or a negative error
 * code when an episode cannot be sent. A learner that wants the logs of a population larger
 * than one batch evaluates it in such slices and fetches each slice's logs before the next. */
int ep_batch_fit(const ep_client *c, const ep_episode *episodes, int n_episodes);

/* Put the per-step log of `episode` (its index in the last ep_evaluate's population, which kept
 * logs) in the log block: ep_log_rows, ep_get_log and ep_get_log_columns then read it (its first
 * max_log_steps rows; *truncated, unless NULL, is 1 when it had more). Only the last batch's
 * logs are kept (EP_ERR_ARGUMENT for an earlier batch's episode). An episode that ran no steps
 * (refused at its start) has an empty log (0 rows). */
int ep_get_batch_log(ep_client *c, int episode, int *truncated);

const char *ep_strerror(int code);   /* what an error code means */
const char *ep_last_error(void);     /* the last failure of this thread, in detail */
const char *ep_flag_name(int flag);  /* "OK", "OUT_OF_ORDER", ...; "UNKNOWN" for a newer flag */

#ifdef __cplusplus
}
#endif
#endif
