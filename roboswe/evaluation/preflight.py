"""Preflight: what `roboswe run`, `admit` and `demo` check before any actor starts.

A run that cannot work should be refused in a second, not discovered trial after trial:
a missing key or a placeholder model id would otherwise start six actors, build scenes and
record five `incomplete` trials. Each check returns `Problem`s (what is wrong, where, how
to fix it); the command prints one message per problem and exits 2, having written
nothing and started nothing. `roboswe doctor` checks the whole machine instead.

Checks that need a simulator family's own knowledge (its assets) are the family's
(``Family.asset_problems``, sim/families.py); the online provider check makes one free call (a model lookup)
that proves the key and the model before the run spends anything.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

import roboswe.providers as _providers

if TYPE_CHECKING:
    from roboswe.providers import ProviderConfig
    from roboswe.sim.manifest import TaskManifest

HOSTED = _providers.hosted_kinds()  # the provider registry names every kind once
# The shipped configs carry `claude-EDIT-ME-model-id` and the like; such an id reaches the API and fails every trial.
PLACEHOLDER = re.compile(r"EDIT[-_ ]?ME", re.IGNORECASE)
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")
ONLINE_TIMEOUT_S = 15.0


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One reason a command cannot start: what is wrong, where (the input), how to fix it."""

    check: str  # which check found it, e.g. "provider key", "sandbox image"
    what: str
    where: str
    fix: str

    def message(self) -> str:
        return f"[{self.check}] {self.where}: {self.what}\n     fix: {self.fix}"


class PreflightRefused(Exception):
    """Preflight found problems; nothing was started or written."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(p.what for p in problems))
        self.problems = problems

    def report(self, command: str) -> str:
        """The refusal as printed: one numbered message per problem, then where to look further."""
        n = len(self.problems)
        lines = [f"roboswe {command}: refused before starting anything ({n} problem{'s' if n != 1 else ''}):"]
        lines += [f"  {i}. {p.message()}" for i, p in enumerate(self.problems, 1)]
        lines.append("  (`roboswe doctor` checks the whole machine)")
        return "\n".join(lines)


class Outcome(msgspec.Struct, kw_only=True):
    """What preflight found: problems refuse the command; notes are printed and the command goes on."""

    problems: list[Problem] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    backend: str | None = None  # the sandbox backend the run will use, when one is usable

    def raise_for_problems(self) -> None:
        if self.problems:
            raise PreflightRefused(self.problems)


# ---- provider (offline) -------------------------------------------------------------------------


def model_problems(config: ProviderConfig, where: str) -> list[Problem]:
    """An empty, placeholder or malformed model id (offline; the online check asks the provider)."""
    out = []
    for field, model in (("model", config.model), ("count_model", config.count_model if config.count_via == "google" else None)):
        if model is None:
            continue
        if not model:
            out.append(Problem(check="model id", where=f"{where} {field}", what="no model id is set",
                               fix=f"set {field} to an exact model pin (a dated snapshot from the provider's model list)"))
        elif PLACEHOLDER.search(model):
            out.append(Problem(check="model id", where=f"{where} {field}", what=f"{model!r} is the shipped placeholder",
                               fix=f"replace {field} with an exact model id from the provider's model list"))
        elif not MODEL_ID.match(model):
            out.append(Problem(check="model id", where=f"{where} {field}",
                               what=f"{model!r} is not a model id (letters, digits and . _ : / @ + - only; no spaces)",
                               fix=f"copy {field} exactly from the provider's model list"))
    return out


def key_problems(kind: str, variable: str, field: str, where: str, environ: Mapping[str, str]) -> list[Problem]:
    """The environment variable a config names for an API key: named, set, non-empty, no stray whitespace."""
    if not variable:
        return [Problem(check="provider key", where=f"{where} {field}", what="no key variable is named",
                        fix=f"set {field} to the NAME of the environment variable holding your {kind} key, "
                            f"e.g. {field} = \"{kind.upper()}_API_KEY\"")]
    value = environ.get(variable)
    if value is None or not value.strip():
        state = "unset" if value is None else "empty"
        return [Problem(check="provider key", where=f"{where} {field} = {variable!r}",
                        what=f"environment variable {variable} is {state}",
                        fix=f"export {variable}=<your {kind} API key> in the shell that runs roboswe "
                            "(the config holds only the variable's name)")]
    if value != value.strip():
        return [Problem(check="provider key", where=f"{where} {field} = {variable!r}",
                        what=f"environment variable {variable} has leading or trailing whitespace (e.g. a newline)",
                        fix=f"export {variable} again without the surrounding whitespace")]
    return []


def provider_problems(config: ProviderConfig | None, source: str, environ: Mapping[str, str] | None = None, *,
                      keys: bool = True) -> list[Problem]:
    """The [provider] section: model ids, key variables (``keys``), the local agent's class path."""
    if config is None:
        return []
    environ = os.environ if environ is None else environ
    where = f"{source} [provider]"
    if config.kind == "python":
        module, _, cls = config.agent.partition(":")
        if not module or not cls:
            return [Problem(check="participant", where=f"{where} agent", what=f"{config.agent!r} is not \"package.module:Class\"",
                            fix="set agent to the participant class, e.g. \"roboswe.agents.lift_demo:LiftDemoAgent\"")]
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return [Problem(check="participant", where=f"{where} agent", what=f"module {module!r} cannot be imported",
                            fix="install the package that provides it, or fix the module path")]
        return []
    out = model_problems(config, where)
    if keys:
        out += key_problems(config.kind, config.api_key_env, "api_key_env", where, environ)
        if config.kind == "openrouter" and config.count_via == "google":
            out += key_problems("google", config.count_api_key_env, "count_api_key_env", where, environ)
    return out


# ---- provider (online): one free call that proves the key and the model -------------------------


class Lookup(msgspec.Struct, frozen=True, kw_only=True):
    """One model-lookup request: a GET that costs nothing and needs a valid key and an existing model."""

    what: str  # "key" | "model"
    url: str
    headers: dict[str, str]


def lookups(config: ProviderConfig, key: str) -> list[Lookup]:
    """The free requests that prove ``config``'s key and model, at the same base URL the adapter uses."""
    model = config.model
    if config.kind == "anthropic":
        base = (config.base_url or "https://api.anthropic.com").rstrip("/")
        return [Lookup(what="model", url=f"{base}/v1/models/{model}",
                       headers={"x-api-key": key, "anthropic-version": "2023-06-01"})]
    if config.kind == "openai":
        base = (config.base_url or "https://api.openai.com/v1").rstrip("/")
        return [Lookup(what="model", url=f"{base}/models/{model}", headers={"authorization": f"Bearer {key}"})]
    if config.kind == "google":
        base = (config.base_url or "https://generativelanguage.googleapis.com").rstrip("/")
        name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
        return [Lookup(what="model", url=f"{base}/v1beta/{name}", headers={"x-goog-api-key": key})]
    if config.kind == "openrouter":
        # OpenRouter's /key proves the key; /models/AUTHOR/SLUG/endpoints is public and 404s for an unknown slug.
        base = (config.base_url or "https://openrouter.ai/api/v1").rstrip("/")
        slug = model.split(":", 1)[0]  # ":free", ":nitro" variants share the model's page
        return [Lookup(what="key", url=f"{base}/key", headers={"authorization": f"Bearer {key}"}),
                Lookup(what="model", url=f"{base}/models/{slug}/endpoints", headers={"authorization": f"Bearer {key}"})]
    return []


def provider_message(body: bytes) -> str:
    """The provider's own error message from an error body (each wire nests it as error.message)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", "replace").strip()
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return body[:300].decode("utf-8", "replace").strip()


def _refused(kind: str, status: int, body: bytes) -> bool:
    if status in (401, 403):
        return True
    if status == 404:
        # Only the provider's own JSON "not found" counts: a proxy's or a bare server's 404 page proves nothing.
        try:
            return isinstance(json.loads(body), dict)
        except ValueError:
            return False
    # Google answers a bad key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID), not 401.
    return kind == "google" and status == 400 and b"API_KEY_INVALID" in body


def online_problems(config: ProviderConfig | None, source: str, environ: Mapping[str, str] | None = None, *,
                    timeout_s: float = ONLINE_TIMEOUT_S) -> tuple[list[Problem], list[str]]:
    """Ask the provider once whether it knows the key and the model; refuse on 401/403/404.

    Returns (problems, notes): anything else (a 5xx, no network) is a note, and the run goes
    on, since its own calls retry and record such failures.
    """
    if config is None or config.kind not in HOSTED:
        return [], []
    environ = os.environ if environ is None else environ
    key = environ.get(config.api_key_env, "")
    problems: list[Problem] = []
    notes: list[str] = []
    for lookup in lookups(config, key):
        request = urllib.request.Request(lookup.url, headers={**lookup.headers, "accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - https or a configured base_url
                response.read()
            continue
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            notes.append(f"online preflight: could not reach {config.kind} at {lookup.url} ({reason}); "
                         "the run goes on and its first call will tell")
            break
        said = provider_message(body)
        if _refused(config.kind, status, body):
            if status == 404 and lookup.what == "model":
                what = f"the provider does not know model {config.model!r} (HTTP 404: {said})"
                fix = "set model in the run config to an id from the provider's model list"
                where = f"{source} [provider] model"
            else:
                what = f"the provider refused the key in {config.api_key_env} (HTTP {status}: {said})"
                fix = f"export a valid {config.kind} key in {config.api_key_env} (check it has access to {config.model!r})"
                where = f"{source} [provider] api_key_env = {config.api_key_env!r}"
            problems.append(Problem(check="provider online", where=where, what=what, fix=fix))
            break
        notes.append(f"online preflight: {config.kind} answered HTTP {status} at {lookup.url} ({said[:200]}); "
                     "the key and model are unproven, the run goes on")
        break
    return problems, notes


# ---- sandbox ----------------------------------------------------------------------------------


def image_problems(cache_dir: Path | None = None) -> tuple[Any, list[Problem]]:
    """The built sandbox image (or None) and what is wrong with it: missing, incomplete, stale."""
    from roboswe.sandbox.images import SandboxImage, default_cache_dir, stale_files

    cache = Path(cache_dir or default_cache_dir())
    current = cache / "current.json"
    build = "run `roboswe images build` (as root; setup.sh does it)"
    if not current.exists():
        return None, [Problem(check="sandbox image", where=str(cache), what="no sandbox image has been built", fix=build)]
    try:
        image = msgspec.json.decode(current.read_bytes(), type=SandboxImage)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
        return None, [Problem(check="sandbox image", where=str(current), what=f"unreadable image record ({e})", fix=build)]
    if not Path(image.rootfs, "usr/bin/python3").exists():
        return None, [Problem(check="sandbox image", where=image.rootfs,
                              what=f"the rootfs of image {image.short} is incomplete (no usr/bin/python3)", fix=build)]
    stale = stale_files(image)
    if stale:
        return image, [Problem(check="sandbox image", where=str(current),
                               what=f"image {image.short} is stale: {', '.join(stale)} changed since it was built, "
                                    "so the sandbox would run other robot code than this checkout",
                               fix="run `roboswe images build` to rebuild it (seconds when the base is cached)")]
    return image, []


def backend_problems(requested: str | None, image: Any, where: str) -> tuple[str | None, list[Problem]]:
    """The sandbox backend that will run the participant's scripts, or why none can."""
    from roboswe.sandbox import SandboxError, backend_class

    fixes = {"docker": "start dockerd (setup.sh does, as root) and run `roboswe images build`, or use -e bwrap",
             "bwrap": "apt-get install bubblewrap, or use -e docker"}
    if requested:
        try:
            why = backend_class(requested).available()
        except SandboxError as e:
            return None, [Problem(check="sandbox backend", where=where, what=str(e), fix="choose docker or bwrap")]
        if why:
            return None, [Problem(check="sandbox backend", where=where, what=f"{requested} is not usable here: {why}",
                                  fix=fixes.get(requested, "choose another backend"))]
        if requested == "docker" and image is not None and not image.docker_tag:
            return None, [Problem(check="sandbox backend", where=where, what="the sandbox image is not imported into Docker",
                                  fix="run `roboswe images build` while dockerd runs, or use -e bwrap")]
        return requested, []
    docker_why = backend_class("docker").available()
    if docker_why is None and (image is None or image.docker_tag):
        return "docker", []
    bwrap_why = backend_class("bwrap").available()
    if bwrap_why is None:
        return "bwrap", []
    return None, [Problem(check="sandbox backend", where=where,
                          what=f"no sandbox backend is usable: docker: {docker_why or 'image not imported'}; bwrap: {bwrap_why}",
                          fix="apt-get install bubblewrap, or start dockerd and run `roboswe images build`")]


def run_dir_problems(run_dir: Path, backend: str | None, image: Any) -> list[Problem]:
    """bwrap binds the workspace as the sandbox user, who must be able to traverse every parent of the run dir."""
    if backend != "bwrap" or os.geteuid() != 0:
        return []
    uid = image.uid if image is not None else "of the sandbox"
    for p in [run_dir, *run_dir.parents]:
        if p.exists() and not p.stat().st_mode & 0o001:
            return [Problem(check="run directory", where=str(run_dir),
                            what=f"not reachable by the sandbox user (uid {uid}): {p} has mode {p.stat().st_mode & 0o777:o}",
                            fix="choose --out under directories others may traverse (chmod o+x), or use -e docker")]
    return []


# ---- simulator families: their assets ----------------------------------------------------------


def asset_problems(manifests: Iterable[TaskManifest]) -> list[Problem]:
    """Each selected task's simulator family has its assets on this machine (its ``Family.asset_problems``)."""
    from roboswe.sim.families import family

    by_family: dict[str, list[TaskManifest]] = {}
    for m in manifests:
        by_family.setdefault(m.upstream.package, []).append(m)
    return [Problem(check="simulator assets", where=p.where, what=p.what, fix=p.fix)
            for name, tasks in sorted(by_family.items()) for p in family(name).asset_problems(tasks)]


# ---- everything a command needs ------------------------------------------------------------------


def preflight(*, provider: ProviderConfig | None, source: str, manifests: Iterable[TaskManifest] = (),
              backend: str | None = None, backend_source: str = "-e/--engine", run_dir: Path | None = None,
              sandbox: bool = True, remote_sim: bool = False, online: bool = False, keys: bool = True,
              environ: Mapping[str, str] | None = None,
              image_cache: Path | None = None) -> Outcome:
    """Every offline check a command needs, then (``online``) the provider lookup; starts nothing, writes nothing."""
    outcome = Outcome()
    offline_provider = provider_problems(provider, source, environ, keys=keys)
    outcome.problems += offline_provider
    if provider is not None and provider.kind in HOSTED and not offline_provider:
        outcome.notes += _providers.profile_lines(provider)  # the model profile the run will use (configs/models.toml)
    if sandbox:
        image, found = image_problems(image_cache)
        outcome.problems += found
        outcome.backend, found = backend_problems(backend, image, backend_source)
        outcome.problems += found
        if run_dir is not None:
            outcome.problems += run_dir_problems(run_dir, outcome.backend, image)
    if not remote_sim:  # a remote simulator's assets live on its own host
        outcome.problems += asset_problems(manifests)
    if online and not offline_provider:
        found, notes = online_problems(provider, source, environ)
        outcome.problems += found
        outcome.notes += notes
    return outcome


# A trial that ended for a configuration problem every later trial would repeat is a typed cause
# ("configuration"), given where the trial's end is composed: roboswe/evaluation/ends.py.

__all__ = [
    "Outcome", "PreflightRefused", "Problem", "asset_problems", "online_problems", "preflight", "provider_problems",
]
