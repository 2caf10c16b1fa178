"""`roboswe images build|show`: the sandbox image both backends run (see roboswe.sandbox.images)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from roboswe.sandbox.images import (
    ImageError,
    ImageRecipe,
    build_image,
    load_image,
    stale_files,
)
from roboswe.terminal import echo


def add_arguments_images(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="build the sandbox rootfs and (when dockerd answers) the docker image")
    build.add_argument("--cache-dir", type=Path, default=None, help="where the rootfs lives (default ~/.cache/roboswe/rootfs, /var/cache/roboswe/rootfs for root)")
    build.add_argument("--mirror", default=ImageRecipe().mirror, help="Debian mirror for debootstrap")
    build.add_argument("--no-docker", action="store_true", help="do not import into Docker even when it answers")
    build.add_argument("--rebuild-base", action="store_true", help="debootstrap again instead of reusing the cached base")
    show = sub.add_parser("show", help="print the current sandbox image (digest, rootfs, docker tag)")
    show.add_argument("--cache-dir", type=Path, default=None)


def run_images(args: argparse.Namespace) -> int:
    try:
        if args.images_command == "build":
            image = build_image(
                ImageRecipe(mirror=args.mirror), args.cache_dir, docker=not args.no_docker, rebuild_base=args.rebuild_base
            )
        else:
            image = load_image(args.cache_dir)
    except (ImageError, subprocess.CalledProcessError) as e:
        echo(f"roboswe images: {e}", file=sys.stderr)
        return 1
    echo(f"digest      sha256:{image.digest}")
    echo(f"rootfs      {image.rootfs}")
    echo(f"docker tag  {image.docker_tag or '(docker not available: bwrap only)'}")
    echo(f"built in    {image.build_seconds:.1f} s")
    stale = stale_files(image)
    if stale:
        echo(f"STALE       {', '.join(stale)} changed since this build: run `roboswe images build`")
    return 0
