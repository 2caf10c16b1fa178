"""The run viewer: a static site (works from file://) and a localhost server for it.

``export_site(run_dir, out)`` writes overview and trial pages, the run's data as small
``.js`` files loaded lazily with ``<script>`` tags (browsers refuse ``fetch`` of local
files), and copies of the trial videos. ``roboswe view`` serves the same files.
"""

from __future__ import annotations


def export_site(run_dir, out, **kwargs):
    """Write the static viewer site for a run; returns SITE_DIR/index.html (see roboswe.viewer._export)."""
    from ._export import export_site as _export_site

    return _export_site(run_dir, out, **kwargs)
