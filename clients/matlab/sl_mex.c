/*
 * sl_mex.c: SL's Matlab/Octave interface (the IAS lab's SLSendTrajectoryMex, SLGetEpisodeMex and
 * SLGetInfoMex) over an episodic channel, so that learners written for SL run unchanged against
 * `episodic serve`. One source, built three times under SL's names (episodic_build.m); the
 * function's name (mexFunctionName) says which it is:
 *
 *     [state, flag, reply] = SLSendTrajectoryMex(commandIdx, maxCommands, waitTime, trajectory, stateBuffer, timeOut)
 *     [joints, jointsVel, jointsAcc, jointsDes, jointsVelDes, jointsAccDes, torque, cart, states, commandIdx,
 *      stepIdx] = SLGetEpisodeMex(numStates)
 *     [nDofs, nDofsShm, stepLimit] = SLGetInfoMex()
 *
 * The channel is the environment variable EPISODIC_CHANNEL, else 'default'. As SL's MEX files do,
 * every call attaches, sends, waits and detaches: the two functions are separate MEX files and a
 * channel takes one client at a time. SL's conventions (clients/README.md has the table):
 *   commandIdx 1     start an episode of maxCommands commands (the start counted): the trajectory
 *                    is a dummy (the task's start posture is used), stateBuffer SL's context,
 *                    zero-padded to SL_CONTEXT values (the task's SL map turns it into its context;
 *                    [] = the task's default context)
 *   2..maxCommands   a motion command: a trajectory steps x n_dofs rad at the control rate, held
 *                    waitTime s at its end; a single row (SL's 1 x N_DOFS zero trajectory) makes it
 *                    a controller command: stateBuffer holds the task gains, zero-padded to
 *                    SL_CONTEXT values, and the runner runs the task's controller for its own
 *                    duration (the task's SL map)
 *   -1               reset: abort the running episode
 *   state            20 x 1: state(1) the command's reward, then the task state (a controller
 *                    command: state(2) the control steps it ran, then the task state)
 *   flag             1: the runner answered this command; -1: no answer within timeOut s (the learner
 *                    may send it again). How the command went (episodic's flag) is reply.flag; a
 *                    flag other than OK also raises the warning episodic:flag with the reason.
 */
#include "mex.h"
#include "episodic_client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SL_STATE 20            /* values of SLSendTrajectoryMex's state output */
#define SL_CONTEXT 10          /* values of SL's start context and controller parameters */
#define SL_TIMEOUT 20.0        /* s: timeOut [] or left out (SL's wrappers' own default) */
#define SL_EPISODE_STATES 9    /* SL's per-step task state rows: ball position, ball velocity, cup or target */
#define CHANNEL_VARIABLE "EPISODIC_CHANNEL"

static int64_t episode_id = -1;  /* the last start's episode id (-1: none yet; the first from the clock) */
static int max_commands = 0;     /* the running episode's commands after the start */

/* SL's per-step task state rows, by the task's state column names: the first of each row's
 * names that the task has fills it; a row none of whose names it has is 0. */
static const char *const sl_rows[SL_EPISODE_STATES][3] = {
    {"ball_x", NULL, NULL}, {"ball_y", NULL, NULL}, {"ball_z", NULL, NULL},
    {"ball_vx", "ball_xd", NULL}, {"ball_vy", NULL, NULL}, {"ball_vz", NULL, NULL},
    {"cup_x", "target_x", NULL}, {"cup_y", "target_y", NULL}, {"cup_z", "target_z", NULL}};

static const char *channel_name(void)
{
    const char *name = getenv(CHANNEL_VARIABLE);
    return name && *name ? name : "default";
}

static void raise_code(const char *who, int code)
{
    static const struct { int code; const char *id; } ids[] = {
        {EP_ERR_TIMEOUT, "episodic:timeout"}, {EP_ERR_RUNNER_GONE, "episodic:runnerGone"},
        {EP_ERR_VERSION, "episodic:version"}, {EP_ERR_NO_CHANNEL, "episodic:noChannel"},
        {EP_ERR_FOREIGN, "episodic:foreignChannel"}, {EP_ERR_IN_USE, "episodic:channelInUse"},
        {EP_ERR_ARGUMENT, "episodic:size"}, {EP_ERR_PROTOCOL, "episodic:protocol"}};
    const char *id = "episodic:channel";
    size_t i;
    for (i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ids[i].code == code)
            id = ids[i].id;
    mexErrMsgIdAndTxt(id, "%s: %s (channel from $%s, else 'default')", who, ep_last_error(), CHANNEL_VARIABLE);
}

static ep_client *attach(const char *who, double timeout)
{
    ep_client *c = NULL;
    int rc = ep_attach(channel_name(), timeout, &c);
    if (rc != EP_OK)
        raise_code(who, rc);
    return c;
}

static double number(const mxArray *a, const char *who, const char *what)
{
    if (!a || !(mxIsNumeric(a) || mxIsLogical(a)) || mxIsComplex(a) || mxGetNumberOfElements(a) != 1 ||
        !isfinite(mxGetScalar(a)))
        mexErrMsgIdAndTxt("episodic:argument", "%s: %s must be a finite real scalar", who, what);
    return mxGetScalar(a);
}

static const double *real_doubles(const mxArray *a, const char *who, const char *what)
{
    if (!mxIsDouble(a) || mxIsComplex(a) || mxIsSparse(a))
        mexErrMsgIdAndTxt("episodic:argument", "%s: %s must be a real (full) double array, got %s", who, what,
                          mxGetClassName(a));
    return mxGetPr(a);
}

/* stateBuffer zero-padded to SL_CONTEXT values into `out`; 0 when it is [] (none), else SL_CONTEXT.
 * Values past SL_CONTEXT must be 0 (SL's buffer is longer than what any task reads). */
static int sl_buffer(const mxArray *a, const char *who, double out[SL_CONTEXT])
{
    const double *v;
    size_t i, n;
    memset(out, 0, sizeof(double) * SL_CONTEXT);
    if (!a || mxIsEmpty(a))
        return 0;
    v = real_doubles(a, who, "stateBuffer");
    n = mxGetNumberOfElements(a);
    for (i = 0; i < n; i++) {
        if (i < SL_CONTEXT)
            out[i] = v[i];
        else if (v[i] != 0)
            mexErrMsgIdAndTxt("episodic:size", "%s: stateBuffer value %d is %g; SL's tasks read its first %d "
                              "values only (the rest must be 0)", who, (int)i + 1, v[i], SL_CONTEXT);
    }
    return SL_CONTEXT;
}

static mxArray *sl_state(const ep_reply *r, int controller)
{
    mxArray *out = mxCreateDoubleMatrix(SL_STATE, 1, mxREAL);
    double *s = mxGetPr(out);
    int i, at = 1;
    if (!r)
        return out;
    s[0] = r->reward;
    if (controller)
        s[at++] = r->n_steps;
    for (i = 0; i < r->n_state && at < SL_STATE; i++)
        s[at++] = r->state[i];
    return out;
}

static mxArray *reply_struct(const ep_reply *r)
{
    static const char *fields[] = {"flag", "flag_name", "message", "episode_id", "index", "n_steps",
                                   "episode_done", "episode_return", "success"};
    mxArray *s = mxCreateStructMatrix(1, 1, (int)(sizeof fields / sizeof fields[0]), fields);
    mxSetField(s, 0, "flag", mxCreateDoubleScalar(r->flag));
    mxSetField(s, 0, "flag_name", mxCreateString(ep_flag_name(r->flag)));
    mxSetField(s, 0, "message", mxCreateString(r->message));
    mxSetField(s, 0, "episode_id", mxCreateDoubleScalar((double)r->episode_id));
    mxSetField(s, 0, "index", mxCreateDoubleScalar(r->index));
    mxSetField(s, 0, "n_steps", mxCreateDoubleScalar(r->n_steps));
    mxSetField(s, 0, "episode_done", mxCreateDoubleScalar(r->episode_done));
    mxSetField(s, 0, "episode_return", mxCreateDoubleScalar(r->episode_return));
    mxSetField(s, 0, "success", mxCreateLogicalScalar(r->success != 0));
    return s;
}

/* -- SLSendTrajectoryMex ------------------------------------------------------------------ */
static void send_trajectory(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "SLSendTrajectoryMex";
    double buffer[SL_CONTEXT], timeout = SL_TIMEOUT, wait_time, index_value;
    const mxArray *trajectory;
    double *q = NULL, *zeros = NULL, *state = NULL;
    int index, sl_max, n_buffer, controller = 0, rc = EP_OK, n_dofs;
    size_t rows = 0, r, j;
    ep_client *c;
    ep_reply reply;

    if (nrhs < 4)
        mexErrMsgIdAndTxt("episodic:argument", "%s: usage: [state, flag] = %s(commandIdx, maxCommands, waitTime, "
                          "trajectory [, stateBuffer, timeOut])", who, who);
    index_value = number(prhs[0], who, "commandIdx");
    sl_max = (int)number(prhs[1], who, "maxCommands");
    wait_time = number(prhs[2], who, "waitTime (s)");
    trajectory = prhs[3];
    if (nrhs > 5 && !mxIsEmpty(prhs[5]))
        timeout = number(prhs[5], who, "timeOut (s)");
    if (timeout <= 0)
        mexErrMsgIdAndTxt("episodic:argument", "%s: timeOut must be > 0 s, got %g", who, timeout);
    if (index_value != -1 && (index_value != floor(index_value) || index_value < 1 || index_value > sl_max))
        mexErrMsgIdAndTxt("episodic:argument", "%s: commandIdx must be 1 (start), 2..maxCommands (%d; a motion "
                          "command) or -1 (reset), got %g", who, sl_max, index_value);
    index = (int)index_value;
    if (index != -1 && sl_max < 2)
        mexErrMsgIdAndTxt("episodic:argument", "%s: maxCommands counts the start: 2 for a start and one motion "
                          "command, got %d", who, sl_max);
    n_buffer = sl_buffer(nrhs > 4 ? prhs[4] : NULL, who, buffer);

    c = attach(who, timeout);
    n_dofs = ep_get_info(c)->n_dofs;
    if (episode_id < 0)
        episode_id = ep_episode_id(c);   /* from the clock, as every episodic client starts */
    if (index == 1) {
        max_commands = sl_max - 1;
        episode_id = episode_id < INT64_MAX ? episode_id + 1 : 0;
        rc = ep_start(c, episode_id, max_commands, NULL, buffer, n_buffer, &reply);
    } else {
        ep_set_episode_id(c, episode_id);
        if (index == -1) {
            rc = ep_reset(c, &reply);
        } else {
            if (mxGetNumberOfDimensions(trajectory) != 2 || mxGetN(trajectory) != (size_t)n_dofs ||
                mxGetM(trajectory) < 1) {
                ep_detach(c);
                mexErrMsgIdAndTxt("episodic:size", "%s: the trajectory must be steps x %d (one row per control step, "
                                  "one column per joint; 1 x %d for a controller command), got %d x %d", who, n_dofs,
                                  n_dofs, (int)mxGetM(trajectory), (int)mxGetN(trajectory));
            }
            rows = mxGetM(trajectory);
            controller = rows == 1;
            if (controller) {
                zeros = mxCalloc((size_t)n_dofs, sizeof(double));
                /* always SL's 10 values ([] too): the runner then runs it on the robot's own joint gains */
                rc = ep_send_gains(c, index - 1, sl_max - 1, zeros, zeros, NULL, EP_FF_GRAVITY_COMPENSATION,
                                   buffer, SL_CONTEXT, wait_time, &reply);
            } else {
                const double *m = real_doubles(trajectory, who, "trajectory");
                q = mxMalloc(sizeof(double) * rows * (size_t)n_dofs);
                for (r = 0; r < rows; r++)   /* column-major (Matlab) to row-major (the protocol) */
                    for (j = 0; j < (size_t)n_dofs; j++)
                        q[r * (size_t)n_dofs + j] = m[r + j * rows];
                rc = ep_send_trajectory(c, index - 1, sl_max - 1, q, NULL, NULL, (int)rows, 0.0, wait_time, &reply);
            }
        }
    }
    if (rc == EP_OK) {   /* the reply's state points into the client: keep it past the detach */
        state = mxMalloc(sizeof(double) * ((size_t)reply.n_state + 1));
        memcpy(state, reply.state, sizeof(double) * (size_t)reply.n_state);
        reply.state = state;
    }
    ep_detach(c);
    mxFree(q);
    mxFree(zeros);
    if (rc == EP_ERR_TIMEOUT) {   /* SL's answer to a command that got none in time: flag -1 */
        plhs[0] = sl_state(NULL, 0);
        if (nlhs > 1)
            plhs[1] = mxCreateDoubleScalar(-1);
        if (nlhs > 2)
            plhs[2] = mxCreateStructMatrix(1, 1, 0, NULL);
        return;
    }
    if (rc != EP_OK)
        raise_code(who, rc);
    if (reply.flag != EP_FLAG_OK && !(index == -1 && reply.flag == EP_FLAG_ABORTED_BY_LEARNER))
        mexWarnMsgIdAndTxt("episodic:flag", "command %d answered with flag %s: %s", index,
                           ep_flag_name(reply.flag), reply.message);
    plhs[0] = sl_state(&reply, controller);
    mxFree(state);
    if (nlhs > 1)
        plhs[1] = mxCreateDoubleScalar(1);
    if (nlhs > 2)
        plhs[2] = reply_struct(&reply);
}

/* -- SLGetEpisodeMex ---------------------------------------------------------------------- */
enum { Q, QD, QDD, Q_D, QD_D, QDD_D, U, EE_POS, EE_QUAT, TASK_STATE, INDEX, STEP, N_COLUMNS };

static void get_episode(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "SLGetEpisodeMex";
    static const char *names[N_COLUMNS] = {"q", "qd", "qdd", "q_d", "qd_d", "qdd_d", "u", "ee_pos", "ee_quat",
                                           "task_state", "index", "step"};
    int columns[N_COLUMNS], widths[N_COLUMNS], source[SL_EPISODE_STATES];
    double *data[N_COLUMNS], *out[11];
    int i, k, rows, motion = 0, n_dofs, n_states = SL_EPISODE_STATES, rc;
    const ep_info *info;
    ep_client *c;
    mxArray *results[11];

    if (nrhs > 0 && !mxIsEmpty(prhs[0])) {
        double v = number(prhs[0], who, "numStates");
        if (v != floor(v) || v < 0 || v > 1000)
            mexErrMsgIdAndTxt("episodic:argument", "%s: numStates must be an integer in 0..1000, got %g", who, v);
        n_states = (int)v;
    }
    c = attach(who, SL_TIMEOUT);
    info = ep_get_info(c);
    n_dofs = info->n_dofs;
    rows = ep_adopt_log_rows(c);
    for (i = 0; i < N_COLUMNS; i++) {
        columns[i] = ep_find_log_column(c, names[i], &widths[i]);
        if (columns[i] < 0) {
            ep_detach(c);
            raise_code(who, EP_ERR_LAYOUT);
        }
        data[i] = mxMalloc(sizeof(double) * ((size_t)rows * (size_t)widths[i] + 1));
    }
    for (k = 0; k < SL_EPISODE_STATES; k++) {
        source[k] = -1;
        for (i = 0; i < 3 && sl_rows[k][i] && source[k] < 0; i++)
            for (int s = 0; s < info->n_state; s++)
                if (strcmp(ep_state_name(c, s), sl_rows[k][i]) == 0)
                    source[k] = s;
    }
    rc = ep_get_log_columns(c, N_COLUMNS, columns, data, rows, &rows);
    ep_detach(c);
    if (rc != EP_OK)
        raise_code(who, rc);
    for (i = 0; i < rows; i++)   /* the motion steps: commands 1.. (not the move to the start) */
        motion += data[INDEX][i] >= 1;

    for (k = 0; k < 7; k++)
        results[k] = mxCreateDoubleMatrix((size_t)n_dofs, (size_t)motion, mxREAL);
    results[7] = mxCreateDoubleMatrix(7, (size_t)motion, mxREAL);
    results[8] = mxCreateDoubleMatrix((size_t)n_states, (size_t)motion, mxREAL);
    results[9] = mxCreateDoubleMatrix(1, (size_t)motion, mxREAL);
    results[10] = mxCreateDoubleMatrix(1, (size_t)motion, mxREAL);
    for (k = 0; k < 11; k++)
        out[k] = mxGetPr(results[k]);
    for (i = 0, k = 0; i < rows; i++) {
        size_t m = (size_t)k, d = (size_t)n_dofs;
        int col, s;
        if (data[INDEX][i] < 1)
            continue;
        /* a width x steps matrix is column-major: column m is the step's row of the log */
        for (col = Q; col <= U; col++)
            memcpy(out[col] + m * d, data[col] + (size_t)i * d, sizeof(double) * d);
        memcpy(out[7] + m * 7, data[EE_POS] + (size_t)i * 3, sizeof(double) * 3);
        memcpy(out[7] + m * 7 + 3, data[EE_QUAT] + (size_t)i * 4, sizeof(double) * 4);
        for (s = 0; s < n_states && s < SL_EPISODE_STATES; s++)
            if (source[s] >= 0)
                out[8][m * (size_t)n_states + (size_t)s] = data[TASK_STATE][(size_t)i * widths[TASK_STATE] + source[s]];
        out[9][m] = data[INDEX][i] + 1;   /* SL's command index: the start is 1 */
        out[10][m] = data[STEP][i] + 1;   /* the step within its command, from 1 */
        k++;
    }
    for (i = 0; i < N_COLUMNS; i++)
        mxFree(data[i]);
    for (k = 0; k < 11; k++) {
        if (k < (nlhs > 1 ? nlhs : 1))
            plhs[k] = results[k];
        else
            mxDestroyArray(results[k]);
    }
}

/* -- SLGetInfoMex --------------------------------------------------------------------------- */
static void get_info(int nlhs, mxArray *plhs[])
{
    ep_client *c = attach("SLGetInfoMex", SL_TIMEOUT);
    const ep_info *info = ep_get_info(c);
    double values[3] = {info->n_dofs, info->n_dofs, info->max_samples};
    int k;
    ep_detach(c);
    for (k = 0; k < 3 && k < (nlhs > 1 ? nlhs : 1); k++)
        plhs[k] = mxCreateDoubleScalar(values[k]);
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *name = mexFunctionName();
    if (strstr(name, "SLSendTrajectoryMex"))
        send_trajectory(nlhs, plhs, nrhs, prhs);
    else if (strstr(name, "SLGetEpisodeMex"))
        get_episode(nlhs, plhs, nrhs, prhs);
    else if (strstr(name, "SLGetInfoMex"))
        get_info(nlhs, plhs);
    else
        mexErrMsgIdAndTxt("episodic:argument", "%s: build sl_mex.c as SLSendTrajectoryMex, SLGetEpisodeMex or "
                          "SLGetInfoMex (episodic_build)", name);
}
