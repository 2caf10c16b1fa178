"""Fleet tests run `roboswe run` for real (supervisor, actor processes, robosuite, bwrap), as tests/series does."""

from __future__ import annotations

from tests.series.conftest import sandbox_image, work_dir  # noqa: F401 - fixtures shared with the series tests
