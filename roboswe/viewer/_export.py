"""Write a run's viewer site: HTML/CSS/JS assets, data as lazily loaded .js files, video copies.

Layout of SITE_DIR::

    index.html, trial.html, assets/*           (copied from roboswe/viewer/assets)
    data/run.js                                summary: tasks x trials, metrics, timing
    data/t/<trial key>/trial.js                one trial: figures, videos + step index, checkpoints, chunks
    data/t/<trial key>/ops-<n>.js              operations n*chunk .. (n+1)*chunk-1, with model text and diffs
    data/t/<trial key>/trace.js                commanded actions and qpos per control step (the plot)
    data/t/<trial key>/transcript.js           the system prompt and every turn of the conversation, with slides
    data/b/<sha256>.js                         one workspace file's content (loaded when opened)
    videos/<trial key>/<camera>.mp4            copies of the trial videos (checked against their sha256)

Each data file is ``RS.put("<key>", <json>);`` so pages load them with ``<script>`` tags, which
work from file:// where ``fetch`` of local files is refused.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import shutil
import time
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import structlog

from roboswe.evaluation.task_record import recorded
from roboswe.records.artifacts import (
    ArtifactError,
    check_stored,
    failed_artifact_line,
    failed_artifacts,
    load_video_index,
    safe_name,
    video_relpath,
)
from roboswe.records.reader import RunReader

from ._gallery import GALLERY, write_gallery
from ._pages import document
from ._readable import readable_parts
from ._snapshot import SNAPSHOT_DATA, snapshot
from ._summary import reached_scene, scene_moves, summary
from ._trace import trace_data
from ._transcript import transcript

log = structlog.get_logger()

MAX_TEXT = 256 * 1024  # larger workspace files and written contents are shown truncated
MAX_FEEDBACK_TEXT = 64 * 1024
_json = msgspec.json.Encoder()


class ExportError(Exception):
    """The site could not be written; the message says what and why."""


def trial_key(trial_id: str) -> str:
    """A file-name-safe, collision-free key for a trial id."""
    return f"{safe_name(trial_id)[-60:]}-{hashlib.sha256(trial_id.encode()).hexdigest()[:8]}"


def _write_data(site: Path, rel: str, key: str, data: Any) -> None:
    path = site / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"RS.put(" + _json.encode(key) + b"," + _json.encode(data) + b");\n")


def _text(data: bytes, limit: int = MAX_TEXT) -> dict[str, Any]:
    """A file's bytes for display: text (maybe truncated) or a binary note."""
    if b"\0" in data[:8192]:
        return {"binary": True, "size": len(data)}
    text = data[:limit].decode("utf-8", errors="replace")
    return {"text": text, "size": len(data), "truncated": len(data) > limit}


def _clip(value: Any, limit: int = MAX_FEEDBACK_TEXT) -> Any:
    """Long strings inside feedback/arguments are clipped, with the original length noted."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"\n... [{len(value) - limit} more characters in the run database]"
    if isinstance(value, dict):
        return {k: _clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v, limit) for v in value]
    return value


class _Workspace:
    """Workspace file contents (text) as of a checkpoint, for diffs of written code."""

    def __init__(self, blobs: Any):
        self._blobs = blobs
        self.files: dict[str, str] = {}

    def load(self, manifest: Any) -> None:
        files = {}
        for entry in manifest.entries:
            try:
                data = self._blobs.get(entry.sha256)
            except Exception as err:  # noqa: BLE001 - a missing blob shows as absent, it does not stop the export
                log.warning("viewer_blob_unreadable", path=entry.path, error=str(err))
                continue
            if b"\0" not in data[:8192] and len(data) <= MAX_TEXT:
                files[entry.path] = data.decode("utf-8", errors="replace")
        self.files = files


def _diff(path: str, old: str | None, new: str) -> str:
    lines = difflib.unified_diff((old or "").splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}" if old is not None else "/dev/null", tofile=f"b/{path}")
    return "".join(lines)


def _changes(before: dict[str, str], after: dict[str, str]) -> list[dict[str, str]]:
    """Text files added, removed or modified between two workspace states, with diffs."""
    out = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        change = "added" if old is None else "removed" if new is None else "modified"
        out.append({"path": path, "change": change, "diff": _diff(path, old, new or "")})
    return out


RUN_PAGES = ("index.html", "trial.html")  # a run's export; the others only beside their data:
DATA_PAGES = ("compare.html", "leaderboard.html", "runs.html")  # viewer._compare, viewer._leaderboard


def _copy_assets(site: Path, pages: tuple[str, ...] = RUN_PAGES) -> None:
    assets = resources.files("roboswe.viewer").joinpath("assets")
    (site / "assets").mkdir(parents=True, exist_ok=True)
    for item in assets.iterdir():
        if item.name.endswith(".html"):
            if item.name in pages:  # the shared head, then the page's title and body (viewer._pages)
                (site / item.name).write_text(document(item.read_text(encoding="utf-8")), encoding="utf-8")
        elif item.is_file():
            (site / "assets" / item.name).write_bytes(item.read_bytes())


def export_site(run_dir: str | Path, out: str | Path, *, chunk: int = 200, run_id: str | None = None,
                evidence: bool = True, refresh: float | None = None) -> Path:
    """Write the viewer site for a run; returns SITE_DIR/index.html. Raises ExportError, FileNotFoundError.

    ``evidence`` also writes each trial's records and videos as one zip (the "download evidence" link).
    ``refresh``: the pages look for a newer export every so many seconds (``roboswe view --live``, viewer._snapshot)."""
    from roboswe.records.artifacts import build_results, write_results
    from roboswe.records.report import run_summary
    from roboswe.sandbox.checkpoints import BlobStore, load_manifest

    run_dir, site = Path(run_dir), Path(out)
    if chunk < 1:
        raise ExportError(f"--chunk {chunk}: expected a positive number of operations per chunk")
    if site.resolve() == run_dir.resolve():
        raise ExportError(f"--out {site}: choose a directory other than the run directory")
    t0 = time.perf_counter()
    site.mkdir(parents=True, exist_ok=True)
    for sub in ("data", "videos", "images", "evidence"):  # replace what an earlier export wrote; nothing else is touched
        shutil.rmtree(site / sub, ignore_errors=True)
    for page in DATA_PAGES:  # their data went with data/: `roboswe compare --viewer` or `leaderboard --out` again
        (site / page).unlink(missing_ok=True)
    _copy_assets(site)
    blobs = BlobStore(run_dir / "blobs") if (run_dir / "blobs").is_dir() else None
    exported_blobs: set[str] = set()
    with RunReader(run_dir) as reader:
        results = build_results(reader, reader.run(run_id).run_id)
        summary = run_summary(reader, run_id, results=results)
        rid = summary["run"]["run_id"]
        # the figures this site shows, as a file: the same scoring as `roboswe report` and RUN_DIR/results.json
        stored = write_results(site, results)
        summary["results_file"] = {"src": "results.json", "sha256": stored.sha256, "size": stored.size}
        keys: dict[str, str] = {}
        step_budgets = {s.series_id: (s.pins.get("budgets") or {}).get("trial_steps") for s in reader.series(rid)}
        for s in summary["series"]:
            s["trial_steps"] = step_budgets.get(s["series_id"])  # the per-task chart's budget line
            for a in s["attempts"]:
                a["key"] = keys[a["trial_id"]] = trial_key(a["trial_id"])
        # when this snapshot was taken, the run's state then, its running and pending slots (viewer._snapshot)
        summary["snapshot"] = snapshot(run_dir, reader.run(rid), summary, refresh)
        summary["run_dir"] = str(run_dir.resolve())
        gallery = write_gallery(reader, run_dir, site)  # gallery.html where trials kept canvases (RoboPaint)
        if gallery is not None:  # the overview links it
            summary["gallery"] = {"src": GALLERY, **{k: gallery[k] for k in ("canvases", "rounds", "goals")}}
        _write_data(site, "data/run.js", "run", summary)
        _write_data(site, SNAPSHOT_DATA, "snapshot", {"at": summary["snapshot"]["at"]})
        artifacts = reader.artifacts(run_id=rid)
        for s in summary["series"]:
            for a in s["attempts"]:
                _export_trial(reader, run_dir, site, s, a, [x for x in artifacts if x.trial_id == a["trial_id"]],
                              blobs, exported_blobs, chunk, load_manifest, evidence)
    log.info("viewer_exported", site=str(site), trials=len(keys), blobs=len(exported_blobs),
             seconds=round(time.perf_counter() - t0, 2))
    return site / "index.html"


def _export_videos(run_dir: Path, site: Path, key: str, artifacts: list[Any]) -> list[dict[str, Any]]:
    indexes = {a.camera: a for a in artifacts if a.artifact == "video_index"}
    out = []
    for a in artifacts:
        if a.artifact != "video":
            continue
        entry: dict[str, Any] = {"camera": a.camera, "sha256": a.sha256, "size": a.size}
        try:
            check_stored(run_dir / a.path, a.sha256)
            idx_rec = indexes.get(a.camera)
            if idx_rec is None:
                raise ArtifactError(f"{a.path}: no sidecar index recorded")
            check_stored(run_dir / idx_rec.path, idx_rec.sha256)
            index = load_video_index(run_dir / idx_rec.path)
        except ArtifactError as e:
            entry["error"] = str(e)  # shown on the page; a damaged video is never linked
            out.append(entry)
            continue
        rel = str(video_relpath(key, a.camera))
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run_dir / a.path, site / rel)
        entry.update(src=rel, first_step=index.first_step, control_timestep=index.control_timestep,
                     frames=[list(f) for f in index.frames], codec=index.codec, width=index.width,
                     height=index.height)
        out.append(entry)
    return out


def _responses(reader: RunReader, message_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The provider responses of some messages, without their requests (a hosted request carries
    the whole conversation with images: megabytes per call, never needed here)."""
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(message_ids), 500):
        chunk = message_ids[i:i + 500]
        rows = reader._conn.execute(  # a narrower read than RunReader.messages offers
            "SELECT message_id, provider, model, latency, error, usage, response_sha256, response FROM messages "
            f"WHERE message_id IN ({','.join('?' * len(chunk))})", chunk)
        for mid, provider, model, latency, error, usage, sha, response in rows:
            out[mid] = {"message_id": mid, "provider": provider, "model": model, "latency": latency, "error": error,
                        "usage": msgspec.json.decode(usage) if usage else {}, "response_sha256": sha,
                        "response": bytes(response) if response is not None else None}
    return out


_IMAGE_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
MAX_EVENTS = 500


def _export_events(reader: RunReader, site: Path, trial_id: str
                   ) -> tuple[dict[str, str], list[dict[str, Any]], list[tuple[float, dict[str, Any]]]]:
    """Observed camera images as files (digest -> path), the trial's other events (clipped, at most MAX_EVENTS)
    and its turns (at, data), in recorded order, for the transcript."""
    import base64

    images: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    turns: list[tuple[float, dict[str, Any]]] = []
    for _, e in reader.events(trial_id=trial_id):
        if e.event == "image":
            digest, ext = str(e.data.get("digest", "")), _IMAGE_EXT.get(str(e.data.get("media_type")), "bin")
            if not re.fullmatch(r"[0-9a-f]{64}", digest) or digest in images:
                continue
            try:
                data = base64.b64decode(e.data.get("data", ""), validate=True)
            except ValueError:
                continue
            if hashlib.sha256(data).hexdigest() != digest:
                continue  # shown only when the bytes are the ones the participant was sent
            rel = f"images/{digest}.{ext}"
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(data)
            images[digest] = rel
        elif e.event == "turn":
            turns.append((e.at, e.data))
        elif len(events) < MAX_EVENTS:
            events.append({"event": e.event, "at": e.at, "data": _clip(e.data, 2000)})
    return images, events, turns


def _first_request(reader: RunReader, trial_id: str) -> bytes | None:
    """The request of the trial's first provider call (it carries the system prompt), or None."""
    row = reader._conn.execute(  # one request, not every message's (each carries the whole conversation)
        "SELECT request FROM messages WHERE trial_id = ? ORDER BY requested_at LIMIT 1", (trial_id,)).fetchone()
    return bytes(row[0]) if row is not None else None


def _export_checkpoints(reader: RunReader, site: Path, trial_id: str, blobs: Any, exported_blobs: set[str],
                        load_manifest: Any) -> tuple[list[dict[str, Any]], dict[int | None, Any]]:
    """The trial's checkpoints as the viewer lists them, and each one's manifest by the operation it followed;
    each file's content is written once per site (``exported_blobs``)."""
    checkpoints = []
    manifests: dict[int | None, Any] = {}
    for cp in reader.checkpoints(trial_id):
        try:
            manifest = load_manifest(cp.manifest)
        except Exception as e:  # noqa: BLE001 - shown as unreadable, export goes on
            checkpoints.append({"id": cp.checkpoint_id, "label": cp.label, "op_seq": cp.op_seq, "error": str(e),
                                "files": []})
            continue
        manifests.setdefault(cp.op_seq, manifest)
        files = []
        for e in manifest.entries:
            files.append({"path": e.path, "sha256": e.sha256, "size": e.size, "mode": e.mode})
            if blobs is not None and e.sha256 not in exported_blobs:
                try:
                    content = _text(blobs.get(e.sha256))
                except Exception as err:  # noqa: BLE001
                    content = {"error": str(err)}
                _write_data(site, f"data/b/{e.sha256}.js", f"b/{e.sha256}", content)
                exported_blobs.add(e.sha256)
        checkpoints.append({"id": cp.checkpoint_id, "label": cp.label, "op_seq": cp.op_seq,
                            "manifest_sha256": cp.manifest_sha256, "created_at": cp.created_at,
                            "files": files, "refused": [msgspec.to_builtins(r) for r in manifest.refused]})
    return checkpoints, manifests


def _export_operations(reader: RunReader, site: Path, trial_id: str, key: str, chunk: int,
                       manifests: dict[int | None, Any], blobs: Any) -> list[dict[str, Any]]:
    """Write the trial's operations in chunks of ``chunk`` rows (each with its decision, diff and workspace
    changes); returns the chunks' index."""
    workspace = _Workspace(blobs)
    if None in manifests and blobs is not None:
        workspace.load(manifests[None])
    chunks: list[dict[str, Any]] = []
    after, n = -1, 0
    task_record = recorded(reader, trial_id)
    moves = scene_moves(task_record)  # the scene's result of each move_flange it took, in order
    while True:
        ops = reader.operations(trial_id, after_seq=after, limit=chunk)
        if not ops:
            break
        messages = _responses(reader, [op.message_id for op in ops if op.message_id])
        rows = [_operation_row(op, messages, workspace, manifests, blobs, task_record, moves) for op in ops]
        _write_data(site, f"data/t/{key}/ops-{n}.js", f"t/{key}/ops/{n}", rows)
        chunks.append({"n": n, "first_seq": ops[0].seq, "last_seq": ops[-1].seq, "count": len(ops),
                       "step_min": min(o.step_start for o in ops), "step_max": max(o.step_end for o in ops)})
        after, n = ops[-1].seq, n + 1
    return chunks


def _operation_row(op: Any, messages: dict[str, Any], workspace: _Workspace, manifests: dict[int | None, Any],
                   blobs: Any, task_record: Any, moves: Any) -> dict[str, Any]:
    """One operation as the viewer shows it; ``workspace`` follows the trial's files operation by operation."""
    row = {"seq": op.seq, "operation": op.operation, "arguments": _clip(op.arguments),
           "feedback": _clip(op.feedback), "step_start": op.step_start, "step_end": op.step_end,
           "started_at": op.started_at, "ended_at": op.ended_at,
           "summary": summary(op.operation, op.arguments, op.feedback, task_record=task_record,
                              scene=next(moves, None) if reached_scene(op.operation, op.feedback) else None)}
    m = messages.get(op.message_id) if op.message_id else None
    if m is not None:
        response = m.pop("response")
        row["message"] = {**m, "parts": _clip(readable_parts(m["provider"], response))}
    if op.operation == "write_file" and isinstance(op.arguments.get("content"), str):
        path = str(op.arguments.get("path", ""))
        content = op.arguments["content"]
        row["diff"] = _clip(_diff(path, workspace.files.get(path), content))
        workspace.files[path] = content
    if op.seq in manifests and blobs is not None:
        before = dict(workspace.files)
        workspace.load(manifests[op.seq])  # what the workspace really holds after this operation
        if op.operation != "write_file":  # e.g. files an exec'd script wrote
            row["workspace_changes"] = _clip(_changes(before, workspace.files))
    return row


def _export_trial(reader: RunReader, run_dir: Path, site: Path, series: dict[str, Any], attempt: dict[str, Any],
                  artifacts: list[Any], blobs: Any, exported_blobs: set[str], chunk: int, load_manifest: Any,
                  evidence: bool = True) -> None:
    trial_id, key = attempt["trial_id"], attempt["key"]
    checkpoints, manifests = _export_checkpoints(reader, site, trial_id, blobs, exported_blobs, load_manifest)
    chunks = _export_operations(reader, site, trial_id, key, chunk, manifests, blobs)
    meta = {
        "trial_id": trial_id, "key": key, "series_id": series["series_id"], "task": series["task"],
        "model": series["model"], "mode": series["mode"], "trials": series["trials"], "attempt": attempt,
        "operations": sum(c["count"] for c in chunks), "chunk": chunk, "chunks": chunks,
        "videos": _export_videos(run_dir, site, key, artifacts), "checkpoints": checkpoints,
        "slides": [msgspec.to_builtins(s) for s in reader.slides(trial_id)],
        "failed_artifacts": [{**f, "line": failed_artifact_line(f)} for f in failed_artifacts(reader)
                             if f["trial_id"] == trial_id],
    }
    meta["images"], meta["events"], turns = _export_events(reader, site, trial_id)
    conversation = transcript(turns, reader.operations(trial_id), reader.slides(trial_id),
                              _first_request(reader, trial_id), meta["images"], attempt["index"])
    _write_data(site, f"data/t/{key}/transcript.js", f"t/{key}/transcript", conversation)
    meta["transcript"] = {"src": f"data/t/{key}/transcript.js", "turns": len(conversation["entries"])}
    trace = trace_data(reader, trial_id)
    if "error" in trace:
        meta["trace"] = trace
    else:
        _write_data(site, f"data/t/{key}/trace.js", f"t/{key}/trace", trace)
        meta["trace"] = {"src": f"data/t/{key}/trace.js", "steps": trace["recorded_steps"], "stride": trace["stride"]}
    if evidence:
        from ._evidence import write_trial_evidence

        rel = f"evidence/{key}.zip"
        meta["evidence"] = {"src": rel, **write_trial_evidence(reader, run_dir, site / rel, trial_id, blobs,
                                                                load_manifest)}
    _write_data(site, f"data/t/{key}/trial.js", f"t/{key}", meta)
