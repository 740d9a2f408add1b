"""examples/power_ball_in_cup.py, the classic experiment: the start (the imitation of the
demonstration) misses, a seed gives the same run bit for bit whatever the threads, and the
script prints its per-seed table and the median line."""
from __future__ import annotations

import numpy as np
import pytest

from examples.power_ball_in_cup import main, run

pytestmark = pytest.mark.slow  # PoWER over ball-in-a-cup rollouts


def test_a_seed_gives_the_same_run_and_the_start_misses():
    a = run(seed=5, iterations=1, threads=2, echo=None)
    b = run(seed=5, iterations=1, threads=1, echo=None)
    assert not a.rows[0].success_rate and 0 < a.rows[0].mean_return < 2.3  # the ball comes down beside the cup
    assert [r.rollouts for r in a.rows] == [1, 11]
    for name in ("mean_return", "best_return", "success_rate"):
        np.testing.assert_array_equal(a.column(name), b.column(name))
    assert a.successes == b.successes


def test_the_script_prints_a_table(tmp_path, capsys):
    assert main(["--seeds", "1", "--iterations", "1", "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "median over 1 seeds: first catch at rollout" in out and "Kober & Peters" in out
    assert (tmp_path / "power_ball_in_cup-seed1.csv").is_file()
