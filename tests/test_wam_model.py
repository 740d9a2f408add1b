"""The Barrett WAM model (robots/wam/wam.xml) and its settings (robots/wam/robot.toml).

Real MuJoCo, no mocks. Reference numbers are Barrett's published WAM data (DH table, AC-02 inertias,
motor and drive data, user manual) and the checks of design.md section 6; docs/wam_model.md derives
the model's numbers from them.
"""
from __future__ import annotations

import shutil

import mujoco
import numpy as np
import pytest

import episodic.interface.robot as robot_module
from episodic.interface.robot import RobotError, load_robot
from tests.helpers import posed

JOINTS = ("j1", "j2", "j3", "j4", "j5", "j6", "j7")
LINKS = tuple(f"wam_link{i}" for i in range(1, 8))
# link masses, kg (Barrett AC-02)
TABLE_MASSES = (10.7677, 3.8749, 1.8023, 2.4002, 0.1238, 0.4180, 0.0686)
# mechanical joint ranges, rad (Barrett's WAM user manual)
TABLE_LOWER = (-2.6, -2.0, -2.8, -0.9, -4.76, -1.6, -3.0)
TABLE_UPPER = (2.6, 2.0, 2.8, 3.1, 1.24, 1.6, 3.0)
BASE_HEIGHT = 0.84
# zero posture, straight up: shoulder 0.160 + 0.184, upper arm 0.505 + 0.045, forearm 0.3,
# wrist centre to flange 0.06 (link 7's body offset).
SHOULDER_HEIGHT = BASE_HEIGHT + 0.160 + 0.184
ARM_LENGTH = 0.505 + 0.045 + 0.3 + 0.06  # shoulder (j2 axis) to flange
EE_HEIGHT_ZERO = SHOULDER_HEIGHT + ARM_LENGTH  # 2.094
# Largest plausible radius of gyration about the COM for each link (its length scale): the
# shoulder housing and upper arm are tens of cm, the wrist parts a few cm.
MAX_GYRATION_RADIUS = (0.25, 0.15, 0.25, 0.15, 0.05, 0.05, 0.05)
HOME = (0, 0.5876, 0, 1.36, 0, -0.321, -1.57)

# Barrett's DH table (standard convention, T_i = Rz(q_i) Tz(d_i) Tx(a_i) Rx(alpha_i)): a, alpha, d.
DH_TABLE = ((0, -np.pi / 2, 0), (0, np.pi / 2, 0), (0.045, -np.pi / 2, 0.55),
            (-0.045, np.pi / 2, 0), (0, -np.pi / 2, 0.3), (0, np.pi / 2, 0), (0, 0, 0.06))
# DH frame 0: at the j1/j2 intersection, 0.84 + 0.160 + 0.184 m up, axes along the world's
# (= link 1's frame at q1 = 0; design.md section 6).
DH_BASE_HEIGHT = 0.84 + 0.160 + 0.184
# Barrett AC-02 (7-DoF WAM): each link's centre of mass in its DH frame (m), and its inertia about
# that centre, axes of the DH frame, as AC-02 lists it: Lxx Lxy Lxz Lyy Lyz Lzz (kg m^2), where
# the off-diagonal L are products of inertia, the integral of x y dm (see
# test_ac02_off_diagonals_are_products_of_inertia).
AC02_COM = (
    (-0.00443422, 0.12189039, -0.00066489),
    (-0.00236983, 0.03105614, 0.01542114),
    (-0.03825858, 0.20750770, 0.00003309),
    (0.00498512, -0.00022942, 0.13271662),
    (0.00008921, 0.00511217, 0.00435824),
    (-0.00012262, -0.01703194, 0.02468336),
    (-0.00007974, 0.00016313, -0.00323552),
)
AC02_L = (
    (0.13488033, -0.00213041, -0.00012485, 0.11328369, 0.00068555, 0.09046330),
    (0.02140958, 0.00027172, 0.00002461, 0.01377875, -0.00181920, 0.01558906),
    (0.05911077, -0.00249612, 0.00000738, 0.00324550, -0.00001767, 0.05927043),
    (0.01491672, 0.00001741, -0.00150604, 0.01482922, -0.00002109, 0.00294463),
    (0.00005029, 0.00000020, -0.00000005, 0.00007582, -0.00000359, 0.00006270),
    (0.00055516, 0.00000061, -0.00000074, 0.00024367, -0.00004590, 0.00045358),
    (0.00003773, -0.00000019, 0.0, 0.00003806, 0.0, 0.00007408),
)
# Centres of mass in the MJCF body frames, transformed independently from AC-02 (design.md
# section 6), m.
BODY_COM = (
    (-0.00443, -0.00066, 0.06211),
    (-0.00237, -0.01542, 0.03106),
    (0.00674, 0.00003, -0.16251),
    (-0.04001, -0.13272, -0.00023),
    (0.00009, 0.00436, 0.29489),
    (-0.00012, -0.02468, -0.01703),
    (-0.00008, 0.00016, -0.00324),
)
# Checks computed independently from AC-02 (design.md section 6): torque that holds the arm
# against gravity at HOME (N m) and the mass-matrix diagonal at HOME with the drive inertias
# (kg m^2).
HOME_GRAVITY_J2, HOME_GRAVITY_J4 = -18.97, -5.16
HOME_MASS_DIAGONAL = (1.260, 1.816, 0.227, 0.161, 0.0039, 0.0038, 0.0004)
# Joint-space drive inertia (kg m^2) and viscous friction (N m s/rad), design.md section 6.
JOINT_ARMATURE = (0.205, 0.189, 0.0669, 0.0346, 0.0031, 0.0031, 0.0003)
JOINT_DAMPING = (1.27, 1.15, 0.408, 0.234, 0.0153, 0.0153, 0.0027)


@pytest.fixture(scope="module")
def wam():
    return load_robot("wam")


@pytest.fixture(scope="module")
def model(wam):
    return mujoco.MjModel.from_xml_path(str(wam.mjcf))


def _joint_ids(model):
    return [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in JOINTS]


def _body_ids(model):
    return [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in LINKS]


def _dh_frames(q):
    """World poses (4x4) of Barrett's DH frames 1..7 at posture q, from the DH table alone."""
    pose = np.eye(4)
    pose[2, 3] = DH_BASE_HEIGHT
    frames = []
    for (a, alpha, d), theta in zip(DH_TABLE, q):
        ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
        pose = pose @ np.array([[ct, -st * ca, st * sa, a * ct],
                                [st, ct * ca, -ct * sa, a * st],
                                [0.0, sa, ca, d],
                                [0.0, 0.0, 0.0, 1.0]])
        frames.append(pose)
    return frames


def _body_pose(data, body):
    pose = np.eye(4)
    pose[:3, :3] = data.xmat[body].reshape(3, 3)
    pose[:3, 3] = data.xpos[body]
    return pose


def _random_postures(wam, n, seed=0):
    return np.random.default_rng(seed).uniform(wam.range_lower, wam.range_upper, size=(n, 7))


def _ac02_inertia_matrix(link):
    """AC-02's tensor of one link as an inertia matrix (DH frame, about the COM): the diagonal
    as listed, the off-diagonal entries minus AC-02's products of inertia."""
    xx, xy, xz, yy, yz, zz = AC02_L[link]
    return np.array([[xx, -xy, -xz], [-xy, yy, -yz], [-xz, -yz, zz]])


def _model_inertia_matrix(model, body):
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[body])
    rot = rot.reshape(3, 3)
    return rot @ np.diag(model.body_inertia[body]) @ rot.T


def _gravity_reference(q, g):
    """Torque that holds posture q against gravity (dV/dq), from the DH table and AC-02's
    DH-frame centres of mass alone: sum over links i and joints j <= i of
    m_i g [z_(j-1) x (c_i - o_(j-1))]_z."""
    frames = _dh_frames(q)
    base = np.eye(4)
    base[2, 3] = DH_BASE_HEIGHT
    before = [base] + frames[:-1]  # joint j turns about the z axis of DH frame j-1
    tau = np.zeros(7)
    for i, frame in enumerate(frames):
        com = frame[:3, :3] @ AC02_COM[i] + frame[:3, 3]
        for j in range(i + 1):
            tau[j] += TABLE_MASSES[i] * g * np.cross(before[j][:3, 2], com - before[j][:3, 3])[2]
    return tau


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


# ---------------------------------------------------------------- kinematics


def test_zero_posture_points_straight_up(wam, model):
    data = posed(model, np.zeros(7))
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
    data = posed(model, np.zeros(7))
    z = data.xpos[_body_ids(model), 2]
    expected = [1.0, 1.184, 1.689, 1.734, 1.734, 2.034, 2.094]
    np.testing.assert_allclose(z, expected, atol=1e-6)


def test_home_posture_end_effector_plausible(wam, model):
    data = posed(model, wam.home)
    ee = data.site(wam.end_effector_site).xpos
    assert BASE_HEIGHT < ee[2] < EE_HEIGHT_ZERO - 0.1
    shoulder = data.xanchor[_joint_ids(model)[1]]
    reach = np.linalg.norm(ee - shoulder)
    assert 0.3 < reach < ARM_LENGTH + 0.05
    # j1 = 0 at home: the arm leans into the x-z plane
    assert abs(ee[1]) < 1e-6 and ee[0] > 0.3


def test_forward_kinematics_matches_barrett_dh_table(wam, model):
    """Every link frame of the model is rigidly attached to Barrett's DH frame of that link, and
    the flange is DH frame 7 (position and orientation), over 200 random postures."""
    ids = _body_ids(model)
    offsets = None
    for q in _random_postures(wam, 200):
        data = posed(model, q)
        frames = _dh_frames(q)
        np.testing.assert_allclose(data.site(wam.end_effector_site).xpos, frames[6][:3, 3], atol=1e-9)
        np.testing.assert_allclose(data.xmat[ids[6]].reshape(3, 3), frames[6][:3, :3], atol=1e-9)
        here = [np.linalg.inv(_body_pose(data, b)) @ f for b, f in zip(ids, frames)]
        if offsets is None:
            offsets = here
        for a, b in zip(offsets, here):
            np.testing.assert_allclose(a, b, atol=1e-9)


def test_home_and_zero_have_no_contacts(wam, model):
    for q in (np.zeros(7), wam.home, wam.range_lower, wam.range_upper):
        data = posed(model, q)
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


def test_body_frame_coms_match_design_list(model):
    """AC-02's centres of mass expressed in the MJCF body frames (design.md's independent list)."""
    np.testing.assert_allclose(model.body_ipos[_body_ids(model)], BODY_COM, rtol=0, atol=1e-3)


def test_inertials_are_ac02_transformed_into_the_body_frames(wam, model):
    """COM_body = R c + p and I_body = R I R^T, with (R, p) the pose of DH frame i in body i,
    measured here from the DH table and the model's own kinematics."""
    ids = _body_ids(model)
    q = _random_postures(wam, 1, seed=3)[0]
    data = posed(model, q)
    for link, (body, frame) in enumerate(zip(ids, _dh_frames(q))):
        offset = np.linalg.inv(_body_pose(data, body)) @ frame
        rot, origin = offset[:3, :3], offset[:3, 3]
        np.testing.assert_allclose(model.body_ipos[body], rot @ AC02_COM[link] + origin, atol=1e-7,
                                   err_msg=LINKS[link])
        expected = rot @ _ac02_inertia_matrix(link) @ rot.T
        np.testing.assert_allclose(_model_inertia_matrix(model, body), expected, rtol=0, atol=1e-8,
                                   err_msg=LINKS[link])


def test_ac02_off_diagonals_are_products_of_inertia():
    """Which sign AC-02's off-diagonal entries carry. Barrett's data also give links 1-4's tensors
    about the DH frame origin (as carried in the IAS lab's SL parameter files, link set 2); they
    equal the ones about the COM plus m c_x c_y, the parallel-axis rule for products of inertia
    (integral of x y dm). For inertia-matrix entries it would be minus, which the data miss by
    up to 2.9e-2 kg m^2. So the model negates them (see the test above)."""
    about_origin = (
        (0.29486350, -0.00795023, -0.00009311, 0.11350017, -0.00018711, 0.25065343),
        (0.02606840, -0.00001346, -0.00011701, 0.01472202, 0.00003659, 0.01934814),
        (0.13671601, -0.01680434, 0.00000510, 0.00588354, -0.00000530, 0.13951371),
        (0.05719269, 0.00001467, 0.00008193, 0.05716471, -0.00009417, 0.00300440),
    )
    masses = (10.76768767, 3.87493756, 1.80228141, 2.40016804)  # AC-02, unrounded
    for link, origin in enumerate(about_origin):
        m, (x, y, z) = masses[link], AC02_COM[link]
        xx, xy, xz, yy, yz, zz = AC02_L[link]
        diagonal = (xx + m * (y * y + z * z), yy + m * (x * x + z * z), zz + m * (x * x + y * y))
        np.testing.assert_allclose(np.take(origin, [0, 3, 5]), diagonal, atol=2e-7)
        products = np.array([xy + m * x * y, xz + m * x * z, yz + m * y * z])
        np.testing.assert_allclose(np.take(origin, [1, 2, 4]), products, atol=2e-7)
        matrix_entries = np.array([xy - m * x * y, xz - m * x * z, yz - m * y * z])
        assert np.abs(np.take(origin, [1, 2, 4]) - matrix_entries).max() > 1e-5


def test_link5_mass_sits_at_the_wrist(wam, model):
    """The old model left out the offset between Barrett's DH frames and the body frames: link 5's
    COM landed at the elbow (7 mm from its body origin). Its 0.12 kg lie at the wrist, 0.3 m up
    the forearm, and link 3's COM lies on the upper arm, 0.34 m from the shoulder."""
    b5, b3 = _body_ids(model)[4], _body_ids(model)[2]
    assert 0.28 < np.linalg.norm(model.body_ipos[b5]) < 0.31
    for q in _random_postures(wam, 20, seed=1):
        data = posed(model, q)
        wrist = data.xanchor[_joint_ids(model)[5]]  # on the j6 axis, at the wrist centre
        assert np.linalg.norm(data.xipos[b5] - wrist) < 0.01
        shoulder = data.xanchor[_joint_ids(model)[1]]
        assert np.linalg.norm(data.xipos[b3] - shoulder) == pytest.approx(0.343, abs=0.01)


def test_bad_link5_inertia_would_be_caught():
    # the value one public model lists for link 5 (0.0112 kg m^2 on 0.1238 kg)
    assert np.sqrt(0.0112 / TABLE_MASSES[4]) > MAX_GYRATION_RADIUS[4]


def test_gravity_torque_at_home(model):
    """qfrc_bias at rest is the torque the joints must apply to hold the arm (gravity pulls the
    leaning arm forward, so j2 and j4 hold with negative torque); compared with design.md's
    -18.97 and -5.16 N m, same sign, within 1 %."""
    bias = posed(model, HOME).qfrc_bias[model.jnt_dofadr[_joint_ids(model)]]
    assert bias[1] == pytest.approx(HOME_GRAVITY_J2, rel=0.01)
    assert bias[3] == pytest.approx(HOME_GRAVITY_J4, rel=0.01)


def test_gravity_torque_matches_dh_and_ac02_everywhere(wam, model):
    """The same holding torque computed from the DH table and AC-02's DH-frame centres of mass
    alone, over 50 random postures (the old model was 0.95 N m off on j2, median)."""
    g = -model.opt.gravity[2]
    dofs = model.jnt_dofadr[_joint_ids(model)]
    for q in _random_postures(wam, 50, seed=2):
        bias = posed(model, q).qfrc_bias[dofs]
        np.testing.assert_allclose(bias, _gravity_reference(q, g), rtol=0, atol=1e-3)


def test_mass_matrix_diagonal_at_home(model):
    """Within 1 % of design.md's values for j1-j6. j7's 0.0004 has one significant digit: it
    stands for [0.00035, 0.00045), which is the tolerance used."""
    mass = np.zeros((7, 7))
    mujoco.mj_fullM(model, posed(model, HOME), mass)
    diagonal = np.diag(mass)
    np.testing.assert_allclose(diagonal[:6], HOME_MASS_DIAGONAL[:6], rtol=0.01)
    assert 0.00035 <= diagonal[6] < 0.00045


def test_armature_and_damping_are_the_joint_space_values(model):
    """Equal to design.md's joint-space values to the digits given there (each is rounded, so
    the tolerance is half a unit of its last digit: 0.00308 for j5/j6 and Barrett's 0.000318
    for j7 are what design.md's 0.0031 and 0.0003 stand for)."""
    dofs = model.jnt_dofadr[_joint_ids(model)]
    for values, given in ((model.dof_armature[dofs], JOINT_ARMATURE),
                          (model.dof_damping[dofs], JOINT_DAMPING)):
        for value, number in zip(values, given):
            half_unit = 0.5 * 10.0 ** -len(repr(number).split(".")[1])  # of the last decimal
            assert abs(value - number) <= half_unit * (1 + 1e-9), (value, number)


def _differential():
    """Motor angle per joint angle, divided by each motor's drive ratio N_k (Barrett's
    transmission; signs as libbarrett's j2mp): motors 2/3 turn +-q2 - q3 / 1.68, motors 5/6
    turn q5 -+ q6; the others drive one joint each."""
    t = np.eye(7)
    t[1:3, 1:3] = [[1.0, -1.0 / 1.68], [-1.0, -1.0 / 1.68]]
    t[4:6, 4:6] = [[1.0, -1.0], [1.0, 1.0]]
    return t


def test_drive_inertia_and_friction_reflect_the_differentials(model):
    """Joint space = t^T diag(per-motor value x N_k^2) t. Per motor, Barrett: drive inertia
    x N^2 = 0.205, 0.0944, 0.0944, 0.0346, 0.00154, 0.00154, 0.000318 kg m^2 (motors 5/6:
    1.715e-5 kg m^2 at N = 9.48); viscous friction 7.549e-5 (motors 1-4), 8.899e-6 (5-6),
    1.259e-6 (7) N m/rpm x 60/(2 pi) at the rotor, N = 42, 28.25, 28.25, 18, 9.48, 9.48, 14.93.
    The old model gave each differential joint one motor's value (j3 = j2, j5 half of this)."""
    dofs = model.jnt_dofadr[_joint_ids(model)]
    t = _differential()
    inertia = t.T @ np.diag([0.205, 0.0944, 0.0944, 0.0346, 1.715e-5 * 9.48**2,
                             1.715e-5 * 9.48**2, 0.000318]) @ t
    ratio = np.array([42, 28.25, 28.25, 18, 9.48, 9.48, 14.93])
    rotor_friction = np.array([7.549e-5] * 4 + [8.899e-6] * 2 + [1.259e-6]) * 60 / (2 * np.pi)
    friction = t.T @ np.diag(rotor_friction * ratio**2) @ t
    np.testing.assert_allclose(model.dof_armature[dofs], np.diag(inertia), rtol=0.005)
    np.testing.assert_allclose(model.dof_damping[dofs], np.diag(friction), rtol=0.01)
    # matched motor pairs: the coupling terms MuJoCo cannot hold vanish
    off = inertia - np.diag(np.diag(inertia))
    assert np.abs(off).max() < 1e-12 and np.abs(friction - np.diag(np.diag(friction))).max() < 1e-12
    # j3 sees the pair through the extra 1.68 stage, j2 and j5/j6 see both motors fully
    assert model.dof_armature[dofs[2]] / model.dof_armature[dofs[1]] == pytest.approx(1 / 1.68**2, rel=0.005)
    assert model.dof_armature[dofs[1]] == pytest.approx(2 * 0.0944, rel=0.005)


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
        data = posed(model, q)
        mass = np.zeros((7, 7))
        mujoco.mj_fullM(model, data, mass)
        ratio = wam.kd * wam.control_dt / np.diag(mass)
        assert np.all(ratio < 0.5), ratio


def test_friction_below_goto_tolerance(wam, model):
    """Coulomb friction / kp (the steady-state error under PD) is inside the GOTO tolerance."""
    dofs = model.jnt_dofadr[_joint_ids(model)]
    assert np.all(model.dof_frictionloss[dofs] / wam.kp < wam.goto.tolerance_q / 2)


# ---------------------------------------------------------------- contacts


# ---------------------------------------------------------------- simulation


def _sim_model(wam):
    """A fresh model with the scene builder's physics options: 2 ms steps, implicitfast."""
    m = mujoco.MjModel.from_xml_path(str(wam.mjcf))
    m.opt.timestep = 0.002
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    return m


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
