"""The RoboPaint painting gallery: every final canvas per goal with its real round label, and blinded pairs.

``gallery.html`` (next to the viewer's index.html) shows, per goal, the goal itself (the image
drawn from its recipe, checked against the recorded SHA-256, or the text) and, per series, the
canvases of ICL Round 1, 2 and 3 in their own labelled slots: a round's slot only ever holds
that round's canvas (the latest attempt of that trial index), so a visually better earlier
round never stands in for round 3. Each canvas shows its action count, contact and
protective-stop events, how the round ended, its hash and the replay verdict. The default order
is the recorded one; an author ordering (``RUN_DIR/gallery.json``: ``{"author_order": [...],
"author": "...", "date": "..."}``) reorders the series and is labelled as the author's
recommendation, never as a score.

Blinded pairwise rating of the round-3 canvases (``gallery/pairs/``): each canvas copied under an
anonymous name, every same-goal pair once, pair order and sides shuffled with a recorded seed;
``pairs.json`` holds no model, series or run names; ``key.json`` (for whoever collects the
ratings, not the raters) maps the anonymous names back and is written by ``roboswe pairs`` only,
never into an exported site. ``roboswe pairs RUN_DIR... --out DIR``
does the same across runs (one model per run, the usual case).
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import structlog

from roboswe.evaluation.task_record import recorded
from roboswe.records.artifacts import ArtifactError, check_stored
from roboswe.records.reader import RunReader

from ._pages import document

log = structlog.get_logger()

GALLERY = "gallery.html"
FOLDER = "gallery"
ROUNDS_SHOWN = 3  # RoboPaint's three ICL rounds; a longer series shows every round it has
PAIRS_FORMAT = "roboswe-paint-pairs/1"
KEY_FILE = "key.json"  # anonymous canvas name -> run, series, model, round: written by `roboswe pairs` only


@dataclass
class Canvas:
    """One round's final canvas as recorded (or why there is none)."""

    run_id: str
    series_id: str
    task: str
    model: str
    mode: str
    round: int  # ICL round = the trial index
    attempt: int
    trial_id: str
    goal: dict[str, Any]
    outcome: str
    sha256: str = ""  # the canvas hash (raw RGB + shape), as replay checks it
    png: str = ""  # RUN_DIR-relative path of the stored PNG
    png_sha256: str = ""
    ended_by: str = ""
    actions_used: int = 0
    action_limit: int = 0
    contact_events: int = 0
    protective_stops: int = 0
    verdict: str = ""
    problem: str = ""  # why no canvas is shown
    run_dir: str = ""  # where the run lies (the PNG is run_dir / png)
    site_png: str = field(default="", repr=False)


def goal_key(goal: dict[str, Any]) -> str:
    """Canvases are grouped by goal: the image's hash, or the text."""
    return f"image:{goal.get('image_sha256')}" if goal.get("kind") == "image" else f"text:{goal.get('text', '')}"


def canvases(reader: RunReader, run_dir: Path) -> list[Canvas]:
    """Every series' rounds that have a task record, latest attempt per round, in recorded order."""
    out = []
    for series in reader.series():
        latest: dict[int, Any] = {}
        for view in reader.trials(series.series_id):
            latest[view.start.index] = view  # ordered by index, attempt: the last one wins
        for index, view in sorted(latest.items()):
            data = recorded(reader, view.trial_id)
            if data is None:
                continue
            c = Canvas(run_id=series.run_id, series_id=series.series_id, task=series.task, model=series.model,
                       mode=series.mode, round=index, attempt=view.start.attempt, trial_id=view.trial_id,
                       goal=dict(data.get("goal") or {}), outcome=view.outcome or "interrupted",
                       action_limit=int(data.get("action_limit", 0)), actions_used=int(data.get("actions_used", 0)),
                       contact_events=len(data.get("contact_events", [])),
                       protective_stops=len(data.get("protective_stops", [])),
                       verdict=view.verification.verdict if view.verification else "", run_dir=str(run_dir))
            canvas, file = data.get("canvas"), (data.get("files") or {}).get("canvas.png")
            if canvas and file:
                c.sha256, c.ended_by = canvas["sha256"], canvas["ended_by"]
                c.png, c.png_sha256 = file["path"], file["sha256"]
                try:
                    check_stored(run_dir / c.png, c.png_sha256)
                except ArtifactError as e:
                    c.problem = str(e)
            else:
                c.problem = f"no canvas saved ({c.outcome})"
            out.append(c)
    return out


def _author_order(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "gallery.json"
    if not path.is_file():
        return None
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        order = [str(x) for x in spec["author_order"]]
    except (ValueError, KeyError, TypeError) as e:
        log.warning("gallery_author_order_unreadable", path=str(path), error=str(e))
        return None
    return {"order": order, "author": str(spec.get("author", "")), "date": str(spec.get("date", ""))}


def _goal_html(goal: dict[str, Any], site: Path) -> str:
    text = html.escape(goal.get("text", ""))
    if goal.get("kind") != "image":
        return f'<div class="goal text"><h3>Text goal</h3><blockquote>{text}</blockquote></div>'
    from roboswe.sim.paint.goals import goal_image

    recipe, want = str(goal.get("image", "")), str(goal.get("image_sha256", ""))
    try:
        drawn = goal_image(recipe)
    except KeyError as e:
        return f'<div class="goal image missing"><h3>Image goal</h3><p>{html.escape(str(e))}</p></div>'
    note = f"SHA-256 {want[:16]}…" if drawn.sha256 == want else (
        f"the recipe now draws {drawn.sha256[:16]}…, the run recorded {want[:16]}…: not shown")
    if drawn.sha256 != want:
        return f'<div class="goal image missing"><h3>Image goal</h3><p>{html.escape(note)}</p></div>'
    rel = f"{FOLDER}/goals/{drawn.sha256[:16]}.png"
    (site / rel).parent.mkdir(parents=True, exist_ok=True)
    (site / rel).write_bytes(drawn.png)
    return (f'<div class="goal image"><h3>Image goal</h3><img src="{rel}" alt="goal {html.escape(recipe)}" '
            f'width="320"><p>{html.escape(recipe)}, {drawn.width}x{drawn.height}, {html.escape(note)}'
            f'{"<br>" + text if text else ""}</p></div>')


def _canvas_html(c: Canvas | None, round_number: int) -> str:
    label = f"ICL Round {round_number}"
    if c is None:
        return f'<figure class="canvas none" data-round="{round_number}"><div class="blank">not run</div><figcaption>{label}</figcaption></figure>'
    facts = (f"trial {c.round}, attempt {c.attempt} · {c.actions_used}/{c.action_limit} actions · "
             f"{c.contact_events} contact events · {c.protective_stops} protective stops")
    if c.problem:
        return (f'<figure class="canvas none" data-round="{c.round}" data-trial="{html.escape(c.trial_id)}">'
                f'<div class="blank">{html.escape(c.problem)}</div><figcaption><b>{label}</b><br>{facts}</figcaption></figure>')
    verdict = f"replay {c.verdict}" if c.verdict else "not replayed"
    from ._export import trial_key  # _export imports this module

    page = html.escape(f"trial.html?t={trial_key(c.trial_id)}")  # the trial that painted it: videos, transcript
    return (f'<figure class="canvas" data-round="{c.round}" data-trial="{html.escape(c.trial_id)}" data-sha256="{c.sha256}">'
            f'<a class="to-trial" href="{page}" title="the trial that painted this canvas">'
            f'<img src="{html.escape(c.site_png)}" alt="{label} canvas" width="256" height="256"></a>'
            f'<figcaption><b>{label}</b> · {html.escape(c.ended_by)}<br>{facts}<br>'
            f'<code title="canvas SHA-256 (raw RGB + shape)">{c.sha256[:16]}</code> · {verdict}</figcaption></figure>')


def write_gallery(reader: RunReader, run_dir: Path, site: Path) -> dict[str, Any] | None:
    """Write gallery.html and its images into ``site``; None (nothing written) when no trial kept a canvas record."""
    found = canvases(reader, run_dir)
    shutil.rmtree(site / FOLDER, ignore_errors=True)  # what an earlier export wrote
    (site / GALLERY).unlink(missing_ok=True)
    if not found:
        return None
    for c in found:
        if c.png and not c.problem:
            c.site_png = f"{FOLDER}/canvases/{c.sha256[:16]}-{hashlib.sha256(c.trial_id.encode()).hexdigest()[:8]}.png"
            (site / c.site_png).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / c.png, site / c.site_png)
    author = _author_order(run_dir)
    series_order = list(dict.fromkeys(c.series_id for c in found))
    if author:
        rank = {name: i for i, name in enumerate(author["order"])}
        last = len(rank)
        series_order.sort(key=lambda sid: min(rank.get(sid, last), rank.get(_model_of(found, sid), last)))
    parts = [("<title>Painting gallery</title></head><body class='gallery'>"  # the viewer's head and style (_pages)
              "<header><a class='brand' href='index.html'>roboswe</a> <span>painting gallery</span></header><main>"
              "<h1>Painting gallery</h1>"
              "<p>Every final canvas with its real round label: a round's slot holds only that round's canvas. "
              "Task reward is submission integrity (a canvas was submitted and saved), not quality. "
              "<a href='index.html'>Runs</a> · <a href='gallery/pairs/pairs.json'>blinded round-3 pairs</a></p>")]
    if author:
        who = " ".join(x for x in (author["author"], author["date"]) if x)
        parts.append(f"<p class='note' id='author-order'>Order: the author's recommendation{' (' + html.escape(who) + ')' if who else ''}: "
                     "a personal qualitative ranking, not a measured score or a human-consensus rating.</p>")
    else:
        parts.append("<p class='note' id='recorded-order'>Order: as recorded (no author ordering given).</p>")
    groups: dict[str, list[Canvas]] = {}
    for c in found:
        groups.setdefault(goal_key(c.goal), []).append(c)
    for members in groups.values():
        parts.append(f"<section class='goal-group'><h2>{html.escape(', '.join(sorted({c.task for c in members})))}</h2>")
        parts.append(_goal_html(members[0].goal, site))
        by_series: dict[str, dict[int, Canvas]] = {}
        for c in members:
            by_series.setdefault(c.series_id, {})[c.round] = c
        for sid in [s for s in series_order if s in by_series]:
            rounds = by_series[sid]
            first = next(iter(rounds.values()))
            shown = max(ROUNDS_SHOWN, *rounds)
            parts.append(f"<div class='series' data-series='{html.escape(sid)}'><div class='who'><b>{html.escape(first.model)}</b><br>"
                         f"{html.escape(sid)}<br>mode {html.escape(first.mode)}</div>")
            parts += [_canvas_html(rounds.get(r), r) for r in range(1, shown + 1)]
            parts.append("</div>")
        parts.append("</section>")
    pairs = write_pairs(found, site / FOLDER / "pairs", seed=_seed_for(reader), key_file=False)  # the site un-blinds nothing
    parts.append(f"<p>Blinded pairs of round-3 canvases: {pairs['pairs']} (seed {pairs['seed']}, in gallery/pairs/; "
                 "the key that names them is not in this site: <code>roboswe pairs RUN_DIR --out DIR</code> writes it "
                 "for whoever collects the ratings).</p>")
    parts.append("</main></body></html>")
    (site / GALLERY).write_text(document("\n".join(parts)), encoding="utf-8")
    return {"canvases": sum(1 for c in found if c.site_png), "rounds": len(found), "goals": len(groups), "pairs": pairs}


def _model_of(found: list[Canvas], series_id: str) -> str:
    return next(c.model for c in found if c.series_id == series_id)


def _seed_for(reader: RunReader) -> int:
    """The pairs' seed for one run: derived from its run id, so a re-export draws the same pairs (and records it)."""
    return int(hashlib.sha256(reader.run().run_id.encode()).hexdigest()[:8], 16)


def write_pairs(found: list[Canvas], out: Path, *, seed: int, key_file: bool = True) -> dict[str, Any]:
    """Blinded pairwise-rating files for the round-3 canvases (see the module docs); returns the summary.

    ``key_file``: also write key.json (the names back); never in a shareable site, which raters read."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rng = random.Random(seed)
    finals = [c for c in found if c.round == 3 and c.png and not c.problem]
    names = [f"c{n:03d}" for n in range(len(finals))]
    rng.shuffle(names)
    key, by_goal = {}, {}
    for name, c in zip(names, finals):
        shutil.copyfile(Path(c.run_dir) / c.png, out / f"{name}.png")
        key[name] = {k: v for k, v in asdict(c).items() if k not in ("site_png", "run_dir")}
        by_goal.setdefault(goal_key(c.goal), []).append(name)
    pairs = []
    goals = {}
    for g, (gk, members) in enumerate(sorted(by_goal.items())):
        goals[f"goal-{g + 1}"] = key[members[0]]["goal"]
        for a, b in itertools.combinations(sorted(members), 2):
            pairs.append({"goal": f"goal-{g + 1}", "left": f"{a}.png", "right": f"{b}.png"} if rng.random() < 0.5 else
                         {"goal": f"goal-{g + 1}", "left": f"{b}.png", "right": f"{a}.png"})
    rng.shuffle(pairs)
    for i, p in enumerate(pairs, 1):
        p["pair"] = i
    (out / "pairs.json").write_text(json.dumps({
        "format": PAIRS_FORMAT, "seed": seed, "round": 3, "goals": goals, "pairs": pairs,
        "instructions": "For each pair, which canvas better matches the goal? Canvases are anonymous; sides and order are random.",
    }, indent=1) + "\n", encoding="utf-8")
    if key_file:
        (out / KEY_FILE).write_text(json.dumps({"format": PAIRS_FORMAT, "seed": seed, "canvases": key}, indent=1) + "\n",
                                    encoding="utf-8")
    return {"pairs": len(pairs), "canvases": len(finals), "seed": seed}


def export_pairs(run_dirs: list[Path], out: Path, seed: int | None = None) -> dict[str, Any]:
    """Blinded round-3 pairs across runs (``roboswe pairs``); a seed is drawn and recorded when none is given."""
    import secrets

    found = []
    for run_dir in run_dirs:
        with RunReader(run_dir) as reader:
            found += canvases(reader, Path(run_dir))
    return write_pairs(found, Path(out), seed=secrets.randbelow(2**32) if seed is None else seed)
