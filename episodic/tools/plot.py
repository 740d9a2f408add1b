"""Plots of a run log (matplotlib, drawn off-screen with its Agg canvas; ``pip install
'episodic[plot]'``).

One episode (:func:`episode_figure`): per joint, the measured position q against the desired
q_d, the tracking error q_d - q and the applied torque against its limits; then each of the
task's state columns and the step reward with the return so far. Time runs from the start of
the motion (the first step of command 1), so the move to the start posture (shaded) has negative
times. A whole run (:func:`run_figure`): the return and success of each episode, with their
running means (a learning curve). A summary page (:func:`summary_figure`): that learning curve, a
picture of the best episode's end drawn by episodic.tools.render, and the run in numbers.

Plain numbers on every axis (no offset such as "1e-5 - 1.57"); a joint whose position moves less
than MOTIONLESS over the episode is drawn flat, on a FLAT_SPAN wide axis around its mean, so that
noise does not look like motion. The state columns and the step reward are labelled with the
task's ``column_docs`` (unit and meaning of each column) and ``reward_doc``; a column the task does
not describe is plotted with its name alone.
"""
from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from episodic.interface.columns import STEP_COLUMNS
from episodic.interface.files import SHARED, replacing
from episodic.interface.vocabulary import Flag
from episodic.logs import StoredEpisode, read_episodes, read_metadata, read_summary

if TYPE_CHECKING:
    from matplotlib.figure import Figure  # the plot extra: imported where a plot is drawn

PLOT_EXTRA = "pip install 'episodic[plot]'"
DPI = 72
WIDTH = 13.0  # in
ROW_HEIGHT = 1.7  # in per row of axes
HEAD = 1.2  # in above the first row, for the figure's title and legend
MARGINS = (1.0, 0.25, 0.55)  # in left, right and below the axes of an episode's figure
STATE_COLUMNS_PER_ROW = 3
RUN_SIZE = (10.0, 6.5)  # in, the learning curve
SUMMARY_SIZE = (15.0, 7.5)  # in, the summary page
THUMBNAIL = (480, 360)  # px, the best episode's picture on the summary page
MOTIONLESS = 1e-3  # rad: a joint whose q and q_d each range over less than this is drawn flat
FLAT_SPAN = 0.1  # rad: the height of a motionless joint's position axis, centred on its mean
TITLE_CHARS = 70  # a panel's title is wrapped at this many characters
UNITS = {c.name: c.unit for c in STEP_COLUMNS}
START_SHADE = "0.9"  # the move to the start posture's background
COLOURS = {"desired": "tab:orange", "measured": "tab:blue", "limit": "tab:red", "success": "tab:green",
           "failure": "tab:red", "mean": "black"}


class PlotError(Exception):
    """A plot cannot be made (matplotlib missing, nothing to plot); the message says what to do."""


def _figure(width: float, height: float, layout: Literal["constrained"] | None = "constrained") -> Figure:
    """A matplotlib Figure of ``width`` x ``height`` in drawn by the Agg canvas (no pyplot, no
    window, no global backend) with ``layout``; PlotError naming the extra when matplotlib is
    missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError(f"plotting needs matplotlib, which is not installed: {PLOT_EXTRA}") from None
    fig = Figure(figsize=(width, height), dpi=DPI, layout=layout)
    FigureCanvasAgg(fig)
    return fig


@dataclass(frozen=True)
class TaskDocs:
    """What the task of a log says about its logged numbers: ``columns`` state column -> (unit,
    meaning), ``reward`` what a step's reward is (each empty when it says nothing)."""

    columns: dict[str, tuple[str, str]]
    reward: str


def task_docs(meta: dict) -> TaskDocs:
    """The :class:`TaskDocs` of the task of a log whose metadata is ``meta`` (its ``column_docs``
    and ``reward_doc``); empty, with a warning naming what to install, when the task cannot be
    imported here (the plot does not need it otherwise)."""
    from episodic.tasks import TaskError, logged_task

    try:
        cls = logged_task(meta)
    except TaskError as exc:
        warnings.warn(f"the state columns are plotted without units and meanings: {exc}", stacklevel=2)
        return TaskDocs({}, "")
    return TaskDocs(dict(getattr(cls, "column_docs", None) or {}), str(getattr(cls, "reward_doc", "") or ""))


def _label(text: str, unit: str) -> str:
    return f"{text} [{unit}]" if unit else text


def _title(text: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, TITLE_CHARS))


def plain_numbers(ax) -> None:
    """Tick labels of ``ax`` as the plain numbers, never as an offset plus small differences."""
    for axis in (ax.xaxis, ax.yaxis):
        axis.get_major_formatter().set_useOffset(False)


def motionless(*series: np.ndarray) -> bool:
    """Whether each of ``series`` (rad) ranges over less than MOTIONLESS."""
    return all(np.ptp(values) < MOTIONLESS for values in series)


def draw_flat(ax, values: np.ndarray) -> None:
    """Give ``ax`` a y axis FLAT_SPAN high centred on the mean of ``values``."""
    middle = float(np.mean(values))
    ax.set_ylim(middle - FLAT_SPAN / 2, middle + FLAT_SPAN / 2)


def motion_time(ep: StoredEpisode) -> np.ndarray:
    """(n,) s: each step's time since the start of the motion (the first step of command 1; of the
    episode when it has none)."""
    t = ep.steps["time"]
    moving = np.flatnonzero(ep.steps["index"] >= 1)
    return t - t[moving[0] if moving.size else 0]


def episode_size(n_dofs: int, n_state: int) -> tuple[float, float]:
    """The size (width, height) in of an episode's figure."""
    rows = n_dofs + math.ceil(n_state / STATE_COLUMNS_PER_ROW) + 1
    return WIDTH, HEAD + ROW_HEIGHT * rows


def episode_figure(ep: StoredEpisode, meta: dict):
    """The figure of one episode (see the module's description). Axes are labelled; their
    lines hold the log's arrays as they are (the tracking error in mrad)."""
    steps = ep.steps
    if not len(steps.get("time", ())):
        raise PlotError(f"episode {int(ep.name)} has no steps to plot")
    settings = meta.get("robot_settings", {})
    q, q_d, u = steps["q"], steps["q_d"], steps["u"]
    n_dofs = q.shape[1]
    joints = list(settings.get("joint_names", [f"joint {j + 1}" for j in range(n_dofs)]))
    limits = np.asarray(settings.get("torque_limit", np.full(n_dofs, np.nan)), float)
    columns = list(ep.state_columns)
    docs = task_docs(meta)
    t = motion_time(ep)
    width, height = episode_size(n_dofs, len(columns))
    fig = _figure(width, height, layout=None)  # laid out by hand: constrained layout takes seconds for ~40 axes
    rows = n_dofs + math.ceil(len(columns) / STATE_COLUMNS_PER_ROW) + 1
    grid = fig.add_gridspec(rows, 6, left=MARGINS[0] / width, right=1 - MARGINS[1] / width,
                            top=1 - HEAD / height, bottom=MARGINS[2] / height, hspace=0.6, wspace=1.1)
    first = None

    def axes(row: int, start: int, stop: int, title: str, ylabel: str):
        nonlocal first
        ax = fig.add_subplot(grid[row, start:stop], sharex=first)
        first = first or ax
        ax.set_title(_title(title), fontsize=10 if "\n" not in title else 9)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        plain_numbers(ax)
        if t[0] < 0:
            ax.axvspan(t[0], 0.0, color=START_SHADE, zorder=0)
        return ax

    for j, name in enumerate(joints):
        still = motionless(q[:, j], q_d[:, j])
        ax = axes(j, 0, 2, f"{name}: position" + (f" (still: moves < {MOTIONLESS * 1e3:g} mrad)" if still else ""),
                  _label("q", UNITS["q"]))
        ax.plot(t, q_d[:, j], color=COLOURS["desired"], label="desired q_d")
        ax.plot(t, q[:, j], color=COLOURS["measured"], label="measured q")
        if still:
            draw_flat(ax, q[:, j])
        ax = axes(j, 2, 4, f"{name}: tracking error q_d - q", "error [mrad]")
        ax.plot(t, 1e3 * (q_d[:, j] - q[:, j]), color=COLOURS["measured"])
        ax = axes(j, 4, 6, f"{name}: applied torque", _label("u", UNITS["u"]))
        ax.plot(t, u[:, j], color=COLOURS["measured"], label="u")
        if np.isfinite(limits[j]):
            ax.axhline(limits[j], color=COLOURS["limit"], linestyle="--", linewidth=1, label="torque limit")
            ax.axhline(-limits[j], color=COLOURS["limit"], linestyle="--", linewidth=1)
    legend(fig, t[0] < 0)
    state = steps.get("task_state", np.zeros((len(t), 0)))
    width = 6 // STATE_COLUMNS_PER_ROW
    for k, name in enumerate(columns):
        row, col = n_dofs + k // STATE_COLUMNS_PER_ROW, k % STATE_COLUMNS_PER_ROW
        unit, meaning = docs.columns.get(name, ("", ""))
        ax = axes(row, col * width, (col + 1) * width, f"{name}: {meaning}" if meaning else name,
                  _label(name, unit))
        ax.plot(t, state[:, k], color=COLOURS["measured"])
    reward = steps["reward"]
    ax = axes(rows - 1, 0, 3, f"step reward: {docs.reward}" if docs.reward else "step reward", "reward per step")
    ax.plot(t, reward, color=COLOURS["measured"])
    ax.set_xlabel("time since the motion started [s]")
    ax = axes(rows - 1, 3, 6, "return so far (sum of the step rewards)", "return")
    ax.plot(t, np.cumsum(reward), color=COLOURS["measured"])
    ax.set_xlabel("time since the motion started [s]")
    flag = int(ep.attrs.get("flag", 0))
    name = Flag(flag).name if flag in Flag._value2member_map_ else str(flag)
    fig.suptitle(f"{meta.get('task', '?')} on {meta.get('robot', '?')}: episode {int(ep.name)} "
                 f"(id {ep.attrs.get('episode_id', '?')}), return {float(ep.attrs.get('return', np.nan)):.5g}, "
                 f"{name}, {'success' if ep.attrs.get('success') else 'no success'}", fontsize=12,
                 y=1 - 0.15 / height, va="top")
    return fig


def legend(fig, shaded: bool) -> None:
    """The episode figure's legend, once below its title: the lines of the joints' panels and,
    when ``shaded``, the move to the start posture."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Line2D | Patch] = [Line2D([], [], color=COLOURS["desired"], label="desired q_d"),
                                     Line2D([], [], color=COLOURS["measured"],
                                            label="measured q, error, torque u, state, reward"),
                                     Line2D([], [], color=COLOURS["limit"], linestyle="--", label="torque limit")]
    if shaded:
        handles.append(Patch(color=START_SHADE, label="the move to the start posture"))
    fig.legend(handles=handles, loc="upper center", ncols=len(handles), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.5 / fig.get_figheight()))


def running_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The mean of each value and the up to ``window`` - 1 before it."""
    sums = np.cumsum(np.insert(np.asarray(values, float), 0, 0.0))
    n = np.arange(1, len(values) + 1)
    start = np.maximum(n - window, 0)
    return (sums[n] - sums[start]) / (n - start)


def run_window(n: int) -> int:
    """The running means' window for a run of ``n`` episodes: a tenth of it, at least 5 (at most n)."""
    return max(1, min(n, max(5, n // 10)))


def run_figure(rows: np.ndarray, meta: dict):
    """The learning curve of a run: ``rows`` as read_summary returns them (one per episode).
    Top: the return of each episode (successes and failures marked) and its running mean;
    bottom: the running success rate."""
    if not len(rows):
        raise PlotError("the log holds no episode to plot")
    fig = _figure(*RUN_SIZE)
    top, bottom = fig.subplots(2, 1, sharex=True)
    learning_curve(top, bottom, rows)
    success = rows["success"].astype(bool)
    fig.suptitle(f"{meta.get('task', '?')} on {meta.get('robot', '?')}: {len(rows)} episodes, "
                 f"{int(success.sum())} successful", fontsize=12)
    return fig


def learning_curve(top, bottom, rows: np.ndarray) -> None:
    """Draw the return of each of ``rows`` (read_summary's) with its running mean on the axes
    ``top``, the running success rate on ``bottom``."""
    number = rows["number"].astype(int)
    returns = rows["return"].astype(float)
    success = rows["success"].astype(bool)
    window = run_window(len(rows))
    top.plot(number, returns, color="0.6", linewidth=1, label="return")
    top.plot(number[success], returns[success], "o", color=COLOURS["success"], markersize=4, label="success")
    top.plot(number[~success], returns[~success], "x", color=COLOURS["failure"], markersize=4, label="no success")
    top.plot(number, running_mean(returns, window), color=COLOURS["mean"], label=f"mean of the last {window}")
    top.set_title("return per episode")
    top.set_ylabel("return")
    top.legend(loc="best", fontsize=8)
    top.grid(True, alpha=0.3)
    bottom.plot(number, 100 * running_mean(success, window), color=COLOURS["mean"])
    bottom.set_title(f"success rate over the last {window} episode{'s' if window != 1 else ''}")
    bottom.set_ylabel("success [%]")
    bottom.set_ylim(-5, 105)
    bottom.set_xlabel("episode (number in the log)")
    bottom.grid(True, alpha=0.3)
    bottom.xaxis.get_major_locator().set_params(integer=True)
    for ax in (top, bottom):
        plain_numbers(ax)


def best_picture(path: Path, number: int) -> tuple[np.ndarray | None, str]:
    """The picture (h, w, 3) uint8 of the last motion step of episode ``number`` of the log at
    ``path``, re-simulated and drawn by episodic.tools.render at THUMBNAIL pixels, and what it
    shows; None and the reason when it cannot be drawn here (no OpenGL, a log that cannot be
    re-simulated)."""
    from episodic.tools.render import EpisodeRenderer, RenderError, gl_backend, record

    try:
        gl_backend()
        rec = record(path, number)
        with EpisodeRenderer(rec, *THUMBNAIL) as pictures:
            return pictures.at_step(len(rec.states) - 1), f"episode {number} at its end ({rec.duration:.2f} s)"
    except RenderError as exc:
        return None, f"no picture of episode {number}: {exc}"


def summary_figure(path: Path, rows: np.ndarray, meta: dict):
    """The summary page of a run: its learning curve (:func:`learning_curve`) on the left, on the
    right a picture of the end of its best episode (the highest return; :func:`best_picture`)
    over the run in numbers and what the task's step reward is."""
    if not len(rows):
        raise PlotError("the log holds no episode to plot")
    returns = rows["return"].astype(float)
    success = rows["success"].astype(bool)
    best = int(np.argmax(returns))
    number = int(rows["number"][best])
    fig = _figure(*SUMMARY_SIZE)
    grid = fig.add_gridspec(2, 2, width_ratios=(1.25, 1), height_ratios=(1.6, 1))
    top, bottom = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0])
    bottom.sharex(top)
    learning_curve(top, bottom, rows)
    picture, shows = best_picture(path, number)
    thumb = fig.add_subplot(grid[0, 1])
    thumb.set_axis_off()
    thumb.set_title(f"the best episode: {shows}" if picture is not None else shows[:TITLE_CHARS], fontsize=10)
    if picture is not None:
        thumb.imshow(picture)
    text = fig.add_subplot(grid[1, 1])
    text.set_axis_off()
    window = run_window(len(rows))
    lines = [f"episodes: {len(rows)}, {int(success.sum())} successful ({100 * success.mean():.0f} %)",
             f"success over the last {window}: {100 * success[-window:].mean():.0f} %",
             f"return: best {returns[best]:.5g} (episode {number}), last {returns[-1]:.5g}, "
             f"mean {returns.mean():.5g}",
             f"mean of the last {window}: {returns[-window:].mean():.5g}"]
    reward = task_docs(meta).reward
    if reward:
        lines.append(_title(f"step reward: {reward}"))
    text.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=11, transform=text.transAxes)
    fig.suptitle(f"{meta.get('task', '?')} on {meta.get('robot', '?')} ({meta.get('mode', '?')} mode): "
                 f"{path.name}", fontsize=13)
    return fig


@dataclass
class Plotted:
    """What :func:`plot` wrote: ``what`` ("episode N" or "returns of N episodes") to ``out``;
    ``figure`` is the matplotlib Figure."""

    what: str
    out: Path
    figure: object
    episodes: int = 0  # of a learning curve drawn by follow: the episodes it shows


def default_out(path: Path, number: int | None, summary: bool = False) -> Path:
    """<log name>_ep<N>.png, <log name>_returns.png for the learning curve or <log
    name>_summary.png for the summary page, in the working directory."""
    if summary:
        return Path(f"{path.stem}_summary.png")
    return Path(f"{path.stem}_ep{number}.png" if number is not None else f"{path.stem}_returns.png")


def plot(path: str | Path, number: int | None = None, out: str | Path | None = None,
         summary: bool = False) -> Plotted:
    """Plot episode ``number`` of the log at ``path``, or without one the learning curve of its
    episodes written whole (a log of one episode: that episode), or with ``summary`` the summary
    page of those episodes (:func:`summary_figure`), to the PNG file ``out`` (default
    :func:`default_out`)."""
    path = Path(path)
    if out is not None and Path(out).suffix.lower() != ".png":
        raise PlotError(f"--out {out}: give a .png file")
    if summary and number is not None:
        raise PlotError("--summary is the page of a whole run: leave out --episode")
    try:
        meta = read_metadata(path)
        rows, partial = read_summary(path) if number is None else (None, {})
    except ValueError as exc:
        raise PlotError(str(exc)) from None
    if rows is not None:
        whole = _whole(rows, partial)
        if len(whole) == 1 and not summary:
            number = int(whole["number"][0])
    if summary:
        figure, what = summary_figure(path, whole, meta), f"the summary of {len(whole)} episodes"
    elif number is None:
        figure, what = run_figure(whole, meta), f"the returns of {len(whole)} episodes"
    else:
        try:
            (ep,) = read_episodes(path, [number])
        except ValueError as exc:
            raise PlotError(str(exc)) from None
        figure, what = episode_figure(ep, meta), f"episode {number}"
    out = default_out(path, number, summary) if out is None else Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.is_dir():
        raise PlotError(f"--out {out} is a directory; give a .png file")
    with replacing(out, mode=SHARED) as tmp:  # a link planted at out is replaced, never written through
        save_png(figure, tmp)
    return Plotted(what, out, figure)


def _whole(rows: np.ndarray, partial: dict[str, str]) -> np.ndarray:
    """The rows (read_summary's) of the episodes written whole (not in ``partial``)."""
    return rows[~np.isin([f"{int(n):06d}" for n in rows["number"]], list(partial))] if len(rows) else rows


def follow(path: str | Path, out: str | Path | None = None, until: int | None = None,
           timeout: float | None = None, interval: float = 1.0,
           drawn: Callable[[Plotted], None] | None = None) -> Plotted | None:
    """Draw the learning curve of the log at ``path`` to ``out`` (default :func:`default_out`)
    and again each time it holds more episodes written whole (looked at every ``interval`` s),
    while a runner writes it (episodic.logs.being_written) and until it holds ``until`` episodes,
    ``timeout`` s have passed or KeyboardInterrupt; ``drawn`` is called with each drawing. The
    last drawing (None when the log never held an episode)."""
    from episodic.logs import being_written

    path = Path(path)
    out = default_out(path, None) if out is None else Path(out)
    if out.suffix.lower() != ".png":
        raise PlotError(f"--out {out}: give a .png file")
    end = time.monotonic() + timeout if timeout is not None else math.inf
    last: Plotted | None = None
    try:
        while True:
            live = being_written(path)  # before reading: the episodes of a run that has ended are all read
            try:
                whole = _whole(*read_summary(path))
                meta = read_metadata(path, count_episodes=False) if len(whole) > (last and last.episodes or 0) else None
            except ValueError as exc:
                raise PlotError(str(exc)) from None
            if meta is not None:
                figure = run_figure(whole, meta)
                with replacing(out, mode=SHARED) as tmp:
                    save_png(figure, tmp)
                last = Plotted(f"the returns of {len(whole)} episodes", out, figure, len(whole))
                if drawn is not None:
                    drawn(last)
            if not live or (until is not None and len(whole) >= until) or time.monotonic() >= end:
                return last
            time.sleep(interval)
    except KeyboardInterrupt:
        return last


def save_png(figure, out: str | Path, colours: int = 256) -> None:
    """Write ``figure`` as a PNG of its size (inches x DPI) with a palette of at most ``colours``
    colours: a plot's few colours and their anti-aliased edges fit, in a third of the bytes."""
    from PIL import Image  # matplotlib's own dependency

    canvas = figure.canvas
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[..., :3]
    Image.fromarray(rgb).quantize(colours, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
