/*
 * episodic_mex.c: the MEX gateway behind the ep*.m functions (Octave and Matlab), built together
 * with the C client (clients/c/episodic_client.c); see episodic_build.m:
 *
 *     Octave:  mkoctfile --mex -o episodic_mex.mex -I../c episodic_mex.c ../c/episodic_client.c -lrt -lpthread
 *     Matlab:  mex -output episodic_mex -I../c episodic_mex.c ../c/episodic_client.c -lrt -lpthread
 *
 * One channel is attached at a time and kept in this MEX file's persistent state (mexAtExit
 * detaches). Matlab/Octave matrices are column-major; the protocol is row-major: trajectories
 * (steps x joints) are transposed explicitly on the way out, log columns on the way in.
 *
 * Calls (the wrappers' documentation has the user-level view):
 *   info = episodic_mex('connect', channel)
 *          episodic_mex('disconnect')
 *   info = episodic_mex('info')
 *   [reward, state, flag, reply, success, episodeReturn] = episodic_mex('start', posture, context, maxCommands,
 *                                                                       timeOut)
 *   [reward, state, flag, reply, success, episodeReturn] = episodic_mex('trajectory', q, qd, qdd, rate, waitTime,
 *                                                                       trajIdx, maxCommands, timeOut)
 *   [reward, state, flag, reply, success, episodeReturn] = episodic_mex('gains', gains, mode, taskGains, waitTime,
 *                                                                       trajIdx, maxCommands, timeOut)
 *   [reward, state, flag, reply, success, episodeReturn] = episodic_mex('reset', timeOut)
 *   episode = episodic_mex('episode')
 *   [returns, states, flags, info, logs] = episodic_mex('evaluate', Q, contexts, postures, Qd, Qdd, rate,
 *                                                       waitTime, timeOut)
 *   id = episodic_mex('episode_id' [, next])
 */
#include "mex.h"
#include "episodic_client.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DEFAULT_TIMEOUT 30.0
#define MAX_EXACT 9007199254740992.0 /* 2^53: ids are passed as doubles */

static ep_client *client = NULL;
static char channel_name[80] = "";
static char gone_note[200] = "";          /* why the last channel was dropped */
static double last_episode_id = -1;       /* the id of the last start (the MEX's counter) */
static int counter_ready = 0;             /* last_episode_id set (from the clock or epEpisodeId) */
static int at_exit_registered = 0;

static void detach(void)
{
    if (client) {
        ep_detach(client);
        client = NULL;
    }
}

/* -- argument helpers ------------------------------------------------------------------- */
static int is_empty(const mxArray *a) { return a == NULL || mxIsEmpty(a); }

static int is_real_numeric(const mxArray *a)
{
    return (mxIsNumeric(a) || mxIsLogical(a)) && !mxIsComplex(a) && !mxIsSparse(a);
}

static double scalar(const mxArray *a, const char *who, const char *what)
{
    double v;
    if (a == NULL || !is_real_numeric(a) || mxGetNumberOfElements(a) != 1)
        mexErrMsgIdAndTxt("episodic:argument", "%s: %s must be a real scalar", who, what);
    v = mxGetScalar(a);
    if (!isfinite(v))
        mexErrMsgIdAndTxt("episodic:argument", "%s: %s must be finite, got %g", who, what, v);
    return v;
}

static int integer(const mxArray *a, const char *who, const char *what, double lo, double hi)
{
    double v = scalar(a, who, what);
    if (v != floor(v) || v < lo || v > hi)
        mexErrMsgIdAndTxt("episodic:argument", "%s: %s must be an integer in %.0f..%.0f, got %g", who, what,
                          lo, hi, v);
    return (int)v;
}

static double timeout_arg(const mxArray *a, const char *who)
{
    double t;
    if (is_empty(a))
        return DEFAULT_TIMEOUT;
    t = scalar(a, who, "timeOut (s)");
    if (t <= 0)
        mexErrMsgIdAndTxt("episodic:argument", "%s: timeOut must be > 0 s, got %g", who, t);
    return t;
}

static const double *doubles(const mxArray *a, const char *who, const char *what)
{
    if (!mxIsDouble(a) || mxIsComplex(a) || mxIsSparse(a))
        mexErrMsgIdAndTxt("episodic:argument", "%s: %s must be a real (full) double array, got %s", who,
                          what, mxGetClassName(a));
    return mxGetPr(a);
}

static ep_client *connected(const char *who)
{
    if (!client)
        mexErrMsgIdAndTxt("episodic:notConnected", "%s: not connected%s; call epConnect(channel) first", who,
                          gone_note);
    return client;
}

/* Raise the C client's failure as a Matlab error. */
static void raise_error(const char *who, int code)
{
    static char message[700];
    const char *id;
    switch (code) {
    case EP_ERR_TIMEOUT: id = "episodic:timeout"; break;
    case EP_ERR_RUNNER_GONE: id = "episodic:runnerGone"; break;
    case EP_ERR_VERSION: id = "episodic:version"; break;
    case EP_ERR_NO_CHANNEL: id = "episodic:noChannel"; break;
    case EP_ERR_FOREIGN: id = "episodic:foreignChannel"; break;
    case EP_ERR_IN_USE: id = "episodic:channelInUse"; break;
    case EP_ERR_ARGUMENT: id = "episodic:size"; break;
    case EP_ERR_PROTOCOL: id = "episodic:protocol"; break;
    case EP_ERR_BATCH: id = "episodic:batch"; break;
    default: id = "episodic:channel"; break;
    }
    snprintf(message, sizeof message, "%s: %s", who, ep_last_error());
    if (code == EP_ERR_RUNNER_GONE) {
        /* the mapping belongs to a dead runner: drop it; epConnect attaches to the next one */
        snprintf(gone_note, sizeof gone_note, " (the runner of channel '%s' has exited)", channel_name);
        detach();
        strncat(message, "; start a runner and call epConnect again", sizeof message - strlen(message) - 1);
    }
    mexErrMsgIdAndTxt(id, "%s", message);
}

/* `pages` column-major rows x cols matrices, one after another (Matlab) -> row-major (the protocol),
 * one after another, into mxMalloc'd memory. */
static double *to_row_major(const double *src, size_t rows, size_t cols, size_t pages)
{
    double *dst = mxMalloc(sizeof(double) * (rows * cols * pages + 1));
    size_t p, r, j, size = rows * cols;
    for (p = 0; p < pages; p++)
        for (r = 0; r < rows; r++)
            for (j = 0; j < cols; j++)
                dst[p * size + r * cols + j] = src[p * size + r + j * rows];
    return dst;
}

/* Row-major rows x cols (the protocol) -> a new column-major Matlab matrix. */
static mxArray *from_row_major(const double *src, size_t rows, size_t cols)
{
    mxArray *out = mxCreateDoubleMatrix(rows, cols, mxREAL);
    double *dst = mxGetPr(out);
    size_t r, j;
    for (r = 0; r < rows; r++)
        for (j = 0; j < cols; j++)
            dst[r + j * rows] = src[r * cols + j];
    return out;
}

static mxArray *info_struct(void)
{
    static const char *fields[] = {"channel", "runner_pid", "n_dofs", "max_samples", "max_log_steps",
                                   "max_context", "control_rate", "state_names", "log_columns",
                                   "episode_id", "max_batch", "max_batch_commands", "max_batch_values"};
    const ep_info *info = ep_get_info(client);
    mxArray *s = mxCreateStructMatrix(1, 1, 13, fields), *names, *columns;
    int i;
    mxSetField(s, 0, "channel", mxCreateString(info->channel));
    mxSetField(s, 0, "runner_pid", mxCreateDoubleScalar((double)info->runner_pid));
    mxSetField(s, 0, "n_dofs", mxCreateDoubleScalar(info->n_dofs));
    mxSetField(s, 0, "max_samples", mxCreateDoubleScalar(info->max_samples));
    mxSetField(s, 0, "max_log_steps", mxCreateDoubleScalar(info->max_log_steps));
    mxSetField(s, 0, "max_context", mxCreateDoubleScalar(info->max_context));
    mxSetField(s, 0, "control_rate", mxCreateDoubleScalar(info->control_rate));
    names = mxCreateCellMatrix(1, info->n_state);
    for (i = 0; i < info->n_state; i++)
        mxSetCell(names, i, mxCreateString(ep_state_name(client, i)));
    mxSetField(s, 0, "state_names", names);
    columns = mxCreateCellMatrix(1, info->n_log_columns);
    for (i = 0; i < info->n_log_columns; i++)
        mxSetCell(columns, i, mxCreateString(ep_log_column_name(client, i, NULL)));
    mxSetField(s, 0, "log_columns", columns);
    mxSetField(s, 0, "episode_id", mxCreateDoubleScalar(last_episode_id));
    mxSetField(s, 0, "max_batch", mxCreateDoubleScalar(info->max_batch));
    mxSetField(s, 0, "max_batch_commands", mxCreateDoubleScalar(info->max_batch_commands));
    mxSetField(s, 0, "max_batch_values", mxCreateDoubleScalar((double)info->max_batch_values));
    return s;
}

/* [reward, state, flag, reply, success, episodeReturn]; reply.posture is 1 x n_dofs rad, the posture held
 * after the command; success (logical) and episodeReturn as the reply's, also in reply */
static void reply_outputs(int nlhs, mxArray *plhs[], const ep_reply *r)
{
    static const char *fields[] = {"episode_id", "index", "flag", "flag_name", "reward", "n_steps",
                                   "episode_done", "machine_state", "log_rows", "log_truncated", "message",
                                   "state", "posture", "success", "episode_return"};
    mxArray *state = mxCreateDoubleMatrix(1, (size_t)r->n_state, mxREAL);
    if (r->n_state > 0)
        memcpy(mxGetPr(state), r->state, sizeof(double) * (size_t)r->n_state);
    plhs[0] = mxCreateDoubleScalar(r->reward);
    if (nlhs > 1)
        plhs[1] = state;
    if (nlhs > 2)
        plhs[2] = mxCreateDoubleScalar(r->flag);
    if (nlhs > 3) {
        mxArray *s = mxCreateStructMatrix(1, 1, (int)(sizeof fields / sizeof fields[0]), fields), *posture;
        mxSetField(s, 0, "episode_id", mxCreateDoubleScalar((double)r->episode_id));
        mxSetField(s, 0, "index", mxCreateDoubleScalar(r->index));
        mxSetField(s, 0, "flag", mxCreateDoubleScalar(r->flag));
        mxSetField(s, 0, "flag_name", mxCreateString(ep_flag_name(r->flag)));
        mxSetField(s, 0, "reward", mxCreateDoubleScalar(r->reward));
        mxSetField(s, 0, "n_steps", mxCreateDoubleScalar(r->n_steps));
        mxSetField(s, 0, "episode_done", mxCreateDoubleScalar(r->episode_done));
        mxSetField(s, 0, "machine_state", mxCreateDoubleScalar(r->machine_state));
        mxSetField(s, 0, "log_rows", mxCreateDoubleScalar(r->log_rows));
        mxSetField(s, 0, "log_truncated", mxCreateDoubleScalar(r->log_truncated));
        mxSetField(s, 0, "message", mxCreateString(r->message));
        mxSetField(s, 0, "state", mxDuplicateArray(state));
        posture = mxCreateDoubleMatrix(1, (size_t)r->n_dofs, mxREAL);
        memcpy(mxGetPr(posture), r->posture, sizeof(double) * (size_t)r->n_dofs);
        mxSetField(s, 0, "posture", posture);
        mxSetField(s, 0, "success", mxCreateLogicalScalar(r->success != 0));
        mxSetField(s, 0, "episode_return", mxCreateDoubleScalar(r->episode_return));
        plhs[3] = s;
    }
    if (nlhs > 4)
        plhs[4] = mxCreateLogicalScalar(r->success != 0);
    if (nlhs > 5)
        plhs[5] = mxCreateDoubleScalar(r->episode_return);
    if (nlhs < 2)
        mxDestroyArray(state);
}

/* -- commands --------------------------------------------------------------------------- */
/* The next id of the MEX's counter: each start, each episode of a batch (within the 2^53 ids
 * that a double holds exactly). */
static int64_t next_episode_id(void)
{
    if (last_episode_id + 1 >= MAX_EXACT)
        last_episode_id = 0;
    last_episode_id += 1;
    return (int64_t)last_episode_id;
}

static void cmd_connect(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "epConnect";
    char name[80];
    int rc;
    if (nrhs < 1 || !mxIsChar(prhs[0]) || mxGetString(prhs[0], name, sizeof name) != 0)
        mexErrMsgIdAndTxt("episodic:argument", "%s: channel must be a string of 1-64 letters, digits, "
                          "'_' or '-'", who);
    detach();
    if (!at_exit_registered) {
        mexAtExit(detach);
        at_exit_registered = 1;
    }
    rc = ep_attach(name, DEFAULT_TIMEOUT, &client);
    if (rc != EP_OK)
        raise_error(who, rc);
    strcpy(channel_name, name);
    gone_note[0] = '\0';
    if (!counter_ready) {      /* like the Python client: ids start from the clock */
        last_episode_id = (double)ep_episode_id(client);
        counter_ready = 1;
    }
    if (nlhs > 0)
        plhs[0] = info_struct();
}

static void cmd_start(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "epSendTrajectory";
    ep_client *c = connected(who);
    const ep_info *info = ep_get_info(c);
    const double *posture = NULL, *context = NULL;
    int max_commands, n_context = 0, rc;
    ep_reply reply;

    if (nrhs < 4)
        mexErrMsgIdAndTxt("episodic:argument", "%s: start needs posture, context, maxCommands, timeOut", who);
    if (!is_empty(prhs[0])) {
        posture = doubles(prhs[0], who, "the start posture (trajectory with trajIdx 0)");
        if (mxGetNumberOfElements(prhs[0]) != (size_t)info->n_dofs ||
            (mxGetM(prhs[0]) != 1 && mxGetN(prhs[0]) != 1))
            mexErrMsgIdAndTxt("episodic:size", "%s: with trajIdx 0 the trajectory is the start posture, "
                              "1 x %d (or [] for the task's start posture), got %d x %d", who, info->n_dofs,
                              (int)mxGetM(prhs[0]), (int)mxGetN(prhs[0]));
    }
    if (!is_empty(prhs[1])) {
        context = doubles(prhs[1], who, "stateBuffer (the context)");
        n_context = (int)mxGetNumberOfElements(prhs[1]);
        if (n_context > info->max_context)
            mexErrMsgIdAndTxt("episodic:size", "%s: the context (stateBuffer) has %d values; the runner on "
                              "channel '%s' takes at most %d", who, n_context, info->channel, info->max_context);
    }
    max_commands = integer(prhs[2], who, "maxCommands", 0, 2147483647.0);
    ep_set_timeout(c, timeout_arg(prhs[3], who));
    rc = ep_start(c, next_episode_id(), max_commands, posture, context, n_context, &reply);
    if (rc != EP_OK)
        raise_error(who, rc);
    reply_outputs(nlhs, plhs, &reply);
}

static void cmd_trajectory(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "epSendTrajectory";
    ep_client *c = connected(who);
    const ep_info *info = ep_get_info(c);
    const char *names[3] = {"trajectory", "qd", "qdd"};
    double *wire[3] = {NULL, NULL, NULL}, rate = 0, wait_time;
    size_t rows, cols;
    int i, index, max_commands, rc;
    ep_reply reply;

    if (nrhs < 8)
        mexErrMsgIdAndTxt("episodic:argument", "%s: trajectory needs q, qd, qdd, rate, waitTime, trajIdx, "
                          "maxCommands, timeOut", who);
    if (is_empty(prhs[0]))
        mexErrMsgIdAndTxt("episodic:size", "%s: the trajectory of segment %g is empty; a segment is steps x %d. "
                          "To start an episode use trajIdx 0 (this client's start; SL's start index 1 is "
                          "SLSendTrajectoryMex's, see clients/README.md)", who,
                          is_real_numeric(prhs[5]) && mxGetNumberOfElements(prhs[5]) == 1 ? mxGetScalar(prhs[5]) : 1.0,
                          info->n_dofs);
    rows = mxGetM(prhs[0]);
    cols = mxGetN(prhs[0]);
    if (mxGetNumberOfDimensions(prhs[0]) != 2 || cols != (size_t)info->n_dofs)
        mexErrMsgIdAndTxt("episodic:size", "%s: the trajectory must be steps x %d (one row per time step, one "
                          "column per joint), got %d x %d%s", who, info->n_dofs, (int)rows, (int)cols,
                          rows == (size_t)info->n_dofs ? "; pass its transpose" : "");
    if (rows > (size_t)info->max_samples)
        mexErrMsgIdAndTxt("episodic:size", "%s: the trajectory has %d steps; the runner on channel '%s' takes "
                          "at most %d", who, (int)rows, info->channel, info->max_samples);
    for (i = 0; i < 3; i++) {
        const mxArray *a = prhs[i];
        if (i > 0 && is_empty(a))
            continue;
        if (i > 0 && (mxGetM(a) != rows || mxGetN(a) != cols || mxGetNumberOfDimensions(a) != 2))
            mexErrMsgIdAndTxt("episodic:size", "%s: %s must have the trajectory's size %d x %d, got %d x %d",
                              who, names[i], (int)rows, (int)cols, (int)mxGetM(a), (int)mxGetN(a));
        wire[i] = to_row_major(doubles(a, who, names[i]), rows, cols, 1);  /* explicit: column- to row-major */
    }
    if (!is_empty(prhs[3]))
        rate = scalar(prhs[3], who, "rate (Hz)");
    wait_time = scalar(prhs[4], who, "waitTime (s)");
    index = integer(prhs[5], who, "trajIdx of a segment", 1, 2147483647.0);
    max_commands = integer(prhs[6], who, "maxCommands", 0, 2147483647.0);
    ep_set_timeout(c, timeout_arg(prhs[7], who));
    rc = ep_send_trajectory(c, index, max_commands, wire[0], wire[1], wire[2], (int)rows, rate, wait_time, &reply);
    for (i = 0; i < 3; i++)
        mxFree(wire[i]);
    if (rc != EP_OK)
        raise_error(who, rc);
    reply_outputs(nlhs, plhs, &reply);
}

static int feedforward_mode(const mxArray *a, const char *who)
{
    static const char *modes[] = {"none", "gravity_compensation", "feedforward", "inverse_dynamics"};
    char text[64];
    int i;
    if (is_empty(a))
        return EP_FF_GRAVITY_COMPENSATION;
    if (mxIsChar(a)) {
        if (mxGetString(a, text, sizeof text) == 0) {
            for (i = 0; text[i]; i++)
                text[i] = (char)tolower((unsigned char)text[i]);
            for (i = 0; i < 4; i++)
                if (strcmp(text, modes[i]) == 0)
                    return i;
        }
        mexErrMsgIdAndTxt("episodic:argument", "%s: unknown feedforward mode; use 'none', "
                          "'gravity_compensation', 'feedforward' or 'inverse_dynamics' (or 0..3)", who);
    }
    return integer(a, who, "the feedforward mode", 0, 3);
}

static const double *gain_vector(const mxArray *a, const char *who, const char *what, int n_dofs)
{
    const double *v = doubles(a, who, what);
    if (mxGetNumberOfElements(a) != (size_t)n_dofs || (mxGetM(a) != 1 && mxGetN(a) != 1))
        mexErrMsgIdAndTxt("episodic:size", "%s: %s must have %d values (one per joint), got %d x %d", who, what,
                          n_dofs, (int)mxGetM(a), (int)mxGetN(a));
    return v;
}

static void cmd_gains(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "epSendController";
    ep_client *c = connected(who);
    const ep_info *info = ep_get_info(c);
    const double *kp, *kd, *ki = NULL, *task_gains = NULL;
    const mxArray *g, *mode_arg;
    int mode, n_task = 0, index, max_commands, rc, n = info->n_dofs;
    double wait_time;
    ep_reply reply;

    if (nrhs < 7)
        mexErrMsgIdAndTxt("episodic:argument", "%s: gains needs gains, mode, taskGains, waitTime, trajIdx, "
                          "maxCommands, timeOut", who);
    g = prhs[0];
    mode_arg = prhs[1];
    if (mxIsStruct(g)) {
        const mxArray *f_kp = mxGetField(g, 0, "kp"), *f_kd = mxGetField(g, 0, "kd"),
                      *f_ki = mxGetField(g, 0, "ki"), *f_mode = mxGetField(g, 0, "mode");
        if (mxGetNumberOfElements(g) != 1 || !f_kp || !f_kd)
            mexErrMsgIdAndTxt("episodic:argument", "%s: a gains struct needs fields kp and kd (ki and mode "
                              "optional)", who);
        kp = gain_vector(f_kp, who, "gains.kp", n);
        kd = gain_vector(f_kd, who, "gains.kd", n);
        if (f_ki && !is_empty(f_ki))
            ki = gain_vector(f_ki, who, "gains.ki", n);
        if (f_mode && is_empty(mode_arg))
            mode_arg = f_mode;
    } else {
        const double *m;
        size_t rows = mxGetM(g), cols = mxGetN(g);
        if (mxGetNumberOfDimensions(g) != 2 || rows != (size_t)n || (cols != 2 && cols != 3))
            mexErrMsgIdAndTxt("episodic:size", "%s: gains must be %d x 3 ([kp kd ki], one row per joint) or "
                              "%d x 2 ([kp kd]), got %d x %d%s", who, n, n, (int)rows, (int)cols,
                              cols == (size_t)n && (rows == 2 || rows == 3) ? "; pass its transpose" : "");
        m = doubles(g, who, "gains");
        kp = m;                    /* column-major: column k is contiguous */
        kd = m + n;
        if (cols == 3)
            ki = m + 2 * n;
    }
    mode = feedforward_mode(mode_arg, who);
    if (!is_empty(prhs[2])) {
        task_gains = doubles(prhs[2], who, "stateBuffer (the task gains)");
        n_task = (int)mxGetNumberOfElements(prhs[2]);
        if (n_task > info->max_context)
            mexErrMsgIdAndTxt("episodic:size", "%s: the task gains (stateBuffer) have %d values; the runner on "
                              "channel '%s' takes at most %d", who, n_task, info->channel, info->max_context);
    }
    wait_time = scalar(prhs[3], who, "waitTime (s)");
    index = integer(prhs[4], who, "trajIdx", 0, 2147483647.0);
    if (index == 0)
        mexErrMsgIdAndTxt("episodic:argument", "%s: trajIdx 0 starts an episode; start it with "
                          "epSendTrajectory(posture, 0, 0, maxCommands, context, timeOut), then send the gains "
                          "as segment 1..maxCommands", who);
    max_commands = integer(prhs[5], who, "maxCommands", 0, 2147483647.0);
    ep_set_timeout(c, timeout_arg(prhs[6], who));
    rc = ep_send_gains(c, index, max_commands, kp, kd, ki, mode, task_gains, n_task, wait_time, &reply);
    if (rc != EP_OK)
        raise_error(who, rc);
    reply_outputs(nlhs, plhs, &reply);
}

static void cmd_reset(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "epReset";
    ep_client *c = connected(who);
    ep_reply reply;
    int rc;
    ep_set_timeout(c, timeout_arg(nrhs > 0 ? prhs[0] : NULL, who));
    rc = ep_reset(c, &reply);
    if (rc != EP_OK)
        raise_error(who, rc);
    reply_outputs(nlhs, plhs, &reply);
}

static int valid_field_name(const char *name)
{
    size_t i, n = strlen(name);
    if (n == 0 || n > 63 || !isalpha((unsigned char)name[0]))
        return 0;
    for (i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return 0;
    return 1;
}

/* The fields of an episode struct, into `fields` (room for n_log_columns + n_state): the log
 * columns, then the task state columns that are valid field names and clash with none (a warning
 * names each one left out). Returns their count. */
static int episode_fields(ep_client *c, const char *who, const char **fields)
{
    const ep_info *info = ep_get_info(c);
    int i, k, n_fields = 0, task_state = ep_find_log_column(c, "task_state", NULL) >= 0;

    for (i = 0; i < info->n_log_columns; i++) {
        const char *name = ep_log_column_name(c, i, NULL);
        if (valid_field_name(name))
            fields[n_fields++] = name;
        else
            mexWarnMsgIdAndTxt("episodic:field", "%s: log column '%s' is not a valid field name; skipped", who, name);
    }
    for (i = 0; i < info->n_state && task_state; i++) {
        const char *name = ep_state_name(c, i);
        int clash = !valid_field_name(name);
        for (k = 0; k < n_fields && !clash; k++)
            clash = strcmp(fields[k], name) == 0;
        if (clash)
            mexWarnMsgIdAndTxt("episodic:field", "%s: task state column '%s' clashes with a log column or is "
                               "not a valid field name; it is only in task_state", who, name);
        else
            fields[n_fields++] = name;
    }
    return n_fields;
}

/* Element `element` of struct array `s` (with the fields of episode_fields): the episode in the
 * log block, one steps x width matrix per field. */
static void set_episode(ep_client *c, const char *who, mxArray *s, size_t element)
{
    const ep_info *info = ep_get_info(c);
    int n_cols = info->n_log_columns, rows = ep_log_rows(c), total_width = 0, task_state = -1;
    int i, k, rc, width;
    int *columns = mxMalloc(sizeof(int) * (size_t)n_cols);
    double **out = mxMalloc(sizeof(double *) * (size_t)n_cols), *buffer;

    for (i = 0; i < n_cols; i++) {
        ep_log_column_name(c, i, &width);
        columns[i] = i;
        total_width += width;
    }
    buffer = mxMalloc(sizeof(double) * ((size_t)rows * (size_t)total_width + 1));
    for (i = 0, k = 0; i < n_cols; i++) {
        out[i] = buffer + k;
        ep_log_column_name(c, i, &width);
        k += rows * width;
    }
    rc = ep_get_log_columns(c, n_cols, columns, out, rows, &rows);
    if (rc != EP_OK)
        raise_error(who, rc);

    for (i = 0; i < n_cols; i++) {
        const char *name = ep_log_column_name(c, i, &width);
        if (strcmp(name, "task_state") == 0)
            task_state = i;
        if (valid_field_name(name))
            mxSetField(s, element, name, from_row_major(out[i], (size_t)rows, (size_t)width));
    }
    if (task_state >= 0) {
        ep_log_column_name(c, task_state, &width);
        for (i = 0; i < info->n_state && i < width; i++) {
            const char *name = ep_state_name(c, i);
            if (mxGetFieldNumber(s, name) >= 0 && mxGetField(s, element, name) == NULL) {
                mxArray *col = mxCreateDoubleMatrix((size_t)rows, 1, mxREAL);
                double *dst = mxGetPr(col);
                for (k = 0; k < rows; k++)
                    dst[k] = out[task_state][(size_t)k * width + i];
                mxSetField(s, element, name, col);
            }
        }
    }
    mxFree(buffer);
    mxFree(out);
    mxFree(columns);
}

/* A 1 x n struct array for n episode logs (set_episode fills its elements). */
static mxArray *episode_structs(ep_client *c, const char *who, size_t n)
{
    const ep_info *info = ep_get_info(c);
    const char **fields = mxMalloc(sizeof(char *) * (size_t)(info->n_log_columns + info->n_state + 1));
    mxArray *s = mxCreateStructMatrix(1, n, episode_fields(c, who, fields), fields);
    mxFree(fields);
    return s;
}

static void cmd_episode(int nlhs, mxArray *plhs[])
{
    const char *who = "epGetEpisode";
    ep_client *c = connected(who);
    (void)nlhs;
    plhs[0] = episode_structs(c, who, 1);
    set_episode(c, who, plhs[0], 0);
}

/* "rows x cols x ..." of `a`, into buf. */
static const char *size_text(const mxArray *a, char *buf, size_t size)
{
    const mwSize *dims = mxGetDimensions(a);
    size_t i, n = (size_t)mxGetNumberOfDimensions(a), at;
    at = (size_t)snprintf(buf, size, "%d", (int)dims[0]);
    for (i = 1; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, " x %d", (int)dims[i]);
    return buf;
}

/* An optional matrix of epEvaluateBatch with one column per episode: [] (NULL), *rows x n, or
 * *rows x 1 for every episode; *stride: values from one episode's column to the next (0: shared). */
static const double *episode_columns(const mxArray *a, const char *who, const char *what, size_t n, size_t *rows,
                                     size_t *stride)
{
    char got[80];
    *rows = 0;
    *stride = 0;
    if (is_empty(a))
        return NULL;
    if (mxGetNumberOfDimensions(a) != 2 || (mxGetN(a) != n && mxGetN(a) != 1))
        mexErrMsgIdAndTxt("episodic:size", "%s: %s must have one column per episode (%d) or one column for all, "
                          "got %s", who, what, (int)n, size_text(a, got, sizeof got));
    *rows = mxGetM(a);
    *stride = mxGetN(a) == n ? *rows : 0;
    return doubles(a, who, what);
}

/* epEvaluateBatch: N episodes, each a start (context and posture column k, max_commands 1) and
 * the trajectory Q(:, :, k) as its segment, evaluated in as many batches as the runner needs. */
static void cmd_evaluate(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "epEvaluateBatch";
    static const char *names[] = {"Qd", "Qdd"};
    char got[80], got2[80];
    static const char *info_fields[] = {"success", "n_steps", "episode_id", "n_replies", "message", "flag_name",
                                        "rewards", "command_flags", "command_steps", "command_states"};
    enum { SUCCESS, N_STEPS, EPISODE_ID, N_REPLIES, MESSAGE, FLAG_NAME, REWARDS, COMMAND_FLAGS, COMMAND_STEPS,
           COMMAND_STATES, N_INFO };
    ep_client *c = connected(who);
    const ep_info *info = ep_get_info(c);
    const mxArray *Q;
    const mwSize *dims;
    const double *contexts, *postures;
    double *q, *derivatives[2] = {NULL, NULL}, rate = 0, wait_time = 0, timeout = 0;
    double *returns, *states, *flags, *field[N_INFO];
    size_t samples, n, ndims, size, n_dofs = (size_t)info->n_dofs, n_state = (size_t)info->n_state;
    size_t n_context, context_stride, posture_rows, posture_stride, i;
    mwSize state_dims[3];
    ep_command *commands;
    ep_episode *episodes;
    ep_result *results;
    mxArray *out[5], *details[N_INFO];
    int keep_logs = nlhs > 4, first, k, j, m, rc;

    if (nrhs < 8)
        mexErrMsgIdAndTxt("episodic:argument", "%s: evaluate needs Q, contexts, postures, Qd, Qdd, rate, waitTime, "
                          "timeOut", who);
    Q = prhs[0];
    dims = mxGetDimensions(Q);
    ndims = mxGetNumberOfDimensions(Q);
    if (is_empty(Q) || ndims > 3 || (size_t)dims[1] != n_dofs)
        mexErrMsgIdAndTxt("episodic:size", "%s: Q must be samples x %d x N (one row per time step, one column per "
                          "joint, one page per episode), got %s", who, (int)n_dofs, size_text(Q, got, sizeof got));
    samples = dims[0];
    n = ndims == 3 ? dims[2] : 1;
    if (samples > (size_t)info->max_samples)
        mexErrMsgIdAndTxt("episodic:size", "%s: Q has %d samples per episode; the runner on channel '%s' takes at "
                          "most %d", who, (int)samples, info->channel, info->max_samples);
    if (n > INT_MAX / 2)
        mexErrMsgIdAndTxt("episodic:size", "%s: Q has %.0f pages (episodes); evaluate at most %d at a time", who,
                          (double)n, INT_MAX / 2);
    q = to_row_major(doubles(Q, who, "Q"), samples, n_dofs, n);  /* explicit: column- to row-major */
    for (k = 0; k < 2; k++) {
        const mxArray *a = prhs[3 + k];
        if (is_empty(a))
            continue;
        if ((size_t)mxGetNumberOfDimensions(a) != ndims || memcmp(mxGetDimensions(a), dims, sizeof(mwSize) * ndims) != 0)
            mexErrMsgIdAndTxt("episodic:size", "%s: %s must have Q's size %s, got %s", who, names[k],
                              size_text(Q, got, sizeof got), size_text(a, got2, sizeof got2));
        derivatives[k] = to_row_major(doubles(a, who, names[k]), samples, n_dofs, n);
    }
    contexts = episode_columns(prhs[1], who, "contexts", n, &n_context, &context_stride);
    if (n_context > (size_t)info->max_context)
        mexErrMsgIdAndTxt("episodic:size", "%s: the contexts have %d values each; the runner on channel '%s' takes "
                          "at most %d", who, (int)n_context, info->channel, info->max_context);
    postures = episode_columns(prhs[2], who, "postures", n, &posture_rows, &posture_stride);
    if (postures && posture_rows != n_dofs)
        mexErrMsgIdAndTxt("episodic:size", "%s: postures must be %d x N (one start posture per column), got %s",
                          who, (int)n_dofs, size_text(prhs[2], got, sizeof got));
    if (!is_empty(prhs[5]))
        rate = scalar(prhs[5], who, "rate (Hz)");
    if (!is_empty(prhs[6]))
        wait_time = scalar(prhs[6], who, "waitTime (s)");
    ep_set_timeout(c, timeout_arg(prhs[7], who));   /* the log fetches: timeOut, or 30 s */
    if (!is_empty(prhs[7]))
        timeout = timeout_arg(prhs[7], who);       /* each batch: timeOut, or as long as the runner lives */

    size = samples * n_dofs;
    commands = mxCalloc(2 * n, sizeof *commands);
    episodes = mxMalloc(n * sizeof *episodes);
    results = mxMalloc(n * sizeof *results);
    for (i = 0; i < n; i++) {
        ep_command *start = &commands[2 * i], *segment = start + 1;
        start->kind = EP_KIND_START;
        start->episode_id = segment->episode_id = next_episode_id();
        start->max_commands = segment->max_commands = 1;
        start->posture = postures ? postures + i * posture_stride : NULL;
        start->context = contexts ? contexts + i * context_stride : NULL;
        start->n_context = (int)n_context;
        segment->kind = EP_KIND_TRAJECTORY;
        segment->index = 1;
        segment->q = q + i * size;
        segment->qd = derivatives[0] ? derivatives[0] + i * size : NULL;
        segment->qdd = derivatives[1] ? derivatives[1] + i * size : NULL;
        segment->n_samples = (int)samples;
        segment->rate = rate;
        segment->wait_time = wait_time;
        episodes[i].commands = start;
        episodes[i].n_commands = 2;
    }

    out[0] = mxCreateDoubleMatrix(1, n, mxREAL);
    out[1] = mxCreateDoubleMatrix(n_state, n, mxREAL);
    out[2] = mxCreateDoubleMatrix(1, n, mxREAL);
    out[4] = keep_logs ? episode_structs(c, who, n) : NULL;
    details[SUCCESS] = mxCreateLogicalMatrix(1, n);
    details[MESSAGE] = mxCreateCellMatrix(1, n);
    details[FLAG_NAME] = mxCreateCellMatrix(1, n);
    for (k = N_STEPS; k < COMMAND_STATES; k++)
        if (k != MESSAGE && k != FLAG_NAME)
            details[k] = mxCreateDoubleMatrix(k >= REWARDS ? 2 : 1, n, mxREAL);
    state_dims[0] = n_state;
    state_dims[1] = 2;
    state_dims[2] = n;
    details[COMMAND_STATES] = mxCreateNumericArray(3, state_dims, mxDOUBLE_CLASS, mxREAL);
    for (k = N_STEPS; k < N_INFO; k++)
        field[k] = k == MESSAGE || k == FLAG_NAME ? NULL : mxGetPr(details[k]);
    for (i = 0; i < 2 * n; i++)   /* commands not sent: NaN */
        field[REWARDS][i] = field[COMMAND_FLAGS][i] = field[COMMAND_STEPS][i] = mxGetNaN();
    for (i = 0; i < 2 * n * n_state; i++)
        field[COMMAND_STATES][i] = mxGetNaN();
    returns = mxGetPr(out[0]);
    states = mxGetPr(out[1]);
    flags = mxGetPr(out[2]);

    for (first = 0; first < (int)n; first += k) {
        k = ep_batch_fit(c, episodes + first, (int)n - first);  /* one batch: the logs are kept until the next */
        if (k < 0)
            raise_error(who, k);
        if ((rc = ep_evaluate(c, episodes + first, k, keep_logs, timeout, results + first)) != EP_OK)
            raise_error(who, rc);
        for (j = 0; j < k; j++) {
            const ep_result *r = &results[first + j];
            size_t e = (size_t)(first + j);
            returns[e] = r->episode_return;
            flags[e] = r->flag;
            mxGetLogicals(details[SUCCESS])[e] = r->success != 0;
            field[N_STEPS][e] = (double)r->n_steps;
            field[EPISODE_ID][e] = (double)r->episode_id;
            field[N_REPLIES][e] = r->n_replies;
            mxSetCell(details[MESSAGE], e, mxCreateString(r->message));
            mxSetCell(details[FLAG_NAME], e, mxCreateString(ep_flag_name(r->flag)));
            for (m = 0; m < r->n_replies; m++) {
                field[REWARDS][2 * e + m] = r->rewards[m];
                field[COMMAND_FLAGS][2 * e + m] = r->flags[m];
                field[COMMAND_STEPS][2 * e + m] = r->steps[m];
                memcpy(field[COMMAND_STATES] + (2 * e + m) * n_state, r->states + m * n_state,
                       sizeof(double) * n_state);
            }
            if (r->n_replies > 0)
                memcpy(states + e * n_state, r->states + (r->n_replies - 1) * n_state, sizeof(double) * n_state);
            if (keep_logs) {
                if ((rc = ep_get_batch_log(c, j, NULL)) != EP_OK)
                    raise_error(who, rc);
                set_episode(c, who, out[4], e);
            }
        }
    }
    out[3] = mxCreateStructMatrix(1, 1, N_INFO, info_fields);
    for (k = 0; k < N_INFO; k++)
        mxSetField(out[3], 0, info_fields[k], details[k]);
    for (k = 0; k < 5; k++) {
        if (k < (nlhs > 1 ? nlhs : 1))
            plhs[k] = out[k];
        else if (out[k])
            mxDestroyArray(out[k]);
    }
    mxFree(results);
    mxFree(episodes);
    mxFree(commands);
    mxFree(q);
    mxFree(derivatives[0]);
    mxFree(derivatives[1]);
}

static void cmd_episode_id(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    const char *who = "epEpisodeId";
    (void)nlhs;
    if (nrhs > 0) {
        double next = scalar(prhs[0], who, "the next episode id");
        if (next != floor(next) || next < 0 || next >= MAX_EXACT)
            mexErrMsgIdAndTxt("episodic:argument", "%s: an episode id is an integer in 0..2^53-1, got %g", who, next);
        last_episode_id = next - 1;
        counter_ready = 1;
    }
    plhs[0] = mxCreateDoubleScalar(last_episode_id);
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    char command[32];
    if (nrhs < 1 || !mxIsChar(prhs[0]) || mxGetString(prhs[0], command, sizeof command) != 0)
        mexErrMsgIdAndTxt("episodic:argument", "episodic_mex: the first argument names the call; use the ep*.m "
                          "functions (epConnect, epSendTrajectory, epSendController, epGetEpisode, ...)");
    nrhs -= 1;
    prhs += 1;
    if (strcmp(command, "connect") == 0)
        cmd_connect(nlhs, plhs, nrhs, prhs);
    else if (strcmp(command, "disconnect") == 0) {
        detach();
        gone_note[0] = '\0';
    } else if (strcmp(command, "info") == 0)
        plhs[0] = (connected("epInfo"), info_struct());
    else if (strcmp(command, "start") == 0)
        cmd_start(nlhs, plhs, nrhs, prhs);
    else if (strcmp(command, "trajectory") == 0)
        cmd_trajectory(nlhs, plhs, nrhs, prhs);
    else if (strcmp(command, "gains") == 0)
        cmd_gains(nlhs, plhs, nrhs, prhs);
    else if (strcmp(command, "reset") == 0)
        cmd_reset(nlhs, plhs, nrhs, prhs);
    else if (strcmp(command, "episode") == 0)
        cmd_episode(nlhs, plhs);
    else if (strcmp(command, "evaluate") == 0)
        cmd_evaluate(nlhs, plhs, nrhs, prhs);
    else if (strcmp(command, "episode_id") == 0)
        cmd_episode_id(nlhs, plhs, nrhs, prhs);
    else
        mexErrMsgIdAndTxt("episodic:argument", "episodic_mex: unknown call '%s'", command);
}
