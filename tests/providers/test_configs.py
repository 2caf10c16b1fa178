"""The shipped example run configs decode and name a key variable, never a key."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboswe.config import load_config
from roboswe.providers import model_profile

RUNS = Path(__file__).resolve().parents[2] / "configs" / "runs"


@pytest.mark.parametrize("kind", ["openai", "anthropic", "google", "openrouter"])
def test_example_run_config_decodes(kind):
    config = load_config(RUNS / f"{kind}.toml")
    provider = config.provider
    assert provider is not None and provider.kind == kind
    assert provider.api_key_env.endswith("_API_KEY")
    assert "EDIT-ME" in provider.model  # a placeholder the user replaces with a pin
    # B = min(C - O, the model's input cap) - S; the placeholder model gets its provider's default profile.
    cap = model_profile(provider).max_input_tokens or provider.context_window
    assert provider.input_budget == min(provider.context_window - provider.max_output_tokens, cap) - 4096 > 0
    text = (RUNS / f"{kind}.toml").read_text()
    assert "sk-" not in text
