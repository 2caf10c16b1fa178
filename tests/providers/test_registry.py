"""One registry names every provider kind; SDKs load only when their kind is used."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from roboswe.providers import (
    ProviderConfig,
    hosted_kinds,
    participant_class,
    provider_kinds,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_names_each_kind_and_the_config_accepts_exactly_those():
    assert provider_kinds() == ("openai", "anthropic", "google", "openrouter", "python")
    assert hosted_kinds() == ("openai", "anthropic", "google", "openrouter")
    for kind in provider_kinds():
        assert msgspec.convert({"kind": kind}, ProviderConfig).kind == kind
        assert participant_class(kind).kind == kind
    with pytest.raises(msgspec.ValidationError, match="unknown provider kind 'bard'.*expected one of openai"):
        msgspec.convert({"kind": "bard"}, ProviderConfig)
    assert participant_class("bard") is None


def test_importing_the_providers_package_loads_no_sdk():
    code = ("import sys, roboswe.providers as p; p.ProviderConfig(kind='anthropic'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai') or m.startswith('google.genai')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


def test_no_other_module_lists_the_provider_kinds():
    kind = re.compile(r"""["'](openai|anthropic|google|openrouter)["']""")
    offenders = []
    for folder in ("roboswe", "actors", "protocol"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "__init__.py" and path.parent.name == "providers":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                # Three or more kinds named on one line is a list of them.
                if len(set(kind.findall(line))) >= 3 and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
