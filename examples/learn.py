"""Every task learns: one learner configuration per task (examples/learning/<task>.py), run over
seeds, each iteration's samples evaluated as one batch in this process; prints one line per
iteration, a results table (docs/learning.md's), and saves each run's learning curve as CSV (and, with
``--plot``, one PNG per task: mean return of the samples and of the policy against rollouts).

    python examples/learn.py                       # every task, seed 0
    python examples/learn.py reach beer_pong --seeds 0 1 2 --threads 2 --out runs/learning --plot

A task names its configuration module in its ``Task.reference.learner`` (the tasks are found in
the task registry); the module holds ``problem(robot) -> episodic.learning.policy_search.Problem``
(the task, the start parameters and how parameters become an episode), ``learner(problem, seed) ->
Learner`` (PoWER, REPS or CMA-ES from episodic.learning.policy_search) and ``ITERATIONS``; its
docstring says why it looks as it does and what it measured.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `examples` importable when run as a script

from episodic.interface.robot import load_robot  # noqa: E402
from episodic.learning.policy_search import LearningCurve, learn  # noqa: E402
from episodic.tasks import registry  # noqa: E402

# the tasks of the registry (built-in and installed) whose Task.reference names a learner configuration
TASKS = tuple(name for name, cls in registry().items() if cls.reference is not None and cls.reference.learner)


def configuration(task: str):
    """The learner configuration module task ``task`` names (its Task.reference.learner; the
    built-in tasks': examples/learning/<task>.py)."""
    reference = registry()[task].reference
    if reference is None or not reference.learner:
        raise ValueError(f"task '{task}' names no learner configuration (Task.reference.learner)")
    return importlib.import_module(reference.learner)


@dataclass
class Run:
    task: str
    seed: int
    representation: str
    n_params: int
    learner: str
    curve: LearningCurve


def run(task: str, seed: int = 0, iterations: int | None = None, threads: int = 2, echo=print) -> Run:
    """One learning run of ``task``'s configuration."""
    config = configuration(task)
    problem = config.problem(load_robot("wam"))
    learner = config.learner(problem, seed)
    n = config.ITERATIONS if iterations is None else iterations
    curve = learn(learner, problem.rollouts(threads=threads), n, echo=echo)
    return Run(task, seed, problem.representation, problem.theta0.size, describe(learner), curve)


def describe(learner) -> str:
    """The learner in the table's words: "PoWER, 10 per iteration", "REPS, 8 per iteration,
    epsilon 0.5", "CMA-ES, 13 per iteration"."""
    name = {"Power": "PoWER", "Reps": "REPS", "Cmaes": "CMA-ES"}.get(type(learner).__name__, type(learner).__name__)
    text = f"{name}, {learner.n_samples} per iteration"
    return f"{text}, epsilon {learner.epsilon:g}" if name == "REPS" else text


def table_row(runs: list[Run]) -> str:
    """A markdown row of the learning table in docs/learning.md: medians over the runs (seeds) of one task.
    Every cell but the wall time depends only on the configuration, the seeds and the software
    versions (tests/test_readme.py checks one row so)."""
    r = runs[0]
    start = np.median([x.curve.rows[0].policy_return for x in runs])
    final = np.median([x.curve.final_return for x in runs])
    rollouts = int(np.median([x.curve.rows[-1].rollouts for x in runs]))
    successes = sum(x.curve.final_success for x in runs)
    last = np.mean([x.curve.rows[-1].success_rate for x in runs])
    seconds = np.median([x.curve.rows[-1].seconds for x in runs])
    seeds = ",".join(str(x.seed) for x in runs)
    return (f"| {r.task} | {r.representation} ({r.n_params}) | {r.learner} | {rollouts} | {start:.6g} -> {final:.6g} "
            f"| {successes}/{len(runs)} final policies, {last:.0%} of the last samples | {seconds:.0f} s | {seeds} |")


TABLE_HEAD = ("| task | representation (parameters) | learner | rollouts | return: start -> final (median) "
              "| success | wall time (median) | seeds |\n|---|---|---|---|---|---|---|---|")


def plot(task: str, runs: list[Run], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for x in runs:
        line, = ax.plot(x.curve.column("rollouts"), x.curve.column("mean_return"), alpha=0.6,
                        label=f"seed {x.seed}: samples")
        ax.plot(x.curve.column("rollouts"), x.curve.column("policy_return"), color=line.get_color(), ls="--",
                label=f"seed {x.seed}: policy")
    ax.set(xlabel="rollouts", ylabel="return", title=f"{task}: {runs[0].learner} on {runs[0].representation}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Learn every task (or the ones named) and print the results table.")
    parser.add_argument("tasks", nargs="*", default=list(TASKS), help=f"tasks (default all: {' '.join(TASKS)})")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="learner seeds (default 0)")
    parser.add_argument("--iterations", type=int, default=None, help="override each configuration's ITERATIONS")
    parser.add_argument("--threads", type=int, default=2, help="threads evaluating each batch (default 2)")
    parser.add_argument("--out", default="runs/learning", help="folder of the curves (CSV) and plots")
    parser.add_argument("--plot", action="store_true", help="also plot each task's curves (needs episodic[plot])")
    parser.add_argument("--quiet", action="store_true", help="no line per iteration")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.tasks) - set(TASKS))
    if unknown:
        parser.error(f"unknown tasks {unknown}; choose from {list(TASKS)}")
    out = Path(args.out)
    rows = []
    for task in args.tasks:
        runs = []
        for seed in args.seeds:
            print(f"== {task}, seed {seed}")
            x = run(task, seed, args.iterations, args.threads, echo=None if args.quiet else print)
            x.curve.save(out / f"{task}-seed{seed}.csv")
            print(f"final policy: return {x.curve.final_return:.4g}, "
                  f"{'success' if x.curve.final_success else 'no success'}")
            runs.append(x)
        if args.plot:
            plot(task, runs, out / f"{task}.png")
        rows.append(table_row(runs))
    print(TABLE_HEAD)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
