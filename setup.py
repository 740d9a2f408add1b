"""Builds episodic's compiled part (episodic/runtime/native): the blocking control loop and the tasks'
feedback laws (tasks/*.c), one shared library linked against the MuJoCo installed for the build
(pyproject.toml pins the same version for building and running; episodic.runtime.native refuses any
other at run time). Everything else about the package is in pyproject.toml."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, setup

# the mujoco package's folder, without importing it: its headers and libmujoco.so.<version>
MUJOCO = Path(importlib.util.find_spec("mujoco").submodule_search_locations[0])
LIBRARY = sorted(MUJOCO.glob("libmujoco.so.*"))
if len(LIBRARY) != 1:
    raise RuntimeError(f"expected one libmujoco.so.<version> in {MUJOCO}, found {[p.name for p in LIBRARY]}; "
                       f"reinstall mujoco-core (a Linux wheel ships it beside its Python bindings)")

setup(ext_modules=[Extension(
    "episodic.runtime.native._library",
    sources=["episodic/runtime/native/control.c", *sorted(str(p) for p in Path("tasks").glob("*.c"))],
    depends=["episodic/runtime/native/episodic.h"],
    include_dirs=["episodic/runtime/native", str(MUJOCO / "include")],
    # the library by its file: the dependency is recorded under its soname (libmujoco.so.<version>),
    # which the process has loaded once mujoco is imported (episodic.runtime.native imports it first)
    extra_objects=[str(LIBRARY[0])],
    libraries=["m"],
    # no fused multiply-add: the loop must round as numpy does (bit-identical to the Python loop)
    extra_compile_args=["-std=c11", "-O2", "-ffp-contract=off"],
)])
