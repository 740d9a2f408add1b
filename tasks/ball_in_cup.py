"""ball_in_cup: swing a ball on an elastic string up and catch it in a cup on the hand.

Scene. A cup (``add_tool``) is fixed to the tool flange by a short bracket, its opening
along the flange's -y axis: at the start posture (the WAM's home posture with the wrist
pitched to j6 = -0.3768 rad and j7 = -pi/2) the flange points forward and the cup stands
upright in front of it, 1.65 m up. The cup is ``cup_mass`` kg (part of the arm's dynamics
and gravity compensation), ``cup_radius`` m inner radius and ``cup_depth`` m from the inner
bottom to the rim, built from a bottom disc and ``WALL_BOXES`` thin boxes around a circle
(MuJoCo has no hollow cylinder). A ball of ``ball_radius`` m and ``ball_mass`` kg on a free
joint hangs from a site under the cup's bottom (the "anchor") by a string: a MuJoCo spatial
tendon from the anchor to the ball's centre, limited to [0, ``string_length``] m (it passes
through geometry; only the ball collides). Slack, the ball flies freely; taut, the limit
constraint pulls it back like a stiff, critically damped spring (solreflimit =
(``string_timeconst`` s, ``string_dampratio``)), so a snapping string stretches a little and
loses its radial speed, as a real string does. Elastic allowance: with the default time
constant the string stretches at most ``STRETCH_ALLOWANCE`` = 0.02 m (5 %) past its length
(measured 7.7 mm in a vigorous swing, 4.4 mm in the reference swing; tested). The ball has
contype = conaffinity = 1, the cup's geoms, like the robot's, contype 2 and conaffinity 1:
the ball hits the cup and the arm, the cup and the arm never collide with each other.
Contacts are MuJoCo's default soft contacts, so the ball hardly bounces.

Start state. After GOTO_START the ball hangs still below the anchor: at the anchor minus
``string_length`` along gravity, zero velocity. Context (command 0): nothing, or
(dx, dy) m, a horizontal offset of the ball from straight below the anchor with the string
kept taut (|(dx, dy)| < string_length), still at zero velocity.

State columns. ball_x, ball_y, ball_z m and ball_vx, ball_vy, ball_vz m/s (the ball's
centre, world frame); cup_x, cup_y, cup_z m: the rim centre (centre of the cup's opening);
distance m: ball centre to rim centre; height m: the ball centre above the rim plane along
the cup's axis (negative below the rim); radial m: the ball centre's distance from the
cup's axis; string m: the string's present length (anchor to ball centre); caught: 1 when
the ball is in the cup and at rest, else 0. "In the cup": the ball's centre lies inside the
cup's inner cylinder (radial < cup_radius, between the inner bottom and the rim plane);
"at rest": its speed relative to the cup (the cup's velocity at the ball's centre) is below
``rest_speed`` m/s.

Rewards (Kober & Peters 2009, plus a catch bonus). A step's reward is
``exp(-CROSSING_ALPHA * radial**2)`` (CROSSING_ALPHA = 20 / m^2) when the ball's centre
crosses the rim plane going down during that step (radial measured at the crossing: 1 for a
ball dropping in on the axis, 0.82 at 0.1 m, 0.45 at 0.2 m, 0.04 at 0.4 m), plus
``CATCH_BONUS`` = 3 once per segment that catches the ball: at the step where it has been
caught for ``rest_time`` s without a break, or at the segment's last step if it is caught
there; no bonus when the ball was already caught as the segment began. Otherwise 0. The
segment ends early once the ball has been caught for ``rest_time`` s. The episode return is
the sum: 4 to 4.7 for a catch, below 1.3 for a ball that falls near the cup but not into it,
0 for one that never rises above the rim. Success: the episode ends with ``caught`` = 1, so
a learner's last segment should hold the cup still while the ball settles (about 1 s).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from episodic.robot import Robot
from episodic.task import StepView, Task, TaskError, add_free_ball, add_frame_sensors, param, place_free_ball

WALL_BOXES = 16          # boxes that make the cup's wall
WALL_THICKNESS = 0.004   # m
BOTTOM_THICKNESS = 0.006  # m
BRACKET_LENGTH = 0.02    # m, gap between the flange face and the cup's wall
# cup frame in the flange (link 7) frame: origin at the inner bottom centre, z along the
# cup's opening = the flange's -y axis (x rotated by +90 degrees)
CUP_QUAT = (np.sqrt(0.5), np.sqrt(0.5), 0.0, 0.0)
START_J6 = -0.3768  # rad, wrist pitch that makes the cup upright at the WAM's home posture
BALL_START = (0.766, 0.0, 1.136)  # m, hanging below the cup at home, before the first episode resets it


@dataclass
class BallInCup(Task):
    name: ClassVar[str] = "ball_in_cup"
    summary: ClassVar[str] = "swing a ball on an elastic string up and catch it in a cup on the hand."
    robots: ClassVar[tuple[str, ...]] = ("wam",)
    columns: ClassVar[tuple[str, ...]] = (
        "ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz",
        "cup_x", "cup_y", "cup_z", "distance", "height", "radial", "string", "caught")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 2)
    context_help: ClassVar[str] = ("no context (ball hanging straight down), or a horizontal ball "
                                   "offset (dx, dy) m with the string taut")
    CROSSING_ALPHA: ClassVar[float] = 20.0  # 1/m^2, width of the rim-crossing reward
    CATCH_BONUS: ClassVar[float] = 3.0
    STRETCH_ALLOWANCE: ClassVar[float] = 0.02  # m, for the default string_timeconst (tested)

    string_length: float = param(0.40, "m", "anchor to ball centre when taut (the anchor is 1.54 m above "
                                 "the floor at the start on the WAM)", gt=0, le=1.5)
    string_timeconst: float = param(0.006, "s", "solref time constant of the taut string; MuJoCo makes "
                                    "it at least 2 physics steps (2 ms each on the WAM at 500 Hz)", ge=0.004)
    string_dampratio: float = param(1.0, "", "solref damping ratio of the taut string", gt=0)
    ball_radius: float = param(0.02, "m", gt=0)
    ball_mass: float = param(0.024, "kg", gt=0)
    cup_radius: float = param(0.045, "m", "inner radius, larger than ball_radius", gt=0)
    cup_depth: float = param(0.10, "m", "inner bottom to rim", gt=0)
    cup_mass: float = param(0.1, "kg", "cup and bracket", gt=0)
    rest_speed: float = param(0.1, "m/s", "'at rest' below this speed relative to the cup", gt=0)
    rest_time: float = param(0.2, "s", "caught this long ends the segment with the bonus", ge=0)

    def check_params(self) -> None:
        if not self.cup_radius > self.ball_radius:
            raise TaskError(f"parameter 'cup_radius' of task 'ball_in_cup' must be larger than ball_radius, "
                            f"got {self.cup_radius}")

    # -- scene ---------------------------------------------------------------
    @property
    def outer_radius(self) -> float:
        return self.cup_radius + WALL_THICKNESS

    def cup_offset(self) -> np.ndarray:
        """Cup frame origin (inner bottom centre) in the flange frame, m."""
        return np.array([0.0, 0.0, BRACKET_LENGTH + self.outer_radius])

    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        flange = spec.site(robot.end_effector_site)
        parent = flange.parent
        cup = parent.add_body(name="cup", pos=np.asarray(flange.pos) + self.cup_offset(), quat=CUP_QUAT)
        cup.gravcomp = 1.0  # part of the arm: the controller compensates its weight
        R, H, t, w = self.cup_radius, self.cup_depth, BOTTOM_THICKNESS, WALL_THICKNESS
        Ro = R + w
        look = dict(contype=2, conaffinity=1, condim=3, rgba=[0.85, 0.55, 0.2, 1.0])
        cup.add_geom(name="cup_bottom", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[Ro, t / 2, 0],
                     pos=[0, 0, -t / 2], **look)
        half_width = Ro * np.tan(np.pi / WALL_BOXES) + 1e-4
        for k in range(WALL_BOXES):
            phi = 2 * np.pi * k / WALL_BOXES
            cup.add_geom(name=f"cup_wall{k}", type=mujoco.mjtGeom.mjGEOM_BOX,
                         size=[w / 2, half_width, (H + t) / 2],
                         pos=[(R + w / 2) * np.cos(phi), (R + w / 2) * np.sin(phi), (H - t) / 2],
                         quat=[np.cos(phi / 2), 0, 0, np.sin(phi / 2)], **look)
        # bracket from the flange face to the cup's wall, along the cup's -y (the flange's -z)
        cup.add_geom(name="cup_bracket", type=mujoco.mjtGeom.mjGEOM_BOX,
                     size=[0.012, (BRACKET_LENGTH + w) / 2, 0.012],
                     pos=[0, -(Ro + BRACKET_LENGTH - (BRACKET_LENGTH + w) / 2), 0.012 - t], **look)
        cup.add_site(name="cup_anchor", pos=[0, 0, -t], size=[0.004, 0, 0])
        cup.add_site(name="cup_rim", pos=[0, 0, H], size=[0.004, 0, 0])
        mass, com, inertia = self._cup_inertia()
        cup.explicitinertial = True
        cup.mass, cup.ipos, cup.iquat, cup.inertia = mass, com, [1.0, 0.0, 0.0, 0.0], inertia

    def _cup_inertia(self) -> tuple[float, np.ndarray, np.ndarray]:
        """Mass kg, centre of mass m and principal inertia kg m^2 (cup frame) of a thin-walled
        cup: wall and bottom share ``cup_mass`` by area (the bracket is counted in the wall)."""
        R, H, t = self.cup_radius + WALL_THICKNESS / 2, self.cup_depth, BOTTOM_THICKNESS
        area_wall, area_bottom = 2 * np.pi * R * H, np.pi * R**2
        m_w = self.cup_mass * area_wall / (area_wall + area_bottom)
        m_b = self.cup_mass - m_w
        z_w, z_b = H / 2, -t / 2
        z = (m_w * z_w + m_b * z_b) / self.cup_mass
        izz = m_w * R**2 + m_b * R**2 / 2
        ixx = (m_w * (R**2 / 2 + H**2 / 12) + m_w * (z_w - z) ** 2
               + m_b * (R**2 / 4 + t**2 / 12) + m_b * (z_b - z) ** 2)
        return self.cup_mass, np.array([0.0, 0.0, z]), np.array([ixx, ixx, izz])

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        ball = add_free_ball(spec, "ball", list(BALL_START), self.ball_radius, self.ball_mass,
                             contype=1, conaffinity=1, condim=3, friction=[0.5, 0.005, 0.0001],
                             rgba=[0.9, 0.15, 0.15, 1.0])
        ball.add_site(name="ball_centre", size=[0.004, 0, 0])
        string = spec.add_tendon(name="string", limited=mujoco.mjtLimited.mjLIMITED_TRUE,
                                 range=[0.0, self.string_length], width=0.0015,
                                 rgba=[0.9, 0.9, 0.85, 1.0])
        string.solref_limit = [self.string_timeconst, self.string_dampratio]
        string.solimp_limit = [0.95, 0.99, 0.001, 0.5, 2.0]
        string.wrap_site("cup_anchor")
        string.wrap_site("ball_centre")
        add_frame_sensors(spec, "bic_ball", mujoco.mjtObj.mjOBJ_XBODY, "ball")
        add_frame_sensors(spec, "bic_rim", mujoco.mjtObj.mjOBJ_SITE, "cup_rim")
        rim = dict(objtype=mujoco.mjtObj.mjOBJ_SITE, objname="cup_rim")
        spec.add_sensor(name="bic_cup_angvel", type=mujoco.mjtSensor.mjSENS_FRAMEANGVEL, **rim)
        spec.add_sensor(name="bic_cup_axis", type=mujoco.mjtSensor.mjSENS_FRAMEZAXIS, **rim)
        spec.add_sensor(name="bic_string", type=mujoco.mjtSensor.mjSENS_TENDONPOS,
                        objtype=mujoco.mjtObj.mjOBJ_TENDON, objname="string")

    # -- start ---------------------------------------------------------------
    def start_posture(self, robot: Robot) -> np.ndarray:
        """The home posture with the wrist pitched so that the cup's axis is vertical (WAM)."""
        q = robot.home.copy()
        if robot.name == "wam":
            q[5], q[6] = START_J6, -np.pi / 2
        return q

    def default_context(self) -> np.ndarray:
        """No offset: the ball hangs straight down."""
        return np.zeros(2)

    def initialize_episode(self, model, data, context, rng) -> None:
        offset = context  # (dx, dy) m
        if not np.hypot(*offset) < self.string_length:
            raise TaskError(f"ball offset {np.round(offset, 4).tolist()} m must be shorter than the "
                            f"string ({self.string_length} m)")
        mujoco.mj_kinematics(model, data)
        anchor = data.site_xpos[self.episode.ids.site["cup_anchor"]]
        down = np.asarray(model.opt.gravity, float)
        down = down / np.linalg.norm(down)
        # horizontal offset (dx, dy) in the plane normal to gravity (world x, y for -z gravity)
        ex = np.array([1.0, 0.0, 0.0]) - down * down[0]
        ex /= np.linalg.norm(ex)
        ey = np.cross(down, ex) * -1.0
        drop = np.sqrt(self.string_length**2 - offset @ offset)
        place_free_ball(data, self.episode.ids, "ball", anchor + drop * down + offset[0] * ex + offset[1] * ey)

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        ball, ball_v = steps.sensor("bic_ball_pos"), steps.sensor("bic_ball_vel")
        rim, axis = steps.sensor("bic_rim_pos"), steps.sensor("bic_cup_axis")
        string = steps.sensor("bic_string")[:, 0]
        rel = ball - rim
        height = np.sum(rel * axis, axis=1)
        radial = np.linalg.norm(rel - height[:, None] * axis, axis=1)
        distance = np.linalg.norm(rel, axis=1)
        speed = np.linalg.norm(self._relative_velocity(steps, rel), axis=1)
        inside = (radial < self.cup_radius) & (height < 0) & (height > -self.cup_depth)
        caught = (inside & (speed < self.rest_speed)).astype(float)
        return np.column_stack([ball, ball_v, rim, distance, height, radial, string, caught])

    @staticmethod
    def _relative_velocity(steps: StepView, rel: np.ndarray) -> np.ndarray:
        """The ball's velocity (n, 3) m/s relative to the cup's point where the ball is."""
        cup_v = steps.sensor("bic_rim_vel") + np.cross(steps.sensor("bic_cup_angvel"), rel)
        return steps.sensor("bic_ball_vel") - cup_v

    def _crossing(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        """Reward of each step for the ball's centre crossing the rim plane downward during it
        (its height one step earlier estimated from the relative velocity along the axis)."""
        rel = state[:, 0:3] - state[:, 6:9]
        axial_v = np.sum(self._relative_velocity(steps, rel) * steps.sensor("bic_cup_axis"), axis=1)
        height = state[:, 10]
        crossed = (height <= 0) & (height - axial_v * steps.dt > 0)
        return np.where(crossed, np.exp(-self.CROSSING_ALPHA * state[:, 11] ** 2), 0.0)

    def _rest_step(self, steps: StepView, state: np.ndarray) -> int | None:
        """Index of the first step at which the ball has been caught for rest_time s, or None."""
        need = max(int(round(self.rest_time / steps.dt)), 1)
        caught = state[:, 13] > 0.5
        if caught.sum() < need:
            return None
        # length of the run of caught steps ending at each step
        idx = np.arange(len(caught))
        last_miss = np.maximum.accumulate(np.where(caught, -1, idx))
        hits = np.flatnonzero(idx - last_miss >= need)
        return int(hits[0]) if hits.size else None

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        reward = self._crossing(steps, state)
        caught = state[:, 13] > 0.5
        if len(caught) and not caught[0]:  # a catch in this segment, not one carried over
            rest = self._rest_step(steps, state)
            if rest is None and caught[-1]:
                rest = len(caught) - 1
            if rest is not None:
                reward[rest] += self.CATCH_BONUS
        return reward

    def segment_end(self, steps: StepView, state: np.ndarray) -> int | None:
        rest = self._rest_step(steps, state)
        return None if rest is None else rest + 1

    def success(self, state: np.ndarray) -> bool:
        return bool(state[13] > 0.5)
