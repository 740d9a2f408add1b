"""The ``episodic`` command line, run for real: click's CliRunner in-process, and the
installed console script in a subprocess. Real MuJoCo and HDF5 files, no mocks."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

import episodic
from episodic.bridge import Client
from episodic.cli.main import main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.replay import replay as run_replay
from examples.reach_learner import demo_targets, format_rows, run_reach_demo
from tests.helpers import Served, channel_name, wave

N_EPISODES = 5


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory) -> tuple[Path, str]:
    """A reach session's log (five targets, seed 0), written in-process by the reach learner of
    examples/reach_learner.py: what the info and replay tests below read."""
    path = tmp_path_factory.mktemp("reach") / "reach.h5"
    with Runner(make_task("reach"), log=path, seed=0) as runner:
        rows = run_reach_demo(runner, demo_targets(runner, N_EPISODES, 0))
    return path, format_rows(rows)


@pytest.fixture
def log_copy(demo_log, tmp_path) -> Path:
    path = tmp_path / "copy.h5"
    shutil.copy(demo_log[0], path)
    return path


def demo_shm(pid: int | None = None) -> set[str]:
    """Shared-memory objects and semaphores of this user's demo channels (those of the demo
    run by process ``pid`` only, when given: other sessions may run demos meanwhile)."""
    prefix = f"episodic.{os.getuid()}.demo{'' if pid is None else f'{pid}-'}"
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix) or n.startswith("sem." + prefix)}


def demo_channel_of(output: str) -> str:
    """The channel name a demo printed."""
    return output.split("channel '", 1)[1].split("'", 1)[0]


@pytest.fixture(scope="module")
def ball_demo(tmp_path_factory) -> tuple[Path, str]:
    """`episodic demo --quick` (ball_in_cup learned over the bridge) run once by the installed
    console script, in an empty folder outside the repository (so the installed package, not the
    working tree, is used): its log and output."""
    folder = tmp_path_factory.mktemp("demo")
    demo = subprocess.run([_console_script(), "demo", "--quick", "--seed", "0"], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    channel = demo_channel_of(demo.stdout)
    assert channel.startswith("demo") and not demo_shm(int(channel[4:].split("-")[0])), \
        "the demo left shared-memory objects behind"
    return folder / "runs" / "demo.h5", demo.stdout


# -- demo -----------------------------------------------------------------------
@pytest.mark.slow
def test_demo_learns_ball_in_cup_over_the_bridge_in_batches(ball_demo):
    from episodic.cli.demo import QUICK
    from episodic.learning.demonstration import Demonstration

    path, output = ball_demo
    iterations, samples = QUICK
    meta = read_metadata(path)
    assert meta["task"] == "ball_in_cup" and meta["robot"] == "wam" and meta["seed"] == 0
    # the start alone, then per iteration its samples and the policy, then the final policy
    n = 1 + iterations * (samples + 1) + 1
    assert meta["mode"] == "blocking" and meta["n_episodes"] == n
    episodes = read_episodes(path)
    assert [ep.attrs["batch"] for ep in episodes] == [0] + [k for k in range(1, iterations + 1)
                                                         for _ in range(samples + 1)] + [iterations + 1]
    for ep in episodes:
        assert ep.attrs["flag_name"] == "OK"
        assert [a["index"] for a, _ in ep.commands] == [0, 1, 2, 3]  # start + 3 segments
    # the start is the imitation of the demonstration saved beside the log, which misses
    demo = Demonstration.load(path.with_name("demo_demonstration.h5"))
    assert demo.task == "ball_in_cup" and demo.source.startswith("kinesthetic")
    assert not episodes[0].attrs["success"]
    np.testing.assert_array_equal(episodes[0].commands[0][1]["posture"], demo.q[0])
    # one line per iteration: rollouts so far, the samples' mean return, the policy's return
    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["iter", "rollouts"])
    rows = [line.split() for line in lines[header + 1: header + 2 + iterations]]
    assert [int(r[0]) for r in rows] == list(range(iterations + 1))
    assert [int(r[1]) for r in rows] == [1 + k * samples for k in range(iterations + 1)]
    assert float(rows[0][2]) == pytest.approx(episodes[0].attrs["return"], abs=1e-3)
    first_batch = [ep.attrs["return"] for ep in episodes[1:1 + samples]]
    assert float(rows[1][2]) == pytest.approx(np.mean(first_batch), abs=1e-3)
    assert float(rows[1][5]) == pytest.approx(episodes[1 + samples].attrs["return"], abs=1e-3)
    assert f"final policy: return {episodes[-1].attrs['return']:.3f}" in output
    # the table's last line is that final policy, the closing lines say whether the rule was met
    final = lines[header + 2 + iterations].split()
    assert final[0] == "final" and float(final[2]) == pytest.approx(episodes[-1].attrs["return"], abs=1e-3)
    assert final[3] == ("yes" if episodes[-1].attrs["success"] else "no")
    assert "stopping rule met" in output or "stopping rule not met" in output
    assert "serving" not in output and "channel 'demo" in output
    assert f"log written to runs/demo.h5 ({n} episodes" in output
    assert "episodic info runs/demo.h5" in output and "episodic replay runs/demo.h5" in output


def test_demo_batches_run_on_one_thread_more_than_the_cores():
    from episodic.cli.demo import batch_threads

    cores = len(os.sched_getaffinity(0))
    assert batch_threads(64) == cores + 1
    assert batch_threads(2) == min(cores + 1, 2) and batch_threads(1) == 1


@pytest.mark.slow  # a served runner, three ball_in_cup episodes and a video of one
def test_demo_renders_the_first_catch_as_soon_as_the_runner_logged_it(tmp_path):
    from episodic.cli.demo import DEMO_TASK, DemoError, _Batches, _Video
    from episodic.interface.robot import load_robot
    from episodic.tasks.ball_in_cup_swing import DEMO_TASK as SWING_TASK, REFERENCE_SWING, bent_swing, swing_commands
    from episodic.tools.render import RenderError, gl_backend
    from episodic.tools.served import ServedRunner, fresh_channel

    imageio = pytest.importorskip("imageio.v2", reason="the media extra: pip install 'episodic[media]'")
    try:
        gl_backend()
    except RenderError as exc:
        pytest.skip(str(exc))
    assert DEMO_TASK == SWING_TASK
    robot, log, notes = load_robot("wam"), tmp_path / "demo.h5", []
    video = _Video(log, notes.append)
    with ServedRunner(fresh_channel("demo"), task=DEMO_TASK, log=log, args=("--threads", "2")) as runner, \
            Client(runner.channel, timeout=120) as client:
        batches = _Batches(client, video.start)
        miss, catch = bent_swing(0.2), REFERENCE_SWING
        batches.evaluate([swing_commands(robot, miss, 1)])
        assert batches.first_catch is None and video.number is None
        results = batches.evaluate([swing_commands(robot, miss, 2), swing_commands(robot, catch, 3)])
        assert [r.success for r in results] == [False, True]
        assert batches.first_catch == video.number == 2  # the log's number: episodes 0, 1, 2 were sent
        batches.evaluate([swing_commands(robot, catch, 4)])
        assert video.number == 2, "only the first catch is rendered"
        clip = video.wait(2)  # while the runner serves
        runner.stop(check=True)
    assert notes == [] and clip == tmp_path / "demo_first_catch.mp4"
    rows = {ep.attrs["episode_id"]: ep for ep in read_episodes(log)}
    assert rows[3].attrs["success"] and int(rows[3].name) == 2
    moving = int(np.count_nonzero(rows[3].steps["index"] >= 1))
    with imageio.get_reader(clip) as reader:
        frames = sum(1 for _ in reader)
    assert frames == int(np.ceil(moving * robot.control_dt * 30 - 1e-9))  # 30 frames/s of its motion
    with pytest.raises(DemoError, match="first catch is episode 5"):
        video.wait(5)


@pytest.mark.slow
def test_demo_cleans_up_when_the_learner_fails(tmp_path, monkeypatch):
    import episodic.learning.policy_search as search
    from episodic.bridge.channel import object_names, pid_alive

    seen = {}

    def failing_learner(learner, rollouts, iterations, **kwargs):
        client = rollouts.evaluate.__self__.client  # the demo's batches: Client.evaluate
        seen.update(channel=client.channel_name, pid=client.runner_pid)
        assert os.path.exists("/dev/shm" + object_names(client.channel_name)["shm"])
        raise KeyboardInterrupt  # as if Ctrl-C hit the learner mid-run

    monkeypatch.setattr(search, "learn", failing_learner)
    import episodic.cli.demo as demo_module
    with pytest.raises(KeyboardInterrupt):
        demo_module.run_demo(tmp_path / "demo.h5", iterations=1, samples=2, video=False, echo=lambda text: None)
    assert seen["channel"].startswith(f"demo{os.getpid()}-")
    assert not pid_alive(seen["pid"]), "the runner was stopped"
    assert not demo_shm(os.getpid())


@pytest.mark.slow
@pytest.mark.parametrize("whom", ["process group", "demo only"])
def test_demo_interrupted_by_ctrl_c_leaves_nothing_behind(tmp_path, whom):
    proc = subprocess.Popen([sys.executable, "-m", "episodic", "demo", "--iterations", "1000", "--no-video"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not demo_shm(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        time.sleep(0.3)  # episodes are running
        if whom == "process group":  # what Ctrl-C in a terminal does
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert "Traceback" not in err, err  # click prints "Aborted!"
    assert not demo_shm(proc.pid), "Ctrl-C left shared-memory objects behind"
    assert (tmp_path / "runs" / "demo.h5").is_file(), "the runner closed its log"


@pytest.mark.slow  # an example's learner over 12 targets
def test_reach_learner_solves_most_targets():
    with Runner(make_task("reach"), seed=3) as runner:
        rows = run_reach_demo(runner, demo_targets(runner, 12, seed=3))
    assert all(r.flag == "OK" for r in rows)
    assert sum(r.success for r in rows) >= 11
    assert np.median([r.distance for r in rows]) < 0.005


# -- info -----------------------------------------------------------------------
def test_info_prints_metadata_and_episode_table(demo_log):
    path, _ = demo_log
    result = invoke("info", str(path))
    assert result.exit_code == 0, result.output
    out = result.output
    for text in ("task:", "reach", "robot:", "wam", "seed:", "mode:", "blocking", "control rate:",
                 "500 Hz", "versions:", "mujoco=", "tolerance=0.02"):
        assert text in out, text
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["episode", "id"])
    for word in ("return", "flag", "success", "steps", "wall"):
        assert word in lines[header]
    rows = [line.split() for line in lines[header + 2 : header + 2 + N_EPISODES]]
    episodes = read_episodes(path)
    for row, ep in zip(rows, episodes):
        assert int(row[0]) == int(ep.name)
        assert int(row[1]) == ep.attrs["episode_id"]
        assert float(row[2]) == pytest.approx(ep.attrs["return"], rel=1e-4)
        assert row[3] == "OK"
        assert row[4] == ("yes" if ep.attrs["success"] else "no")
        assert int(row[5]) == ep.attrs["n_steps"]
    assert "rejected" not in out


def test_info_counts_rejected_commands(tmp_path):
    path = tmp_path / "rejected.h5"
    with Runner(make_task("reach"), log=path, seed=0) as runner:
        q = np.tile(runner.robot.home, (10, 1))
        reply = runner.send(TrajectoryCommand(5, 1, 1, q))  # no episode running
        assert reply.flag.name == "OUT_OF_ORDER"
    result = invoke("info", str(path))
    assert result.exit_code == 0, result.output
    assert "rejected commands (outside any episode): 1" in result.output


def test_info_on_a_text_file_fails_clearly(tmp_path):
    path = tmp_path / "notes.h5"
    path.write_text("not HDF5\n")
    result = invoke("info", str(path))
    assert result.exit_code != 0
    assert "is not an episodic log" in result.output
    assert "Traceback" not in result.output


def test_info_on_foreign_hdf5_fails_clearly(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(3))
    for command in ("info", "replay"):
        result = invoke(command, str(path))
        assert result.exit_code != 0
        assert "is not an episodic log" in result.output


def test_a_truncated_log_is_called_damaged_with_how_much_is_left(demo_log, tmp_path):
    path = tmp_path / "cut.h5"
    whole = demo_log[0].read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    for command in ("info", "replay"):
        result = invoke(command, str(path))
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert f"is damaged: it was cut off at {len(whole) // 2} of its {len(whole)} bytes (50 %)" in result.output


def test_info_on_a_file_it_may_not_read_fails_clearly():
    unreadable = next((str(p) for p in Path("/sys/bus").glob("*/uevent") if not os.access(p, os.R_OK)
                       or p.stat().st_mode & 0o444 == 0), None)  # write-only even for root
    if unreadable is None:
        pytest.skip("no file here that this user may not read")
    result = invoke("info", unreadable)
    assert result.exit_code != 0 and f"{unreadable}: permission denied" in result.output


def test_info_on_missing_file_fails_clearly(tmp_path):
    result = invoke("info", str(tmp_path / "nothing.h5"))
    assert result.exit_code != 0
    assert "no such file" in result.output


def test_info_reads_a_log_written_before_the_summary_the_same_way(demo_log, log_copy):
    with h5py.File(log_copy, "r+") as f:
        del f["summary"]
    table = invoke("info", str(demo_log[0])).output.splitlines()[14:]  # after the metadata and a blank line
    old = invoke("info", str(log_copy))
    assert old.exit_code == 0, old.output
    assert old.output.splitlines()[14:] == table and len(table) == N_EPISODES + 3  # head, rule, rows, count


def _drop_last_episode_write(path: Path) -> tuple[str, str]:
    """Damage the last episode of a log (its steps cut off the file, its /summary row gone); its
    name and why it is not whole."""
    with h5py.File(path, "r+") as f:
        last = f["episodes"][-1]
        f["steps"].resize(last["steps_start"] + 1, axis=0)
        f["summary"].resize(len(f["episodes"]) - 1, axis=0)
    start, end = last["steps_start"], last["steps_start"] + last["n_steps"] - 1
    return f"{last['number']:06d}", f"its rows {start}..{end} of /steps are not in the file"


def test_info_and_replay_name_an_episode_not_written_whole(log_copy):
    name, why = _drop_last_episode_write(log_copy)
    info_out = invoke("info", str(log_copy))
    assert info_out.exit_code == 0, info_out.output
    rows = [line.split() for line in info_out.output.splitlines() if line.split()[:1] == [str(int(name))]]
    assert rows and rows[0][3] == "OK*"
    assert f"* not written whole, so not replayable: episode {int(name)} ({why})" in info_out.output
    result = CliRunner().invoke(main, ["replay", str(log_copy)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"warning: episode {name} not replayed: it was not written whole ({why})" in result.output
    assert f"{N_EPISODES - 1} episodes replayed bit-identically" in result.output
    one = invoke("replay", str(log_copy), "--episode", str(int(name)))
    assert one.exit_code == 1 and "was not written whole" in one.output and "Traceback" not in one.output


# -- serve --log ------------------------------------------------------------------
@pytest.mark.slow
def test_a_second_serve_on_a_live_runs_log_leaves_it_intact(tmp_path):
    log = tmp_path / "live.h5"
    with Served(channel_name(), log) as first, Client(first.channel) as client:
        q = wave(load_robot_home(), n=200)
        for episode_id in (1, 2):
            if episode_id == 2:  # a second runner pointed at the live run's log, then with --overwrite
                for extra in ((), ("--overwrite",)):
                    second = Served(channel_name(), log, *extra)
                    assert not second.ready and second.proc.wait(timeout=60) != 0
                    err = second.proc.stderr.read()
                    second.close()
                    assert "Traceback" not in err
                    assert ("never overwritten unless asked" if not extra else "is open in another process") in err
                live = invoke("info", str(log))  # a live log is read: the episode written so far
                assert live.exit_code == 0 and "episodes: 1" in " ".join(live.output.split()), live.output
            assert client.send(StartCommand(episode_id, 1)).flag.name == "OK"
            assert client.send(TrajectoryCommand(episode_id, 1, 1, q)).flag.name == "OK"
        first.stop(check=True)
    assert [e.attrs["episode_id"] for e in read_episodes(log)] == [1, 2]
    assert run_replay(log).identical


def load_robot_home() -> np.ndarray:
    from episodic.interface.robot import load_robot

    return load_robot("wam").home


def test_serve_refuses_bad_log_paths_with_a_message(tmp_path):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "link.h5").symlink_to(tmp_path / "elsewhere.h5")
    cases = {str(tmp_path / "link.h5"): "is a symbolic link",
             str(tmp_path / "a_file" / "run.h5"): "for the log: a file is in the way"}
    for path, reason in cases.items():
        result = CliRunner().invoke(main, ["serve", "--channel", channel_name(), "--log", path])
        assert result.exit_code == 1 and reason in result.output, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
    result = CliRunner().invoke(main, ["serve", "--channel", channel_name(), "--log", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.output


# -- replay ---------------------------------------------------------------------
def test_replay_of_the_demo_log_is_bit_identical(demo_log):
    path, _ = demo_log
    result = invoke("replay", str(path))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"{N_EPISODES} episodes replayed bit-identically"


def test_replay_selected_episodes(demo_log):
    path, _ = demo_log
    result = invoke("replay", str(path), "--episode", "1", "--episode", "3")
    assert result.exit_code == 0, result.output
    assert "2 episodes replayed bit-identically" in result.output
    result = invoke("replay", str(path), "--episode", str(N_EPISODES + 10))
    assert result.exit_code != 0
    assert "no episode" in result.output


def test_replaying_an_episode_reads_no_other(log_copy):
    """A replay of some episodes opens only theirs: the others' data may be gone (here their
    rows name none in the file; they stay listed) and the chosen ones still replay bit-identically."""
    with h5py.File(log_copy, "r+") as f:
        rows = f["episodes"][()]
        for k in (0, 2, 4):
            for part in ("steps_start", "segments_start", "commands_start", "initial_state"):
                rows[part][k] = 1 << 40
        f["episodes"][...] = rows
    result = invoke("replay", str(log_copy), "--episode", "1", "--episode", "3")
    assert result.exit_code == 0, result.output
    assert "2 episodes replayed bit-identically" in result.output


def test_replay_reports_a_changed_command_value(log_copy):
    with h5py.File(log_copy, "r+") as f:
        offset, shape = json.loads(f["commands"][f["episodes"][0]["commands_start"] + 1])["arrays"]["q"]
        f["command_values"][offset + 5 * shape[1] + 2] += 1e-6  # q[5, 2] of episode 0's first trajectory
    result = invoke("replay", str(log_copy))
    assert result.exit_code == 1, result.output
    out = result.output
    assert "replay differs from the log" in out
    assert "episode 000000" in out
    assert "steps/q_d" in out and "first at row 5" in out
    assert "episode 000001" not in out  # the other episodes still replay identically
    detail_lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(detail_lines) <= 11


def test_replay_warns_about_changed_versions(log_copy):
    with h5py.File(log_copy, "r+") as f:
        f.attrs["versions"] = '{"mujoco": "0.0.1", "episodic": "0.0.0"}'
    result = invoke("replay", str(log_copy))
    assert result.exit_code == 0, result.output
    assert "warning: software versions differ" in result.output
    assert "mujoco 0.0.1 ->" in result.output
    assert "to get the recorded versions: pip install mujoco-core==0.0.1" in result.output


# -- listings -------------------------------------------------------------------
def test_robots_lists_the_wam():
    result = invoke("robots")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("wam: 7 DoF, 500 Hz")
    assert "Barrett" in result.output


def test_tasks_lists_reach():
    result = invoke("tasks")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "\nreach:" in "\n" + out
    assert "target_x, target_y, target_z, distance" in out
    assert "tolerance=0.02" in out and "effort=0.0001" in out
    assert "context:" in out


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert episodic.__version__ in result.output


@pytest.mark.slow  # a fresh interpreter each
@pytest.mark.parametrize("args", [["--help"], ["info", "--help"], ["serve", "--help"], ["replay", "--help"]])
def test_help_imports_nothing_heavy(args):
    """The CLI imports simulation, HDF5, numerics and plotting in the commands that use them, so
    help answers at once: in a fresh interpreter none of those modules is loaded after it."""
    heavy = ("mujoco", "h5py", "scipy", "matplotlib", "dask", "distributed", "numpy", "posix_ipc")
    code = (f"import sys\nfrom episodic.cli.main import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    assert done.stderr.strip() == "[]"


# -- the installed console script ---------------------------------------------------
def _console_script() -> str:
    local = Path(sys.executable).parent / "episodic"
    found = str(local) if local.exists() else shutil.which("episodic")
    if found is None:
        pytest.fail("the 'episodic' console script is not installed; run pip install -e .")
    return found


@pytest.mark.slow
def test_installed_console_script_reads_and_replays_the_demo_log(ball_demo):
    from episodic.cli.demo import QUICK

    path, _ = ball_demo
    iterations, samples = QUICK
    n = 2 + iterations * (samples + 1)

    def run(*args):
        return subprocess.run([_console_script(), *args], cwd=path.parent.parent, capture_output=True, text=True,
                              timeout=300)

    assert path.with_name("demo_demonstration.h5").is_file()
    info = run("info", "runs/demo.h5")
    assert info.returncode == 0, info.stderr
    assert "ball_in_cup" in info.stdout and f"of {n} episodes successful" in info.stdout
    replay = run("replay", "runs/demo.h5")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert replay.stdout.strip() == f"{n} episodes replayed bit-identically"
    bad = run("info", "missing.h5")
    assert bad.returncode != 0
    assert "Error: missing.h5: no such file" in bad.stderr
    version = run("--version")
    assert version.returncode == 0 and episodic.__version__ in version.stdout


@pytest.mark.slow
def test_serve_refuses_an_unknown_task_without_a_traceback(tmp_path):
    result = subprocess.run([_console_script(), "serve", "--task", "nosuch", "--channel", f"cli{tmp_path.name[-8:]}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "unknown task 'nosuch'" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_rejects_a_malformed_param():
    result = CliRunner().invoke(main, ["serve", "--param", "tolerance"])
    assert result.exit_code == 2
    assert "NAME=VALUE" in result.output
