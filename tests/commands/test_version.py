"""`roboswe --version` prints the installed distribution's version, the one each run records."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from roboswe.cli import main


def test_version_prints_the_installed_roboswe_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"roboswe {version('roboswe')}\n"
