"""`roboswe doctor`: check the whole machine and say what to fix.

One row per check (check, status, detail, fix). A *required* check that fails makes the
exit status 1; optional ones (Docker when bwrap works, Chromium for the viewer tests,
provider keys, RoboCasa/GR1 assets, Ray) are reported as ``warn`` or ``absent``. Key
values are never printed, only whether their variables are set. `--json` for scripts;
`--config RUN.toml` adds the model profile that run's [provider] will use, as its preflight prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

import roboswe.providers as _providers
from roboswe.sim.families import HostStatus
from roboswe.terminal import echo, plain, terminal_console

Status = HostStatus  # a family adds rows of the same statuses (sim/families.py)
RENDER_TIMEOUT_S = 90.0  # a loaded 2-core machine needs seconds just to import mujoco and make an EGL context
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromedriver")  # what the viewer tests drive
KEY_VARIABLES = {k: _providers.provider_entry(k).key_env for k in _providers.hosted_kinds()}  # from the registry
ASSET_VARIABLES = {"GR1 assets": "ROBOCASA_GR1_ASSETS"}  # sim/gr1/native.py ENV_VAR; RoboCasa's have their own lookup (sim/robocasa/commands.py)


class Check(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the doctor's table."""

    check: str
    status: Status
    detail: str
    fix: str = ""
    required: bool = False


def add_arguments_doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON (one object with a `checks` list)")
    parser.add_argument("--no-render", action="store_true", help="skip the MuJoCo render check (it starts a subprocess)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="sandbox image cache to check (as `roboswe images build --cache-dir`; default: where it builds)")
    parser.add_argument("--config", type=Path, default=None,
                        help="a run config: also show the model profile its [provider] will use (configs/models.toml)")


# ---- the checks ---------------------------------------------------------------------------------


def _checkout() -> Path | None:
    """The source tree of an editable install (its PEP 610 direct_url.json), else None (a wheel, or not installed)."""
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        direct = json.loads(metadata.distribution("roboswe").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return None
    url = urlparse(direct.get("url", ""))
    editable = isinstance(direct.get("dir_info"), dict) and direct["dir_info"].get("editable")
    return Path(unquote(url.path)) if editable and url.scheme == "file" else None


def _pins() -> tuple[str, list[str]]:
    """requires-python and the dependency pins: an editable install's pyproject.toml (it may be newer than
    the install), else the installed metadata."""
    import tomllib
    from importlib import metadata

    checkout = _checkout()
    pyproject = checkout / "pyproject.toml" if checkout else None
    if pyproject and pyproject.exists():
        project = tomllib.loads(pyproject.read_text())["project"]
        return project.get("requires-python", ""), list(project.get("dependencies", []))
    meta = metadata.metadata("roboswe")
    deps = [r for r in (metadata.requires("roboswe") or []) if "extra ==" not in r]
    return meta.get("Requires-Python", ""), deps


def check_python() -> Check:
    from packaging.specifiers import SpecifierSet

    wanted, _ = _pins()
    have = ".".join(map(str, sys.version_info[:3]))
    if wanted and have not in SpecifierSet(wanted):
        return Check(check="python", status="fail", detail=f"{have} at {sys.executable}; pyproject wants {wanted}",
                     fix="run ./setup.sh (it makes .venv with Python 3.11 or 3.12)", required=True)
    return Check(check="python", status="ok", detail=f"{have} ({wanted})", required=True)


def check_packages() -> Check:
    from importlib import metadata

    from packaging.requirements import Requirement

    _, deps = _pins()
    bad, shown = [], []
    for line in deps:
        req = Requirement(line)
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            bad.append(f"{req.name} missing (wants {req.specifier or 'any'})")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            bad.append(f"{req.name} {version} (wants {req.specifier})")
        if any(name in req.name for name in ("mujoco", "robosuite", "robocasa", "numpy")):
            shown.append(f"{req.name} {version}")
    if bad:
        return Check(check="packages", status="fail", detail="; ".join(bad),
                     fix=".venv/bin/pip install -e '.[test]' (or re-run ./setup.sh)", required=True)
    return Check(check="packages", status="ok", detail=f"{len(deps)} pins satisfied ({', '.join(shown)})", required=True)


_RENDER_SCRIPT = r"""
import ctypes, json, os
import mujoco
model = mujoco.MjModel.from_xml_string(
    "<mujoco><worldbody><light pos='0 0 1'/><geom type='sphere' size='.1'/></worldbody></mujoco>")
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
renderer = mujoco.Renderer(model, 16, 16)
renderer.update_scene(data)
pixels = renderer.render()
gl = {}
for name in ("libOpenGL.so.0", "libGL.so.1"):
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        continue
    lib.glGetString.restype = ctypes.c_char_p
    gl = {"vendor": (lib.glGetString(0x1F00) or b"?").decode(), "renderer": (lib.glGetString(0x1F01) or b"?").decode()}
    break
print(json.dumps({"shape": list(pixels.shape), "lit": int(pixels.max()), "mujoco": mujoco.__version__, **gl}))
"""


def check_render(timeout_s: float = RENDER_TIMEOUT_S) -> Check:
    """Render one 16x16 frame with MUJOCO_GL=egl in a subprocess (a broken driver can hang or crash it)."""
    env = {**os.environ, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}
    fix = "apt-get install libegl1 libgl1-mesa-dri (Mesa EGL; setup.sh does), or the NVIDIA driver's EGL on a GPU host"
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", _RENDER_SCRIPT], capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return Check(check="mujoco render", status="fail", detail=f"no frame within {timeout_s:.0f} s (EGL hangs?)",
                     fix=fix, required=True)
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return Check(check="mujoco render", status="fail", detail=f"MUJOCO_GL=egl failed (exit {proc.returncode}): {tail}",
                     fix=fix, required=True)
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    name = info.get("renderer", "?")
    device = "CPU (software rendering: slow cameras)" if "llvmpipe" in name.lower() or "softpipe" in name.lower() \
        else f"GPU ({info.get('vendor', '?')})"
    return Check(check="mujoco render", status="ok", required=True,
                 detail=f"EGL {device}: {name}; mujoco {info.get('mujoco')}, 16x16 frame in {seconds:.1f} s")


def check_bwrap(environ: Mapping[str, str]) -> Check:
    path = shutil.which("bwrap", path=environ.get("PATH"))
    if path is None:
        return Check(check="bubblewrap", status="warn", detail="bwrap is not on PATH",
                     fix="apt-get install bubblewrap (needed where Docker is absent)")
    userns = _read("/proc/sys/user/max_user_namespaces")
    clone = _read("/proc/sys/kernel/unprivileged_userns_clone")
    ns = f"user namespaces: max {userns or '?'}" + (f", unprivileged clone {clone}" if clone is not None else "")
    try:
        proc = subprocess.run([path, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--die-with-parent", "/bin/true"],
                              capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return Check(check="bubblewrap", status="warn", detail=f"{path}: a trivial sandbox did not finish in 20 s; {ns}",
                     fix="check the kernel's namespace settings")
    if proc.returncode != 0:
        return Check(check="bubblewrap", status="warn", detail=f"{path}: a trivial sandbox failed: {proc.stderr.strip()[:200]}; {ns}",
                     fix="enable user namespaces (sysctl user.max_user_namespaces=15000; "
                         "kernel.unprivileged_userns_clone=1 on Debian), or run as root, or use Docker")
    return Check(check="bubblewrap", status="ok", detail=f"{path} runs a sandbox; {ns}")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def check_docker() -> tuple[Check, object | None]:
    from roboswe.sandbox.images import docker_client

    client = docker_client()
    if client is None:
        return Check(check="docker", status="warn", detail="no Docker daemon answers",
                     fix="start dockerd (setup.sh does, as root), or rely on bubblewrap"), None
    try:
        version = client.version().get("Version", "?")
    except Exception:  # noqa: BLE001 - the ping answered; the version is only detail
        version = "?"
    return Check(check="docker", status="ok", detail=f"daemon {version} answers"), client


def check_image(client: object | None, image_cache: Path | None = None) -> tuple[Check, object | None]:
    from roboswe.evaluation.preflight import image_problems

    image, problems = image_problems(image_cache)
    if problems:
        p = problems[0]
        return Check(check="sandbox image", status="fail", detail=f"{p.what} ({p.where})", fix=p.fix, required=True), image
    tag = "not imported into Docker"
    if image.docker_tag:
        tag = image.docker_tag
        if client is not None:
            try:
                client.images.get(image.docker_tag)
            except Exception:  # noqa: BLE001 - the daemon forgot it (pruned, restarted with another data root)
                tag = f"{image.docker_tag} (missing from the daemon: run `roboswe images build`)"
    built = time.strftime("%Y-%m-%d %H:%M", time.gmtime(image.built_at))
    return Check(check="sandbox image", status="ok", required=True,
                 detail=f"sha256 {image.short}, built {built} UTC, its robot files current; docker: {tag}"), image


def check_backend(image: object | None) -> Check:
    from roboswe.evaluation.preflight import backend_problems

    chosen, problems = backend_problems(None, image, "the default choice")
    if problems:
        return Check(check="sandbox backend", status="fail", detail=problems[0].what, fix=problems[0].fix, required=True)
    return Check(check="sandbox backend", status="ok", detail=f"{chosen} (the default when -e is not given)", required=True)


def check_chromium() -> Check:
    missing = [p for p in CHROMIUM if not Path(p).exists()]
    if missing:
        return Check(check="chromium", status="absent", detail=f"missing {', '.join(missing)} (only the viewer tests need it)",
                     fix="apt-get install chromium chromium-driver")
    try:
        version = subprocess.run([CHROMIUM[0], "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = "version unknown"
    return Check(check="chromium", status="ok", detail=f"{version or 'version unknown'}; chromedriver present")


def check_keys(environ: Mapping[str, str]) -> Check:
    # Only whether each variable is set: a key's value (or even its length) is never printed.
    have = [f"{kind} ({var})" for kind, var in KEY_VARIABLES.items() if environ.get(var, "").strip()]
    lack = [var for var in KEY_VARIABLES.values() if not environ.get(var, "").strip()]
    if not have:
        return Check(check="provider keys", status="absent", detail=f"none set ({', '.join(lack)}); the demo needs none",
                     fix="export the variable your run config's api_key_env names")
    return Check(check="provider keys", status="ok",
                 detail=f"set: {', '.join(have)}" + (f"; not set: {', '.join(lack)}" if lack else ""))


def check_assets(label: str, variable: str, environ: Mapping[str, str]) -> Check:
    value = environ.get(variable, "")
    if not value:
        return Check(check=label, status="absent", detail=f"not configured ({variable} unset); robosuite tasks need none",
                     fix=f"export {variable}=DIR after downloading them, to run those tasks")
    if not Path(value).is_dir():
        return Check(check=label, status="warn", detail=f"{variable}={value} is not a directory",
                     fix=f"point {variable} at the downloaded assets")
    return Check(check=label, status="ok", detail=f"{variable}={value}")


def family_checks(environ: Mapping[str, str]) -> list[Check]:
    """The rows each simulator family adds (RoboCasa's asset root): optional, never required."""
    from roboswe.sim.families import host_checks

    return [Check(**msgspec.structs.asdict(c)) for c in host_checks(environ)]


def check_ray() -> Check:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return Check(check="ray", status="absent", detail="not installed (optional: only multi-machine fleets need it)",
                     fix="pip install 'ray[default]' to place workers across machines")
    from importlib import metadata

    return Check(check="ray", status="ok", detail=f"ray {metadata.version('ray')} importable")


def check_model_profile(config_path: Path) -> Check:
    """The model profile a run config's hosted [provider] will use (`roboswe.providers.profile_lines`, as the
    run's preflight prints it); ``warn`` for a model the table does not know (the conservative default)."""
    from roboswe.config import ConfigError, load_config

    try:
        provider = load_config(config_path).provider
    except ConfigError as e:
        return Check(check="model profile", status="fail", detail=str(e), fix="fix the run config", required=True)
    if provider is None or provider.kind not in _providers.hosted_kinds():
        return Check(check="model profile", status="absent", detail=f"{config_path}: no hosted [provider] section")
    lines = _providers.profile_lines(provider)
    unknown = not _providers.model_profile(provider).known
    return Check(check="model profile", status="warn" if unknown else "ok", detail="; ".join(s.strip() for s in lines).removeprefix("model profile: "),
                 fix=f"add a line for {provider.model!r} to configs/models.toml with its documented limits" if unknown else "")


def run_checks(*, environ: Mapping[str, str] | None = None, render: bool = True, image_cache: Path | None = None,
               progress: Callable[[str], None] = lambda name: None, config: Path | None = None) -> list[Check]:
    """Every check, in table order."""
    environ = os.environ if environ is None else environ
    checks = []
    for name, run in (("python", check_python), ("packages", check_packages)):
        progress(name)
        checks.append(run())
    if render:
        progress("mujoco render")
        checks.append(check_render())
    progress("sandbox")
    checks.append(check_bwrap(environ))
    docker, client = check_docker()
    checks.append(docker)
    image_check, image = check_image(client, image_cache)
    checks.append(image_check)
    checks.append(check_backend(image))
    progress("the rest")
    checks.append(check_chromium())
    checks.append(check_keys(environ))
    checks += family_checks(environ)
    checks += [check_assets(label, var, environ) for label, var in ASSET_VARIABLES.items()]
    checks.append(check_ray())
    if config is not None:
        checks.append(check_model_profile(config))
    return checks


# ---- the command ----------------------------------------------------------------------------------

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "absent": "dim"}


def print_checks(checks: list[Check], console: Any) -> None:
    """One line per check (status, name, detail) and its fix on the next: no table, so a path is never broken
    mid-word at any width; the terminal wraps a long line whole."""
    from rich.text import Text

    names = max(len(c.check) for c in checks)
    statuses = [c.status + (" (required)" if c.required and c.status == "fail" else "") for c in checks]
    shown = max(map(len, statuses))
    console.print("roboswe doctor", style="bold")
    for c, status in zip(checks, statuses):
        # Text, not markup: details carry brackets (pip extras, paths) that rich would read as styles.
        console.print(Text.assemble((f"{status:<{shown}}", _STYLE[c.status]), f"  {c.check:<{names}}  ", plain(c.detail)),
                      soft_wrap=True)
        if c.status != "ok" and c.fix:
            console.print(plain(f"{'':<{shown}}  {'':<{names}}  fix: {c.fix}"), soft_wrap=True)


def run_doctor(args: argparse.Namespace) -> int:
    tty = sys.stderr.isatty() and not args.json
    checks = run_checks(render=not args.no_render, image_cache=args.cache_dir, config=getattr(args, "config", None),
                        progress=(lambda name: echo(f"checking {name}…", file=sys.stderr, flush=True)) if tty else (lambda n: None))
    failed = [c for c in checks if c.required and c.status == "fail"]
    if args.json:
        print(json.dumps({"ok": not failed, "checks": msgspec.to_builtins(checks)}, indent=2))
        return 1 if failed else 0
    print_checks(checks, terminal_console())
    if failed:
        echo(f"{len(failed)} required check(s) failed: {', '.join(c.check for c in failed)}; each says how to fix it.")
    else:
        echo("all required checks pass.")
    return 1 if failed else 0
