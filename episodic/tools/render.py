"""Headless pictures of a logged episode: a video (MP4), PNG frames or one still.

The log keeps the robot's joints at every control step, not the state of the task's objects (a
ball, its string, a pole), so the episode is re-simulated from its recorded initial state and
commands with the replay's machinery (blocking-mode logs replay bit-identically, see
episodic.tools.replay) while the full physics state of every step is kept; each frame sets one of
those states in a separate MjData and draws it with ``mujoco.Renderer``. The re-simulation is
compared with the log as ``episodic replay`` does, and any difference is reported.

Time: seconds from the start of the motion (the first step of command 1). The move to the
start posture before it (command 0) is not shown: the task places its objects only after it.

OpenGL without a display: EGL (Mesa's llvmpipe on a machine without a GPU), else OSMesa, chosen
automatically unless MUJOCO_GL says which (:func:`gl_backend`), through PyOpenGL. Video needs
imageio with its bundled ffmpeg; PNG files are written here. ``pip install 'episodic[media]'``
installs all three.

The camera: ``--camera NAME`` for a camera of the model; by default a free camera. A task may
describe it with a ``camera`` attribute, a mapping with any of ``lookat`` (x, y, z) m,
``distance`` m, ``azimuth`` and ``elevation`` deg (MuJoCo's free-camera parameters); what it
leaves out is chosen so that the robot and the task's objects, over the whole episode, fill
the picture.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from episodic.interface.files import SHARED, replacing
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.scene import ROLLOUT_SPEC
from episodic.task import Task
from episodic.tools.replay import Difference, check_replayable, compare, replay_commands, runner_for

GL_BACKENDS = ("egl", "osmesa")  # tried in this order when MUJOCO_GL is not set
APT_PACKAGES = {"egl": "libegl1 libgl1-mesa-dri", "osmesa": "libosmesa6"}
MEDIA_EXTRA = "pip install 'episodic[media]'"
DEFAULT_FPS = 30
DEFAULT_SIZE = (640, 480)
VIDEO_SUFFIXES = (".mp4",)
AZIMUTH, ELEVATION = 140.0, -15.0  # deg: the default view, from the front right and a little above
FILL = 0.9  # share of the picture's height (or width) the framed objects take at most
# px: the shadow map (MuJoCo's default 4096 takes a CPU renderer about three times as long per
# picture as 1024; 2048 about 1.2 times, measured 200 vs 165 ms per 640x480 picture, and draws the
# shadows that fall on the WAM's pedestal and housing without the stair steps 1024 leaves)
SHADOW_SIZE = 2048
PROBE_TIMEOUT = 120.0  # s for a backend probe (a subprocess that imports mujoco and draws one picture)
_PROBE = ("import mujoco; m = mujoco.MjModel.from_xml_string('<mujoco/>'); "
          "r = mujoco.Renderer(m, 8, 8); r.render(); r.close()")
_chosen: str | None = None


class RenderError(Exception):
    """An episode cannot be rendered (no OpenGL, a missing package, a log that cannot be
    re-simulated, a bad option); the message says why and what to do."""


# -- OpenGL ----------------------------------------------------------------------
def gl_backend() -> str:
    """The OpenGL backend MuJoCo renders with, set up for this process: MUJOCO_GL when set, else
    the first of EGL and OSMesa that works here (each tried in a subprocess, since a failed try
    cannot be undone in-process); RenderError naming the packages to install when none does."""
    global _chosen
    if _chosen is not None:
        return _chosen
    given = os.environ.get("MUJOCO_GL", "").strip().lower()
    if given in ("", *GL_BACKENDS) and importlib.util.find_spec("OpenGL") is None:
        raise RenderError(f"rendering without a display needs PyOpenGL, which is not installed: {MEDIA_EXTRA}")
    if given:
        chosen = given
    else:
        failures = {}
        for name in GL_BACKENDS:
            env = dict(os.environ, MUJOCO_GL=name)
            env.pop("PYOPENGL_PLATFORM", None)
            try:
                done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                                      timeout=PROBE_TIMEOUT)
            except subprocess.TimeoutExpired:
                failures[name] = f"no picture within {PROBE_TIMEOUT:g} s"
                continue
            if done.returncode == 0:
                chosen = name
                break
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            failures[name] = lines[-1].strip() if lines else f"exit code {done.returncode}"
        else:
            tried = "; ".join(f"{name.upper()}: {why}" for name, why in failures.items())
            raise RenderError(
                f"no headless OpenGL works here ({tried}). Install EGL (apt-get install "
                f"{APT_PACKAGES['egl']}) or OSMesa (apt-get install {APT_PACKAGES['osmesa']}), or set "
                f"MUJOCO_GL to a backend that works (e.g. glfw, with a display)")
        os.environ["MUJOCO_GL"] = chosen
    _use_backend(chosen)
    _chosen = chosen
    return chosen


def _use_backend(name: str) -> None:
    """Make mujoco.Renderer use backend ``name``: MuJoCo reads MUJOCO_GL once, when its GL module is
    imported; when that happened before MUJOCO_GL was set (anything that imported mujoco first),
    the module is loaded again to read it."""
    try:
        from mujoco.rendering.classic import gl_context
    except ImportError:  # older bindings: one module
        from mujoco import gl_context
    if getattr(gl_context, "_MUJOCO_GL", name) != name:
        importlib.reload(gl_context)


def make_renderer(model: mujoco.MjModel, width: int, height: int, antialiasing: bool = True) -> mujoco.Renderer:
    """A ``mujoco.Renderer`` of ``width`` x ``height`` pixels for ``model`` on the headless backend
    (``model``'s offscreen buffer is enlarged to fit when needed, its shadow map made at most
    SHADOW_SIZE pixels square), its edges smoothed by the model's multisampling
    (``vis.quality.offsamples``) or, without ``antialiasing``, drawn with one sample per pixel."""
    backend = gl_backend()
    vis = model.vis.global_
    vis.offwidth, vis.offheight = max(vis.offwidth, width), max(vis.offheight, height)
    quality = model.vis.quality
    quality.shadowsize = min(quality.shadowsize, SHADOW_SIZE)
    samples = quality.offsamples  # read when the renderer's context is made: restored after
    quality.offsamples = samples if antialiasing else 0
    try:
        return mujoco.Renderer(model, height, width)
    except Exception as exc:  # noqa: BLE001 - OpenGL reports its failures in many types
        raise RenderError(f"cannot render with MUJOCO_GL={backend} ({type(exc).__name__}: {exc}); install "
                          f"EGL (apt-get install {APT_PACKAGES['egl']}) or OSMesa (apt-get install "
                          f"{APT_PACKAGES['osmesa']}), and set MUJOCO_GL before anything imports mujoco") from None
    finally:
        quality.offsamples = samples


# -- the episode, re-simulated ----------------------------------------------------
@dataclass
class Recording:
    """A logged episode re-simulated, with the full state of every control step of its motion.

    times: (n,) s since the motion started, one per step; states: (n, nstate) the
    mjSTATE_FULLPHYSICS state before each step; mocap: (n, 7 nmocap) the mocap bodies' positions
    and orientations then; differences: where the re-simulation differs from the log (none when
    it is bit-identical)."""

    path: Path
    number: int
    meta: dict
    model: mujoco.MjModel
    task: Task
    control_dt: float
    times: np.ndarray
    states: np.ndarray
    mocap: np.ndarray
    robot_root: int  # the id of the robot's base body (its root: the world's child)
    differences: list[Difference] = field(default_factory=list)

    @property
    def duration(self) -> float:
        """Seconds of motion."""
        return len(self.times) * self.control_dt

    def step_at(self, seconds: float) -> int:
        """The step shown at ``seconds`` since the motion started: the last one begun by then."""
        if not 0 <= seconds <= self.duration:
            raise RenderError(f"episode {self.number} moves for {self.duration:.3f} s; choose a time from 0 to "
                              f"{self.duration:.3f} s, not {seconds:g}")
        return min(math.floor(seconds / self.control_dt + 1e-9), len(self.times) - 1)

    def set_data(self, data: mujoco.MjData, step: int) -> mujoco.MjData:
        """Put ``data`` (of ``model``) in the state of ``step``, its poses computed; returns it."""
        mujoco.mj_setState(self.model, data, self.states[step], ROLLOUT_SPEC)
        n = self.model.nmocap
        if n:
            data.mocap_pos[:] = self.mocap[step, : 3 * n].reshape(n, 3)
            data.mocap_quat[:] = self.mocap[step, 3 * n :].reshape(n, 4)
        mujoco.mj_forward(self.model, data)
        return data


def record(path: str | Path, number: int, robot: str | None = None) -> Recording:
    """Re-simulate episode ``number`` (its sequence number) of the log at ``path`` and keep the
    full state of each step of its motion (``robot``: the robot folder's path, when the log's
    robot is not found by its name: episodic.tools.replay.runner_for); RenderError when that
    cannot be done."""
    path = Path(path)
    try:
        meta = read_metadata(path)
    except ValueError as exc:
        raise RenderError(str(exc)) from None
    try:
        check_replayable(path, meta)
    except ValueError as exc:
        raise RenderError(f"{exc}, so its episodes cannot be re-simulated to be rendered") from None
    try:
        (stored,) = read_episodes(path, [number])
        runner = runner_for(path, meta, robot)
    except ValueError as exc:
        raise RenderError(str(exc)) from None
    states: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    sim = runner.sim
    run = sim.run

    def run_keeping_states(*args, **kwargs):
        """The simulation's run, keeping each step's full state by its time (a step cut off and
        run again later is stored again under the same time, so the last run of it wins)."""
        out = run(*args, **kwargs)
        mocap = np.concatenate([sim.data.mocap_pos.ravel(), sim.data.mocap_quat.ravel()])
        for row in out.state[:-1]:
            states[float(row[0])] = (row, mocap)
        return out

    sim.run = run_keeping_states  # type: ignore[method-assign]  # this one runner's simulation, for the recording
    try:
        produced = replay_commands(runner, stored)
    finally:
        runner.close()
    if len(produced) != 1:
        raise RenderError(f"re-simulating episode {number} of {path} produced {len(produced)} episodes, not 1; "
                          f"run `episodic replay {path} --episode {number}` to see why")
    episode = produced[0]
    steps = episode.steps()
    moving = steps["index"] >= 1 if steps else np.zeros(0, bool)
    if not moving.any():
        raise RenderError(f"episode {number} of {path} has no motion to show: it ended before its first "
                          f"segment ({stored.attrs.get('flag_name', '?')}: {stored.attrs.get('message', '')})")
    rows = [states[float(t)] for t in steps["time"][moving]]
    times = steps["time"][moving] - steps["time"][moving][0]
    model = runner.scene.model
    return Recording(path=path, number=number, meta=meta, model=model, task=runner.task,
                     control_dt=runner.robot.control_dt, times=times,
                     states=np.array([r[0] for r in rows]), mocap=np.array([r[1] for r in rows]),
                     robot_root=int(model.body_rootid[model.site(runner.robot.end_effector_site).bodyid[0]]),
                     differences=compare(stored, episode))


# -- the camera ---------------------------------------------------------------------
def free_camera(lookat, distance: float, azimuth: float, elevation: float) -> mujoco.MjvCamera:
    """MuJoCo's free camera looking at ``lookat`` (3,) m from ``distance`` m, turned ``azimuth``
    deg about the vertical and tilted ``elevation`` deg (negative: from above)."""
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:] = lookat
    cam.distance, cam.azimuth, cam.elevation = float(distance), float(azimuth), float(elevation)
    return cam


def camera_axes(azimuth: float, elevation: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A free camera's forward, up and right unit vectors (world frame) for its angles in deg."""
    a, e = math.radians(azimuth), math.radians(elevation)
    forward = np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])
    up = np.array([-math.sin(e) * math.cos(a), -math.sin(e) * math.sin(a), math.cos(e)])
    return forward, up, np.cross(forward, up)


def shown_points(rec: Recording, every: int = 10) -> np.ndarray:
    """(k, 3) m: the corners of the bounding box of every visible geom that moves or belongs to
    the task (not the floor or other planes, nor the robot's fixed base: its pedestal may leave
    the picture) at every ``every``-th step of the motion and at its last: what the picture must
    hold."""
    m = rec.model
    body = m.geom_bodyid
    fixed_base = (m.body_weldid[body] == 0) & (m.body_rootid[body] == rec.robot_root)
    shown = np.flatnonzero((m.geom_type != mujoco.mjtGeom.mjGEOM_PLANE) & (m.geom_type != mujoco.mjtGeom.mjGEOM_HFIELD)
                           & (m.geom_group < 3) & (m.geom_rgba[:, 3] > 0) & ~fixed_base)
    box = m.geom_aabb[shown]  # (centre, half sizes) in each geom's frame
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    local = box[:, None, :3] + signs[None] * box[:, None, 3:]  # (geoms, 8, 3)
    data = mujoco.MjData(m)
    out = []
    for step in sorted(set(range(0, len(rec.times), every)) | {len(rec.times) - 1}):
        rec.set_data(data, step)
        rot = data.geom_xmat[shown].reshape(-1, 3, 3)
        out.append(np.einsum("gij,gkj->gki", rot, local) + data.geom_xpos[shown][:, None])
    return np.concatenate(out).reshape(-1, 3)


def fit_distance(points: np.ndarray, lookat: np.ndarray, azimuth: float, elevation: float,
                 fovy: float, aspect: float, fill: float = FILL) -> float:
    """The least distance m from which a free camera with these angles, looking at ``lookat``,
    sees all ``points`` (k, 3) m within ``fill`` of its picture (vertical field of view ``fovy``
    deg, width / height ``aspect``)."""
    forward, up, right = camera_axes(azimuth, elevation)
    p = points - lookat
    tan_v = fill * math.tan(math.radians(fovy) / 2)
    need = np.maximum(np.abs(p @ up) / tan_v, np.abs(p @ right) / (aspect * tan_v)) - p @ forward
    return float(need.max())


def centre(points: np.ndarray, azimuth: float, elevation: float) -> np.ndarray:
    """(3,) m: a point to look at so that ``points`` lie evenly around the picture's centre: the
    middle of their extent across the view (right and up) at the depth of their middle."""
    forward, up, right = camera_axes(azimuth, elevation)
    axes = np.stack([right, up, forward])
    local = points @ axes.T
    return ((local.min(axis=0) + local.max(axis=0)) / 2) @ axes


def default_camera(rec: Recording, aspect: float) -> mujoco.MjvCamera:
    """The task's camera (its ``camera`` attribute), what it leaves out framed to fit the robot and
    the task's objects over the whole episode in a picture of width / height ``aspect``."""
    described = rec.task.camera
    unknown = set(described) - {"lookat", "distance", "azimuth", "elevation"}
    if unknown:
        raise RenderError(f"task '{rec.task.name}' describes its camera with {', '.join(sorted(unknown))}; a "
                          f"camera takes lookat, distance, azimuth and elevation")
    azimuth = float(described.get("azimuth", AZIMUTH))
    elevation = float(described.get("elevation", ELEVATION))
    # the points to frame, when the task leaves the look-at point or the distance to be fitted
    points = np.zeros((0, 3)) if {"lookat", "distance"} <= set(described) else shown_points(rec)
    lookat = np.asarray(described["lookat"], float) if "lookat" in described else centre(points, azimuth, elevation)
    distance = described.get("distance")
    if distance is None:
        distance = fit_distance(points, lookat, azimuth, elevation, rec.model.vis.global_.fovy, aspect)
    return free_camera(lookat, distance, azimuth, elevation)


def named_camera(model: mujoco.MjModel, name: str) -> int:
    """The id of the model's camera ``name``; RenderError listing the cameras there are."""
    cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
    if cam >= 0:
        return cam
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
    names = [n for n in names if n]
    listed = f"its cameras: {', '.join(names)}" if names else "it has no named cameras"
    raise RenderError(f"the scene has no camera '{name}' ({listed}); leave out --camera for the task's default view")


# -- pictures ---------------------------------------------------------------------------
class EpisodeRenderer:
    """Pictures of a :class:`Recording`: ``width`` x ``height`` pixels from ``camera`` (a model
    camera's name; None: the default camera), with the lights' shadows or without, the floor's
    reflections or without, smoothed edges (multisampling) or without.

    What each costs a CPU renderer (Mesa's llvmpipe), measured per 640x480 picture of ball_in_cup
    on the WAM: shadows more than half of each picture's time (145 vs 60 ms); without shadows,
    multisampling two thirds of what is left (50 vs 16 ms without reflections), reflections a
    quarter (25 vs 19 ms without multisampling). The WAM's floor reflects 5 % of the light
    (robots/wam/wam.xml), too little to change a pixel of any of the 82 pictures of a caught
    episode: leaving its reflections out changes nothing but the time."""

    def __init__(self, rec: Recording, width: int, height: int, camera: str | None = None, shadows: bool = True,
                 reflections: bool = True, antialiasing: bool = True):
        self.rec = rec
        self.camera: int | mujoco.MjvCamera = named_camera(rec.model, camera) if camera is not None \
            else default_camera(rec, width / height)
        self.renderer = make_renderer(rec.model, width, height, antialiasing)
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = reflections
        self.data = mujoco.MjData(rec.model)

    def at_step(self, step: int, segmentation: bool = False) -> np.ndarray:
        """The picture of ``step``: (height, width, 3) uint8 RGB, or with ``segmentation`` (height,
        width, 2) int32 (object id, object type) per pixel, (-1, -1) for the background."""
        self.rec.set_data(self.data, step)
        self.renderer.update_scene(self.data, self.camera)
        if segmentation:
            self.renderer.enable_segmentation_rendering()
        try:
            return self.renderer.render()
        finally:
            self.renderer.disable_segmentation_rendering()

    def at(self, seconds: float, segmentation: bool = False) -> np.ndarray:
        """The picture at ``seconds`` since the motion started (see :meth:`at_step`)."""
        return self.at_step(self.rec.step_at(seconds), segmentation)

    def close(self) -> None:
        self.renderer.close()

    def __enter__(self) -> EpisodeRenderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def frame_times(duration: float, fps: float) -> np.ndarray:
    """The times s of a video's frames: every 1/fps s from 0 while before ``duration``."""
    return np.arange(max(math.ceil(duration * fps - 1e-9), 1)) / fps


def write_png(path: str | Path, image: np.ndarray) -> None:
    """Write an (height, width, 3) uint8 RGB image as a PNG file (each row filtered by its
    difference to the row above, which suits rendered pictures)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    height, width, _ = image.shape
    up = image.astype(np.int16)
    up[1:] -= image[:-1]
    rows = np.empty((height, 1 + 3 * width), np.uint8)
    rows[:, 0] = 2  # filter type "Up"
    rows[:, 1:] = (up % 256).astype(np.uint8).reshape(height, -1)
    rows[0, 0], rows[0, 1:] = 0, image[0].reshape(-1)

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits per channel, RGB
    with replacing(path, mode=SHARED) as tmp:  # a link planted at path is replaced, never written through
        tmp.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head)
                        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9)) + chunk(b"IEND", b""))


def _imageio():
    """imageio's classic interface, checked to have its bundled ffmpeg; RenderError naming the
    extra to install when either is missing."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401  (its bundled ffmpeg binary)
    except ImportError as exc:
        raise RenderError(f"writing a video needs imageio and imageio-ffmpeg ({exc.name} is not installed): "
                          f"{MEDIA_EXTRA}; or write PNG frames with --out DIR/") from None
    return imageio


def video_writer(path: str | Path, fps: float):
    """imageio's ffmpeg writer of an H.264 MP4 at ``fps`` frames/s (RenderError as ``_imageio``).
    x264's "veryfast" preset: half the CPU time of its default ("medium"; 0.44 vs 0.81 s for the
    82 640x480 pictures of a caught ball_in_cup episode) for a file of the same size at the same
    quality (constant rate factor 15, imageio's quality 7)."""
    return _imageio().get_writer(str(path), format="FFMPEG", mode="I", fps=fps, codec="libx264",
                              pixelformat="yuv420p", macro_block_size=2, quality=7,
                              output_params=["-preset", "veryfast"])


@dataclass
class Rendered:
    """What :func:`render` wrote: ``kind`` "video", "frames" or "still", to ``out``; ``frames``
    pictures in ``seconds`` s of rendering (setting states and drawing, not re-simulating)."""

    kind: str
    out: Path
    frames: int
    seconds: float
    recording: Recording

    @property
    def rate(self) -> float:
        """Frames rendered per second."""
        return self.frames / self.seconds if self.seconds > 0 else float("inf")


def _is_dir(out: str | Path) -> bool:
    """Whether ``out`` names a directory: an existing one, or a path written with a final '/'."""
    return str(out).endswith(("/", os.sep)) or Path(out).is_dir()


def output_kind(out: str | Path, at: float | None) -> str:
    """What ``out`` asks for: "video" (a .mp4 file), "frames" (a directory: an existing one or a
    path ending in '/'; with ``at``, the picture goes there) or "still" (a .png file, with
    ``at``); RenderError for anything else."""
    if _is_dir(out):
        return "still" if at is not None else "frames"
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix == ".png":
        if at is None:
            raise RenderError(f"{out}: one picture needs a time: add --at SECONDS (or write a video to FILE.mp4, "
                              f"or frames to DIR/)")
        return "still"
    if suffix in VIDEO_SUFFIXES:
        if at is not None:
            raise RenderError(f"--at gives one picture: write it to FILE.png, not {out}")
        return "video"
    raise RenderError(f"--out {out}: give FILE.mp4 for a video, DIR/ for PNG frames, or FILE.png with --at "
                      f"for one picture")


def default_out(path: Path, number: int, at: float | None) -> Path:
    """The output file when none is given: <log name>_ep<N>.mp4, or <log name>_ep<N>_<at>s.png
    for a still, in the working directory."""
    return Path(f"{path.stem}_ep{number}_{at:g}s.png" if at is not None else f"{path.stem}_ep{number}.mp4")


def render(path: str | Path, number: int = 0, out: str | Path | None = None, fps: float = DEFAULT_FPS,
           size: tuple[int, int] = DEFAULT_SIZE, camera: str | None = None, at: float | None = None,
           progress: Callable[[int, int], None] | None = None, robot: str | None = None,
           shadows: bool = True, reflections: bool = True, antialiasing: bool = True) -> Rendered:
    """Render episode ``number`` of the log at ``path`` to ``out`` (see :func:`output_kind`;
    default :func:`default_out`): every 1/``fps`` s of its motion, or the one picture at ``at``
    s, ``size`` (width, height) pixels, from ``camera`` (a model camera's name; None: the task's
    default view), with ``shadows``, ``reflections`` and ``antialiasing`` or without (see
    :class:`EpisodeRenderer`). ``progress(done, total)`` is called after each frame; ``robot`` as
    :func:`record`."""
    path = Path(path)
    width, height = size
    if width < 1 or height < 1:
        raise RenderError(f"--size {width}x{height}: give a positive width and height")
    if fps <= 0:
        raise RenderError(f"--fps {fps:g}: give a positive rate")
    out = default_out(path, number, at) if out is None else out
    kind = output_kind(out, at)
    if kind == "still" and _is_dir(out):
        out = Path(out) / default_out(path, number, at).name
    out = Path(out)
    if kind == "video" and (width % 2 or height % 2):
        raise RenderError(f"--size {width}x{height}: an MP4 video needs an even width and height")
    if kind == "video":
        _imageio()  # before the work: fails when imageio is missing
    gl_backend()  # likewise without OpenGL
    rec = record(path, number, robot)
    writer = None
    with contextlib.ExitStack() as done:
        if kind == "still":
            assert at is not None  # output_kind says "still" only with a time
            steps = [rec.step_at(at)]
        else:
            steps = [rec.step_at(t) for t in frame_times(rec.duration, fps)]
        if kind == "frames":
            out.mkdir(parents=True, exist_ok=True)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
        if kind == "video":  # written beside out and renamed onto it when whole
            writer = video_writer(done.enter_context(replacing(out, mode=SHARED, suffix=f".partial{out.suffix}")), fps)
            done.callback(writer.close)
        with EpisodeRenderer(rec, width, height, camera, shadows, reflections, antialiasing) as pictures:
            start = time.perf_counter()
            for i, step in enumerate(steps):
                image = pictures.at_step(step)
                if writer is not None:
                    writer.append_data(image)
                elif kind == "frames":
                    write_png(out / f"frame_{i:05d}.png", image)
                else:
                    write_png(out, image)
                if progress is not None:
                    progress(i + 1, len(steps))
            seconds = time.perf_counter() - start
    return Rendered(kind, out, len(steps), seconds, rec)


def frames(rec: Recording, width: int, height: int, fps: float = DEFAULT_FPS,
           camera: str | None = None) -> Iterator[np.ndarray]:
    """The video's pictures of ``rec`` one by one, (height, width, 3) uint8 RGB."""
    with EpisodeRenderer(rec, width, height, camera) as pictures:
        for t in frame_times(rec.duration, fps):
            yield pictures.at(t)
