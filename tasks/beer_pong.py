"""beer_pong: throw a ball so that it bounces once on a table and lands in a cup.

Scene. A ball holder is bolted to the tool flange (site "ee"): a short stem along the flange
axis and a small dish; it is part of the arm's dynamics and its gravity compensation, and it
collides with nothing, so the ball leaves it freely. The ball (a free body) is held at the
holder's site "hold", ``HOLD_OFFSET`` m out along the flange axis, by a stiff, critically damped
spring between the two (three actuators on the ball's site with the holder's site as reference,
one per axis of the holder's frame, natural frequency ``HOLD_OMEGA`` rad/s with the ball's mass:
it lags the hand by a/omega^2, 0.4 mm at 60 m/s^2; measured: 0.12 mm at most through the
reference's throw, 0.03 mm at its release). Each actuator's force is its activation
times the spring's: activation 1 holds, 0 releases. The activation has no input of its own (an
integrator whose control stays 0), so it is part of the physics state (mjSTATE_FULLPHYSICS) that
every run carries, the log records and a replay repeats. (A weld equality switched off by
``eq_active`` is not: it is an input, which the log does not record, so a replay would not
repeat the release.)
The ball does not turn with the holder: it leaves without spin.

A table (``table_length`` x ``table_width`` m, its playing surface ``table_height`` m above the
floor, centred at (``table_x``, ``table_y``)) stands in front of the robot; a conical cup stands
on it (a mocap body: placed by the context, it never moves), its axis square to the surface, ``cup_height`` m
from the table to the rim, inner radius ``cup_bottom_radius`` m at the bottom and
``cup_rim_radius`` m at the rim: a bottom disc (``CUP_BOTTOM`` m thick), ``CUP_WALLS`` thin
boxes around the cone (MuJoCo has no hollow cone) and a rim of as many capsules on top.

On other arms (issue 29). The scene's numbers are given for the WAM. On another arm the table
keeps its size and height (it stands on the floor) and the world's axes; its near end's middle,
the default cup and the first pad are placed from the arm's base axis, their horizontal offsets
from the WAM's scaled by the ratio of the reaches (episodic.task.frame.RobotFrame; the context's
cup stays in world coordinates). The holder starts where the arm's own geoms end beyond the
end-effector site (episodic.task.frame.flange_extent: 5 cm on the Puma 560, 4.4 cm on the UR5,
the WAM's holder as it always was), and the start posture is the home if the held
ball touches nothing there, else the first of 64 seeded postures about it where it does not.
``needs`` names the arms whose reference throw is shown to land (the WAM and the Puma 560) and
why the Panda and the UR5 cannot (their joints' velocity limits, measured by the reference's
planner: examples/beer_pong_reference.py).

The seed's harder surfaces ("a broken surface with only very limited areas where contact is
possible", "a slanted surface"). ``table_tilt`` rad turns the playing surface about the y axis
through its centre (positive raises the far, +x, end; within +-0.2 rad, 11.5 deg): the table's
frame, and with it the cup, which stands square to the surface at the point of it above
(cup_x, cup_y); ``height`` and ``radial`` are then measured along and across the cup's tilted
axis, and the rim plane is tilted with it. A bounce on the slanted top leaves along its tilted
normal, as any bounce does (tested against impulse theory). ``pads`` (1-4; 0, the default: the
whole top) replaces the top by that many round pads of it, ``pad_radius`` m, the same thickness
and material, their centres in a row along x from (``pad_x``, ``pad_y``) (world x, y; on the
surface above them), ``pad_spacing`` m apart; the rest is a gap the ball falls through to the
floor (where it is never scored), and the cup stands on a disc of the top the size of its foot
(``cup_stand``, the table's material). The default pad lies under the reference throw's bounce
(x 1.11 m). A bounce on a pad counts as a table bounce; one on the floor or on the stand
(whose edge alone the ball can reach, beside the cup) does not.
What of the seed's beer pong is not built: multiple bounces are (``bounces``), a broken and a
slanted surface are; nothing else is named there.

Physical values and sources.
* Ball: a table-tennis ball, 40 mm, 2.7 g (ITTF Laws of Table Tennis 2.3.1-2.3.2), a thin
  shell: inertia 2/3 m r^2.
* Table: 2.74 x 1.525 m, its surface 0.76 m above the floor (ITTF Laws 2.1.1). Law 2.1.3: a
  standard ball dropped on it from 30 cm bounces about 23 cm, sqrt(23/30) = 0.876 in air. The
  ball's own drag takes part of both flights of that drop (it falls to 2.38 instead of 2.43 m/s
  and rises 97 % of the height its speed would reach in vacuum), so the contact's restitution
  (the speed ratio) that rebounds 23 cm in air is 0.90-0.91: ``table_restitution`` 0.90
  rebounds 22.8 cm in the task (tested). Friction 0.25: an estimate of the order the
  table-tennis rebound models use (e.g. Nakashima et al., "Modeling of rebound phenomenon of a
  rigid ball with friction and elastic effects", ACC 2010). The floor and the arm's links: as
  the table, stiff surfaces.
* Cup: a 16 oz party cup (about 94 mm across the rim, 60-66 mm across the bottom, 117-121 mm
  tall), a thin plastic shell that gives and absorbs most of an impact: restitution
  ``cup_restitution`` 0.4 (an estimate; no standard measures it) and friction 0.3.
* Contacts: explicit pairs (episodic.task.contact) with a stiffer spring than the library's default:
  natural frequency ``CONTACT_OMEGA`` = 1000 rad/s (omega dt = 0.5 at the 0.5 ms step), so a
  ball hitting at 3.5 m/s sinks in 3.5 mm and an impact lasts about 3 ms; the default 300 rad/s
  would sink it 12 mm, deeper than the cup's wall is thick. Measured (tests): the ball leaves
  the table at 0.883-0.913 of its impact speed (mean 0.900) and the cup's bottom at 0.35-0.48
  (mean 0.400), by where the impact falls within a physics step; dropped from 30 cm into the
  cup it rebounds 4.5 cm.
* Air (episodic.task.contact.add_air): 1.204 kg/m^3; a smooth sphere's drag coefficient 0.47:
  terminal velocity sqrt(2 m g / (rho Cd pi r^2)) = 8.63 m/s, so drag is (v / 8.63 m/s)^2 of
  the ball's weight: 12 % at 3 m/s (tested: a dropped ball's speed follows v_t tanh(g t / v_t)
  within 0.2 %). It matters: the reference's release state comes down through the rim plane
  26 cm beyond the cup without air, and a release planned without air comes down 18 cm short.
Physics step: ``substeps`` 4 (0.5 ms), as the other bouncing tasks. At 4 times as many, the
reference's score moves by 5 mm (the bounce's restitution depends on where the impact falls in
a step, by +-0.015), and it still lands in the cup.

Release: part of the learner's start command. Context (command 0): nothing (``release_time`` and
the cup at (``cup_x``, ``cup_y``)), [release_time] s, or [release_time, cup_x, cup_y] (s, m, m:
the cup's axis on the table, world frame). release_time counts from the start of the motion
(the first control step of index 1, the clock of joint failures), rounded to a control step
(2 ms); the ball is let go before that step runs (episodic.task.Task.motion_events): at 0 before
the first step, and at a segment's end before the next segment's first step. A release time
after the episode's end never comes (the ball stays held). Start: the ball held, at rest at the
holder's site; the cup on the table (TaskError unless its foot lies on the table).

State columns: ball_x, ball_y, ball_z m and ball_vx, ball_vy, ball_vz m/s (the ball's centre,
world frame); cup_x, cup_y m (the cup's axis); height m: the ball's centre above the rim plane
(negative below it); radial m: the ball's centre's horizontal distance from the cup's axis;
on_table: 1 while the ball touches the table's top or a pad (a contact sensor, read once per control step: an
impact lasts longer than a step, so none is missed); in_cup: 1 while the ball's centre lies
inside the cup's inner cone (below the rim plane, above the bottom, radial less than the cone's
radius at that height); at_rest: 1 while the ball's speed is below ``rest_speed``.

Reward. The throw is scored where the ball's centre crosses the rim plane going down after
exactly ``bounces`` table bounces (1 by default; a bounce is a step at which the ball begins
to touch the table): r = -min(radial, MISS_DISTANCE), radial interpolated linearly between the
two control steps around the crossing. Crossings before that bounce do not count, nor any
after the first that counts. A throw that is never scored (the ball never let go, or it goes
into the cup directly, touches the table again before coming down through the rim plane, or
never rises above it after the bounce) gets -MISS_DISTANCE = -1 m. Step rewards:
-MISS_DISTANCE at the episode's first motion step and MISS_DISTANCE - min(radial,
MISS_DISTANCE) at the step of the scored crossing, 0 at every other step (steps outside
segments earn nothing), so that the return is exactly minus the scored distance.
Success: the throw was scored with radial < ``cup_rim_radius`` and the ball lies in the cup at
rest (in_cup and at_rest) at the episode's end, without a break for its last ``rest_time`` s.
A segment ends once the ball has lain in the cup at rest for ``rest_time`` s in it. Safety
aborts and the like end the episode unsolved (as in every task).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar, cast

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.runtime.scene import build_scene
from episodic.task import (
    Camera,
    Episode,
    Needs,
    Reference,
    StepView,
    Task,
    TaskError,
    add_frame_sensors,
    add_free_ball,
    add_tool_body,
    coordinate,
    param,
    place_free_ball,
    update_kinematics,
)
from episodic.task.contact import (
    SPHERE_DRAG_COEFFICIENT,
    add_air,
    add_bouncing_pair,
    add_bouncing_pairs,
    air_choice,
    friction_solref,
    solref_for_restitution,
)
from episodic.task.contract import BALL_COLUMNS
from episodic.task.frame import RobotFrame, flange_extent, reference_frame
from episodic.task.sl import SLMap

HOLD_OFFSET = 0.07     # m, the held ball's centre out from the flange along its axis
HOLD_OMEGA = 400.0     # rad/s, the hold's natural frequency with the ball's mass
HOLDER_MASS = 0.05     # kg, stem and dish
CONTACT_OMEGA = 1000.0  # rad/s, the ball's contacts' natural frequency (module docstring)
TABLE_FRICTION = 0.25  # a table-tennis ball on a table (module docstring)
CUP_FRICTION = 0.3     # the ball on the plastic cup (estimate)
TABLE_TOP = 0.025      # m, the table top's thickness
CUP_WALLS = 16         # boxes that make the cup's wall
CUP_WALL = 0.004       # m, the wall boxes' (collision) thickness, outward from the inner cone
CUP_BOTTOM = 0.004     # m, the bottom's thickness
MISS_DISTANCE = 1.0    # m, the score of a throw that is never scored, and the largest one counted
START_TRIES = 64        # postures about the home an arm other than the WAM tries for its start
START_SPREAD = 0.5      # rad, their spread about the home
_STARTS: dict[tuple, np.ndarray] = {}  # BeerPong.start_posture's on arms other than the WAM
HOLD_ACTUATORS = ("hold_x", "hold_y", "hold_z")
# columns of the reward's memory (BeerPongEpisode.rows)
_TIME, _TOUCH, _BOUNCES, _HEIGHT, _X, _Y, _SCORED, _RESTING = range(8)


@dataclass
class BeerPongEpisode(Episode):
    """The episode's release time s (from the context), the hold's activation addresses, and
    the reward's memory: one row per segment step so far (columns _TIME s, _TOUCH, _BOUNCES
    (table bounces up to that step), _HEIGHT, _X, _Y m of the ball's centre, _SCORED, _RESTING;
    steps a shortened segment drops are left out), the scored distance m (nan before the throw
    is scored) and the control period dt s."""

    release_time: float = np.inf
    hold_act: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    rows: np.ndarray = field(default_factory=lambda: np.zeros((0, 8)))
    scored: float = np.nan
    dt: float = 0.0  # s, the control period of the rows


@dataclass
class BeerPong(Task[BeerPongEpisode]):
    name: ClassVar[str] = "beer_pong"
    reference: ClassVar[Reference | None] = Reference(  # examples/beer_pong_reference.py
        "examples.beer_pong_reference:reference_commands",
        # the return is itself a small distance (m): 4 -> 16 substeps moves where the ball comes down by 5 mm
        # (a bounce's restitution depends on where the impact falls within a physics step)
        return_tolerance=0.06,
        learner="examples.learning.beer_pong",
    )
    summary: ClassVar[str] = "throw a ball so that it bounces once on a table and lands in a cup."
    # the arms whose reference throw is shown to land (tests/test_task_robots.py); measured on the others
    needs: ClassVar[Needs] = Needs(dofs=6, robots=("wam", "puma560"), why=(
        "the reference's throw, planned for an arm in its frame (examples/beer_pong_reference.py), lands only "
        "there: the Panda's throws that keep its arm off the table need 1.7 times its joints' velocity limits "
        "(panda_joint6, 7 at 4.44 rad/s, limit 2.61); the UR5's release, 0.12 m over the table (0.88 m up), "
        "needs 4.0 m/s toward the cup, 1.26 times its wrist joints' limits (4.02 rad/s, limit 3.2), and none of "
        "its postures there keeps the stroke off the table"))
    camera: ClassVar[Camera] = {"lookat": (1.1, 0.0, 1.05), "distance": 2.2, "azimuth": 115, "elevation": -12}
    sl: ClassVar[SLMap] = SLMap(("cup x m", "cup y m", "action cost weight", "bounce noise"), ("release_time", 0, 1),
                                states=tuple(BALL_COLUMNS) + ("cup_x", "cup_y", None))
    columns: ClassVar[tuple[str, ...]] = ("ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz",
                                          "cup_x", "cup_y", "height", "radial", "on_table", "in_cup", "at_rest")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {**BALL_COLUMNS,
        "cup_x": ("m", "the cup's axis x (world frame)"), "cup_y": ("m", "the cup's axis y (world frame)"),
        "height": ("m", "ball centre above the rim plane (negative below)"),
        "radial": ("m", "ball centre from the cup's axis, horizontally"),
        "on_table": ("", "1 while the ball touches the table"), "in_cup": ("", "1 while the ball is inside the cup"),
        "at_rest": ("", "1 while the ball's speed is below rest_speed")}
    reward_doc: ClassVar[str] = (
        "-1 at the first motion step, 1 - radial (m) where the ball falls through the rim plane: return = -miss")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 1, 3)
    context_help: ClassVar[str] = ("a release time [t] s after the motion starts, or [t, cup_x, cup_y] (s, m, m: the "
                                   "cup's axis on the table), or no context for the defaults")
    substeps: ClassVar[int] = 4  # 0.5 ms physics: the bounces' restitution, and CONTACT_OMEGA dt = 0.5
    episode_type: ClassVar[type[Episode]] = BeerPongEpisode

    # ball (ITTF)
    ball_radius: float = param(0.02, "m", gt=0)
    ball_mass: float = param(0.0027, "kg", gt=0)
    # table (ITTF)
    table_x: float = coordinate(1.82, "x", "the table's centre (its near end 0.45 m in front of the robot's base)")
    table_y: float = coordinate(0.0, "y", "the table's centre")
    table_height: float = param(0.76, "m", "the playing surface above the floor", gt=0, le=1.5)
    table_length: float = param(2.74, "m", "along x", gt=0)
    table_width: float = param(1.525, "m", "along y", gt=0)
    table_restitution: float = param(0.90, "", "the ball's restitution on the table (0.90 rebounds 23 cm from "
                                     "30 cm in air, ITTF)", ge=0, lt=1)
    table_tilt: float = param(0.0, "rad", "the playing surface's slope along x, about the y axis through its "
                              "centre: positive raises the far (+x) end; the cup stands on it, square to it",
                              ge=-0.2, le=0.2)
    # a broken surface (the seed's variation): a few pads of the table top, the rest a gap
    pads: int = param(0, "", "0: the whole table top; 1-4: only that many round pads of it, in a row along x "
                      "from (pad_x, pad_y), pad_spacing apart; the ball falls through the rest", ge=0, le=4)
    pad_radius: float = param(0.1, "m", "a pad's radius", gt=0, le=0.5)
    pad_x: float = coordinate(1.1, "x", "the first pad's centre (the reference throw bounces at 1.11)")
    pad_y: float = coordinate(0.0, "y", "the first pad's centre")
    pad_spacing: float = param(0.35, "m", "between neighbouring pads' centres, along +x", gt=0, le=2.74)
    # cup (16 oz party cup)
    cup_x: float = coordinate(1.6, "x", "the cup's axis without a context")
    cup_y: float = coordinate(0.0, "y", "the cup's axis without a context")
    cup_rim_radius: float = param(0.047, "m", "inner radius at the rim", gt=0)
    cup_bottom_radius: float = param(0.031, "m", "inner radius at the bottom", gt=0)
    cup_height: float = param(0.12, "m", "table to rim", gt=0)
    cup_restitution: float = param(0.4, "", "the ball's restitution on the cup", ge=0, lt=1)
    # throw and success
    release_time: float = param(1.764, "s", "when the ball is let go after the motion starts, without a context "
                                "(the reference throw's)", ge=0)
    bounces: int = param(1, "", "table bounces before the ball comes down through the rim plane", ge=1)
    rest_speed: float = param(0.05, "m/s", "'at rest' below this speed", gt=0)
    rest_time: float = param(0.3, "s", "success: in the cup at rest this long; also ends a segment", ge=0)
    air: str = air_choice()

    def check_params(self) -> None:
        if not self.cup_bottom_radius > self.ball_radius:
            raise TaskError(f"parameter 'cup_bottom_radius' of task 'beer_pong' must be larger than ball_radius "
                            f"({self.ball_radius} m), got {self.cup_bottom_radius}")
        if not self.cup_rim_radius >= self.cup_bottom_radius:
            raise TaskError(f"parameter 'cup_rim_radius' of task 'beer_pong' must be at least cup_bottom_radius "
                            f"({self.cup_bottom_radius} m), got {self.cup_rim_radius}")
        if not self.cup_height > CUP_BOTTOM + 2 * self.ball_radius:
            raise TaskError(f"parameter 'cup_height' of task 'beer_pong' must be larger than the ball's diameter "
                            f"and the bottom ({CUP_BOTTOM + 2 * self.ball_radius} m), got {self.cup_height}")
        for k, centre in enumerate(self.pad_centres()):
            if not self._on_table(centre, self.pad_radius):
                raise TaskError(f"pad {k} of task 'beer_pong' at {np.round(centre, 4).tolist()} m (radius "
                                f"{self.pad_radius} m) reaches past the table's edge; move pad_x, pad_y, or make "
                                f"pad_spacing, pad_radius or pads smaller")

    # -- the playing surface ----------------------------------------------------
    def _placed(self, xy) -> np.ndarray:
        """(2,) m, a horizontal point ``xy`` (x, y) m of the scene's numbers (given for the WAM)
        placed for the robot the scene is built for: itself on the WAM (and before any scene is
        built); on another arm its offset from the WAM's base axis, scaled by the ratio of the
        reaches (RobotFrame), from that arm's base axis, along the world's axes (each arm's first
        joint turns about the vertical: it throws toward the table wherever it faces at home)."""
        xy = np.asarray(xy, float)
        frame = None if self._robot is None else RobotFrame.of(self._robot)
        if frame is None or frame.is_reference():
            return np.array([xy[0], xy[1]])
        wam = reference_frame()
        return frame.anchor[:2] + frame.reach / wam.reach * (xy - wam.anchor[:2])

    @property
    def table_centre(self) -> np.ndarray:
        """(2,) m, the table's centre (x, y), placed: (table_x, table_y) on the WAM; on another arm
        its near end's middle placed (:meth:`_placed`), the table its own size beyond it."""
        half = np.array([self.table_length / 2, 0.0])
        if self._robot is None or RobotFrame.of(self._robot).is_reference():
            return np.array([self.table_x, self.table_y])
        return self._placed(np.array([self.table_x, self.table_y]) - half) + half

    @property
    def table_rotation(self) -> np.ndarray:
        """(3, 3) the table's frame (and the cup's) in the world: x along its length, z its
        surface's normal, turned about the world's y axis by -table_tilt."""
        c, s = np.cos(self.table_tilt), np.sin(self.table_tilt)
        return np.array([[c, 0.0, -s], [0.0, 1.0, 0.0], [s, 0.0, c]])

    @property
    def table_quat(self) -> np.ndarray:
        """(4,) the table's frame as a quaternion (w, x, y, z)."""
        return np.array([np.cos(self.table_tilt / 2), 0.0, -np.sin(self.table_tilt / 2), 0.0])

    def surface_point(self, xy) -> np.ndarray:
        """(3,) m, the point of the (tilted) playing surface above the world point ``xy`` (x, y) m."""
        x, y = float(xy[0]), float(xy[1])
        return np.array([x, y, self.table_height + (x - self.table_centre[0]) * np.tan(self.table_tilt)])

    def _local(self, xy) -> np.ndarray:
        """(2,) m, the surface's coordinates (along its length and width, from its centre) of the
        point of it above the world point ``xy``."""
        centre = self.table_centre
        return np.array([(xy[0] - centre[0]) / np.cos(self.table_tilt), xy[1] - centre[1]])

    def _on_table(self, xy, radius: float) -> bool:
        """Whether a disc of ``radius`` m on the surface centred above ``xy`` lies within its outline."""
        margin = np.array([self.table_length, self.table_width]) / 2 - radius
        return bool(np.all(np.abs(self._local(xy)) <= margin))

    def pad_centres(self) -> np.ndarray:
        """(pads, 2) m, the world x, y of the pads' centres (none with the whole top)."""
        pad_x, pad_y = self._placed([self.pad_x, self.pad_y])
        return np.array([[pad_x + k * self.pad_spacing, pad_y] for k in range(self.pads)]).reshape(-1, 2)

    def cup_coordinates(self, ball: np.ndarray, cup: np.ndarray) -> np.ndarray:
        """(n, 3) m, the ball's centres ``ball`` (n, 3) m in the cup's frame at ``cup`` (n, 3) m (the
        foot of its axis on the surface): x along the table's length, z up the cup's axis."""
        return (ball - cup) @ self.table_rotation

    def _check_cup(self, cup: np.ndarray) -> None:
        """TaskError unless the cup's foot at ``cup`` (x, y) m lies on the table."""
        foot = self.cup_bottom_radius + CUP_WALL
        if not self._on_table(cup, foot):
            margin = np.array([self.table_length * np.cos(self.table_tilt), self.table_width]) / 2 - foot
            x, y = self.table_centre
            raise TaskError(f"the cup at {np.round(cup, 4).tolist()} m stands off the table: its axis must lie "
                            f"within x {x:.4g} +- {margin[0]:.4g} m and y {y:.4g} +- "
                            f"{margin[1]:.4g} m (the context's cup_x, cup_y, or the parameters without one)")

    # -- scene ---------------------------------------------------------------
    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """The holder along the flange's axis; on an arm other than the WAM it starts where the
        arm's own geoms end beyond the end-effector site (episodic.task.frame.flange_extent: the
        Puma's flange plate, the UR5's wrist), so that the held ball clears them."""
        lift = 0.0 if RobotFrame.of(robot).is_reference() else max(flange_extent(robot), 0.0)
        dish_z = lift + HOLD_OFFSET - self.ball_radius - 0.004
        geoms = [
            dict(name="holder_stem", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.008, dish_z / 2, 0],
                 pos=[0, 0, dish_z / 2], mass=0.6 * HOLDER_MASS, rgba=[0.6, 0.6, 0.65, 1]),
            dict(name="holder_dish", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.7 * self.ball_radius, 0.002, 0],
                 pos=[0, 0, dish_z], mass=0.4 * HOLDER_MASS, rgba=[0.6, 0.6, 0.65, 1]),
        ]
        body = add_tool_body(spec, robot, "holder", geoms, touches=False)
        body.add_site(name="hold", pos=[0, 0, lift + HOLD_OFFSET], group=3)

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        timestep = spec.option.timestep
        self._add_table(spec)
        cup = self._add_cup(spec)
        ball = add_free_ball(spec, "ball", [*self.table_centre, 0.5], self.ball_radius, self.ball_mass,
                             rgba=[1.0, 0.55, 0.1, 1], contype=1, conaffinity=1)
        ball.inertia = [2.0 / 3.0 * self.ball_mass * self.ball_radius**2] * 3  # a thin shell
        ball.add_site(name="ball", pos=[0, 0, 0])
        self._add_hold(spec)
        # the ball bounces off the table, the floor and the arm's links (all it touches by its
        # bits), then off the cup's geoms (which touch nothing else)
        pairs = add_bouncing_pairs(spec, "ball", self.table_restitution, TABLE_FRICTION, timestep)
        pairs.update({g: add_bouncing_pair(spec, "ball", g, self.cup_restitution, CUP_FRICTION, timestep,
                                           name=f"ball-{g}") for g in cup})
        for other, pair in pairs.items():
            restitution = self.cup_restitution if other in cup else self.table_restitution
            pair.solref = list(solref_for_restitution(restitution, timestep, CONTACT_OMEGA))
            pair.solreffriction = list(friction_solref(CONTACT_OMEGA))
        add_air(spec, ["ball"], SPHERE_DRAG_COEFFICIENT, self.air)
        add_frame_sensors(spec, "bp_ball", mujoco.mjtObj.mjOBJ_SITE, "ball")
        spec.add_sensor(name="bp_cup_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                        objtype=mujoco.mjtObj.mjOBJ_XBODY, objname="cup")
        touch = spec.add_sensor(name="bp_on_table", type=mujoco.mjtSensor.mjSENS_CONTACT,
                                objtype=mujoco.mjtObj.mjOBJ_GEOM, objname="ball",
                                reftype=mujoco.mjtObj.mjOBJ_BODY, refname="table")  # the top or its pads
        touch.intprm = [1, 0, 1]  # data "found" (the number of contacts), no reduction, 1 slot
        spec.add_sensor(name="bp_clock", type=mujoco.mjtSensor.mjSENS_CLOCK)

    def _add_table(self, spec: mujoco.MjSpec) -> None:
        """The table: its top (the whole, or ``pads`` round pads of it), in the table's frame
        turned by ``table_tilt`` about the y axis through the surface's centre, on four legs."""
        L, W, h, t = self.table_length, self.table_width, self.table_height, TABLE_TOP
        tilt, rotation, look = self.table_tilt, self.table_rotation, dict(rgba=[0.1, 0.25, 0.45, 1])
        table = spec.worldbody.add_body(name="table", pos=[*self.table_centre, 0.0])

        def on_surface(u: float, v: float) -> list[float]:  # the centre of a slab of the top, table's body frame
            return (np.array([0.0, 0.0, h]) + rotation @ [u, v, -t / 2]).tolist()

        if self.pads == 0:
            table.add_geom(name="table_top", type=mujoco.mjtGeom.mjGEOM_BOX, size=[L / 2, W / 2, t / 2],
                           pos=on_surface(0.0, 0.0), quat=self.table_quat, contype=1, conaffinity=1, **look)
        for k, centre in enumerate(self.pad_centres()):
            table.add_geom(name=f"table_pad{k}", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[self.pad_radius, t / 2, 0],
                           pos=on_surface(*self._local(centre)), quat=self.table_quat, contype=1, conaffinity=1,
                           **look)
        for sx in (-1, 1):
            for sy in (-1, 1):
                u = sx * (L / 2 - 0.1)
                leg = (h + u * np.sin(tilt) - t) / 2
                table.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.03, 0.03, leg],
                               pos=[u * np.cos(tilt), sy * (W / 2 - 0.1), leg], rgba=[0.2, 0.2, 0.2, 1],
                               contype=0, conaffinity=0)

    def _add_cup(self, spec: mujoco.MjSpec) -> list[str]:
        """The cup: a mocap body whose frame lies on the table at the cup's axis; returns its
        geoms' names (they touch only the ball, through its pairs)."""
        rb, rr, H, w, tb = self.cup_bottom_radius, self.cup_rim_radius, self.cup_height, CUP_WALL, CUP_BOTTOM
        cup = spec.worldbody.add_body(name="cup", mocap=True, pos=self.surface_point(self.default_context()[1:]),
                                      quat=self.table_quat)
        if self.pads:  # on a broken surface the cup stands on a piece of the table top of its foot's size
            cup.add_geom(name="cup_stand", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[rb + w, TABLE_TOP / 2, 0],
                         pos=[0, 0, -TABLE_TOP / 2], rgba=[0.1, 0.25, 0.45, 1], contype=1, conaffinity=1)
        look = dict(rgba=[0.8, 0.1, 0.1, 1], contype=0, conaffinity=0)
        names = ["cup_bottom"]
        cup.add_geom(name="cup_bottom", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[rb + w, tb / 2, 0],
                     pos=[0, 0, tb / 2], **look)
        alpha = np.arctan2(rr - rb, H - tb)  # the wall's lean outward from the vertical
        half_length = np.hypot(rr - rb, H - tb) / 2
        half_width = (rr + w) * np.tan(np.pi / CUP_WALLS) + 1e-4
        inner_mid = np.array([(rb + rr) / 2, (tb + H) / 2])  # (radius, height)
        centre = inner_mid + w / 2 * np.array([np.cos(alpha), -np.sin(alpha)])
        tilt = np.array([np.cos(alpha / 2), 0, np.sin(alpha / 2), 0])  # about the box's y: its top leans out
        rim = rr + w / 2
        along = rim * np.tan(np.pi / CUP_WALLS)
        for k in range(CUP_WALLS):
            phi = 2 * np.pi * k / CUP_WALLS
            turn = np.array([np.cos(phi / 2), 0, 0, np.sin(phi / 2)])
            quat = np.zeros(4)
            mujoco.mju_mulQuat(quat, turn, tilt)
            radial, tangent = np.array([np.cos(phi), np.sin(phi)]), np.array([-np.sin(phi), np.cos(phi)])
            cup.add_geom(name=f"cup_wall{k}", type=mujoco.mjtGeom.mjGEOM_BOX, size=[w / 2, half_width, half_length],
                         pos=[*(centre[0] * radial), centre[1]], quat=quat, **look)
            cup.add_geom(name=f"cup_rim{k}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[w / 2, 0, 0],
                         fromto=[*(rim * radial - along * tangent), H, *(rim * radial + along * tangent), H], **look)
            names += [f"cup_wall{k}", f"cup_rim{k}"]
        return names

    def _add_hold(self, spec: mujoco.MjSpec) -> None:
        """The hold: three actuators pulling the ball's site to the holder's site along the
        holder's axes, force = activation * (-kp length - kd velocity), activation held (no input)."""
        kp, kd = self.ball_mass * HOLD_OMEGA**2, 2 * self.ball_mass * HOLD_OMEGA
        for axis, name in enumerate(HOLD_ACTUATORS):
            gear = [0.0] * 6
            gear[axis] = 1.0
            act = spec.add_actuator(name=name, target="ball", refsite="hold", trntype=mujoco.mjtTrn.mjTRN_SITE,
                                    gear=gear)
            act.dyntype = mujoco.mjtDyn.mjDYN_INTEGRATOR
            act.gaintype = mujoco.mjtGain.mjGAIN_AFFINE
            act.gainprm[:3] = [0.0, -kp, -kd]
            act.biastype = mujoco.mjtBias.mjBIAS_NONE
            act.actlimited = mujoco.mjtLimited.mjLIMITED_TRUE
            act.actrange = [0.0, 1.0]
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE  # its control stays 0: no one sets it

    # -- episode start ---------------------------------------------------------
    def start_posture(self, robot: Robot) -> np.ndarray:
        """The robot's home on the WAM. On another arm the home if the held ball is clear of
        everything there, else the first of ``START_TRIES`` postures drawn about the home (a normal
        spread of ``START_SPREAD`` rad per joint, within the range, a generator seeded with 0)
        where it is; TaskError when none is."""
        if RobotFrame.of(robot).is_reference():
            return robot.home.copy()
        key = (robot.name, robot.sha256, robot.home.tobytes(), tuple(self.default_context()[1:]))
        if key not in _STARTS:
            task = replace(self)
            scene = build_scene(robot, cast(Task, task))  # a Task of its own episode type
            data = mujoco.MjData(scene.model)
            draws = np.random.default_rng(0).normal(robot.home, START_SPREAD, (START_TRIES, robot.n_dofs))
            for q in np.vstack([robot.home, np.clip(draws, robot.range_lower, robot.range_upper)]):
                data.qpos[scene.qpos_adr] = q
                try:
                    task.reset(scene.model, data, task.default_context(), np.random.default_rng(0))
                except TaskError:
                    continue
                _STARTS[key] = q
                break
            else:
                raise TaskError(f"beer_pong finds no start posture of {robot.name} near its home where the held "
                                f"ball touches nothing; give one in the start command")
        return _STARTS[key].copy()

    def default_context(self) -> np.ndarray:
        """[release_time, cup_x, cup_y] (s, m, m)."""
        return np.array([self.release_time, *self._placed([self.cup_x, self.cup_y])])

    def initialize_episode(self, model, data, context, rng) -> None:
        release, cup = float(context[0]), np.asarray(context[1:3], float)
        if release < 0:
            raise TaskError(f"the release time must be >= 0 s after the motion starts, got {release}")
        self._check_cup(cup)
        memory, ids = self.episode, self.episode.ids
        memory.release_time = release
        memory.hold_act = np.array([model.actuator_actadr[model.actuator(n).id] for n in HOLD_ACTUATORS])
        data.mocap_pos[ids.mocap["cup"]] = self.surface_point(cup)
        data.mocap_quat[ids.mocap["cup"]] = self.table_quat
        # the ball held, at the holder's site, moving with it
        update_kinematics(model, data)
        site = ids.site["hold"]
        velocity = np.zeros(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, site, velocity, 0)
        place_free_ball(data, ids, "ball", data.site_xpos[site].copy(), velocity[3:])
        data.act[memory.hold_act] = 1.0
        mujoco.mj_forward(model, data)
        ball = ids.geom["ball"]
        touched = [model.geom(c.geom1 + c.geom2 - ball).name for c in data.contact[: data.ncon] if ball in c.geom]
        if touched:
            raise TaskError(f"the held ball touches {', '.join(touched)} at the start posture; "
                            f"start the robot elsewhere")

    def motion_events(self) -> dict[str, float]:
        return {"release": self.episode.release_time}

    def on_motion_event(self, name, model, data) -> None:
        if name == "release":
            data.act[self.episode.hold_act] = 0.0

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        ball, vel, cup = steps.sensor("bp_ball_pos"), steps.sensor("bp_ball_vel"), steps.sensor("bp_cup_pos")
        local = self.cup_coordinates(ball, cup)
        up = local[:, 2]  # the ball's centre above the table at the cup, along the cup's axis
        height = up - self.cup_height
        radial = np.hypot(local[:, 0], local[:, 1])
        rb, rr, tb = self.cup_bottom_radius, self.cup_rim_radius, CUP_BOTTOM
        cone = rb + (rr - rb) * (up - tb) / (self.cup_height - tb)
        in_cup = (height < 0) & (up > tb) & (radial < cone)
        at_rest = np.linalg.norm(vel, axis=1) < self.rest_speed
        on_table = steps.sensor("bp_on_table")[:, 0] > 0
        return np.column_stack([ball, vel, cup[:, :2], height, radial, on_table, in_cup, at_rest]).astype(float)

    def _rest_step(self, steps: StepView, state: np.ndarray) -> int | None:
        """Index of the first step at which the ball has lain in the cup at rest for rest_time s
        (within these steps), or None."""
        need = max(int(round(self.rest_time / steps.dt)), 1)
        resting = np.concatenate([[0], np.cumsum((state[:, 11] > 0.5) & (state[:, 12] > 0.5))])
        ends = np.flatnonzero(resting[need:] - resting[:-need] == need)  # windows of need steps all resting
        return int(ends[0]) + need - 1 if ends.size else None

    def segment_end(self, steps: StepView, state: np.ndarray) -> int | None:
        rest = self._rest_step(steps, state)
        return None if rest is None else rest + 1

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        n = len(state)
        if n == 0:
            return np.zeros(0)
        memory = self.episode
        memory.dt = steps.dt
        times = steps.sensor("bp_clock")[:, 0]
        memory.rows = memory.rows[memory.rows[:, _TIME] < times[0]]  # drop steps a shortened segment did not keep
        first = memory.rows.shape[0] == 0
        last = memory.rows[-1] if not first else np.array([-np.inf, 0, 0, np.nan, np.nan, np.nan, 0, 0])
        if first or not last[_SCORED]:
            memory.scored = np.nan
        touch = state[:, 10] > 0.5
        onset = touch & ~np.concatenate([[last[_TOUCH] > 0.5], touch[:-1]])
        bounces = last[_BOUNCES] + np.cumsum(onset)
        height, xy = state[:, 8], state[:, 0:2]
        before = np.concatenate([[last[_HEIGHT]], height[:-1]])
        xy_before = np.vstack([last[[_X, _Y]], xy[:-1]])
        with np.errstate(invalid="ignore"):
            counts = (height <= 0) & (before > 0) & (bounces == self.bounces)
        reward = np.zeros(n)
        if first:
            reward[0] = -MISS_DISTANCE
        scored = np.full(n, last[_SCORED] > 0.5)
        if not scored[0] and counts.any():
            k = int(np.argmax(counts))
            frac = before[k] / (before[k] - height[k])
            at = xy_before[k] + frac * (xy[k] - xy_before[k])
            radial = min(float(np.hypot(*(at - state[k, 6:8]))), MISS_DISTANCE)
            reward[k] += MISS_DISTANCE - radial
            scored[k:] = True
            memory.scored = radial
        resting = (state[:, 11] > 0.5) & (state[:, 12] > 0.5)
        keep = self.segment_end(steps, state) or n  # the steps the segment keeps
        rows = np.column_stack([times, touch, bounces, height, xy, scored, resting])[:keep]
        memory.rows = np.vstack([memory.rows, rows])
        return reward

    def scored_distance(self) -> float:
        """m, the ball's distance from the cup's axis where the throw was scored, nan before."""
        return float(self.episode.scored)

    def unplayed_return(self, state: np.ndarray) -> float:
        """-MISS_DISTANCE: a ball never thrown is never scored."""
        return -MISS_DISTANCE

    def success(self, state: np.ndarray) -> bool:
        memory = self.episode
        if not memory.scored < self.cup_rim_radius:
            return False
        need = max(int(round(self.rest_time / memory.dt)), 1)
        if memory.rows.shape[0] < need:
            return False
        return bool(np.all(memory.rows[-need:, _RESTING] > 0.5) and state[11] > 0.5 and state[12] > 0.5)
