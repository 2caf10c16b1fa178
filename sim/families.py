"""The simulator families: one folder each under sim/, each exporting one ``Family``; one registry.

A family is what a task manifest's ``upstream.package`` names (``robosuite``, ``robocasa``,
``gr1``, ``paint``, ``fake``): its folder ``sim/<name>/`` exports ``FAMILY = Family(...)``,
which says everything the coordinator's side needs of it (its manifest type, how to build its
backend, what it checks before a run, what admission pins and excludes, the protocol identity
of its series, its own interface's instructions). The coordinator, preflight, admission and
the CLI read these fields and never name a family, so adding a family is adding a folder
(ARCHITECTURE.md, "Adding a simulator family").

Lazy, as inspect_ai's registries are: importing roboswe.sim imports no family; ``family(name)``
imports only ``roboswe.sim.<name>``, whose ``__init__`` must stay light (no robosuite, MuJoCo or
RoboCasa: those are imported inside ``build`` and the other callables, when used).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

if TYPE_CHECKING:
    from roboswe.protocol.sim import TaskSpec

    from .backend import SimBackend
    from .manifest import TaskManifest

COMMON_INTERFACES = ("code", "actions")
"""What every family takes unless it says otherwise: exec'd scripts, and direct action chunks."""


class AssetProblem(msgspec.Struct, frozen=True, kw_only=True):
    """Why a family's tasks cannot load on this machine: where, what is wrong, how to fix it."""

    where: str
    what: str
    fix: str


HostStatus = Literal["ok", "warn", "fail", "absent"]


class HostCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One row a family adds to `roboswe doctor` (optional: a family's check never fails the doctor)."""

    check: str
    status: HostStatus
    detail: str
    fix: str = ""


class Command(msgspec.Struct, frozen=True, kw_only=True):
    """A `roboswe` subcommand a family offers (e.g. ``assets``): ``module`` has ``add_arguments_<name>(parser)``
    and ``run_<name>(args) -> int``, as roboswe/cli.py's own commands do; ``help`` is its one line."""

    name: str
    module: str
    help: str


class Prompt(msgspec.Struct, frozen=True, kw_only=True):
    """What the participant is told on a family's own interface (its system prompt and its trial-opening line).

    ``system(spec, trials=, keep=, ops=, trial_steps=, trial_seconds=, protocol=)`` returns the pinned
    instructions; the interface's operations and budgets are the coordinator's, the words the family's."""

    system: Callable[..., str]
    opening: str


class Family(msgspec.Struct, frozen=True, kw_only=True):
    """One simulator family behind the seam: everything outside sim/ needs of it, and nothing more.

    - ``name``: what manifests say in ``upstream.package``, the backend name and the folder name.
    - ``manifest``: its manifest Struct (TaskManifest or a subclass carrying the family's fields).
    - ``build(manifest, **kwargs)``: a fresh ``SimBackend`` (imports the simulator when called).
    - ``asset_problems(manifests)``: preflight's check that its tasks can load here (no simulator import).
    - ``pins``: the installed distributions whose versions admission records for it.
    - ``interfaces``: the participant interfaces it takes; one not in ``COMMON_INTERFACES`` is its own.
    - ``exclusion(manifest)``: why admission excludes a task before probing it (e.g. missing downloads), or None;
      ``exclusion_note`` is what `roboswe admit` says of the tasks so excluded ("N task(s) excluded because ...").
    - ``reviews(manifests, timeout)``: task id -> predicate review record, for a family that pins one.
    - ``identity(manifest, track, cap=, calls=, prefix=)``: a series' protocol identity where the family has its
      own contract (raises ValueError outside its limits); None: ``<name>/control-N/v2`` or
      ``<name>/decision-D-prefix-K/v1``.
    - ``prompt``: the participant-facing text of its own interface, where it has one.
    - ``import_simulator()``: imports the packages its builds load (the simulator settles its heap after it).
    - ``commands``: `roboswe` subcommands of its own (roboswe/cli.py registers them; imported when run).
    - ``host_checks(environ)``: rows it adds to `roboswe doctor` (its assets, say).
    - ``list_catalogue(name, admitted, status, candidates_only=)``: the lines `roboswe tasks NAME` prints when
      NAME is a catalogue of its own (None otherwise); ``status(manifest)`` is a manifest's admission status.
    """

    name: str
    manifest: type
    build: Callable[..., SimBackend]
    asset_problems: Callable[[list[TaskManifest]], list[AssetProblem]]
    pins: tuple[str, ...] = ()
    interfaces: tuple[str, ...] = COMMON_INTERFACES
    exclusion: Callable[[TaskManifest], str | None] | None = None
    exclusion_note: str = ""
    reviews: Callable[[list[TaskManifest], float], dict[str, dict[str, Any]]] | None = None
    identity: Callable[..., str] | None = None
    prompt: Prompt | None = None
    import_simulator: Callable[[], Any] | None = None
    commands: tuple[Command, ...] = ()
    host_checks: Callable[[Mapping[str, str]], list[HostCheck]] | None = None
    list_catalogue: Callable[..., list[str] | None] | None = None

    def own_interfaces(self) -> tuple[str, ...]:
        return tuple(i for i in self.interfaces if i not in COMMON_INTERFACES)

    def system_prompt(self, spec: TaskSpec, **kwargs) -> str:
        """Its interface's instructions; raises KeyError when it has none."""
        if self.prompt is None:
            raise KeyError(f"simulator family {self.name!r} has no interface of its own to instruct")
        return self.prompt.system(spec, **kwargs)


_FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Register a family by hand (the shipped ones are found by folder); returns it."""
    _FAMILIES[family.name] = family
    return family


def _load(name: str) -> Family | None:
    if not name.isidentifier():
        return None
    module_name = f"{__package__}.{name}"
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.submodule_search_locations is None:  # a family is a folder (a package), not a module
        return None
    found = getattr(importlib.import_module(module_name), "FAMILY", None)
    if not isinstance(found, Family):
        return None
    if found.name != name:
        raise RuntimeError(f"sim/{name}/ exports a Family named {found.name!r}; a family's folder is its name")
    return register(found)


def family(name: str) -> Family:
    """The family a manifest's ``upstream.package`` names; raises KeyError naming the known families."""
    found = _FAMILIES.get(name) or _load(name)
    if found is None:
        raise KeyError(f"unknown simulator family {name!r}; known: {sorted(f.name for f in families())}")
    return found


def families() -> list[Family]:
    """Every family: each folder under sim/ that exports a ``FAMILY``, and any registered by hand; by name."""
    from . import __path__ as sim_path

    for info in pkgutil.iter_modules(sim_path):
        if info.ispkg and info.name not in _FAMILIES:
            _load(info.name)
    return sorted(_FAMILIES.values(), key=lambda f: f.name)


def interface_owner(interface: str) -> Family | None:
    """The family whose own interface ``interface`` is (e.g. ``paint``), None for a common one."""
    if interface in COMMON_INTERFACES:
        return None
    return next((f for f in families() if interface in f.interfaces), None)


def package_dir(name: str) -> Path | None:
    """Where an installed package lives, found without importing it (robosuite's import costs seconds); None if absent."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def missing_packages(names: tuple[str, ...], manifests: list[TaskManifest]) -> list[AssetProblem]:
    """The one problem of tasks whose simulator packages are not installed (found without importing them)."""
    missing = [name for name in names if package_dir(name) is None]
    if not missing:
        return []
    return [AssetProblem(where=f"tasks {[m.id for m in manifests]}", what=f"{missing} not installed",
                         fix="run ./setup.sh (or .venv/bin/pip install -e .)")]


def manifest_type(data: Any) -> type:
    """The manifest Struct for decoded manifest data: its family's type, else TaskManifest.

    An unknown ``upstream.package`` decodes as TaskManifest, whose field check names the allowed ones."""
    from .manifest import TaskManifest

    upstream = data.get("upstream") if isinstance(data, Mapping) else None
    name = upstream.get("package") if isinstance(upstream, Mapping) else None
    if not isinstance(name, str):
        return TaskManifest
    try:
        return family(name).manifest
    except KeyError:
        return TaskManifest


def family_commands() -> list[Command]:
    """Every family's own `roboswe` subcommands, by family name then as each lists them."""
    return [c for f in families() for c in f.commands]


def host_checks(environ: Mapping[str, str]) -> list[HostCheck]:
    """Every family's `roboswe doctor` rows, by family name."""
    return [c for f in families() if f.host_checks is not None for c in f.host_checks(environ)]


def pinned_distributions() -> tuple[str, ...]:
    """Every family's pinned distributions, each once (what admission records of the host)."""
    return tuple(dict.fromkeys(p for f in families() for p in f.pins))
