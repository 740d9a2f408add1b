"""episodic's compiled part (episodic.native) with real MuJoCo: each task's compiled feedback law
against the law's formula computed independently (MuJoCo's frame sensors, Jacobians and numpy),
the compiled loop against the per-tick Python loop under those laws (bit-identical: the same
operations in the same order, with and without a sensing latency and noise), the sensing's delay
line and noise, the loop on threads, the refusal of a library built for another MuJoCo or with
other structs, the laws' parameters by name, and an install without a C compiler (the Python
loop, one warning, the same numbers)."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mujoco
import numpy as np
import pytest

from episodic import native
from episodic.interface.commands import Feedforward, StartCommand
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import Desired
from episodic.native.sensing import Sensing
from episodic.runtime.control import Gains
from episodic.runtime.runner import Runner
from episodic.runtime.scene import STATE_SPEC
from episodic.tasks import make_task

ROOT = Path(__file__).parent.parent
ROBOT = load_robot("wam")
UP = np.array([0.0, 0.0, 1.0])
CONTEXTS = {"ball_on_beam": [0.1, 0.2], "pole_balancing": [np.pi - 0.3, 1.0],
            "ball_bouncing": [0.45, 0.75, 0.03, -0.02, 0.05, 0.1]}
# a tracker 20 ms late (10 control steps) with noise on every quantity the law senses
SENSED = {"ball_on_beam": dict(sensing_latency=0.02, sensing_noise=0.002, sensing_noise_rate=0.02),
          "pole_balancing": dict(sensing_latency=0.02, sensing_noise=0.01, sensing_noise_rate=0.1),
          "ball_bouncing": dict(sensing_latency=0.02, sensing_noise=0.002, sensing_noise_rate=0.02)}


def started(name: str, params: dict | None = None) -> Runner:
    """A runner of task ``name`` (with ``params``) whose episode has started (the arm at its start
    posture)."""
    runner = Runner(make_task(name, params or {}))
    runner.send(StartCommand(1, 1, context=np.array(CONTEXTS[name])))
    return runner


def perturbed(runner: Runner, rng: np.random.Generator, scale: float) -> mujoco.MjData:
    """A copy of the runner's state with every velocity nudged by N(0, scale) rad/s or m/s,
    forwarded (positions, velocities and sensors current)."""
    m = runner.sim.model
    data = mujoco.MjData(m)
    mujoco.mj_copyData(data, m, runner.sim.data)
    data.qvel[:] += rng.normal(0.0, scale, m.nv)
    mujoco.mj_forward(m, data)
    return data


def velocity(model, data, kind: mujoco.mjtObj, ident: int) -> np.ndarray:
    """(6,) angular rad/s then linear m/s velocity of an object's frame, world axes."""
    out = np.empty(6)
    mujoco.mj_objectVelocity(model, data, kind, ident, out, 0)
    return out


@pytest.mark.parametrize("gains", [(1.5, 0.5), (0.0, 2.0), (40.0, 0.0)])
def test_ball_on_beam_law_is_its_formula(gains):
    """q7 offset = clip(k_x x + k_v xd, +-max_tilt), x and xd read from MuJoCo's frame sensors of
    the ball in the beam's frame (position, and velocity relative to the moving frame)."""
    rng = np.random.default_rng(0)
    with started("ball_on_beam") as r:
        task, scene = r.task, r.scene
        law = task.compiled_law(r.sim.model, np.array(gains))
        for _ in range(5):
            data = perturbed(r, rng, 0.3)
            x = scene.sensor(data.sensordata, "ball_in_beam")[0]
            xd = scene.sensor(data.sensordata, "ball_vel_in_beam")[0]
            expected = np.zeros(ROBOT.n_dofs)
            expected[-1] = np.clip(gains[0] * x + gains[1] * xd, -task.max_tilt, task.max_tilt)
            np.testing.assert_allclose(law(data), expected, rtol=1e-12, atol=1e-14)


def pole_oracle(task, model, data, gains: np.ndarray, memory: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pole law of tasks/pole_balancing.py's docstring, from the pole's frame sensors and the
    pivot's Jacobian: (offsets (n_dofs,) rad, memory after the step)."""
    episode, scene = task.episode, build_sensors(model)
    along, hinge = scene("pole_axis", data), scene("pole_hinge", data)
    phi = np.arctan2(np.cross(UP, along) @ hinge, along[2])
    phid = scene("pole_angvel", data) @ hinge
    pole = model.body("pole").id
    jacp = np.zeros((3, model.nv))
    mujoco.mj_jac(model, data, jacp, None, data.xpos[pole], pole)
    s = episode.h @ (scene("pivot_pos", data) - episode.p0)
    sd = episode.h @ (jacp @ data.qvel)
    u = gains[:4] @ [phi, phid, s, sd]
    last_phid, gain = memory
    if gains.size == 8:
        k_e, a_swing, phi_catch, theta_back = gains[4:]
        if phid * last_phid <= 0 and phid != 0:
            energy = phid**2 / (2 * episode.omega0**2) + np.cos(phi)
            target = 1.0 if phid < 0 else -np.cos(theta_back)
            gain = np.clip((target - energy) / 0.45, 0, 1) / max(np.sqrt(max(energy + 1, 0) / 2), 0.1)
        pump = k_e * gain * phid * np.cos(phi) / episode.omega0
        w = np.clip(2 - 2 * abs(phi) / phi_catch, 0, 1)
        u = w * u + (1 - w) * np.clip(pump, -a_swing, a_swing)
    return episode.v * np.clip(u, -task.max_offset, task.max_offset), np.array([phid, gain])


def build_sensors(model):
    """sensor name, data -> that sensor's values."""
    return lambda name, data: data.sensordata[model.sensor(name).adr[0]: model.sensor(name).adr[0]
                                              + model.sensor(name).dim[0]]


@pytest.mark.parametrize("gains", [[2.0, 0.5, 1.0, 1.5], [2.0, 0.5, 1.0, 1.5, 3.0, 0.2, 0.6, 2.5],
                                   [60.0, 9.0, 0.0, 0.0]])
def test_pole_balancing_law_is_its_formula(gains):
    """The balance law, the swing-up's pump (its gain set at a turning point and kept in the
    law's memory, then held) and the clip at max_offset, against an independent computation."""
    gains = np.array(gains)
    rng = np.random.default_rng(1)
    with started("pole_balancing") as r:
        task, model = r.task, r.sim.model
        law = task.compiled_law(model, gains)
        assert law.memory is task.episode.memory
        for step in range(6):
            data = perturbed(r, rng, 0.5)
            own = task.episode.memory[:2]  # the law's own memory (the sensing block follows it)
            phid = pole_oracle(task, model, data, gains, own.copy())[1][0]
            own[:] = [-phid if step % 2 else phid, 0.3]  # odd steps: the swing turns
            expected, memory = pole_oracle(task, model, data, gains, own.copy())
            np.testing.assert_allclose(law(data), expected, rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(own, memory, rtol=1e-10, atol=1e-13)
            assert (memory[1] != 0.3) == (gains.size == 8 and step % 2 == 1)  # the gain set anew, or held


@pytest.mark.parametrize("gains", [(0.5, 0.2), (0.0, 0.3), (20.0, 0.0)])
def test_ball_bouncing_law_is_its_formula(gains):
    """The mirror law: the tilt from the ball's frame sensors and the face's velocity, clipped to
    max_tilt, turned into wrist offsets by damped least squares on the racket's rotational
    Jacobian (numpy's solve)."""
    rng = np.random.default_rng(2)
    with started("ball_bouncing") as r:
        task, model = r.task, r.sim.model
        law = task.compiled_law(model, np.array(gains))
        sensor, face, racket = build_sensors(model), model.site("racket_face").id, model.body("racket").id
        wrist = r.scene.dof_adr[-3:]
        for _ in range(5):
            data = perturbed(r, rng, 0.3)
            offset = sensor("ball_pos", data)[:2] - sensor("face_pos", data)[:2]
            rel = sensor("ball_vel", data)[:2] - velocity(model, data, mujoco.mjtObj.mjOBJ_SITE, face)[3:5]
            tilt = -(gains[0] * offset + gains[1] * rel)
            tilt *= min(1.0, task.max_tilt / np.hypot(*tilt))
            jacr = np.zeros((3, model.nv))
            mujoco.mj_jacBody(model, data, None, jacr, racket)
            j = jacr[:, wrist]
            expected = np.zeros(ROBOT.n_dofs)
            expected[-3:] = j.T @ np.linalg.solve(j @ j.T + 1e-4 * np.eye(3), [-tilt[1], tilt[0], 0.0])
            np.testing.assert_allclose(law(data), expected, rtol=1e-9, atol=1e-12)


def desired_motion(q0: np.ndarray, n: int) -> Desired:
    """n control steps of a small sine about q0 rad on every joint, with its qd, qdd."""
    t = np.arange(n)[:, None] * ROBOT.control_dt
    w = 2 * np.pi * np.linspace(0.5, 1.1, ROBOT.n_dofs)
    return Desired(q0 + 0.02 * np.sin(w * t), 0.02 * w * np.cos(w * t), -0.02 * w**2 * np.sin(w * t))


@pytest.mark.parametrize("name,mode,ki,fails,sensed", [
    ("ball_on_beam", Feedforward.GRAVITY_COMPENSATION, 0.0, None, False),
    ("ball_on_beam", Feedforward.INVERSE_DYNAMICS, 3.0, None, False),
    ("ball_on_beam", Feedforward.INVERSE_DYNAMICS, 3.0, None, True),
    ("pole_balancing", Feedforward.FEEDFORWARD, 2.0, 2, False),          # passive j7, and j3 failed
    ("pole_balancing", Feedforward.FEEDFORWARD, 2.0, 2, True),
    ("ball_bouncing", Feedforward.FEEDFORWARD, 0.0, None, False),        # 4 physics steps per control step
    ("ball_bouncing", Feedforward.INVERSE_DYNAMICS, 1.0, None, False),
    ("ball_bouncing", Feedforward.INVERSE_DYNAMICS, 1.0, None, True),
])
def test_compiled_and_python_loops_are_bit_identical_under_each_law(name, mode, ki, fails, sensed):
    """The same segment from the same state, with the law's memory and the integral term
    starting alike, once in the compiled loop and once a tick at a time in Python (the law
    wrapped in a Python callable): every state, sensor, u_ff, desired q and the law's memory
    (with ``sensed``, what a late and noisy tracker has seen) agree to the bit."""
    gains = {"ball_on_beam": [1.5, 0.5], "pole_balancing": [2.0, 0.5, 1.0, 1.5, 3.0, 0.2, 0.6, 2.5],
             "ball_bouncing": [0.5, 0.2]}[name]
    with started(name, SENSED[name] if sensed else None) as r:
        sim, task = r.sim, r.task
        g = Gains(ROBOT.kp, ROBOT.kd, np.full(ROBOT.n_dofs, ki), mode)
        if fails is not None:
            g = g.with_passive(np.arange(ROBOT.n_dofs) == fails)
        law = task.compiled_law(sim.model, np.array(gains))
        desired = desired_motion(sim.q, 400)
        start, memory = sim.get_state(STATE_SPEC), None if law.memory is None else law.memory.copy()
        out = []
        for feedback in (law, lambda data: law(data)):
            sim.set_state(start, STATE_SPEC)
            sim.reset_integral()
            if memory is not None:
                law.memory[:] = memory
            record = sim.run(desired, g, feedback)
            out.append((record, None if memory is None else law.memory.copy(), sim.controller.integral.copy()))
    (fast, fast_memory, fast_i), (slow, slow_memory, slow_i) = out
    assert np.abs(fast.desired.q - np.asarray(desired.q)).max() > 1e-4  # the law did act
    for field in ("state", "sensordata", "u_ff"):
        assert np.array_equal(getattr(fast, field), getattr(slow, field)), field
    assert np.array_equal(fast.desired.q, slow.desired.q)
    assert np.array_equal(fast_memory, slow_memory) and np.array_equal(fast_i, slow_i)


def sense(param: np.ndarray, memory: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """One control step of the C tracker (episodic_sense): what the law reads of ``truth`` (m,)."""
    sensed = np.empty_like(truth)
    native.library().episodic_sense(*(native.address(a) for a in (param, memory, np.ascontiguousarray(truth),
                                                                   sensed)))
    return sensed


def test_the_tracker_reports_each_sample_whole_control_steps_late():
    """Without noise, step k reads exactly the values of step k - delay (the first step's while
    fewer steps have passed); a delay of 0 passes the values through untouched."""
    rng = np.random.default_rng(3)
    truth = rng.normal(size=(40, 3))
    for delay in (0, 1, 5):
        tracker = Sensing(delay, np.zeros(3), np.array([7.0, 11.0]))
        param, memory = tracker.param(), tracker.memory()
        sensed = np.array([sense(param, memory, row) for row in truth])
        assert np.array_equal(sensed, truth[np.maximum(np.arange(40) - delay, 0)])
        assert memory[0] == 40  # the steps sensed


def test_the_trackers_noise_is_gaussian_seeded_and_tied_to_each_sample():
    """On a constant truth: each quantity's noise has its std, mean 0 and a normal's spread,
    independent between quantities and from step to step; the same key repeats it bit for bit
    (also when the same sample is read twice, as a late tracker does), another key does not."""
    n, std = 20000, np.array([0.5, 2.0])

    def noise(key, delay=0) -> np.ndarray:
        tracker = Sensing(delay, std, np.array(key, dtype=float))
        param, memory = tracker.param(), tracker.memory()
        return np.array([sense(param, memory, np.zeros(2)) for _ in range(n)])

    e = noise([1.0, 2.0])
    z = e / std
    assert np.all(np.abs(z.mean(axis=0)) < 4 / np.sqrt(n))
    np.testing.assert_allclose(z.std(axis=0), 1.0, rtol=0.02)
    assert np.all(np.abs(np.mean(np.abs(z) < 1, axis=0) - 0.6827) < 0.01)  # a normal's share within 1 std
    assert abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < 0.03
    assert all(abs(np.corrcoef(z[1:, i], z[:-1, i])[0, 1]) < 0.03 for i in range(2))
    assert np.array_equal(noise([1.0, 2.0]), e)
    assert np.mean(noise([1.0, 3.0]) == e) < 1e-3
    late = noise([1.0, 2.0], delay=4)  # the same samples, read 4 steps later
    assert np.array_equal(late[4:], e[:-4]) and np.array_equal(late[:4], np.repeat(e[:1], 4, axis=0))


def test_a_latency_is_rounded_to_control_steps_and_the_key_drawn_from_the_episodes_generator():
    with started("ball_on_beam") as r:
        model = r.sim.model
        for latency, steps in ((0.0, 0), (0.0101, 5), (0.02, 10), (0.0612, 31)):
            assert Sensing.start(model, latency, [0.0], np.random.default_rng(0)).delay == steps
        keys = [Sensing.start(model, 0.0, [0.0], np.random.default_rng(seed)).key for seed in ((0, 1), (0, 1), (0, 2))]
        assert np.array_equal(keys[0], keys[1]) and not np.array_equal(keys[0], keys[2])


def test_the_ball_on_beam_law_sees_the_ball_as_it_was_the_latency_before():
    """With k_v = 0 the law's offset is k_x x: fed states that differ only in where the ball lies,
    the law 10 steps late (20 ms) answers each with the x of the state fed 10 steps earlier."""
    rng = np.random.default_rng(4)
    with started("ball_on_beam", {"sensing_latency": 0.02}) as r:
        task, scene, model = r.task, r.scene, r.sim.model
        law = task.compiled_law(model, np.array([1.5, 0.0]))
        beam, qa = model.body("beam").id, model.joint("ball").qposadr[0]
        xs, offsets = [], []
        for _ in range(25):
            data = mujoco.MjData(model)
            mujoco.mj_copyData(data, model, r.sim.data)
            data.qpos[qa: qa + 3] += rng.uniform(-0.1, 0.1) * data.xmat[beam].reshape(3, 3)[:, 0]
            mujoco.mj_forward(model, data)
            xs.append(scene.sensor(data.sensordata, "ball_in_beam")[0])
            offsets.append(law(data)[-1])
    expected = 1.5 * np.array(xs)[np.maximum(np.arange(25) - 10, 0)]
    np.testing.assert_allclose(offsets, expected, rtol=1e-12, atol=1e-14)


def test_compiled_loops_on_threads_give_what_they_give_alone():
    """The loop keeps nothing of its own between calls and releases the GIL: runs on two threads
    at once equal the same runs one after the other."""
    runners = [started("ball_on_beam"), started("pole_balancing")]
    try:
        jobs = []
        for r in runners:
            law = r.task.compiled_law(r.sim.model, np.array(
                [1.5, 0.5] if r.task.name == "ball_on_beam" else [2.0, 0.5, 1.0, 1.5, 3.0, 0.2, 0.6, 2.5]))
            g = Gains(ROBOT.kp, ROBOT.kd, np.full(ROBOT.n_dofs, 1.0), Feedforward.INVERSE_DYNAMICS)
            memory = None if law.memory is None else law.memory.copy()
            jobs.append((r, law, g, desired_motion(r.sim.q, 1500), r.sim.get_state(STATE_SPEC), memory))

        def run(job) -> np.ndarray:
            r, law, g, desired, start, memory = job
            r.sim.set_state(start, STATE_SPEC)
            r.sim.reset_integral()
            if memory is not None:
                law.memory[:] = memory
            return r.sim.run(desired, g, law).state

        alone = [run(job) for job in jobs]
        with ThreadPoolExecutor(2) as pool:
            together = list(pool.map(run, jobs))
    finally:
        for r in runners:
            r.close()
    assert all(np.array_equal(a, b) for a, b in zip(alone, together))


def test_an_unknown_compiled_law_is_refused():
    with started("ball_on_beam") as r, pytest.raises(native.NativeError, match="no law 'juggling'.*reinstall"):
        native.CompiledLaw(r.sim.model, "juggling", ROBOT.n_dofs, np.zeros(1))


def gcc(tmp_path, name: str, source: str, *flags: str) -> str:
    """Compile ``source`` into the shared library tmp_path/name; its path."""
    (tmp_path / f"{name}.c").write_text(source)
    out = tmp_path / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(tmp_path / f"{name}.c"), *flags], check=True,
                   capture_output=True)
    return str(out)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_library_for_another_mujoco_is_refused(tmp_path):
    """A library compiled against other MuJoCo headers, without the segment's table, or linked to
    another libmujoco, is refused with a NativeError that says to reinstall episodic."""
    other = gcc(tmp_path, "other_headers.so", "int episodic_mujoco_version(void) { return 3002007; }\n")
    with pytest.raises(native.NativeError, match=r"built for MuJoCo 3\.2\.7, but MuJoCo 4\.0\.0 .*reinstall"):
        native.load(other)
    # the right MuJoCo, but from sources without the segment's table
    tableless = gcc(tmp_path, "tableless.so",
                    f"int episodic_mujoco_version(void) {{ return {mujoco.mj_version()}; }}\n")
    with pytest.raises(native.NativeError, match=r"no table of episodic_segment .*reinstall"):
        native.load(tableless)
    # linked to a libmujoco.so.9.9.9 that is not there at run time
    stub = gcc(tmp_path, "libmujoco.so.9.9.9", "int mj_version(void) { return 9009009; }\n",
               "-Wl,-soname,libmujoco.so.9.9.9")
    linked = gcc(tmp_path, "other_library.so", "int mj_version(void);\n"
                 "int episodic_mujoco_version(void) { return mj_version(); }\n", stub)
    (tmp_path / "libmujoco.so.9.9.9").unlink()
    with pytest.raises(native.NativeError, match=r"cannot be loaded with MuJoCo 4\.0\.0 .*libmujoco\.so\.9\.9\.9.*"
                                                 r"reinstall"):
        native.load(linked)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_an_error_inside_mujoco_ends_the_run_not_the_process(tmp_path):
    """mju_error inside the compiled loop (here from a feedback law that calls it, as an
    overflowing arena would) raises mujoco.FatalError with MuJoCo's text, like MuJoCo's own
    Python functions; the process and its simulation go on (without the guard MuJoCo exits)."""
    library = Path(mujoco.__file__).parent / f"libmujoco.so.{mujoco.__version__}"
    failing = gcc(tmp_path, "failing_law.so", "#include <mujoco/mujoco.h>\n"
                  "void law(const mjModel* m, mjData* d, int n, const mjtNum* p, mjtNum* mem, mjtNum* out) {\n"
                  "  mj_markStack(d); mj_stackAllocNum(d, 3); mju_error(\"the law failed at t = %g\", d->time); }\n",
                  f"-I{library.parent / 'include'}", str(library))
    with started("ball_on_beam") as r:
        sim, law = r.sim, r.task.compiled_law(r.sim.model, np.array([1.5, 0.5]))
        good = law(sim.data)
        law.function = ctypes.cast(ctypes.CDLL(failing).law, ctypes.c_void_p).value
        g = Gains(ROBOT.kp, ROBOT.kd, np.zeros(ROBOT.n_dofs), Feedforward.GRAVITY_COMPENSATION)
        stack = sim.data.pstack
        with pytest.raises(mujoco.FatalError, match=r"the law failed at t = 0"):
            law(sim.data)
        with pytest.raises(mujoco.FatalError, match=r"the law failed at t = 0"):
            sim.run(desired_motion(sim.q, 10), g, law)
        assert sim.data.pstack == stack  # its stack frames released
        assert len(sim.run(desired_motion(sim.q, 10), g)) == 10
    assert good[-1] != 0.0


def test_the_installed_library_matches_the_installed_mujoco():
    assert native.library().episodic_mujoco_version() == mujoco.mj_version()


def test_the_segment_struct_is_laid_out_as_the_library_says():
    """SegmentArgs matches the library's table of episodic_segment (load checks it); a mirror
    with a field of another type, one missing or two swapped is refused, naming the field."""
    lib = native.library()
    native.check_layout(lib, "episodic_segment", native.SegmentArgs)
    fields = list(native.SegmentArgs._fields_)
    dt = next(i for i, (name, _) in enumerate(fields) if name == "dt")
    n = next(i for i, (name, _) in enumerate(fields) if name == "n")
    wrong = {"dt as a float": fields[:dt] + [("dt", ctypes.c_float)] + fields[dt + 1:],
             "no error field": fields[:-1],
             "n and n_dofs swapped": fields[:n] + [fields[n + 1], fields[n]] + fields[n + 2:]}
    for layout in wrong.values():
        mirror = type("Wrong", (ctypes.Structure,), {"_fields_": layout})
        with pytest.raises(native.NativeError, match=r"lays out episodic_segment .*change both together"):
            native.check_layout(lib, "episodic_segment", mirror)
    table, size = native.fields(lib, "episodic_segment")
    assert [f.name for f in table] == [name for name, _ in fields] and size == ctypes.sizeof(native.SegmentArgs)


@pytest.mark.parametrize("name", list(CONTEXTS))
def test_a_law_takes_its_parameters_by_the_names_of_its_c_struct(name):
    """Each law's table fills its struct of doubles; the task's law puts each named value at the
    C field's offset (the task gains where the law reads them); a missing or unknown name is
    refused, and so is an array longer than its field."""
    table, size = native.layout(f"episodic_law_{name}_param")
    assert size * 8 == sum(f.size for f in table.values())
    gains = {"ball_on_beam": [1.5, 0.5], "pole_balancing": [2.0, 0.5, 1.0, 1.5],
             "ball_bouncing": [0.5, 0.2]}[name]
    where = {"ball_on_beam": ("k_x", "k_v"), "pole_balancing": ("gains",) * 4, "ball_bouncing": ("k_r", "k_v")}[name]
    with started(name) as r:
        law = r.task.compiled_law(r.sim.model, np.array(gains))
        at = [table[field].offset // 8 + (i if field == "gains" else 0) for i, field in enumerate(where)]
        assert law.param.tolist()[min(at): max(at) + 1] == gains and law.param.size == size
        named = {key: law.param[f.offset // 8: (f.offset + f.size) // 8] for key, f in table.items()}
        assert np.array_equal(native.CompiledLaw(r.sim.model, name, ROBOT.n_dofs, named).param, law.param)
        missing = dict(named)
        del missing[next(iter(table))]
        with pytest.raises(native.NativeError, match=f"episodic_law_{name}_param .in C. has the fields"):
            native.CompiledLaw(r.sim.model, name, ROBOT.n_dofs, missing)
        with pytest.raises(native.NativeError, match="has the fields"):
            native.CompiledLaw(r.sim.model, name, ROBOT.n_dofs, {**named, "k_z": 1.0})
        key = max(table, key=lambda k: table[k].size)
        with pytest.raises(ValueError, match=f"field {key} holds {table[key].size // 8} values"):
            native.CompiledLaw(r.sim.model, name, ROBOT.n_dofs, {**named, key: np.zeros(table[key].size // 8 + 1)})


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_law_whose_table_leaves_a_field_out_is_refused(tmp_path):
    """A law's parameter struct with a field its table does not list (which Python could not
    fill) is refused when the law is bound; listing every field passes."""
    include = Path(mujoco.__file__).parent / "include"
    source = ("#include \"episodic.h\"\n"
              "typedef struct { mjtNum a; mjtNum b[2]; mjtNum c; } p;\n"
              "EPISODIC_LAW_PARAM(gap, p, EPISODIC_FIELD(p, a) EPISODIC_FIELD(p, c))\n"
              "EPISODIC_LAW_PARAM(whole, p, EPISODIC_FIELD(p, c) EPISODIC_FIELD(p, a) EPISODIC_FIELD(p, b))\n"
              "void episodic_law_gap(void) {}\nvoid episodic_law_whole(void) {}\n")
    lib = ctypes.CDLL(gcc(tmp_path, "laws.so", source, f"-I{ROOT / 'episodic/native'}", f"-I{include}"))
    with pytest.raises(native.NativeError, match=r"episodic_law_gap_param must be .* do not fill its 32 bytes"):
        native.doubles_layout(lib, "episodic_law_gap_param")
    table, size = native.doubles_layout(lib, "episodic_law_whole_param")
    assert size == 4 and {k: (f.offset, f.size) for k, f in table.items()} == {"a": (0, 8), "b": (8, 16),
                                                                             "c": (24, 8)}


NO_COMPILER_RUN = str(ROOT / ".ci" / "no_compiler.py")  # two blocking reach episodes
TASK_GAINS_RUN = """
import numpy as np
from episodic.interface.commands import GainsCommand, StartCommand
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

with Runner(make_task("ball_on_beam")) as runner:
    robot = runner.robot
    runner.send(StartCommand(1, 2, context=np.array([0.1, 0.2])))
    reply = runner.send(GainsCommand(1, 1, 2, robot.kp, robot.kd, task_gains=np.array([1.5, 0.5])))
print(reply.flag.name, reply.message)
"""


@pytest.mark.slow
def test_a_package_without_its_compiled_loop_runs_the_python_loop_with_one_warning(tmp_path):
    """The package as an install without a C compiler leaves it (the tracked files, no compiled
    library; ``pip install`` itself with CC=/nonexistent is .ci/run's second job): blocking reach
    episodes then step in Python, warn once how much slower that is and how to build the
    compiled loop, and end in the very state the compiled loop reaches; task gains for a law in
    C are refused with what to do."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "episodic", site / "episodic", symlinks=False,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    done = subprocess.run([sys.executable, NO_COMPILER_RUN], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(site)), timeout=300)
    assert done.returncode == 0, done.stderr
    compiled, flags, state = done.stdout.split(" ", 2)
    assert compiled == "False" and flags == "OK,OK,OK"
    assert done.stderr.count("RuntimeWarning") == 1 and native.SLOWER in done.stderr
    assert "install gcc" in done.stderr and "reinstall episodic" in done.stderr
    # a task whose law is in C refuses task gains, saying how to build it
    refused = subprocess.run([sys.executable, "-c", TASK_GAINS_RUN], cwd=tmp_path, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(site)), timeout=300)
    assert refused.stdout.startswith("INVALID_PAYLOAD episodic's compiled part") and "install gcc" in refused.stdout
    here = subprocess.run([sys.executable, NO_COMPILER_RUN], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert here.stdout.split(" ", 2) == ["True", flags, state] and "RuntimeWarning" not in here.stderr
