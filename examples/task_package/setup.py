"""Builds strike's feedback law in C (src/episodic_strike/strike.c) into a plain shared library,
episodic_strike/_strike_law.so, loaded by episodic through ctypes (episodic.native.CompiledLaw with
its path), not imported: against episodic.h (episodic.native.include_dir) and the installed
MuJoCo's headers, linked to its libmujoco.so.<version>. Everything else is in pyproject.toml."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

from episodic.native import include_dir

MUJOCO = Path(importlib.util.find_spec("mujoco").submodule_search_locations[0])
NAME = "episodic_strike._strike_law"


class PlainLibrary(build_ext):
    """build_ext for a plain shared library: named _strike_law.so, exporting only its own symbols."""

    def get_ext_filename(self, fullname: str) -> str:
        return str(Path(*fullname.split("."))) + ".so"

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return ext.export_symbols  # no PyInit_<name>: nothing imports it


setup(cmdclass={"build_ext": PlainLibrary}, ext_modules=[Extension(
    NAME,
    sources=["src/episodic_strike/strike.c"],
    include_dirs=[str(include_dir()), str(MUJOCO / "include")],
    extra_objects=[str(next(MUJOCO.glob("libmujoco.so.*")))],
    extra_compile_args=["-std=c11", "-O2", "-ffp-contract=off"],  # rounding as numpy's (no fused multiply-add)
)])
