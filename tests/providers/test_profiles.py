"""The model profile a run will use, as `roboswe doctor --config` and the run's preflight show it
(configs/models.toml; an unknown model gets its provider's stated conservative default and a warning)."""

from __future__ import annotations

import argparse

from roboswe.commands import doctor


def _run_config(tmp_path, kind: str, model: str):
    path = tmp_path / "run.toml"
    path.write_text(f'[provider]\nkind = "{kind}"\nmodel = "{model}"\napi_key_env = "X_API_KEY"\n'
                    "context_window = 400000\nmax_output_tokens = 32000\n")
    return path


def test_doctor_shows_the_profile_of_a_known_model(tmp_path):
    check = doctor.check_model_profile(_run_config(tmp_path, "openai", "gpt-5-2025-08-07"))
    assert check.status == "ok", check
    assert '[openai."gpt-5"]' in check.detail and "input cap 272,000" in check.detail
    assert "input budget B: 267,904" in check.detail  # min(400k - 32k, 272k) - 4096
    assert "output limit O: 32,000 tokens (model cap 128,000)" in check.detail


def test_doctor_warns_of_an_unknown_model_and_names_the_default(tmp_path):
    check = doctor.check_model_profile(_run_config(tmp_path, "anthropic", "claude-someday-9"))
    assert check.status == "warn" and "[anthropic.default] (not in the table)" in check.detail
    assert "conservative default" in check.detail and "prefix check: yes" in check.detail
    assert "configs/models.toml" in check.fix


def test_doctor_takes_a_run_config_and_reports_a_broken_one(tmp_path):
    parser = argparse.ArgumentParser()
    doctor.add_arguments_doctor(parser)
    path = tmp_path / "bad.toml"
    path.write_text('[provider]\nkind = "anthropic"\nmodle = "x"\n')
    assert parser.parse_args(["--config", str(path)]).config == path
    check = doctor.check_model_profile(path)
    assert check.status == "fail" and check.required and "modle" in check.detail
    assert doctor.check_model_profile(_run_config(tmp_path, "python", "")).status == "absent"
