"""A black-box learner through the Gymnasium face (episodic.learning.gym_env.BlackBoxEnv; needs the
extra episodic[gym]): a small cross-entropy search over the via-points of a reach motion, one
``env.step`` per episode.

Each iteration samples ``--population`` actions around the mean, runs each as one episode for
the same target (the task's default context), and moves the mean and the spread to the best
quarter. Blocking mode makes every episode start from the exact start state, so a sample's
return does not depend on the order the population runs in.

    python examples/gym_learner.py [--iterations 8] [--population 12] [--channel NAME]

runs in-process, or against ``episodic serve --task reach --channel NAME`` with ``--channel``.
"""
from __future__ import annotations

import argparse

import numpy as np

from episodic.learning.gym_env import BlackBoxEnv
from episodic.tasks import make_task


def learn(env: BlackBoxEnv, iterations: int, population: int, seed: int = 0, echo=print) -> tuple[np.ndarray, float]:
    """Cross-entropy search from the zero action (the start posture held); the best action
    found and its return. ``echo``: where the progress lines go (None: nowhere)."""
    echo = echo or (lambda line: None)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    mean, spread = np.zeros(env.action_space.shape), np.full(env.action_space.shape, 0.5)
    best, best_return = mean, env.step(mean)[1]
    echo(f"{'iteration':>9} {'mean return':>12} {'best':>9}")
    for iteration in range(1, iterations + 1):
        actions = np.clip(mean + spread * rng.standard_normal((population, mean.size)), -1.0, 1.0)
        returns = np.array([env.step(a)[1] for a in actions])
        elite = actions[np.argsort(returns)[-max(population // 4, 2):]]
        mean, spread = elite.mean(axis=0), elite.std(axis=0) + 0.02
        if returns.max() > best_return:
            best, best_return = actions[np.argmax(returns)], float(returns.max())
        echo(f"{iteration:>9} {returns.mean():>12.4f} {best_return:>9.4f}")
    return best, best_return


def main() -> None:
    parser = argparse.ArgumentParser(description="Cross-entropy search on reach through the Gymnasium face.")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--population", type=int, default=12)
    parser.add_argument("--channel", default=None, help="a served reach runner's channel (default: in-process)")
    args = parser.parse_args()
    if args.channel is None:
        from episodic.runtime.runner import Runner

        sender = lambda: Runner(make_task("reach"))  # noqa: E731
    else:
        from episodic.bridge import Client

        sender = lambda: Client(args.channel)  # noqa: E731
    env = BlackBoxEnv(sender, make_task("reach"), n_via=2, duration=1.5, hold=0.5, penalty=-10.0)
    try:
        _, best_return = learn(env, args.iterations, args.population)
    finally:
        env.close()
    print(f"best return {best_return:.4f}")


if __name__ == "__main__":
    main()
