/*
 * example.c: one reach episode from C against `episodic serve --task reach`.
 *
 *     episodic serve --task reach --channel demo &
 *     make && ./build/example demo        one episode
 *     ./build/example demo 8              then a population of 8 episodes in one call
 *
 * Works with any robot (`episodic serve --robot NAME`): the number of joints and the control rate
 * come from the runner's header (ep_get_info). Starts an episode with a target (the context) and
 * prints the start posture its reply gives; sends three 1 s segments, each beginning at the
 * posture the last reply gives (a segment must start within the robot's max_start_jump of the
 * posture held, e.g. 0.1 rad on the WAM, or it is refused DISCONTINUOUS); prints each reply (with
 * the episode's return so far, and in the reply that ends the episode whether it was solved),
 * the episode's return and success as the reply that ended it gives them (the runner's log
 * records the same return, a charge for ending early included), fetches the episode log and
 * prints its row count. Given a number N, it then evaluates N
 * episodes with one ep_evaluate call (each a start and one 1 s segment from the start posture,
 * the amplitude growing from episode to episode) and prints each one's return and success.
 * Exit status: 0 when every flag is OK, 1 on a client error, 2 when a flag is not OK.
 */
#include "episodic_client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N_SEGMENTS 3
#define SEGMENT_SECONDS 1.0

/* A smooth n x n_dofs segment around `start` (n_dofs rad; row-major): joint j moves by
 * amplitude * (sin(pi t + phase) - sin(phase)) * (1 - 0.7 j / (n_dofs - 1)), t = 1/n .. 1, so it
 * begins at `start` and leaves it smoothly, the first joint most. */
static void wave(double *q, int n, int n_dofs, const double *start, double amplitude, double phase)
{
    const double pi = 3.14159265358979323846;
    const double last = n_dofs > 1 ? (double)(n_dofs - 1) : 1.0;
    int r, j;
    for (r = 0; r < n; r++) {
        double t = (double)(r + 1) / n, shape = sin(pi * t + phase) - sin(phase);
        for (j = 0; j < n_dofs; j++)
            q[r * n_dofs + j] = start[j] + amplitude * shape * (1.0 - 0.7 * j / last);
    }
}

static void print_reply(const char *what, const ep_reply *r)
{
    int i;
    printf("%s: flag %d (%s), reward %.6f, return so far %.6f%s, %d steps, state [", what, r->flag,
           ep_flag_name(r->flag), r->reward, r->episode_return,
           r->episode_done ? (r->success ? ", solved" : ", not solved") : "", r->n_steps);
    for (i = 0; i < r->n_state; i++)
        printf("%s%.4f", i ? ", " : "", r->state[i]);
    printf("]%s%s\n", r->message[0] ? " " : "", r->message);
}

/* Evaluate n episodes in one call: each starts at the task's start posture `start` (n_dofs rad)
 * with `context` (3 values) and sends one segment of n_samples from there, joint amplitudes
 * 0.05 rad, 0.1 rad, ... Returns the exit status (0, 1 or 2, as main's). */
static int evaluate_population(ep_client *c, int n, int n_samples, const double *start, const double *context)
{
    const int n_dofs = ep_get_info(c)->n_dofs;
    const size_t size = (size_t)n_samples * (size_t)n_dofs;
    double *q = malloc(sizeof(double) * size * (size_t)n);
    ep_command *commands = calloc(2 * (size_t)n, sizeof *commands);
    ep_episode *episodes = malloc(sizeof *episodes * (size_t)n);
    ep_result *results = malloc(sizeof *results * (size_t)n);
    int k, status = 0;

    if (!q || !commands || !episodes || !results) {
        fprintf(stderr, "example: out of memory\n");
        status = 1;
    }
    for (k = 0; k < n && status == 0; k++) {
        ep_command *start_cmd = &commands[2 * k], *segment = start_cmd + 1;
        wave(q + k * size, n_samples, n_dofs, start, 0.05 * (k + 1), 0.0);
        start_cmd->kind = EP_KIND_START;    /* the task's start posture (posture NULL) */
        start_cmd->context = context;
        start_cmd->n_context = 3;
        segment->kind = EP_KIND_TRAJECTORY; /* at the control rate (rate 0), not held (wait_time 0) */
        segment->q = q + k * size;
        segment->n_samples = n_samples;
        start_cmd->episode_id = segment->episode_id = EP_NEXT;      /* the client's next id */
        start_cmd->index = segment->index = EP_NEXT;                /* 0 and 1 */
        start_cmd->max_commands = segment->max_commands = EP_DEFAULT; /* 1 segment */
        episodes[k].commands = start_cmd;
        episodes[k].n_commands = 2;
    }
    if (status == 0 && ep_evaluate(c, episodes, n, 0, 0.0, results) != EP_OK) {
        fprintf(stderr, "example: %s\n", ep_last_error());
        status = 1;
    }
    for (k = 0; k < n && status != 1; k++) {
        printf("population episode %d (id %lld): return %.6f, flag %d (%s), %lld steps, %s%s%s\n", k,
               (long long)results[k].episode_id, results[k].episode_return, results[k].flag,
               ep_flag_name(results[k].flag), (long long)results[k].n_steps,
               results[k].success ? "solved" : "not solved", results[k].message[0] ? " " : "", results[k].message);
        if (results[k].flag != EP_FLAG_OK)
            status = 2;
    }
    free(results);
    free(episodes);
    free(commands);
    free(q);
    return status;
}

int main(int argc, char **argv)
{
    const char *channel = argc > 1 ? argv[1] : "default";
    const int population = argc > 2 ? atoi(argv[2]) : 0;
    const double context[3] = {0.5, 0.2, 1.5}; /* reach target, m */
    double *q = NULL, *log_q = NULL, *start = NULL;
    const ep_info *info;
    ep_client *c = NULL;
    ep_reply reply;
    int k, n, n_samples, rows = 0, bad = 0, rc;
    char what[32];

    if (population < 0 || population > 10000) {
        fprintf(stderr, "example: usage: example [CHANNEL [N]], N the episodes of the population, 0..10000\n");
        return 1;
    }
    if ((rc = ep_attach(channel, 30.0, &c)) != EP_OK) {
        fprintf(stderr, "example: %s (%s)\n", ep_last_error(), ep_strerror(rc));
        return 1;
    }
    info = ep_get_info(c);
    printf("channel '%s': runner pid %lld, %d joints, %d state columns, %.0f Hz\n", info->channel,
           (long long)info->runner_pid, info->n_dofs, info->n_state, info->control_rate);
    n = info->n_dofs;
    n_samples = (int)(SEGMENT_SECONDS * info->control_rate + 0.5); /* 1 s at the control rate */
    if (n_samples < 2)
        n_samples = 2;
    if (n_samples > info->max_samples)
        n_samples = info->max_samples;
    q = malloc(sizeof(double) * (size_t)n_samples * (size_t)n);
    start = malloc(sizeof(double) * (size_t)n);
    if (!q || !start) {
        fprintf(stderr, "example: out of memory\n");
        free(q);
        free(start);
        ep_detach(c);
        return 1;
    }

    if ((rc = ep_start(c, EP_NEXT, N_SEGMENTS, NULL, context, 3, &reply)) != EP_OK)
        goto error;
    print_reply("start", &reply);
    bad |= reply.flag != EP_FLAG_OK;
    printf("start posture:");
    for (k = 0; k < n; k++)
        printf(" %.4f", start[k] = reply.posture[k]);
    printf(" rad\n");
    for (k = 0; k < N_SEGMENTS && !bad; k++) {
        wave(q, n_samples, n, reply.posture, 0.2, 0.1 * k); /* begins where the last reply says */
        if ((rc = ep_send_trajectory(c, EP_NEXT, EP_DEFAULT, q, NULL, NULL, n_samples, 0.0, 0.0, &reply)) != EP_OK)
            goto error;
        sprintf(what, "segment %d", k + 1);
        print_reply(what, &reply);
        bad |= reply.flag != EP_FLAG_OK;
    }
    /* the last reply ended the episode (its last segment, or a flag that is not OK) */
    printf("episode %lld: return %.6f, flags %s, %s\n", (long long)ep_episode_id(c), reply.episode_return,
           bad ? "NOT OK" : "0", reply.success ? "solved" : "not solved");

    rows = ep_log_rows(c);
    log_q = malloc(sizeof(double) * (size_t)(rows ? rows : 1) * (size_t)n);
    if (!log_q || (rc = ep_get_log(c, "q", log_q, rows, &rows)) != EP_OK)
        goto error;
    printf("log: %d rows", rows);
    if (rows > 0) {
        printf(", final q[0..%d] =", (n < 3 ? n : 3) - 1);
        for (k = 0; k < n && k < 3; k++)
            printf(" %.4f", log_q[(size_t)(rows - 1) * (size_t)n + (size_t)k]);
    }
    printf("\n");
    rc = population > 0 ? evaluate_population(c, population, n_samples, start, context) : 0;
    free(log_q);
    free(start);
    free(q);
    ep_detach(c);
    return rc == 1 ? 1 : bad || rc == 2 ? 2 : 0;

error:
    fprintf(stderr, "example: %s\n", ep_last_error());
    free(log_q);
    free(start);
    free(q);
    ep_detach(c);
    return 1;
}
