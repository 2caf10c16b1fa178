"""Event logging: structlog configured once per process, at its entry point.

Every process of a run appends JSON lines to ``RUN_DIR/events.jsonl`` (one ``write`` per
line on an O_APPEND descriptor, so lines from different actors never interleave). Each
line carries time, level, actor, pid, event and the event's fields; actor and pid name the
process that logged it, except events *about* an actor (the supervisor's ``actor_died``),
which name that actor and pid and add ``by="supervisor"``. On a terminal the
same events are also rendered for people. Context (actor, run, series, trial) is bound
with ``bind_context`` and travels in contextvars.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import msgspec
import structlog

from roboswe.terminal import terminal_safe

EVENTS_FILE = "events.jsonl"
LEVELS = ("debug", "info", "warning", "error", "critical")
_FIRST_KEYS = ("time", "level", "actor", "pid", "event")

_json = msgspec.json.Encoder(enc_hook=str)


def bind_context(**context: Any) -> None:
    """Attach context (actor=, run=, series=, trial=) to every event of this task and its children."""
    structlog.contextvars.bind_contextvars(**context)


def unbind_context(*keys: str) -> None:
    structlog.contextvars.unbind_contextvars(*keys)


class _EventsFile:
    """Final-stage processor: append the event as one JSON line, then pass it on for the console."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def __call__(self, logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        ordered = {k: event[k] for k in _FIRST_KEYS if k in event}
        ordered.update((k, v) for k, v in event.items() if k not in ordered)
        os.write(self._fd, _json.encode(ordered) + b"\n")
        return event


def _add_pid(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    # An event about another process (the supervisor's actor_died) passes that actor and pid itself.
    event.setdefault("pid", os.getpid())
    return event


def _drop(logger: Any, method: str, event: dict[str, Any]) -> str:
    raise structlog.DropEvent


def _escape_for_terminal(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    # Rendered for people after the JSON line is written: a field may carry what a participant wrote
    # (a script path, a reason), and the console renderer prints strings as they are.
    return {k: terminal_safe(v, multiline=k == "exception") if isinstance(v, str) else v for k, v in event.items()}


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written, not when logging was configured: a command
    run in-process (tests, an embedding program) may have configured it while stderr was a capture
    that is closed by now."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(
    *,
    run_dir: str | Path | None,
    actor: str | None = None,
    level: str = "info",
    console: bool | None = None,
    cache: bool = False,
) -> None:
    """Configure structlog for this process; call once at the entry point.

    ``console=None`` renders to stderr only when stderr is a terminal. ``cache`` freezes each
    logger's configuration at its first use (faster; for actor processes): a command run
    in-process must not, or later reconfiguration, e.g. a test's ``capture_logs``, never
    reaches modules it already logged from. Raises ValueError for an unknown level.
    """
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    if console is None:
        console = sys.stderr.isatty()
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
        _add_pid,
        structlog.processors.format_exc_info,
    ]
    if run_dir is not None:
        processors.append(_EventsFile(Path(run_dir) / EVENTS_FILE))
    elif not console:
        # Nowhere else to go: keep JSON on stderr so events are never silently lost.
        processors.append(structlog.processors.JSONRenderer(serializer=lambda obj, **kw: _json.encode(obj).decode()))
        console = None  # rendered already
    if console:
        processors.append(_escape_for_terminal)
        processors.append(structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(), timestamp_key="time"))
    elif console is False:
        processors.append(_drop)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),
        cache_logger_on_first_use=cache,
    )
    if actor is not None:
        bind_context(actor=actor)
