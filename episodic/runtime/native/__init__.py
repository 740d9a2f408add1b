"""episodic's compiled part: the blocking control loop (``control.c``) and the tasks' feedback
laws (``tasks/<name>.c``) in C, one shared library (``_library``) that installing episodic
builds against the installed MuJoCo (setup.py) and that is called here through ctypes.

The library reads MuJoCo's structs, so it only runs with the MuJoCo it was compiled for:
:func:`library` refuses any other with a :class:`NativeError` that says how to rebuild it. An
error MuJoCo meets inside the library (mju_error, e.g. its arena overflowing) ends the call with
``mujoco.FatalError``, as in MuJoCo's own Python functions, not the process. The types below
mirror ``episodic.h``; change both together.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util

import mujoco
import numpy as np

ERROR_SIZE = 1024  # EPISODIC_ERROR_SIZE: room for MuJoCo's error text
REBUILD = ("reinstall episodic so that it is compiled against the installed MuJoCo "
           "(in a checkout: pip install -e .; otherwise: pip install --force-reinstall --no-deps episodic)")


class NativeError(RuntimeError):
    """episodic's compiled part is missing, or was built for another MuJoCo; the message says
    how to rebuild it."""


class SegmentArgs(ctypes.Structure):
    """episodic_segment: the arguments of one compiled run (see episodic.h for each field)."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("model", "data", "dynamics", "dynamics_data")] \
        + [(name, ctypes.c_int) for name in ("n", "n_dofs", "substeps", "feedforward", "state_spec")] \
        + [(name, ctypes.c_void_p) for name in ("qpos_adr", "dof_adr", "actuator", "lower", "upper", "kp", "kd",
                                                "ki", "passive")] \
        + [("dt", ctypes.c_double), ("ctrl_bound", ctypes.c_double)] \
        + [(name, ctypes.c_void_p) for name in ("q_d", "qd_d", "qdd_d", "reference", "u_ff", "integral", "law",
                                                "law_param", "law_memory", "states", "sensordata", "ctrl", "error")]


def _version(number: int) -> str:
    """MuJoCo's version number (mj_version, mjVERSION_HEADER: 4000000) as text (4.0.0)."""
    return f"{number // 1000000}.{number // 1000 % 1000}.{number % 1000}"


@functools.cache
def library() -> ctypes.CDLL:
    """The compiled library (``_library`` beside this module), loaded once: see :func:`load`."""
    spec = importlib.util.find_spec("episodic.runtime.native._library")
    if spec is None or spec.origin is None:
        raise NativeError(f"episodic's compiled part (episodic/runtime/native/_library) is missing; {REBUILD}")
    return load(spec.origin)


def load(path: str) -> ctypes.CDLL:
    """The library at ``path``; NativeError when it cannot be loaded or was built for a MuJoCo
    other than the one imported."""
    try:
        lib = ctypes.CDLL(path)  # needs libmujoco.so.<version>, loaded by `import mujoco`
    except OSError as exc:
        raise NativeError(f"episodic's compiled part cannot be loaded with MuJoCo {mujoco.__version__} "
                          f"({exc}); {REBUILD}") from None
    built = lib.episodic_mujoco_version()
    if built != mujoco.mj_version():
        raise NativeError(f"episodic's compiled part was built for MuJoCo {_version(built)}, but MuJoCo "
                          f"{_version(mujoco.mj_version())} is installed; {REBUILD}")
    lib.episodic_run.argtypes = [ctypes.POINTER(SegmentArgs)]
    lib.episodic_feedback.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] + [ctypes.c_void_p] * 4
    lib.episodic_sense.argtypes = [ctypes.c_void_p] * 4
    return lib


def address(array: np.ndarray | None, dtype: type = np.float64) -> int | None:
    """The data address of ``array`` for the library (None: NULL); ValueError unless it is
    C-contiguous of ``dtype`` (a silent copy would lose what the library writes)."""
    if array is None:
        return None
    if array.dtype != dtype or not array.flags.c_contiguous:
        raise ValueError(f"the compiled loop needs C-contiguous {np.dtype(dtype)} arrays, got {array.dtype} "
                         f"(contiguous: {array.flags.c_contiguous})")
    return array.ctypes.data


def run(args: SegmentArgs) -> None:
    """Run one segment in C (episodic_run; the GIL is released meanwhile); mujoco.FatalError
    when MuJoCo met an error (the MjData is left where it stopped)."""
    error = ctypes.create_string_buffer(ERROR_SIZE)
    args.error = ctypes.addressof(error)
    if library().episodic_run(ctypes.byref(args)):
        raise mujoco.FatalError(error.value.decode(errors="replace"))


class CompiledLaw:
    """A task's feedback law compiled into the library (``tasks/<name>.c``: the C function
    ``episodic_law_<name>``), bound to a model and to its parameters.

    Called with an MjData of ``model`` whose position and velocity stages are current (after
    mj_step1 or mj_forward), it returns the offsets (n_dofs,) rad of one control step, the form
    ``Controller.tick`` calls; the simulation runs a whole blocking segment under it in C.
    ``param``: the law's parameters, ``memory``: what it keeps from one control step to the next
    (changed in place; None: nothing), float64 arrays laid out as its C source documents."""

    def __init__(self, model: mujoco.MjModel, name: str, n_dofs: int, param: np.ndarray,
                 memory: np.ndarray | None = None):
        self.model, self.name, self.n_dofs = model, name, n_dofs
        self.param = np.ascontiguousarray(param, dtype=np.float64)
        self.memory = memory
        address(memory)  # ValueError now, rather than at the first step, unless float64 and contiguous
        try:
            self.function = ctypes.cast(getattr(library(), f"episodic_law_{name}"), ctypes.c_void_p).value
        except AttributeError:
            raise NativeError(f"episodic's compiled part has no law '{name}' (episodic_law_{name} in "
                              f"tasks/{name}.c); {REBUILD}") from None

    def __call__(self, data: mujoco.MjData) -> np.ndarray:
        offset = np.zeros(self.n_dofs)
        error = ctypes.create_string_buffer(ERROR_SIZE)
        if library().episodic_feedback(self.function, self.model._address, data._address, self.n_dofs,
                                       self.param.ctypes.data, address(self.memory), offset.ctypes.data, error):
            raise mujoco.FatalError(error.value.decode(errors="replace"))
        return offset
