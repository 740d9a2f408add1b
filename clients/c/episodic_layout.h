/* episodic_layout.h: the wire layout of the episodic shared-memory protocol, version 5
 * (docs/protocol.md), for the C client (episodic_client.c) and through it the MEX gateway.
 * Written by `python -m episodic.bridge.generate --c-header clients/c/episodic_layout.h` from
 * bridge/layout.py, the one description of the layout; do not edit (tests/test_wire_schema.py
 * fails when this file differs from what that command writes).
 * EP_<PART>_BYTES is a fixed part's size, EP_<PART>_<FIELD> a field's byte offset in it and
 * EP_<PART>_<FIELD>_SIZE the field's bytes; every number is little-endian. */
#ifndef EPISODIC_LAYOUT_H
#define EPISODIC_LAYOUT_H

#include <stdint.h>

#define EP_MAGIC "EPISODIC"  /* the first 8 bytes of the header and of a command, no NUL */
#define EP_PROTOCOL_VERSION 5
#define EP_NAME_BYTES 32     /* longest state / log column name */
#define EP_MESSAGE_BYTES 256 /* longest reply message */
#define EP_ALIGN 64           /* every block starts at a multiple of this many bytes */
/* plausibility bounds on the header's sizes: joints, context, state and log columns and widths; */
#define EP_MAX_SMALL 65536u
/* samples, log steps, batch episodes and batch commands; values of the batch pool */
#define EP_MAX_LARGE 268435456u
#define EP_MAX_VALUES UINT64_C(68719476736)

/* HEADER */
#define EP_HEADER_BYTES 128
#define EP_HEADER_MAGIC 0  /* char[8] */
#define EP_HEADER_MAGIC_SIZE 8
#define EP_HEADER_VERSION 8  /* uint32 */
#define EP_HEADER_VERSION_SIZE 4
#define EP_HEADER_STATUS 12  /* uint32 */
#define EP_HEADER_STATUS_SIZE 4
#define EP_HEADER_RUNNER_PID 16  /* int64 */
#define EP_HEADER_RUNNER_PID_SIZE 8
#define EP_HEADER_N_DOFS 24  /* uint32 */
#define EP_HEADER_N_DOFS_SIZE 4
#define EP_HEADER_MAX_SAMPLES 28  /* uint32 */
#define EP_HEADER_MAX_SAMPLES_SIZE 4
#define EP_HEADER_MAX_LOG_STEPS 32  /* uint32 */
#define EP_HEADER_MAX_LOG_STEPS_SIZE 4
#define EP_HEADER_MAX_CONTEXT 36  /* uint32 */
#define EP_HEADER_MAX_CONTEXT_SIZE 4
#define EP_HEADER_N_STATE 40  /* uint32 */
#define EP_HEADER_N_STATE_SIZE 4
#define EP_HEADER_N_LOG_COLUMNS 44  /* uint32 */
#define EP_HEADER_N_LOG_COLUMNS_SIZE 4
#define EP_HEADER_CONTROL_RATE 48  /* float64 */
#define EP_HEADER_CONTROL_RATE_SIZE 8
#define EP_HEADER_COMMAND_OFFSET 56  /* uint64 */
#define EP_HEADER_COMMAND_OFFSET_SIZE 8
#define EP_HEADER_REPLY_OFFSET 64  /* uint64 */
#define EP_HEADER_REPLY_OFFSET_SIZE 8
#define EP_HEADER_LOG_OFFSET 72  /* uint64 */
#define EP_HEADER_LOG_OFFSET_SIZE 8
#define EP_HEADER_TOTAL_SIZE 80  /* uint64 */
#define EP_HEADER_TOTAL_SIZE_SIZE 8
#define EP_HEADER_CLIENT_PID 88  /* int64 */
#define EP_HEADER_CLIENT_PID_SIZE 8
#define EP_HEADER_TAKEN_SEQ 96  /* uint64 */
#define EP_HEADER_TAKEN_SEQ_SIZE 8
#define EP_HEADER_MAX_BATCH 104  /* uint32 */
#define EP_HEADER_MAX_BATCH_SIZE 4
#define EP_HEADER_MAX_BATCH_COMMANDS 108  /* uint32 */
#define EP_HEADER_MAX_BATCH_COMMANDS_SIZE 4
#define EP_HEADER_MAX_BATCH_VALUES 112  /* uint64 */
#define EP_HEADER_MAX_BATCH_VALUES_SIZE 8
#define EP_HEADER_BATCH_OFFSET 120  /* uint64 */
#define EP_HEADER_BATCH_OFFSET_SIZE 8

/* LOG_COLUMN */
#define EP_LOG_COLUMN_BYTES 48
#define EP_LOG_COLUMN_NAME 0  /* char[32] */
#define EP_LOG_COLUMN_NAME_SIZE 32
#define EP_LOG_COLUMN_WIDTH 32  /* uint32 */
#define EP_LOG_COLUMN_WIDTH_SIZE 4
#define EP_LOG_COLUMN_PAD 36  /* uint32 */
#define EP_LOG_COLUMN_PAD_SIZE 4
#define EP_LOG_COLUMN_OFFSET 40  /* uint64 */
#define EP_LOG_COLUMN_OFFSET_SIZE 8

/* COMMAND */
#define EP_COMMAND_BYTES 88
#define EP_COMMAND_MAGIC 0  /* char[8] */
#define EP_COMMAND_MAGIC_SIZE 8
#define EP_COMMAND_VERSION 8  /* uint32 */
#define EP_COMMAND_VERSION_SIZE 4
#define EP_COMMAND_PAD0 12  /* uint32 */
#define EP_COMMAND_PAD0_SIZE 4
#define EP_COMMAND_SEQ 16  /* uint64 */
#define EP_COMMAND_SEQ_SIZE 8
#define EP_COMMAND_CLIENT_PID 24  /* int64 */
#define EP_COMMAND_CLIENT_PID_SIZE 8
#define EP_COMMAND_EPISODE_ID 32  /* int64 */
#define EP_COMMAND_EPISODE_ID_SIZE 8
#define EP_COMMAND_INDEX 40  /* int32 */
#define EP_COMMAND_INDEX_SIZE 4
#define EP_COMMAND_MAX_COMMANDS 44  /* int32 */
#define EP_COMMAND_MAX_COMMANDS_SIZE 4
#define EP_COMMAND_KIND 48  /* int32 */
#define EP_COMMAND_KIND_SIZE 4
#define EP_COMMAND_FEEDFORWARD 52  /* int32 */
#define EP_COMMAND_FEEDFORWARD_SIZE 4
#define EP_COMMAND_N_SAMPLES 56  /* int32 */
#define EP_COMMAND_N_SAMPLES_SIZE 4
#define EP_COMMAND_N_CONTEXT 60  /* int32 */
#define EP_COMMAND_N_CONTEXT_SIZE 4
#define EP_COMMAND_HAS_POSTURE 64  /* uint8 */
#define EP_COMMAND_HAS_POSTURE_SIZE 1
#define EP_COMMAND_HAS_QD 65  /* uint8 */
#define EP_COMMAND_HAS_QD_SIZE 1
#define EP_COMMAND_HAS_QDD 66  /* uint8 */
#define EP_COMMAND_HAS_QDD_SIZE 1
#define EP_COMMAND_HAS_KI 67  /* uint8 */
#define EP_COMMAND_HAS_KI_SIZE 1
#define EP_COMMAND_PAD 68  /* uint32 */
#define EP_COMMAND_PAD_SIZE 4
#define EP_COMMAND_RATE 72  /* float64 */
#define EP_COMMAND_RATE_SIZE 8
#define EP_COMMAND_WAIT_TIME 80  /* float64 */
#define EP_COMMAND_WAIT_TIME_SIZE 8

/* REPLY */
#define EP_REPLY_BYTES 328
#define EP_REPLY_SEQ 0  /* uint64 */
#define EP_REPLY_SEQ_SIZE 8
#define EP_REPLY_EPISODE_ID 8  /* int64 */
#define EP_REPLY_EPISODE_ID_SIZE 8
#define EP_REPLY_INDEX 16  /* int32 */
#define EP_REPLY_INDEX_SIZE 4
#define EP_REPLY_FLAG 20  /* int32 */
#define EP_REPLY_FLAG_SIZE 4
#define EP_REPLY_REWARD 24  /* float64 */
#define EP_REPLY_REWARD_SIZE 8
#define EP_REPLY_N_STEPS 32  /* int32 */
#define EP_REPLY_N_STEPS_SIZE 4
#define EP_REPLY_EPISODE_DONE 36  /* int32 */
#define EP_REPLY_EPISODE_DONE_SIZE 4
#define EP_REPLY_MACHINE_STATE 40  /* int32 */
#define EP_REPLY_MACHINE_STATE_SIZE 4
#define EP_REPLY_LOG_ROWS 44  /* int32 */
#define EP_REPLY_LOG_ROWS_SIZE 4
#define EP_REPLY_LOG_TRUNCATED 48  /* int32 */
#define EP_REPLY_LOG_TRUNCATED_SIZE 4
#define EP_REPLY_KIND 52  /* int32 */
#define EP_REPLY_KIND_SIZE 4
#define EP_REPLY_EPISODE_RETURN 56  /* float64 */
#define EP_REPLY_EPISODE_RETURN_SIZE 8
#define EP_REPLY_SUCCESS 64  /* int32 */
#define EP_REPLY_SUCCESS_SIZE 4
#define EP_REPLY_PAD 68  /* int32 */
#define EP_REPLY_PAD_SIZE 4
#define EP_REPLY_MESSAGE 72  /* char[256] */
#define EP_REPLY_MESSAGE_SIZE 256

/* BATCH */
#define EP_BATCH_BYTES 40
#define EP_BATCH_N_EPISODES 0  /* uint32 */
#define EP_BATCH_N_EPISODES_SIZE 4
#define EP_BATCH_N_COMMANDS 4  /* uint32 */
#define EP_BATCH_N_COMMANDS_SIZE 4
#define EP_BATCH_N_VALUES 8  /* uint64 */
#define EP_BATCH_N_VALUES_SIZE 8
#define EP_BATCH_KEEP_LOGS 16  /* uint32 */
#define EP_BATCH_KEEP_LOGS_SIZE 4
#define EP_BATCH_PAD 20  /* uint32 */
#define EP_BATCH_PAD_SIZE 4
#define EP_BATCH_BATCH_NUMBER 24  /* int64 */
#define EP_BATCH_BATCH_NUMBER_SIZE 8
#define EP_BATCH_FIRST_EPISODE 32  /* int64 */
#define EP_BATCH_FIRST_EPISODE_SIZE 8

/* BATCH_COMMAND */
#define EP_BATCH_COMMAND_BYTES 64
#define EP_BATCH_COMMAND_EPISODE 0  /* uint32 */
#define EP_BATCH_COMMAND_EPISODE_SIZE 4
#define EP_BATCH_COMMAND_KIND 4  /* int32 */
#define EP_BATCH_COMMAND_KIND_SIZE 4
#define EP_BATCH_COMMAND_EPISODE_ID 8  /* int64 */
#define EP_BATCH_COMMAND_EPISODE_ID_SIZE 8
#define EP_BATCH_COMMAND_INDEX 16  /* int32 */
#define EP_BATCH_COMMAND_INDEX_SIZE 4
#define EP_BATCH_COMMAND_MAX_COMMANDS 20  /* int32 */
#define EP_BATCH_COMMAND_MAX_COMMANDS_SIZE 4
#define EP_BATCH_COMMAND_FEEDFORWARD 24  /* int32 */
#define EP_BATCH_COMMAND_FEEDFORWARD_SIZE 4
#define EP_BATCH_COMMAND_N_SAMPLES 28  /* int32 */
#define EP_BATCH_COMMAND_N_SAMPLES_SIZE 4
#define EP_BATCH_COMMAND_N_CONTEXT 32  /* int32 */
#define EP_BATCH_COMMAND_N_CONTEXT_SIZE 4
#define EP_BATCH_COMMAND_HAS_POSTURE 36  /* uint8 */
#define EP_BATCH_COMMAND_HAS_POSTURE_SIZE 1
#define EP_BATCH_COMMAND_HAS_QD 37  /* uint8 */
#define EP_BATCH_COMMAND_HAS_QD_SIZE 1
#define EP_BATCH_COMMAND_HAS_QDD 38  /* uint8 */
#define EP_BATCH_COMMAND_HAS_QDD_SIZE 1
#define EP_BATCH_COMMAND_HAS_KI 39  /* uint8 */
#define EP_BATCH_COMMAND_HAS_KI_SIZE 1
#define EP_BATCH_COMMAND_RATE 40  /* float64 */
#define EP_BATCH_COMMAND_RATE_SIZE 8
#define EP_BATCH_COMMAND_WAIT_TIME 48  /* float64 */
#define EP_BATCH_COMMAND_WAIT_TIME_SIZE 8
#define EP_BATCH_COMMAND_VALUES 56  /* uint64 */
#define EP_BATCH_COMMAND_VALUES_SIZE 8

/* BATCH_RESULT */
#define EP_BATCH_RESULT_BYTES 288
#define EP_BATCH_RESULT_EPISODE_RETURN 0  /* float64 */
#define EP_BATCH_RESULT_EPISODE_RETURN_SIZE 8
#define EP_BATCH_RESULT_FLAG 8  /* int32 */
#define EP_BATCH_RESULT_FLAG_SIZE 4
#define EP_BATCH_RESULT_SUCCESS 12  /* int32 */
#define EP_BATCH_RESULT_SUCCESS_SIZE 4
#define EP_BATCH_RESULT_N_STEPS 16  /* int64 */
#define EP_BATCH_RESULT_N_STEPS_SIZE 8
#define EP_BATCH_RESULT_N_REPLIES 24  /* uint32 */
#define EP_BATCH_RESULT_N_REPLIES_SIZE 4
#define EP_BATCH_RESULT_FIRST_REPLY 28  /* uint32 */
#define EP_BATCH_RESULT_FIRST_REPLY_SIZE 4
#define EP_BATCH_RESULT_MESSAGE 32  /* char[256] */
#define EP_BATCH_RESULT_MESSAGE_SIZE 256

/* BATCH_REPLY */
#define EP_BATCH_REPLY_BYTES 16
#define EP_BATCH_REPLY_REWARD 0  /* float64 */
#define EP_BATCH_REPLY_REWARD_SIZE 8
#define EP_BATCH_REPLY_FLAG 8  /* int32 */
#define EP_BATCH_REPLY_FLAG_SIZE 4
#define EP_BATCH_REPLY_N_STEPS 12  /* int32 */
#define EP_BATCH_REPLY_N_STEPS_SIZE 4

/* the float64 arrays after COMMAND, back to back;
 * EP_COMMAND_ARRAY_BYTES(sizes) is an initializer of their bytes, in that order */
enum {
    EP_COMMAND_ARRAY_POSTURE,
    EP_COMMAND_ARRAY_KP,
    EP_COMMAND_ARRAY_KD,
    EP_COMMAND_ARRAY_KI,
    EP_COMMAND_ARRAY_CONTEXT,
    EP_COMMAND_ARRAY_Q,
    EP_COMMAND_ARRAY_QD,
    EP_COMMAND_ARRAY_QDD,
    EP_COMMAND_N_ARRAYS
};
#define EP_COMMAND_ARRAY_BYTES(n_dofs, max_context, max_samples) { \
    (uint64_t)8 * (n_dofs), \
    (uint64_t)8 * (n_dofs), \
    (uint64_t)8 * (n_dofs), \
    (uint64_t)8 * (n_dofs), \
    (uint64_t)8 * (max_context), \
    (uint64_t)8 * (max_samples) * (n_dofs), \
    (uint64_t)8 * (max_samples) * (n_dofs), \
    (uint64_t)8 * (max_samples) * (n_dofs) \
}

/* the float64 arrays after REPLY, back to back;
 * EP_REPLY_ARRAY_BYTES(sizes) is an initializer of their bytes, in that order */
enum {
    EP_REPLY_ARRAY_STATE,
    EP_REPLY_ARRAY_POSTURE,
    EP_REPLY_N_ARRAYS
};
#define EP_REPLY_ARRAY_BYTES(n_state, n_dofs) { \
    (uint64_t)8 * (n_state), \
    (uint64_t)8 * (n_dofs) \
}

/* the parts of the batch block after BATCH, each at a multiple of 64 bytes;
 * EP_BATCH_PART_BYTES(sizes) is an initializer of their bytes, in that order */
enum {
    EP_BATCH_PART_COMMANDS,
    EP_BATCH_PART_VALUES,
    EP_BATCH_PART_RESULTS,
    EP_BATCH_PART_REPLIES,
    EP_BATCH_PART_STATES,
    EP_BATCH_N_PARTS
};
#define EP_BATCH_PART_BYTES(max_batch_commands, max_batch_values, max_batch, n_state) { \
    (uint64_t)EP_BATCH_COMMAND_BYTES * (max_batch_commands), \
    (uint64_t)8 * (max_batch_values), \
    (uint64_t)EP_BATCH_RESULT_BYTES * (max_batch), \
    (uint64_t)EP_BATCH_REPLY_BYTES * (max_batch_commands), \
    (uint64_t)8 * (max_batch_commands) * (n_state) \
}

#endif
