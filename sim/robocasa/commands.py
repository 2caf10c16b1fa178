"""RoboCasa's own commands and doctor row, offered through its ``Family`` (sim/families.py).

`roboswe assets robocasa [--path DIR]`: where RoboCasa's kitchen assets are, what is there, what can load.
RoboCasa's ~10 GB of textures, fixtures and objects come from its own download script, never
from roboswe. This command records where a user keeps them (``--path``; sim/robocasa/assets.py
says where the record lives and in which order roots are looked up), checks each part of the
asset tree, and lists the real-asset kitchen tasks (configs/tasks, ``assets = "robocasa"``) and
catalogue task classes that can load from it. Exit 0 when every real-asset task can load, 1 when
some cannot, 2 on a usage error.

`roboswe tasks robocasa365` lists the catalogue (``list_catalogue``), and `roboswe doctor` shows
where the asset lookup finds RoboCasa's assets and what is missing (``assets_check``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from roboswe.terminal import echo, terminal_safe

from ..families import HostCheck, HostStatus


def add_arguments_assets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("family", choices=["robocasa"], help="simulator family whose downloaded assets to check")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--path", type=Path, default=None,
                       help="RoboCasa asset root to record (the folder RoboCasa calls robocasa/models/assets)")
    group.add_argument("--forget", action="store_true", help="remove the recorded root (back to $ROBOCASA_ASSETS or the package)")


def _kitchen_manifests() -> list:
    """Every shipped kitchen manifest on RoboCasa's real assets (the pilot and any other)."""
    from ..manifest import CONFIGS_DIR, ManifestError, load_manifest

    out = []
    for path in sorted((CONFIGS_DIR / "tasks").glob("*.toml")):
        try:
            m = load_manifest(path)
        except ManifestError:
            continue  # `roboswe tasks` / `admit` report broken manifests; this command is about assets
        if m.upstream.package == "robocasa" and m.upstream.assets == "robocasa":
            out.append(m)
    return out


def run_assets(args: argparse.Namespace) -> int:
    from . import assets as ra
    from .backend import assets_exclusion
    from .kit import is_kit

    if args.forget:
        path = ra.config_file()
        if path.exists():
            path.unlink()
            echo(f"removed {path}")
        else:
            echo(f"nothing recorded ({path} does not exist)")
    if args.path is not None:
        root = args.path.expanduser().resolve()
        if not root.is_dir():
            echo(f"roboswe: --path {args.path}: no such directory", file=sys.stderr)
            return 2
        if is_kit(root):
            echo(f"roboswe: --path {args.path} is roboswe's placeholder kit, not RoboCasa's assets; kit tasks find "
                 "their kit by themselves", file=sys.stderr)
            return 2
        try:
            written = ra.record_root(root)
        except OSError as e:
            echo(f"roboswe: cannot record the asset root in {ra.config_file()}: {e}", file=sys.stderr)
            return 2
        echo(f"recorded {root} in {written}")
    root, source = ra.resolve_root()
    if root is None:
        echo("roboswe: RoboCasa is not installed here (praxis-robocasa), and nothing names an asset root", file=sys.stderr)
        return 2
    echo(f"RoboCasa asset root: {root}")
    echo(f"  from: {source}")
    env = ra.ENV_VAR
    echo(f"  lookup order: --path given to the backend, ${env}, {ra.config_file()}, RoboCasa's package folder")
    manifests = _kitchen_manifests()
    needed = {p.source for m in manifests for p in ra.parts_needed(m.upstream.obj_registries, m.upstream.env_kwargs)}
    needed |= {p.source for p in ra.parts_needed(["objaverse", "lightwheel"])}  # RoboCasa's default registries
    echo("parts:")
    by_part = ra.missing_by_part(root, ra.ALL_PARTS)
    for part, missing in by_part:
        label = part.name if part.source == "shipped" else f"{part.name} (--type {part.source})"
        state = "present" if not missing else f"MISSING {ra.describe_missing(root, [(part, missing)])}"
        echo(f"  {label:<44} {state}{'' if part.source in needed else '  (optional: no listed task needs it)'}")
    blocked = {m.id: assets_exclusion(m) for m in manifests}
    loadable = [i for i, why in blocked.items() if why is None]
    echo(f"real-asset kitchen tasks (configs/tasks): {len(loadable)} of {len(manifests)} can load")
    for m in manifests:
        echo(f"  {'ok ' if blocked[m.id] is None else 'no '} {m.id} ({m.upstream.env}, layout {m.upstream.layout}, "
             f"style {m.upstream.style})")
    _print_catalogue(root, ra)
    if len(loadable) < len(manifests):
        hint = ra.download_hint(root, [(p, m) for p, m in by_part if p.source in needed])
        echo(f"to get the missing parts: {hint or '-'}")
        return 1
    return 0


def _print_catalogue(root: Path, ra) -> None:
    """The catalogue's task classes all need the same parts with RoboCasa's default object registries."""
    from ..manifest import ManifestError
    from .catalogue import load_catalogue

    try:
        catalogue = load_catalogue()
    except ManifestError as e:
        echo(f"catalogue: {e}")
        return
    needed = ra.parts_needed(["objaverse", "lightwheel"])
    ok = not ra.missing(root, needed)
    n = len(catalogue.tasks)
    echo(f"catalogue {catalogue.id} (RoboCasa {catalogue.upstream.get('version')}): {n if ok else 0} of {n} task classes "
         f"can load with the default object registries (objaverse, lightwheel); candidates: "
         f"{len(catalogue.selection.shorter)} shorter, {len(catalogue.selection.harder)} harder "
         "(`roboswe tasks robocasa365`)")


def list_catalogue(name: str, admitted: Mapping[str, Any], status: Callable[[Any], str], *,
                   candidates_only: bool) -> list[str] | None:
    """`roboswe tasks robocasa365`: the catalogue's task classes with their selection, metadata and the
    admission status (``status(manifest)``: the coordinator's reading of ``admitted``, task id -> admitted
    task) of the manifests using them; None when ``name`` is no catalogue. Raises ManifestError for a broken one."""
    from ..manifest import CONFIGS_DIR, ManifestError, load_manifest
    from .backend import assets_exclusion
    from .catalogue import catalogue_path, load_catalogue

    if catalogue_path(name) is None:
        return None
    catalogue = load_catalogue(name)
    by_env: dict[str, list] = {}
    for path in sorted((CONFIGS_DIR / "tasks").glob("*.toml")):
        try:
            m = load_manifest(path)
        except ManifestError:
            continue
        if m.upstream.package == "robocasa":
            by_env.setdefault(m.upstream.env, []).append(m)
    sel, up = catalogue.selection, catalogue.upstream
    kinds = [t.kind for t in catalogue.tasks.values()]
    lines = [(f"catalogue {catalogue.id}: {kinds.count('composite')} composite + {kinds.count('atomic')} atomic task "
              f"classes, {up['package']} {up['version']} (registry sha256 {str(up['registry_sha256'])[:12]})"),
             (f"selection{' (provisional)' if sel.provisional else ''}: {len(sel.harder)} harder, {len(sel.shorter)} "
              f"shorter of {sel.shorter_eligible} eligible; rule: {sel.rule.strip().splitlines()[0]} ...")]
    lines += [f"  not evaluated: {why}" for why in sel.unevaluated]
    lines += [f"  composition {comp.id}: {comp.status} only ({comp.note})" for comp in catalogue.compositions]
    rows = [("TASK", "KIND", "SUBTASKS", "HORIZON", "CANDIDATE", "MANIFEST", "STATUS")]
    for env, task in sorted(catalogue.tasks.items()):
        manifests = by_env.get(env, [])
        if candidates_only and not manifests and not catalogue.candidate(env):
            continue
        sub = "-" if task.subtasks is None else str(task.subtasks)
        horizon = f"{task.registry_horizon} ({task.registry_horizon_seconds:g} s)"
        for m in manifests or [None]:
            if m is None:
                mid, state = "-", "no task manifest"
            else:
                mid = m.id + (" [placeholder]" if m.upstream.assets == "placeholder" else "")
                state = status(m)
                if m.id not in admitted and assets_exclusion(m) is not None:
                    state = "not loadable here: RoboCasa assets missing (`roboswe assets robocasa`)"
                elif m.success.predicate_sha256 != task.predicate_sha256:
                    state = f"predicate changed since review ({task.predicate}); {state}"
            rows.append((env, task.kind, sub, horizon, catalogue.candidate(env) or "-", mid, state))
    rows = [tuple(terminal_safe(cell, multiline=False) for cell in r) for r in rows]  # measured as shown
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    return lines + ["  ".join(r[i].ljust(widths[i]) for i in range(6)) + "  " + r[6] for r in rows]


def assets_check(environ: Mapping[str, str]) -> HostCheck:
    """Doctor's row: where RoboCasa's assets are found, by the lookup the backend and `roboswe assets robocasa`
    use, and what is missing."""
    from . import assets as ra
    from .kit import is_kit

    label, fix = "RoboCasa assets", "`roboswe assets robocasa --path DIR` (or export ROBOCASA_ASSETS=DIR) after RoboCasa's download"
    root, source = ra.resolve_root(environ=environ)
    if root is None:
        return HostCheck(check=label, status="absent", fix="pip install praxis-robocasa==1.0.0, then download RoboCasa's assets",
                         detail="RoboCasa is not installed and nothing names an asset root; robosuite and kit tasks need none")
    where = f"{root} ({source})"
    if not root.is_dir():
        return HostCheck(check=label, status="warn", detail=f"{where} is not a directory", fix=fix)
    if is_kit(root):
        return HostCheck(check=label, status="warn", detail=f"{where} is roboswe's placeholder kit, not RoboCasa's assets",
                         fix=fix + "; kit tasks find their kit by themselves")
    # What the catalogue's task classes need with RoboCasa's default object registries.
    by_part = [(p, m) for p, m in ra.missing_by_part(root, ra.parts_needed(["objaverse", "lightwheel"])) if m]
    if not by_part:
        return HostCheck(check=label, status="ok", detail=f"{where}: every part the catalogue needs is present")
    parts = ", ".join(f"{p.name} ({len(m)} folders)" if len(m) > 1 else p.name for p, m in by_part)
    hint = ra.download_hint(root, by_part)
    downloaded = {p.source for p in ra.parts_needed(["objaverse", "lightwheel"])} - {"shipped"}
    status: HostStatus = "absent" if {p.source for p, _ in by_part} == downloaded else "warn"  # nothing downloaded yet
    return HostCheck(check=label, status=status, fix=f"{hint}; `roboswe assets robocasa` lists each folder",
                     detail=f"{where}: missing {parts}; robosuite and kit tasks need none")


def host_checks(environ: Mapping[str, str]) -> list[HostCheck]:
    """What `roboswe doctor` shows of RoboCasa: its asset root."""
    return [assets_check(environ)]
