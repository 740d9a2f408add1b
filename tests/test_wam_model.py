"""The Barrett WAM model (robots/wam/wam.xml) and its settings (robots/wam/robot.toml).

Real MuJoCo, no mocks. Reference numbers are Barrett's published WAM data (DH table, AC-02 inertias).
"""
from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

import episodic.robot as robot_module
from episodic.robot import RobotError, load_robot

JOINTS = ("j1", "j2", "j3", "j4", "j5", "j6", "j7")
LINKS = tuple(f"wam_link{i}" for i in range(1, 8))
# link masses, kg (Barrett AC-02)
TABLE_MASSES = (10.7677, 3.8749, 1.8023, 2.4002, 0.1238, 0.4180, 0.0686)
TABLE_LOWER = (-2.6, -1.985, -2.8, -0.9, -4.55, -1.5707, -2.7)
TABLE_UPPER = (2.6, 1.985, 2.8, 3.1416, 1.25, 1.5707, 2.7)
BASE_HEIGHT = 0.84
# zero posture, straight up: shoulder 0.160 + 0.184, upper arm 0.505 + 0.045, forearm 0.3,
# wrist centre to flange 0.06 (link 7's body offset).
SHOULDER_HEIGHT = BASE_HEIGHT + 0.160 + 0.184
ARM_LENGTH = 0.505 + 0.045 + 0.3 + 0.06  # shoulder (j2 axis) to flange
EE_HEIGHT_ZERO = SHOULDER_HEIGHT + ARM_LENGTH  # 2.094
# Largest plausible radius of gyration about the COM for each link (its length scale): the
# shoulder housing and upper arm are tens of cm, the wrist parts a few cm.
MAX_GYRATION_RADIUS = (0.25, 0.15, 0.25, 0.15, 0.05, 0.05, 0.05)


@pytest.fixture(scope="module")
def wam():
    return load_robot("wam")


@pytest.fixture(scope="module")
def model(wam):
    return mujoco.MjModel.from_xml_path(str(wam.mjcf))


def _forward(model, q):
    data = mujoco.MjData(model)
    data.qpos[:] = q
    mujoco.mj_forward(model, data)
    return data


def _joint_ids(model):
    return [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in JOINTS]


def _body_ids(model):
    return [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in LINKS]


# ---------------------------------------------------------------- settings vs. model


def test_settings_load(wam):
    assert wam.name == "wam"
    assert wam.n_dofs == 7
    assert wam.joint_names == JOINTS
    assert wam.end_effector_site == "ee"
    assert wam.mjcf.is_file()
    assert wam.control_rate == 500.0 and wam.substeps == 1
    assert wam.feedforward == "gravity_compensation"
    np.testing.assert_allclose(wam.kp, [200, 300, 100, 100, 10, 10, 2.5])
    np.testing.assert_allclose(wam.kd, [7, 15, 5, 2.5, 0.3, 0.3, 0.05])
    np.testing.assert_allclose(wam.torque_limit, [150, 125, 40, 60, 5, 5, 2])
    np.testing.assert_allclose(wam.home, [0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
    np.testing.assert_allclose(wam.range_lower, TABLE_LOWER)
    np.testing.assert_allclose(wam.range_upper, TABLE_UPPER)
    assert np.all(wam.velocity_limit > 0)
    # GOTO_START bounds stay below the hard limits
    assert np.all(wam.goto.max_velocity < wam.velocity_limit)
    assert np.all(wam.goto.max_acceleration > 0)
    assert 0 < wam.goto.tolerance_q < 0.01 and 0 < wam.goto.tolerance_qd < 0.1


def test_seven_hinge_joints_named_as_in_settings(wam, model):
    assert model.njnt == 7 and model.nq == 7 and model.nv == 7
    names = tuple(model.joint(i).name for i in range(model.njnt))
    assert names == wam.joint_names
    assert np.all(model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE)
    np.testing.assert_allclose(model.jnt_axis, np.tile([0.0, 0.0, 1.0], (7, 1)))
    # one chain: each link's parent is the previous link
    ids = _body_ids(model)
    assert list(model.jnt_bodyid) == ids
    assert all(model.body_parentid[b] == a for a, b in zip(ids, ids[1:]))


def test_ranges_match_mjcf(wam, model):
    ids = _joint_ids(model)
    assert np.all(model.jnt_limited[ids])
    np.testing.assert_allclose(model.jnt_range[ids, 0], wam.range_lower)
    np.testing.assert_allclose(model.jnt_range[ids, 1], wam.range_upper)


def test_torque_limits_match_mjcf(wam, model):
    ids = _joint_ids(model)
    assert np.all(model.jnt_actfrclimited[ids])
    np.testing.assert_allclose(model.jnt_actfrcrange[ids, 0], -wam.torque_limit)
    np.testing.assert_allclose(model.jnt_actfrcrange[ids, 1], wam.torque_limit)


def test_home_posture_inside_range(wam):
    assert np.all(wam.home >= wam.range_lower) and np.all(wam.home <= wam.range_upper)


def test_model_leaves_actuators_sensors_and_options_to_the_scene(wam, model):
    assert model.nu == 0 and model.nsensor == 0
    root = ET.parse(wam.mjcf).getroot()
    assert root.find("option") is None
    assert root.find("actuator") is None and root.find("sensor") is None


def test_end_effector_site_on_link7(wam, model):
    site = model.site(wam.end_effector_site)
    assert model.site_bodyid[site.id] == _body_ids(model)[-1]


# ---------------------------------------------------------------- kinematics


def test_zero_posture_points_straight_up(wam, model):
    data = _forward(model, np.zeros(7))
    ee = data.site(wam.end_effector_site).xpos
    np.testing.assert_allclose(ee[:2], 0.0, atol=1e-9)
    assert ee[2] == pytest.approx(EE_HEIGHT_ZERO, abs=1e-6)
    assert ee[2] == pytest.approx(2.096, abs=0.005)  # the brief's rounded figure
    shoulder = data.xanchor[_joint_ids(model)[1]]
    np.testing.assert_allclose(shoulder, [0.0, 0.0, SHOULDER_HEIGHT], atol=1e-9)
    assert np.linalg.norm(ee - shoulder) == pytest.approx(ARM_LENGTH, abs=1e-6)
    # every joint axis point lies on or near the vertical line (elbow offset 0.045)
    assert np.all(np.linalg.norm(data.xanchor[:, :2], axis=1) <= 0.045 + 1e-9)
    # and the flange is the highest point of the chain
    assert ee[2] >= data.xpos[_body_ids(model)].max(axis=0)[2] - 1e-9


def test_link_heights_at_zero_posture(model):
    data = _forward(model, np.zeros(7))
    z = data.xpos[_body_ids(model), 2]
    expected = [1.0, 1.184, 1.689, 1.734, 1.734, 2.034, 2.094]
    np.testing.assert_allclose(z, expected, atol=1e-6)


def test_home_posture_end_effector_plausible(wam, model):
    data = _forward(model, wam.home)
    ee = data.site(wam.end_effector_site).xpos
    assert BASE_HEIGHT < ee[2] < EE_HEIGHT_ZERO - 0.1
    shoulder = data.xanchor[_joint_ids(model)[1]]
    reach = np.linalg.norm(ee - shoulder)
    assert 0.3 < reach < ARM_LENGTH + 0.05
    # j1 = 0 at home: the arm leans into the x-z plane
    assert abs(ee[1]) < 1e-6 and ee[0] > 0.3


def test_home_and_zero_have_no_contacts(wam, model):
    for q in (np.zeros(7), wam.home, wam.range_lower, wam.range_upper):
        data = _forward(model, q)
        assert data.ncon == 0


# ---------------------------------------------------------------- inertia


def test_masses_match_table(model):
    np.testing.assert_allclose(model.body_mass[_body_ids(model)], TABLE_MASSES, rtol=1e-9)


def test_total_arm_mass(model):
    assert model.body_mass[_body_ids(model)].sum() == pytest.approx(19.4555, abs=1e-4)
    assert model.body_mass[_body_ids(model)].sum() == pytest.approx(19.5, abs=0.1)


def test_geoms_carry_no_mass(model):
    # inertias come from <inertial> only; the base body (fixed) has none
    base = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "wam_base")
    assert model.body_mass[base] == 0.0


@pytest.mark.parametrize("link", range(7))
def test_radius_of_gyration_plausible(model, link):
    body = _body_ids(model)[link]
    radius = np.sqrt(model.body_inertia[body].max() / model.body_mass[body])
    assert radius < MAX_GYRATION_RADIUS[link], f"{LINKS[link]}: radius of gyration {radius:.3f} m"


def test_bad_link5_inertia_would_be_caught():
    # the value one public model lists for link 5 (0.0112 kg m^2 on 0.1238 kg)
    assert np.sqrt(0.0112 / TABLE_MASSES[4]) > MAX_GYRATION_RADIUS[4]


@pytest.mark.parametrize("link", range(7))
def test_principal_inertias_satisfy_triangle_inequality(model, link):
    a, b, c = model.body_inertia[_body_ids(model)[link]]
    assert min(a, b, c) > 0
    assert a + b >= c and b + c >= a and a + c >= b


def test_joint_dynamics_present(model):
    ids = _joint_ids(model)
    dofs = model.jnt_dofadr[ids]
    assert np.all(model.dof_armature[dofs] > 0)
    assert np.all(model.dof_damping[dofs] > 0)
    assert np.all(model.dof_frictionloss[dofs] > 0)
    # reflected motor inertia: large on the big joints, small on the wrist
    assert np.all(model.dof_armature[dofs[:3]] > 0.05)
    assert np.all(model.dof_armature[dofs[4:]] < 0.01)


def test_wrist_pd_step_small_enough_at_500hz(wam, model):
    """kd dt / M_ii well below 1: the reflected inertia keeps the 500 Hz PD loop stable."""
    for q in (np.zeros(7), wam.home):
        data = _forward(model, q)
        mass = np.zeros((7, 7))
        mujoco.mj_fullM(model, data, mass)
        ratio = wam.kd * wam.control_dt / np.diag(mass)
        assert np.all(ratio < 0.5), ratio


def test_friction_below_goto_tolerance(wam, model):
    """Coulomb friction / kp (the steady-state error under PD) is inside the GOTO tolerance."""
    dofs = model.jnt_dofadr[_joint_ids(model)]
    assert np.all(model.dof_frictionloss[dofs] / wam.kp < wam.goto.tolerance_q / 2)


# ---------------------------------------------------------------- contacts


def test_no_self_collision_but_floor_collides(model):
    robot_geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] != 0]
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")

    def can_collide(g1, g2):
        return bool(
            (model.geom_contype[g1] & model.geom_conaffinity[g2])
            or (model.geom_contype[g2] & model.geom_conaffinity[g1])
        )

    for i in robot_geoms:
        for j in robot_geoms:
            assert not can_collide(i, j), (model.geom(i).name, model.geom(j).name)
    moving = [g for g in robot_geoms if model.body_weldid[model.geom_bodyid[g]] != 0]
    assert moving and all(can_collide(g, floor) for g in moving)
    # a default geom (contype = conaffinity = 1), e.g. a ball, also hits the arm
    assert all(model.geom_conaffinity[g] & 1 for g in moving)


# ---------------------------------------------------------------- simulation


def _sim_model(wam):
    """A fresh model with the scene builder's physics options: 2 ms steps, implicitfast."""
    m = mujoco.MjModel.from_xml_path(str(wam.mjcf))
    m.opt.timestep = 0.002
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    return m


def test_falls_under_gravity_without_nans(wam):
    m = _sim_model(wam)
    data = mujoco.MjData(m)
    data.qpos[:] = [0.1, 0.3, 0.2, 0.5, 0.1, 0.2, 0.1]
    for _ in range(1000):  # 2 s
        mujoco.mj_step(m, data)
        assert np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel))
    # it fell: the shoulder swung forward to its limit region and the flange dropped
    assert data.site("ee").xpos[2] < EE_HEIGHT_ZERO - 0.5
    assert data.qpos[1] > 1.5


def test_pd_with_gravity_compensation_holds_and_tracks(wam):
    """SL's law at 500 Hz (torques held for one 2 ms step) settles on a step target."""
    m = _sim_model(wam)
    data = mujoco.MjData(m)
    data.qpos[:] = wam.home
    target = wam.home + np.array([0.05, -0.05, 0.05, 0.05, 0.1, 0.1, 0.1])
    gravity = mujoco.MjData(m)
    for _ in range(int(1.5 * wam.control_rate)):
        gravity.qpos[:] = data.qpos
        mujoco.mj_forward(m, gravity)  # qvel = 0: qfrc_bias is gravity only
        u = wam.kp * (target - data.qpos) - wam.kd * data.qvel + gravity.qfrc_bias
        data.qfrc_applied[:] = np.clip(u, -wam.torque_limit, wam.torque_limit)
        mujoco.mj_step(m, data)
        assert np.all(np.abs(data.qvel) < wam.velocity_limit)
    assert np.all(np.abs(target - data.qpos) < wam.goto.tolerance_q)
    assert np.all(np.abs(data.qvel) < wam.goto.tolerance_qd)


# ---------------------------------------------------------------- broken settings


@pytest.fixture
def robots_copy(tmp_path, monkeypatch):
    """A writable copy of robots/wam under tmp_path, with ROBOTS_DIR pointing at it."""
    shutil.copytree(robot_module.ROBOTS_DIR / "wam", tmp_path / "wam")
    monkeypatch.setattr(robot_module, "ROBOTS_DIR", tmp_path)
    return tmp_path / "wam" / "robot.toml"


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_copy_loads(robots_copy):
    assert load_robot("wam").n_dofs == 7


def test_rejects_kp_with_wrong_length(robots_copy):
    _edit(robots_copy, "kp = [200, 300, 100, 100, 10, 10, 2.5]", "kp = [200, 300, 100, 100, 10, 10]")
    with pytest.raises(RobotError, match=r"'kp' needs 7 values"):
        load_robot("wam")


def test_rejects_home_outside_range(robots_copy):
    _edit(robots_copy, "home = [0, 0.5876,", "home = [3.0, 0.5876,")
    with pytest.raises(RobotError, match="home posture lies outside"):
        load_robot("wam")


def test_rejects_missing_model_file(robots_copy):
    _edit(robots_copy, 'mjcf = "wam.xml"', 'mjcf = "nothere.xml"')
    with pytest.raises(RobotError, match="not found"):
        load_robot("wam")


def test_rejects_unknown_robot(robots_copy):
    with pytest.raises(RobotError, match="unknown robot 'nope'; available: wam"):
        load_robot("nope")
