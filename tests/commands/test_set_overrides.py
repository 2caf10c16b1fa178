"""`roboswe run --set KEY=VALUE`: any config key overridden, checked against the config's sections, recorded."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from roboswe.cli import build_parser, main
from roboswe.commands.run import prepare_run
from roboswe.config import ConfigError, config_text, load_config
from roboswe.evaluation.job import CONFIG_COPY

from .conftest import ROOT

DEMO = str(ROOT / "configs" / "runs" / "demo.toml")


@pytest.fixture
def run_dir():
    """Under /tmp: the sandbox user must traverse a run dir, and pytest's tmp_path sits under a 0700 one."""
    parent = Path(tempfile.mkdtemp(prefix="rs-set-", dir="/tmp"))
    yield parent / "run"
    shutil.rmtree(parent, ignore_errors=True)


def test_overrides_reach_the_config_and_the_run_records_the_merged_one(admitted_file, run_dir):
    args = build_parser().parse_args(["run", str(admitted_file), "--config", DEMO, "--out", str(run_dir),
                                      "--no-preflight", "--set", "series.trials=3", "--set", "provider.model=pinned-x",
                                      "--set", 'provider.reasoning.effort="high"', "--set", "fleet.workers=1"])
    _, config, config_path = prepare_run(args)  # writes the run directory; starts nothing
    assert (config.series.trials, config.provider.model, config.provider.reasoning) == (3, "pinned-x", {"effort": "high"})
    assert config_path == run_dir / CONFIG_COPY
    recorded = load_config(config_path)  # what a resume and the run's pins read
    assert recorded == config
    assert config_path.read_text().startswith(f"# {DEMO} with --set series.trials=3 --set provider.model=pinned-x")
    assert recorded.provider.agent == load_config(DEMO).provider.agent  # the rest of the file is kept


@pytest.mark.parametrize("item, message", [
    ("provider.modle=x", "unknown key `provider.modle`; did you mean `provider.model`? (the keys are in docs/providers.md)"),
    ("series.trails=3", "did you mean `series.trials`?"),
    ("provder.model=x", "unknown key `provder`; did you mean `provider`?"),
    ("provider=x", "a section, not a key"),
    ("trials", "expected KEY=VALUE"),
])
def test_a_bad_key_is_refused_with_the_closest_names(item, message):
    with pytest.raises(ConfigError, match=".*") as e:
        config_text(DEMO, [item])
    assert message in str(e.value)


def test_values_read_as_toml_else_as_the_string_written():
    text = config_text(None, ["series.trials=4", "provider.kind=python", "provider.model=claude-x-2026-01-01",
                              "provider.extra_body.tags=[1, 2]"])
    config = load_config(None, ["series.trials=4", "provider.kind=python", "provider.model=claude-x-2026-01-01",
                                "provider.extra_body.tags=[1, 2]"])
    assert b'model = "claude-x-2026-01-01"' in text
    assert config.series.trials == 4 and config.provider.extra_body == {"tags": [1, 2]}
    with pytest.raises(ConfigError, match="bad value for `series.trials`"):
        load_config(None, ["series.trials=many"])


def test_run_refuses_an_unknown_key_before_writing_anything(admitted_file, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["run", str(admitted_file), "--config", DEMO, "--out", str(run_dir), "--set", "provider.modle=x"]) == 2
    assert "did you mean `provider.model`?" in capsys.readouterr().err
    assert not run_dir.exists()
    assert main(["run", "--resume", str(tmp_path), "--set", "series.trials=2"]) == 2
    assert "a resumed run keeps the config it started with" in capsys.readouterr().err


def test_an_unknown_key_in_the_file_gets_the_same_help(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[series]\ntrails = 3\n")
    with pytest.raises(ConfigError, match=r"unknown key `series.trails`; did you mean `series.trials`\?"):
        load_config(path)
