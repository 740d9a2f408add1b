"""How robust a scripted motion is: its success rate over copies perturbed at several noise
levels, each level evaluated as one batch (episodic.tools.batch) on the machine's cores (the
examples' ``--noise N`` tables).

A reference script passes its task, a function ``perturbed(rng, level)`` returning one
perturbed episode (a list of commands) for a noise ``level`` in the reference's own unit, and
the levels; :func:`noise_table` returns one :class:`NoiseRow` per level and
:func:`print_noise_table` prints them:

    python examples/beer_pong_reference.py --noise 30
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from episodic.tools.batch import TaskSpec, evaluate


@dataclass(frozen=True)
class NoiseRow:
    """One noise level: ``level`` in the reference's unit, ``n`` perturbed copies, how many
    succeeded, and the median and worst return over them."""

    level: float
    n: int
    successes: int
    median_return: float
    worst_return: float

    @property
    def rate(self) -> float:
        return self.successes / self.n


def noise_table(task: TaskSpec, perturbed: Callable[[np.random.Generator, float], list],
                levels: Sequence[float], n: int = 30, seed: int = 0, robot: str = "wam",
                threads: int | None = None) -> list[NoiseRow]:
    """For each noise level, ``n`` copies ``perturbed(rng, level)`` (rng seeded with ``seed`` and
    the level's position, so a table is reproducible) evaluated in one batch on ``threads``
    threads (default: every core)."""
    threads = threads or os.cpu_count() or 1
    rows = []
    for k, level in enumerate(levels):
        rng = np.random.default_rng([seed, k])
        results = evaluate([perturbed(rng, level) for _ in range(n)], task, robot, threads=threads)
        returns = np.array([r.episode_return for r in results])
        rows.append(NoiseRow(float(level), n, sum(r.success for r in results), float(np.median(returns)),
                             float(returns.min())))
    return rows


def print_noise_table(rows: Sequence[NoiseRow], unit: str) -> None:
    """The table as text: one line per level."""
    print(f"{'noise (' + unit + ')':>14} {'success':>9} {'median return':>14} {'worst return':>13}")
    for row in rows:
        print(f"{row.level:14.4g} {row.successes:4d}/{row.n:<4d} {row.median_return:14.4f} {row.worst_return:13.4f}")
