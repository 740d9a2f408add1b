"""The Gymnasium face (episodic.learning.gym_env.BlackBoxEnv): one step = one episode, in-process and over
a served bridge channel, checked by Gymnasium's own env_checker (its determinism checks
included) against real runners.

Without gymnasium (the extra episodic[gym]) these tests skip with the reason, except in CI
(CI=true), where they fail."""
from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

if importlib.util.find_spec("gymnasium") is None:
    MESSAGE = "gymnasium is not installed here: pip install 'episodic[gym]'"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {MESSAGE}", pytrace=False)
    pytest.skip(MESSAGE, allow_module_level=True)

from gymnasium.utils.env_checker import check_env  # noqa: E402

from episodic.bridge import Client  # noqa: E402
from episodic.interface.vocabulary import MachineState  # noqa: E402
from episodic.learning.gym_env import BlackBoxEnv, EnvError  # noqa: E402
from episodic.learning.primitives import DMP, DMPPolicy, promp_basis  # noqa: E402
from episodic.runtime.runner import Runner  # noqa: E402
from episodic.task import add_target, place_target  # noqa: E402
from episodic.tasks import make_task  # noqa: E402
from episodic.tasks.reach import Reach  # noqa: E402
from tests.helpers import Served, channel_name, shm_leftovers  # noqa: E402

# contexts drawn by reset: reach's target box (m), ball_in_cup's ball offset (m)
CONTEXTS = {"reach": ([-0.2, 0.3, 1.3], [0.2, 0.6, 1.7]), "ball_in_cup": ([-0.05, -0.05], [0.05, 0.05])}


def checked(env: BlackBoxEnv) -> None:
    """Gymnasium's env_checker passes, and warns about nothing (no render modes to try)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize("task", ["reach", "ball_in_cup"])
@pytest.mark.slow
def test_check_env_passes_in_process(task):
    with Runner(make_task(task)) as runner:
        env = BlackBoxEnv(runner, contexts=CONTEXTS[task])
        checked(env)
        assert len(runner.episodes) >= 4  # every step ran an episode on the runner
        assert env.observation_space.shape == (len(CONTEXTS[task][0]),)
        assert env.action_space.shape == (3 * 7,)


def test_check_env_fails_when_episodes_depend_on_history():
    """The determinism check bites: with the runner's exact start off (episodic.runtime.machine), the same
    seed and action after other episodes give another reward."""
    with Runner(make_task("reach")) as runner:
        runner.machine.exact_start = False
        with pytest.raises(AssertionError, match="Deterministic step rewards"):
            check_env(BlackBoxEnv(runner, contexts=CONTEXTS["reach"]), skip_render_check=True)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["reach", "ball_in_cup"])
def test_check_env_passes_over_the_bridge_and_matches_in_process(task):
    before = shm_leftovers()
    with Served(channel_name(), None, task=task) as served:
        env = BlackBoxEnv(lambda: Client(served.channel, timeout=60), make_task(task), contexts=CONTEXTS[task])
        try:
            checked(env)
            env.action_space.seed(5)
            actions = [env.action_space.sample() for _ in range(3)]
            bridged = [(env.reset(seed=11)[0], env.step(a)) for a in actions]
        finally:
            env.close()
            env.close()  # closing twice is allowed
        assert served.stop() == 0
    assert shm_leftovers() == before
    with Runner(make_task(task)) as runner:
        local = BlackBoxEnv(runner, contexts=CONTEXTS[task])
        here = [(local.reset(seed=11)[0], local.step(a)) for a in actions]
    for (obs_b, (_, reward_b, _, _, info_b)), (obs_h, (_, reward_h, _, _, info_h)) in zip(bridged, here, strict=True):
        assert obs_b.tobytes() == obs_h.tobytes()
        assert np.float64(reward_b).tobytes() == np.float64(reward_h).tobytes() and info_b == info_h


def test_two_envs_with_the_same_seeds_and_actions_give_the_same_rewards():
    """Bit for bit, though the second runner ran other episodes first."""
    results = []
    for history in (0, 4):
        with Runner(make_task("reach"), seed=0) as runner:
            env = BlackBoxEnv(runner, contexts=CONTEXTS["reach"], n_via=2, duration=1.0, hold=0.2)
            env.reset(seed=99)
            env.action_space.seed(99)
            for _ in range(history):
                env.step(env.action_space.sample())
            env.action_space.seed(1)
            out = []
            for seed in (1, 2, 3):
                obs, _ = env.reset(seed=seed)
                out.append((obs, *env.step(env.action_space.sample())[1:]))
            results.append(out)
    first, second = results
    for a, b in zip(first, second, strict=True):
        assert a[0].tobytes() == b[0].tobytes()
        assert np.float64(a[1]).tobytes() == np.float64(b[1]).tobytes()
        assert a[2:] == b[2:]
    assert len({a[0].tobytes() for a in first}) == 3  # each seed drew its own context
    assert len({a[1] for a in first}) == 3


@pytest.mark.slow  # a learner's iteration loop
def test_a_learner_loop_of_random_search_runs():
    """A few iterations of a simple random search around the best motion so far, as a
    policy-search learner would drive the environment."""
    with Runner(make_task("reach")) as runner:
        env = BlackBoxEnv(runner, n_via=2, duration=1.0, hold=0.3, penalty=-10.0)
        obs, info = env.reset(seed=0)
        np.testing.assert_array_equal(obs, runner.task.default_context())  # no distribution: the default
        rng = np.random.default_rng(0)
        best = np.zeros(env.action_space.shape)
        best_return = env.step(best)[1]
        returns = [best_return]
        for _ in range(6):
            action = np.clip(best + rng.normal(0, 0.3, best.shape), -1, 1)
            _, episode_return, terminated, truncated, info = env.step(action)
            assert terminated and not truncated and info["flag"] == "OK" and info["steps"] == 650
            assert np.isfinite(episode_return)
            returns.append(episode_return)
            if episode_return > best_return:
                best, best_return = action, episode_return
        assert [ep.episode_return for ep in runner.episodes] == returns
        assert best_return == max(returns)


@pytest.mark.slow  # an example's learner
def test_the_example_learner_improves_on_holding_still():
    from examples.gym_learner import learn

    with Runner(make_task("reach")) as runner:
        env = BlackBoxEnv(runner, n_via=2, duration=1.5, hold=0.5, penalty=-10.0)
        best, best_return = learn(env, iterations=3, population=8, echo=None)
        held = runner.episodes[0].episode_return  # the zero action: the start posture held
        assert best_return > held + 0.05 and np.any(best != 0)


def test_the_motion_passes_the_via_points_at_their_times():
    with Runner(make_task("reach")) as runner:
        env = BlackBoxEnv(runner, n_via=2, duration=1.0, hold=0.1, scale=0.2, joints=["j2", 3])
        env.reset(seed=0)
        action = np.array([0.5, -1.0, -0.25, 2.0])  # via-point 1 (j2, j4), via-point 2; 2.0 is clipped to 1
        _, reward, _, _, info = env.step(action)
        steps = runner.episodes[-1].steps()
    home = runner.robot.home
    motion = steps["machine_state"] == MachineState.DO_MOTION
    q_d = steps["q_d"][motion]
    assert len(q_d) == info["steps"] == 500 + 50
    np.testing.assert_allclose(q_d[249, [1, 3]], home[[1, 3]] + 0.2 * np.array([0.5, -1.0]), atol=1e-12)
    np.testing.assert_allclose(q_d[499, [1, 3]], home[[1, 3]] + 0.2 * np.array([-0.25, 1.0]), atol=1e-12)
    np.testing.assert_array_equal(q_d[500:], np.repeat(q_d[499:500], 50, axis=0))  # the hold
    others = [0, 2, 4, 5, 6]
    np.testing.assert_array_equal(q_d[:, others], np.repeat(home[None, others], len(q_d), axis=0))
    qd_d = steps["qd_d"][motion]
    assert np.abs(qd_d[0]).max() < 0.02 and np.abs(qd_d[499]).max() < 1e-12  # from rest (one step in), to rest
    assert reward == runner.episodes[-1].episode_return


def test_an_aborted_episode_gets_the_penalty_and_a_refused_start_raises():
    with Runner(make_task("reach")) as runner:
        env = BlackBoxEnv(runner, n_via=1, duration=0.2, scale=1.5, penalty=-5.0)
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(np.ones(env.action_space.shape))  # 1.5 rad in 0.2 s: too fast
        assert info["flag"] == "SAFETY_ABORT" and terminated and not info["success"] and info["message"]
        assert reward == runner.episodes[-1].episode_return - 5.0
    with Runner(make_task("ball_in_cup")) as runner:
        env = BlackBoxEnv(runner)
        env.reset(seed=0, options={"context": [0.5, 0.0]})  # beyond the 0.4 m string
        with pytest.raises(EnvError, match="INVALID_PAYLOAD"):
            env.step(env.action_space.sample())


@dataclass
class FixedReach(Reach):
    """Reach without a context: the target is always the default one."""

    name: ClassVar[str] = "fixed_reach"
    context_sizes: ClassVar[tuple[int, ...]] = (0,)

    def add_scene(self, spec, robot) -> None:
        add_target(spec, self.target, 0.02, [0.9, 0.2, 0.2, 0.5])

    @property
    def target(self) -> np.ndarray:
        return np.array([self.target_x, self.target_y, self.target_z])

    def default_context(self) -> np.ndarray:
        return np.zeros(0)

    def initialize_episode(self, model, data, context, rng) -> None:
        place_target(data, self.episode.ids, self.target)


def test_a_task_without_context_gives_an_empty_observation():
    with Runner(FixedReach()) as runner:
        env = BlackBoxEnv(runner, n_via=2, duration=1.0, hold=0.1)
        checked(env)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (0,) and env.observation_space.shape == (0,)


def test_mistakes_are_named():
    with Runner(make_task("reach")) as runner:
        with pytest.raises(ValueError, match="state columns"):
            BlackBoxEnv(runner, make_task("ball_in_cup"))
        with pytest.raises(ValueError, match="3 finite values"):
            BlackBoxEnv(runner, contexts=([0, 0], [1, 1]))
        with pytest.raises(ValueError, match="not one of"):
            BlackBoxEnv(runner, joints=["j9"])
        env = BlackBoxEnv(runner)
        with pytest.raises(ValueError, match="3 values"):
            env.reset(options={"context": [1.0]})
    with pytest.raises(TypeError, match="Sender"):
        BlackBoxEnv(lambda: object())
    with Runner(make_task("pole_balancing")) as runner:  # its passive j7 is no part of the action
        assert BlackBoxEnv(runner).action_space.shape == (3 * 6,)


def checked_in_parameters(env: BlackBoxEnv) -> None:
    """``checked``, but a primitive's action space is its parameters in rad and s, as fancy_gym's
    ProMP and DMP spaces are, not normalised to [-1, 1]: Gymnasium's advice about that is the one
    warning allowed."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*symmetric and normalized space")
        check_env(env, skip_render_check=True)


def test_a_dmp_action_is_its_weights_goal_and_duration():
    """The segment sent is DMPPolicy's rollout of the action's weights towards its goal, over the
    action's duration, then held; Gymnasium's checker passes."""
    with Runner(make_task("reach")) as runner:
        env = BlackBoxEnv(runner, primitive="dmp", n_weights=4, joints=["j2", "j4"], durations=(0.3, 1.0),
                          hold=0.05, scale=0.4, contexts=CONTEXTS["reach"])
        assert env.action_layout == {"weights": slice(0, 8), "goal": slice(8, 10), "duration": slice(10, 11)}
        np.testing.assert_array_equal(env.action_space.high, [0.4] * 10 + [1.0])
        checked_in_parameters(env)
        env.reset(seed=0)
        action = np.array([0.05, -0.05, 0.02, 0.1, 0.0, 0.05, 0.05, -0.02, 0.25, 0.9, 0.8])  # 0.9: clipped to 0.4
        _, reward, _, _, info = env.step(action)
        steps = runner.episodes[-1].steps()
    home = runner.robot.home
    goal = home[[1, 3]] + [0.25, 0.4]
    policy = DMPPolicy(DMP(0.8, 4), home, goal, (1, 3), runner.robot.control_dt)
    expected = policy.trajectory(action[:8])
    motion = steps["q_d"][steps["machine_state"] == MachineState.DO_MOTION]
    assert info["flag"] == "OK" and info["steps"] == len(motion) == 400 + 25
    np.testing.assert_array_equal(motion[:400], expected.q[1:])
    np.testing.assert_array_equal(motion[400:], np.repeat(expected.q[-1:], 25, axis=0))
    assert np.abs(expected.q[-1, [1, 3]] - goal).max() < 0.05  # towards the goal: there within 5 % of the way
    assert reward == runner.episodes[-1].episode_return


def test_a_promp_action_starts_at_rest_and_follows_its_weights():
    with Runner(make_task("reach")) as runner:
        env = BlackBoxEnv(runner, primitive="promp", n_weights=3, joints=[0, 5], duration=0.5, hold=0.0,
                          contexts=CONTEXTS["reach"])
        assert env.action_layout == {"weights": slice(0, 6)} and env.action_space.shape == (6,)
        checked_in_parameters(env)
        env.reset(seed=0)
        weights = np.array([[0.2, -0.1], [0.0, 0.3], [-0.25, 0.1]])  # (n_weights, n_joints)
        q, qd, qdd = env.trajectory(weights.ravel(), runner.robot.home)
        env.step(weights.ravel())
        sent = runner.episodes[-1].steps()["q_d"][-250:]
    home = runner.robot.home
    np.testing.assert_array_equal(sent, q)
    assert q.shape == (250, 7) and np.all(q[:, [1, 2, 3, 4, 6]] == home[[1, 2, 3, 4, 6]])
    end = promp_basis(np.array([1.0]), 3)[0] @ weights  # s(1) = 1: the ProMP's own end
    np.testing.assert_allclose(q[-1, [0, 5]], home[[0, 5]] + end[0], atol=1e-12)
    assert np.abs(q[0] - home).max() < 1e-5 and np.abs(qd[0]).max() < 0.01  # from rest, one step in
    dt = runner.robot.control_dt  # qd and qdd are the derivatives of q
    np.testing.assert_allclose(np.gradient(q[:, [0, 5]], dt, axis=0)[1:-1], qd[1:-1, [0, 5]], atol=2e-3)
    np.testing.assert_allclose(np.gradient(qd[:, [0, 5]], dt, axis=0)[1:-1], qdd[1:-1, [0, 5]], atol=2e-2)


def test_via_points_with_a_learned_duration_and_named_parameters():
    with Runner(make_task("reach")) as runner:
        env = BlackBoxEnv(runner, n_via=2, durations=(0.2, 1.0), hold=0.0, joints=["j1"])
        action = np.array([0.2, -0.2, 0.4])
        parts = env.parameters(action)
        np.testing.assert_allclose(parts["via_points"], [[0.06], [-0.06]], rtol=1e-15)
        assert parts["duration"] == 0.4
        env.reset(seed=0)
        info = env.step(action)[4]
        assert info["flag"] == "OK" and info["steps"] == 200
        with pytest.raises(ValueError, match="3 values"):
            env.parameters(action[:2])
        with pytest.raises(ValueError, match="primitive must be one of"):
            BlackBoxEnv(runner, primitive="spline")
        with pytest.raises(ValueError, match="durations must be"):
            BlackBoxEnv(runner, durations=(1.0, 0.5))
        with pytest.raises(ValueError, match="n_weights"):
            BlackBoxEnv(runner, primitive="dmp", n_weights=1)


def test_a_task_name_makes_a_runner_that_keeps_nothing():
    """BlackBoxEnv("reach"): an in-process runner of its own, holding no episode a learner ran."""
    env = BlackBoxEnv("reach", n_via=1, duration=0.3, hold=0.0, scale=0.05)
    runner = env.sender
    assert isinstance(runner, Runner) and runner.task.name == "reach" and runner.robot.name == "wam"
    env.reset(seed=0)
    rewards = [env.step(np.full(7, 0.5))[1] for _ in range(2)]
    assert rewards[0] == rewards[1] and runner.episodes_finished == 2 and len(runner.episodes) == 0
    env.close()
    with Runner(make_task("reach")) as kept:  # the same episode on a runner passed in
        env = BlackBoxEnv(kept, n_via=1, duration=0.3, hold=0.0, scale=0.05)
        env.reset(seed=0)
        assert env.step(np.full(7, 0.5))[1] == rewards[0] and len(kept.episodes) == 1
