"""Writing a task: the contract a task follows (episodic.task.contract), its difficulty
parameters (episodic.task.params), the scene parts task modules share (episodic.task.parts), and
the physics helpers beside them (episodic.task.contact: calibrated ball contacts and air drag;
episodic.task.kinematics: inverse kinematics of a site; episodic.task.frame: a robot's base
and reach, to place a scene in its frame, and what a task needs of a robot), and where a task class comes from
(episodic.task.source: its "module:Class" spec and the package that provides it)."""
from episodic.task.contract import Camera, Episode, Ids, Reference, StepView, Task, TaskError
from episodic.task.frame import Needs, RobotFrame, arm_reach
from episodic.task.params import Choice, Param, choice, coordinate, format_number, param
from episodic.task.parts import (
    TARGET,
    add_frame_sensors,
    add_free_ball,
    add_target,
    add_tool_body,
    body_velocity,
    place_free_ball,
    place_target,
    rigid_inertia,
    update_kinematics,
)
from episodic.task.source import TaskSource, class_spec, task_source

__all__ = ["TARGET", "Camera", "Choice", "Episode", "Ids", "Needs", "Param", "Reference", "RobotFrame", "StepView",
           "Task", "TaskError", "TaskSource", "add_free_ball", "add_frame_sensors", "add_target", "add_tool_body",
           "arm_reach", "body_velocity", "choice", "class_spec", "coordinate", "format_number", "param",
           "place_free_ball", "place_target", "rigid_inertia", "task_source", "update_kinematics"]
