"""The ``episodic`` command line: run a demo, serve a learner, replay and inspect run logs, list robots and tasks."""
from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path

import click

import episodic
from episodic.cli.episodes import EpisodeOption
from episodic.cli.robots import robots

MAX_DIFFERENCE_LINES = 10


def _open_log(path: str):
    """Check that ``path`` is an episodic log; return it as a Path (ClickException otherwise)."""
    from episodic.logs import open_log
    from episodic.logs.layout import FORMAT, READ_FORMATS
    from episodic.logs.reader import LIVE_WAIT

    p = Path(path)
    if not p.exists():
        raise click.ClickException(f"{path}: no such file")
    if not p.is_file():
        raise click.ClickException(f"{path}: not a file")
    try:
        with open_log(p) as f:  # a live log: waits for its writer's write to end
            fmt = f.attrs.get("format")
            has_episodes = "episodes" in f
            other = _other_file(f)
    except BlockingIOError:
        raise click.ClickException(f"{path} has been open for writing in another process for {LIVE_WAIT:g} s "
                                   f"(a runner's log is closed between its writes; another program holding "
                                   f"it?); HDF5 lets nobody read it meanwhile: try again once it is closed") from None
    except PermissionError:
        raise click.ClickException(f"{path}: permission denied; read it as a user who may, or copy it") from None
    except OSError as exc:
        cut = re.search(r"truncated file: eof = (\d+).*stored_eof = (\d+)", str(exc))
        if cut:
            have, need = int(cut[1]), int(cut[2])
            raise click.ClickException(
                f"{path} is damaged: it was cut off at {have} of its {need} bytes ({100 * have / need:.0f} %), "
                f"so HDF5 cannot open it and none of its episodes is readable (a run killed while the "
                f"file was being copied, or a full disk?). Use an intact copy, or re-run") from None
        raise click.ClickException(f"{path} is not an episodic log (not an HDF5 file: {exc})") from None
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if other:
        raise click.ClickException(f"{path} is not an episodic log: it is {other}")
    if fmt is None or not has_episodes:
        raise click.ClickException(f"{path} is not an episodic log (an HDF5 file, but without the "
                                   f"'format' attribute and /episodes group of a run log)")
    if str(fmt).split("/")[0] != FORMAT.split("/")[0]:
        raise click.ClickException(f"{path} is not an episodic log (format '{fmt}')")
    if str(fmt) not in READ_FORMATS:
        click.echo(f"warning: log format '{fmt}', this version reads '{FORMAT}'", err=True)
    return p


def _other_file(f) -> str:
    """What the HDF5 file ``f``, not a run log, is and what reads it, when it is one of the other
    files episodic writes (a demonstration, a robomimic export); '' otherwise. External links
    are not followed. A run log is told by its format alone, without importing what reads the
    others (a demonstration's module imports MuJoCo and SciPy: seconds of `info`'s time)."""
    import h5py

    from episodic.interface.files import member
    from episodic.logs.layout import FORMAT as LOG

    fmt = f.attrs.get("format")
    fmt = fmt.decode(errors="replace") if isinstance(fmt, bytes) else fmt
    if isinstance(fmt, str) and fmt.split("/")[0] == LOG.split("/")[0]:
        return ""
    from episodic.learning.demonstration import FORMAT as DEMONSTRATION

    if fmt == DEMONSTRATION:
        q = member(f, "q")
        samples = f"{q.shape[0]} samples, " if isinstance(q, h5py.Dataset) and q.ndim else ""
        return (f"a demonstration ({samples}task {f.attrs.get('task', '?')}, robot {f.attrs.get('robot', '?')}; "
                f"written by `episodic demonstrate`); read it in Python with "
                f"episodic.learning.demonstration.Demonstration.load(path)")
    data = member(f, "data")
    if isinstance(data, h5py.Group) and "env_args" in data.attrs:
        return (f"a robomimic dataset ({len(data)} demo{'s' if len(data) != 1 else ''}; written by "
                f"`episodic export --format robomimic`); "
                f"robomimic reads it (e.g. its train.py with the dataset's path as --dataset), or h5py")
    return ""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(episodic.__version__, prog_name="episodic")
def main() -> None:
    """Run robot-arm episodes for a learner (demo, serve); inspect and replay their HDF5 logs."""


@main.command(short_help="Re-run LOG's commands; check the result is bit-identical.")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--episode", "-e", "episodes", cls=EpisodeOption,
              help="Episode numbers (sequence numbers in the log) to replay: a list and ranges, e.g. "
                   "-e 2 48, -e 3-7; repeatable. Default: all.")
@click.option("--robot", "robot", default=None, metavar="PATH",
              help="The robot's folder, when the log's robot is not found by the name it records (a log "
                   "names its robot; it never leads to a path).")
def replay(log: str, episodes: tuple[int, ...], robot: str | None) -> None:
    """Re-execute LOG's recorded commands and check the result is bit-identical to the log.

    On a terminal, a progress bar on stderr shows the episodes replayed (none in a pipe or CI)."""
    from episodic.tools.progress import Progress
    from episodic.tools.replay import replay as run_replay

    path = _open_log(log)
    try:
        with Progress("replaying") as bar:
            report = run_replay(path, sorted(set(episodes)) or None, progress=bar, robot=robot)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    for name, why in sorted(report.skipped.items()):
        click.echo(f"warning: episode {name} not replayed: it was not written whole ({why})", err=True)
    if report.version_changes:
        changes = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in sorted(report.version_changes.items()))
        fix = report.install_recorded()
        click.echo(f"warning: software versions differ from the log's ({changes}); results may differ "
                   f"for that reason" + (f"; to get the recorded versions: {fix}" if fix else ""), err=True)
    n = len(report.episodes)
    if report.identical:
        click.echo(f"{n} episode{'s' if n != 1 else ''} replayed bit-identically")
        return
    diffs = report.differences
    bad = sorted({d.episode for d in diffs})
    names = ", ".join(bad[:MAX_DIFFERENCE_LINES]) + (", ..." if len(bad) > MAX_DIFFERENCE_LINES else "")
    click.echo(f"replay differs from the log: {len(diffs)} difference{'s' if len(diffs) != 1 else ''} "
               f"in {len(bad)} of {n} episodes ({names})")
    for d in diffs[:MAX_DIFFERENCE_LINES]:
        click.echo(f"  episode {d.episode}  {d.what}: {d.detail}")
    if len(diffs) > MAX_DIFFERENCE_LINES:
        click.echo(f"  ... and {len(diffs) - MAX_DIFFERENCE_LINES} more")
    sys.exit(1)


def _size(ctx, param, value: str) -> tuple[int, int]:
    """--size WIDTHxHEIGHT in pixels."""
    found = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", value)
    if not found or not (1 <= int(found[1]) <= 8192 and 1 <= int(found[2]) <= 8192):
        raise click.BadParameter(f"'{value}': use WIDTHxHEIGHT in pixels (1 to 8192 each), e.g. 640x480")
    return int(found[1]), int(found[2])


@main.command(short_help="Render an episode of LOG: a video, PNG frames or one picture.")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--episode", "-e", "number", cls=EpisodeOption, one=True, absent=0,
              help="Episode number (sequence number in the log).  [default: 0]")
@click.option("--out", "-o", type=click.Path(), default=None,
              help="FILE.mp4: a video; DIR/: one PNG per frame; FILE.png with --at: one picture.  "
                   "[default: <log name>_ep<N>.mp4, with --at <log name>_ep<N>_<AT>s.png]")
@click.option("--fps", default=30.0, show_default=True, type=click.FloatRange(min=0, max=1000, min_open=True),
              help="Frames per second of motion.")
@click.option("--size", default="640x480", show_default=True, callback=_size, metavar="WIDTHxHEIGHT",
              help="Picture size in pixels.")
@click.option("--camera", default=None, metavar="NAME", help="A camera of the scene.  [default: the task's view]")
@click.option("--at", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="One picture, this many seconds after the motion started.")
@click.option("--robot", "robot", default=None, metavar="PATH",
              help="The robot's folder, when the log's robot is not found by the name it records (a log "
                   "names its robot; it never leads to a path).")
def render(log: str, number: int, out: str | None, fps: float, size: tuple[int, int], camera: str | None,
           at: float | None, robot: str | None) -> None:
    """Render episode N of LOG headless: a video, PNG frames, or one picture with --at.

    The robot and the task's objects are shown exactly as they moved: the episode is
    re-simulated from its logged commands (blocking-mode logs replay bit-identically) and each
    frame drawn by MuJoCo's renderer without a display, through EGL or else OSMesa (MUJOCO_GL
    chooses one). Time runs from the start of the motion (command 1); the move to the start
    posture is not shown. Needs `pip install 'episodic[media]'` (PyOpenGL for the drawing,
    imageio and its ffmpeg for a video). On a terminal a progress bar shows the frames drawn."""
    from episodic.tools.progress import Progress
    from episodic.tools.render import RenderError, render as run_render

    path = _open_log(log)
    try:
        with Progress("rendering") as bar:
            done = run_render(path, number, out, fps, size, camera, at, progress=bar, robot=robot)
    except RenderError as exc:
        raise click.ClickException(str(exc)) from None
    rec = done.recording
    if rec.differences:
        what = ", ".join(sorted({d.what for d in rec.differences})[:MAX_DIFFERENCE_LINES])
        click.echo(f"warning: the re-simulation of episode {number} differs from the log ({what}); the "
                   f"pictures show the re-simulation (`episodic replay {log} --episode {number}` tells more)",
                   err=True)
    width, height = size
    if done.kind == "still":
        click.echo(f"wrote the picture at {at:g} s of episode {number} ({width}x{height}) to {done.out}")
    else:
        click.echo(f"wrote {done.frames} frames ({rec.duration:.2f} s of episode {number} at {fps:g} frames/s, "
                   f"{width}x{height}) {'as a video ' if done.kind == 'video' else ''}to {done.out}")
    if done.frames > 1:
        click.echo(f"rendered in {done.seconds:.1f} s ({done.rate:.1f} frames/s)")


@main.command(short_help="Plot an episode of LOG, or the returns of all its episodes.")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--episode", "-e", "number", cls=EpisodeOption, one=True,
              help="Episode number (sequence number in the log) to plot.  [default: the learning curve of "
                   "all episodes; a log of one episode: that episode]")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="PNG file.  [default: <log name>_ep<N>.png, <log name>_returns.png or <log name>_summary.png]")
@click.option("--summary", is_flag=True,
              help="One page: the learning curve, a picture of the best episode's end and the run in numbers.")
@click.option("--follow", is_flag=True,
              help="Re-draw the learning curve each time the log holds more episodes, while a runner writes it; "
                   "stops when the run ends, on Ctrl-C, at --until or after --timeout.")
@click.option("--until", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --follow: stop once the log holds N episodes.")
@click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="With --follow: stop after this many seconds.")
def plot(log: str, number: int | None, out: str | None, summary: bool, follow: bool, until: int | None,
         timeout: float | None) -> None:
    """Plot episode N of LOG, or the return and success of each of its episodes.

    An episode: per joint the measured q against the desired q_d, the tracking error and the
    torque against its limits; the task's state columns; the step reward and the return so
    far, over the time since the motion started (the move to the start shaded). A whole run:
    the return of each episode, successes marked, with running means of the return and the
    success rate (a learning curve). With --summary, one page: that learning curve, a picture of
    the end of the best episode (re-simulated as `episodic render` does; without OpenGL the page
    says why it has none) and the run in numbers. Needs `pip install 'episodic[plot]'` (matplotlib)."""
    from episodic.tools.plot import PlotError, follow as follow_plot, plot as run_plot

    path = _open_log(log)
    if (until is not None or timeout is not None) and not follow:
        raise click.UsageError("--until and --timeout go with --follow")
    if follow and (summary or number is not None):
        raise click.UsageError("--follow re-draws the learning curve of the whole run: leave out --episode and "
                               "--summary")
    try:
        if follow:
            drawn = follow_plot(path, out, until, timeout, drawn=lambda p: click.echo(f"wrote the plot of {p.what} "
                                                                                      f"to {p.out}"))
            if drawn is None:
                click.echo("the log holds no episode yet: nothing drawn")
            return
        done = run_plot(path, number, out, summary=summary)
    except PlotError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote the plot of {done.what} to {done.out}")


@main.command(short_help="Watch a run's log in the terminal as its episodes finish.")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--once", is_flag=True, help="Print the current state and exit.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True, metavar="SECONDS",
              help="How often to look at the log for new episodes.")
@click.option("--window", type=click.IntRange(min=1), default=100, show_default=True, metavar="N",
              help="Episodes of the success rate and of the recent mean return.")
def watch(log: str, once: bool, interval: float, window: int) -> None:
    """Show LOG's run as its episodes finish, also while `episodic serve --log LOG` writes it: the
    episodes and episodes/s, the returns (last, mean, best), the success rate over the last
    --window episodes, the flags, the batches, and the return per episode as a learning curve in
    text. On a terminal the view is re-drawn in place each time the log changes; Ctrl-C stops."""
    from episodic.tools.watch import describe, read_state, watch as run_watch

    path = _open_log(log)
    try:
        if once:
            click.echo(describe(read_state(path), window=window))
        else:
            run_watch(path, interval, window)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _log_size(n_bytes: int, episodes: int, storage: str) -> str:
    """A log's size for `info`: in all, per episode, and how its datasets are stored."""
    each = f", {n_bytes / episodes / 1e6:.3f} MB per episode" if episodes else ""
    return f"{n_bytes / 1e6:.2f} MB{each}" + (f", stored {storage}" if storage != "-" else "")


def _format_value(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)


@main.command()
@click.argument("log", type=click.Path(dir_okay=False))
def info(log: str) -> None:
    """Show LOG's run metadata and one line per episode.

    The metadata: task and parameters, robot, mode, seed, control rate and the software versions
    the run used. Then one row per episode: its number in the log (the numbers `replay
    --episode` takes), the learner's episode id, the return, the flag, success, the control steps
    logged (the move to the start included) and the wall time; a run with batches (episodic
    evaluate, episodic.tools.batch.evaluate_into) adds each episode's batch number and position in it
    (batch:pos, '-' for an episode sent one by one); realtime runs add the tick period error and
    missed deadlines. An episode not written whole (e.g. the disk filled up
    during its write) is marked '*' with what it lacks. The rows come from the log's /summary
    in one read (a log written before /summary is read episode by episode). A damaged or
    foreign file is refused with the reason."""
    import h5py
    import numpy as np

    from episodic.interface.files import member
    from episodic.interface.vocabulary import Flag
    from episodic.logs import open_log, read_metadata, read_summary
    from episodic.tools.compact import describe_storage

    path = _open_log(log)
    try:
        meta = read_metadata(path)
        rows, partial = read_summary(path)
        with open_log(path) as f:
            table = member(f, "rejected")  # an external link is refused, not followed
            rejected = table.shape[0] if isinstance(table, h5py.Dataset) and table.ndim else None
            run_timing = _timing(dict(f.attrs))
            storage = describe_storage(f)
    except (ValueError, TypeError, KeyError) as exc:
        raise click.ClickException(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None
    rate = meta.get("control_rate")
    fields = [
        ("file", str(path)),
        ("format", meta.get("format")),
        ("created", meta.get("created", "?")),
        ("task", meta.get("task", "?")),
        ("params", _format_value(meta.get("task_params", {}))),
        ("state columns", ", ".join(meta.get("state_columns", [])) or "-"),
        ("robot", meta.get("robot", "?")),
        ("mode", meta.get("mode", "?")),
        ("seed", meta.get("seed", "?")),
        ("control rate", f"{rate:g} Hz" if isinstance(rate, (int, float)) else "?"),
        ("versions", _format_value(meta.get("versions", {}))),
        ("episodes", meta.get("n_episodes", 0)),
        ("size", _log_size(path.stat().st_size, int(meta.get("n_episodes", 0) or 0), storage)),
    ]
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        click.echo(f"{key + ':':<{width + 1}} {value}")

    if len(rows):
        timed, batched = bool(rows["timing_ticks"].any()), bool((rows["batch"] >= 0).any())
        head = f"{'episode':>7} {'id':>8} {'return':>12} {'flag':<18} {'success':>7} {'steps':>7} {'wall ms':>9}"
        if batched:
            head += f" {'batch:pos':>9}"
        if timed:
            head += f" {TIMING_HEAD}"
        lines = ["", head, "-" * len(head)]
        flags = {flag: Flag(flag).name if flag in Flag._value2member_map_ else str(flag)
                 for flag in np.unique(rows["flag"]).tolist()}
        marked = {int(name) for name in partial}
        columns = {name: rows[name].tolist() for name in rows.dtype.names or ()}
        for i, (number, flag) in enumerate(zip(columns["number"], columns["flag"])):
            name = flags[flag] + ("*" if number in marked else "")
            line = (f"{number:>7} {columns['episode_id'][i]:>8} {columns['return'][i]:>12.5g} {name:<18} "
                    f"{'yes' if columns['success'][i] else 'no':>7} {columns['n_steps'][i]:>7} "
                    f"{columns['wall_time'][i] * 1e3:>9.1f}")
            if batched or timed:
                row = {key: values[i] for key, values in columns.items()}
                line += (f" {_batch_place(row):>9}" if batched else "") + (f" {_timing(row)}" if timed else "")
            lines.append(line)
        lines.append(f"{int(rows['success'].astype(bool).sum())} of {len(rows)} episodes successful")
        click.echo("\n".join(lines))  # one write: a line each costs more than the rest of a long table
    if partial:
        listed = ", ".join(f"{int(name)} ({why})" for name, why in sorted(partial.items()))
        click.echo(f"* not written whole, so not replayable: episode {listed}")
    if rejected is not None:
        click.echo(f"rejected commands (outside any episode): {rejected}")
    if run_timing:
        click.echo(f"whole run tick timing: {TIMING_HEAD.strip()} = {run_timing.strip()}")


TIMING_HEAD = f"{'period err p50/p99/max ms':>27} {'missed':>6}"


def _batch_place(row) -> str:
    """An episode's batch number and position in it ("2:5"), "-" for one sent one by one."""
    return f"{int(row['batch'])}:{int(row['batch_position'])}" if row["batch"] >= 0 else "-"


def _timing(attrs: dict) -> str:
    """The tick timing columns of a realtime episode (or run), '' when not recorded (no ticks)."""
    if not attrs.get("timing_ticks", 0):
        return ""
    ms = [1e3 * float(attrs[f"timing_period_error_{p}"]) for p in ("p50", "p99", "max")]
    return f"{ms[0]:>9.3f}/{ms[1]:.3f}/{ms[2]:.3f} {int(attrs['timing_missed']):>6}"


@main.command(short_help="Write LOG's episodes as SL MRDPLOT files or as a robomimic dataset.")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["mrdplot", "robomimic"]), required=True,
              help="mrdplot: one SL MRDPLOT file per episode; robomimic: one HDF5 file in robomimic's layout.")
@click.option("--episode", "-e", "episodes", cls=EpisodeOption,
              help="Episode numbers (sequence numbers in the log) to export: a list and ranges, e.g. "
                   "-e 2 48, -e 3-7; repeatable. Default: all.")
@click.option("--out", type=click.Path(), default=None,
              help="mrdplot: the folder the files go to (default: the log's); robomimic: the file "
                   "(default: <log stem>_robomimic.hdf5 beside the log).")
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
def export(log: str, fmt: str, episodes: tuple[int, ...], out: str | None, overwrite: bool) -> None:
    """Write LOG's episodes (all written whole, or those given) in another tool's format.

    mrdplot: one file per episode, <log stem>_ep<NNNNNN>.mrd, in SL's MRDPLOT format (clmcplot
    reads it), one row per control step, SL-style columns (time, index, <joint>_th, _thd,
    _thdd, _u, <joint>_des_th, _des_thd, _des_thdd, _uff, ee_x .. ee_q3, the task's state
    columns, reward); see episodic/tools/export/mrdplot.py. robomimic: one HDF5 file in robomimic's
    dataset layout, a demo per episode; what its states, actions and observations are is in
    episodic/tools/export/robomimic.py. Existing output is refused unless --overwrite. On a terminal
    a progress bar on stderr shows the episodes exported."""
    from episodic.tools.export.mrdplot import MrdplotExport, export_mrdplot
    from episodic.tools.export.robomimic import export_robomimic
    from episodic.tools.progress import Progress

    path = _open_log(log)
    numbers = sorted(set(episodes)) or None
    try:
        with Progress("exporting") as bar:
            result = (export_mrdplot if fmt == "mrdplot" else export_robomimic)(path, out, numbers, overwrite,
                                                                                  progress=bar)
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    for name, why in sorted(result.skipped.items()):
        click.echo(f"warning: episode {int(name)} not exported: {why}", err=True)
    if isinstance(result, MrdplotExport):
        files = result.files
        where = files[0].parent if files else Path(out or path.parent)
        names = f" ({files[0].name}{f' .. {files[-1].name}' if len(files) > 1 else ''})" if files else ""
        click.echo(f"wrote {len(files)} MRDPLOT file{'s' if len(files) != 1 else ''} to {where}{names}")
    else:
        click.echo(f"wrote {len(result.demos)} demo{'s' if len(result.demos) != 1 else ''} "
                   f"({result.total} samples) to {result.path}")


@main.command()
def tasks() -> None:
    """List the tasks: what each is, the robots it runs on (`any`, or those it is tied to), what
    it needs of a robot, its state columns, the context its start takes, its start posture on the WAM, the task
    gains of its feedback law (gain-set tasks), what ending an episode early costs, what of its
    scenario is not built, and its parameters, each as NAME=DEFAULT UNIT RANGE and what it means
    (set them with `episodic serve --task NAME --param NAME=VALUE`). The built-in tasks come
    first, then those of installed task packages (entry points of the group `episodic.tasks`),
    each with the package that provides it; last, a table of each task on each robot found by
    name (✔, or why not)."""
    import numpy as np

    from episodic.interface.robot import load_robot
    from episodic.task import Task, TaskError, task_source
    from episodic.tasks import TASKS, installed_tasks, task_class

    wam = load_robot("wam")
    for name in [*TASKS, *installed_tasks()]:
        try:
            cls = task_class(name)
        except TaskError as exc:
            click.echo(f"{name}: cannot be loaded: {exc}")
            continue
        click.echo(f"{name}: {cls.summary}" if cls.summary else name)
        if name not in TASKS:
            source = task_source(cls)
            click.echo(f"    from package: {source.package or '-'} {source.version} ({source.spec})")
        click.echo(f"    robots: {', '.join(cls.needs.robots) or 'any'}")
        click.echo(f"    needs: {cls.needs.describe()}")
        click.echo(f"    state columns: {', '.join(cls.columns) or '-'}")
        click.echo(f"    context: {cls.context_help}")
        if cls.gains_help:
            click.echo(f"    task gains (gains command): {cls.gains_help}")
        task = cls()
        start = task.start_posture(wam)
        click.echo(f"    start posture on wam: {np.round(start, 4).tolist()} rad")
        horizon = task.scored_duration()
        if horizon > 0:
            ending = (f"every episode is scored over {horizon:g} s of motion (parameter horizon); the steps an "
                      f"episode leaves out are charged at the task's worst cost rate")
        elif type(task).worst_reward_rate is not Task.worst_reward_rate:
            ending = "the steps an episode leaves out are charged at the task's worst reward rate"
        else:
            ending = "no charge: the rewards are earned, an early end forfeits the rest"
        click.echo(f"    ending early: {ending}")
        click.echo(f"    not built: {cls.not_built or 'nothing of its scenario'}")
        declared = cls.declared()
        click.echo(f"    parameters:{'' if declared else ' -'}")
        for key, spec in declared.items():
            click.echo(f"        {spec.describe(key)}{f': {spec.meaning}' if spec.meaning else ''}")
    _task_robot_table()


def _task_robot_table() -> None:
    """`episodic tasks`' table: each task on each robot found by name, ✔ when the robot has what
    the task needs (its scene is then placed in the robot's frame), else a note saying why not."""
    from episodic.interface.robot import RobotError, list_robots, load_robot
    from episodic.task import TaskError
    from episodic.tasks import registry

    try:
        classes = registry()
    except TaskError:
        classes = {}  # a package that cannot be loaded is named above
    robots, notes, rows = [], [], []
    for entry in list_robots():
        try:
            robots.append(load_robot(entry.name))
        except RobotError as exc:
            click.echo(f"robot {entry.name}: cannot be loaded: {exc}")
    for name, cls in classes.items():
        cells = []
        for robot in robots:
            why = cls.needs.unmet(robot)
            if why and why not in notes:
                notes.append(why)
            cells.append(f"({notes.index(why) + 1})" if why else "✔")
        rows.append((name, cells))
    width = max([len("task"), *(len(name) for name, _ in rows)])
    columns = [max(len(robot.name), 4) for robot in robots]
    click.echo("\ntask x robot (✔: runs there, its scene placed in the robot's frame; (n): why not, below)")
    click.echo("  ".join([f"{'task':<{width}}", *(f"{r.name:<{w}}" for r, w in zip(robots, columns))]).rstrip())
    for name, cells in rows:
        click.echo("  ".join([f"{name:<{width}}", *(f"{c:<{w}}" for c, w in zip(cells, columns))]).rstrip())
    for i, why in enumerate(notes, 1):
        click.echo(f"({i}) {why}")


def _parse_params(values: tuple[str, ...]) -> dict[str, str]:
    params = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{item}': use NAME=VALUE", param_hint="--param")
        params[name.strip()] = value.strip()
    return params


def _live_view(runner, title: str | None):
    """`serve --view`'s window on ``runner`` (episodic.tools.view) with ``title``; with ``runner``
    None only the check that one can be opened here. A usage error says what is missing."""
    from episodic.tools.view import LiveView, ViewError, check_viewable

    try:
        return check_viewable() if runner is None else LiveView(runner, title or "")
    except ViewError as exc:
        raise click.UsageError(str(exc)) from None


def _compress_logs(compress: bool) -> None:
    """With ``compress``: the logs this process (and the processes it starts) writes are stored
    compressed, with EPISODIC_LOG_FILTER's filter when set, else gzip (episodic.logs.compression);
    a usage error when that filter cannot be used here."""
    from episodic.logs.compression import DEFAULT, ENV, CompressionError, get

    if not compress:
        return
    try:
        os.environ[ENV] = get(os.environ.get(ENV, "").strip() or DEFAULT).name
    except CompressionError as exc:
        raise click.UsageError(str(exc)) from None


@main.command(short_help="Rewrite a finished LOG compressed, to OUT.")
@click.argument("log", type=click.Path(dir_okay=False))
@click.argument("out", type=click.Path(dir_okay=False), required=False)
@click.option("--filter", "filter_name", type=click.Choice(["gzip", "blosc"]), default="gzip", show_default=True,
              help="gzip: readable everywhere; blosc: Blosc zstd, needs `pip install 'episodic[compact]'` to write "
                   "and to read.")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUT (OUT = LOG compacts it in place).")
def compact(log: str, out: str | None, filter_name: str, overwrite: bool) -> None:
    """Rewrite the finished LOG with its datasets compressed, to OUT (default: <log name>_compact.h5
    beside it; LOG itself to compact it in place).

    Every group, dataset, attribute and value stays as it was, and every command reads the
    compacted log as the original (checked before OUT is written: the copy is read back and
    compared). A ball-in-a-cup log becomes about 1.5x smaller, a reach log about 1.3x. A log a
    runner is still writing is refused."""
    from episodic.tools.compact import CompactError, compact as run_compact

    path = _open_log(log)
    try:
        done = run_compact(path, out, filter_name, overwrite)
    except (CompactError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    n = max(done.episodes, 1)
    click.echo(f"wrote {done.out} ({done.filter}): {done.bytes_before / 1e6:.2f} MB -> {done.bytes_after / 1e6:.2f} "
               f"MB ({done.ratio:.2f}x smaller; {done.bytes_after / n / 1e6:.3f} MB per episode of "
               f"{done.episodes}) in {done.seconds:.1f} s")
    if done.left_out:
        click.echo("left out, the rows of a write cut short (their text never reached the file): "
                   + ", ".join(f"the last {n} of {table}" for table, n in done.left_out.items()))


def _channel_name(ctx, param, value: str) -> str:
    """--channel, checked before anything is started (a clear usage error, not a traceback)."""
    from episodic.bridge.channel import check_name

    try:
        return check_name(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@click.option("--task", default="reach", show_default=True,
              help="Task: a name (see `episodic tasks`: built-in or of an installed task package) or a "
                   "'module:Class' spec of an importable module.")
@click.option("--robot", default="wam", show_default=True, help="Robot name (see `episodic robots`).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Task parameter; repeatable.")
@click.option("--channel", default="default", show_default=True, callback=_channel_name,
              help="Shared-memory channel name.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="HDF5 log of the run, a new file (default: no log file).")
@click.option("--overwrite", is_flag=True,
              help="Replace an existing --log file (never one another process has open).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the run.")
@click.option("--learner-timeout", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds of learner silence after which a running episode is aborted.")
@click.option("--max-log-steps", default=60_000, show_default=True, type=click.IntRange(min=1),
              help="Largest episode log (steps) a client can fetch over the channel.")
@click.option("--mode", type=click.Choice(["blocking", "realtime"]), default="blocking", show_default=True,
              help="blocking: time stops while the runner waits (reproducible); realtime: the simulation "
                   "ticks at the control rate and the robot holds while the learner is silent.")
@click.option("--priority", type=click.IntRange(1, 99), default=None,
              help="Realtime mode: run the loop under SCHED_FIFO at this priority, its memory locked (root, "
                   "CAP_SYS_NICE or an rtprio limit; exit 1 when not permitted). Default: 50 where permitted, "
                   "else normal scheduling.")
@click.option("--quiet", "-q", is_flag=True, help="No line per finished episode.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="Threads that evaluate a batch of episodes (a learner's Client.evaluate).")
@click.option("--max-batch", default=256, show_default=True, type=click.IntRange(1, 1 << 28),
              help="Most episodes in one batch command (a client splits larger populations).")
@click.option("--max-batch-commands", default=4096, show_default=True, type=click.IntRange(1, 1 << 28),
              help="Most commands in one batch, all its episodes together.")
@click.option("--max-batch-values", default=1 << 21, show_default=True, type=click.IntRange(1, 1 << 36),
              help="Most float64 values (trajectories, gains, contexts) in one batch.")
@click.option("--robot-at", "robot_at", default=None, metavar="HOST:PORT",
              help="Drive the robot served there over UDP (`episodic robot-server`, docs/drivers.md) in realtime "
                   "episodes, instead of a simulation.")
@click.option("--max-state-age", default=0.05, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="With --robot-at: seconds after which the robot's state is stale; a segment then ends with "
                   "SAFETY_ABORT and the runner holds.")
@click.option("--compress", is_flag=True,
              help="Store the --log compressed (gzip; EPISODIC_LOG_FILTER=blosc for Blosc): about 1.5x smaller for "
                   "some write CPU (`episodic compact` shrinks a finished log).")
@click.option("--view", is_flag=True,
              help="Show the arm, the task's objects and the running episode in a window (MuJoCo's viewer; needs a "
                   "display and `pip install 'episodic[view]'`); the runner's numbers stay the same.")
@click.option("--sl-shm", is_flag=True,
              help="Serve SL's own SysV shared memory and semaphores instead of the channel, for a learner MEX "
                   "built from SL's sources (needs the 'sl' extra: pip install 'episodic[sl]').")
@click.option("--sl-keys", default=(100_000, 50_000), show_default=True, type=(int, int),
              metavar="SEGMENTS SEMAPHORES",
              help="--sl-shm: the first SysV keys of SL's three segments and of its semaphores.")
def serve(task: str, robot: str, params: tuple[str, ...], channel: str, log_path: str | None, overwrite: bool,
          seed: int, learner_timeout: float, max_log_steps: int, mode: str, priority: int | None, quiet: bool,
          threads: int, max_batch: int, max_batch_commands: int, max_batch_values: int, robot_at: str | None,
          max_state_age: float, compress: bool, view: bool, sl_shm: bool, sl_keys: tuple[int, int]) -> None:
    """Serve episodes to a learner over a shared-memory channel until Ctrl-C, SIGTERM, SIGHUP or SIGQUIT.

    The channel name is 1 to 64 letters, digits, '_' or '-' (per user: two users may both serve
    'default'). A segment holds at most 20000 samples and, after resampling to the control rate,
    lasts at most 20000 control steps (40 s on the WAM at 500 Hz); a wait_time is at most 60 s;
    a context or task-gain vector has at most 64 values; array values are at most 1e6 in
    magnitude. docs/protocol.md describes the channel for clients in other languages.

    --log is a new file, readable by its owner only: an existing file or symbolic link there is
    refused unless --overwrite, which replaces it (a link is replaced, never written through). A
    reply whose command ended an episode that could not be logged (e.g. a full disk) says so in
    its message. A learner faster than the disk waits for the log's writer (at most 8 episodes
    and 8 MiB queued), so every episode finished over a second before the runner is killed is on
    disk. The log can be read while the runner serves (`episodic watch`, info, plot, replay,
    export, h5py): the runner opens it only to write and closes it between writes.

    Memory: with --log, a long episode's steps go to the log as it runs (in both modes), so the
    runner holds at most about 50 MB of an episode (4 MiB of earlier steps, one command's steps: a
    segment and a wait_time hold, and the writer's 8 MiB queue). Without --log the running
    episode's steps are held, about 0.8 kB per control step, at most 1,000,000 of them (about 0.8
    GB): a command that could take the episode past that is refused with INVALID_PAYLOAD and a
    message (a realtime learner's silence that would, ends the episode with TIMEOUT). A batch's
    episodes are held until it ends: a batch whose episodes could run more than 1,000,000 control
    steps together (about 0.8 GB) is refused with INVALID_PAYLOAD before it runs.

    Each finished episode prints a line (unless --quiet): its number in the log, the learner's
    episode id, the return, the flag, the control steps and whether it succeeded. A line that
    would have to wait for a full pipe nobody reads is dropped instead (the next says how many
    were), so the runner never waits for its output.

    A batch command (a learner's population, docs/protocol.md section 8) is evaluated on
    --threads threads, each episode as the first of a fresh runner (bit-identical to it sent
    alone to a new runner), and logged with its batch number; a realtime runner refuses batches.

    A realtime runner runs under SCHED_FIFO with its memory locked, as a robot's control thread
    runs: at --priority (exit 1, saying what would allow it, when not permitted), else at 50 if
    permitted. The log's root attribute 'scheduling' records how the run was scheduled.

    --robot-at HOST:PORT drives a robot across a network in realtime mode (episodic.runtime.link):
    a state older than --max-state-age aborts the segment (SAFETY_ABORT, the runner holds), a reply
    says what the link suffered during its command, and the log's root attribute link_NNNNNN holds
    episode NNNNNN's link statistics (round trip p50/p99, states lost and reordered)."""
    import json

    from episodic.bridge.serve import serve as run_serve
    from episodic.bridge.sl import SLRunner
    from episodic.interface.robot import RobotError
    from episodic.logs import LogError
    from episodic.runtime.scheduling import describe
    from episodic.task import TaskError
    from episodic.tasks import make_task
    from episodic.tools.batch import evaluate_into
    from episodic.tools.progress import Lines

    _compress_logs(compress)
    if view:
        _live_view(None, None)  # before the runner exists: a refusal leaves no log file behind
    if robot_at is not None:
        mode = "realtime"  # a robot keeps to the wall clock
    if priority is not None and mode != "realtime":
        raise click.ClickException("--priority is for --mode realtime (a blocking runner does not keep to the wall "
                                   "clock): add --mode realtime or leave out --priority")
    if priority is not None:
        _realtime_scheduling(priority)  # before the runner exists: a refusal leaves no log file behind

    def ready(endpoint) -> None:
        scheduling = describe()  # as episodic.bridge.serve left it (a realtime runner: SCHED_FIFO if permitted)
        if runner.log is not None:
            runner.log.set_attrs({"scheduling": json.dumps(scheduling.as_dict())})
        for warning in (scheduling.memory_note, scheduling.throttling_warning()):
            if warning:
                click.echo(warning, err=True)
        how = "" if priority is None else f", {scheduling.summary()}"
        where = f"SL's SysV keys {sl_keys[0]} and {sl_keys[1]}" if sl_shm else f"channel '{channel}'"
        click.echo(f"serving task {task} on robot {robot}, {mode} mode{how}, {where} "
                   f"(pid {os.getpid()}){f', log {log_path}' if log_path else ''}; stop with Ctrl-C")

    try:
        if robot_at is not None:
            from episodic.runtime.link import network_runner
            runner = network_runner(make_task(task, _parse_params(params)), robot, robot_at, make=SLRunner,
                                    max_age=max_state_age, log=log_path, seed=seed, keep_episodes=False,
                                    overwrite=overwrite)
        else:  # SL's layout too (episodic.bridge.sl)
            runner = SLRunner(make_task(task, _parse_params(params)), robot, log=log_path, seed=seed,
                              keep_episodes=False, mode=mode, overwrite=overwrite)
        lines = Lines()
        def batch(episodes, keep_steps: bool):
            return evaluate_into(runner, episodes, threads=threads, keep_steps=keep_steps)

        if not quiet:
            runner.subscribe(lambda ep: lines(_episode_line(ep)))
        with _live_view(runner, f"{task} on {robot}, {mode}") if view else contextlib.nullcontext():
            run_serve(runner, channel, learner_timeout=learner_timeout, max_log_steps=max_log_steps, ready=ready,
                      batch=batch if mode == "blocking" else None,
                      batch_sizes=(max_batch, max_batch_commands, max_batch_values), priority=priority,
                      transport=_sl_transport(sl_keys) if sl_shm else None)
    except (TaskError, RobotError, LogError, ValueError, RuntimeError, ConnectionError) as exc:
        raise click.ClickException(str(exc)) from None


@main.command("robot-server", short_help="Serve a simulated robot over UDP, as a robot's real-time controller does.")
@click.option("--robot", default="wam", show_default=True, help="Robot name (see `episodic robots`).")
@click.option("--task", default="reach", show_default=True,
              help="The task whose tool the arm carries (the runner's scene has the same).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Task parameter; repeatable.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=7700, show_default=True, type=click.IntRange(0, 65535),
              help="UDP port to listen on (0: any free one; the first line says which).")
@click.option("--watchdog", default=0.05, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds without a command after which the robot brakes and holds.")
@click.option("--priority", type=click.IntRange(1, 99), default=None,
              help="Run the loop under SCHED_FIFO at this priority, its memory locked (exit 1 when not "
                   "permitted). Default: 50 where permitted, else normal scheduling.")
def robot_server(robot: str, task: str, params: tuple[str, ...], host: str, port: int, watchdog: float,
                 priority: int | None) -> None:
    """Run ROBOT in MuJoCo at its control rate and serve it over UDP until Ctrl-C or SIGTERM: it
    streams its joint state and takes joint commands in the datagrams of episodic.runtime.link
    (docs/drivers.md), and keeps its own safety: a watchdog that brakes and holds when commands
    stop, the joint range, the velocity limits and a status word in every state.
    `episodic serve --robot-at HOST:PORT` drives it."""
    from episodic.interface.robot import RobotError, load_robot
    from episodic.runtime.scene import build_scene
    from episodic.task import TaskError
    from episodic.tasks import make_task
    from episodic.tools.robot_server import run

    try:
        scene = build_scene(load_robot(robot), make_task(task, _parse_params(params)))
        run(scene, host, port, watchdog, priority, announce=lambda line: click.echo(line))
    except (TaskError, RobotError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None


def _sl_transport(keys: tuple[int, int]):
    """`serve --sl-shm`: SL's SysV transport on SL's numbering from ``keys`` (episodic.bridge.sl_shm)."""
    try:
        from episodic.bridge.sl_shm import SLKeys, SLShm
    except ImportError as exc:
        raise click.ClickException(f"--sl-shm needs sysv_ipc ({exc}): pip install 'episodic[sl]'") from None
    return lambda runner: SLShm(runner, SLKeys.numbered(*keys))


def _realtime_scheduling(priority: int):
    """SCHED_FIFO at ``priority`` and locked memory for this process (episodic.runtime.scheduling): the
    Scheduling obtained, or a ClickException saying what would allow it when not permitted."""
    from episodic.runtime.scheduling import SchedulingError, set_realtime

    try:
        return set_realtime(priority)
    except SchedulingError as exc:
        raise click.ClickException(f"{exc}; or leave out --priority") from None


def _batch_setup(batch, task: str | None, robot: str | None, params: tuple[str, ...],
                 seed: int | None) -> tuple[str, dict, str, int]:
    """Task, parameters, robot and seed of `episodic evaluate`: the options, else the file's
    root attributes (a log's metadata; its task by the spec it records, TaskError naming the package
    to install when that cannot be imported), else robot wam and seed 0."""
    from episodic.interface.robot import RobotError, check_named_by_file
    from episodic.tasks import logged_task, portable_spec

    meta = batch.metadata
    file_task = meta.get("task")
    if task is None and file_task is None:
        raise click.UsageError("the file names no task (root attribute 'task'): give --task NAME")
    if task is None or task == file_task:
        cls = logged_task(meta)
        task, stored = portable_spec(cls) or str(file_task), meta.get("task_params")
    else:
        stored = None
    if stored is not None and not isinstance(stored, dict):
        raise click.ClickException(f"the file's task_params attribute must be a JSON object, got {stored!r}")
    if robot is None:
        robot = str(meta.get("robot", "wam"))
        try:
            check_named_by_file(robot)
        except RobotError as exc:
            raise click.UsageError(str(exc)) from None
    return (task, {**(stored or {}), **_parse_params(params)}, robot,
            int(meta.get("seed", 0)) if seed is None else seed)


@main.command(short_help="Evaluate the episodes of BATCH.h5 (their commands) on threads or a Dask cluster.")
@click.argument("batch", type=click.Path(dir_okay=False))
@click.option("--task", default=None, help="Task name or 'module:Class' spec.  [default: the file's task, as in "
                                           "a log]")
@click.option("--robot", default=None, help="Robot name.  [default: the file's 'robot' attribute, else wam]")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Task parameter; repeatable; over the file's 'task_params' (those apply to the file's task).")
@click.option("--seed", default=None, type=int, help="Seed of the run.  [default: the file's 'seed', else 0]")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="Threads evaluating episodes (in this process, or per chunk on each Dask worker).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Evaluate on the Dask cluster of this scheduler (e.g. tcp://10.0.0.5:8786); needs "
                   "`pip install 'episodic[dask]'` here and on the workers.")
@click.option("--chunk-size", default=8, show_default=True, type=click.IntRange(min=1),
              help="Episodes per chunk sent to a Dask worker.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Also write the evaluated episodes to this new run log (replayable with `episodic replay`).")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out file (never one another process has open).")
@click.option("--compress", is_flag=True, help="Store the --out log compressed (gzip; see `episodic serve --help`).")
def evaluate(batch: str, task: str | None, robot: str | None, params: tuple[str, ...], seed: int | None,
             threads: int, scheduler: str | None, chunk_size: int, out: str | None, overwrite: bool,
             compress: bool) -> None:
    """Evaluate the episodes of BATCH (an HDF5 file of their commands) and print each one's return.

    Each episode runs as the first episode of a fresh runner (blocking simulation), so the
    results do not depend on the order, the threads or the machines. Prints a row per episode
    (its position in the batch, return, flag, success) and a summary (episodes, episodes/s,
    mean return, successes); on a terminal a progress bar on stderr counts the episodes. --out
    writes them as batch 0 of a new run log. A run log is itself a batch file (its episodes
    written whole, with its task, parameters, robot and seed as defaults).

    \b
    BATCH.h5, a run log's commands layout (groups taken in the order of their numbers):
      /                            attrs, optional: task, task_params (JSON text), robot, seed
      /episodes/<n>/commands/<k>/  a group per episode (n = 0, 1, ...), in it one per command
                                   (k = 0, 1, ...: the start, then its segments and gain sets)
    Scalars of a command, as attributes or 1-element datasets (as h5create/h5write make them):
      kind          0 start, 1 trajectory, 2 gains, 3 reset  [absent: 0 for k = 0, 2 with
                    a kp or task_gains dataset, else 1]
      index         0 for the start, then 1 .. max_commands  [absent: k]
      max_commands  the episode's segments and gain sets     [absent: its commands - 1]
      episode_id    an integer                               [absent: the episode's place + 1]
      rate          Hz of a trajectory's samples             [absent: the control rate]
      wait_time     s held after a trajectory or gain set    [absent: 0]
      feedforward   of a gain set: 0 none, 1 gravity compensation, 2 inverse dynamics of the
                    desired state, 3 of the measured state   [absent: 1]
    Arrays of a command, float64 datasets:
      start         context (n_context,) and posture (n_dofs,) rad, both optional
      trajectory    q (n_samples, n_dofs) rad; qd, qdd (n_samples, n_dofs) rad/s, rad/s^2 optional
      gains         kp, kd, ki (n_dofs,); task_gains (n_gains,) optional
    Shapes as h5py (row-major) shows them. Octave and Matlab write column-major, so a matrix
    is written transposed: q of 500 samples of 7 joints is 7 x 500 in Octave
    (h5create(f, d, [7 500]); h5write(f, d, q')). A vector may be a row or a column.
    """
    import time

    from episodic.interface.robot import RobotError
    from episodic.logs import LogError
    from episodic.task import TaskError
    from episodic.tools.batch import BatchFileError, VersionMismatch, evaluate as run_evaluate, read_batch
    from episodic.tools.progress import Progress

    _compress_logs(compress)
    try:
        read = read_batch(batch)
    except BatchFileError as exc:
        raise click.ClickException(str(exc)) from None
    for name, why in sorted(read.skipped.items()):
        click.echo(f"warning: episode {name} not evaluated: {why}", err=True)
    try:
        task_name, task_params, robot_name, run_seed = _batch_setup(read, task, robot, params, seed)
    except TaskError as exc:
        raise click.ClickException(str(exc)) from None
    n = len(read.episodes)
    where = f"{threads} thread{'s' if threads != 1 else ''}"
    try:
        with _dask_executor(scheduler) as executor:
            if scheduler is not None:
                where = f"the Dask cluster at {scheduler} ({where} per chunk of {chunk_size})"
            click.echo(f"evaluating {n} episode{'s' if n != 1 else ''} of {batch}: task {task_name}"
                       f"{f' ({_format_value(task_params)})' if task_params else ''}, robot {robot_name}, "
                       f"seed {run_seed}, on {where}")
            began = time.perf_counter()
            with Progress("evaluating") as bar:
                results = run_evaluate(read.episodes, (task_name, task_params), robot_name, threads=threads,
                                       seed=run_seed, executor=executor, chunk_size=chunk_size, log=out,
                                       overwrite=overwrite, progress=bar)
            seconds = time.perf_counter() - began
    except (TaskError, RobotError, LogError, VersionMismatch, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    head = f"{'episode':>7} {'return':>14} {'flag':<18} {'success':>7}"
    click.echo(head)
    click.echo("-" * len(head))
    for position, r in enumerate(results):
        click.echo(f"{position:>7} {r.episode_return:>14.8g} {r.flag.name:<18} {'yes' if r.success else 'no':>7}")
    returns = [r.episode_return for r in results]
    click.echo(f"{n} episodes in {seconds:.2f} s ({n / seconds:.1f} episodes/s): mean return "
               f"{sum(returns) / n:.6g}, {sum(r.success for r in results)} of {n} successful")
    if out is not None:
        click.echo(f"log written to {out} (batch 0; `episodic replay {out}` re-runs it)")


@contextlib.contextmanager
def _dask_executor(scheduler: str | None):
    """A Dask client's executor for the scheduler at ``scheduler`` (None: no executor), closed after."""
    if scheduler is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise click.ClickException("--scheduler needs Dask: pip install 'episodic[dask]' (here and on the "
                                   "workers)") from None
    try:
        client = Client(scheduler, timeout=10)
    except (OSError, TimeoutError, ValueError) as exc:
        raise click.ClickException(f"cannot reach the Dask scheduler at {scheduler} ({exc}); start one with "
                                   f"`dask scheduler` and workers with `dask worker {scheduler}`") from None
    with client:
        yield client.get_executor()


@main.command(short_help="Record a demonstration: taught in simulation, or an episode of a log.")
@click.argument("task", required=False)
@click.option("--from-log", "log", type=click.Path(dir_okay=False), default=None,
              help="Take the demonstration from an episode of this run log instead of teaching it.")
@click.option("--episode", "-e", "number", cls=EpisodeOption, one=True, absent=0,
              help="With --from-log: the episode number (sequence number in the log).  [default: 0]")
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True, help="The demonstration file to write.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out file.")
@click.option("--offset", type=float, default=None,
              help="Teaching: rad added to every elbow knot of the reference swing the teacher follows.  "
                   "[default: 0.05]")
@click.option("--stiffness", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Teaching: N/m of the teacher's hand spring.  [default: 2000]")
@click.option("--seed", type=int, default=None, help="Teaching: seed of the taught episode.  [default: 0]")
def demonstrate(task: str | None, log: str | None, number: int, out: str, overwrite: bool, offset: float | None,
                stiffness: float | None, seed: int | None) -> None:
    """Record a demonstration for imitation learning and write it to OUT: t, q, qd, qdd at the
    control rate, the robot, the task and its parameters, the source, the seed and the software
    versions (an HDF5 file; its layout is in episodic/learning/demonstration.py).

    \b
      episodic demonstrate ball_in_cup --out demo.h5
      episodic demonstrate --from-log LOG.h5 --episode N --out demo.h5

    The first teaches the ball-in-a-cup swing on the WAM in simulation: the arm, under gravity
    compensation, is pulled by a spring-damper towards a teacher's hand that follows the hand
    path of the reference swing bent at the elbow by --offset rad; like a human's demonstration
    it misses the cup by centimetres. The second takes the motion of episode N of a run log (its
    steps from segment 1 on). Prints one line: steps, duration, source, and for ball_in_cup where
    the ball came down."""
    from episodic.learning.demonstration import (
        BALL_IN_CUP,
        DEMO_OFFSET,
        TEACHER_STIFFNESS,
        BallFlight,
        DemonstrationError,
        ball_in_cup_demonstration,
        from_log,
    )
    from episodic.task import TaskError

    if (task is None) == (log is None):
        raise click.UsageError("give either a TASK to teach (ball_in_cup) or --from-log LOG.h5")
    if task is not None and task != BALL_IN_CUP:
        raise click.UsageError(f"there is a scripted teacher for {BALL_IN_CUP} only, not '{task}'; take a "
                               f"demonstration of another task from a log: --from-log LOG.h5 --episode N")
    if log is not None and (offset, stiffness, seed) != (None, None, None):
        raise click.UsageError("--offset, --stiffness and --seed set the teaching; a demonstration from a log "
                               "takes none of them")
    if Path(out).exists() and not overwrite:
        raise click.ClickException(f"{out} exists; choose another --out, or replace it with --overwrite")
    try:
        if log is not None:
            demo = from_log(_open_log(log), number)
        else:
            demo = ball_in_cup_demonstration(offset=DEMO_OFFSET if offset is None else offset, seed=seed or 0,
                                             stiffness=TEACHER_STIFFNESS if stiffness is None else stiffness)
        demo.save(out, overwrite=overwrite)
    except (DemonstrationError, TaskError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    line = (f"{out}: {len(demo.t)} steps, {demo.duration:.3f} s at {1 / demo.dt:g} Hz, task {demo.task} on "
            f"{demo.robot}, {demo.source}")
    if demo.task == BALL_IN_CUP and demo.task_state is not None:
        line += f"; {BallFlight.of_demonstration(demo).summary()}"
    click.echo(line)


def _episode_line(ep) -> str:
    """`episodic serve`'s line for a finished episode (an episodic.logs.episode.EpisodeBuffer)."""
    return (f"episode {ep.number}: id {ep.episode_id}, return {ep.episode_return:.6g}, flag {ep.flag_name}, "
            f"{ep.n_steps} steps, success {'yes' if ep.success else 'no'}")


@main.command()
@click.option("--out", default="runs/demo.h5", show_default=True, type=click.Path(dir_okay=False),
              help="HDF5 log the runner writes (replaced if it exists); the demonstration and the video go beside it.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the run and of PoWER's exploration.")
@click.option("--iterations", default=None, type=click.IntRange(1, 1000),
              help="PoWER iterations at most; it stops once 80 % of the last 20 rollouts caught.  [default: 10]")
@click.option("--quick", is_flag=True, help="Two iterations of four rollouts and no video: everything runs, briefly.")
@click.option("--video/--no-video", default=True, show_default=True,
              help="Render the first catch (needs the media extra).")
def demo(out: str, seed: int, iterations: int | None, quick: bool, video: bool) -> None:
    """Ball-in-a-cup learned end to end: a runner served in a subprocess, a demonstration that
    misses, its imitation by a DMP, PoWER over the bridge with one batch per iteration, the log."""
    import signal

    from episodic.cli.demo import ITERATIONS, QUICK, RELIABLE, SAMPLES, DemoError, run_demo

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: the runner stopped, the channel removed
    n_iter, samples = QUICK if quick else (ITERATIONS if iterations is None else iterations, SAMPLES)
    click.echo(f"ball_in_cup on wam: a blocking runner in a subprocess and a learner over shared memory; "
               f"PoWER, {samples} rollouts per iteration, at most {n_iter} iterations")
    try:
        result = run_demo(out, seed, n_iter, samples, video=video and not quick, echo=click.echo)
    except DemoError as exc:
        raise click.ClickException(str(exc)) from None
    curve = result.curve
    window, rate = RELIABLE
    first, reliable = curve.first_success, curve.reliable_after(window, rate)
    rollouts = curve.rows[-1].rollouts
    click.echo(f"first catch at rollout {first}" if first else f"no catch in {rollouts} rollouts")
    if reliable:
        click.echo(f"stopping rule met: {rate:.0%} of the last {window} rollouts caught after {reliable} rollouts")
    elif len(curve.successes) < window:
        click.echo(f"stopping rule not met: {len(curve.successes)} rollouts ran, fewer than the {window} it looks at")
    else:
        best = max(sum(curve.successes[k - window : k]) for k in range(window, len(curve.successes) + 1))
        click.echo(f"stopping rule not met: at most {best} of any {window} consecutive rollouts caught (it needs "
                   f"{rate:.0%}) in the {len(curve.rows) - 1} iterations run; ball-in-a-cup is hard for PoWER at "
                   f"this version's physics (docs/learning.md's classic experiment: how far 201 rollouts get on 10 "
                   f"seeds); try --iterations or another --seed")
    click.echo(f"final policy: return {curve.final_return:.3f}, {'caught' if curve.final_success else 'missed'} "
               f"(the table's last line)")
    click.echo(f"runner stopped; log written to {out} ({result.logged_episodes} episodes, "
               f"{result.seconds:.1f} s in all)")
    if result.video is not None:
        click.echo(f"video of the first catch (episode {result.first_catch}): {result.video}")
    click.echo(f"  inspect it:  episodic info {out}")
    click.echo(f"  replay it:   episodic replay {out}")


main.add_command(robots)

if __name__ == "__main__":  # pragma: no cover
    main()
