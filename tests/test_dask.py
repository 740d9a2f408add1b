"""A population evaluated on Dask worker processes (episodic.tools.batch's executor argument): the
results gathered from the workers are bit-identical to evaluating in this process, each worker
keeps its runners for the next chunk, and a batch evaluated there into a log replays."""
from __future__ import annotations

import logging

import pytest

from episodic.tasks.ball_in_cup_swing import demo_swings, swing_commands
from episodic.tools.batch import evaluate
from episodic.tools.replay import replay
from tests.test_batch import ROBOT, assert_identical, reach_episode, refused_episode
from tests.test_evaluate_cli import expected_rows, run_cli, table

distributed = pytest.importorskip("distributed", reason="Dask is not installed: pip install 'episodic[dask]'")
pytestmark = pytest.mark.slow  # Dask worker processes


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each, with this test module."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as c:
        yield c


def test_results_gathered_from_worker_processes_are_bit_identical(client):
    reach = [reach_episode(k) for k in range(4)] + [refused_episode(4)]
    swings = [swing_commands(ROBOT, swing, episode_id=k + 1, wait=0.2) for k, (_, swing) in enumerate(demo_swings(2))]
    executor = client.get_executor()
    local = evaluate(reach, "reach", keep_steps=True)
    for threads in (1, 2):  # threads of each worker per chunk
        remote = evaluate(reach, "reach", executor=executor, chunk_size=2, threads=threads, keep_steps=True)
        assert len(remote) == len(local)
        for a, b in zip(remote, local):
            assert_identical(a, b)
    remote = evaluate(swings, ("ball_in_cup", {}), executor=executor, chunk_size=1, keep_steps=True)
    for a, b in zip(remote, evaluate(swings, "ball_in_cup", keep_steps=True), strict=True):
        assert_identical(a, b)

    def idle_runners() -> int:  # sent by value: it imports in the worker
        from episodic.tools.batch import RUNNERS

        return len(RUNNERS)

    idle = client.run(idle_runners)  # the runners each worker built, kept for the next chunk
    assert len(idle) == 2 and all(n >= 1 for n in idle.values()), idle


def test_a_batch_evaluated_on_workers_into_a_log_replays(client, tmp_path):
    path = tmp_path / "dask.h5"
    episodes = [reach_episode(k) for k in range(4)]
    results = evaluate(episodes, "reach", seed=2, executor=client.get_executor(), chunk_size=2, log=path)
    assert len(results) == 4 and all(r.flag.name == "OK" for r in results)
    report = replay(path)
    assert report.identical and len(report.episodes) == 4, report.differences


def test_episodic_evaluate_on_the_cluster_of_a_scheduler(client, tmp_path):
    path = tmp_path / "batch.h5"
    results = evaluate([reach_episode(k) for k in range(3)], "reach", seed=1, log=path)
    done = run_cli("evaluate", str(path), "--scheduler", client.scheduler.address, "--chunk-size", "1")
    assert done.returncode == 0, done.stderr
    assert f"on the Dask cluster at {client.scheduler.address}" in done.stdout
    assert table(done.stdout) == expected_rows(results)
