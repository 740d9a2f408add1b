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
#include <limits.h>
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

/* -- layout (docs/protocol.md, sections 3 to 6) ------------------------------------------ */
#define MAGIC "EPISODIC"
#define HEADER_BYTES 104
#define LOG_COLUMN_BYTES 48
#define COMMAND_BYTES 88
#define REPLY_BYTES 312
#define ALIGN 64
#define POLL_SECONDS 0.2        /* slice of the wait for a reply, between liveness checks */
#define TAKEN_POLL_SECONDS 0.002 /* between looks whether the runner took the previous command */
#define LOCK_TIMEOUT_SECONDS 2.0
#define DEFAULT_TIMEOUT 30.0
#define MAX_SMALL 65536u        /* sanity bounds on header sizes (keep the arithmetic in range) */
#define MAX_LARGE (1u << 28)

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
    uint64_t command_offset, reply_offset, log_offset;
    uint64_t array_offset[8];  /* posture kp kd ki context q qd qdd, from the command block */
    double *state;             /* the last reply's state (n_state) */
    double *posture;           /* the last reply's posture (n_dofs), rad */
    uint64_t seq;
    int64_t episode_id;
    int next_index;
    int max_commands;
    int log_rows;
    double timeout;
};

enum { A_POSTURE, A_KP, A_KD, A_KI, A_CONTEXT, A_Q, A_QD, A_QDD };

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
    case EP_ERR_PROTOCOL: return "reply for another episode";
    case EP_ERR_NO_COLUMN: return "no such log column";
    case EP_ERR_FOREIGN: return "the channel belongs to another user";
    case EP_ERR_IN_USE: return "another client is attached to the channel";
    default: return "unknown error code";
    }
}

const char *ep_flag_name(int flag)
{
    static const char *names[] = {"OK", "OUT_OF_ORDER", "STALE_EPISODE", "INVALID_PAYLOAD",
                                  "SAFETY_ABORT", "TIMEOUT", "ABORTED_BY_LEARNER", "INTERRUPTED",
                                  "DISCONTINUOUS", "INTERNAL_ERROR"};
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

static uint64_t align64(uint64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

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
                        (long long)(int64_t)get_u(c->base + 88, 8));
        return fail(EP_ERR_SYSTEM, "channel '%s': flock(%s): %s", c->channel, name, strerror(errno));
    }
    put_u(c->base + 88, (uint64_t)(int64_t)getpid(), 8);
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

/* Read and check the header; fill the sizes, offsets and tables. */
static int read_header(ep_client *c)
{
    const unsigned char *h = c->base, *table;
    uint32_t version, n_dofs, max_samples, max_log_steps, max_context, n_state, n_cols, i;
    uint64_t header_bytes, command_offset, command_bytes, reply_offset, log_offset, total, q;
    const char *ch = c->channel;

    if (c->size < HEADER_BYTES)
        return fail(EP_ERR_LAYOUT, "channel '%s': the shared-memory object is smaller than a header", ch);
    if (memcmp(h, MAGIC, 8) != 0)
        return fail(EP_ERR_NOT_EPISODIC, "channel '%s': bad magic: not an episodic channel", ch);
    version = (uint32_t)get_u(h + 8, 4);
    if (version != EP_PROTOCOL_VERSION)
        return fail(EP_ERR_VERSION, "the runner on channel '%s' speaks protocol version %u, this client "
                    "version %d; use matching versions of episodic and its clients", ch,
                    (unsigned)version, EP_PROTOCOL_VERSION);
    n_dofs = (uint32_t)get_u(h + 24, 4);
    max_samples = (uint32_t)get_u(h + 28, 4);
    max_log_steps = (uint32_t)get_u(h + 32, 4);
    max_context = (uint32_t)get_u(h + 36, 4);
    n_state = (uint32_t)get_u(h + 40, 4);
    n_cols = (uint32_t)get_u(h + 44, 4);
    if (n_dofs < 1 || n_dofs > MAX_SMALL || max_context > MAX_SMALL || n_state > MAX_SMALL ||
        n_cols > MAX_SMALL || max_samples < 1 || max_samples > MAX_LARGE || max_log_steps > MAX_LARGE)
        return fail(EP_ERR_LAYOUT, "channel '%s': implausible sizes in the header; the channel is corrupt", ch);
    header_bytes = HEADER_BYTES + (uint64_t)EP_NAME_BYTES * n_state + (uint64_t)LOG_COLUMN_BYTES * n_cols;
    if (header_bytes > c->size)
        return fail(EP_ERR_LAYOUT, "channel '%s': the header's tables overrun the object", ch);

    /* the block offsets follow from the sizes (docs/protocol.md section 4) */
    command_offset = align64(header_bytes);
    q = COMMAND_BYTES + 8 * (4 * (uint64_t)n_dofs + max_context);
    command_bytes = q + 24 * (uint64_t)max_samples * n_dofs;
    reply_offset = command_offset + align64(command_bytes);
    log_offset = reply_offset + align64(REPLY_BYTES + 8 * ((uint64_t)n_state + n_dofs));
    total = log_offset;
    table = h + HEADER_BYTES + (uint64_t)EP_NAME_BYTES * n_state;
    for (i = 0; i < n_cols; i++)  /* width of column i times the rows, each rounded up to 64 bytes */
        total += align64(8 * get_u(table + LOG_COLUMN_BYTES * i + 32, 4) * max_log_steps);
    if (command_offset != get_u(h + 56, 8) || reply_offset != get_u(h + 64, 8) ||
        log_offset != get_u(h + 72, 8) || total != get_u(h + 80, 8))
        return fail(EP_ERR_LAYOUT, "channel '%s': the header's offsets disagree with its sizes; "
                    "the channel is corrupt", ch);
    if (total > c->size)
        return fail(EP_ERR_LAYOUT, "channel '%s': the object (%lu bytes) is smaller than its header says "
                    "(%lu)", ch, (unsigned long)c->size, (unsigned long)total);

    c->info.channel = c->channel;
    c->info.runner_pid = (int64_t)get_u(h + 16, 8);
    c->info.n_dofs = (int)n_dofs;
    c->info.max_samples = (int)max_samples;
    c->info.max_log_steps = (int)max_log_steps;
    c->info.max_context = (int)max_context;
    c->info.n_state = (int)n_state;
    c->info.n_log_columns = (int)n_cols;
    c->info.control_rate = get_f64(h + 48);
    c->command_offset = command_offset;
    c->reply_offset = reply_offset;
    c->log_offset = log_offset;
    c->array_offset[A_POSTURE] = COMMAND_BYTES;
    c->array_offset[A_KP] = COMMAND_BYTES + 8 * (uint64_t)n_dofs;
    c->array_offset[A_KD] = COMMAND_BYTES + 16 * (uint64_t)n_dofs;
    c->array_offset[A_KI] = COMMAND_BYTES + 24 * (uint64_t)n_dofs;
    c->array_offset[A_CONTEXT] = COMMAND_BYTES + 32 * (uint64_t)n_dofs;
    c->array_offset[A_Q] = q;
    c->array_offset[A_QD] = q + 8 * (uint64_t)max_samples * n_dofs;
    c->array_offset[A_QDD] = q + 16 * (uint64_t)max_samples * n_dofs;

    c->state_names = calloc(n_state ? n_state : 1, sizeof *c->state_names);
    c->column_names = calloc(n_cols ? n_cols : 1, sizeof *c->column_names);
    c->column_width = calloc(n_cols ? n_cols : 1, sizeof *c->column_width);
    c->column_offset = calloc(n_cols ? n_cols : 1, sizeof *c->column_offset);
    c->state = calloc(n_state ? n_state : 1, sizeof *c->state);
    c->posture = calloc(n_dofs, sizeof *c->posture);
    if (!c->state_names || !c->column_names || !c->column_width || !c->column_offset || !c->state ||
        !c->posture)
        return fail(EP_ERR_SYSTEM, "channel '%s': out of memory", ch);
    for (i = 0; i < n_state; i++)
        memcpy(c->state_names[i], h + HEADER_BYTES + EP_NAME_BYTES * i, EP_NAME_BYTES);
    for (i = 0; i < n_cols; i++) {
        const unsigned char *row = table + LOG_COLUMN_BYTES * i;
        uint64_t width = get_u(row + 32, 4), offset = get_u(row + 40, 8);
        memcpy(c->column_names[i], row, EP_NAME_BYTES);
        if (offset > total - log_offset || 8 * width * max_log_steps > total - log_offset - offset)
            return fail(EP_ERR_LAYOUT, "channel '%s': log column '%s' lies outside the object", ch,
                        c->column_names[i]);
        c->column_width[i] = (int)width;
        c->column_offset[i] = log_offset + offset;
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

/* -- the exchange (docs/protocol.md section 7) ------------------------------------------ */
typedef struct {
    int kind, index, max_commands, feedforward, n_samples, n_context;
    int has_posture, has_qd, has_qdd, has_ki;
    double rate, wait_time;
} fields;

typedef struct {
    int which;             /* A_... */
    const double *values;
    size_t count;
} array_arg;

static int wait_reply(ep_client *c, const fields *f, double deadline, ep_reply *out)
{
    const unsigned char *r = c->base + c->reply_offset;
    int n_state = c->info.n_state, n_dofs = c->info.n_dofs;

    for (;;) {
        double left = deadline - monotonic_now();
        int err;
        if (left <= 0)
            return fail(EP_ERR_TIMEOUT, "the runner on channel '%s' did not answer within %g s",
                        c->channel, c->timeout);
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
        if (get_u(r, 8) != c->seq) {   /* the late answer to a command that timed out */
            lock_give(c);
            continue;
        }
        out->seq = get_u(r, 8);
        out->kind = get_i32(r + 52);
        out->episode_id = (int64_t)get_u(r + 8, 8);
        out->index = get_i32(r + 16);
        out->flag = get_i32(r + 20);
        out->reward = get_f64(r + 24);
        out->n_steps = get_i32(r + 32);
        out->episode_done = get_i32(r + 36);
        out->machine_state = get_i32(r + 40);
        out->log_rows = get_i32(r + 44);
        out->log_truncated = get_i32(r + 48);
        memcpy(out->message, r + 56, EP_MESSAGE_BYTES);
        doubles_from_wire(c->state, r + REPLY_BYTES, (size_t)n_state);
        doubles_from_wire(c->posture, r + REPLY_BYTES + 8 * (size_t)n_state, (size_t)n_dofs);
        lock_give(c);
        out->message[EP_MESSAGE_BYTES] = '\0';
        out->n_state = n_state;
        out->state = c->state;
        out->n_dofs = n_dofs;
        out->posture = c->posture;
        c->log_rows = out->log_rows < 0 ? 0 : out->log_rows;
        if (c->log_rows > c->info.max_log_steps)
            c->log_rows = c->info.max_log_steps;
        if (out->kind != f->kind || out->index != f->index || out->episode_id != c->episode_id)
            return fail(EP_ERR_PROTOCOL, "channel '%s': the reply to command %llu is for kind %d, index %d, "
                        "episode %lld; expected kind %d, index %d, episode %lld", c->channel,
                        (unsigned long long)c->seq, out->kind, out->index, (long long)out->episode_id,
                        f->kind, f->index, (long long)c->episode_id);
        return EP_OK;
    }
}

static int exchange(ep_client *c, const fields *f, const array_arg *arrays, int n_arrays, ep_reply *out)
{
    unsigned char fixed[COMMAND_BYTES];
    unsigned char *block = c->base + c->command_offset;
    ep_reply scratch;
    struct timespec nap;
    double deadline = monotonic_now() + c->timeout;
    int i;

    if (!out)
        out = &scratch;
    c->seq += 1;
    memset(fixed, 0, sizeof fixed);
    memcpy(fixed, MAGIC, 8);
    put_u(fixed + 8, EP_PROTOCOL_VERSION, 4);
    put_u(fixed + 16, c->seq, 8);
    put_u(fixed + 24, (uint64_t)(int64_t)getpid(), 8);
    put_u(fixed + 32, (uint64_t)c->episode_id, 8);
    put_u(fixed + 40, (uint32_t)f->index, 4);
    put_u(fixed + 44, (uint32_t)f->max_commands, 4);
    put_u(fixed + 48, (uint32_t)f->kind, 4);
    put_u(fixed + 52, (uint32_t)f->feedforward, 4);
    put_u(fixed + 56, (uint32_t)f->n_samples, 4);
    put_u(fixed + 60, (uint32_t)f->n_context, 4);
    fixed[64] = (unsigned char)(f->has_posture != 0);
    fixed[65] = (unsigned char)(f->has_qd != 0);
    fixed[66] = (unsigned char)(f->has_qdd != 0);
    fixed[67] = (unsigned char)(f->has_ki != 0);
    put_f64(fixed + 72, f->rate);
    put_f64(fixed + 80, f->wait_time);

    /* never over a command of this client the runner has not taken yet (one that timed out) */
    for (;;) {
        int pending;
        lock_take(c);
        pending = (int64_t)get_u(block + 24, 8) == (int64_t)getpid() &&
                  get_u(block + 16, 8) != get_u(c->base + 96, 8);
        if (!pending) {
            memcpy(block, fixed, COMMAND_BYTES);
            for (i = 0; i < n_arrays; i++)
                doubles_to_wire(block + c->array_offset[arrays[i].which], arrays[i].values, arrays[i].count);
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
                        c->channel, c->timeout);
        nap.tv_sec = 0;
        nap.tv_nsec = (long)(TAKEN_POLL_SECONDS * 1e9);
        nanosleep(&nap, NULL);
    }
    if (sem_post(c->cmd) != 0)
        return fail(EP_ERR_SYSTEM, "channel '%s': sem_post: %s", c->channel, strerror(errno));
    return wait_reply(c, f, deadline, out);
}

static int check_client(const ep_client *c, const char *who)
{
    return c ? EP_OK : fail(EP_ERR_ARGUMENT, "%s: the client is NULL (not attached)", who);
}

int ep_start(ep_client *c, int64_t episode_id, int max_commands, const double *posture,
             const double *context, int n_context, ep_reply *reply)
{
    fields f;
    array_arg arrays[2];
    int n = 0, rc;

    if ((rc = check_client(c, "ep_start")) != EP_OK)
        return rc;
    if (n_context < 0 || n_context > c->info.max_context)
        return fail(EP_ERR_ARGUMENT, "context has %d values; the runner on channel '%s' takes at most %d",
                    n_context, c->channel, c->info.max_context);
    if (n_context > 0 && !context)
        return fail(EP_ERR_ARGUMENT, "ep_start: context is NULL but n_context is %d", n_context);
    c->episode_id = episode_id < 0 ? c->episode_id + 1 : episode_id;
    c->max_commands = max_commands;
    memset(&f, 0, sizeof f);
    f.kind = EP_KIND_START;
    f.max_commands = max_commands;
    f.n_context = n_context;
    f.has_posture = posture != NULL;
    arrays[n].which = A_CONTEXT, arrays[n].values = context, arrays[n++].count = (size_t)n_context;
    if (posture)
        arrays[n].which = A_POSTURE, arrays[n].values = posture, arrays[n++].count = (size_t)c->info.n_dofs;
    rc = exchange(c, &f, arrays, n, reply);
    if (rc == EP_OK)
        c->next_index = 1;
    return rc;
}

int ep_send_trajectory(ep_client *c, int index, int max_commands, const double *q, const double *qd,
                       const double *qdd, int n_samples, double rate, double wait_time, ep_reply *reply)
{
    fields f;
    array_arg arrays[3];
    size_t count;
    int n = 0, rc;

    if ((rc = check_client(c, "ep_send_trajectory")) != EP_OK)
        return rc;
    if (!q)
        return fail(EP_ERR_ARGUMENT, "ep_send_trajectory: q is NULL");
    if (n_samples < 1 || n_samples > c->info.max_samples)
        return fail(EP_ERR_ARGUMENT, "q has %d samples; the runner on channel '%s' takes 1..%d",
                    n_samples, c->channel, c->info.max_samples);
    count = (size_t)n_samples * (size_t)c->info.n_dofs;
    memset(&f, 0, sizeof f);
    f.kind = EP_KIND_TRAJECTORY;
    f.index = index < 0 ? c->next_index : index;
    f.max_commands = max_commands < 0 ? c->max_commands : max_commands;
    f.n_samples = n_samples;
    f.has_qd = qd != NULL;
    f.has_qdd = qdd != NULL;
    f.rate = rate;
    f.wait_time = wait_time;
    arrays[n].which = A_Q, arrays[n].values = q, arrays[n++].count = count;
    if (qd)
        arrays[n].which = A_QD, arrays[n].values = qd, arrays[n++].count = count;
    if (qdd)
        arrays[n].which = A_QDD, arrays[n].values = qdd, arrays[n++].count = count;
    rc = exchange(c, &f, arrays, n, reply);
    if (rc == EP_OK)
        c->next_index = f.index + 1;
    return rc;
}

int ep_send_gains(ep_client *c, int index, int max_commands, const double *kp, const double *kd,
                  const double *ki, int feedforward, const double *task_gains, int n_task_gains,
                  double wait_time, ep_reply *reply)
{
    fields f;
    array_arg arrays[4];
    size_t n_dofs;
    int n = 0, rc;

    if ((rc = check_client(c, "ep_send_gains")) != EP_OK)
        return rc;
    if (!kp || !kd)
        return fail(EP_ERR_ARGUMENT, "ep_send_gains: kp and kd are required");
    if (feedforward < EP_FF_NONE || feedforward > EP_FF_INVERSE_DYNAMICS)
        return fail(EP_ERR_ARGUMENT, "unknown feedforward mode %d; use one of 0 none, 1 gravity_compensation, "
                    "2 feedforward, 3 inverse_dynamics", feedforward);
    if (n_task_gains < 0 || n_task_gains > c->info.max_context)
        return fail(EP_ERR_ARGUMENT, "task_gains has %d values; the runner on channel '%s' takes at most %d",
                    n_task_gains, c->channel, c->info.max_context);
    if (n_task_gains > 0 && !task_gains)
        return fail(EP_ERR_ARGUMENT, "ep_send_gains: task_gains is NULL but n_task_gains is %d", n_task_gains);
    n_dofs = (size_t)c->info.n_dofs;
    memset(&f, 0, sizeof f);
    f.kind = EP_KIND_GAINS;
    f.index = index < 0 ? c->next_index : index;
    f.max_commands = max_commands < 0 ? c->max_commands : max_commands;
    f.feedforward = feedforward;
    f.n_context = n_task_gains;
    f.has_ki = ki != NULL;
    f.wait_time = wait_time;
    arrays[n].which = A_KP, arrays[n].values = kp, arrays[n++].count = n_dofs;
    arrays[n].which = A_KD, arrays[n].values = kd, arrays[n++].count = n_dofs;
    if (ki)
        arrays[n].which = A_KI, arrays[n].values = ki, arrays[n++].count = n_dofs;
    if (n_task_gains > 0)
        arrays[n].which = A_CONTEXT, arrays[n].values = task_gains, arrays[n++].count = (size_t)n_task_gains;
    rc = exchange(c, &f, arrays, n, reply);
    if (rc == EP_OK)
        c->next_index = f.index + 1;
    return rc;
}

int ep_reset(ep_client *c, ep_reply *reply)
{
    fields f;
    int rc;
    if ((rc = check_client(c, "ep_reset")) != EP_OK)
        return rc;
    memset(&f, 0, sizeof f);
    f.kind = EP_KIND_RESET;
    f.max_commands = c->max_commands;
    return exchange(c, &f, NULL, 0, reply);
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
