/*
 * episodic_client.c: the C client of the episodic shared-memory protocol (docs/protocol.md).
 * Written in portable C99 plus POSIX (shm_open, mmap, sem_open, sem_timedwait) and flock;
 * link with -lrt -lpthread.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "episodic_client.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* the layout (docs/protocol.md, sections 3 to 6 and 8) is in episodic_layout.h, made from bridge/layout.py */
#define POLL_SECONDS 0.2        /* slice of the wait for a reply, between liveness checks */
#define TAKEN_POLL_SECONDS 0.002 /* between looks whether the runner took the previous command */
#define LOCK_TIMEOUT_SECONDS 2.0
#define DEFAULT_TIMEOUT 30.0
#define MAX_ARRAYS 4            /* arrays of one command at most (gains: kp, kd, ki, task gains) */

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__)
#define EP_THREAD_LOCAL _Thread_local
#elif defined(__GNUC__)
#define EP_THREAD_LOCAL __thread
#else
#define EP_THREAD_LOCAL
#endif

struct ep_client {
    char channel[65];
    unsigned char *base;       /* the mapped object */
    size_t size;
    int fd;                    /* the object, kept open to probe the runner's flock (liveness) */
    int client_fd;             /* the client-lock object, flocked while attached */
    sem_t *cmd, *reply, *lock;
    ep_info info;
    char (*state_names)[EP_NAME_BYTES + 1];
    char (*column_names)[EP_NAME_BYTES + 1];
    int *column_width;
    uint64_t *column_offset;   /* from the start of the object */
    uint64_t command_offset, reply_offset, log_offset, batch_offset;
    uint64_t array_offset[EP_COMMAND_N_ARRAYS]; /* posture kp kd ki context q qd qdd, from the command block */
    uint64_t reply_array[EP_REPLY_N_ARRAYS];    /* state, posture, from the reply block */
    uint64_t batch_part[EP_BATCH_N_PARTS];      /* command table, value pool, results, replies, states, from the
                                                 * batch block */
    double *state;             /* the last reply's state (n_state) */
    double *posture;           /* the last reply's posture (n_dofs), rad */
    uint64_t seq;
    int64_t episode_id;
    int next_index;
    int max_commands;
    int log_rows;
    double timeout;
    /* the last ep_evaluate: its per-command results (the ep_result arrays point here, one row per
     * command of the population), its episodes' steps, and which of them the last batch held */
    double *rewards, *states;
    int *flags, *steps;
    size_t result_rows;        /* rows allocated */
    int64_t *episode_steps;    /* n_population */
    int n_population, batch_first, batch_count, keep_logs;
};

static EP_THREAD_LOCAL char last_error[512];

static int fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *ep_last_error(void) { return last_error; }

const char *ep_strerror(int code)
{
    switch (code) {
    case EP_OK: return "no error";
    case EP_ERR_ARGUMENT: return "bad argument";
    case EP_ERR_NO_CHANNEL: return "no runner serves the channel";
    case EP_ERR_SYSTEM: return "a system call failed";
    case EP_ERR_NOT_EPISODIC: return "not an episodic channel";
    case EP_ERR_VERSION: return "protocol version mismatch";
    case EP_ERR_LAYOUT: return "inconsistent channel header";
    case EP_ERR_TIMEOUT: return "timed out waiting for the runner";
    case EP_ERR_RUNNER_GONE: return "the runner has exited";
    case EP_ERR_PROTOCOL: return "reply for another command, or inconsistent";
    case EP_ERR_NO_COLUMN: return "no such log column";
    case EP_ERR_FOREIGN: return "the channel belongs to another user";
    case EP_ERR_IN_USE: return "another client is attached to the channel";
    case EP_ERR_BATCH: return "the runner refused the batch";
    default: return "unknown error code";
    }
}

const char *ep_flag_name(int flag)
{
    static const char *names[] = {"OK", "OUT_OF_ORDER", "STALE_EPISODE", "INVALID_PAYLOAD",
                                  "SAFETY_ABORT", "TIMEOUT", "ABORTED_BY_LEARNER", "INTERRUPTED",
                                  "DISCONTINUOUS", "INTERNAL_ERROR", "LEARNER_GONE"};
    return flag >= 0 && flag < (int)(sizeof names / sizeof *names) ? names[flag] : "UNKNOWN";
}

/* -- little-endian encoding, whatever the host's byte order ----------------------------- */
static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static uint64_t get_u(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    int i;
    for (i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void put_u(unsigned char *p, uint64_t v, int bytes)
{
    int i;
    for (i = 0; i < bytes; i++, v >>= 8)
        p[i] = (unsigned char)(v & 0xff);
}

static double get_f64(const unsigned char *p)
{
    uint64_t bits = get_u(p, 8);
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

static void put_f64(unsigned char *p, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, 8);
    put_u(p, bits, 8);
}

static void doubles_to_wire(unsigned char *dst, const double *src, size_t n)
{
    size_t i;
    if (host_is_little_endian()) {
        memcpy(dst, src, 8 * n);
        return;
    }
    for (i = 0; i < n; i++)
        put_f64(dst + 8 * i, src[i]);
}

static void doubles_from_wire(double *dst, const unsigned char *src, size_t n)
{
    size_t i;
    if (host_is_little_endian()) {
        memcpy(dst, src, 8 * n);
        return;
    }
    for (i = 0; i < n; i++)
        dst[i] = get_f64(src + 8 * i);
}

static int32_t get_i32(const unsigned char *p) { return (int32_t)(uint32_t)get_u(p, 4); }

static uint64_t align64(uint64_t n) { return (n + EP_ALIGN - 1) / EP_ALIGN * EP_ALIGN; }

/* An unsigned field of a fixed part starting at `p`, named by its offset EP_<PART>_<FIELD> (its size is
 * EP_<PART>_<FIELD>_SIZE). */
#define GET(p, field) get_u((p) + field, field##_SIZE)
#define PUT(p, field, v) put_u((p) + field, (v), field##_SIZE)

/* Lay out `n` parts of `bytes` back to back from byte `at`, each rounded up to EP_ALIGN bytes when
 * `aligned`: their offsets into `offsets`; returns the byte where the last one ends. */
static uint64_t lay_out(uint64_t at, const uint64_t *bytes, int n, int aligned, uint64_t *offsets)
{
    int i;
    for (i = 0; i < n; i++) {
        offsets[i] = at;
        at += aligned ? align64(bytes[i]) : bytes[i];
    }
    return at;
}

/* -- time, liveness, the lock ----------------------------------------------------------- */
static double monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static struct timespec realtime_in(double seconds)
{
    struct timespec ts;
    long ns;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (seconds < 0)
        seconds = 0;
    ts.tv_sec += (time_t)seconds;
    ns = ts.tv_nsec + (long)((seconds - (double)(time_t)seconds) * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    return ts;
}

/* 0 when `sem` was taken within `seconds`, else errno (ETIMEDOUT, ...); EINTR is retried. */
static int timed_take(sem_t *sem, double seconds)
{
    struct timespec until = realtime_in(seconds);
    while (sem_timedwait(sem, &until) != 0) {
        if (errno != EINTR)
            return errno;
    }
    return 0;
}

/* Whether the runner lives: it holds an exclusive flock on the memory object for its lifetime,
 * which the kernel drops when its process ends, whatever process gets its pid later. Probed with
 * a shared lock, given back at once. Where the object cannot be flocked, the pid has to do. */
static int runner_alive(const ep_client *c)
{
    if (flock(c->fd, LOCK_SH | LOCK_NB) == 0) {
        flock(c->fd, LOCK_UN);
        return 0;
    }
    if (errno == EWOULDBLOCK)
        return 1;
    return c->info.runner_pid > 0 && (kill((pid_t)c->info.runner_pid, 0) == 0 || errno == EPERM);
}

/* Take the blocks' lock; held for over 2 s, it is presumed to belong to a dead process and is
 * taken over (once: the blocks are used without it). */
static void lock_take(ep_client *c)
{
    timed_take(c->lock, LOCK_TIMEOUT_SECONDS);
}

/* Give the lock back only while its count is 0: after a take-over the taker and the late
 * holder both give it back, and it must not count 2 (two holders at once). */
static void lock_give(ep_client *c)
{
    int value;
    if (sem_getvalue(c->lock, &value) == 0 && value > 0)
        return;
    sem_post(c->lock);
}

/* -- attach / detach -------------------------------------------------------------------- */
static int valid_channel(const char *name)
{
    size_t i, n = name ? strlen(name) : 0;
    if (n < 1 || n > 64)
        return 0;
    for (i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

void ep_detach(ep_client *c)
{
    if (!c)
        return;
    if (c->base)
        munmap(c->base, c->size);
    if (c->cmd)
        sem_close(c->cmd);
    if (c->reply)
        sem_close(c->reply);
    if (c->lock)
        sem_close(c->lock);
    if (c->fd >= 0)
        close(c->fd);
    if (c->client_fd >= 0)
        close(c->client_fd);  /* drops the client lock */
    free(c->state_names);
    free(c->column_names);
    free(c->column_width);
    free(c->column_offset);
    free(c->state);
    free(c->posture);
    free(c->rewards);
    free(c->states);
    free(c->flags);
    free(c->steps);
    free(c->episode_steps);
    free(c);
}

static int attach_fail(ep_client *c, int code)
{
    ep_detach(c);
    return code;
}

/* "name (uid N)", or "uid N" for a uid without a name, into buf. */
static const char *describe_user(uid_t uid, char *buf, size_t size)
{
    const struct passwd *user = getpwuid(uid);
    if (user)
        snprintf(buf, size, "%s (uid %lu)", user->pw_name, (unsigned long)uid);
    else
        snprintf(buf, size, "uid %lu", (unsigned long)uid);
    return buf;
}

/* EP_ERR_FOREIGN when `uid` (the owner of `path`) is not this process's user: /dev/shm is
 * world-writable, so another user can create objects under this user's names. */
static int check_owner(const ep_client *c, const char *path, uid_t uid)
{
    char owner[96], me[96];
    if (uid == getuid())
        return EP_OK;
    describe_user(uid, owner, sizeof owner);
    describe_user(getuid(), me, sizeof me);
    return fail(EP_ERR_FOREIGN, "channel '%s': %s belongs to %s, not to you, %s; another user created it, "
                "so it is not used. Have that user (or root) remove it, or choose another channel",
                c->channel, path, owner, me);
}

/* The owners of the channel's objects that exist, where the system shows them as files (Linux:
 * /dev/shm/<name>, /dev/shm/sem.<name>). */
static int check_owners(const ep_client *c, const char *base)
{
#ifdef __linux__
    static const char *const formats[] = {"/dev/shm%s", "/dev/shm/sem.%s.cmd", "/dev/shm/sem.%s.reply",
                                          "/dev/shm/sem.%s.lock", "/dev/shm/%s.client"};
    char path[160];
    struct stat st;
    size_t i;
    int rc;
    for (i = 0; i < sizeof formats / sizeof *formats; i++) {
        snprintf(path, sizeof path, formats[i], i == 0 ? base : base + 1);
        if (lstat(path, &st) == 0 && (rc = check_owner(c, path, st.st_uid)) != EP_OK)
            return rc;
    }
#else
    (void)c;
    (void)base;
#endif
    return EP_OK;
}

static int open_sem(ep_client *c, const char *base, const char *suffix, sem_t **out)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", base, suffix);
    *out = sem_open(name, 0);
    if (*out == SEM_FAILED) {
        *out = NULL;
        if (errno == ENOENT)
            return fail(EP_ERR_NO_CHANNEL, "no runner serves channel '%s'; start one with "
                        "'episodic serve --channel %s'", c->channel, c->channel);
        return fail(EP_ERR_SYSTEM, "channel '%s': sem_open(%s): %s", c->channel, name, strerror(errno));
    }
    return EP_OK;
}

/* Take the channel for this client: an exclusive flock on the client-lock object (the kernel drops
 * it when the process ends), and this pid in the header's client_pid. */
static int hold_client(ep_client *c, const char *base)
{
    char name[160];
    struct stat st;
    snprintf(name, sizeof name, "%s.client", base);
    c->client_fd = shm_open(name, O_RDWR, 0);
    if (c->client_fd < 0) {
        if (errno == ENOENT)
            return fail(EP_ERR_NO_CHANNEL, "no runner serves channel '%s' (its client-lock object is missing); "
                        "start one with 'episodic serve --channel %s'", c->channel, c->channel);
        return fail(EP_ERR_SYSTEM, "channel '%s': shm_open(%s): %s", c->channel, name, strerror(errno));
    }
    if (fstat(c->client_fd, &st) != 0)
        return fail(EP_ERR_SYSTEM, "channel '%s': fstat: %s", c->channel, strerror(errno));
    if (st.st_uid != getuid())
        return check_owner(c, name, st.st_uid);
    if (flock(c->client_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            return fail(EP_ERR_IN_USE, "channel '%s' is in use by another client (pid %lld); one client per "
                        "channel: stop that client, or serve another channel for this one", c->channel,
                        (long long)(int64_t)GET(c->base, EP_HEADER_CLIENT_PID));
        return fail(EP_ERR_SYSTEM, "channel '%s': flock(%s): %s", c->channel, name, strerror(errno));
    }
    PUT(c->base, EP_HEADER_CLIENT_PID, (uint64_t)(int64_t)getpid());
    return EP_OK;
}

/* A sequence number no other client starts from: random (the clock and pid where /dev/urandom fails). */
static uint64_t first_seq(void)
{
    uint64_t seq = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    struct timespec now;
    if (f) {
        size_t got = fread(&seq, sizeof seq, 1, f);
        fclose(f);
        if (got == 1)
            return seq;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    return ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) ^ ((uint64_t)getpid() << 40);
}

/* A NUL-padded ASCII name of the header (`raw`, EP_NAME_BYTES) into `out`; 0 when it is empty,
 * not ASCII or holds a NUL before its padding. */
static int ascii_name(const unsigned char *raw, char *out)
{
    size_t n = EP_NAME_BYTES, i;
    while (n > 0 && raw[n - 1] == 0)
        n--;
    for (i = 0; i < n; i++)
        if (raw[i] == 0 || raw[i] > 127)
            return 0;
    memcpy(out, raw, n);
    out[n] = '\0';
    return n > 0;
}

/* Read and check the header; fill the sizes, offsets and tables. */
static int read_header(ep_client *c)
{
    const unsigned char *h = c->base, *table;
    uint32_t version, n_dofs, max_samples, max_log_steps, max_context, n_state, n_cols, i;
    uint32_t max_batch, max_batch_commands;
    uint64_t max_batch_values, header_bytes, command_offset, command_bytes, reply_offset, log_offset;
    uint64_t batch_offset, total, at;
    double rate;
    const char *ch = c->channel;

    if (c->size < EP_HEADER_BYTES)
        return fail(EP_ERR_LAYOUT, "channel '%s': the shared-memory object is smaller than a header", ch);
    if (memcmp(h + EP_HEADER_MAGIC, EP_MAGIC, EP_HEADER_MAGIC_SIZE) != 0)
        return fail(EP_ERR_NOT_EPISODIC, "channel '%s': bad magic: not an episodic channel", ch);
    version = (uint32_t)GET(h, EP_HEADER_VERSION);
    if (version != EP_PROTOCOL_VERSION)
        return fail(EP_ERR_VERSION, "the runner on channel '%s' speaks protocol version %u, this client "
                    "version %d; use matching versions of episodic and its clients", ch,
                    (unsigned)version, EP_PROTOCOL_VERSION);
    n_dofs = (uint32_t)GET(h, EP_HEADER_N_DOFS);
    max_samples = (uint32_t)GET(h, EP_HEADER_MAX_SAMPLES);
    max_log_steps = (uint32_t)GET(h, EP_HEADER_MAX_LOG_STEPS);
    max_context = (uint32_t)GET(h, EP_HEADER_MAX_CONTEXT);
    n_state = (uint32_t)GET(h, EP_HEADER_N_STATE);
    n_cols = (uint32_t)GET(h, EP_HEADER_N_LOG_COLUMNS);
    rate = get_f64(h + EP_HEADER_CONTROL_RATE);
    max_batch = (uint32_t)GET(h, EP_HEADER_MAX_BATCH);
    max_batch_commands = (uint32_t)GET(h, EP_HEADER_MAX_BATCH_COMMANDS);
    max_batch_values = GET(h, EP_HEADER_MAX_BATCH_VALUES);
    if (n_dofs < 1 || n_dofs > EP_MAX_SMALL || max_context > EP_MAX_SMALL || n_state > EP_MAX_SMALL || n_cols < 1 ||
        n_cols > EP_MAX_SMALL || max_samples < 1 || max_samples > EP_MAX_LARGE || max_log_steps < 1 ||
        max_log_steps > EP_MAX_LARGE || max_batch < 1 || max_batch > EP_MAX_LARGE || max_batch_commands < 1 ||
        max_batch_commands > EP_MAX_LARGE || max_batch_values < 1 || max_batch_values > EP_MAX_VALUES)
        return fail(EP_ERR_LAYOUT, "channel '%s': implausible sizes in the header; the channel is corrupt", ch);
    if (!(rate > 0 && rate <= DBL_MAX))  /* also refuses NaN */
        return fail(EP_ERR_LAYOUT, "channel '%s': the header's control rate %g is not a positive number; the "
                    "channel is corrupt", ch, rate);
    header_bytes = EP_HEADER_BYTES + (uint64_t)EP_NAME_BYTES * n_state + (uint64_t)EP_LOG_COLUMN_BYTES * n_cols;
    if (header_bytes > c->size)
        return fail(EP_ERR_LAYOUT, "channel '%s': the header's tables overrun the object", ch);
    table = h + EP_HEADER_BYTES + (uint64_t)EP_NAME_BYTES * n_state;
    for (i = 0; i < n_cols; i++) {
        uint64_t width = GET(table + EP_LOG_COLUMN_BYTES * i, EP_LOG_COLUMN_WIDTH);
        if (width < 1 || width > EP_MAX_SMALL)
            return fail(EP_ERR_LAYOUT, "channel '%s': a log column's width in the header is implausible; the "
                        "channel is corrupt", ch);
    }

    /* the block offsets follow from the sizes (docs/protocol.md sections 3 and 8) */
    {
        const uint64_t arrays[] = EP_COMMAND_ARRAY_BYTES(n_dofs, max_context, max_samples);
        const uint64_t replies[] = EP_REPLY_ARRAY_BYTES(n_state, n_dofs);
        const uint64_t parts[] = EP_BATCH_PART_BYTES(max_batch_commands, max_batch_values, max_batch, n_state);
        command_offset = align64(header_bytes);
        command_bytes = lay_out(EP_COMMAND_BYTES, arrays, EP_COMMAND_N_ARRAYS, 0, c->array_offset);
        reply_offset = command_offset + align64(command_bytes);
        log_offset = reply_offset + align64(lay_out(EP_REPLY_BYTES, replies, EP_REPLY_N_ARRAYS, 0, c->reply_array));
        batch_offset = log_offset;
        for (i = 0; i < n_cols; i++)  /* width of column i times the rows, each rounded up to 64 bytes */
            batch_offset += align64(8 * GET(table + EP_LOG_COLUMN_BYTES * i, EP_LOG_COLUMN_WIDTH) * max_log_steps);
        total = batch_offset + lay_out(align64(EP_BATCH_BYTES), parts, EP_BATCH_N_PARTS, 1, c->batch_part);
    }
    if (command_offset != GET(h, EP_HEADER_COMMAND_OFFSET) || reply_offset != GET(h, EP_HEADER_REPLY_OFFSET) ||
        log_offset != GET(h, EP_HEADER_LOG_OFFSET) || batch_offset != GET(h, EP_HEADER_BATCH_OFFSET) ||
        total != GET(h, EP_HEADER_TOTAL_SIZE))
        return fail(EP_ERR_LAYOUT, "channel '%s': the header's offsets disagree with its sizes; "
                    "the channel is corrupt", ch);
    if (total > c->size)
        return fail(EP_ERR_LAYOUT, "channel '%s': the object (%lu bytes) is smaller than its header says "
                    "(%lu)", ch, (unsigned long)c->size, (unsigned long)total);

    c->info.channel = c->channel;
    c->info.runner_pid = (int64_t)GET(h, EP_HEADER_RUNNER_PID);
    c->info.n_dofs = (int)n_dofs;
    c->info.max_samples = (int)max_samples;
    c->info.max_log_steps = (int)max_log_steps;
    c->info.max_context = (int)max_context;
    c->info.n_state = (int)n_state;
    c->info.n_log_columns = (int)n_cols;
    c->info.control_rate = rate;
    c->info.max_batch = (int)max_batch;
    c->info.max_batch_commands = (int)max_batch_commands;
    c->info.max_batch_values = (int64_t)max_batch_values;
    c->command_offset = command_offset;
    c->reply_offset = reply_offset;
    c->log_offset = log_offset;
    c->batch_offset = batch_offset;

    c->state_names = calloc(n_state ? n_state : 1, sizeof *c->state_names);
    c->column_names = calloc(n_cols, sizeof *c->column_names);
    c->column_width = calloc(n_cols, sizeof *c->column_width);
    c->column_offset = calloc(n_cols, sizeof *c->column_offset);
    c->state = calloc(n_state ? n_state : 1, sizeof *c->state);
    c->posture = calloc(n_dofs, sizeof *c->posture);
    if (!c->state_names || !c->column_names || !c->column_width || !c->column_offset || !c->state ||
        !c->posture)
        return fail(EP_ERR_SYSTEM, "channel '%s': out of memory", ch);
    for (i = 0; i < n_state; i++)
        if (!ascii_name(h + EP_HEADER_BYTES + EP_NAME_BYTES * i, c->state_names[i]))
            return fail(EP_ERR_LAYOUT, "channel '%s': state name %u in the header is empty or not ASCII; the "
                        "channel is corrupt", ch, (unsigned)i);
    for (i = 0, at = 0; i < n_cols; i++) {
        const unsigned char *row = table + EP_LOG_COLUMN_BYTES * i;
        uint64_t width = GET(row, EP_LOG_COLUMN_WIDTH);
        if (!ascii_name(row + EP_LOG_COLUMN_NAME, c->column_names[i]))
            return fail(EP_ERR_LAYOUT, "channel '%s': log column name %u in the header is empty or not ASCII; "
                        "the channel is corrupt", ch, (unsigned)i);
        if (GET(row, EP_LOG_COLUMN_OFFSET) != at)
            return fail(EP_ERR_LAYOUT, "channel '%s': the offset of log column '%s' disagrees with the widths; "
                        "the channel is corrupt", ch, c->column_names[i]);
        c->column_width[i] = (int)width;
        c->column_offset[i] = log_offset + at;
        at += align64(8 * width * max_log_steps);
    }
    return EP_OK;
}

int ep_attach(const char *channel, double timeout, ep_client **out)
{
    char base[128];
    struct stat st;
    struct timespec now;
    ep_client *c;
    int rc;

    if (!out)
        return fail(EP_ERR_ARGUMENT, "ep_attach: out is NULL");
    *out = NULL;
    if (!valid_channel(channel))
        return fail(EP_ERR_ARGUMENT, "channel name '%s': use 1-64 letters, digits, '_' or '-'",
                    channel ? channel : "(null)");
    c = calloc(1, sizeof *c);
    if (!c)
        return fail(EP_ERR_SYSTEM, "out of memory");
    strcpy(c->channel, channel);
    c->fd = -1;
    c->client_fd = -1;
    c->timeout = timeout > 0 ? timeout : DEFAULT_TIMEOUT;
    snprintf(base, sizeof base, "/episodic.%lu.%s", (unsigned long)getuid(), channel);

    if ((rc = check_owners(c, base)) != EP_OK)
        return attach_fail(c, rc);
    c->fd = shm_open(base, O_RDWR, 0);
    if (c->fd < 0) {
        if (errno == ENOENT)
            rc = fail(EP_ERR_NO_CHANNEL, "no runner serves channel '%s'; start one with "
                      "'episodic serve --channel %s'", channel, channel);
        else
            rc = fail(EP_ERR_SYSTEM, "channel '%s': shm_open(%s): %s", channel, base, strerror(errno));
        return attach_fail(c, rc);
    }
    if (fstat(c->fd, &st) != 0)
        return attach_fail(c, fail(EP_ERR_SYSTEM, "channel '%s': fstat: %s", channel, strerror(errno)));
    if ((rc = check_owner(c, base, st.st_uid)) != EP_OK)  /* the object opened, whatever the check saw */
        return attach_fail(c, rc);
    c->size = (size_t)st.st_size;
    if (c->size == 0)
        return attach_fail(c, fail(EP_ERR_LAYOUT, "channel '%s': the shared-memory object is empty", channel));
    c->base = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
    if (c->base == MAP_FAILED) {
        c->base = NULL;
        return attach_fail(c, fail(EP_ERR_SYSTEM, "channel '%s': mmap: %s", channel, strerror(errno)));
    }
    if ((rc = open_sem(c, base, "cmd", &c->cmd)) != EP_OK ||
        (rc = open_sem(c, base, "reply", &c->reply)) != EP_OK ||
        (rc = open_sem(c, base, "lock", &c->lock)) != EP_OK ||
        (rc = check_owners(c, base)) != EP_OK ||  /* again: a semaphore may have appeared since */
        (rc = read_header(c)) != EP_OK ||
        (rc = hold_client(c, base)) != EP_OK)
        return attach_fail(c, rc);

    /* this client's own numbers: a reply meant for another client never matches */
    c->seq = first_seq();
    clock_gettime(CLOCK_REALTIME, &now);
    c->episode_id = (int64_t)(((uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u) %
                              ((uint64_t)1 << 40)) * 1000;
    c->log_rows = 0;
    *out = c;
    return EP_OK;
}

const ep_info *ep_get_info(const ep_client *c) { return c ? &c->info : NULL; }

const char *ep_state_name(const ep_client *c, int i)
{
    return c && i >= 0 && i < c->info.n_state ? c->state_names[i] : NULL;
}

const char *ep_log_column_name(const ep_client *c, int i, int *width)
{
    if (!c || i < 0 || i >= c->info.n_log_columns)
        return NULL;
    if (width)
        *width = c->column_width[i];
    return c->column_names[i];
}

int ep_find_log_column(const ep_client *c, const char *name, int *width)
{
    int i;
    if (!c || !name)
        return fail(EP_ERR_ARGUMENT, "ep_find_log_column: NULL argument");
    for (i = 0; i < c->info.n_log_columns; i++) {
        if (strcmp(c->column_names[i], name) == 0) {
            if (width)
                *width = c->column_width[i];
            return i;
        }
    }
    return fail(EP_ERR_NO_COLUMN, "channel '%s' has no log column '%s'", c->channel, name);
}

void ep_set_timeout(ep_client *c, double seconds)
{
    if (c)
        c->timeout = seconds > 0 ? seconds : DEFAULT_TIMEOUT;
}

int64_t ep_episode_id(const ep_client *c) { return c ? c->episode_id : -1; }

void ep_set_episode_id(ep_client *c, int64_t episode_id)
{
    if (c)
        c->episode_id = episode_id;
}

int ep_log_rows(const ep_client *c) { return c ? c->log_rows : 0; }

int ep_adopt_log_rows(ep_client *c)
{
    int rows;
    if (!c)
        return 0;
    lock_take(c);
    rows = get_i32(c->base + c->reply_offset + EP_REPLY_LOG_ROWS);
    lock_give(c);
    c->log_rows = rows < 0 ? 0 : rows > c->info.max_log_steps ? c->info.max_log_steps : rows;
    return c->log_rows;
}

/* -- commands and the exchange (docs/protocol.md sections 4 and 7) ------------------------ */

/* A command's fields: the command block's fixed part, which a batch's command-table row repeats. */
typedef struct {
    int64_t episode_id;
    int kind, index, max_commands, feedforward, n_samples, n_context;
    int has_posture, has_qd, has_qdd, has_ki;
    double rate, wait_time;
} fields;

/* The fields of `f` into the command block's fixed part (COMMAND, prefix EP_COMMAND) or a command-table
 * row (BATCH_COMMAND, prefix EP_BATCH_COMMAND) at `p`. */
#define PUT_FIELDS(p, f, PREFIX) do { \
        PUT(p, PREFIX##_EPISODE_ID, (uint64_t)(f)->episode_id); \
        PUT(p, PREFIX##_INDEX, (uint32_t)(f)->index); \
        PUT(p, PREFIX##_MAX_COMMANDS, (uint32_t)(f)->max_commands); \
        PUT(p, PREFIX##_KIND, (uint32_t)(f)->kind); \
        PUT(p, PREFIX##_FEEDFORWARD, (uint32_t)(f)->feedforward); \
        PUT(p, PREFIX##_N_SAMPLES, (uint32_t)(f)->n_samples); \
        PUT(p, PREFIX##_N_CONTEXT, (uint32_t)(f)->n_context); \
        PUT(p, PREFIX##_HAS_POSTURE, (f)->has_posture != 0); \
        PUT(p, PREFIX##_HAS_QD, (f)->has_qd != 0); \
        PUT(p, PREFIX##_HAS_QDD, (f)->has_qdd != 0); \
        PUT(p, PREFIX##_HAS_KI, (f)->has_ki != 0); \
        put_f64((p) + PREFIX##_RATE, (f)->rate); \
        put_f64((p) + PREFIX##_WAIT_TIME, (f)->wait_time); \
    } while (0)

/* A command as it goes on the wire: its fields and the arrays it has, in the command block's
 * order (A_...), which is also their order in a batch's value pool. */
typedef struct {
    fields f;
    struct {
        int which;             /* A_... */
        const double *values;
        size_t count;
    } arrays[MAX_ARRAYS];
    int n_arrays;
} wire_command;

static void add_array(wire_command *w, int which, const double *values, size_t count)
{
    if (count == 0)
        return;
    w->arrays[w->n_arrays].which = which;
    w->arrays[w->n_arrays].values = values;
    w->arrays[w->n_arrays].count = count;
    w->n_arrays++;
}

/* `cmd` (episode id, index and max_commands as sent) as it goes on the wire; EP_ERR_ARGUMENT, the
 * message beginning with `who`, when it cannot be laid out on the channel. */
static int to_wire(const ep_client *c, const ep_command *cmd, const char *who, wire_command *w)
{
    const ep_info *in = &c->info;
    const char *what = cmd->kind == EP_KIND_START ? "the context" : "the task gains";
    size_t n_dofs = (size_t)in->n_dofs, count;

    memset(w, 0, sizeof *w);
    w->f.kind = cmd->kind;
    w->f.episode_id = cmd->episode_id;
    w->f.index = cmd->index;
    w->f.max_commands = cmd->max_commands;
    switch (cmd->kind) {
    case EP_KIND_START:
    case EP_KIND_GAINS:
        if (cmd->n_context < 0 || cmd->n_context > in->max_context)
            return fail(EP_ERR_ARGUMENT, "%s: %s has %d values; the runner on channel '%s' takes at most %d", who,
                        what, cmd->n_context, c->channel, in->max_context);
        if (cmd->n_context > 0 && !cmd->context)
            return fail(EP_ERR_ARGUMENT, "%s: %s is NULL but n_context is %d", who, what, cmd->n_context);
        w->f.n_context = cmd->n_context;
        if (cmd->kind == EP_KIND_START) {
            w->f.has_posture = cmd->posture != NULL;
            add_array(w, EP_COMMAND_ARRAY_POSTURE, cmd->posture, cmd->posture ? n_dofs : 0);
        } else {
            if (!cmd->kp || !cmd->kd)
                return fail(EP_ERR_ARGUMENT, "%s: a gain set needs kp and kd", who);
            if (cmd->feedforward < EP_FF_NONE || cmd->feedforward > EP_FF_INVERSE_DYNAMICS)
                return fail(EP_ERR_ARGUMENT, "%s: unknown feedforward mode %d; use one of 0 none, 1 "
                            "gravity_compensation, 2 feedforward, 3 inverse_dynamics", who, cmd->feedforward);
            w->f.feedforward = cmd->feedforward;
            w->f.has_ki = cmd->ki != NULL;
            w->f.wait_time = cmd->wait_time;
            add_array(w, EP_COMMAND_ARRAY_KP, cmd->kp, n_dofs);
            add_array(w, EP_COMMAND_ARRAY_KD, cmd->kd, n_dofs);
            add_array(w, EP_COMMAND_ARRAY_KI, cmd->ki, cmd->ki ? n_dofs : 0);
        }
        add_array(w, EP_COMMAND_ARRAY_CONTEXT, cmd->context, (size_t)cmd->n_context);
        return EP_OK;
    case EP_KIND_TRAJECTORY:
        if (!cmd->q)
            return fail(EP_ERR_ARGUMENT, "%s: q is NULL", who);
        if (cmd->n_samples < 1 || cmd->n_samples > in->max_samples)
            return fail(EP_ERR_ARGUMENT, "%s: q has %d samples; the runner on channel '%s' takes 1..%d", who,
                        cmd->n_samples, c->channel, in->max_samples);
        count = (size_t)cmd->n_samples * n_dofs;
        w->f.n_samples = cmd->n_samples;
        w->f.has_qd = cmd->qd != NULL;
        w->f.has_qdd = cmd->qdd != NULL;
        w->f.rate = cmd->rate;
        w->f.wait_time = cmd->wait_time;
        add_array(w, EP_COMMAND_ARRAY_Q, cmd->q, count);
        add_array(w, EP_COMMAND_ARRAY_QD, cmd->qd, cmd->qd ? count : 0);
        add_array(w, EP_COMMAND_ARRAY_QDD, cmd->qdd, cmd->qdd ? count : 0);
        return EP_OK;
    case EP_KIND_RESET:
        return EP_OK;
    default:
        return fail(EP_ERR_ARGUMENT, "%s: kind %d is not a command of an episode; use EP_KIND_START, "
                    "EP_KIND_TRAJECTORY, EP_KIND_GAINS or EP_KIND_RESET", who, cmd->kind);
    }
}

/* Writes a command's payload (its arrays, or a batch) into the blocks, under the lock. */
typedef void (*payload_writer)(ep_client *c, const void *payload);

static void write_arrays(ep_client *c, const void *payload)
{
    const wire_command *w = payload;
    unsigned char *block = c->base + c->command_offset;
    int i;
    for (i = 0; i < w->n_arrays; i++)
        doubles_to_wire(block + c->array_offset[w->arrays[i].which], w->arrays[i].values, w->arrays[i].count);
}

/* Wait for the reply to the command with fields `f` until `deadline` (monotonic s; `timeout` s
 * names it in the message). */
static int wait_reply(ep_client *c, const fields *f, double deadline, double timeout, ep_reply *out)
{
    const unsigned char *r = c->base + c->reply_offset;
    int n_state = c->info.n_state, n_dofs = c->info.n_dofs;

    for (;;) {
        double left = deadline - monotonic_now();
        int err;
        if (left <= 0)
            return fail(EP_ERR_TIMEOUT, "the runner on channel '%s' did not answer within %g s",
                        c->channel, timeout);
        err = timed_take(c->reply, left < POLL_SECONDS ? left : POLL_SECONDS);
        if (err == ETIMEDOUT) {
            if (!runner_alive(c))
                return fail(EP_ERR_RUNNER_GONE, "the runner of channel '%s' (pid %lld) has exited",
                            c->channel, (long long)c->info.runner_pid);
            continue;
        }
        if (err != 0)
            return fail(EP_ERR_SYSTEM, "channel '%s': sem_timedwait: %s", c->channel, strerror(err));
        lock_take(c);
        if (GET(r, EP_REPLY_SEQ) != c->seq) {   /* the late answer to a command that timed out */
            lock_give(c);
            continue;
        }
        out->seq = GET(r, EP_REPLY_SEQ);
        out->kind = get_i32(r + EP_REPLY_KIND);
        out->episode_return = get_f64(r + EP_REPLY_EPISODE_RETURN);
        out->success = get_i32(r + EP_REPLY_SUCCESS);
        out->episode_id = (int64_t)GET(r, EP_REPLY_EPISODE_ID);
        out->index = get_i32(r + EP_REPLY_INDEX);
        out->flag = get_i32(r + EP_REPLY_FLAG);
        out->reward = get_f64(r + EP_REPLY_REWARD);
        out->n_steps = get_i32(r + EP_REPLY_N_STEPS);
        out->episode_done = get_i32(r + EP_REPLY_EPISODE_DONE);
        out->machine_state = get_i32(r + EP_REPLY_MACHINE_STATE);
        out->log_rows = get_i32(r + EP_REPLY_LOG_ROWS);
        out->log_truncated = get_i32(r + EP_REPLY_LOG_TRUNCATED);
        memcpy(out->message, r + EP_REPLY_MESSAGE, EP_MESSAGE_BYTES);
        doubles_from_wire(c->state, r + c->reply_array[EP_REPLY_ARRAY_STATE], (size_t)n_state);
        doubles_from_wire(c->posture, r + c->reply_array[EP_REPLY_ARRAY_POSTURE], (size_t)n_dofs);
        lock_give(c);
        out->message[EP_MESSAGE_BYTES] = '\0';
        out->n_state = n_state;
        out->state = c->state;
        out->n_dofs = n_dofs;
        out->posture = c->posture;
        c->log_rows = out->log_rows < 0 ? 0 : out->log_rows;
        if (c->log_rows > c->info.max_log_steps)
            c->log_rows = c->info.max_log_steps;
        if (out->kind != f->kind || out->index != f->index || out->episode_id != f->episode_id)
            return fail(EP_ERR_PROTOCOL, "channel '%s': the reply to command %llu is for kind %d, index %d, "
                        "episode %lld; expected kind %d, index %d, episode %lld", c->channel,
                        (unsigned long long)c->seq, out->kind, out->index, (long long)out->episode_id,
                        f->kind, f->index, (long long)f->episode_id);
        return EP_OK;
    }
}

/* Send the command with fields `f` (its payload written by `write`, unless NULL) and wait for its
 * reply, at most `timeout` s (HUGE_VAL: as long as the runner lives). */
static int exchange(ep_client *c, const fields *f, payload_writer write, const void *payload, double timeout,
                    ep_reply *out)
{
    unsigned char fixed[EP_COMMAND_BYTES];
    unsigned char *block = c->base + c->command_offset;
    ep_reply scratch;
    struct timespec nap;
    double deadline = monotonic_now() + timeout;

    if (!out)
        out = &scratch;
    c->seq += 1;
    memset(fixed, 0, sizeof fixed);
    memcpy(fixed + EP_COMMAND_MAGIC, EP_MAGIC, EP_COMMAND_MAGIC_SIZE);
    PUT(fixed, EP_COMMAND_VERSION, EP_PROTOCOL_VERSION);
    PUT(fixed, EP_COMMAND_SEQ, c->seq);
    PUT(fixed, EP_COMMAND_CLIENT_PID, (uint64_t)(int64_t)getpid());
    PUT_FIELDS(fixed, f, EP_COMMAND);

    /* never over a command of this client the runner has not taken yet (one that timed out) */
    for (;;) {
        int pending;
        lock_take(c);
        pending = (int64_t)GET(block, EP_COMMAND_CLIENT_PID) == (int64_t)getpid() &&
                  GET(block, EP_COMMAND_SEQ) != GET(c->base, EP_HEADER_TAKEN_SEQ);
        if (!pending) {
            memcpy(block, fixed, EP_COMMAND_BYTES);
            if (write)
                write(c, payload);
            lock_give(c);
            break;
        }
        lock_give(c);
        if (!runner_alive(c))
            return fail(EP_ERR_RUNNER_GONE, "the runner of channel '%s' (pid %lld) has exited", c->channel,
                        (long long)c->info.runner_pid);
        if (monotonic_now() >= deadline)
            return fail(EP_ERR_TIMEOUT, "the runner on channel '%s' has not taken this client's previous command "
                        "within %g s (it is still busy with an earlier one); this command was not sent",
                        c->channel, timeout);
        nap.tv_sec = 0;
        nap.tv_nsec = (long)(TAKEN_POLL_SECONDS * 1e9);
        nanosleep(&nap, NULL);
    }
    if (sem_post(c->cmd) != 0)
        return fail(EP_ERR_SYSTEM, "channel '%s': sem_post: %s", c->channel, strerror(errno));
    return wait_reply(c, f, deadline, timeout, out);
}

static int check_client(const ep_client *c, const char *who)
{
    return c ? EP_OK : fail(EP_ERR_ARGUMENT, "%s: the client is NULL (not attached)", who);
}

/* The id after `id` (0 after the largest). */
static int64_t next_id(int64_t id) { return id < INT64_MAX ? id + 1 : 0; }

/* A command of the running episode: index EP_NEXT and max_commands EP_DEFAULT resolved. */
static ep_command episode_command(const ep_client *c, int kind, int index, int max_commands)
{
    ep_command cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.kind = kind;
    cmd.episode_id = c->episode_id;
    cmd.index = index < 0 ? c->next_index : index;
    cmd.max_commands = max_commands < 0 ? c->max_commands : max_commands;
    return cmd;
}

/* Send one command and wait for its reply within the client's timeout; a start makes its episode
 * the running one. */
static int send_command(ep_client *c, const ep_command *cmd, const char *who, ep_reply *reply)
{
    wire_command w;
    int rc;
    if ((rc = to_wire(c, cmd, who, &w)) != EP_OK)
        return rc;
    if (cmd->kind == EP_KIND_START) {
        c->episode_id = cmd->episode_id;
        c->max_commands = cmd->max_commands;
    }
    rc = exchange(c, &w.f, write_arrays, &w, c->timeout, reply);
    if (rc == EP_OK && cmd->kind != EP_KIND_RESET)
        c->next_index = cmd->index + 1;
    return rc;
}

int ep_start(ep_client *c, int64_t episode_id, int max_commands, const double *posture,
             const double *context, int n_context, ep_reply *reply)
{
    ep_command cmd;
    int rc;
    if ((rc = check_client(c, "ep_start")) != EP_OK)
        return rc;
    cmd = episode_command(c, EP_KIND_START, 0, max_commands);
    cmd.episode_id = episode_id < 0 ? next_id(c->episode_id) : episode_id;
    cmd.max_commands = max_commands;
    cmd.posture = posture;
    cmd.context = context;
    cmd.n_context = n_context;
    return send_command(c, &cmd, "ep_start", reply);
}

int ep_send_trajectory(ep_client *c, int index, int max_commands, const double *q, const double *qd,
                       const double *qdd, int n_samples, double rate, double wait_time, ep_reply *reply)
{
    ep_command cmd;
    int rc;
    if ((rc = check_client(c, "ep_send_trajectory")) != EP_OK)
        return rc;
    cmd = episode_command(c, EP_KIND_TRAJECTORY, index, max_commands);
    cmd.q = q;
    cmd.qd = qd;
    cmd.qdd = qdd;
    cmd.n_samples = n_samples;
    cmd.rate = rate;
    cmd.wait_time = wait_time;
    return send_command(c, &cmd, "ep_send_trajectory", reply);
}

int ep_send_gains(ep_client *c, int index, int max_commands, const double *kp, const double *kd,
                  const double *ki, int feedforward, const double *task_gains, int n_task_gains,
                  double wait_time, ep_reply *reply)
{
    ep_command cmd;
    int rc;
    if ((rc = check_client(c, "ep_send_gains")) != EP_OK)
        return rc;
    cmd = episode_command(c, EP_KIND_GAINS, index, max_commands);
    cmd.kp = kp;
    cmd.kd = kd;
    cmd.ki = ki;
    cmd.feedforward = feedforward;
    cmd.context = task_gains;
    cmd.n_context = n_task_gains;
    cmd.wait_time = wait_time;
    return send_command(c, &cmd, "ep_send_gains", reply);
}

int ep_reset(ep_client *c, ep_reply *reply)
{
    ep_command cmd;
    int rc;
    if ((rc = check_client(c, "ep_reset")) != EP_OK)
        return rc;
    cmd = episode_command(c, EP_KIND_RESET, 0, EP_DEFAULT);
    return send_command(c, &cmd, "ep_reset", reply);
}

/* -- batches (docs/protocol.md section 8) ----------------------------------------------- */

/* Whether an episode of n_commands commands and n_values values joins a batch that holds
 * used[0] episodes, used[1] commands and used[2] values, within the runner's sizes. */
static int joins(const ep_client *c, const uint64_t used[3], uint64_t n_commands, uint64_t n_values)
{
    return used[0] < (uint64_t)c->info.max_batch && used[1] + n_commands <= (uint64_t)c->info.max_batch_commands &&
           used[2] + n_values <= (uint64_t)c->info.max_batch_values;
}

/* The commands of episode `position` on the wire, into out[0..n_commands) (NULL: only checked),
 * with the ids EP_NEXT after *last_id (which advances), indices EP_NEXT and max_commands
 * EP_DEFAULT resolved (ep_command); its values into *n_values. EP_ERR_ARGUMENT (the message
 * beginning with `who`) when a command cannot be laid out or the episode fits no batch. */
static int episode_to_wire(const ep_client *c, const ep_episode *e, int position, const char *who,
                           int64_t *last_id, wire_command *out, uint64_t *n_values)
{
    char where[96];
    wire_command scratch;
    int64_t id = -1;
    int j, k, rc;

    if (!e->commands || e->n_commands < 1 || e->n_commands > c->info.max_batch_commands)
        return fail(EP_ERR_ARGUMENT, "%s: episode %d has %d commands%s; a batch on channel '%s' takes 1..%d "
                    "(episodic serve --max-batch-commands)", who, position, e->n_commands,
                    e->commands ? "" : " (NULL)", c->channel, c->info.max_batch_commands);
    *n_values = 0;
    for (j = 0; j < e->n_commands; j++) {
        ep_command cmd = e->commands[j];
        wire_command *w = out ? out + j : &scratch;
        if (cmd.episode_id < 0) {
            if (id < 0)
                id = *last_id = next_id(*last_id);
            cmd.episode_id = id;
        }
        if (cmd.index < 0)
            cmd.index = j;
        if (cmd.max_commands < 0)
            cmd.max_commands = e->n_commands - 1;
        snprintf(where, sizeof where, "%s: episode %d, command %d", who, position, j);
        if ((rc = to_wire(c, &cmd, where, w)) != EP_OK)
            return rc;
        for (k = 0; k < w->n_arrays; k++)
            *n_values += w->arrays[k].count;
    }
    if (*n_values > (uint64_t)c->info.max_batch_values)
        return fail(EP_ERR_ARGUMENT, "%s: episode %d has %llu values; a batch on channel '%s' takes at most %lld "
                    "(episodic serve --max-batch-values)", who, position, (unsigned long long)*n_values,
                    c->channel, (long long)c->info.max_batch_values);
    return EP_OK;
}

/* Check every episode (nothing is sent before all are); each one's values into n_values[i]. */
static int check_episodes(const ep_client *c, const ep_episode *episodes, int n, const char *who,
                          uint64_t *n_values)
{
    int64_t id = c->episode_id;
    int i, rc;
    for (i = 0; i < n; i++)
        if ((rc = episode_to_wire(c, &episodes[i], i, who, &id, NULL, &n_values[i])) != EP_OK)
            return rc;
    return EP_OK;
}

/* How many of the leading episodes (values n_values[i]) one batch takes. */
static int batch_size(const ep_client *c, const ep_episode *episodes, const uint64_t *n_values, int n)
{
    uint64_t used[3] = {0, 0, 0};
    int i;
    for (i = 0; i < n && joins(c, used, (uint64_t)episodes[i].n_commands, n_values[i]); i++) {
        used[0] += 1;
        used[1] += (uint64_t)episodes[i].n_commands;
        used[2] += n_values[i];
    }
    return i;
}

int ep_batch_fit(const ep_client *c, const ep_episode *episodes, int n_episodes)
{
    uint64_t *n_values;
    int rc;
    if ((rc = check_client(c, "ep_batch_fit")) != EP_OK)
        return rc;
    if (n_episodes < 0 || (n_episodes > 0 && !episodes))
        return fail(EP_ERR_ARGUMENT, "ep_batch_fit: %d episodes at %p", n_episodes, (const void *)episodes);
    n_values = malloc(sizeof *n_values * ((size_t)n_episodes + 1));
    if (!n_values)
        return fail(EP_ERR_SYSTEM, "ep_batch_fit: out of memory");
    rc = check_episodes(c, episodes, n_episodes, "ep_batch_fit", n_values);
    if (rc == EP_OK)
        rc = batch_size(c, episodes, n_values, n_episodes);
    free(n_values);
    return rc;
}

/* What write_batch writes: a batch's episodes and all their commands on the wire, in order. */
typedef struct {
    const ep_episode *episodes;
    int n_episodes, keep_logs;
    const wire_command *commands;
} batch_payload;

static void write_batch(ep_client *c, const void *payload)
{
    const batch_payload *b = payload;
    unsigned char *block = c->base + c->batch_offset;
    unsigned char *table = block + c->batch_part[EP_BATCH_PART_COMMANDS];
    unsigned char *pool = block + c->batch_part[EP_BATCH_PART_VALUES];
    uint64_t at = 0;   /* values written */
    size_t row = 0;
    int i, j, k;

    for (i = 0; i < b->n_episodes; i++) {
        for (j = 0; j < b->episodes[i].n_commands; j++, row++) {
            const wire_command *w = &b->commands[row];
            unsigned char *r = table + EP_BATCH_COMMAND_BYTES * row;
            memset(r, 0, EP_BATCH_COMMAND_BYTES);
            PUT(r, EP_BATCH_COMMAND_EPISODE, (uint32_t)i);
            PUT_FIELDS(r, &w->f, EP_BATCH_COMMAND);
            PUT(r, EP_BATCH_COMMAND_VALUES, at);
            for (k = 0; k < w->n_arrays; k++) {
                doubles_to_wire(pool + 8 * (size_t)at, w->arrays[k].values, w->arrays[k].count);
                at += w->arrays[k].count;
            }
        }
    }
    memset(block, 0, EP_BATCH_BYTES);
    PUT(block, EP_BATCH_N_EPISODES, (uint32_t)b->n_episodes);
    PUT(block, EP_BATCH_N_COMMANDS, (uint64_t)row);
    PUT(block, EP_BATCH_N_VALUES, at);
    PUT(block, EP_BATCH_KEEP_LOGS, b->keep_logs != 0);
    /* batch_number and first_episode: -1 until the runner writes them */
    PUT(block, EP_BATCH_BATCH_NUMBER, UINT64_MAX);
    PUT(block, EP_BATCH_FIRST_EPISODE, UINT64_MAX);
}

/* Grow the client's result rows to `rows` commands and the population's steps to `n` episodes. */
static int reserve_results(ep_client *c, size_t rows, int n)
{
    size_t n_state = c->info.n_state > 0 ? (size_t)c->info.n_state : 1;
    int64_t *episode_steps;
    if (rows > SIZE_MAX / sizeof(double) / n_state - 1)
        return fail(EP_ERR_ARGUMENT, "ep_evaluate: %lu commands are too many to keep their results",
                    (unsigned long)rows);
    if (rows > c->result_rows) {
        double *rewards = realloc(c->rewards, sizeof(double) * rows), *states;
        int *flags, *steps;
        if (rewards)
            c->rewards = rewards;
        flags = realloc(c->flags, sizeof(int) * rows);
        if (flags)
            c->flags = flags;
        steps = realloc(c->steps, sizeof(int) * rows);
        if (steps)
            c->steps = steps;
        states = realloc(c->states, sizeof(double) * rows * n_state);
        if (states)
            c->states = states;
        if (!rewards || !flags || !steps || !states)
            return fail(EP_ERR_SYSTEM, "ep_evaluate: out of memory for the results of %lu commands",
                        (unsigned long)rows);
        c->result_rows = rows;
    }
    episode_steps = realloc(c->episode_steps, sizeof(int64_t) * ((size_t)n + 1));
    if (!episode_steps)
        return fail(EP_ERR_SYSTEM, "ep_evaluate: out of memory");
    c->episode_steps = episode_steps;
    return EP_OK;
}

/* Copy the results of the batch's n episodes, episodes first..first+n-1 of the population, from
 * the batch block into results[0..n) and the client's rows from *row on (under the lock). */
static int read_results(ep_client *c, const ep_episode *episodes, int n, int first, size_t *row,
                        ep_result *results)
{
    const unsigned char *block = c->base + c->batch_offset;
    size_t n_state = (size_t)c->info.n_state;
    uint64_t n_commands = 0, k;   /* commands of the batch */
    int i;

    for (i = 0; i < n; i++)
        n_commands += (uint64_t)episodes[i].n_commands;
    for (i = 0; i < n; i++) {
        const unsigned char *r = block + c->batch_part[EP_BATCH_PART_RESULTS] +
                                 (size_t)EP_BATCH_RESULT_BYTES * (size_t)i;
        uint64_t n_replies = GET(r, EP_BATCH_RESULT_N_REPLIES), at = GET(r, EP_BATCH_RESULT_FIRST_REPLY);
        ep_result *out = &results[i];
        if (n_replies > (uint64_t)episodes[i].n_commands || at + n_replies > n_commands)
            return fail(EP_ERR_PROTOCOL, "channel '%s': the runner's result of episode %d of the batch has replies "
                        "%llu to %llu; the episode has %d commands, the batch %llu", c->channel, first + i,
                        (unsigned long long)at, (unsigned long long)(at + n_replies), episodes[i].n_commands,
                        (unsigned long long)n_commands);
        out->episode_return = get_f64(r + EP_BATCH_RESULT_EPISODE_RETURN);
        out->flag = get_i32(r + EP_BATCH_RESULT_FLAG);
        out->success = get_i32(r + EP_BATCH_RESULT_SUCCESS);
        out->n_steps = (int64_t)GET(r, EP_BATCH_RESULT_N_STEPS);
        memcpy(out->message, r + EP_BATCH_RESULT_MESSAGE, EP_MESSAGE_BYTES);
        out->message[EP_MESSAGE_BYTES] = '\0';
        out->n_replies = (int)n_replies;
        out->n_state = (int)n_state;
        out->rewards = c->rewards + *row;
        out->flags = c->flags + *row;
        out->steps = c->steps + *row;
        out->states = c->states + *row * n_state;
        for (k = 0; k < n_replies; k++) {
            const unsigned char *p = block + c->batch_part[EP_BATCH_PART_REPLIES] +
                                     EP_BATCH_REPLY_BYTES * (size_t)(at + k);
            c->rewards[*row + k] = get_f64(p + EP_BATCH_REPLY_REWARD);
            c->flags[*row + k] = get_i32(p + EP_BATCH_REPLY_FLAG);
            c->steps[*row + k] = get_i32(p + EP_BATCH_REPLY_N_STEPS);
        }
        doubles_from_wire(c->states + *row * n_state,
                          block + c->batch_part[EP_BATCH_PART_STATES] + 8 * n_state * (size_t)at,
                          (size_t)n_replies * n_state);
        c->episode_steps[first + i] = out->n_steps;
        *row += (size_t)episodes[i].n_commands;   /* room for every command of the episode */
    }
    return EP_OK;
}

/* Evaluate episodes[0..n), episodes first.. of the population, as one batch (they fit one:
 * batch_size), their commands put on the wire in `commands`; ids EP_NEXT after *last_id. */
static int evaluate_batch(ep_client *c, const ep_episode *episodes, int n, int first, int keep_logs,
                          double timeout, int64_t *last_id, wire_command *commands, size_t *row,
                          ep_result *results)
{
    batch_payload payload;
    fields f;
    ep_reply reply;
    uint64_t n_values;
    size_t m = 0;
    int i, rc;

    for (i = 0; i < n; i++) {
        if ((rc = episode_to_wire(c, &episodes[i], first + i, "ep_evaluate", last_id, commands + m, &n_values)) != EP_OK)
            return rc;
        results[i].episode_id = commands[m].f.episode_id;
        m += (size_t)episodes[i].n_commands;
    }
    c->episode_id = *last_id;   /* the ids of the episodes sent are taken */
    payload.episodes = episodes;
    payload.n_episodes = n;
    payload.keep_logs = keep_logs;
    payload.commands = commands;
    memset(&f, 0, sizeof f);
    f.kind = EP_KIND_BATCH;
    f.index = n;
    if ((rc = exchange(c, &f, write_batch, &payload, timeout, &reply)) != EP_OK)
        return rc;
    if (reply.flag != EP_FLAG_OK)
        return fail(EP_ERR_BATCH, "the runner on channel '%s' refused a batch of %d episodes: %s", c->channel, n,
                    reply.message);
    lock_take(c);
    rc = read_results(c, episodes, n, first, row, results);
    lock_give(c);
    if (rc == EP_OK) {
        c->batch_first = first;
        c->batch_count = n;
        c->keep_logs = keep_logs != 0;
    }
    return rc;
}

int ep_evaluate(ep_client *c, const ep_episode *episodes, int n_episodes, int keep_logs, double timeout,
                ep_result *results)
{
    uint64_t *n_values = NULL;
    wire_command *commands = NULL;
    size_t rows = 0, row = 0, most;
    int64_t id;
    int first, n, i, rc;

    if ((rc = check_client(c, "ep_evaluate")) != EP_OK)
        return rc;
    if (n_episodes < 0 || (n_episodes > 0 && (!episodes || !results)))
        return fail(EP_ERR_ARGUMENT, "ep_evaluate: %d episodes at %p, results at %p", n_episodes,
                    (const void *)episodes, (void *)results);
    c->batch_count = 0;  /* no batch of this population has been evaluated yet */
    n_values = malloc(sizeof *n_values * ((size_t)n_episodes + 1));
    if (!n_values)
        return fail(EP_ERR_SYSTEM, "ep_evaluate: out of memory");
    if ((rc = check_episodes(c, episodes, n_episodes, "ep_evaluate", n_values)) != EP_OK)
        goto done;
    for (i = 0; i < n_episodes; i++)
        rows += (size_t)episodes[i].n_commands;
    if ((rc = reserve_results(c, rows, n_episodes)) != EP_OK)
        goto done;
    c->n_population = n_episodes;
    most = rows < (size_t)c->info.max_batch_commands ? rows : (size_t)c->info.max_batch_commands;
    commands = malloc(sizeof *commands * (most + 1));
    if (!commands) {
        rc = fail(EP_ERR_SYSTEM, "ep_evaluate: out of memory");
        goto done;
    }
    id = c->episode_id;
    for (first = 0; first < n_episodes && rc == EP_OK; first += n) {
        n = batch_size(c, episodes + first, n_values + first, n_episodes - first);
        rc = evaluate_batch(c, episodes + first, n, first, keep_logs, timeout > 0 ? timeout : HUGE_VAL, &id, commands,
                            &row, results + first);
    }
done:
    free(commands);
    free(n_values);
    return rc;
}

int ep_get_batch_log(ep_client *c, int episode, int *truncated)
{
    fields f;
    ep_reply reply;
    int last, rc;

    if ((rc = check_client(c, "ep_get_batch_log")) != EP_OK)
        return rc;
    if (truncated)
        *truncated = 0;
    last = c->batch_first + c->batch_count - 1;
    if (c->batch_count == 0)
        return fail(EP_ERR_ARGUMENT, "ep_get_batch_log: the last ep_evaluate on channel '%s' evaluated no batch; "
                    "call ep_evaluate with keep_logs 1 first", c->channel);
    if (episode < 0 || episode >= c->n_population)
        return fail(EP_ERR_ARGUMENT, "ep_get_batch_log: the last ep_evaluate on channel '%s' had episodes 0 to %d, "
                    "not %d", c->channel, c->n_population - 1, episode);
    if (!c->keep_logs)
        return fail(EP_ERR_ARGUMENT, "ep_get_batch_log: the last ep_evaluate on channel '%s' kept no logs; "
                    "evaluate with keep_logs 1", c->channel);
    if (episode < c->batch_first || episode > last)
        return fail(EP_ERR_ARGUMENT, "ep_get_batch_log: episode %d went to the runner on channel '%s' in an "
                    "earlier batch than the last (episodes %d to %d), whose logs it no longer keeps; evaluate "
                    "populations of ep_batch_fit episodes and fetch their logs before the next", episode,
                    c->channel, c->batch_first, last);
    if (c->episode_steps[episode] == 0) {   /* refused at its start: an empty log */
        c->log_rows = 0;
        return EP_OK;
    }
    memset(&f, 0, sizeof f);
    f.kind = EP_KIND_BATCH_LOG;
    f.index = episode - c->batch_first;
    if ((rc = exchange(c, &f, NULL, NULL, c->timeout, &reply)) != EP_OK)
        return rc;
    if (reply.flag != EP_FLAG_OK)
        return fail(EP_ERR_BATCH, "the runner on channel '%s' has no log of episode %d of the batch: %s", c->channel,
                    episode, reply.message);
    if (truncated)
        *truncated = reply.log_truncated != 0;
    return EP_OK;
}

int ep_get_log_columns(ep_client *c, int n, const int *columns, double *const *out, int max_rows, int *rows)
{
    int i, have;
    if ((i = check_client(c, "ep_get_log_columns")) != EP_OK)
        return i;
    if (n < 0 || (n > 0 && (!columns || !out)))
        return fail(EP_ERR_ARGUMENT, "ep_get_log_columns: bad column list");
    for (i = 0; i < n; i++) {
        if (columns[i] < 0 || columns[i] >= c->info.n_log_columns)
            return fail(EP_ERR_NO_COLUMN, "channel '%s' has no log column number %d", c->channel, columns[i]);
        if (!out[i])
            return fail(EP_ERR_ARGUMENT, "ep_get_log_columns: output %d is NULL", i);
    }
    have = c->log_rows;
    if (max_rows < have)
        return fail(EP_ERR_ARGUMENT, "the log has %d rows; the buffers hold %d", have, max_rows);
    lock_take(c);
    for (i = 0; i < n; i++)
        doubles_from_wire(out[i], c->base + c->column_offset[columns[i]],
                          (size_t)have * (size_t)c->column_width[columns[i]]);
    lock_give(c);
    if (rows)
        *rows = have;
    return EP_OK;
}

int ep_get_log(ep_client *c, const char *column, double *out, int max_rows, int *rows)
{
    int index;
    if ((index = check_client(c, "ep_get_log")) != EP_OK)
        return index;
    index = ep_find_log_column(c, column, NULL);
    if (index < 0)
        return index;
    return ep_get_log_columns(c, 1, &index, &out, max_rows, rows);
}
