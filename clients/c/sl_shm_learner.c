/*
 * sl_shm_learner.c: a learner that speaks SL's SysV layout (the IAS lab's SL bridge, as
 * `episodic serve --sl-shm` exposes it; bridge/sl_shm.py), written from SL's conventions alone:
 * the three segments as SL's C structs, the command and reply semaphores, the three mutexes. It
 * sends what a runner must refuse (a NaN, a motion after its episode ended), then two reach
 * episodes as a learner written for SL does, and saves what it got (tests/test_sl_shm.py).
 *
 *     make -C clients/c sl       (or: cc -std=c99 -O2 -o sl_shm_learner clients/c/sl_shm_learner.c -lm)
 *     sl_shm_learner Q_FILE OUT_DIR [SEGMENT_KEY SEMAPHORE_KEY]     (keys: SL's 100000 50000)
 *
 * Q_FILE: the motion, rows x 7 float64 (row-major). OUT_DIR receives replies.bin (the 20 first
 * state values of each reply, with its flag) and steps.bin (the first whole episode's motion steps: joints,
 * jointsVel, jointsAcc, jointsDes, jointsVelDes, jointsAccDes, torque (7 each), cart (7), state
 * (9), commandIdx, stepInTrajectory per step).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <time.h>

#define N_DOFS 7
#define STEPLIMIT 100000
#define STEPLIMITEPISODE 60000
#define NUMEPISODICSTATES 100
#define MAXEPISODESTATES 100
#define SEQUENCE_MODULO 2000

typedef struct {
    int episodeID;
    int commandIdx;
    double state[NUMEPISODICSTATES];
} episode_state;

typedef struct {
    int episodeID;
    int trajectorySize;
    int commandIdx;
    int maxCommands;
    double waitingTime;
    double trajectory[STEPLIMIT][N_DOFS + 1];   /* rows 1..trajectorySize, joints 1..N_DOFS */
    double stateBuffer[NUMEPISODICSTATES];
} episode_trajectory;

typedef struct {
    int episodeID;
    int numTransmittedSteps;
    double joints[STEPLIMITEPISODE][N_DOFS];
    double jointsVel[STEPLIMITEPISODE][N_DOFS];
    double jointsAcc[STEPLIMITEPISODE][N_DOFS];
    double jointsDes[STEPLIMITEPISODE][N_DOFS];
    double jointsVelDes[STEPLIMITEPISODE][N_DOFS];
    double jointsAccDes[STEPLIMITEPISODE][N_DOFS];
    double torque[STEPLIMITEPISODE][N_DOFS];
    double cart[STEPLIMITEPISODE][7];
    double state[STEPLIMITEPISODE][MAXEPISODESTATES];
    int stepInTrajectory[STEPLIMITEPISODE];
    int commandIdx[STEPLIMITEPISODE];
    int doMotionIdx[STEPLIMITEPISODE];
} episode_steps;

static int sem_command, sem_reply, mutex[3];   /* mutexes: state, trajectory, steps */
static episode_state *state_shm;
static episode_trajectory *trajectory_shm;
static episode_steps *steps_shm;
static int sequence = 0;

static void die(const char *what)
{
    fprintf(stderr, "sl_shm_learner: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *attach(key_t key, size_t size)
{
    int id = shmget(key, size, 0);
    void *p;
    if (id < 0)
        die("shmget");
    p = shmat(id, NULL, 0);
    if (p == (void *)-1)
        die("shmat");
    return p;
}

static int semaphore(key_t key)
{
    int id = semget(key, 1, 0);
    if (id < 0)
        die("semget");
    return id;
}

/* semop by `delta` on semaphore `id`, waiting at most `timeout` s (<= 0: no limit); 0 or -1 (timed out) */
static int sem_change(int id, int delta, double timeout)
{
    struct sembuf op = {0, (short)delta, 0};
    struct timespec t = {(time_t)timeout, (long)((timeout - floor(timeout)) * 1e9)};
    while (semtimedop(id, &op, 1, timeout > 0 ? &t : NULL) != 0) {
        if (errno == EAGAIN)
            return -1;
        if (errno != EINTR)
            die("semtimedop");
    }
    return 0;
}

/* One SL command; the reply's first 20 state values into reply[0..19], its flag (1 answered, -1 not) into reply[20]. */
static void send_command(int commandIdx, int maxCommands, const double *q, int rows, const double *buffer, int n_buffer,
                         double timeout, double reply[21])
{
    int r, j, sent;
    sem_change(mutex[1], -1, 0);
    sequence = sequence % SEQUENCE_MODULO + 1;
    sent = sequence;
    trajectory_shm->episodeID = sent;
    trajectory_shm->commandIdx = commandIdx;
    trajectory_shm->maxCommands = maxCommands;
    trajectory_shm->trajectorySize = rows;
    trajectory_shm->waitingTime = 0.0;
    for (r = 0; r < rows; r++)
        for (j = 0; j < N_DOFS; j++)
            trajectory_shm->trajectory[r + 1][j + 1] = q[r * N_DOFS + j];
    memset(trajectory_shm->stateBuffer, 0, sizeof trajectory_shm->stateBuffer);
    if (n_buffer > 0)
        memcpy(trajectory_shm->stateBuffer, buffer, sizeof(double) * (size_t)n_buffer);
    sem_change(mutex[1], 1, 0);
    sem_change(sem_command, 1, 0);
    memset(reply, 0, sizeof(double) * 21);
    reply[20] = -1;
    if (sem_change(sem_reply, -1, timeout) != 0)
        return;
    sem_change(mutex[0], -1, 0);
    memcpy(reply, state_shm->state, sizeof(double) * 20);
    reply[20] = state_shm->episodeID == sent && state_shm->commandIdx == commandIdx ? 1 : -1;
    sem_change(mutex[0], 1, 0);
}

static void write_steps(const char *dir);

static void save(FILE *f, const double *v, size_t n)
{
    if (fwrite(v, sizeof(double), n, f) != n)
        die("fwrite");
}

int main(int argc, char **argv)
{
    key_t segments = 100000, semaphores = 50000;
    double context[10] = {0.5, 0.2, 1.5}, dummy[N_DOFS] = {0}, nan_row[2 * N_DOFS], reply[21], *q;
    char path[4096];
    long size;
    int rows, i;
    FILE *f;

    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: sl_shm_learner Q_FILE OUT_DIR [SEGMENT_KEY SEMAPHORE_KEY]\n");
        return 2;
    }
    if (argc == 5) {
        segments = (key_t)atol(argv[3]);
        semaphores = (key_t)atol(argv[4]);
    }
    if (!(f = fopen(argv[1], "rb")) || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0)
        die(argv[1]);
    rewind(f);
    rows = (int)(size / (long)(sizeof(double) * N_DOFS));
    q = malloc((size_t)size);
    if (!q || fread(q, 1, (size_t)size, f) != (size_t)size)
        die("reading the motion");
    fclose(f);

    state_shm = attach(segments, sizeof(episode_state));
    trajectory_shm = attach(segments + 1, sizeof(episode_trajectory));
    steps_shm = attach(segments + 2, sizeof(episode_steps));
    sem_command = semaphore(semaphores);
    sem_reply = semaphore(semaphores + 2);
    for (i = 0; i < 3; i++)
        mutex[i] = semaphore(semaphores + 4 + i);

    snprintf(path, sizeof path, "%s/replies.bin", argv[2]);
    if (!(f = fopen(path, "wb")))
        die(path);
    /* what the runner refuses, not dies of: a NaN in a motion, a motion before any start */
    for (i = 0; i < 2 * N_DOFS; i++)
        nan_row[i] = i == 3 ? NAN : q[i];
    send_command(1, 2, dummy, 1, context, 10, 20.0, reply);
    save(f, reply, 21);
    send_command(2, 2, nan_row, 2, NULL, 0, 20.0, reply);
    save(f, reply, 21);
    send_command(2, 2, q, rows, NULL, 0, 20.0, reply);
    save(f, reply, 21);
    /* an episode: SL's start (a dummy row; the task's start posture is used) and one motion */
    send_command(1, 2, dummy, 1, context, 10, 20.0, reply);
    save(f, reply, 21);
    send_command(2, 2, q, rows, NULL, 0, 20.0, reply);
    save(f, reply, 21);
    write_steps(argv[2]);
    /* a start of three commands, one motion, then SL's reset */
    send_command(1, 3, dummy, 1, context, 10, 20.0, reply);
    save(f, reply, 21);
    send_command(2, 3, q, rows, NULL, 0, 20.0, reply);
    save(f, reply, 21);
    send_command(-1, 1, dummy, 1, NULL, 0, 20.0, reply);
    save(f, reply, 21);
    fclose(f);
    shmdt(state_shm);
    shmdt(trajectory_shm);
    shmdt(steps_shm);
    free(q);
    return 0;
}

/* The last episode's motion steps, as SL's learners read them after its motion, into DIR/steps.bin. */
static void write_steps(const char *dir)
{
    char path[4096];
    int m, i, k;
    FILE *f;
    snprintf(path, sizeof path, "%s/steps.bin", dir);
    if (!(f = fopen(path, "wb")))
        die(path);
    sem_change(mutex[2], -1, 0);
    m = steps_shm->numTransmittedSteps;
    for (i = 0; i < m; i++) {
        double row[9 * N_DOFS + 9 + 2];
        for (k = 0; k < N_DOFS; k++) {
            row[k] = steps_shm->joints[i][k];
            row[N_DOFS + k] = steps_shm->jointsVel[i][k];
            row[2 * N_DOFS + k] = steps_shm->jointsAcc[i][k];
            row[3 * N_DOFS + k] = steps_shm->jointsDes[i][k];
            row[4 * N_DOFS + k] = steps_shm->jointsVelDes[i][k];
            row[5 * N_DOFS + k] = steps_shm->jointsAccDes[i][k];
            row[6 * N_DOFS + k] = steps_shm->torque[i][k];
            row[7 * N_DOFS + k] = steps_shm->cart[i][k];
        }
        for (k = 0; k < 9; k++)
            row[8 * N_DOFS + k] = steps_shm->state[i][k];
        row[8 * N_DOFS + 9] = steps_shm->commandIdx[i];
        row[8 * N_DOFS + 10] = steps_shm->stepInTrajectory[i];
        save(f, row, 8 * N_DOFS + 11);
    }
    sem_change(mutex[2], 1, 0);
    fclose(f);
}
