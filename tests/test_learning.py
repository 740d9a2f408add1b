"""Every task learns (examples/learning/<task>.py through examples/learn.py): a short run of each
configuration improves its policy by the margin it states (QUICK: iterations and the least
improvement of the policy's return, measured in the configuration's docstring; or, where the
configuration says ``QUICK_MEASURE = "best_return"``, of the best sample's return, for a search
whose policy is not monotone over a short run), and a seed gives the same curve bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from examples.learn import TASKS, configuration, run

pytestmark = pytest.mark.slow  # learners (PoWER, CMA-ES, REPS) over many rollouts


@pytest.mark.parametrize("task", TASKS)
def test_a_short_run_improves_the_policy(task):
    config = configuration(task)
    iterations, margin = config.QUICK
    x = run(task, seed=0, iterations=iterations, threads=2, echo=None)
    start, final = x.curve.rows[0].policy_return, x.curve.final_return
    if getattr(config, "QUICK_MEASURE", "policy_return") == "best_return":
        final = float(x.curve.column("best_return").max())
    assert final >= start + margin, f"{task}: {start} -> {final}, expected at least +{margin}"


def test_a_seed_gives_the_same_curve():
    a = run("reach", seed=3, iterations=2, threads=2, echo=None).curve
    b = run("reach", seed=3, iterations=2, threads=1, echo=None).curve
    for name in ("mean_return", "best_return", "policy_return", "rollouts"):
        np.testing.assert_array_equal(a.column(name), b.column(name))
    assert a.final_return == b.final_return
    c = run("reach", seed=4, iterations=2, threads=2, echo=None).curve
    assert not np.array_equal(a.column("mean_return"), c.column("mean_return"))
