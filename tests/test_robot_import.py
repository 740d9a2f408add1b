"""Any arm (docs/robots.md): models nobody here wrote, imported with `episodic robots add`, pass
`episodic robots check` and run reach over the bridge with a bit-identical replay.

Real third-party models: the Franka Panda (with its two fingers) and the UR5 of the
example-robot-data package (URDFs with STL collision meshes and .dae visuals; the `robots`
extra), and tests/data/robots/two_finger_arm.xml, an MJCF written here as models come: its own
actuators, a keyframe, an <option>, a sensor, a light, a sky and a ground. The imports share one
user robot directory per module (EPISODIC_ROBOTS)."""
from __future__ import annotations

import importlib
import importlib.metadata
import shutil
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.robot import RobotError, find_robot, load_recorded_robot, load_robot
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.tasks import make_task
from episodic.tools.replay import replay
from episodic.tools.robot_check import check_robot
from episodic.tools.robot_import import RobotImportError, import_robot

try:  # the robots extra installs the models under its cmeel prefix (no Python module to import)
    ROBOTS = Path(str(importlib.metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots")))
except importlib.metadata.PackageNotFoundError:
    pytest.skip("example-robot-data is not installed: pip install -e '.[robots]'", allow_module_level=True)
PANDA = ROBOTS / "panda_description" / "urdf" / "panda.urdf"
UR5 = ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf"
ARM = Path(__file__).parent / "data" / "robots" / "two_finger_arm.xml"
# Franka's "ready" posture (franka_ros, franka_control/config/start_pose.yaml), rad
PANDA_READY = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398]


@pytest.fixture(scope="module")
def robots_dir(tmp_path_factory):
    """A user robot directory holding panda, ur5 and two_finger_arm, as `episodic robots add`
    leaves them; EPISODIC_ROBOTS points at it for the module (and the runners it serves)."""
    folder = tmp_path_factory.mktemp("robots")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EPISODIC_ROBOTS", str(folder))
        notices = {
            "panda": import_robot(PANDA, home=PANDA_READY, hold={"panda_finger_joint1": 0.04,
                                                                  "panda_finger_joint2": 0.04}, echo=str).notices,
            "ur5": import_robot(UR5, name="ur5", echo=str).notices,
            "two_finger_arm": import_robot(ARM, end_effector="tool", velocity_limit=[3.0], echo=str).notices,
        }
        yield folder, notices


def _settings(folder: Path, name: str) -> dict:
    with (folder / name / "robot.toml").open("rb") as f:
        return tomllib.load(f)


# -- the import -------------------------------------------------------------------------------------
def test_panda_folder_is_self_contained_with_the_urdf_limits_and_fingers_held(robots_dir):
    folder, notices = robots_dir
    robot = load_robot("panda")
    assert robot.source == "user" and robot.mjcf.parent == folder / "panda"
    assert robot.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    np.testing.assert_array_equal(robot.torque_limit, [87, 87, 87, 87, 12, 12, 12])  # <limit effort>
    np.testing.assert_array_equal(robot.velocity_limit, [2.175] * 4 + [2.61] * 3)  # <limit velocity>
    np.testing.assert_array_equal(robot.range_upper[3], -0.0698)
    assert robot.extra_joints.names == ("panda_finger_joint1", "panda_finger_joint2")
    np.testing.assert_array_equal(robot.extra_joints.hold, [0.04, 0.04])
    np.testing.assert_array_equal(robot.extra_joints.torque, [100, 100])
    # every mesh the model reads is inside the folder
    root = ET.parse(robot.mjcf).getroot()
    meshes = [m.get("file") for m in root.iter("mesh")]
    assert meshes and all((folder / "panda" / "assets" / m).is_file() for m in meshes)
    assert "assets/link0.stl" in robot.files and len(robot.sha256) == 64
    text = " ".join(notices["panda"])
    assert "<visual>" in text and "equality" in text


def test_gains_follow_the_stated_bandwidth_within_the_torque_limits(robots_dir):
    """kp = M omega^2 (omega = 2 pi 5 Hz) unless a 0.05 rad step would ask more than half the
    torque limit; kd = 2 sqrt(kp M) (critical damping), M the mass matrix's diagonal at home."""
    robot = load_robot("ur5")
    spec = mujoco.MjSpec.from_file(str(robot.mjcf))
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[:] = robot.home
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    inertia = np.diag(full)
    kp = np.minimum(inertia * (2 * np.pi * 5) ** 2, 0.5 * robot.torque_limit / robot.max_start_jump)
    np.testing.assert_allclose(robot.kp, kp, rtol=1e-5)
    np.testing.assert_allclose(robot.kd, 2 * np.sqrt(kp * inertia), rtol=1e-5)
    assert np.all(robot.kp * robot.max_start_jump <= 0.5 * robot.torque_limit + 1e-9)


def test_mjcf_as_it_comes_is_converted_with_a_notice_for_each_change(robots_dir):
    folder, notices = robots_dir
    text = "\n".join(notices["two_finger_arm"])
    for part in ("removed the model's 6 actuators", "keyframe 'ready' became the home posture", "sensors",
                 "lights", "ground and sky", "<option> reset", "impratio"):
        assert part in text, part
    robot = load_robot("two_finger_arm")
    np.testing.assert_array_equal(robot.home, [0.3, 0.4, -1.2, 0.8])  # the keyframe
    np.testing.assert_array_equal(robot.extra_joints.hold, [0.015, 0.015])
    np.testing.assert_array_equal(robot.torque_limit, [40, 60, 30, 8])  # the actuators' forcerange
    assert robot.end_effector_site == "tool"
    root = ET.parse(robot.mjcf).getroot()
    for tag in ("actuator", "keyframe", "sensor", "light"):
        assert not any(len(e) or tag == "light" for e in root.iter(tag)), tag
    assert not any(e.attrib for e in root.iter("option"))
    assert _settings(folder, "two_finger_arm")["limits"]["velocity"] == [3.0] * 4


def test_scene_supplies_floor_light_and_sky_and_holds_the_fingers(robots_dir):
    robot = load_robot("panda")
    scene = build_scene(robot, make_task("reach", {}))
    model = scene.model
    assert model.geom("floor").type == mujoco.mjtGeom.mjGEOM_PLANE and model.nlight >= 1
    assert any(model.tex_type[t] == mujoco.mjtTexture.mjTEXTURE_SKYBOX for t in range(model.ntex))
    assert scene.dynamics.nq == robot.n_dofs  # the fingers are welded at their hold in the inverse dynamics
    fingers = [model.joint(n).qposadr[0] for n in robot.extra_joints.names]
    np.testing.assert_array_equal(model.qpos0[fingers], [0.04, 0.04])
    with Runner(make_task("reach", {}), robot) as runner:
        assert runner.start_episode(1, posture=robot.home).flag == Flag.OK
        target = robot.home + 0.2 * (robot.range_upper - robot.home) / 2
        move = min_jerk(robot.home, target, 1.0, robot.control_dt)
        assert runner.send_trajectory(move.q, qd=move.qd, qdd=move.qdd, wait_time=0.2).flag == Flag.OK
        held = np.array(runner.sim.data.qpos[fingers])
    assert np.max(np.abs(held - 0.04)) < 1e-3  # held through the arm's move


def test_built_in_robots_keep_their_own_scene():
    """The WAM brings its own floor: the scene adds nothing, so its logs replay as before."""
    scene = build_scene(load_robot("wam"), make_task("reach", {}))
    assert scene.model.nlight == 1 and scene.model.ntex == 1 and "episodic_sky" not in scene.xml


# -- the report card --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["panda", "ur5", "two_finger_arm"])
def test_report_card_passes(robots_dir, name):
    card = check_robot(name)
    print(card.text())
    assert card.passed, card.text()
    assert card.hold_drift < 2 and card.tracking_error.max() < 10


def test_report_card_fails_with_the_fix(robots_dir, tmp_path):
    """Gains a tenth of the derived ones track worse than the limit: the card says so and what to change."""
    folder = tmp_path / "soft_ur5"
    shutil.copytree(robots_dir[0] / "ur5", folder)
    toml = (folder / "robot.toml").read_text()
    cfg = _settings(robots_dir[0], "ur5")
    soft = [round(k / 100, 6) for k in cfg["gains"]["kp"]]
    toml = toml.replace(f"kp = {cfg['gains']['kp']}".replace("'", ""), f"kp = {soft}")
    (folder / "robot.toml").write_text(toml)
    card = check_robot(str(folder))
    failed = {c.name: c for c in card.checks if not c.passed}
    assert "track moves" in failed and "raise kp" in failed["track moves"].fix


def test_cli_add_check_and_list(robots_dir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["robots", "add", str(ARM), "--end-effector", "tool", "--velocity-limit", "3",
                                  "--into", str(tmp_path), "--name", "arm2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "notice: removed the model's 6 actuators" in result.output and f"wrote {tmp_path / 'arm2'}" in result.output
    result = runner.invoke(main, ["robots", "check", str(tmp_path / "arm2")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "PASS  hold home" in result.output and "PASS  replay" in result.output
    listing = runner.invoke(main, ["robots"], catch_exceptions=False).output
    assert listing.startswith("wam: 7 DoF") and f"user: {robots_dir[0] / 'panda'}" in listing


# -- where robots live -------------------------------------------------------------------------------
def test_found_by_path_user_dir_and_entry_point(robots_dir, tmp_path, monkeypatch):
    folder = robots_dir[0]
    assert find_robot(str(folder / "ur5")).source == "path"
    assert find_robot(str(folder / "ur5" / "robot.toml")).folder == folder / "ur5"
    assert find_robot("ur5").source == "user"
    assert find_robot("wam").source == "built-in"
    # a pip package shipping a robot: an installed distribution's entry point naming its module
    package = tmp_path / "site" / "my_arm_pkg"
    shutil.copytree(folder / "two_finger_arm", package)
    (package / "__init__.py").write_text("")
    info = tmp_path / "site" / "my_arm_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-arm-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[episodic.robots]\nmy_arm = my_arm_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    robot = load_robot("my_arm")
    assert robot.source == "entry point" and robot.mjcf.parent == package
    assert robot.sha256 == load_robot("two_finger_arm").sha256  # the same files, wherever they live


# -- refusals name the fix ------------------------------------------------------------------------------
def test_free_base_is_refused(tmp_path):
    model = tmp_path / "floating.xml"
    model.write_text(ARM.read_text().replace('<body name="base" pos="0 0 0.05">',
                                             '<body name="base" pos="0 0 0.05"><freejoint/>'))
    with pytest.raises(RobotImportError, match="free or ball joint .* remove the <freejoint/>"):
        import_robot(model, into=tmp_path, end_effector="tool", velocity_limit=[3.0], echo=str)


def test_missing_mesh_is_named(tmp_path):
    urdf = tmp_path / "robot" / "urdf" / "arm.urdf"
    urdf.parent.mkdir(parents=True)
    urdf.write_text(PANDA.read_text().replace("package://example-robot-data/robots/panda_description/meshes",
                                              "package://my_arm_description/meshes"))
    with pytest.raises(RobotImportError, match="mesh package://my_arm_description/meshes/collision/link0.stl "
                                               "not found.*ROS_PACKAGE_PATH"):
        import_robot(urdf, into=tmp_path, echo=str)


def test_missing_limits_are_asked_for(tmp_path):
    with pytest.raises(RobotImportError, match="--velocity-limit"):
        import_robot(ARM, into=tmp_path, end_effector="tool", echo=str)
    with pytest.raises(RobotImportError, match="must sit on or after the last arm link"):
        import_robot(ARM, into=tmp_path, joints=["waist", "shoulder", "elbow", "wrist"], end_effector="upper_arm",
                     velocity_limit=[3.0], echo=str)


def test_hand_written_folder_with_actuators_is_refused_not_altered(tmp_path):
    folder = tmp_path / "wam_with_motors"
    shutil.copytree(load_robot("wam").mjcf.parent, folder)
    xml = folder / "wam.xml"
    xml.write_text(xml.read_text().replace("</mujoco>", '<actuator><motor joint="j1"/></actuator></mujoco>'))
    before = xml.read_bytes()
    with pytest.raises(RobotError, match="own actuators.*episodic robots add"):
        load_robot(str(folder))
    assert xml.read_bytes() == before


# -- the log names the robot; replay elsewhere finds it or says what differs --------------------------------
def test_log_records_the_robot_and_replay_checks_its_files(robots_dir, tmp_path):
    folder = tmp_path / "panda"
    shutil.copytree(robots_dir[0] / "panda", folder)
    robot = load_robot(str(folder))
    log = tmp_path / "run.h5"
    with Runner(make_task("reach", {}), robot, log=log) as runner:
        runner.start_episode(1, posture=robot.home)
        runner.send_trajectory(np.tile(robot.home, (50, 1)))
    meta = read_metadata(log)
    settings = meta["robot_settings"]
    assert meta["robot"] == "panda" and settings["spec"] == str(folder) and settings["sha256"] == robot.sha256
    assert replay(log).identical  # found by its name (in the user directory), never at the recorded path
    assert replay(log, robot=str(folder)).identical  # or at a path the user gives
    (folder / "assets" / "hand.stl").write_bytes(b"solid x\nendsolid x\n")
    with pytest.raises(RobotError, match="different: assets/hand.stl.*copy the recorded robot's folder"):
        replay(log, robot=str(folder))
    with pytest.raises(RobotError, match=r"unknown robot 'gone_arm'.*loaded from '/elsewhere/gone_arm'.*--robot PATH"):
        load_recorded_robot("gone_arm", {"spec": "/elsewhere/gone_arm"})


def test_a_log_never_leads_to_a_path_and_a_bare_name_is_never_a_folder_here(robots_dir, tmp_path, monkeypatch):
    """A crafted log naming its robot by a path gets a message, not that folder's model loaded; a
    folder of the current directory named like a built-in robot does not stand in for it."""
    planted = tmp_path / "wam"
    shutil.copytree(robots_dir[0] / "ur5", planted)
    with pytest.raises(RobotError, match="never loaded from a path the file names.*--robot PATH"):
        load_recorded_robot(str(planted), {})
    monkeypatch.chdir(tmp_path)
    assert find_robot("wam").source == "built-in" and load_robot("wam").n_dofs == 7
    assert find_robot("./wam").source == "path" and load_robot("./wam").n_dofs == 6


@pytest.mark.slow
@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_reach_over_the_bridge_replays_bit_identically(robots_dir, name, tmp_path):
    from episodic.bridge import Client
    from tests.helpers import Served, channel_name

    robot = load_robot(name)
    data_model = build_scene(robot, make_task("reach", {})).model
    data = mujoco.MjData(data_model)
    data.qpos[[data_model.joint(j).qposadr[0] for j in robot.joint_names]] = robot.home
    mujoco.mj_forward(data_model, data)
    target = data.site(robot.end_effector_site).xpos + [0.05, 0.05, -0.05]
    params = dict(zip(("target_x", "target_y", "target_z"), target.round(4)))
    args = ["--robot", name] + [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    q1 = robot.home + 0.1 * np.sign(robot.range_upper + robot.range_lower - 2 * robot.home + 1e-9)
    move = min_jerk(robot.home, q1, 1.0, robot.control_dt)
    with Served(channel_name(), tmp_path / "bridge.h5", *args) as served:
        with Client(served.channel, timeout=30) as client:
            replies = [client.start_episode(1, posture=robot.home),
                       client.send_trajectory(move.q, qd=move.qd, qdd=move.qdd, wait_time=0.2)]
        assert served.stop() == 0
    assert [r.flag for r in replies] == [Flag.OK, Flag.OK], [r.message for r in replies]
    meta = read_metadata(tmp_path / "bridge.h5")
    assert meta["robot"] == name and meta["robot_settings"]["source"] == "user"
    assert len(read_episodes(tmp_path / "bridge.h5")) == 1
    report = replay(tmp_path / "bridge.h5")
    assert report.identical, report.differences
