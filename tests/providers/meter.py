"""What a metered fake bills each request, as the service reports it (prompt caching included)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .rules import unmarked

CACHE_MIN_TOKENS = 1024  # the shortest prefix either service caches (Anthropic: 1,024-4,096 by model; OpenAI 1,024)
OPENAI_CACHE_STEP = 128  # OpenAI caches in 128-token increments past the first 1,024 (guides/prompt-caching)


def _tokens(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True, separators=(",", ":"))) // 4


# Anthropic looks for a cache hit at the breakpoint and at most 20 block boundaries before it
# (build-with-claude/prompt-caching, "the system automatically checks for cache hits at all previous
# content block boundaries", about 20 blocks before the breakpoint): a conversation that grew by more than
# 20 blocks since the prefix was written misses it. One decision adds at most 4 blocks (thinking,
# tool_use; tool_result, text), far inside it.
ANTHROPIC_LOOKBACK_BLOCKS = 20


def content_blocks(body: dict[str, Any]) -> list[Any]:
    """A Messages body's content blocks in order (a string content is one block), each with its role so a
    block boundary is also a message boundary where one is."""
    blocks: list[Any] = []
    for m in body.get("messages") or []:
        content = m.get("content")
        for b in content if isinstance(content, list) else [content]:
            blocks.append([m.get("role"), b])
    return blocks


class Meter:
    """What a request is billed, as the service reports it, prompt caching included.

    Anthropic (build-with-claude/prompt-caching): only a request that asks for caching (top-level
    `cache_control` or a block's) reads and writes the cache; a prefix (tools, system, the content blocks
    up to a block) written by an earlier request and ending within ANTHROPIC_LOOKBACK_BLOCKS of the
    breakpoint is read at 0.1x, the rest up to the breakpoint written at 1.25x, and `input_tokens` counts
    what follows the last breakpoint. OpenAI (guides/prompt-caching):
    caching is automatic for prompts of 1,024 tokens or more, an exact prefix of an earlier request's
    (routed by `prompt_cache_key` when set) is reported in `input_tokens_details.cached_tokens`, in
    128-token steps. Tokens are bytes/4 of the canonical JSON, as the fake's count endpoints count."""

    def __init__(self, wire: str):
        self.wire = wire
        self.written: dict[str, set[str]] = {}  # cache routing key -> prefix digests held
        self.billed: list[dict[str, int]] = []  # per generation: uncached input, cache reads, cache writes

    def _prefixes(self, head: Any, items: list[Any]) -> list[tuple[str, int]]:
        """(digest, tokens) of head + items[:k] for every k, cache markers left out."""
        h, n = hashlib.sha256(json.dumps(unmarked(head), sort_keys=True).encode()).hexdigest(), _tokens(unmarked(head))
        out = [(h, n)]
        for item in items:
            h = hashlib.sha256((h + json.dumps(unmarked(item), sort_keys=True)).encode()).hexdigest()
            n += _tokens(unmarked(item))
            out.append((h, n))
        return out

    def bill(self, body: dict[str, Any], reply: bytes) -> bytes:
        """``reply`` with the usage the service would report for the request ``body``."""
        data = json.loads(reply)
        if self.wire == "anthropic":
            prefixes = self._prefixes([body.get("tools"), body.get("system")], content_blocks(body))
            total = prefixes[-1][1]
            read = write = 0
            if "cache_control" in json.dumps(body) and total >= CACHE_MIN_TOKENS:
                held = self.written.setdefault("", set())
                # Hits are looked for at the breakpoint (the last block) and the block boundaries before
                # it, back to ANTHROPIC_LOOKBACK_BLOCKS: a prefix written further back is not found.
                looked = prefixes[-1 - ANTHROPIC_LOOKBACK_BLOCKS:]
                read = next((n for h, n in reversed(looked) if h in held), 0)
                write = total - read
                held.update(h for h, _ in prefixes[-1:])
            usage = data.setdefault("usage", {})
            usage.update(input_tokens=total - read - write, cache_read_input_tokens=read,
                         cache_creation_input_tokens=write)
            self.billed.append({"input": total - read - write, "read": read, "write": write})
        elif self.wire == "openai":
            items = body.get("input") or []
            prefixes = self._prefixes([body.get("instructions"), body.get("tools")], items if isinstance(items, list) else [])
            total = prefixes[-1][1]
            held = self.written.setdefault(str(body.get("prompt_cache_key")), set())
            hit = next((n for h, n in reversed(prefixes) if h in held), 0) if total >= CACHE_MIN_TOKENS else 0
            cached = hit // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP if hit >= CACHE_MIN_TOKENS else 0
            held.update(h for h, _ in prefixes)
            usage = data.setdefault("usage", {})
            usage.update(input_tokens=total, input_tokens_details={"cached_tokens": cached})
            self.billed.append({"input": total - cached, "read": cached, "write": 0})
        return json.dumps(data).encode()
