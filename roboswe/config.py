"""Typed run configuration decoded from TOML.

Each section is a frozen msgspec Struct with defaults, so an empty file (or none) is a
valid config, and unknown keys fail loudly. To add a section, define a Struct here (or in
your package and import it) and add one field to ``RunConfig`` with a default factory.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import tomllib
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from roboswe.evaluation.series_config import SeriesConfig
from roboswe.providers._config import ProviderConfig

ACTOR_NAMES = ("coordinator", "simulator", "sandbox_bridge", "provider_client", "context_manager", "recorder")
# One of each per fleet worker: a worker runs one series at a time with its own simulator, sandbox
# bridge and context window. With more than one worker, instance k (1-based) is named "<kind>.<k>".
WORKER_ACTORS = ("simulator", "sandbox_bridge", "context_manager")


class ConfigError(Exception):
    """A run config that cannot be used; the message names the file and the bad key."""


class Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every config section: typos in keys fail instead of being ignored."""


Seconds = Annotated[float, msgspec.Meta(gt=0)]


class RestartPolicy(Section, frozen=True, kw_only=True):
    """How the supervisor treats one actor's death: restart with exponential back-off, then give up."""

    max_restarts: Annotated[int, msgspec.Meta(ge=0)] = 3
    backoff_initial: Seconds = 0.5
    backoff_factor: Annotated[float, msgspec.Meta(ge=1)] = 2.0
    backoff_max: Seconds = 10.0

    def backoff(self, restart: int) -> float:
        """Delay before restart number ``restart`` (0-based)."""
        return min(self.backoff_max, self.backoff_initial * self.backoff_factor**restart)


class SupervisorConfig(Section, frozen=True, kw_only=True):
    """Start, watch and stop the actors."""

    ready_timeout: Seconds = 60.0
    stop_grace: Seconds = 10.0
    # 0.75 s x 3 keeps heartbeat-loss detection under 3 s.
    heartbeat_interval: Seconds = 0.75
    heartbeat_liveness: Annotated[int, msgspec.Meta(ge=1)] = 3
    restart: RestartPolicy = msgspec.field(default_factory=RestartPolicy)
    # Per-actor override of `restart`, e.g. [supervisor.actors.simulator] max_restarts = 5
    actors: dict[str, RestartPolicy] = msgspec.field(default_factory=dict)

    def policy_for(self, actor: str) -> RestartPolicy:
        """The actor's policy; a worker instance ("simulator.2") falls back to its kind's."""
        return self.actors.get(actor) or self.actors.get(actor.partition(".")[0], self.restart)


class TransportConfig(Section, frozen=True, kw_only=True):
    """Where actors listen. Empty means ipc sockets inside the run dir."""

    # actor name -> endpoint, e.g. simulator = "tcp://10.0.0.5:5555" for a remote simulator
    endpoints: dict[str, str] = msgspec.field(default_factory=dict)
    heartbeat_interval: Seconds = 1.0
    heartbeat_liveness: Annotated[int, msgspec.Meta(ge=1)] = 3


class LoggingConfig(Section, frozen=True, kw_only=True):
    level: str = "info"


class FleetConfig(Section, frozen=True, kw_only=True):
    """How many series run at once on this machine (`roboswe run --workers N` overrides ``workers``)."""

    workers: Annotated[int, msgspec.Meta(ge=1, le=64)] | None = None  # None: ``default_workers()``
    # Requests the provider client has in flight at once, across every worker: set it to what the key's
    # rate limit allows. None: no cap beyond the workers' own (a series has one decision in flight at most).
    provider_concurrency: Annotated[int, msgspec.Meta(ge=1)] | None = None
    # Place the workers on a Ray cluster ("auto" or HOST:PORT; `roboswe run --ray` overrides): roboswe/fleet/.
    # What each worker's Ray actor requests: a stepping scene takes a CPU, its sandboxed code the other.
    ray: str | None = None
    ray_cpus: Annotated[float, msgspec.Meta(gt=0)] = 2.0
    ray_memory_gib: Annotated[float, msgspec.Meta(gt=0)] = 3.0  # as GIB_PER_WORKER below
    ray_gpus: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # e.g. 0.25: four workers render on one GPU
    # A worker Ray has not placed after this long (no node has room now) is reported: an event, `roboswe status`.
    ray_pending_notice: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    # Where a Ray worker's workspaces live: "node", on the worker's own node (its bridge applies the file
    # operations; checkpoints are carried to the recorder, sha256 read back), so the nodes need no shared
    # directory; "shared", under RUN_DIR, which must then be the same directory at the same path on every
    # node. A run without --ray keeps them under RUN_DIR either way.
    workspaces: Literal["node", "shared"] = "node"


class RleRunConfig(Section, frozen=True, kw_only=True):
    """An RLE-Bench run ([rle]): one development session per task instead of series (roboswe/rle/run.py)."""

    tasks: list[str]  # "rle/pose-rgbd" (a shipped task, configs/tasks/rle/) or a task TOML's path
    # The hidden salt's file: only the verifier and the simulator (which draws a hidden instance, where a
    # family has one) read it; the records hold its hash. None: the public CI salt, labelled public.
    salt_file: str | None = None


GIB_PER_WORKER = 3.0  # a robosuite scene (~1.5 GiB resident) plus its sandbox and the worker's context window


def default_workers(cores: int | None = None, memory_gib: float | None = None) -> tuple[int, str]:
    """Workers for this machine and the rule that gave them: one per two cores, one per 3 GiB of memory.

    Two cores per worker because a stepping simulator takes one and the sandboxed participant
    code, the recorder and the provider client share the rest.
    """
    import os

    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    if memory_gib is None:
        memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    by_cores, by_memory = max(1, cores // 2), max(1, int(memory_gib // GIB_PER_WORKER))
    workers = min(by_cores, by_memory)
    return workers, (f"{workers} = min({cores} cores // 2, {memory_gib:.0f} GiB // {GIB_PER_WORKER:g} GiB); "
                     "set [fleet] workers or --workers to change it")


def worker_name(kind: str, worker: int, workers: int) -> str:
    """The actor name of worker ``worker`` (1-based) of kind ``kind``; a single worker keeps the plain name."""
    return kind if workers == 1 else f"{kind}.{worker}"


def actor_kind(name: str) -> str:
    """The actor module an actor name runs: "simulator.2" -> "simulator"."""
    kind, dot, number = name.partition(".")
    if dot and (kind not in WORKER_ACTORS or not number.isdigit()):
        raise ValueError(f"actor name {name!r}: expected one of {', '.join(ACTOR_NAMES)}, "
                         f"or <kind>.<n> for a worker kind ({', '.join(WORKER_ACTORS)})")
    if kind not in ACTOR_NAMES:
        raise ValueError(f"actor name {name!r}: expected one of {', '.join(ACTOR_NAMES)}")
    return kind


class RunConfig(Section, frozen=True, kw_only=True):
    """Everything a run needs to know, recorded with the run."""

    supervisor: SupervisorConfig = msgspec.field(default_factory=SupervisorConfig)
    transport: TransportConfig = msgspec.field(default_factory=TransportConfig)
    logging: LoggingConfig = msgspec.field(default_factory=LoggingConfig)
    # The participant: [provider] kind = one of roboswe.providers.provider_kinds()
    provider: ProviderConfig | None = None
    # Trials per series, retention mode, tightened budgets: [series] (roboswe/series_config.py)
    series: SeriesConfig = msgspec.field(default_factory=SeriesConfig)
    # Series at once on this machine: [fleet] workers = N
    fleet: FleetConfig = msgspec.field(default_factory=FleetConfig)
    # An RLE-Bench run: [rle] tasks = ["rle/pose-rgbd"]; no admitted file, no series (docs/rle-bench.md)
    rle: RleRunConfig | None = None


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a run config TOML file (None gives the defaults) with ``--set KEY=VALUE`` overrides applied;
    raises ConfigError naming file and key."""
    if path is None and not overrides:
        return RunConfig()
    data = config_text(path, overrides)
    path = Path(path) if path is not None else Path("the default config")
    try:
        config = msgspec.toml.decode(data, type=RunConfig)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{path}: {_explain(str(e))}") from None
    except msgspec.DecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    _check_actor_names(path, config)
    return config


def _explain(message: str) -> str:
    # msgspec says "Object contains unknown field `foo` - at `$.supervisor`"; make the key a TOML path.
    what, _, where = message.partition(" - at `$")
    where = where.rstrip("`").lstrip(".")
    if "unknown field" in what:
        key = what.split("`")[1]
        return unknown_key([*where.split("."), key] if where else [key])
    if where:
        return f"bad value for `{where}`: {what}"
    return message


def _check_actor_names(path: Path, config: RunConfig) -> None:
    for section, names in (("supervisor.actors", config.supervisor.actors), ("transport.endpoints", config.transport.endpoints)):
        for name in names:
            try:
                actor_kind(name)
            except ValueError:
                raise ConfigError(f"{path}: unknown actor `{section}.{name}`; expected one of {', '.join(ACTOR_NAMES)} "
                                  f"or a worker instance such as simulator.2") from None


# ---- --set KEY=VALUE: any key of the config, checked against the sections above ---------------

SECTION_DOCS = {"provider": "docs/providers.md", "series": "docs/series.md", "fleet": "docs/fleet.md",
                "rle": "docs/rle-bench.md", "supervisor": "docs/actors.md", "transport": "docs/actors.md",
                "logging": "docs/actors.md"}


def _section_type(tp: Any) -> Any:
    """The Struct a field holds (an optional section's too), dict for a free-form table, else None."""
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    for t in typing.get_args(tp) if union else (tp,):
        if isinstance(t, type) and issubclass(t, msgspec.Struct):
            return t
        if t is dict or typing.get_origin(t) is dict:
            return dict
    return None


def unknown_key(path: list[str]) -> str:
    """The message for a key no section has: the closest names where it went wrong, and the section's docs."""
    cls: Any = RunConfig
    for depth, name in enumerate(path):
        fields = {f.name: f.type for f in msgspec.structs.fields(cls)}
        if name not in fields:
            where = ".".join(path[:depth + 1])
            close = difflib.get_close_matches(name, list(fields), n=3, cutoff=0.6)
            named = " or ".join("`" + ".".join([*path[:depth], c]) + "`" for c in close)
            hint = f"; did you mean {named}?" if close else ""
            doc = SECTION_DOCS.get(path[0], "README.md")
            return f"unknown key `{where}`{hint} (the keys are in {doc})"
        cls = _section_type(fields[name])
        if cls in (None, dict):
            break
    return f"unknown key `{'.'.join(path)}`"


def _check_key(path: list[str]) -> None:
    """Raises ConfigError unless ``path`` names a key of the config (anything under a free-form table is one)."""
    cls: Any = RunConfig
    for depth, name in enumerate(path):
        if cls is dict:
            return
        fields = {f.name: f.type for f in msgspec.structs.fields(cls)} if cls is not None else {}
        if name not in fields:
            raise ConfigError(f"--set {'.'.join(path)}: {unknown_key(path)}")
        cls = _section_type(fields[name])
        if cls not in (None, dict) and depth == len(path) - 1:
            raise ConfigError(f"--set {'.'.join(path)}: a section, not a key; set its keys, e.g. "
                              f"{'.'.join(path)}.{msgspec.structs.fields(cls)[0].name}=...")


def _value(text: str) -> Any:
    """A --set VALUE as TOML (42, true, [1, 2], "quoted"); anything else is the string as written."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``data`` (a parsed config) with each KEY=VALUE set; raises ConfigError for a bad one."""
    for item in overrides:
        key, eq, text = item.partition("=")
        path = [p.strip() for p in key.split(".")]
        if not eq or not all(path):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. provider.model=claude-sonnet-5")
        _check_key(path)
        table = data
        for name in path[:-1]:
            table = table.setdefault(name, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {item!r}: `{name}` is a value in the config, not a table")
        table[path[-1]] = _value(text.strip())
    return data


def config_text(path: str | Path | None, overrides: Sequence[str] = ()) -> bytes:
    """The run config's TOML as a run records it: the file's bytes, or with overrides, the merged config
    written out (its first line names the file and the overrides)."""
    try:
        data = Path(path).read_bytes() if path is not None else b""
    except OSError as e:
        raise ConfigError(f"{path}: cannot read run config: {e.strerror}") from None
    if not overrides:
        return data
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    merged = apply_overrides(parsed, overrides)
    head = f"# {path or 'the default config'} with --set {' --set '.join(overrides)}".replace("\n", " ")
    text = "\n".join([head, *_toml_lines(merged, ())]) + "\n"
    assert tomllib.loads(text) == merged, "the written config must read back as the merged one"
    return text.encode()


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise ConfigError(f"a config value of type {type(v).__name__} cannot be written back as TOML")


def _toml_lines(data: dict[str, Any], prefix: tuple[str, ...]) -> list[str]:
    tables = {k: v for k, v in data.items() if isinstance(v, dict) and v}
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items() if k not in tables]
    for k, v in tables.items():
        lines += ["", "[" + ".".join(_toml_key(p) for p in (*prefix, k)) + "]", *_toml_lines(v, (*prefix, k))]
    return lines
