"""A task from another package: examples/task_package (episodic-strike) pip-installed into a
directory of this test (on sys.path here and on PYTHONPATH for the processes it starts), found by
its entry point with no edit of episodic or its tests (the generic suites run it), served to a
learner over the bridge, replayed bit-identically, rendered, plotted, exported and evaluated on
threads, on a Dask cluster and on a process pool; its log names the package; without the package,
a replay says which to install; its feedback law in C, built on install, runs in the compiled loop;
and the same task by its ``module:Class`` spec without installing it."""
from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.interface.commands import TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes, read_metadata
from episodic.tasks import TASKS, logged_task, make_task, registry, task_class
from episodic.tools.batch import evaluate
from tests.helpers import Served, channel_name

pytestmark = pytest.mark.slow  # pip, `episodic serve`, CLI and Dask worker processes

PACKAGE = Path(__file__).resolve().parents[1] / "examples" / "task_package"
WAM = load_robot("wam")


def _forget_package() -> None:
    for name in [m for m in sys.modules if m == "episodic_strike" or m.startswith("episodic_strike.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """examples/task_package installed by pip (no dependencies, no build isolation: offline) into
    a directory put first on sys.path and PYTHONPATH; both restored afterwards."""
    if importlib.util.find_spec("setuptools.command.bdist_wheel") is None:  # setuptools < 70.1 builds with wheel
        pytest.importorskip("wheel", reason="building examples/task_package offline needs setuptools >= 70.1 or the "
                                            "wheel package: pip install wheel")
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(PACKAGE)], check=True, capture_output=True, timeout=300)
    shutil.rmtree(PACKAGE / "build", ignore_errors=True)  # what setuptools leaves in the source tree
    for leftover in (PACKAGE / "src").glob("*.egg-info"):
        shutil.rmtree(leftover)
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), before) if p)
    sys.path.insert(0, str(target))
    _forget_package()
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
        _forget_package()


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "episodic", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def reference(episode_id: int) -> list:
    from episodic_strike.reference import reference_commands

    return reference_commands(WAM, episode_id)


def arriving_at(seconds: float, episode_id: int) -> list:
    """The reference's move arriving at the target after ``seconds`` (held until 1.3 s)."""
    start, move = reference(episode_id)
    q = move.q[-1]
    desired = min_jerk(WAM.home, q, seconds, WAM.control_dt)
    return [start, TrajectoryCommand(episode_id, 1, 1, desired.q, desired.qd, desired.qdd,
                                     wait_time=max(1.3 - seconds, 0.0))]


@pytest.fixture(scope="module")
def served_log(installed, tmp_path_factory) -> Path:
    """A learner over the bridge on `episodic serve --task strike --threads 2`: a population of
    arrival times evaluated as one batch, then the best one sent episode by episode."""
    log = tmp_path_factory.mktemp("served") / "strike.h5"
    with Served(channel_name(), log, "--threads", "2", task="strike") as served:
        with Client(served.channel, timeout=60) as client:
            times = (0.4, 1.0, 1.6)
            results = client.evaluate([arriving_at(t, k + 1) for k, t in enumerate(times)])
            best = times[int(np.argmax([r.episode_return for r in results]))]
            replies = [client.send(c) for c in arriving_at(best, 10)]
        assert served.stop() == 0
    assert best == 1.0, [r.episode_return for r in results]  # arriving at the strike time, not 0.6 s off
    assert replies[-1].flag == Flag.OK and replies[-1].reward > 0.95, replies[-1]
    return log


def test_the_installed_package_is_a_task_by_name(installed):
    cls = task_class("strike")
    assert cls.__module__ == "episodic_strike" and "strike" not in TASKS and registry()["strike"] is cls
    listed = run_cli("tasks")
    assert listed.returncode == 0, listed.stderr
    assert "strike: be at a target" in listed.stdout
    assert "from package: episodic-strike 0.1.0 (episodic_strike:Strike)" in listed.stdout


def test_served_to_a_learner_logged_with_its_package_and_replayed(served_log):
    meta = read_metadata(served_log)
    assert meta["task"] == "strike"
    assert meta["task_source"] == {"spec": "episodic_strike:Strike", "package": "episodic-strike", "version": "0.1.0"}
    assert logged_task(meta) is task_class("strike")
    episodes = read_episodes(served_log)
    assert len(episodes) == 4 and episodes[-1].attrs["success"]
    done = run_cli("replay", str(served_log))
    assert done.returncode == 0 and "4 episodes replayed bit-identically" in done.stdout, done.stdout + done.stderr


def test_render_plot_and_export_read_its_logs(served_log, tmp_path):
    for args in (("render", str(served_log), "--episode", "3", "--at", "1.0", "--size", "64x48",
                  "--out", str(tmp_path / "a.png")),
                 ("plot", str(served_log), "--episode", "3", "--out", str(tmp_path / "b.png")),
                 ("export", str(served_log), "--format", "robomimic", "--out", str(tmp_path / "c.hdf5"))):
        done = run_cli(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert "warning" not in done.stderr, done.stderr
    import h5py

    with h5py.File(tmp_path / "c.hdf5") as f:
        assert json.loads(f["data"].attrs["env_args"])["env_kwargs"]["task_source"]["package"] == "episodic-strike"


def test_evaluated_alike_on_threads_on_dask_workers_and_from_its_log(served_log, tmp_path):
    distributed = pytest.importorskip("distributed", reason="Dask is not installed: pip install 'episodic[dask]'")
    episodes = [reference(1), arriving_at(0.8, 2), arriving_at(1.6, 3)]
    threads = evaluate(episodes, "strike", threads=2, keep_steps=True)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as client:
        workers = evaluate(episodes, ("strike", {}), executor=client.get_executor(), chunk_size=2,
                           keep_steps=True, log=tmp_path / "dask.h5")
    for a, b in zip(threads, workers, strict=True):
        assert np.float64(a.episode_return).tobytes() == np.float64(b.episode_return).tobytes()
        assert all(a.steps[k].tobytes() == b.steps[k].tobytes() for k in a.steps)
    assert threads[0].success and threads[0].episode_return > threads[2].episode_return + 0.1  # 0.6 s late
    done = run_cli("evaluate", str(served_log), "--threads", "2")
    assert done.returncode == 0 and "task strike" in done.stdout and "4 episodes" in done.stdout, done.stderr
    replayed = run_cli("replay", str(tmp_path / "dask.h5"))
    assert replayed.returncode == 0 and "3 episodes replayed bit-identically" in replayed.stdout, replayed.stderr


def test_its_feedback_law_in_c_runs_in_the_compiled_loop_and_replays(installed, tmp_path):
    """The package's law (strike.c, built into its own library on install) bound by path like a
    built-in law: a gain pulls the tip toward the target, and the log replays bit-identically."""
    from episodic.interface.commands import GainsCommand, StartCommand
    from episodic.native import CompiledLaw, library
    from episodic.runtime.runner import Runner
    from episodic.tools.replay import replay

    distances = []
    with Runner(make_task("strike"), log=tmp_path / "law.h5") as runner:
        for k, gain in enumerate((0.0, 1.0), 1):
            runner.send(StartCommand(k, 1))
            if k == 2:
                law = runner.task.compiled_law(runner.sim.model, np.array([gain]))
                assert isinstance(law, CompiledLaw) and law.function is not None
                assert not hasattr(library(), "episodic_law_strike")  # not episodic's: the package's own
            reply = runner.send(GainsCommand(k, 1, 1, WAM.kp, WAM.kd, wait_time=1.5, task_gains=np.array([gain])))
            assert reply.flag == Flag.OK, reply.message
            distances.append(reply.state[3])
    assert distances[1] < distances[0] - 0.1, distances  # m: 0.62 held, 0.45 pulled (measured)
    report = replay(tmp_path / "law.h5")
    assert report.identical and len(report.episodes) == 2, report.differences


def test_the_gym_face_takes_it_by_name_over_the_bridge(installed):
    """BlackBoxEnv on a Client of `episodic serve --task strike`, the task named as served."""
    from episodic.learning.gym_env import BlackBoxEnv

    with Served(channel_name(), None, task="strike") as served:
        with Client(served.channel, timeout=60) as client:
            env = BlackBoxEnv(client, "strike", n_via=2, duration=1.2, hold=0.2)
            context, _ = env.reset(seed=0)
            _, reward, terminated, _, info = env.step(np.zeros(env.action_space.shape))
        assert served.stop() == 0
    assert np.array_equal(context, [0.3, 0.45, 1.4]) and terminated and info["flag"] == "OK"
    assert 0.0 <= reward < 1.0  # the start posture held: a strike far from the target earns little


def test_the_generic_suites_run_it_without_an_edit(installed):
    """The suites that take their tasks from the registry run strike as they run a built-in task:
    its reference over the bridge and replayed, crash <= hold <= reference, convergence."""
    suites = [str(Path(__file__).parent / f) for f in ("test_tasks_over_bridge.py", "test_early_end.py",
                                                          "test_convergence.py")]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-k", "strike",
                           *suites], capture_output=True, text=True, timeout=600, cwd=Path(__file__).parents[1])
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout[-3000:]


def test_without_the_package_a_replay_names_the_package_to_install(served_log):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = run_cli("replay", str(served_log), env=env)
    assert done.returncode == 1
    assert "pip install 'episodic-strike==0.1.0'" in done.stderr, done.stderr
    unknown = run_cli("serve", "--task", "strike", env=env)
    assert unknown.returncode == 1 and "entry point in the group 'episodic.tasks'" in unknown.stderr, unknown.stderr


SPEC_RUN = """
import sys
from concurrent.futures import ProcessPoolExecutor
from episodic.interface.robot import load_robot
from episodic.tools.batch import evaluate
from episodic_strike.reference import reference_commands
wam = load_robot("wam")
with ProcessPoolExecutor(1) as pool:
    results = evaluate([reference_commands(wam, 1), reference_commands(wam, 2)], "episodic_strike:Strike",
                       executor=pool, log=sys.argv[1])
print(*[r.success for r in results])
"""


def test_a_module_class_spec_runs_without_installing(tmp_path):
    """episodic_strike from the package's source folder on PYTHONPATH (not installed), named by
    its spec: a process pool's workers import it by the spec, the log records it with no package,
    it replays, and without the folder the replay says to put the module on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    spec_env = {**env, "PYTHONPATH": str(PACKAGE / "src")}
    done = subprocess.run([sys.executable, "-c", SPEC_RUN, str(tmp_path / "spec.h5")], capture_output=True,
                          text=True, timeout=300, env=spec_env)
    assert done.returncode == 0 and done.stdout.split() == ["True", "True"], done.stderr
    meta = read_metadata(tmp_path / "spec.h5")
    assert meta["task_source"] == {"spec": "episodic_strike:Strike", "package": "", "version": ""}
    replayed = run_cli("replay", str(tmp_path / "spec.h5"), env=spec_env)
    assert replayed.returncode == 0 and "2 episodes replayed bit-identically" in replayed.stdout, replayed.stderr
    missing = run_cli("replay", str(tmp_path / "spec.h5"), env=env)
    assert missing.returncode == 1 and "put module 'episodic_strike' on the Python path" in missing.stderr


def test_unknown_task_says_how_to_make_one_known():
    with pytest.raises(ValueError, match="known: ball_bouncing.*'module:Class' spec"):
        make_task("no_such_task")
