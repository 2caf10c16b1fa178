"""The typed run config: defaults, overrides, and errors that name the file and the key."""

from __future__ import annotations

import pytest

from roboswe.config import ConfigError, RestartPolicy, RunConfig, load_config


def write(tmp_path, text: str):
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_no_file_means_defaults():
    config = load_config(None)
    assert config == RunConfig()
    assert config.supervisor.policy_for("simulator").max_restarts == 3


def test_per_actor_restart_policy_overrides_the_default(tmp_path):
    config = load_config(write(tmp_path, "[supervisor.restart]\nmax_restarts = 1\n[supervisor.actors.simulator]\nmax_restarts = 5\n"))
    assert config.supervisor.policy_for("simulator").max_restarts == 5
    assert config.supervisor.policy_for("recorder").max_restarts == 1


def test_backoff_grows_and_is_capped():
    policy = RestartPolicy(backoff_initial=0.5, backoff_factor=2, backoff_max=3)
    assert [policy.backoff(n) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[supervisor]\nstop_grase = 1\n", "unknown key `supervisor.stop_grase`"),
        ("[sandbox_typo]\n", "unknown key `sandbox_typo`"),
        ("[supervisor.restart]\nmax_restarts = -1\n", "`supervisor.restart.max_restarts`"),
        ("[supervisor]\nheartbeat_interval = \"fast\"\n", "`supervisor.heartbeat_interval`"),
        ("[supervisor.actors.simulatr]\nmax_restarts = 1\n", "unknown actor `supervisor.actors.simulatr`"),
        ("[supervisor\n", "not valid TOML"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as failure:
        load_config(path)
    assert str(path) in str(failure.value) and expected in str(failure.value)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read run config"):
        load_config(tmp_path / "absent.toml")
