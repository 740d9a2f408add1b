"""``episodic robots``: list the robots and where each lives, import one (``add``), check one (``check``).

The listing, the import and the report card live below the command line
(episodic.interface.robot, episodic.tools.robot_import, episodic.tools.robot_check);
docs/robots.md is the user's page.
"""
from __future__ import annotations

import sys
import time

import click


def _values(text: str | None) -> list[float] | None:
    """'1,2,3' -> [1.0, 2.0, 3.0] (one value or one per joint); None stays None."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"'{text}' is not a comma-separated list of numbers") from None


def _holds(items: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise click.BadParameter(f"'{item}': give JOINT=VALUE, e.g. panda_finger_joint1=0.04", param_hint="--hold")
    return out


@click.group(invoke_without_command=True)
@click.pass_context
def robots(ctx: click.Context) -> None:
    """List the robots, the default one (wam) first, and where each lives; import or check one.

    For each: joints, control rate, home posture, a description, and where it was found: built-in,
    user (the user's robot directory: $EPISODIC_ROBOTS, else the platform's data folder) or entry
    point (a package's `episodic.robots` entry point). `episodic serve --robot NAME` uses one; NAME
    may also be the path of a robot folder. A robot whose settings cannot be loaded is listed with
    the reason. See docs/robots.md."""
    if ctx.invoked_subcommand is not None:
        return
    from episodic.interface.robot import DEFAULT_ROBOT, RobotError, list_robots, load_robot, user_robots_dir

    for entry in sorted(list_robots(), key=lambda e: e.name != DEFAULT_ROBOT):
        try:
            r = load_robot(entry.name)
        except RobotError as exc:
            click.echo(f"{entry.name}: cannot be loaded: {exc}")
            continue
        click.echo(f"{entry.name}: {r.n_dofs} DoF, {r.control_rate:g} Hz control, joints {', '.join(r.joint_names)}")
        click.echo(f"    home posture: {r.home.tolist()} rad")
        if r.extra_joints.names:
            held = zip(r.extra_joints.names, r.extra_joints.hold)
            click.echo(f"    held: {', '.join(f'{n} = {v:g}' for n, v in held)}")
        if r.description:
            click.echo(f"    {r.description}")
        click.echo(f"    {entry.source}: {entry.folder}")
    click.echo(f"(your robots: {user_robots_dir()}; add one with `episodic robots add MODEL`)")


@robots.command(short_help="Import a robot from an MJCF or URDF model.")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", help="The robot's name.  [default: the model file's name without its suffix]")
@click.option("--joints", help="The arm's joints in order, comma-separated.  [default: the chain of hinge and "
                               "slide joints from the world to the end effector; the rest are held]")
@click.option("--end-effector", help="A site, or a body (URDF link) at whose origin a site 'ee' is added.  "
                                     "[default: the last arm link, or the fixed tool below it]")
@click.option("--torque-limit", help="N m, one value or one per arm joint, where the model states none.")
@click.option("--velocity-limit", help="rad/s, one value or one per arm joint, where the model states none "
                                       "(an MJCF never does).")
@click.option("--home", help="The arm's home posture, rad, one value per arm joint.  [default: the model's "
                             "keyframe, else a collision-free posture it finds]")
@click.option("--hold", multiple=True, metavar="JOINT=VALUE",
              help="Posture of a joint beyond the arm (a gripper finger), rad or m; repeatable.  "
                   "[default: the keyframe's, else the middle of its range]")
@click.option("--into", type=click.Path(file_okay=False), help="Write the robot folder here instead of the user's "
                                                               "robot directory.")
@click.option("--overwrite", is_flag=True, help="Replace a robot of that name.")
def add(model: str, name: str | None, joints: str | None, end_effector: str | None, torque_limit: str | None,
        velocity_limit: str | None, home: str | None, hold: tuple[str, ...], into: str | None,
        overwrite: bool) -> None:
    """Import the MJCF or URDF file MODEL as a robot: a folder holding robot.toml, robot.xml and
    the meshes (assets/), in the user's robot directory ($EPISODIC_ROBOTS, else the platform's
    data folder) unless --into says otherwise.

    Every change to the model is printed: its actuators are removed (the runner drives the joints),
    a keyframe becomes the home posture, <option>, sensors, lights, ground and sky are dropped (the
    scene supplies them). Limits come from the model or the options; gains and physics substeps are
    derived and checked for stability. Then run `episodic robots check NAME`.

    \b
    Examples:
      episodic robots add panda.urdf
      episodic robots add ur5_robot.urdf --name ur5
      episodic robots add my_arm.xml --velocity-limit 2.0 --hold finger=0.02
    """
    from episodic.tools.robot_import import RobotImportError, import_robot

    started = time.perf_counter()
    try:
        result = import_robot(model, name=name, joints=joints.split(",") if joints else None,
                              end_effector=end_effector, torque_limit=_values(torque_limit),
                              velocity_limit=_values(velocity_limit), hold=_holds(hold), home=_values(home),
                              into=into, overwrite=overwrite, echo=click.echo)
    except (RobotImportError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    robot_name = result.folder.name
    spec = robot_name if into is None else str(result.folder)
    click.echo(f"wrote {result.folder} ({time.perf_counter() - started:.1f} s)")
    click.echo(f"  check it:  episodic robots check {spec}")
    click.echo(f"  serve it:  episodic serve --robot {spec} --task reach")


@robots.command(short_help="Run a robot's report card.")
@click.argument("name")
def check(name: str) -> None:
    """Run the report card of the robot NAME (a name or a robot folder's path): hold home (drift,
    mrad), a minimum-jerk move of each joint (tracking error, mrad), gravity compensation against
    MuJoCo's mj_rne, no self-collision at home, stability of the control loop, and a bit-identical
    replay. Each check is PASS or FAIL with what to change; the exit code is 1 when one fails."""
    from episodic.interface.robot import RobotError
    from episodic.tools.robot_check import check_robot

    try:
        card = check_robot(name)
    except (RobotError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(card.text())
    if not card.passed:
        sys.exit(1)
