"""One trial's evidence as a zip, for the viewer's "download evidence" link.

The archive holds every row the run database has for the trial attempt (its start and end,
provider messages with their exact bytes, operations, control traces, slides, events,
checkpoints, replays, artifacts), the run and series rows it belongs to, the workspace
blobs its checkpoints name, and its videos with their step indexes. Bytes columns are
base64 in the JSON lines. MANIFEST.json lists every file with its sha256; a blob or video
that does not read back as recorded is listed as missing with the reason, never packed.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Any

import msgspec

from roboswe.records.artifacts import ArtifactError, check_stored, sha256_file
from roboswe.records.reader import RunReader

# Tables with a trial_id column, in the order a reader would want them.
TRIAL_TABLES = ("trials", "trial_ends", "verifications", "operations", "messages", "control_traces", "slides",
                "checkpoints", "events", "artifacts")
_json = msgspec.json.Encoder()


def _rows(reader: RunReader, table: str, column: str, value: str) -> list[dict[str, Any]]:
    cursor = reader._conn.execute(f'SELECT * FROM {table} WHERE "{column}" = ? ORDER BY rowid', (value,))
    names = [d[0] for d in cursor.description]
    return [{n: ({"base64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v) for n, v in zip(names, row)}
            for row in cursor]


def write_trial_evidence(reader: RunReader, run_dir: Path, out: Path, trial_id: str, blobs: Any,
                         load_manifest: Any) -> dict[str, Any]:
    """Write the trial's evidence zip to ``out``; returns {size, sha256, files, missing}."""
    view = reader.trial(trial_id)
    series = reader.series()
    series_row = next(s for s in series if s.series_id == view.start.series_id)
    files: dict[str, str] = {}
    missing: dict[str, str] = {}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:

        def put(name: str, data: bytes, *, compress: bool = True) -> None:
            z.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
            files[name] = hashlib.sha256(data).hexdigest()

        put("records/run.json", _json.encode(_rows(reader, "runs", "run_id", series_row.run_id)))
        put("records/series.json", _json.encode(_rows(reader, "series", "series_id", series_row.series_id)))
        for table in TRIAL_TABLES:
            rows = _rows(reader, table, "trial_id", trial_id)
            put(f"records/{table}.jsonl", b"".join(_json.encode(r) + b"\n" for r in rows))
        for cp in reader.checkpoints(trial_id):
            try:
                manifest = load_manifest(cp.manifest)
            except Exception as e:  # noqa: BLE001 - an unreadable manifest is listed, the rest is packed
                missing[f"checkpoint {cp.checkpoint_id}"] = str(e)
                continue
            for entry in manifest.entries:
                name = f"blobs/{entry.sha256}"
                if name in files:
                    continue
                if blobs is None:
                    missing[name] = "the run directory has no blobs/"
                    continue
                try:
                    put(name, blobs.get(entry.sha256))
                except Exception as e:  # noqa: BLE001 - a damaged blob is listed as missing
                    missing[name] = str(e)
        for a in reader.artifacts(trial_id=trial_id):
            name = f"artifacts/{Path(a.path).name}" if a.camera == "" else f"artifacts/{a.camera}/{Path(a.path).name}"
            try:
                check_stored(run_dir / a.path, a.sha256)
            except ArtifactError as e:
                missing[name] = str(e)
                continue
            z.write(run_dir / a.path, name, compress_type=zipfile.ZIP_STORED if a.artifact == "video" else None)
            files[name] = a.sha256
        manifest = {"format": "roboswe.trial-evidence/1", "trial_id": trial_id, "series_id": series_row.series_id,
                    "run_id": series_row.run_id, "files": files, "missing": missing}
        z.writestr("MANIFEST.json", msgspec.json.format(_json.encode(manifest), indent=1))
    tmp.replace(out)
    sha, size = sha256_file(out)
    return {"size": size, "sha256": sha, "files": len(files), "missing": missing}
