"""The package as a user gets it: a wheel built from this tree, installed into a fresh virtualenv.

An editable install (setup.sh's) reads everything from the checkout, so it hides a package missing
from the derived package list, a data file missing from package-data and a path computed from the
repository. Here the wheel is installed with ``--no-deps`` into a new venv whose dependencies come
from the running environment's site-packages (a .pth line, so that environment's editable finder
for the checkout is never loaded), and the CLI runs from an unrelated directory.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import require_in_ci

ROOT = Path(__file__).resolve().parents[1]
TASK = "lift-panda"  # the robosuite pilot's first task: it needs no downloaded assets

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    elsewhere: Path  # an empty working directory outside the checkout
    env: dict[str, str]

    def roboswe(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.venv / "bin" / "roboswe"), *args], cwd=self.elsewhere, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.venv / "bin" / "python"), "-c", code], cwd=self.elsewhere, env=self.env,
                              capture_output=True, text=True, timeout=120)


def _tree_files() -> list[str]:
    """What a clean clone of this tree holds: tracked and new files, not ignored ones (.venv, build/, caches)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know which files a clean clone holds")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True).stdout.decode()
    return sorted(rel for rel in set(listed.split("\0")) if rel and (ROOT / rel).is_file())


def _package_dir() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def _in_wheel(rel: str, package_dir: dict[str, str]) -> str | None:
    """Where a tree file lands in the wheel (its deepest mapped folder decides), or None outside every package."""
    for package, folder in sorted(package_dir.items(), key=lambda kv: -len(kv[1])):
        if rel.startswith(folder + "/"):
            return package.replace(".", "/") + rel[len(folder):]
    return None


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    try:
        import setuptools
    except ImportError:
        require_in_ci("setuptools is not installed here (pyproject's [test] extra brings it): pip install -e '.[test]'")
    if tuple(int(p) for p in setuptools.__version__.split(".")[:2]) < (70, 1):
        require_in_ci(f"setuptools {setuptools.__version__} cannot build wheels by itself (70.1 can): re-run ./setup.sh")
    tmp = tmp_path_factory.mktemp("install")
    # Built from a copy: the checkout's own build/ could hold files its tree no longer has, and
    # sessions sharing the checkout would race on it.
    source = tmp / "source"
    for rel in _tree_files():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, source / rel)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = subprocess.run([*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"the wheel did not build:\n{build.stdout[-3000:]}{build.stderr[-3000:]}"
    (wheel,) = (tmp / "dist").glob("roboswe-*.whl")

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    # The dependencies are this environment's; a plain path line (not site.addsitedir) adds them
    # without running their .pth files, so the editable install's finder never sees the checkout.
    deps = [p for p in site.getsitepackages() if Path(p).is_dir() and Path(p).resolve() != ROOT]
    (purelib / "roboswe-test-dependencies.pth").write_text("".join(f"{p}\n" for p in deps))
    install = subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index",
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, f"the wheel did not install:\n{install.stdout[-3000:]}{install.stderr[-3000:]}"

    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(PYTHONHASHSEED="0", NUMBA_CACHE_DIR=str(ROOT / ".cache" / "numba"))  # the cache other tests warm
    return Installed(wheel=wheel, venv=venv, elsewhere=elsewhere, env=env)


def test_every_file_of_the_packages_reaches_the_wheel(installed):
    package_dir = _package_dir()
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    expected = {}
    for rel in _tree_files():
        target = _in_wheel(rel, package_dir)
        if target:  # manuals (*.md) included: the L2 harness manual is copied into a workspace at run time
            expected[rel] = target
    missing = sorted(rel for rel, target in expected.items() if target not in names)
    assert not missing, (f"{len(missing)} file(s) of the mapped folders are not in the wheel: {missing[:20]}; "
                         "add the folder's suffix to [tool.setuptools.package-data] (or an __init__.py)")
    assert "roboswe/fleet/__init__.py" in names  # the package the hand-typed list forgot


def test_roboswe_imports_from_the_venv_not_the_checkout(installed):
    probe = installed.python(
        "import json, importlib\n"
        "import roboswe.evaluation.run, roboswe.configs, roboswe.sandbox.images as images\n"
        "names = ['roboswe', 'roboswe.fleet', 'roboswe.protocol', 'roboswe.sim', 'roboswe.agents.lift_demo', 'roboswe.cli']\n"
        "print(json.dumps({'modules': {n: importlib.import_module(n).__file__ for n in names},\n"
        "                  'configs': str(roboswe.configs.CONFIGS_DIR),\n"
        "                  'image files': [str(p) for p in images._project_files().values()]}))\n")
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout)
    paths = [*found["modules"].values(), found["configs"], *found["image files"]]
    outside = [p for p in paths if not Path(p).resolve().is_relative_to(installed.venv.resolve())]
    assert not outside, f"imported from outside the fresh venv {installed.venv}: {outside}"
    assert all(Path(p).is_file() for p in found["image files"])  # what `roboswe images build` copies in


def test_help_and_the_shipped_pilot_dataset_from_an_unrelated_directory(installed):
    help_ = installed.roboswe("--help")
    assert help_.returncode == 0 and "admit" in help_.stdout, help_.stderr[-3000:]
    tasks = installed.roboswe("tasks")  # the default dataset: the robosuite pilot, read from package data
    assert tasks.returncode == 0, tasks.stderr[-3000:]
    assert "robosuite-pilot" in tasks.stdout and TASK in tasks.stdout


def test_an_admission_from_the_installed_package(installed):
    """The shipped lift-panda manifest, admitted by the installed code in two fresh simulators."""
    root = installed.elsewhere / "one-task"
    (root / "datasets").mkdir(parents=True)
    (root / "tasks").mkdir()
    shipped = installed.python(f"import roboswe.configs as c; print(c.CONFIGS_DIR / 'tasks' / '{TASK}.toml')")
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    shutil.copyfile(shipped.stdout.strip(), root / "tasks" / f"{TASK}.toml")
    (root / "datasets" / "one.toml").write_text(f'id = "one"\ndescription = "{TASK} alone"\ntasks = ["{TASK}"]\n')
    out = installed.elsewhere / "admitted.json"
    # 10 hold steps, not 200: what is checked here is the install, not the task's step rate.
    admit = installed.roboswe("admit", str(root / "datasets" / "one.toml"), "--out", str(out), "--hold-steps", "10")
    assert admit.returncode == 0, f"{admit.stdout[-3000:]}{admit.stderr[-3000:]}"
    admitted = json.loads(out.read_text())
    assert [t["id"] for t in admitted["tasks"] if t["status"] == "admitted"] == [TASK], admitted
