"""Predicate review: which code decides a RoboCasa task's success, pinned by the digest of its source.

Success in roboswe is RoboCasa's own ``_check_success`` held for the manifest's interval. A
person reads that method and writes one line saying what it checks (the manifest's
``[success] review``), together with the sha256 of the source they read
(``[success] predicate_sha256``). Admission recomputes the digest from the installed package:
a task whose predicate changed since its review is excluded until someone reads it again.

The digest covers the method the task class resolves to (``inspect.getsource`` of
``cls._check_success``, which may be defined on a base class), not the helpers it calls
(``OU.check_obj_in_receptacle``, a fixture's ``is_open``); those are pinned by the RoboCasa
version in the manifest and the fingerprint.

Importing RoboCasa fixes its asset root for the process, so admission asks in a fresh process:
``python -m roboswe.sim.robocasa_review CLASS...`` prints one JSON line, class -> record.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from typing import Any


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def predicate_source(env: str) -> dict[str, Any]:
    """{defined_in, source_sha256, lines} of a RoboCasa task class's ``_check_success``; raises KeyError if unknown."""
    from robocasa.environments.kitchen.kitchen import REGISTERED_KITCHEN_ENVS

    cls = REGISTERED_KITCHEN_ENVS.get(env)
    if cls is None:
        raise KeyError(f"RoboCasa has no task class {env!r}")
    method = cls._check_success
    source = inspect.getsource(method)
    return {"defined_in": f"{method.__module__}.{method.__qualname__}", "source_sha256": source_digest(source),
            "lines": len(source.splitlines())}


def review_record(live: dict[str, Any] | None, review: str, reviewed_sha256: str, problem: str | None = None) -> dict[str, Any]:
    """What admission writes: the live digest beside the reviewed one, and whether the review still covers it."""
    if live is None:
        return {"review": review, "reviewed_sha256": reviewed_sha256, "status": "unreadable", "problem": problem or ""}
    status = "current" if live["source_sha256"] == reviewed_sha256 else "changed since review"
    return {**live, "review": review, "reviewed_sha256": reviewed_sha256, "status": status}


def main(argv: list[str]) -> None:
    out: dict[str, Any] = {}
    for env in argv:
        try:
            out[env] = predicate_source(env)
        except Exception as e:  # noqa: BLE001  (each class's problem is reported, not raised)
            out[env] = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write("\nREVIEW " + json.dumps(out, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
