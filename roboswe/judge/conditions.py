"""Per-task observable conditions and evidence guides, and the judge config (configs/judges/).

The conditions of a task live in configs/judges/conditions/<task id>.toml, not in the task manifest: a
manifest's digest is a series' pin, an admitted set's entry and a dataset digest, so a table added there
would re-label every admitted set and recorded run, and editing a condition would change a task's
protocol identity. The judge records the conditions file's sha256 instead.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

import msgspec

from roboswe.providers import ProviderConfig
from roboswe.records.schema import sha256_hex

JUDGES_DIR = Path(__file__).resolve().parents[2] / "configs" / "judges"
CONDITIONS_DIR = JUDGES_DIR / "conditions"
SCRIPTED_CONFIG = JUDGES_DIR / "scripted.toml"

Identifier = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=600)]


class JudgeError(ValueError):
    """A judge config or conditions file that cannot be used, or a trial that cannot be judged; says which."""


class Condition(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One observable condition: what the judge is asked, and the part of the predicate it stands for."""

    id: Identifier
    text: Text  # plain language, as the judge reads it
    part: Text  # which part of the mechanical predicate (kept in the record, not sent to the judge)


class TaskConditions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A task's conditions (all parts of its predicate: a mechanical success means every one holds)."""

    task: str
    predicate: Text  # the mechanical predicate these conditions decompose, named where it is coded
    cameras: list[str] = msgspec.field(default_factory=list)  # rendered cameras; empty: the manifest's video cameras
    evidence: dict[str, Text]  # camera -> what it shows (the evidence guide)
    conditions: Annotated[list[Condition], msgspec.Meta(min_length=1, max_length=12)]


def load_conditions(task: str, directory: Path = CONDITIONS_DIR) -> tuple[TaskConditions, str] | None:
    """(the task's conditions, the file's sha256), or None when the task has no conditions file."""
    path = Path(directory) / f"{task}.toml"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        conditions = msgspec.convert(tomllib.loads(data.decode()), TaskConditions)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
        raise JudgeError(f"{path}: {e}") from None
    ids = [c.id for c in conditions.conditions]
    if conditions.task != task or len(set(ids)) != len(ids):
        raise JudgeError(f"{path}: task must be {task!r} (is {conditions.task!r}) and condition ids unique ({ids})")
    if unguided := [c for c in conditions.cameras if c not in conditions.evidence]:
        raise JudgeError(f"{path}: cameras {unguided} have no [evidence] line saying what they show")
    return conditions, sha256_hex(data)


class Judge(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[judge]``: its name and the view rule (the final recorded step and ``views - 1`` evenly spaced before it)."""

    name: Identifier
    views: Annotated[int, msgspec.Meta(ge=2, le=8)] = 3


class JudgeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A judge config file: ``[judge]`` and the ``[provider]`` that answers (a run config's section, the same fields)."""

    judge: Judge
    provider: ProviderConfig


def load_judge_config(path: Path = SCRIPTED_CONFIG) -> tuple[JudgeConfig, str]:
    """(the judge config, the file's sha256); raises JudgeError naming the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
        return msgspec.convert(tomllib.loads(data.decode()), JudgeConfig), sha256_hex(data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
        raise JudgeError(f"{path}: {e}") from None
