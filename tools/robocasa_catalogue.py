"""Write configs/catalogues/robocasa365.toml from the installed RoboCasa package (reproducible).

    .venv/bin/python tools/robocasa_catalogue.py                     # writes the catalogue
    .venv/bin/python tools/robocasa_catalogue.py --check             # exit 1 if the file differs from a fresh one
    .venv/bin/python tools/robocasa_catalogue.py --metadata FILE     # add the official catalogue's figures

What it reads, all inside praxis-robocasa (nothing is downloaded, nothing is invented):

- the dataset registry ``robocasa.utils.dataset_registry``: every atomic and composite task, its
  control-step ``horizon``, which splits have demonstrations (pretrain/target/real) and RoboCasa's
  named task sets (pretrain50, target50, lifelong_learning_phase1..4, ...);
- each task class: its activity (the folder of ``environments/kitchen/composite``), the first lines
  of its docstring, the numbered items of its docstring's ``Steps:`` list (the subtask count, where
  the list is numbered), ``EXCLUDE_LAYOUTS`` / ``EXCLUDE_STYLES``, and the digest of its
  ``_check_success`` source (sim/robocasa/review.py; the predicate review pins it).

What the package does not have, and the catalogue therefore leaves out: RoboCasa365's skill
labels, annotated subtask counts and median demonstration durations (episode_len_medians_train.json)
are published with its website catalogue, not in the package. ``--metadata FILE`` (JSON:
``{"TaskName": {"subtasks": 7, "skills": ["..."], "median_demo_seconds": 48.5}}``) adds them; the
file's digest is recorded and the selection then applies the full rule.

The selection rule (RoboSWE-ADAPT, "Selection"), as code in ``select`` below:

- harder candidates: at least HARDER_MIN_SUBTASKS subtasks, more than HARDER_MIN_SKILLS skills,
  and a long median demonstration (at least LONG_MEDIAN_S);
- about SHORTER_COUNT shorter candidates: SHORTER_SUBTASKS subtasks and a median demonstration in
  SHORTER_MEDIAN_S, taken closest-first to TYPICAL_MEDIAN_S (the seed: "typically thirty to fifty").
  Without medians, the registry horizon bounds the median from above (no demonstration is longer
  than the horizon), so a task whose horizon is under the lower bound cannot qualify; the rest are
  ordered by membership of RoboCasa's own evaluation sets (target50: 500 demonstrations each), then
  by horizon, then by name, and the selection is marked provisional.

A criterion that cannot be evaluated is named in ``[selection] unevaluated``; it never passes silently.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "configs" / "catalogues" / "robocasa365.toml"
FORMAT = "roboswe.catalogue/1"
CONTROL_HZ = 20  # RoboCasa's demonstrations and horizons are at 20 Hz

HARDER_MIN_SUBTASKS = 6
HARDER_MIN_SKILLS = 3  # "more than three"
LONG_MEDIAN_S = 60.0
SHORTER_SUBTASKS = (2, 5)
SHORTER_MEDIAN_S = (30.0, 60.0)
TYPICAL_MEDIAN_S = 40.0
SHORTER_COUNT = 20

# RoboSWE-ADAPT: two proposed compositions; candidates only, never admitted without their own
# identifier, instruction, budgets and verifier review, in one continuous scene.
COMPOSITIONS = [("GatherMarinadeIngredients", "BlendMarinade"), ("ReheatMeal", "ReturnHeatedFood")]

_STEP = re.compile(r"^\s*(\d+)[.)]\s", re.M)


def _docstring_facts(cls) -> dict:
    doc = inspect.getdoc(cls) or ""
    paragraphs = [p.strip() for p in doc.split("\n\n") if p.strip()]
    facts = {"title": paragraphs[0].splitlines()[0] if paragraphs else ""}
    summary = next((p for p in paragraphs[1:] if p.startswith("Simulates")), "")
    if summary:
        facts["summary"] = " ".join(summary.split())
    if "Steps:" in doc:
        steps = doc.split("Steps:", 1)[1].split("\n\n")[0]
        numbers = _STEP.findall(steps)
        if numbers:
            facts["subtasks"] = len(numbers)
    return facts


def _task_sets(name: str, registry) -> list[str]:
    return sorted(s for s, tasks in registry.TASK_SET_REGISTRY.items()
                  if name in tasks and not s.startswith("all_"))


def read_tasks(metadata: dict | None = None) -> tuple[dict, dict]:
    """(upstream facts, task name -> entry) from the installed package (imports RoboCasa)."""
    import robocasa
    import robocasa.utils.dataset_registry as registry
    from robocasa.environments.kitchen.kitchen import REGISTERED_KITCHEN_ENVS

    from roboswe.sim.robocasa.review import predicate_source

    metadata = metadata or {}
    tasks = {}
    for kind, table in (("atomic", registry.ATOMIC_TASK_DATASETS), ("composite", registry.COMPOSITE_TASK_DATASETS)):
        for name, cfg in table.items():
            cls = REGISTERED_KITCHEN_ENVS[name]
            entry = {"kind": kind}
            if kind == "composite":
                entry["activity"] = cls.__module__.split(".")[-2]
            entry.update(_docstring_facts(cls))
            extra = metadata.get(name, {})
            if "subtasks" in extra:
                entry["subtasks"] = int(extra["subtasks"])
                entry["subtasks_source"] = "metadata file"
            elif "subtasks" in entry:
                entry["subtasks_source"] = "docstring steps"
            if "skills" in extra:
                entry["skills"] = sorted(extra["skills"])
            if "median_demo_seconds" in extra:
                entry["median_demo_seconds"] = float(extra["median_demo_seconds"])
            entry["registry_horizon"] = int(cfg["horizon"])
            entry["registry_horizon_seconds"] = cfg["horizon"] / CONTROL_HZ
            entry["demo_splits"] = [s for s in ("pretrain", "target", "real") if s in cfg]
            entry["task_sets"] = _task_sets(name, registry)
            if cls.EXCLUDE_LAYOUTS:
                entry["exclude_layouts"] = sorted(int(x) for x in cls.EXCLUDE_LAYOUTS)
            if getattr(cls, "EXCLUDE_STYLES", None):
                entry["exclude_styles"] = sorted(int(x) for x in cls.EXCLUDE_STYLES)
            review = predicate_source(name)
            entry["predicate"] = review["defined_in"]
            entry["predicate_sha256"] = review["source_sha256"]
            tasks[name] = entry
    source = Path(registry.__file__).read_bytes()
    upstream = {"package": "praxis-robocasa", "module": "robocasa", "version": robocasa.__version__,
                "registry": "robocasa.utils.dataset_registry", "registry_sha256": hashlib.sha256(source).hexdigest(),
                "atomic_tasks": len(registry.ATOMIC_TASK_DATASETS), "composite_tasks": len(registry.COMPOSITE_TASK_DATASETS)}
    return upstream, tasks


def select(tasks: dict) -> dict:
    """RoboSWE-ADAPT's selection over the composite tasks; names every criterion it could not evaluate."""
    composites = {n: e for n, e in tasks.items() if e["kind"] == "composite"}
    has_skills = any("skills" in e for e in composites.values())
    has_medians = any("median_demo_seconds" in e for e in composites.values())
    unevaluated = []
    if not has_skills:
        unevaluated.append(f"harder: more than {HARDER_MIN_SKILLS} skills (no skill labels)")
    if not has_medians:
        unevaluated.append(f"harder: median demonstration >= {LONG_MEDIAN_S:g} s (no medians; the registry horizon "
                           "only bounds it from above)")
        unevaluated.append(f"shorter: median demonstration in [{SHORTER_MEDIAN_S[0]:g}, {SHORTER_MEDIAN_S[1]:g}) s "
                           f"(no medians; tasks whose horizon is under {SHORTER_MEDIAN_S[0]:g} s are out, the rest "
                           "are ordered by RoboCasa's target sets, horizon, name)")
    unevaluated.append("tasks without a numbered step list have no subtask count and are not candidates") \
        if any("subtasks" not in e for e in composites.values()) else None

    def median_ok(e, lo, hi):
        if "median_demo_seconds" in e:
            return lo <= e["median_demo_seconds"] < hi
        return e["registry_horizon_seconds"] >= lo  # the median cannot exceed the horizon

    harder = sorted(n for n, e in composites.items()
                    if e.get("subtasks", 0) >= HARDER_MIN_SUBTASKS
                    and (not has_skills or len(e.get("skills", [])) > HARDER_MIN_SKILLS)
                    and median_ok(e, LONG_MEDIAN_S, float("inf")))
    eligible = [n for n, e in composites.items()
                if SHORTER_SUBTASKS[0] <= e.get("subtasks", 0) <= SHORTER_SUBTASKS[1]
                and median_ok(e, *SHORTER_MEDIAN_S) and n not in harder]

    def order(n):
        e = composites[n]
        if "median_demo_seconds" in e:
            return (abs(e["median_demo_seconds"] - TYPICAL_MEDIAN_S), n)
        return ("target50" not in e["task_sets"], e["registry_horizon"], n)

    shorter = sorted(eligible, key=order)[:SHORTER_COUNT]
    return {"harder": harder, "shorter": shorter, "shorter_eligible": len(eligible),
            "provisional": bool(unevaluated), "unevaluated": [u for u in unevaluated if u]}


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


RULE = f"""harder: subtasks >= {HARDER_MIN_SUBTASKS}, skills > {HARDER_MIN_SKILLS}, median demonstration >= {LONG_MEDIAN_S:g} s.
shorter: {SHORTER_SUBTASKS[0]}-{SHORTER_SUBTASKS[1]} subtasks, median demonstration in [{SHORTER_MEDIAN_S[0]:g}, {SHORTER_MEDIAN_S[1]:g}) s, the {SHORTER_COUNT} closest to {TYPICAL_MEDIAN_S:g} s.
Code: tools/robocasa_catalogue.py, select(). Seed 000 calls these criteria curation, not strict eligibility thresholds."""

NOTES = {
    "subtasks": "numbered items of the task class's docstring 'Steps:' list (subtasks_source = \"docstring steps\"), or the metadata file; absent where the docstring describes the steps in prose",
    "skills": "absent unless a metadata file gives them: RoboCasa 1.0.0 ships no skill labels",
    "median_demo_seconds": "absent unless a metadata file gives them: episode_len_medians_train.json is not in the package",
    "registry_horizon": "the dataset registry's maximum control steps (20 Hz); an upper bound on a demonstration, neither its median nor roboswe's step budget",
    "predicate_sha256": "sha256 of inspect.getsource(cls._check_success) (sim/robocasa/review.py); a task manifest's [success] predicate_sha256 must equal it",
}


def render(upstream: dict, tasks: dict, selection: dict, metadata_sha256: str | None) -> str:
    lines = ["# Generated by tools/robocasa_catalogue.py from the installed praxis-robocasa; do not edit by hand.",
             "# Re-run the tool (it is deterministic); --check says whether this file is current.",
             f'format = "{FORMAT}"', 'id = "robocasa365"',
             _kv("description", "RoboCasa365's tasks as its dataset registry and task classes define them, with seed 000's "
                 "candidate selection. Catalogue membership is not admission: a task enters a run only through a task "
                 "manifest, `roboswe admit` and its predicate review."), ""]
    lines.append("[upstream]")
    lines += [_kv(k, v) for k, v in upstream.items()]
    if metadata_sha256:
        lines.append(_kv("metadata_sha256", metadata_sha256))
    lines += ["", "[notes]"] + [_kv(k, v) for k, v in NOTES.items()]
    lines += ["", "[selection]", f'rule = """\n{RULE}"""']
    lines += [_kv(k, selection[k]) for k in ("provisional", "unevaluated", "shorter_eligible", "harder", "shorter")]
    for parts in COMPOSITIONS:
        lines += ["", "[[compositions]]", _kv("id", "+".join(parts)), _kv("parts", list(parts)),
                  _kv("status", "candidate"),
                  _kv("note", "a proposed composition, not an admitted task: it needs one continuous scene and its own "
                      "identifier, instruction, budgets and verifier review before any run")]
    for name in sorted(tasks):
        lines += ["", f"[tasks.{name}]"] + [_kv(k, v) for k, v in tasks[name].items()]
    return "\n".join(lines) + "\n"


def _kv(k: str, v) -> str:
    return f"{k} = {_toml_value(v)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metadata", type=Path, help="JSON with the official catalogue's subtasks/skills/median_demo_seconds")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if --out differs from a fresh catalogue")
    args = parser.parse_args(argv)
    metadata, metadata_sha256 = None, None
    if args.metadata:
        raw = args.metadata.read_bytes()
        metadata, metadata_sha256 = json.loads(raw), hashlib.sha256(raw).hexdigest()
    upstream, tasks = read_tasks(metadata)
    text = render(upstream, tasks, select(tasks), metadata_sha256)
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        print(f"{args.out}: {'current' if current == text else 'STALE: re-run tools/robocasa_catalogue.py'}")
        return 0 if current == text else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    sel = select(tasks)
    print(f"wrote {args.out}: {upstream['composite_tasks']} composite + {upstream['atomic_tasks']} atomic tasks; "
          f"harder {len(sel['harder'])}, shorter {len(sel['shorter'])} of {sel['shorter_eligible']} eligible"
          f"{' (provisional)' if sel['provisional'] else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
