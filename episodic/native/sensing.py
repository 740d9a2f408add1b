"""Sensing like a real robot, for the compiled feedback laws that close a loop on a tracked
object's state (ball_on_beam, pole_balancing, ball_bouncing).

A real robot sees a ball or a pole through a tracker (cameras, motion capture): late, and with
noise; its own joints it reads from encoders at once. A law built with :class:`Sensing` reads
the tracked quantities (m of them: the ball's position and velocity, the pole's angle and rate)
as such a tracker reports them (episodic_sense in episodic/native/control.c):

- late by ``delay`` = round(latency / control period) control steps (2 ms on the WAM): each
  control step the true values enter a ring of the last delay + 1 samples kept in the law's
  memory, and the law reads the oldest (while fewer than ``delay`` steps have passed since the
  law first ran in the episode, the first sample: the tracker's first report, held);
- with independent Gaussian noise of the given std on each quantity, a pure function of the
  episode's key, the sample's control step and the quantity (a counter-based generator in C,
  so the compiled loop and the tick-by-tick loop, which call the same C function, get the same
  numbers, and the same sample read again gets the same noise). The key is drawn from the
  episode's random generator (``Task.reset``'s rng, seeded by the run's seed and the
  episode's number: episodic/runtime/machine.py), so ``episodic replay`` repeats the noise bit for bit,
  and another seed or episode gets other noise.

The ring and the step count live in the episode (the task's ``Episode``), not in one gains
command's law: a new gains command changes the law, not what the tracker has seen.

What a tracker's latency is. A camera-based tracker is late by at least its exposure and
transfer and typically about a frame: a 10-camera Qualisys Oqus-300 motion capture system at
200 Hz measured 6-7 ms from motion to the data arriving at the controller (ETH Zurich's
Sensory-Motor Systems Lab, reported by Qualisys, "Real-time latency tests of a Qualisys system
in the Sensory-Motor Systems Lab at ETH Zurich"; a vendor's report of a measurement, fairly
sure for that setup), Qualisys reports under 6 ms (one frame) at 160 Hz; a 60 Hz vision system
such as the ones used for ball experiments is late by at least its 16.7 ms frame period. The
tasks' defaults are 0 latency and 0 noise, which keeps the published references and returns
comparable with those measured before sensing was modelled; a study of a real setup sets
``sensing_latency`` (e.g. 0.006 s for the motion capture above, 0.02 s or more for 60 Hz
vision). benchmarks/pole_latency.py measures what latency does to the pole.

The control period is the scene's (:func:`add_control_period` records it in the model when a
task's scene is built, :func:`control_period` reads it back), so a latency becomes a number of
steps without the task knowing the robot.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from numpy.typing import ArrayLike

from episodic.native import pack

CONTROL_PERIOD = "control_period"  # the model's numeric holding the control period, s
SENSING_MEMORY = 1   # EPISODIC_SENSING_RING: the memory block's values before the ring


def add_control_period(spec: mujoco.MjSpec, control_dt: float) -> None:
    """Record the control period ``control_dt`` s in the model being built (a numeric)."""
    spec.add_numeric(name=CONTROL_PERIOD, data=[control_dt])


def control_period(model: mujoco.MjModel) -> float:
    """The control period s recorded by :func:`add_control_period`; KeyError when it was not."""
    return float(model.numeric(CONTROL_PERIOD).data[0])


@dataclass(frozen=True)
class Sensing:
    """One episode's tracker: ``delay`` control steps, ``std`` (m,) the noise std of each sensed
    quantity (in its unit) and ``key`` (2,) the noise key's 32-bit halves (as floats, exact)."""

    delay: int
    std: np.ndarray
    key: np.ndarray

    @classmethod
    def start(cls, model: mujoco.MjModel, latency: float, std: ArrayLike, rng: np.random.Generator) -> Sensing:
        """The tracker of an episode starting now: ``latency`` s rounded to control steps of
        ``model``'s control period, noise std (m,) per quantity, the key drawn from the episode's
        ``rng`` (drawn whether or not there is noise, so the generator's use is the same)."""
        delay = int(round(latency / control_period(model)))
        key = rng.integers(0, 2**32, size=2).astype(float)
        return cls(delay, np.asarray(std, dtype=float), key)

    @property
    def size(self) -> int:
        """m, the number of quantities sensed."""
        return self.std.size

    def param(self) -> np.ndarray:
        """The tracker's parameters for a law (an episodic_sensing, episodic.h, filled by name)."""
        return pack("episodic_sensing", dict(delay=self.delay, count=self.size, key=self.key, std=self.std))

    def memory(self) -> np.ndarray:
        """A fresh sensing memory block (SENSING_MEMORY + (delay + 1) m,): nothing sensed yet."""
        return np.zeros(SENSING_MEMORY + (self.delay + 1) * self.size)
