"""Air drag applied explicitly (episodic.native.air, episodic.task.contact.add_air) with real
MuJoCo: the compiled passive callback gives MuJoCo's own fluid forces, the Python one the same
bits, the implicit integrator no longer differentiates them, and a log written on MuJoCo's own
air (before the ``air`` choice) rebuilds that physics and replays bit-identically."""
from __future__ import annotations

import json

import h5py
import mujoco
import numpy as np
import pytest

from episodic import native
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.native import air
from episodic.runtime.runner import Runner
from episodic.task import contact
from episodic.tasks import make_task
from episodic.tools.replay import replay
from tests.helpers import wave

AIR_TASKS = ("ball_bouncing", "ball_in_cup", "ball_paddling", "beer_pong", "casting", "tetherball")


def scene(mode: str) -> mujoco.MjModel:
    """A free ball with a sphere's drag, a free box and a capsule hinged to it, in wind, with air
    in ``mode``: the ellipsoid model on the ball, the inertia-box model on the others."""
    spec = mujoco.MjSpec()
    spec.option.wind = [0.5, -0.2, 0.1]
    ball = spec.worldbody.add_body(name="ball")
    ball.add_freejoint()
    ball.add_geom(name="ball", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.02, 0, 0], mass=0.01)
    box = spec.worldbody.add_body(name="box", pos=[1, 0, 0])
    box.add_freejoint()
    box.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1, 0.05, 0.02], mass=1)
    link = box.add_body(name="link", pos=[0.2, 0, 0])
    link.add_joint(type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0])
    link.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.02, 0.1, 0], mass=0.3)
    contact.add_air(spec, ["ball"], mode=mode)
    return spec.compile()


def states(model: mujoco.MjModel, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` random (qpos, qvel) of ``scene``'s model, speeds up to tens of m/s and rad/s."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        qpos = rng.normal(size=model.nq)
        qpos[7] += 1.0
        qvel = 10 * rng.normal(size=model.nv)
        out.append((qpos, qvel))
    return out


def forces(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """qfrc_fluid and qfrc_passive (nv,) after mj_forward at the state (quaternions normalized)."""
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = qpos, qvel
    mujoco.mj_normalizeQuat(model, data.qpos)
    mujoco.mj_forward(model, data)
    return data.qfrc_fluid.copy(), data.qfrc_passive.copy()


@pytest.fixture
def python_callback():
    """air.air_drag as MuJoCo's passive callback for the test, the compiled one put back after."""
    mujoco.set_mjcb_passive(air.air_drag)
    yield
    air.install()


def test_the_explicit_air_is_mujocos_own_fluid_force():
    implicit, explicit = scene("implicit"), scene("explicit")
    assert implicit.opt.density == contact.AIR_DENSITY and implicit.nnumeric == 0
    assert explicit.opt.density == 0 and explicit.opt.viscosity == 0
    assert list(explicit.numeric(air.AIR).data) == [contact.AIR_DENSITY, contact.AIR_VISCOSITY]
    air.install()
    for qpos, qvel in states(explicit, 200):
        want, got = forces(implicit, qpos, qvel)[0], forces(explicit, qpos, qvel)[0]
        assert np.all(want[6:] != 0)  # the box and the link feel the air too
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-15 * np.abs(want).max())


@pytest.mark.skipif(not native.PATH.is_file(), reason="needs the compiled library to compare with")
def test_the_python_callback_gives_the_compiled_ones_bits(python_callback):
    model = scene("explicit")
    cases = states(model, 50)
    in_python = [forces(model, *case) for case in cases]
    air.install()
    for case, (fluid, passive) in zip(cases, in_python, strict=True):
        compiled = forces(model, *case)
        assert np.array_equal(fluid, compiled[0]) and np.array_equal(passive, compiled[1])


def test_a_model_without_the_air_numeric_feels_no_drag():
    model = scene("explicit")
    air.install()
    still = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom size='0.02' mass='0.01' fluidshape='ellipsoid'/></body>"
        "</worldbody></mujoco>")
    data = mujoco.MjData(still)
    data.qvel[:3] = 10.0
    mujoco.mj_forward(still, data)
    assert not data.qfrc_fluid.any() and not data.qfrc_passive.any()
    assert forces(model, *states(model, 1)[0])[0].any()


def test_the_implicit_integrator_no_longer_differentiates_the_air():
    """In a scene without damping or actuators, implicitfast differs from Euler only by the
    derivatives of the fluid forces: a step of each agrees to rounding with the explicit air, and
    not with MuJoCo's own."""
    air.install()
    for mode, differentiated in (("implicit", True), ("explicit", False)):
        model = scene(mode)
        qpos, qvel = states(model, 1)[0]
        after = []
        for integrator in (mujoco.mjtIntegrator.mjINT_IMPLICITFAST, mujoco.mjtIntegrator.mjINT_EULER):
            model.opt.integrator = integrator
            data = mujoco.MjData(model)
            data.qpos[:], data.qvel[:] = qpos, qvel
            mujoco.mj_normalizeQuat(model, data.qpos)
            mujoco.mj_step(model, data)
            after.append(data.qvel.copy())
        gap = np.abs(after[0] - after[1]).max() / np.abs(after[1]).max()
        assert (gap > 1e-9) == differentiated, (mode, gap)


@pytest.mark.parametrize("task", AIR_TASKS)
def test_every_air_task_drags_explicitly_unless_asked(task):
    for params, mode in (({}, "explicit"), ({"air": "implicit"}, "implicit")):
        chosen = make_task(task, params)
        assert chosen.air == mode
        with Runner(chosen) as runner:
            model = runner.scene.model
            assert (model.opt.density == 0) == (mode == "explicit")
            assert (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, air.AIR) >= 0) == (mode == "explicit")


def test_a_log_written_before_the_air_choice_replays_on_mujocos_own_air(tmp_path):
    """A log recorded on MuJoCo's air whose task_params lack ``air`` (as every log written before
    the choice) replays bit-identically; told it ran on the explicit air, it does not."""
    path = tmp_path / "old.h5"
    with Runner(make_task("ball_bouncing", {"air": "implicit"}), log=path, seed=1) as runner:
        held = runner.send(StartCommand(1, 1)).posture
        assert runner.send(TrajectoryCommand(1, 1, 1, wave(held, n=250, amplitude=0.1))).flag == Flag.OK

    def recorded_as(params: dict) -> None:
        with h5py.File(path, "a") as f:
            f.attrs["task_params"] = json.dumps(params)

    with h5py.File(path, "r") as f:
        params = json.loads(f.attrs["task_params"])
    del params["air"]
    recorded_as(params)
    assert replay(path).identical
    recorded_as({**params, "air": "explicit"})
    assert not replay(path).identical
