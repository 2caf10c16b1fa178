"""The RoboCasa365 catalogue, RoboSWE-ADAPT's selection as code, and the predicate review at admission."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from roboswe.cli import main as cli
from roboswe.sim.manifest import load_dataset
from roboswe.sim.robocasa.catalogue import load_catalogue

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("robocasa_catalogue_tool", REPO / "tools" / "robocasa_catalogue.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_catalogue_is_what_the_installed_package_generates():
    """Regenerating from praxis-robocasa gives the committed file byte for byte (registry, classes, predicate digests)."""
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "robocasa_catalogue.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]


def test_catalogue_lists_the_registry_with_what_it_has_and_says_what_it_lacks():
    c = load_catalogue("robocasa365")
    kinds = [t.kind for t in c.tasks.values()]
    assert kinds.count("composite") == c.upstream["composite_tasks"] == 252
    assert kinds.count("atomic") == c.upstream["atomic_tasks"] == 65
    assert c.upstream["version"] == "1.0.0"
    assert all(t.skills is None and t.median_demo_seconds is None for t in c.tasks.values())  # not in the package
    assert c.selection.provisional and any("skills" in u for u in c.selection.unevaluated)
    blend = c.tasks["BlendIngredients"]
    assert (blend.subtasks, blend.registry_horizon, blend.activity) == (5, 1200, "making_smoothies")
    assert 13 in blend.exclude_styles
    assert [comp.id for comp in c.compositions] == ["GatherMarinadeIngredients+BlendMarinade", "ReheatMeal+ReturnHeatedFood"]
    assert all(comp.status == "candidate" for comp in c.compositions)
    for comp in c.compositions:
        assert all(part in c.tasks for part in comp.parts)


def _composite(subtasks, horizon, **extra):
    return {"kind": "composite", "subtasks": subtasks, "registry_horizon": horizon,
            "registry_horizon_seconds": horizon / 20, "task_sets": [], **extra}


def test_the_full_rule_applies_once_skills_and_medians_are_known(tool):
    tasks = {
        "Hard": _composite(7, 4000, skills=list("abcd"), median_demo_seconds=95.0),
        "HardFewSkills": _composite(7, 4000, skills=list("abc"), median_demo_seconds=95.0),
        "HardQuick": _composite(7, 4000, skills=list("abcd"), median_demo_seconds=50.0),
        "Short": _composite(3, 1200, skills=["a"], median_demo_seconds=41.0),
        "ShortTooQuick": _composite(3, 1200, skills=["a"], median_demo_seconds=25.0),
        "ShortTooLong": _composite(4, 1600, skills=["a"], median_demo_seconds=60.0),
        "OneStep": _composite(1, 600, skills=["a"], median_demo_seconds=40.0),
        "Atomic": {**_composite(3, 600, median_demo_seconds=40.0), "kind": "atomic"},
    }
    tasks.update({f"S{i:02d}": _composite(2, 1000, skills=["a"], median_demo_seconds=30.0 + i) for i in range(25)})
    sel = tool.select(tasks)
    assert sel["harder"] == ["Hard"]
    assert not sel["provisional"] and sel["unevaluated"] == []
    assert len(sel["shorter"]) == tool.SHORTER_COUNT == 20
    assert sel["shorter"][0] == "S10" and sel["shorter"][1:4] == ["S09", "S11", "Short"]  # closest to 40 s first, ties by name
    assert not {"ShortTooQuick", "ShortTooLong", "OneStep", "Atomic", "HardQuick"} & set(sel["shorter"])


def test_without_medians_the_horizon_only_rules_tasks_out(tool):
    tasks = {"TooShort": _composite(3, 500, task_sets=["target50"]), "Later": _composite(3, 900),
             "Target": _composite(3, 2000, task_sets=["target50"])}
    sel = tool.select(tasks)
    assert sel["provisional"] and sel["shorter"] == ["Target", "Later"]  # 25 s horizon cannot hold a 30 s median


def test_every_kitchen_manifest_pins_its_catalogue_entry():
    """Predicate digest, registry horizon, a known class, and a layout and style the task class allows."""
    c = load_catalogue()
    for name in ("robocasa-pilot", "robocasa-kit"):
        for m in load_dataset(name)[1]:
            entry = c.tasks[m.upstream.env]
            assert m.success.predicate_sha256 == entry.predicate_sha256, m.id
            assert m.upstream.registry_horizon == entry.registry_horizon, m.id
            if m.upstream.assets == "robocasa":
                assert m.upstream.layout not in entry.exclude_layouts and m.upstream.style not in entry.exclude_styles
                assert 1 <= m.upstream.layout <= 10 and 1 <= m.upstream.style <= 10, m.id  # RoboCasa's test kitchens
    pilot = load_dataset("robocasa-pilot")[1]
    assert len(pilot) == 11 and {c.tasks[m.upstream.env].kind for m in pilot} == {"atomic", "composite"}


def test_a_stale_predicate_review_excludes_the_task_before_any_probe():
    from roboswe.evaluation.admission import admit_task, predicate_reviews

    m = load_dataset("robocasa-kit")[1][0]
    stale = msgspec.structs.replace(m, success=msgspec.structs.replace(m.success, predicate_sha256="0" * 64))
    reviews = predicate_reviews([m, stale])  # one fresh process for both (same id: the second answer wins)
    assert reviews[m.id]["status"] == "changed since review"
    task = admit_task(stale, review=reviews[m.id])
    assert task.status == "excluded" and task.reason.startswith("predicate review is stale")
    assert "ManipulateDrawer._check_success" in task.reason and task.review["reviewed_sha256"] == "0" * 64
    assert task.fingerprint is None and task.measured == {}  # excluded without building a scene


def test_tasks_lists_the_catalogue_with_candidates_and_admission_status(capsys, tmp_path):
    assert cli(["tasks", "robocasa365", "--candidates"]) == 0
    out = capsys.readouterr().out
    assert "252 composite + 65 atomic task classes" in out
    assert "composition ReheatMeal+ReturnHeatedFood: candidate only" in out
    scrub = [ln for ln in out.splitlines() if ln.startswith("ScrubCuttingBoard ")]
    assert len(scrub) == 1 and " shorter " in scrub[0] and scrub[0].endswith("no task manifest")
    assert "robocasa-makeicelemonade" in out and "kit-opendrawer [placeholder]" in out
    assert "HeatMultipleWater" not in out  # --candidates leaves out classes no one selected or uses


def test_the_report_shows_the_review_of_the_pinned_admitted_file_only(tmp_path):
    from roboswe.evaluation.admission import FORMAT, Admitted, AdmittedTask, write_admitted
    from roboswe.protocol.recorder import RunPins
    from roboswe.records.report import predicate_reviews, review_line

    review = {"defined_in": "robocasa.x.ManipulateDrawer._check_success", "source_sha256": "ab" * 32,
              "reviewed_sha256": "ab" * 32, "status": "current", "review": "the drawer is open"}
    task = AdmittedTask(id="kit-opendrawer", status="excluded", manifest={}, manifest_digest="", privileged=False,
                        reason="r", review=review)
    path = tmp_path / "admitted.json"
    sealed = write_admitted(Admitted(format=FORMAT, dataset={}, created_at="x", host={}, run_config_sha256=None,
                                     tasks=[task]), path)
    reviews = predicate_reviews(RunPins(admitted_path=str(path)), sealed.digest)
    assert reviews == {"kit-opendrawer": review}
    assert review_line("kit-opendrawer", review) == \
        "  kit-opendrawer: ManipulateDrawer._check_success abababababab (current): the drawer is open"
    assert predicate_reviews(RunPins(admitted_path=str(path)), "f" * 64) == {}  # not the file the run pinned
