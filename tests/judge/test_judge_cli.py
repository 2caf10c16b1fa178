"""`roboswe judge` end to end on the real GR1 close-drawer scene: recorded states that close the drawer or
leave it open, rendered by the video renderer and judged by the scripted judge in its own process; the
records, results.json, the report and the viewer's data show the verdicts beside the mechanical outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from roboswe.judge.summary import LABEL
from roboswe.records.artifacts import build_results, write_results
from roboswe.records.reader import RunReader
from roboswe.records.report import run_summary

from .golden import FORBIDDEN
from .scene import scene_trials, write_run


def roboswe(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}  # as a user runs it: it re-executes itself
    return subprocess.run([sys.executable, "-m", "roboswe.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600, check=False)


def test_roboswe_judge_on_the_real_scene_agrees_flags_the_wrong_record_and_skips_what_it_cannot_judge(tmp_path):
    manifest, fp, states = scene_trials()
    run_dir = tmp_path / "run"
    closes, stays = states["closes"], states["stays open"]
    ids = write_run(run_dir, manifest, fp, {"closes": (closes, "success"), "stays open": (stays, "failure"),
                                            "recorded wrongly": (stays, "success"), "cut short": (stays, "incomplete")})
    with RunReader(run_dir) as reader:
        write_results(run_dir, build_results(reader, "r1"))

    proc = roboswe("judge", str(run_dir), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert len(out["judged"]) == 3
    assert [(s["trial_id"], "no mechanical outcome" in s["why"]) for s in out["skipped"]] == [(ids[3], True)]
    trials = out["summary"]["trials"]
    assert [(trials[t]["outcome"], [(c["verdict"], c["comparison"]) for c in trials[t]["conditions"]])
            for t in ids[:3]] == [("success", [("supported", "agree")]), ("failure", [("contradicted", "agree")]),
                                  ("success", [("contradicted", "contradiction")])]
    assert out["summary"]["flagged"] == [ids[2]]

    with RunReader(run_dir) as reader:
        records = reader.judgements()
        summary = run_summary(reader, "r1")
        (artifact,) = [a for a in reader.artifacts(run_id="r1") if a.artifact == "results"]
    # the recorded request bytes of every trial: pictures by digest, no word of the mechanical record
    for r in records:
        assert [(v["moment"], v["camera"]) for v in r.views] == [
            (m, c) for m in (1, 2, 3) for c in ("frontview", "sideview")]
        assert [v["step"] for v in r.views][::2] == [0, 10, 20]  # of 21 recorded steps: the stated rule
        for data in (r.request, *(a.request for a in r.attempts)):
            for word in FORBIDDEN:
                assert word not in data.lower(), (r.trial_id, word)
    assert len({r.prompt_sha256 for r in records}) == 1  # asked the same way, only the pictures differ
    # results.json, its new artifact record, and the viewer's data (the report's attempts) beside the outcome
    results = json.loads((run_dir / "results.json").read_text())
    assert results["judge"]["label"] == LABEL and results["judge"]["flagged"] == [ids[2]]
    assert artifact.meta == {"job": "judge"}
    attempts = {a["trial_id"]: a for s in summary["series"] for a in s["attempts"]}
    assert (attempts[ids[2]]["outcome"], attempts[ids[2]]["judge"]["contradiction"]) == ("success", 1)
    assert attempts[ids[3]]["judge"] is None

    report = roboswe("report", str(run_dir))
    assert report.returncode == 0, report.stderr[-2000:]
    text = " ".join(report.stdout.split())
    assert "visual cross-check (supplementary audit" in text and "CONTRADICTION: review" in text
    assert f"{ids[2]}: mechanical success" in text
