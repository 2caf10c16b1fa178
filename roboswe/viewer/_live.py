"""`roboswe view --live`: the site re-exported while its run changes, served all along.

Every ``every`` seconds the run's database (run.sqlite and its write-ahead log), its events.jsonl
and whether the run is going (viewer._snapshot) are looked at; on a change the site is exported
again. A re-export is written beside the site first and then moved into it entry by entry, data/
last, so the server never hands out half an export; the index of a ``--live`` export polls
data/snapshot.js and reloads on a newer snapshot. Ctrl-C stops the watching and the server and
leaves the last export in place.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ._export import DATA_PAGES, ExportError, export_site
from ._gallery import FOLDER, GALLERY
from ._snapshot import run_state

WATCHED = ("run.sqlite", "run.sqlite-wal", "events.jsonl")


def run_fingerprint(run_dir: Path) -> tuple[Any, ...]:
    """What a change of the run shows in: the watched files' sizes and times, and whether the run is going."""
    seen: list[Any] = []
    for name in WATCHED:
        try:
            st = (run_dir / name).stat()
            seen.append((name, st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            seen.append((name, None, None))
    seen.append(run_state(run_dir)[0])
    return tuple(seen)


def export_swapped(run_dir: Path, site: Path, refresh: float) -> None:
    """Export into a folder beside ``site``, then move each entry into it (data/ last); raises as export_site."""
    staging, trash = site.parent / f".{site.name}.next", site.parent / f".{site.name}.old"
    for folder in (staging, trash):
        shutil.rmtree(folder, ignore_errors=True)
    try:
        export_site(run_dir, staging, refresh=refresh)
        trash.mkdir()
        for entry in sorted(staging.iterdir(), key=lambda p: p.name == "data"):
            target = site / entry.name
            if entry.is_dir():
                if target.exists():
                    target.rename(trash / entry.name)
                entry.rename(target)
            else:
                os.replace(entry, target)
        for name in (*DATA_PAGES, GALLERY, FOLDER):  # what the export no longer writes (export_site drops them too)
            if not (staging / name).exists() and (site / name).is_file():
                (site / name).unlink()
            elif not (staging / name).exists() and (site / name).is_dir():
                shutil.rmtree(site / name)
    finally:
        for folder in (staging, trash):
            shutil.rmtree(folder, ignore_errors=True)


def follow(run_dir: Path, site: Path, every: float, say: Callable[[str], None],
           stop: threading.Event | None = None) -> None:
    """Re-export ``site`` on each change of the run until ``stop`` is set (or Ctrl-C)."""
    stop = stop or threading.Event()
    seen: tuple[Any, ...] | None = run_fingerprint(run_dir)
    while not stop.wait(every):
        now = run_fingerprint(run_dir)
        if now == seen:
            continue
        seen = now  # taken before the export: a change while it runs is seen next time
        t0 = time.perf_counter()
        try:
            export_swapped(run_dir, site, every)
        except (ExportError, FileNotFoundError, LookupError, sqlite3.Error, OSError) as e:
            say(f"roboswe view: re-export failed, the previous snapshot stays: {e}")
            seen = None  # try again at the next look
            continue
        live, state = run_state(run_dir)
        say(f"roboswe view: re-exported {time.strftime('%H:%M:%S')} ({time.perf_counter() - t0:.1f} s; "
            f"run {'going' if live else state})")
