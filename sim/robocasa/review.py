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
``python -m roboswe.sim.robocasa.review CLASS...`` prints one JSON line, class -> record.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..manifest import TaskManifest


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


def reviews(manifests: list[TaskManifest], timeout: float, env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """task id -> predicate review record of each kitchen task, the live digests read in one fresh process
    (started with ``env``); a process that fails or times out makes every record ``unreadable``, naming why."""
    if not manifests:
        return {}
    envs = sorted({m.upstream.env for m in manifests})
    live: dict[str, Any] = {}
    problem = None
    try:
        proc = subprocess.run([sys.executable, "-m", "roboswe.sim.robocasa.review", *envs], check=False,
                              capture_output=True, text=True, env=dict(env), timeout=timeout)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("REVIEW ")]
        if lines:
            live = json.loads(lines[-1][len("REVIEW "):])
        else:
            problem = f"review process exited {proc.returncode}: {' | '.join(proc.stderr.strip().splitlines()[-3:])}"
    except subprocess.TimeoutExpired:
        problem = f"review process exceeded {timeout:.0f} s"
    out = {}
    for m in manifests:
        found = live.get(m.upstream.env)
        error = problem or (found or {}).get("error") or ("no answer" if found is None else None)
        out[m.id] = review_record(None if error else found, m.success.review, m.success.predicate_sha256, error)
    return out


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
