/*
 * example.c: one reach episode from C against `episodic serve --task reach`.
 *
 *     episodic serve --task reach --channel demo &
 *     make && ./build/example demo
 *
 * Works with any robot (`episodic serve --robot NAME`): the number of joints and the control rate
 * come from the runner's header (ep_get_info). Starts an episode with a target (the context) and
 * prints the start posture its reply gives; sends three 1 s segments, each beginning at the
 * posture the last reply gives (a segment must start within the robot's max_start_jump of the
 * posture held, e.g. 0.1 rad on the WAM, or it is refused DISCONTINUOUS); prints each reply,
 * fetches the episode log and prints its row count.
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
    printf("%s: flag %d (%s), reward %.6f, %d steps, state [", what, r->flag, ep_flag_name(r->flag),
           r->reward, r->n_steps);
    for (i = 0; i < r->n_state; i++)
        printf("%s%.4f", i ? ", " : "", r->state[i]);
    printf("]%s%s\n", r->message[0] ? " " : "", r->message);
}

int main(int argc, char **argv)
{
    const char *channel = argc > 1 ? argv[1] : "default";
    const double context[3] = {0.5, 0.2, 1.5}; /* reach target, m */
    double *q = NULL, *log_q = NULL, total = 0;
    const ep_info *info;
    ep_client *c = NULL;
    ep_reply reply;
    int k, n, n_samples, rows = 0, bad = 0, rc;
    char what[32];

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
    if (!q) {
        fprintf(stderr, "example: out of memory\n");
        ep_detach(c);
        return 1;
    }

    if ((rc = ep_start(c, EP_NEXT, N_SEGMENTS, NULL, context, 3, &reply)) != EP_OK)
        goto error;
    print_reply("start", &reply);
    bad |= reply.flag != EP_FLAG_OK;
    printf("start posture:");
    for (k = 0; k < n; k++)
        printf(" %.4f", reply.posture[k]);
    printf(" rad\n");
    for (k = 0; k < N_SEGMENTS && !bad; k++) {
        wave(q, n_samples, n, reply.posture, 0.2, 0.1 * k); /* begins where the last reply says */
        if ((rc = ep_send_trajectory(c, EP_NEXT, EP_DEFAULT, q, NULL, NULL, n_samples, 0.0, 0.0, &reply)) != EP_OK)
            goto error;
        sprintf(what, "segment %d", k + 1);
        print_reply(what, &reply);
        total += reply.reward;
        bad |= reply.flag != EP_FLAG_OK;
    }
    printf("episode %lld: return %.6f, flags %s\n", (long long)ep_episode_id(c), total, bad ? "NOT OK" : "0");

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
    free(log_q);
    free(q);
    ep_detach(c);
    return bad ? 2 : 0;

error:
    fprintf(stderr, "example: %s\n", ep_last_error());
    free(log_q);
    free(q);
    ep_detach(c);
    return 1;
}
