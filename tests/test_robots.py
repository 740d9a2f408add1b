"""What every robot under robots/ must satisfy, whatever its joint count: its MJCF and its
robot.toml agree, the model is a chain of hinges with physical inertias that leaves actuators,
sensors and options to the scene builder, and the arm never collides with itself but does with
the floor and the tasks' objects. Real MuJoCo; each robot's own numbers are tested in
tests/test_<robot>.py."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from episodic.interface.robot import available_robots, load_robot

ROBOTS = available_robots()


def test_both_robots_are_there():
    assert {"wam", "puma560"} <= set(ROBOTS)


@pytest.fixture(scope="module", params=ROBOTS)
def robot(request):
    return load_robot(request.param)


@pytest.fixture(scope="module")
def model(robot):
    return mujoco.MjModel.from_xml_path(str(robot.mjcf))


def _joint_ids(robot, model) -> list[int]:
    return [model.joint(name).id for name in robot.joint_names]


def test_hinge_chain_named_as_in_settings(robot, model):
    n = robot.n_dofs
    assert model.njnt == n and model.nq == n and model.nv == n
    assert tuple(model.joint(i).name for i in range(n)) == robot.joint_names
    assert np.all(model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE)
    np.testing.assert_allclose(model.jnt_axis, np.tile([0.0, 0.0, 1.0], (n, 1)))
    links = list(model.jnt_bodyid)  # one joint per link, each link's parent the previous link
    assert len(set(links)) == n and all(model.body_parentid[b] == a for a, b in zip(links, links[1:]))
    assert model.site_bodyid[model.site(robot.end_effector_site).id] == links[-1]


def test_ranges_and_torque_limits_match_the_settings(robot, model):
    ids = _joint_ids(robot, model)
    assert np.all(model.jnt_limited[ids]) and np.all(model.jnt_actfrclimited[ids])
    np.testing.assert_allclose(model.jnt_range[ids], np.column_stack([robot.range_lower, robot.range_upper]))
    np.testing.assert_allclose(model.jnt_actfrcrange[ids], np.column_stack([-robot.torque_limit, robot.torque_limit]))
    assert np.all(robot.home >= robot.range_lower) and np.all(robot.home <= robot.range_upper)


def test_model_leaves_actuators_sensors_and_options_to_the_scene(robot, model):
    assert model.nu == 0 and model.nsensor == 0
    root = ET.parse(robot.mjcf).getroot()
    assert root.find("option") is None and root.find("actuator") is None and root.find("sensor") is None


def test_principal_inertias_are_physical(robot, model):
    for body in model.jnt_bodyid:
        a, b, c = model.body_inertia[body]
        assert min(a, b, c) > 0 and a + b >= c and b + c >= a and a + c >= b, model.body(body).name


def test_no_self_collision_but_floor_and_objects_collide(model):
    robot_geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] != 0]
    floor = model.geom("floor").id

    def can_collide(g1, g2):
        return bool((model.geom_contype[g1] & model.geom_conaffinity[g2])
                    or (model.geom_contype[g2] & model.geom_conaffinity[g1]))

    for i in robot_geoms:
        for j in robot_geoms:
            assert not can_collide(i, j), (model.geom(i).name, model.geom(j).name)
    moving = [g for g in robot_geoms if model.body_weldid[model.geom_bodyid[g]] != 0]
    assert moving and all(can_collide(g, floor) for g in moving)
    # a default geom (contype = conaffinity = 1), e.g. a ball, also hits the arm
    assert all(model.geom_conaffinity[g] & 1 for g in moving)


def test_falls_under_gravity_without_nans(robot, model):
    """Unactuated, from a posture with the arm held out, 2 s at the scene's 2 ms implicitfast
    steps: the state stays finite and the arm falls (its end effector drops)."""
    m = mujoco.MjModel.from_xml_path(str(robot.mjcf))
    m.opt.timestep, m.opt.integrator = 0.002, mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    data = mujoco.MjData(m)
    data.qpos[:] = robot.home
    mujoco.mj_forward(m, data)
    start = data.site(robot.end_effector_site).xpos[2]
    for _ in range(1000):
        mujoco.mj_step(m, data)
        assert np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel))
    assert data.site(robot.end_effector_site).xpos[2] < start - 0.1
