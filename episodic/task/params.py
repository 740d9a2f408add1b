"""A task's difficulty parameters, declared on its dataclass fields: :func:`param` and
:func:`coordinate` (a number with its unit, valid range and meaning), :func:`choice` (one of
named options); checked whenever a task is built (episodic.task.contract.Task.with_params)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

PARAM = "param"  # the metadata key under which a task parameter's field holds its Param


# the box every position parameter lies in, m, world frame: over the floor, at most 3 m from the
# robot's base horizontally and 3 m up
WORKSPACE = {"x": (-3.0, 3.0), "y": (-3.0, 3.0), "z": (0.0, 3.0)}


# The largest value a physical quantity of each unit may take when its declaration gives no upper
# bound (:func:`param`): beyond these no task's scene is a physical one, and float geometry of
# much larger values overflows. Lengths: the workspace's 3 m (WORKSPACE). Masses: 5 kg, the
# largest rated payload of the arms episodic ships or imports (Universal Robots UR5: 5 kg, UR5
# technical specifications; Barrett WAM: 4 kg, WAM arm data sheet; Franka Emika Panda: 3 kg).
UNIT_CEILING = {"m": 3.0, "kg": 5.0}


def format_number(value: float) -> str:
    """``value`` as the shortest text that reads back as it: 0.02, -1, 1e-05, nan, inf."""
    text = repr(value if isinstance(value, int) else float(value))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class Param:
    """What a task parameter declares: its default, its ``unit`` ("" for a pure number), its
    valid range from ``low`` to ``high`` (None: unbounded on that side; ``low_open`` /
    ``high_open``: that bound itself is excluded) and, where the name does not say it, its
    ``meaning`` in a line. A value must be finite and in range, and a whole number when the
    default is an int."""

    default: float | int
    unit: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    meaning: str = ""

    @property
    def integer(self) -> bool:
        return isinstance(self.default, int)

    @property
    def two_sided(self) -> bool:
        return self.low is not None and self.high is not None

    def bounds(self) -> str:
        """The range as text: "> 0", ">= 0", "<= 3", "[0, 1)" when bounded on both sides,
        "finite" when unbounded."""
        low, high = self.low, self.high
        if low is not None and high is not None:  # two-sided
            return (f"{'(' if self.low_open else '['}{format_number(low)}, "
                    f"{format_number(high)}{')' if self.high_open else ']'}")
        if low is not None:
            return f"{'>' if self.low_open else '>='} {format_number(low)}"
        if high is not None:
            return f"{'<' if self.high_open else '<='} {format_number(high)}"
        return "finite"

    def admits(self, value: float) -> bool:
        """Whether ``value`` is finite, in range and (for an integer parameter) whole."""
        value = float(value)
        if not math.isfinite(value) or (self.integer and not value.is_integer()):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def requirement(self) -> str:
        """What a value must be, with the unit: "> 0 m", "in [0, 1)", "a whole number >= 1",
        "a finite number, in m"."""
        if self.low is None and self.high is None:
            text = f"a finite {'whole ' if self.integer else ''}number"
            return f"{text}, in {self.unit}" if self.unit else text
        text = f"in {self.bounds()}" if self.two_sided else self.bounds()
        text = f"a whole number {text}" if self.integer else text
        return f"{text} {self.unit}" if self.unit else text

    def describe(self, name: str) -> str:
        """The parameter as `episodic tasks` lists it: "tolerance=0.02 m (> 0)", "restitution=0.8 [0, 1)"."""
        unit = f" {self.unit}" if self.unit else ""
        bounds = self.bounds() if self.two_sided else f"({self.bounds()})"
        return f"{name}={format_number(self.default)}{unit} {bounds}"


def param(default: float | int, unit: str, meaning: str = "", *, gt: float | None = None, ge: float | None = None,
          lt: float | None = None, le: float | None = None) -> Any:
    """Declare a task parameter: a dataclass field with ``default`` (an int for a parameter that
    counts), its ``unit`` ("" for a pure number), its ``meaning`` in a line where the name does not
    say it, and its valid range: greater than ``gt`` or at least ``ge``, less than ``lt`` or at
    most ``le`` (at most one of each pair; none: unbounded on that side, except for a length or a
    mass: at most its :data:`UNIT_CEILING`). Every value given, the default included, is checked
    against it when the task is built."""
    if gt is not None and ge is not None or lt is not None and le is not None:
        raise TypeError("a parameter takes at most one lower bound (gt or ge) and one upper bound (lt or le)")
    if lt is None and le is None:
        le = UNIT_CEILING.get(unit)
    spec = Param(default, unit, low=ge if gt is None else gt, high=le if lt is None else lt,
                 low_open=gt is not None, high_open=lt is not None, meaning=meaning)
    if not spec.admits(default):
        raise TypeError(f"the default {format_number(default)} is outside the declared range {spec.bounds()}")
    return field(default=default, metadata={PARAM: spec})


def coordinate(default: float, axis: str, meaning: str = "") -> Any:
    """Declare a position parameter: the world coordinate along ``axis`` ("x", "y" or "z") of a
    point, m, with ``default``, valid within :data:`WORKSPACE`."""
    low, high = WORKSPACE[axis]
    return param(default, "m", meaning, ge=low, le=high)


@dataclass(frozen=True)
class Choice:
    """What a text-choice task parameter declares: its ``default``, the ``options`` a value must
    be one of (exact text) and, where the name does not say it, its ``meaning`` in a line."""

    default: str
    options: tuple[str, ...]
    meaning: str = ""
    # what a number's declaration says, for code that lists parameters alike: no unit, no bounds
    unit = ""
    low = high = None
    low_open = high_open = False

    def admits(self, value: Any) -> bool:
        """Whether ``value`` is one of the options."""
        return isinstance(value, str) and value in self.options

    def bounds(self) -> str:
        """The options as text: "chain, tendon"."""
        return ", ".join(self.options)

    def requirement(self) -> str:
        """What a value must be: "one of chain, tendon"."""
        return f"one of {self.bounds()}"

    def describe(self, name: str) -> str:
        """The parameter as `episodic tasks` lists it: "string_model=chain (chain | tendon)"."""
        return f"{name}={self.default} ({' | '.join(self.options)})"


def choice(default: str, options: tuple[str, ...], meaning: str = "") -> Any:
    """Declare a text-choice task parameter: a dataclass field with ``default``, one of
    ``options`` (texts without spaces, each a way of building the task), and its ``meaning`` in
    a line. Every value given is checked against the options when the task is built, and
    recorded in the logs as the text."""
    options = tuple(options)
    if not options or not all(isinstance(o, str) and o and o.isprintable() and not any(c.isspace() for c in o)
                              and "=" not in o for o in options):
        raise TypeError(f"the options of a choice are non-empty texts without spaces or '=', got {options!r}")
    if len(set(options)) != len(options):
        raise TypeError(f"the options of a choice must differ, got {options!r}")
    spec = Choice(default, options, meaning)
    if not spec.admits(default):
        raise TypeError(f"the default {default!r} is not one of the options {options!r}")
    return field(default=default, metadata={PARAM: spec})

