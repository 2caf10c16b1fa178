"""Token usage and cost per trial, series and run, read from the stored provider responses.

Each provider reports usage in its own fields; they are read from the exact response bytes
in the messages table:

- Anthropic Messages: ``usage.input_tokens`` (uncached), ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``output_tokens``; thinking tokens are not reported apart.
- OpenAI Responses: ``usage.input_tokens`` (cached included), ``input_tokens_details.cached_tokens``,
  ``output_tokens`` (reasoning included), ``output_tokens_details.reasoning_tokens``.
- Google: ``usageMetadata.promptTokenCount`` (cached included), ``cachedContentTokenCount``,
  ``candidatesTokenCount`` and ``thoughtsTokenCount`` (billed as output).
- OpenRouter (chat completions): ``usage.prompt_tokens``, ``prompt_tokens_details.cached_tokens`` and
  ``cache_write_tokens``, ``completion_tokens``, ``completion_tokens_details.reasoning_tokens``, and the
  ``usage.cost`` OpenRouter charged, kept beside the price-table cost (docs: use-cases/usage-accounting).

A streamed Anthropic response (event stream) is read as the message it adds up to, so its cache
reads and writes count. Replies that stopped with the model's own outcome (a refusal, max_tokens,
an incomplete response, a safety block: the adapter's ``OUTCOME_STOPS``) are counted per kind.

A response that does not parse falls back to the usage the adapter recorded beside it; a
call with neither is counted as unreported. Totals: ``input`` includes cached input and
cache writes; ``output`` includes reasoning; ``reasoning`` is None where no call reported it.

Cost comes only from a ``[provider.price]`` table in the run config (per million tokens,
pinned with the run). Without one, or when a token kind was used that the table does not
price, or a call's usage was unreported, the cost is not reported and the reason says why:
it is never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import msgspec

from roboswe.protocol.recorder import RunPins

Rate = Annotated[float, msgspec.Meta(ge=0)]


class Price(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[provider.price]``: what the provider charges per million tokens, pinned with the run."""

    input: Rate  # uncached input tokens
    output: Rate  # output tokens, reasoning included
    cached_input: Rate | None = None  # cache reads; required when a response reports any
    cache_write: Rate | None = None  # cache writes (Anthropic); required when a response reports any
    currency: str = "USD"


class TokenUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Token totals over some calls."""

    calls: int = 0
    unreported_calls: int = 0  # answered calls without usage in the response or the adapter's record
    failed_calls: int = 0  # attempts that failed without a usage report (not billed as far as recorded)
    input: int = 0  # all input tokens, cached and cache writes included
    cached_input: int = 0
    cache_write: int = 0
    output: int = 0  # reasoning included
    reasoning: int | None = None  # None: no call reported reasoning tokens
    reported_cost: float | None = None  # what the provider said it charged (OpenRouter usage.cost); None: not said
    stops: dict[str, int] = msgspec.field(default_factory=dict)  # model-outcome stops by the provider's value

    def __add__(self, other: TokenUsage) -> TokenUsage:
        reasoning = None if self.reasoning is None and other.reasoning is None else \
            (self.reasoning or 0) + (other.reasoning or 0)
        reported = None if self.reported_cost is None and other.reported_cost is None else \
            (self.reported_cost or 0.0) + (other.reported_cost or 0.0)
        stops = {k: self.stops.get(k, 0) + other.stops.get(k, 0) for k in {**self.stops, **other.stops}}
        return TokenUsage(calls=self.calls + other.calls, unreported_calls=self.unreported_calls + other.unreported_calls,
                          failed_calls=self.failed_calls + other.failed_calls,
                          input=self.input + other.input, cached_input=self.cached_input + other.cached_input,
                          cache_write=self.cache_write + other.cache_write, output=self.output + other.output,
                          reasoning=reasoning, reported_cost=reported, stops=stops)


class Cost(msgspec.Struct, frozen=True, kw_only=True):
    amount: float | None  # None: not reported, see reason
    currency: str = ""
    reason: str = ""


class UsageSummary(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens and cost for the run, each series and each trial attempt."""

    price: Price | None
    run: TokenUsage
    run_cost: Cost
    series: dict[str, TokenUsage]
    series_cost: dict[str, Cost]
    trials: dict[str, TokenUsage]
    trial_cost: dict[str, Cost]


def _int(d: dict[str, Any], *path: str) -> int | None:
    value: Any = d
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return int(value) if isinstance(value, int | float) else None


def _from_response(provider: str, body: dict[str, Any]) -> TokenUsage | None:
    if provider == "anthropic" and isinstance(body.get("usage"), dict):
        u = body["usage"]
        read, write = _int(u, "cache_read_input_tokens") or 0, _int(u, "cache_creation_input_tokens") or 0
        return TokenUsage(calls=1, input=(_int(u, "input_tokens") or 0) + read + write, cached_input=read,
                          cache_write=write, output=_int(u, "output_tokens") or 0)
    if provider == "openai" and isinstance(body.get("usage"), dict):
        u = body["usage"]
        return TokenUsage(calls=1, input=_int(u, "input_tokens") or 0,
                          cached_input=_int(u, "input_tokens_details", "cached_tokens") or 0,
                          output=_int(u, "output_tokens") or 0,
                          reasoning=_int(u, "output_tokens_details", "reasoning_tokens"))
    if provider == "google" and isinstance(body.get("usageMetadata"), dict):
        u = body["usageMetadata"]
        thoughts = _int(u, "thoughtsTokenCount")
        return TokenUsage(calls=1, input=_int(u, "promptTokenCount") or 0,
                          cached_input=_int(u, "cachedContentTokenCount") or 0,
                          output=(_int(u, "candidatesTokenCount") or 0) + (thoughts or 0), reasoning=thoughts)
    if provider == "openrouter" and isinstance(body.get("usage"), dict):
        u = body["usage"]
        cost = u.get("cost")
        return TokenUsage(calls=1, input=_int(u, "prompt_tokens") or 0,
                          cached_input=_int(u, "prompt_tokens_details", "cached_tokens") or 0,
                          cache_write=_int(u, "prompt_tokens_details", "cache_write_tokens") or 0,
                          output=_int(u, "completion_tokens") or 0,
                          reasoning=_int(u, "completion_tokens_details", "reasoning_tokens"),
                          reported_cost=float(cost) if isinstance(cost, int | float) else None)
    return None


def _stop(provider: str, body: dict[str, Any]) -> str:
    """The reply's stop in the form the adapter reads it (read_response), "" when none is given."""
    if provider == "anthropic":
        return str(body.get("stop_reason") or "")
    if provider == "openai":
        reason = (body.get("incomplete_details") or {}).get("reason") if body.get("status") == "incomplete" else None
        return f"incomplete: {reason}" if reason else str(body.get("status") or "")
    if provider == "google":
        candidates = body.get("candidates") or []
        blocked = (body.get("promptFeedback") or {}).get("blockReason")
        return str(candidates[0].get("finishReason") or "") if candidates else (f"blocked: {blocked}" if blocked else "")
    if provider == "openrouter":
        return str(((body.get("choices") or [{}])[0]).get("finish_reason") or "")
    return ""


def _outcome_stops(provider: str, body: dict[str, Any]) -> dict[str, int]:
    from roboswe.providers import participant_class

    stop = _stop(provider, body)
    try:
        outcomes = getattr(participant_class(provider), "OUTCOME_STOPS", {}) if stop else {}
    except ImportError:
        outcomes = {}
    return {stop: 1} if any(stop == v or stop.startswith(v + ":") for v in outcomes) else {}


def _decoded(provider: str, response: bytes) -> Any:
    if provider == "anthropic" and response.lstrip().startswith((b"event:", b"data:")):
        from roboswe.providers.anthropic import assemble_stream

        try:
            response = assemble_stream(response)
        except Exception:  # noqa: BLE001 - a stream cut short or with an error event: read as not parsed
            return None
    try:
        return msgspec.json.decode(response)
    except msgspec.DecodeError:
        return None


def call_usage(provider: str, response: bytes | None, recorded: dict[str, Any], error: str = "") -> TokenUsage:
    """One provider call's usage, from its response bytes, else from the usage recorded beside them.

    A failed attempt counts only if its response reports usage (then it was billed)."""
    if response:
        body = _decoded(provider, response)
        if isinstance(body, dict):
            found = _from_response(provider, body)
            if found is not None:
                return msgspec.structs.replace(found, stops=_outcome_stops(provider, body))
    if recorded and any(recorded.get(k) for k in ("input_tokens", "output_tokens")):
        reasoning = recorded.get("reasoning_tokens")
        return TokenUsage(calls=1, input=int(recorded.get("input_tokens") or 0),
                          cached_input=int(recorded.get("cached_input_tokens") or 0),
                          output=int(recorded.get("output_tokens") or 0),
                          reasoning=int(reasoning) if reasoning else None)
    if error:
        return TokenUsage(failed_calls=1)
    return TokenUsage(calls=1, unreported_calls=1)


def cost(usage: TokenUsage, price: Price | None) -> Cost:
    """What the tokens cost at the pinned price; not reported (with the reason) rather than guessed."""
    if price is None:
        return Cost(amount=None, reason="no [provider.price] in the run config")
    if usage.unreported_calls:
        return Cost(amount=None, currency=price.currency,
                    reason=f"{usage.unreported_calls} call(s) without reported usage")
    missing = [name for name, tokens, rate in (("cached_input", usage.cached_input, price.cached_input),
                                               ("cache_write", usage.cache_write, price.cache_write))
               if tokens and rate is None]
    if missing:
        return Cost(amount=None, currency=price.currency,
                    reason=f"tokens of kind {', '.join(missing)} were used but [provider.price] has no rate for them")
    uncached = usage.input - usage.cached_input - usage.cache_write
    amount = (uncached * price.input + usage.cached_input * (price.cached_input or 0.0)
              + usage.cache_write * (price.cache_write or 0.0) + usage.output * price.output) / 1e6
    return Cost(amount=amount, currency=price.currency)


def run_price(pins: RunPins) -> Price | None:
    """The price pinned in a run's recorded config, if any."""
    price = pins.provider.get("price")
    return msgspec.convert(price, Price) if price else None


def usage_summary(calls: Iterable[tuple[str, str, str, bytes | None, dict[str, Any], str]],
                  price: Price | None) -> UsageSummary:
    """Totals from (series_id, trial_id, provider, response, recorded usage, error) per provider call."""
    trials: dict[str, TokenUsage] = {}
    series: dict[str, TokenUsage] = {}
    for series_id, trial_id, provider, response, recorded, error in calls:
        u = call_usage(provider, response, recorded, error)
        trials[trial_id] = trials.get(trial_id, TokenUsage()) + u
        series[series_id] = series.get(series_id, TokenUsage()) + u
    run = sum(series.values(), TokenUsage())
    return UsageSummary(price=price, run=run, run_cost=cost(run, price), series=series,
                        series_cost={k: cost(v, price) for k, v in series.items()}, trials=trials,
                        trial_cost={k: cost(v, price) for k, v in trials.items()})
