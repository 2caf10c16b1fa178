"""`roboswe assets robocasa [--path DIR]`: where RoboCasa's kitchen assets are, what is there, what can load.

RoboCasa's ~10 GB of textures, fixtures and objects come from its own download script, never
from roboswe. This command records where a user keeps them (``--path``; sim/robocasa/assets.py
says where the record lives and in which order roots are looked up), checks each part of the
asset tree, and lists the real-asset kitchen tasks (configs/tasks, ``assets = "robocasa"``) and
catalogue task classes that can load from it. Exit 0 when every real-asset task can load, 1 when
some cannot, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roboswe.terminal import echo


def add_arguments_assets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("family", choices=["robocasa"], help="simulator family whose downloaded assets to check")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--path", type=Path, default=None,
                       help="RoboCasa asset root to record (the folder RoboCasa calls robocasa/models/assets)")
    group.add_argument("--forget", action="store_true", help="remove the recorded root (back to $ROBOCASA_ASSETS or the package)")


def _kitchen_manifests() -> list:
    """Every shipped kitchen manifest on RoboCasa's real assets (the pilot and any other)."""
    from roboswe.sim.manifest import CONFIGS_DIR, ManifestError, load_manifest

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
    from roboswe.sim.robocasa import assets as ra
    from roboswe.sim.robocasa.backend import assets_exclusion
    from roboswe.sim.robocasa.kit import is_kit

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
    from roboswe.sim.manifest import ManifestError
    from roboswe.sim.robocasa.catalogue import load_catalogue

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
