"""The viewer's comparison page: SITE_DIR/compare.html with data/compare.js (see roboswe.records.compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ._export import _copy_assets, _write_data


def export_comparisons(comparisons: list[Any], site: str | Path) -> Path:
    """Write the comparisons (records.compare.Comparison) beside a viewer site; returns SITE_DIR/compare.html."""
    site = Path(site)
    site.mkdir(parents=True, exist_ok=True)
    _copy_assets(site, pages=("compare.html",))
    _write_data(site, "data/compare.js", "compare", msgspec.to_builtins(comparisons))
    return site / "compare.html"
