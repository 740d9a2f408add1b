"""One episode as it runs: everything it produced, kept in memory (numpy) until it ends and goes
to the log (episodic.logs.writer)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from episodic.logs.timing import Mark, Timing

SEGMENT_FIELDS = {"index": np.int32, "kind": np.int8, "flag": np.int8, "reward": np.float64,
                  "n_steps": np.int32}


@dataclass
class EpisodeBuffer:
    """Everything one episode produced, kept in memory until it ends."""

    number: int
    episode_id: int
    initial_state: np.ndarray
    rng_seed: tuple[int, int]
    state_columns: tuple[str, ...]
    blocks: list[dict[str, np.ndarray]] = field(default_factory=list)  # held: not yet handed to the log
    streamed_blocks: int = 0  # blocks handed to the log while the episode ran (RunLog.write_steps), before ``blocks``
    streamed_steps: int = 0   # their steps
    # a row per segment: SEGMENT_FIELDS' numbers and the task's "state" (n_state,) after it
    segments: list[dict[str, Any]] = field(default_factory=list)
    commands: list[Any] = field(default_factory=list)  # as received: command dataclasses, or whatever arrived
    flag: int = 0
    flag_name: str = "OK"
    message: str = ""
    ticks: tuple[Mark, Mark] | None = None  # the pacer's tick record at the start and the end (non-blocking mode)
    success: bool = False
    early_end: float = 0.0  # the charge for ending early, <= 0 (EpisodeMachine._early_end_charge)
    wall_time: float = 0.0
    batch: int = -1           # the batch's number in the run (episodic.tools.batch), -1 when sent one by one
    batch_position: int = -1  # the episode's position in that batch
    # "ran": its go-to-start ran (simulated or on the robot) and is logged as it happened; "skipped":
    # not simulated, the exact start followed at once (episodic.runtime.start), no GOTO_START steps
    goto_start: str = "ran"

    @property
    def n_steps(self) -> int:
        return self.streamed_steps + self.held_steps

    @property
    def held_steps(self) -> int:
        """Steps of the blocks held in memory (``blocks``)."""
        return sum(len(b["time"]) for b in self.blocks)

    @property
    def held_bytes(self) -> int:
        """Bytes of the per-step blocks held in memory."""
        return sum(v.nbytes for b in self.blocks for v in b.values())

    @property
    def timing(self) -> dict[str, float | int]:
        """The episode's tick statistics as log attributes (episodic.logs.timing.Timing), none in
        blocking mode. Worked out when asked (by the log's write), not on the tick that ends
        the episode."""
        return {} if self.ticks is None else Timing.between(*self.ticks).as_attrs()

    @property
    def episode_return(self) -> float:
        """The rewards of the episode's segments and its early end's charge."""
        return float(sum(s["reward"] for s in self.segments)) + self.early_end

    def column(self, name: str) -> np.ndarray:
        """One per-step column over the blocks held (the whole episode unless some were streamed)."""
        return np.concatenate([b[name] for b in self.blocks])

    def steps(self) -> dict[str, np.ndarray]:
        """Per-step columns concatenated over the blocks held (see ``column``)."""
        return {k: self.column(k) for k in self.blocks[0]} if self.blocks else {}

    def segment_table(self) -> dict[str, np.ndarray]:
        out = {k: np.array([s[k] for s in self.segments], dtype=t) for k, t in SEGMENT_FIELDS.items()}
        n_state = len(self.state_columns)
        out["state"] = np.array([s["state"] for s in self.segments], dtype=float).reshape(-1, n_state)
        return out

