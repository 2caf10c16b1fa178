"""The shipped example run configs decode and name a key variable, never a key."""

from __future__ import annotations

import itertools
from pathlib import Path

import msgspec
import pytest

from roboswe.config import RunConfig, load_config
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


@pytest.mark.parametrize("kind", ["openai", "anthropic", "google", "openrouter"])
def test_example_run_config_carries_a_price_example_that_decodes_when_uncommented(kind):
    """Each example shows the [provider.price] form (commented: its figures are no quote); uncommented, the run
    reports cost with it, every token kind the provider reports priced."""
    text = (RUNS / f"{kind}.toml").read_text()
    lines = text.splitlines()
    start = lines.index("# [provider.price]")
    block = [line[2:] for line in itertools.takewhile(lambda s: s.startswith("# "), lines[start:])]
    price = msgspec.toml.decode(("\n".join(lines) + "\n" + "\n".join(block)).encode(), type=RunConfig).provider.price
    assert price is not None and price.input > 0 and price.output > 0 and price.cached_input is not None
    assert (price.cache_write is not None) == (kind in ("anthropic", "openrouter"))  # the wires that report writes


def test_anthropic_example_asks_for_readable_thinking():
    """Opus 4.7 and later omit the thinking text unless `display` asks for it (docs: whats-new-claude-4-7,
    "thinking content omitted by default"); README promises readable reasoning in the records."""
    provider = load_config(RUNS / "anthropic.toml").provider
    assert provider is not None and provider.reasoning.get("display") == "summarized"
