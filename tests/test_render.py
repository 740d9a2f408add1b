"""`episodic render`: real re-simulated episodes drawn by MuJoCo's renderer without a display
(EGL, or OSMesa), checked by what the pictures show: the robot where forward kinematics puts it,
the ball where the simulation has it (MuJoCo's segmentation rendering gives each pixel's geom),
a video that decodes to the expected frames. No mocks.

Without a working headless OpenGL, or without the media extra (imageio, imageio-ffmpeg), these
tests skip with the reason, except in CI (CI=true), where they fail: .ci/run installs both."""
from __future__ import annotations

import importlib.util
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import mujoco
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.render import (
    EpisodeRenderer,
    RenderError,
    camera_axes,
    fit_distance,
    frame_times,
    gl_backend,
    record,
    shown_points,
    write_png,
)
from tests.helpers import ROOT, wave

SEGMENT_STEPS = 400  # 0.8 s of motion at 500 Hz
SIZE = (320, 240)


def require(what: str, missing: bool, how: str) -> None:
    """Skip (fail under CI=true) when ``missing``."""
    if not missing:
        return
    message = f"{what} is not available here: {how}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {message}")
    pytest.skip(message)


def require_media() -> None:
    missing = [m for m in ("imageio", "imageio_ffmpeg") if importlib.util.find_spec(m) is None]
    require(", ".join(missing), bool(missing), "pip install 'episodic[media]'")


@pytest.fixture(scope="module")
def gl() -> str:
    try:
        return gl_backend()
    except RenderError as exc:
        require("headless OpenGL", True, str(exc))


@pytest.fixture(scope="module")
def ball_log(tmp_path_factory) -> Path:
    """A ball_in_cup episode: the start, then one swing of SEGMENT_STEPS steps."""
    path = tmp_path_factory.mktemp("render") / "ball.h5"
    with Runner(make_task("ball_in_cup"), log=path, seed=0) as runner:
        start = runner.send(StartCommand(1, 1))
        assert start.flag.name == "OK", start.message
        swing = runner.send(TrajectoryCommand(1, 1, 1, wave(start.posture, SEGMENT_STEPS, amplitude=0.4)))
        assert swing.flag.name == "OK" and swing.n_steps == SEGMENT_STEPS, swing.message
    return path


@pytest.fixture(scope="module")
def rec(ball_log):
    return record(ball_log, 0)


def project(scene: mujoco.MjvScene, model: mujoco.MjModel, point: np.ndarray, width: int, height: int):
    """The pixel (column, row) where ``point`` (3,) m appears, and the pixels per metre there: a
    pinhole camera at the pose the scene's camera has (without stereo, MuJoCo draws from the
    average of its two eyes), with the model's vertical field of view."""
    cam = mujoco.mjv_averageCamera(scene.camera[0], scene.camera[1])
    forward, up = np.array(cam.forward), np.array(cam.up)
    right = np.cross(forward, up)
    d = point - np.array(cam.pos)
    f = (height / 2) / math.tan(math.radians(model.vis.global_.fovy) / 2)
    depth = d @ forward
    return width / 2 + f * (d @ right) / depth, height / 2 - f * (d @ up) / depth, f / depth


def geom_at(seg: np.ndarray, column: float, row: float) -> tuple[int, int]:
    """(object id, object type) of the segmentation picture's pixel at (column, row)."""
    return tuple(int(v) for v in seg[int(row), int(column)])


# -- what the pictures show --------------------------------------------------------------
@pytest.mark.slow  # headless OpenGL, probed in a subprocess (the gl fixture)
def test_the_ball_and_the_robot_are_where_the_simulation_puts_them(gl, rec):
    m = rec.model
    ball = m.geom("ball").id
    ee = m.site("ee").id
    robot_root = m.body_rootid[m.site_bodyid[ee]]
    width, height = SIZE
    seen = []
    with EpisodeRenderer(rec, width, height) as pictures:
        for t in (0.0, rec.duration / 2, rec.duration - 0.01):
            seg = pictures.at(t, segmentation=True)
            data = pictures.data
            assert seg.shape == (height, width, 2)
            # the ball: its centre's pixel shows the ball, over about the area its radius covers
            u, v, scale = project(pictures.renderer.scene, m, data.geom_xpos[ball], width, height)
            assert 0 <= u < width and 0 <= v < height, "the default camera frames the ball"
            assert geom_at(seg, u, v) == (ball, int(mujoco.mjtObj.mjOBJ_GEOM)), f"t={t}: the ball is not at its pixel"
            radius = m.geom_size[ball, 0] * scale
            area = np.count_nonzero((seg[..., 0] == ball) & (seg[..., 1] == mujoco.mjtObj.mjOBJ_GEOM))
            assert 0.4 * math.pi * radius**2 <= area <= 2.0 * math.pi * (radius + 1) ** 2, (t, area, radius)
            # the robot: the end effector's pixel shows the arm or the cup on its flange
            u_ee, v_ee, _ = project(pictures.renderer.scene, m, data.site_xpos[ee], width, height)
            obj, kind = geom_at(seg, u_ee, v_ee)
            assert kind == mujoco.mjtObj.mjOBJ_GEOM and m.body_rootid[m.geom_bodyid[obj]] == robot_root, \
                f"t={t}: the end effector's pixel shows {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, obj)}"
            seen.append((seg, (u, v), radius))
    # the pictures follow the motion: the ball moved well away from where it first was
    (_, (u0, v0), radius), (last, (u1, v1), _) = seen[0], seen[-1]
    assert math.hypot(u1 - u0, v1 - v0) > 3 * radius + 2
    assert geom_at(last, u0, v0)[0] != m.geom("ball").id


@pytest.mark.slow  # headless OpenGL, probed in a subprocess (the gl fixture)
def test_pictures_are_the_logged_episode_state_by_state(gl, rec, ball_log):
    """The re-simulation the pictures come from is the log's episode, bit for bit, and each
    picture shows the state of its step."""
    (stored,) = read_episodes(ball_log, [0])
    assert rec.differences == []
    moving = stored.steps["index"] >= 1
    assert len(rec.times) == moving.sum() == SEGMENT_STEPS
    q_adr = rec.model.jnt_qposadr[[rec.model.joint(n).id for n in ("j1", "j2", "j3", "j4", "j5", "j6", "j7")]]
    nq = rec.model.nq
    assert np.array_equal(rec.states[:, 1 : 1 + nq][:, q_adr], stored.steps["q"][moving])
    ball_columns = [stored.state_columns.index(c) for c in ("ball_x", "ball_y", "ball_z")]
    data = mujoco.MjData(rec.model)
    for step in (0, 123, SEGMENT_STEPS - 1):
        rec.set_data(data, step)
        assert np.allclose(data.geom_xpos[rec.model.geom("ball").id],
                           stored.steps["task_state"][moving][step, ball_columns], atol=1e-12)
    assert rec.step_at(0.0) == 0 and rec.step_at(0.5) == 250 and rec.step_at(rec.duration) == SEGMENT_STEPS - 1
    with pytest.raises(RenderError, match="choose a time from 0"):
        rec.step_at(rec.duration + 0.1)


@pytest.mark.slow  # headless OpenGL, probed in a subprocess (the gl fixture)
def test_the_default_camera_frames_every_shown_object_over_the_episode(gl, rec):
    points = shown_points(rec)
    width, height = SIZE
    rec.task.camera = {"azimuth": 150, "elevation": -20}  # framed: no lookat, no distance
    try:
        with EpisodeRenderer(rec, width, height) as pictures:
            pictures.at(0.0)
            cam = pictures.camera
            assert cam.type == mujoco.mjtCamera.mjCAMERA_FREE and (cam.azimuth, cam.elevation) == (150, -20)
            for p in points[:: max(len(points) // 200, 1)]:
                u, v, _ = project(pictures.renderer.scene, rec.model, p, width, height)
                assert -0.5 <= u <= width + 0.5 and -0.5 <= v <= height + 0.5
    finally:
        del rec.task.camera
    # and tightly: from 20 % nearer, some point leaves the picture
    distance = fit_distance(points, np.array(cam.lookat), cam.azimuth, cam.elevation, rec.model.vis.global_.fovy,
                            width / height)
    assert distance == pytest.approx(cam.distance)
    forward, up, right = camera_axes(cam.azimuth, cam.elevation)
    eye = np.array(cam.lookat) - 0.8 * cam.distance * forward
    d = points - eye
    tan_v = math.tan(math.radians(rec.model.vis.global_.fovy) / 2)
    outside = (np.abs(d @ up) > tan_v * (d @ forward)) | (np.abs(d @ right) > tan_v * width / height * (d @ forward))
    assert outside.any()


@pytest.mark.slow  # headless OpenGL, probed in a subprocess (the gl fixture)
def test_a_task_camera_description_is_used(gl, rec):
    rec.task.camera = {"lookat": (0.5, 0.0, 1.2), "distance": 2.5, "azimuth": 90, "elevation": -20}
    try:
        with EpisodeRenderer(rec, 64, 48) as pictures:
            cam = pictures.camera
            assert list(cam.lookat) == [0.5, 0.0, 1.2] and (cam.distance, cam.azimuth, cam.elevation) == (2.5, 90, -20)
        rec.task.camera = {"zoom": 2}
        with pytest.raises(RenderError, match="zoom"):
            EpisodeRenderer(rec, 64, 48)
    finally:
        del rec.task.camera


def test_frame_times_cover_the_motion():
    assert frame_times(1.0, 30).tolist() == [k / 30 for k in range(30)]
    assert len(frame_times(0.8, 30)) == 24 and len(frame_times(0.81, 30)) == 25


# -- the command line ----------------------------------------------------------------------
def run_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "episodic", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.mark.slow
def test_render_writes_a_video_that_decodes_to_its_frames(gl, ball_log, tmp_path):
    require_media()
    import imageio.v2 as imageio

    fps = 25
    done = run_cli("render", str(ball_log), "--out", "video/ball.mp4", "--size", "160x120", "--fps", str(fps),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = math.ceil(SEGMENT_STEPS * 0.002 * fps)
    assert f"wrote {expected} frames (0.80 s of episode 0 at 25 frames/s, 160x120) as a video" in done.stdout
    assert "frames/s)" in done.stdout
    assert done.stderr == "", "no progress bar or warning in a pipe"
    frames = imageio.mimread(tmp_path / "video" / "ball.mp4", memtest=False)
    assert abs(len(frames) - SEGMENT_STEPS * 0.002 * fps) <= 1
    assert frames[0].shape == (120, 160, 3)
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).mean() > 0.5, "the robot moved"


@pytest.mark.slow
def test_render_writes_png_frames_and_one_picture_as_drawn_in_process(gl, rec, ball_log, tmp_path):
    require_media()
    import imageio.v2 as imageio

    done = run_cli("render", str(ball_log), "--out", "frames/", "--size", "160x120", "--fps", "10", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in (tmp_path / "frames").iterdir())
    assert names == [f"frame_{i:05d}.png" for i in range(8)]
    still = run_cli("render", str(ball_log), "--at", "0.3", "--size", "160x120", cwd=tmp_path)
    assert still.returncode == 0, still.stderr
    assert "wrote the picture at 0.3 s of episode 0 (160x120) to ball_ep0_0.3s.png" in still.stdout
    with EpisodeRenderer(rec, 160, 120) as pictures:
        drawn = pictures.at(0.3)  # also the fourth frame at 10 frames/s
    for path in (tmp_path / "ball_ep0_0.3s.png", tmp_path / "frames" / "frame_00003.png"):
        image = imageio.imread(path)
        assert image.shape == (120, 160, 3)
        assert np.abs(image.astype(int) - drawn.astype(int)).mean() < 1.0, path  # the same picture
    first, last = (imageio.imread(tmp_path / "frames" / name).astype(int) for name in (names[0], names[-1]))
    assert np.abs(first - last).mean() > 0.5, "the frames follow the motion"


def test_write_png_round_trips(tmp_path):
    require_media()
    import imageio.v2 as imageio

    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (37, 51, 3), dtype=np.uint8)
    image[10:20] = image[9]  # rows equal to the one above
    write_png(tmp_path / "x.png", image)
    assert np.array_equal(imageio.imread(tmp_path / "x.png"), image)


@pytest.mark.slow  # headless OpenGL, probed in a subprocess (the gl fixture)
def test_render_refuses_what_it_cannot_do_with_a_message(gl, ball_log, tmp_path):
    def render(*args):
        return CliRunner().invoke(main, ["render", str(ball_log), *args])

    cases = {("--out", str(tmp_path / "x.gif")): "give FILE.mp4 for a video, DIR/ for PNG frames",
             ("--out", str(tmp_path / "x.png")): "one picture needs a time: add --at SECONDS",
             ("--at", "0.1", "--out", str(tmp_path / "x.mp4")): "--at gives one picture: write it to FILE.png",
             ("--at", "9", "--out", str(tmp_path / "x.png")): "moves for 0.800 s; choose a time from 0 to 0.800 s",
             ("--camera", "top", "--out", f"{tmp_path}/d/"): "the scene has no camera 'top' (it has no named cameras)",
             ("--episode", "4", "--out", f"{tmp_path}/d/"): "has no episode 000004",
             ("--size", "161x120", "--out", str(tmp_path / "x.mp4")): "an MP4 video needs an even width and height"}
    for args, message in cases.items():
        result = render(*args)
        assert result.exit_code == 1 and message in result.output, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
    bad = render("--size", "640by480")
    assert bad.exit_code == 2 and "use WIDTHxHEIGHT in pixels" in bad.output
    realtime = tmp_path / "realtime.h5"
    shutil.copy(ball_log, realtime)
    with h5py.File(realtime, "r+") as f:
        f.attrs["mode"] = "realtime"
    result = CliRunner().invoke(main, ["render", str(realtime), "--out", f"{tmp_path}/d/"])
    assert result.exit_code == 1 and "was recorded in realtime mode" in result.output
    assert "cannot be re-simulated to be rendered" in result.output


@pytest.mark.slow
def test_render_without_the_media_extra_says_what_to_install(ball_log, tmp_path):
    blocked = "import sys; sys.modules['imageio'] = None; from episodic.cli.main import main; main()"
    done = subprocess.run([sys.executable, "-c", blocked, "render", str(ball_log), "--out", "v.mp4"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "pip install 'episodic[media]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "v.mp4").exists()


@pytest.mark.slow
def test_render_without_any_headless_opengl_names_the_packages(ball_log, tmp_path):
    """Neither EGL nor OSMesa loads (PyOpenGL fails to import, as when libEGL is missing)."""
    (tmp_path / "shim" / "OpenGL").mkdir(parents=True)
    (tmp_path / "shim" / "OpenGL" / "__init__.py").write_text("raise ImportError('libEGL.so.1: cannot open "
                                                              "shared object file')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    env["PYTHONPATH"] = f"{tmp_path / 'shim'}{os.pathsep}{ROOT}"
    done = subprocess.run([sys.executable, "-m", "episodic", "render", str(ball_log), "--at", "0.1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no headless OpenGL works here (EGL: " in done.stderr and "; OSMESA: " in done.stderr
    assert "apt-get install libegl1 libgl1-mesa-dri" in done.stderr and "apt-get install libosmesa6" in done.stderr



@pytest.mark.slow  # headless OpenGL, probed in a subprocess (the gl fixture)
def test_shadows_can_be_left_out(gl, rec):
    pictures = {}
    for shadows in (True, False):
        with EpisodeRenderer(rec, *SIZE, shadows=shadows) as renderer:
            pictures[shadows] = renderer.at(0.0).astype(int).sum(axis=2)
    darker, lighter = (pictures[True] < pictures[False] - 30).mean(), (pictures[True] > pictures[False] + 30).mean()
    assert darker > 0.002, "the arm's shadow darkens the floor"
    assert lighter < darker / 10, "shadows only darken"


@pytest.mark.slow  # headless OpenGL, probed in a subprocess (the gl fixture)
def test_reflections_and_smoothed_edges_can_be_left_out(gl, rec):
    def picture(**look) -> np.ndarray:
        with EpisodeRenderer(rec, *SIZE, shadows=False, **look) as renderer:
            return renderer.at(0.0).astype(int)

    full = picture()
    assert np.array_equal(picture(reflections=False), full), "the WAM's floor reflects too little to show"
    jagged = picture(antialiasing=False)
    changed = np.abs(jagged - full).sum(axis=2) > 0
    assert 0 < changed.mean() < 0.05, "only the edges change"
    assert rec.model.vis.quality.offsamples > 0, "the model's multisampling is left as it was"
