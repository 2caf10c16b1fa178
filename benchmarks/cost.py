"""What a retained series is billed, with and without prompt caching, against the strict fakes' usage.

A 5-trial retained series (the conversation carried from trial to trial, as `roboswe run` keeps it)
is driven through the real adapter and the context policy (`window_for`, as the context manager
builds it) against the loopback fakes in metered mode (tests/providers/meter.py `Meter`): each
reply's usage is what the service would report for that exact request, cache reads and writes
included. Billed input-equivalent tokens weigh each kind by its documented price multiplier:
Anthropic (build-with-claude/prompt-caching) uncached input 1x, 5-minute cache writes 1.25x, cache
reads 0.1x; OpenAI (pricing, GPT-5 family) uncached input 1x, cached input 0.1x. OpenAI caches
automatically (there is no switch), so its "without" row is the same series priced as if nothing
had been read from the cache; Anthropic's is the series run with `cache = false`.

    .venv/bin/python benchmarks/cost.py [--trials 5] [--decisions 35] [--result-chars 2000]

Prints a markdown table; docs/providers.md and docs/performance.md are pasted from it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import structlog
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from roboswe.context.policy import window_for  # noqa: E402
from roboswe.protocol.participant import TextPart, Turn, result_turn  # noqa: E402
from roboswe.providers import ProviderConfig, create_participant  # noqa: E402
from tests.providers.fakes import REPLY, FakeProvider  # noqa: E402

KEY_ENV = "ROBOSWE_COST_BENCH_KEY"
PROFILES = {  # wire -> (model, window, max_output_tokens, reasoning)
    "anthropic": ("claude-sonnet-5-5", 200_000, 32_000, {"effort": "high"}),
    "openai": ("gpt-5-2025-08-07", 400_000, 32_000, {"effort": "high"}),
}
# Price multipliers of cache writes and reads against uncached input (docs above).
MULTIPLIERS = {"anthropic": (1.25, 0.1), "openai": (0.0, 0.1)}


async def series(wire: str, cache: bool, trials: int, decisions: int, result_chars: int) -> dict[str, int]:
    model, window, output, reasoning = PROFILES[wire]
    totals = {"requests": 0, "input": 0, "read": 0, "write": 0, "slides": 0}
    with FakeProvider(wire, metered=True) as fake:
        cfg = ProviderConfig(kind=wire, model=model, api_key_env=KEY_ENV, base_url=fake.base_url, context_window=window,
                             max_output_tokens=output, reasoning=reasoning, cache=cache, attempts=2,
                             backoff_initial_s=0.0, timeout_s=30.0)
        participant = create_participant(cfg)
        context = window_for(cfg, participant.count_tokens, "bench")
        n = 0
        for trial in range(1, trials + 1):
            context.append(Turn(id=f"open{trial}", role="user", trial=trial, pinned=trial == 1,
                                parts=[TextPart(text=f"Trial {trial} of {trials}: lift the cube. " * 20)]))
            for d in range(decisions):
                fake.queue(REPLY[wire](tool=("observe", {}) if d < decisions - 1 else ("finish", {"reason": "done"})))
                prepared = await context.prepare("You control a robot by writing Python. " * 40, trial)
                decision = await participant.decide(prepared.request)
                context.append(decision.turn)
                context.record_usage(decision.usage)
                n += 1
                result = f"observation {n}: " + "joint positions and the cube pose; " * (result_chars // 36)
                context.append(result_turn(decision, id=f"r{n}", text=result, trial=trial))
        await participant.aclose()
        totals["slides"] = len(context.slides)
    assert fake.rejected == [], fake.rejected[:1]  # every request one the service documents as valid
    for u in fake.meter.billed:
        totals["requests"] += 1
        totals["input"] += u["input"]
        totals["read"] += u["read"]
        totals["write"] += u["write"]
    return totals


def billed(wire: str, t: dict[str, int], *, no_reads: bool = False) -> float:
    """Input-equivalent tokens: each kind weighed by its price multiplier (no_reads: every token at 1x)."""
    if no_reads:
        return float(t["input"] + t["read"] + t["write"])
    write, read = MULTIPLIERS[wire]
    return t["input"] + write * t["write"] + read * t["read"]


async def main(args: argparse.Namespace) -> None:
    os.environ[KEY_ENV] = "bench-key"
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rows = []
    for wire in PROFILES:
        on = await series(wire, True, args.trials, args.decisions, args.result_chars)
        off = on if wire == "openai" else await series(wire, False, args.trials, args.decisions, args.result_chars)
        with_cache = billed(wire, on)
        without = billed(wire, off, no_reads=True)
        rows.append((wire, PROFILES[wire][0], on, with_cache, without))
    print(f"{args.trials} trials x {args.decisions} decisions, retained conversation, ~{args.result_chars} chars per "
          "result (tokens: the fakes' bytes/4)\n")
    print("| profile | requests | slides | input tokens sent | cache reads | cache writes | billed input-equivalent "
          "with caching | without caching | saving |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for wire, model, t, on, off in rows:
        sent = t["input"] + t["read"] + t["write"]
        print(f"| {wire} {model} | {t['requests']} | {t['slides']} | {sent:,} | {t['read']:,} | {t['write']:,} | "
              f"{on:,.0f} | {off:,.0f} | {off / on:.1f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--decisions", type=int, default=35)
    parser.add_argument("--result-chars", type=int, default=2000)
    trio.run(main, parser.parse_args())
