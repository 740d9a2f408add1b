"""The package's shape: one installed top-level name, imports that run one way with no circle,
and a learner that works beside files named like the plug-in folders. A module's layer is where it
lives: the folder under episodic/ (LAYERS, bottom up; docs/architecture.md draws them)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "episodic"
# the folders of episodic/, bottom up: a module may import its own layer and the layers below it;
# the plug-in folders (bridge/, tasks/, robots/ at the top, installed as episodic.<name>) share a
# layer but never import each other, and the interface imports nothing else of episodic
LAYERS = (("interface",), ("native",), ("task", "logs"), ("runtime",), ("bridge", "tasks", "robots"), ("tools",),
          ("learning",), ("cli",))
PLUGINS = LAYERS[4]


def modules() -> dict[str, Path]:
    """Every module of the installed namespace (the plug-in folders through their links)."""
    out = {}
    paths = [Path(d, f) for d, _, files in os.walk(PACKAGE, followlinks=True) for f in files if f.endswith(".py")]
    for path in sorted(paths):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def folder(module: str) -> str:
    """The folder of episodic/ a module lives in ("" for the package's own two files)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else ""


def layer(module: str) -> int:
    """The module's layer: the index in LAYERS of its folder; the package's own files (its face
    and ``python -m episodic``) stand on top."""
    where = folder(module)
    return next((i for i, names in enumerate(LAYERS) if where in names), len(LAYERS))


def test_every_module_lives_in_a_layer_folder():
    loose = [m for m in modules() if folder(m) == "" and m not in ("episodic", "episodic.__main__")]
    assert not loose, f"place these modules in a layer folder of episodic/ (LAYERS): {loose}"
    unknown = sorted({folder(m) for m in modules()} - {""} - {n for names in LAYERS for n in names})
    assert not unknown, f"folders of episodic/ in no layer: add them to LAYERS and docs/architecture.md: {unknown}"


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The episodic modules ``module`` imports, at any depth of its code (lazy imports count)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        out |= {n for n in names if n in known and n != module}
    return out


def test_every_import_runs_downward_and_between_plugins_not_at_all():
    mods = modules()
    graph = {m: imports(m, p, set(mods)) for m, p in mods.items()}
    upward = [(m, i) for m, deps in graph.items() for i in deps
              if i != "episodic" and (layer(i) > layer(m)
                                      or (folder(m) in PLUGINS and folder(i) in PLUGINS and folder(i) != folder(m))
                                      or (folder(m) == "interface" and folder(i) != "interface"))]
    assert not upward, f"imports against the layer order (module -> import): {upward}"
    assert "episodic.interface.sender" in graph["episodic.bridge.client"]
    assert layer("episodic.runtime.machine") < layer("episodic.bridge.client") < layer("episodic.tools.batch")


def test_no_import_circle():
    mods = modules()
    graph = {m: imports(m, p, set(mods)) - {"episodic"} for m, p in mods.items()}
    for package in [m for m in graph if mods[m].name == "__init__.py"]:
        graph[package] = {d for d in graph[package] if not d.startswith(package + ".")}  # a package's own re-exports
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                pytest.fail(f"import circle: {' -> '.join(path[path.index(d):] + [d])}")
            if d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_no_module_imports_the_plugin_folders_by_their_bare_names():
    bare = [(str(p.relative_to(ROOT)), node.lineno)
            for p in list(modules().values()) + list((ROOT / "tests").glob("*.py"))
            + list((ROOT / "examples").glob("*.py")) + list((ROOT / "benchmarks").glob("*.py"))
            for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, (ast.Import, ast.ImportFrom))
            and any((a.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
                    in {"bridge", "tasks", "robots"} for a in node.names)]
    assert not bare, f"import episodic.bridge / episodic.tasks / episodic.robots instead: {bare}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # built with the dev install's setuptools and MuJoCo (the build-system's requirements, in the dev
    # extra): an isolated build would install them again (10 s instead of 3)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True)
    (path,) = out.glob("episodic-*.whl")
    return path


@pytest.mark.slow
def test_an_install_adds_exactly_one_top_level_name(wheel):
    with zipfile.ZipFile(wheel) as z:
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        files = [line.split(",")[0] for line in z.read(record).decode().splitlines() if line]
    assert {f.split("/")[0] for f in files} == {"episodic", record.split("/")[0]}
    for needed in ("episodic/bridge/client.py", "episodic/tasks/reach.py", "episodic/robots/wam/wam.xml",
                   "episodic/robots/wam/robot.toml", "episodic/task/__init__.py"):
        assert needed in files
    # the compiled part (setup.py): its library, a plain shared library (no CPython tag), not its C sources;
    # the header a task package's law in C is built against (episodic.native.include_dir())
    assert "episodic/native/_library.so" in files and "episodic/native/episodic.h" in files
    assert not [f for f in files if f.endswith(".c") or (f.endswith(".h") and f != "episodic/native/episodic.h")]


SHADOWS = {"tasks.py": "TASKS = 'not the runner\\'s'\n", "bridge.py": "Client = None\n",
           "robots.py": "raise ImportError('a user module named robots')\n"}
LEARNER = """
import subprocess, sys
from episodic.bridge import Client
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.interface.trajectory import min_jerk

with Runner(make_task("reach")) as runner:
    home = runner.robot.home
    runner.start_episode(1)
    print("in-process", runner.send_trajectory(min_jerk(home, home + 0.05, 0.5, 0.002).q).flag.name)
serve = subprocess.Popen([sys.executable, "-m", "episodic", "serve", "--channel", sys.argv[1]],
                         stdout=subprocess.PIPE, text=True)
try:
    assert "serving" in serve.stdout.readline()
    with Client(sys.argv[1], timeout=30) as client:
        client.start_episode(1)
        print("bridge", client.send_trajectory(min_jerk(home, home + 0.05, 0.5, 0.002).q).flag.name)
finally:
    serve.terminate()
    serve.wait(30)
"""


def _run(args: list[str], cwd: Path, env: dict | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_cli_and_learner_run_beside_modules_named_like_the_plugins(tmp_path):
    for name, text in SHADOWS.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "learner.py").write_text(textwrap.dedent(LEARNER))
    assert "ball_in_cup" in _run([sys.executable, "-m", "episodic", "tasks"], tmp_path)
    assert "wam" in _run([sys.executable, "-m", "episodic", "robots"], tmp_path)
    out = _run([sys.executable, "learner.py", f"shadow{os.getpid()}"], tmp_path)
    assert out.split() == ["in-process", "OK", "bridge", "OK"]


@pytest.mark.slow
def test_a_non_editable_install_runs_the_demo_from_an_empty_folder(wheel, tmp_path):
    target, empty = tmp_path / "site", tmp_path / "empty"
    empty.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    code = "import episodic, sys; print(episodic.__file__)"
    assert _run([sys.executable, "-c", code], empty, env).startswith(str(target))
    # the compiled part loads with the installed MuJoCo (built against the same version)
    code = "from episodic.native import library; print(library()._name)"
    assert _run([sys.executable, "-c", code], empty, env).startswith(str(target))
    out = _run([sys.executable, "-m", "episodic", "demo", "--quick", "--out", "demo.h5"], empty, env)
    assert "log written to demo.h5" in out and (empty / "demo.h5").is_file()
    assert (empty / "demo_demonstration.h5").is_file()
