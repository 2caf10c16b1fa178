"""Claims the README and DESIGN make that no other test held them to.

- An exchange too large for the input budget is an error, never a silent truncation: the trial
  ends ``incomplete`` (reason ``context_overflow``), no request over the budget reaches the participant,
  and the series stops there with the overflow evidence in its records (a resume does not go on).
- ``roboswe run`` refuses (exit 2, nothing written) a config without ``[provider]``.
- Admission excludes a scene whose fingerprint differs between two fresh processes.
- Without ``-e``, the sandbox backend is docker when a daemon answers and the image is imported, else bwrap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.protocol.participant import DecisionRequest, Finish, ListFiles, ReadFile, WriteFile
from roboswe.providers._estimate import estimate_request
from roboswe.records.reader import RunReader

from .harness import (
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)

ROOT = Path(__file__).resolve().parents[2]


# ---- context overflow -----------------------------------------------------------------------------


class OversizedReadAgent:
    """Trial 1: writes a file far larger than the input budget (its arguments reach the conversation as a
    bounded summary: providers/local.py), then reads it back: that exchange, the newest, is larger than the
    budget and may not leave the request. Later trials list files and finish. Keeps every request it was given."""

    def __init__(self, chars: int):
        self.chars = chars
        self.requests: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest):
        self.requests.append(request)
        mine = sum(1 for t in request.conversation if t.role == "assistant" and t.trial == request.trial)
        if request.trial == 1:
            return WriteFile(path="big.txt", content="x" * self.chars) if mine == 0 else ReadFile(path="big.txt")
        return ListFiles() if mine == 0 else Finish(reason="done")


async def test_an_exchange_larger_than_the_budget_stops_the_series_with_its_evidence_never_truncated(tmp_path):
    window, output = 24_000, 4096
    budget = window - output - 4096
    agent = OversizedReadAgent(chars=40 * budget)  # ~13 tokens per 40 chars: several budgets in one exchange
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    task = admitted_task(reach_manifest())
    plan = series_plan(run_dir, task, trials=3)
    with trio.fail_after(60):
        async with peers(run_dir, agent, context_window=window) as links:
            await record_run(links)
            ends = await run_series(links, plan, Progress(), reader_factory(run_dir))
            # A resume (with retries asked for too) does not go on past the stop, nor re-run the overflowed trial.
            resumed = await run_series(links, plan, Progress(), reader_factory(run_dir), retry_incomplete=True)
    assert len(ends) == 1 and resumed == []  # trials 2 and 3 never ran
    first = ends[0]
    assert (first.outcome, first.cause) == ("incomplete", "context_overflow") and first.detail, first.reason
    assert f"the input budget is {budget}" in first.reason
    # The participant decided twice in trial 1 (the write, the read); the request that would have carried the
    # read's result did not fit and was not sent in any cut-down form.
    trial_one = [r for r in agent.requests if r.trial == 1]
    assert len(trial_one) == 2
    for request in agent.requests:  # every request the participant saw fits the budget by the harness's own estimate
        assert estimate_request(request) <= budget, (request.trial, estimate_request(request))
    with RunReader(run_dir) as reader:
        (view, *later) = reader.trials(plan.series_id)
        ops = reader.operations(view.trial_id)
        assert [o.operation for o in ops] == ["write_file", "read_file"] and ops[0].feedback.get("bytes") == 40 * budget
        assert (view.end.outcome, view.end.reason) == (first.outcome, first.reason)
        assert later == []
        (stopped,) = [e for _, e in reader.events(event="series_stopped")]
        (overflow,) = [e for _, e in reader.events(event="context_overflow", trial_id=view.trial_id)]
        assert stopped.trial_id == view.trial_id
        assert stopped.data["reason"] == "context_overflow" and stopped.data["remaining"] == [2, 3]
        evidence = stopped.data["evidence"]
        assert evidence == {k: v for k, v in overflow.data.items() if k != "detail"}
        assert evidence["series"] == plan.series_id and evidence["trial"] == 1
        assert evidence["budget"] == budget and evidence["units"] > budget
        # The indivisible exchange is the read and its result: the assistant turn that read big.txt and the
        # user turn answering it, by their recorded turn ids, and alone larger than B.
        turns = {e.data["turn"]["id"]: e.data["turn"] for _, e in reader.events(event="turn", trial_id=view.trial_id)}
        (read_exchange,) = [ids for ids, units in zip(evidence["kept_exchanges"], evidence["kept_units"], strict=True)
                            if units > budget]
        assert [turns[i]["role"] for i in read_exchange] == ["assistant", "user"]
        assert turns[read_exchange[0]]["parts"][0]["name"] == "read_file"


# ---- run refuses a config without [provider] ----------------------------------------------------------


def _roboswe(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roboswe.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "PYTHONHASHSEED": "0"})


@pytest.mark.parametrize("config_text", ["[series]\ntrials = 1\n", None], ids=["no_provider_section", "no_config"])
def test_run_refuses_a_config_without_a_provider_section_and_writes_nothing(tmp_path, config_text):
    from roboswe.evaluation.admission import FORMAT, Admitted, write_admitted

    admitted = tmp_path / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "t", "tasks": ["fake-reach"]}, created_at="test", host={},
                            run_config_sha256=None, tasks=[admitted_task(reach_manifest())]), admitted)
    args = ["run", str(admitted), "--out", str(tmp_path / "out"), "--no-preflight"]
    if config_text is not None:
        (tmp_path / "run.toml").write_text(config_text)
        args += ["--config", str(tmp_path / "run.toml")]
    proc = _roboswe(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    where = str(tmp_path / "run.toml") if config_text is not None else "the default config"
    assert f"{where} has no [provider] section" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["admitted.json"] + (["run.toml"] if config_text else []))


# ---- admission excludes a scene whose fingerprint differs between processes ---------------------------

# Imported first in each fresh probe process (PYTHONPATH): the fake scene's model identity then carries the
# process id, as a scene built from hash-ordered or time-seeded data would differ from process to process.
PER_PROCESS_SCENE = """
import os
from roboswe.sim.fake import backend as fake_backend
fake_backend.VERSION = f"fake-pid{os.getpid()}"
"""


def test_admission_excludes_a_scene_whose_fingerprint_differs_between_two_fresh_processes(tmp_path, monkeypatch):
    from roboswe.evaluation.admission import admit_task
    from roboswe.sim.manifest import manifest_from_builtins

    manifest = manifest_from_builtins(reach_manifest())
    steady = admit_task(manifest, hold_steps=20, timeout=120)
    assert steady.status == "admitted", steady.reason  # the same scene, deterministic: admitted

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PER_PROCESS_SCENE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]))
    varying = admit_task(manifest, hold_steps=20, timeout=120)
    assert varying.status == "excluded" and varying.fingerprint is None
    assert varying.reason.startswith("fingerprint differs between two fresh processes ("), varying.reason
    a, b = varying.reason.split("(", 1)[1].split(")", 1)[0].split(" vs ")
    assert a != b and len(a) == len(b) == 16
    assert steady.fingerprint["digest"][:16] not in (a, b)  # the hook really changed what was built


# ---- automatic sandbox backend choice ---------------------------------------------------------------


def test_without_a_request_the_backend_is_docker_when_it_answers_and_the_image_is_imported_else_bwrap(monkeypatch):
    from roboswe.sandbox import backend_class
    from roboswe.sandbox._backend import SandboxError, choose_backend
    from roboswe.sandbox.images import SandboxImage

    docker, bwrap = backend_class("docker"), backend_class("bwrap")
    imported = SandboxImage(digest="d" * 64, rootfs="/nonexistent", tarball="/nonexistent.tar",
                            docker_tag="roboswe-sandbox:dddddddddddddddd", uid=60123, gid=60123, built_at=0.0,
                            build_seconds=0.0)
    not_imported = SandboxImage(**{**{f: getattr(imported, f) for f in imported.__struct_fields__}, "docker_tag": None})

    def set_available(cls, why):
        monkeypatch.setattr(cls, "available", classmethod(lambda c: why))

    set_available(docker, None)
    set_available(bwrap, None)
    assert choose_backend(None, imported) == "docker"
    assert choose_backend(None, not_imported) == "bwrap"
    assert choose_backend("bwrap", imported) == "bwrap"
    set_available(docker, "no Docker daemon answers")
    assert choose_backend(None, imported) == "bwrap"
    with pytest.raises(SandboxError, match="'docker' is not usable here: no Docker daemon answers"):
        choose_backend("docker", imported)
    set_available(bwrap, "bwrap is not installed")
    with pytest.raises(SandboxError, match="no sandbox backend is usable"):
        choose_backend(None, imported)
    set_available(docker, None)
    with pytest.raises(SandboxError, match="not imported into Docker"):
        choose_backend("docker", not_imported)

