"""episodic's compiled part: the blocking control loop (``control.c``) and the tasks' feedback
laws (``tasks/<name>.c``) in C, one plain shared library (``_library.so`` beside this module)
that installing episodic builds against the installed MuJoCo (setup.py) and that is called here
through ctypes.

The library is optional: an install without a C compiler has none, and episodic then runs the
blocking loop in Python (:func:`compiled` is False and warns once; the results are the same, see
``Simulation._run_python``), while the tasks whose feedback law is written in C refuse task gains
with a :class:`NativeError` that says how to build it.

The library reads MuJoCo's structs, so it only runs with the MuJoCo it was compiled for:
:func:`library` refuses any other with a :class:`NativeError` that says how to rebuild it. An
error MuJoCo meets inside the library (mju_error, e.g. its arena overflowing) ends the call with
``mujoco.FatalError``, as in MuJoCo's own Python functions, not the process.

The structs that cross into C are described once, in C (``episodic.h``: a table of each struct's
fields with their offsets and sizes): :func:`load` refuses a library whose segment struct differs
from :class:`SegmentArgs`, and a law's parameters (:class:`CompiledLaw`) and a tracker's
(``sensing.Sensing``) are filled by name from their tables (:func:`pack`), so no order is
written twice.
"""
from __future__ import annotations

import ctypes
import functools
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import mujoco
import numpy as np
from numpy.typing import ArrayLike

PATH = Path(__file__).with_name("_library.so")
ERROR_SIZE = 1024  # EPISODIC_ERROR_SIZE: room for MuJoCo's error text
REBUILD = ("reinstall episodic so that it is compiled against the installed MuJoCo "
           "(in a checkout: pip install -e .; otherwise: pip install --force-reinstall --no-deps episodic)")
# benchmarks/native_speed.py: a blocking reach episode (WAM, 2 ms control steps, logging included),
# four alternating rounds on 2 loaded cores: medians 23,100 and 22,700 control steps/s compiled,
# 6,900 and 5,600 in Python (gravity compensation; inverse dynamics at the measured state): 3.3 and
# 4.1 times slower (an earlier run: 3.7 and 5.5)
SLOWER = "3 to 6 times"
WITHOUT_LIBRARY = (f"episodic's compiled control loop is not built (no C compiler when episodic was installed): "
                   f"blocking runs step in Python instead, with the same results but {SLOWER} slower, and the "
                   f"tasks whose feedback law is written in C (tasks/*.c) refuse task gains. To get the compiled "
                   f"loop, install gcc (e.g. apt-get install gcc) and reinstall episodic (pip install "
                   f"--force-reinstall --no-deps episodic; in a checkout: pip install -e .)")


class NativeError(RuntimeError):
    """episodic's compiled part is missing, was built for another MuJoCo or with other structs;
    the message says how to rebuild it."""


class SegmentArgs(ctypes.Structure):
    """episodic_segment: the arguments of one compiled run (see episodic.h for each field);
    checked against the library's table on load."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("model", "data", "dynamics", "dynamics_data")] \
        + [(name, ctypes.c_int) for name in ("n", "n_dofs", "substeps", "feedforward", "state_spec")] \
        + [(name, ctypes.c_void_p) for name in ("qpos_adr", "dof_adr", "actuator", "lower", "upper", "kp", "kd",
                                                "ki", "passive")] \
        + [("dt", ctypes.c_double), ("ctrl_bound", ctypes.c_double)] \
        + [(name, ctypes.c_void_p) for name in ("q_d", "qd_d", "qdd_d", "reference", "u_ff", "integral", "law",
                                                "law_param", "law_memory", "states", "sensordata", "ctrl", "error")]


class Field(NamedTuple):
    """One field of a struct as C lays it out: its name, offset and size in bytes."""

    name: str
    offset: int
    size: int


class _FieldEntry(ctypes.Structure):
    """episodic_field, one row of a struct's table in the library."""

    _fields_ = [("name", ctypes.c_char_p), ("offset", ctypes.c_size_t), ("size", ctypes.c_size_t)]


def fields(lib: ctypes.CDLL, struct: str) -> tuple[list[Field], int]:
    """The fields of C struct ``struct`` (from the library's table ``<struct>_fields``, in the
    table's order) and its size in bytes (``<struct>_size()``); NativeError when the library has
    no such table (built from other sources)."""
    try:
        first = _FieldEntry.in_dll(lib, f"{struct}_fields")
    except ValueError:
        raise NativeError(f"episodic's compiled part has no table of {struct} ({struct}_fields); {REBUILD}") from None
    table = ctypes.cast(ctypes.addressof(first), ctypes.POINTER(_FieldEntry))
    out: list[Field] = []
    while (entry := table[len(out)]).name is not None:
        out.append(Field(entry.name.decode(), entry.offset, entry.size))
    size = getattr(lib, f"{struct}_size")
    size.restype = ctypes.c_size_t
    return out, int(size())


def check_layout(lib: ctypes.CDLL, struct: str, mirror: type[ctypes.Structure]) -> None:
    """NativeError unless ctypes ``mirror`` lays out C struct ``struct`` as the library does:
    the same size and the same fields, in order, at the same offsets with the same sizes."""
    c_fields, c_size = fields(lib, struct)
    ours = [Field(name, getattr(mirror, name).offset, getattr(mirror, name).size) for name, *_ in mirror._fields_]
    if ours != c_fields or ctypes.sizeof(mirror) != c_size:
        differ = [f"{o} here, {c} in C" for o, c in zip(ours, c_fields) if o != c] \
            + [f"{f} only here" for f in ours[len(c_fields):]] + [f"{f} only in C" for f in c_fields[len(ours):]]
        raise NativeError(f"episodic's compiled part lays out {struct} ({c_size} bytes) otherwise than "
                          f"{mirror.__name__} in episodic/native/__init__.py ({ctypes.sizeof(mirror)} "
                          f"bytes): {'; '.join(differ) or 'the sizes differ'}; change both together (episodic.h "
                          f"and the mirror) and {REBUILD}")


def _version(number: int) -> str:
    """MuJoCo's version number (mj_version, mjVERSION_HEADER: 4000000) as text (4.0.0)."""
    return f"{number // 1000000}.{number // 1000 % 1000}.{number % 1000}"


@functools.cache
def library() -> ctypes.CDLL:
    """The compiled library (``_library.so`` beside this module), loaded once: see :func:`load`;
    NativeError when it was not built."""
    if not PATH.is_file():
        raise NativeError(f"episodic's compiled part ({PATH}) is missing (it is built when episodic is installed "
                          f"with a C compiler at hand); install gcc and {REBUILD}")
    return load(str(PATH))


@functools.cache
def compiled() -> bool:
    """Whether the compiled library was built (blocking runs go through it); when not, warn once
    (RuntimeWarning) that runs step in Python, how much slower, and how to build it."""
    if PATH.is_file():
        return True
    warnings.warn(WITHOUT_LIBRARY, RuntimeWarning, stacklevel=2)
    return False


def load(path: str) -> ctypes.CDLL:
    """The library at ``path``; NativeError when it cannot be loaded, was built for a MuJoCo
    other than the one imported, or lays out its segment struct otherwise than SegmentArgs."""
    try:
        lib = ctypes.CDLL(path)  # needs libmujoco.so.<version>, loaded by `import mujoco`
    except OSError as exc:
        raise NativeError(f"episodic's compiled part cannot be loaded with MuJoCo {mujoco.__version__} "
                          f"({exc}); {REBUILD}") from None
    built = lib.episodic_mujoco_version()
    if built != mujoco.mj_version():
        raise NativeError(f"episodic's compiled part was built for MuJoCo {_version(built)}, but MuJoCo "
                          f"{_version(mujoco.mj_version())} is installed; {REBUILD}")
    check_layout(lib, "episodic_segment", SegmentArgs)
    lib.episodic_run.argtypes = [ctypes.POINTER(SegmentArgs)]
    lib.episodic_feedback.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] + [ctypes.c_void_p] * 4
    lib.episodic_sense.argtypes = [ctypes.c_void_p] * 4
    lib.episodic_stop_on.argtypes = [ctypes.c_int]
    return lib


def address(array: np.ndarray | None, dtype: type = np.float64) -> int | None:
    """The data address of ``array`` for the library (None: NULL); ValueError unless it is
    C-contiguous of ``dtype`` (a silent copy would lose what the library writes)."""
    if array is None:
        return None
    if array.dtype != dtype or not array.flags.c_contiguous:
        raise ValueError(f"the compiled loop needs C-contiguous {np.dtype(dtype)} arrays, got {array.dtype} "
                         f"(contiguous: {array.flags.c_contiguous})")
    return int(array.ctypes.data)


class Stopped(BaseException):
    """A stop signal (``stop_on_signals``) ended a compiled run between two control steps: the
    process is stopping. A BaseException, as KeyboardInterrupt, so that no boundary that turns
    failures into flags (EpisodeMachine.handle) catches it."""


def run(args: SegmentArgs) -> None:
    """Run one segment in C (episodic_run; the GIL is released meanwhile); mujoco.FatalError
    when MuJoCo met an error (the MjData is left where it stopped), Stopped when a stop signal
    came (``stop_on_signals``)."""
    error = ctypes.create_string_buffer(ERROR_SIZE)
    args.error = ctypes.addressof(error)
    code = library().episodic_run(ctypes.byref(args))
    if code == 2:
        raise Stopped(error.value.decode(errors="replace"))
    if code:
        raise mujoco.FatalError(error.value.decode(errors="replace"))


def stop_on_signals(signals: Iterable[int]) -> bool:
    """Make each of ``signals`` also stop compiled runs from now on: a run in progress ends before
    its next control step (a control period of simulation, however long the run) and raises
    Stopped, and so does every later one; the handler the signal had (installed first, e.g. with
    signal.signal) runs after. Undone for a signal by installing a handler for it again, and for
    the runs by ``clear_stop``. False, doing nothing, when the library was not built (runs then
    step in Python, and a signal's Python handler runs between steps)."""
    if not PATH.is_file():
        return False
    lib = library()
    for sig in signals:
        if lib.episodic_stop_on(int(sig)) != 0:
            raise ValueError(f"signal {int(sig)} cannot be caught, so it cannot stop the compiled loop")
    return True


def clear_stop() -> None:
    """Forget a stop signal received: compiled runs run through again."""
    if PATH.is_file():
        library().episodic_stop_clear()


def doubles_layout(lib: ctypes.CDLL, struct: str) -> tuple[dict[str, Field], int]:
    """The fields by name of C struct ``struct``, a struct of doubles only (a law's parameters,
    the sensing's), and its size in values, from its table in ``lib``; NativeError when its
    fields are not doubles that fill it without a gap (a field the table leaves out)."""
    table, size = fields(lib, struct)
    value = ctypes.sizeof(ctypes.c_double)
    covered = sorted((f.offset, f.offset + f.size) for f in table)
    ends = [0] + [end for _, end in covered]
    if any(f.size % value for f in table) or [start for start, _ in covered] != ends[:-1] or ends[-1] != size:
        raise NativeError(f"{struct} must be a struct of doubles that its table (EPISODIC_FIELD, in C) lists all "
                          f"of: the fields {table} do not fill its {size} bytes; list every field, then {REBUILD}")
    return {f.name: f for f in table}, size // value


@functools.cache
def layout(struct: str) -> tuple[dict[str, Field], int]:
    """:func:`doubles_layout` of ``struct`` in the library, worked out once."""
    return doubles_layout(library(), struct)


def pack(struct: str, values: Mapping[str, ArrayLike], lib: ctypes.CDLL | None = None) -> np.ndarray:
    """A float64 array laid out as C struct of doubles ``struct`` (:func:`layout`; of ``lib``, a
    law library, when given), each field set from ``values`` by name: every field, an array field
    at most its size (0 past the values given). NativeError on a missing or unknown name,
    ValueError on too many values."""
    table, size = layout(struct) if lib is None else doubles_layout(lib, struct)
    if set(values) != set(table):
        raise NativeError(f"{struct} (in C) has the fields {sorted(table)}; got {sorted(values)}")
    out = np.zeros(size)
    value = ctypes.sizeof(ctypes.c_double)
    for key, given in values.items():
        numbers, room = np.ravel(np.asarray(given, dtype=np.float64)), table[key].size // value
        if numbers.size > room:
            raise ValueError(f"{struct}'s field {key} holds {room} values; got {numbers.size}")
        start = table[key].offset // value
        out[start: start + numbers.size] = numbers
    return out


@functools.cache
def law_library(path: str) -> ctypes.CDLL:
    """The shared library at ``path`` holding a task package's feedback laws in C (built by the
    package against episodic.h, :func:`include_dir`, and linked to the installed MuJoCo), loaded
    once; NativeError when it cannot be loaded."""
    try:
        return ctypes.CDLL(path)  # needs libmujoco.so.<version>, loaded by `import mujoco`
    except OSError as exc:
        raise NativeError(f"the feedback laws at {path} cannot be loaded with MuJoCo {mujoco.__version__} "
                          f"({exc}); reinstall the package that built them, against this MuJoCo") from None


def include_dir() -> Path:
    """The folder holding episodic.h, which a feedback law in C outside episodic includes (a
    task package's build adds it and MuJoCo's include folder to its include path); NativeError
    when this install has no header."""
    header = Path(__file__).parent / "episodic.h"
    if not header.is_file():
        raise NativeError(f"this install of episodic has no {header.name}; install episodic from its source "
                          f"(pip install -e . in a checkout) to build feedback laws against it")
    return header.parent


class CompiledLaw:
    """A task's feedback law in C: the function ``episodic_law_<name>`` of episodic's library
    (``tasks/<name>.c``) or, with ``path``, of a task package's shared library (built the same way
    against episodic.h: EPISODIC_LAW_PARAM declares its parameters), bound to a model and to its
    parameters. Either runs in the compiled loop, without the interpreter lock.

    Called with an MjData of ``model`` whose position and velocity stages are current (after
    mj_step1 or mj_forward), it returns the offsets (n_dofs,) rad of one control step, the form
    ``Controller.tick`` calls; the simulation runs a whole blocking segment under it in C.
    ``param``: the law's parameters by the names of its C struct (:func:`pack`; ``param``
    afterwards: the float64 array the law reads, laid out as that struct); ``memory``: what it
    keeps from one control step to the next (changed in place; None: nothing), a float64 array
    laid out as its C source documents."""

    def __init__(self, model: mujoco.MjModel, name: str, n_dofs: int, param: Mapping[str, ArrayLike],
                 memory: np.ndarray | None = None, path: str | Path | None = None):
        self.model, self.name, self.n_dofs = model, name, n_dofs
        lib = library() if path is None else law_library(str(path))
        if not all(hasattr(lib, f"episodic_law_{name}{part}") for part in ("", "_param_fields", "_param_size")):
            where, fix = (("episodic's compiled part", f"tasks/{name}.c); {REBUILD}") if path is None else
                          (str(path), "its C source); rebuild it"))
            raise NativeError(f"{where} has no law '{name}' with a parameter table (episodic_law_{name} and "
                              f"EPISODIC_LAW_PARAM in {fix}")
        self.param = pack(f"episodic_law_{name}_param", param, None if path is None else lib)
        self.memory = memory
        address(memory)  # ValueError now, rather than at the first step, unless float64 and contiguous
        self.function = ctypes.cast(getattr(lib, f"episodic_law_{name}"), ctypes.c_void_p).value

    def __call__(self, data: mujoco.MjData) -> np.ndarray:
        offset = np.zeros(self.n_dofs)
        error = ctypes.create_string_buffer(ERROR_SIZE)
        if library().episodic_feedback(self.function, self.model._address, data._address, self.n_dofs,
                                       self.param.ctypes.data, address(self.memory), offset.ctypes.data, error):
            raise mujoco.FatalError(error.value.decode(errors="replace"))
        return offset
