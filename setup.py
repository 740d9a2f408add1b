"""Builds episodic's compiled part (episodic/native): the blocking control loop and the tasks'
feedback laws (tasks/*.c), one plain shared library (episodic/native/_library.so, loaded by
ctypes, not imported: no CPython tag) linked against the MuJoCo installed for the build (pyproject.toml
pins the same version for building and running; episodic.native refuses any other at run time).

The library is optional: without a working C compiler the build says so and the install goes on
without it; episodic then runs its Python loop (bit-identical, slower) and says so once at run time.
Everything else about the package is in pyproject.toml."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# the mujoco package's folder, without importing it: its headers and libmujoco.so.<version>
MUJOCO = Path(importlib.util.find_spec("mujoco").submodule_search_locations[0])
LIBRARY = sorted(MUJOCO.glob("libmujoco.so.*"))
if len(LIBRARY) != 1:
    raise RuntimeError(f"expected one libmujoco.so.<version> in {MUJOCO}, found {[p.name for p in LIBRARY]}; "
                       f"reinstall mujoco-core (a Linux wheel ships it beside its Python bindings)")
NAME = "episodic.native._library"


class BuildLibrary(build_ext):
    """build_ext for a plain shared library: named _library.so, exporting only its own symbols."""

    def get_ext_filename(self, fullname: str) -> str:
        return str(Path(*fullname.split("."))) + ".so"

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return ext.export_symbols  # no PyInit_<name>: nothing imports it

    def run(self) -> None:
        super().run()
        if not Path(self.get_ext_fullpath(NAME)).exists():
            print("episodic: no C compiler worked, so the compiled control loop was not built; episodic will "
                  "run its Python loop (same results, slower). Install gcc and reinstall episodic to build it.")


setup(cmdclass={"build_ext": BuildLibrary}, ext_modules=[Extension(
    NAME,
    sources=["episodic/native/control.c", *sorted(str(p) for p in Path("tasks").glob("*.c"))],
    depends=["episodic/native/episodic.h"],
    include_dirs=["episodic/native", str(MUJOCO / "include")],
    # the library by its file: the dependency is recorded under its soname (libmujoco.so.<version>),
    # which the process has loaded once mujoco is imported (episodic.native imports it first)
    extra_objects=[str(LIBRARY[0])],
    libraries=["m"],
    # no fused multiply-add: the loop must round as numpy does (bit-identical to the Python loop)
    extra_compile_args=["-std=c11", "-O2", "-ffp-contract=off"],
    # without a compiler the install goes on without the library (see the module docstring)
    optional=True,
)])
