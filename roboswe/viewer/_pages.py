"""The viewer's pages share one head: assets/head.html (charset, viewport, colour schemes, viewer.css, common.js).

Each page's asset file (index.html, trial.html, ...) holds only its title and body; the gallery,
written from the records (roboswe.viewer._gallery), is built the same way, so every page of a site
has the same style, light or dark as the reader's system asks (viewer.css).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

HEAD = "head.html"
_NOTE = re.compile(r"\A<!--.*?-->\n", re.DOTALL)  # the page file's note on how it is built, not for the reader


@functools.cache
def _head() -> str:
    return resources.files("roboswe.viewer").joinpath("assets", HEAD).read_text(encoding="utf-8")


def document(page: str) -> str:
    """A whole HTML document: the shared head, then ``page`` (its <title>, </head> and body)."""
    return _head() + _NOTE.sub("", page, count=1)
