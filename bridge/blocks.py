"""numpy views of a channel's blocks, shared by both ends."""
from __future__ import annotations

import struct

import numpy as np

from episodic.bridge.layout import BATCH, COMMAND, HEADER, REPLY, Layout, field_at

_U64 = struct.Struct("<Q")
_TAKEN_SEQ = field_at(HEADER, "taken_seq")[0]  # byte offset of the header's taken_seq
_RELEASED = np.empty(0)  # what a released Blocks holds in place of its views of the mapping


class Blocks:
    """Views into ``buf`` laid out by ``layout``: header, command (+ arrays), reply (+ state and
    posture), log, batch (+ its tables: commands, values, results, replies, states)."""

    def __init__(self, buf, layout: Layout):
        self.buf = buf
        self.layout = layout
        s = layout.sizes
        self.header = np.ndarray((), HEADER, buffer=buf)
        self.command = np.ndarray((), COMMAND, buffer=buf, offset=layout.command_offset)
        self.command_arrays = {
            name: np.ndarray(shape, "<f8", buffer=buf, offset=layout.command_offset + off)
            for name, (off, shape) in layout.command_arrays().items()
        }
        self.reply = np.ndarray((), REPLY, buffer=buf, offset=layout.reply_offset)
        self.reply_arrays = {
            name: np.ndarray(shape, "<f8", buffer=buf, offset=layout.reply_offset + off)
            for name, (off, shape) in layout.reply_arrays().items()
        }
        self.log = {
            name: np.ndarray((s.max_log_steps, width), "<f8", buffer=buf, offset=layout.log_offset + off)
            for name, width, off in layout.log_column_offsets()
        }
        self.batch = np.ndarray((), BATCH, buffer=buf, offset=layout.batch_offset)
        self.batch_tables = {
            name: np.ndarray(shape, dtype, buffer=buf, offset=layout.batch_offset + off)
            for name, (off, dtype, shape) in layout.batch_tables().items()
        }

    def mark_taken(self, seq: int) -> None:
        """Write ``seq`` into the header's taken_seq (one pack: cheaper than the structured field's setter)."""
        _U64.pack_into(self.buf, _TAKEN_SEQ, seq)

    def release(self) -> None:
        """Drop every view so the mapping can be closed."""
        self.header = self.command = self.reply = self.batch = _RELEASED
        self.buf = None
        self.command_arrays = self.reply_arrays = self.batch_tables = {}
        self.log = {}
