"""Model profiles: what a configured model takes, refuses and holds, from configs/models.toml.

The table (one per provider, each line with its documented source) replaces guesses from the
model's name: the Anthropic thinking form, whether thinking blocks are bound to the
conversation before them (the preserved-thinking prefix check) and take ``drop_block``, and the
window and input cap that bound the context budget. A model the table does not know gets the
provider's stated conservative default and a warning, printed by ``roboswe doctor`` and the
preflight (`profile_lines`).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import msgspec

from roboswe.configs import CONFIGS_DIR

PROFILES_FILE = CONFIGS_DIR / "models.toml"
# Platform spellings of one model id: Bedrock "anthropic.claude-...-v1:0" (and its "us." regional
# prefixes), Vertex "claude-...@20250929"; the "@" ends the name as a "-" does.
_PLATFORM_PREFIX = "anthropic."


class ModelProfile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One line of the table (the fields a line may set) plus where it was found."""

    thinking: Literal["adaptive", "manual", "both", ""] = ""
    prefix_check: bool = False
    drop_block: bool = False
    context_window: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    source: str = ""
    # Set by the lookup, never by the table:
    provider: str = ""
    key: str = ""  # the table key that matched; "default" for an unknown model
    model: str = ""

    @property
    def known(self) -> bool:
        return self.key != "default"

    @property
    def warning(self) -> str:
        if self.known:
            return ""
        return (f"model {self.model!r} is not in {PROFILES_FILE.name} [{self.provider}]: using the conservative "
                f"default ({self.source}); add a line with its documented limits")


@functools.cache
def _table() -> dict[str, dict[str, ModelProfile]]:
    raw = msgspec.toml.decode(PROFILES_FILE.read_bytes(), type=dict[str, dict[str, dict[str, Any]]])
    return {provider: {key: msgspec.convert(line, ModelProfile) for key, line in lines.items()}
            for provider, lines in raw.items()}


def _matches(model: str, key: str) -> bool:
    return model == key or (model.startswith(key) and model[len(key)] in "-@")


def lookup(provider: str, model: str) -> ModelProfile:
    """The profile of ``model`` in ``provider``'s table (an OpenRouter ``vendor/model`` slug in the
    vendor's); the provider's default, whose ``warning`` says so, when no key matches (the preflight
    prints it, the adapter logs it)."""
    table = _table()
    name = model.split(_PLATFORM_PREFIX, 1)[-1]
    if "/" in model and provider not in model.split("/", 1)[0]:  # a router's "vendor/model" slug
        vendor, name = model.split("/", 1)
        if vendor in table:
            # OpenRouter spells a Claude version with a dot (anthropic/claude-sonnet-4.5), Anthropic with a dash.
            found = lookup(vendor, name.replace(".", "-") if vendor == "anthropic" else name)
            if found.known:
                return msgspec.structs.replace(found, provider="openrouter", model=model)
    lines = table.get(provider, {})
    keys = [k for k in lines if k != "default" and _matches(name, k)]
    if keys:
        key = max(keys, key=len)
        return msgspec.structs.replace(lines[key], provider=provider, key=key, model=model)
    return msgspec.structs.replace(lines.get("default", ModelProfile()), provider=provider, key="default", model=model)


def model_profile(config: Any) -> ModelProfile:
    """The profile a run's [provider] section uses (kind and model)."""
    return lookup(config.kind, config.model)


def profile_lines(config: Any) -> list[str]:
    """What a run will assume of its model, one line per fact, for ``roboswe doctor`` and the preflight."""
    from ._config import effective_limits, images_per_request

    if not config.model:
        return []
    p = model_profile(config)
    window, budget = effective_limits(config)
    images = images_per_request(config)
    lines = [f"model profile: {config.kind} {config.model!r} -> "
             + (f"[{p.provider}.\"{p.key}\"]" if p.known else f"[{p.provider}.default] (not in the table)")
             + f" in {PROFILES_FILE.name} ({p.source})"]
    if p.thinking:
        lines.append(f"  thinking form: {p.thinking}; preserved-thinking prefix check: "
                     + ("yes (retained turns lose their thinking after a context rewrite; whole requests counted)"
                        if p.prefix_check else "no")
                     + ("; drop_block repair available" if p.drop_block else ""))
    lines.append(f"  context window used: {window:,} tokens; input budget B: {budget:,} tokens"
                 + (f" (input cap {p.max_input_tokens:,})" if p.max_input_tokens else ""))
    lines.append(f"  output limit O: {config.max_output_tokens:,} tokens"
                 + (f" (model cap {p.max_output_tokens:,})" if p.max_output_tokens else "")
                 + (f"; after a max_tokens stop the request goes once more with {config.max_output_tokens_raise:,}"
                    if config.max_output_tokens_raise else ""))
    lines.append(f"  images per request: {images if images is not None else 'no limit known'}; "
                 f"prompt caching: {'on' if config.cache else 'off ([provider] cache = false)'}")
    if p.warning:
        lines.append(f"  warning: {p.warning}")
    return lines
