"""A fresh process for the paint determinism tests.

``run SEED ROUNDS``: the scripted painter's session, printed as JSON (action logs and canvas hashes).
``replay``: reads that JSON on stdin, re-executes each round's action log in a fresh scene and prints [canvas hash, fingerprint digest] per round.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from roboswe.sim.manifest import load_manifest
from roboswe.sim.paint.backend import PaintBackend, replay_round
from roboswe.sim.paint.painter import scripted_session

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    manifest = load_manifest(ROOT / "configs" / "tasks" / "paint-three-strokes.toml")
    if sys.argv[1] == "run":
        print(json.dumps(scripted_session(PaintBackend(manifest), int(sys.argv[2]), int(sys.argv[3]))))
    else:
        rounds = json.load(sys.stdin)
        hashes = []
        for r in rounds:
            sim = replay_round(manifest, r["seed"], r["action_log"])  # a new scene per round
            hashes.append([sim.saved.sha256 if sim.saved else None, sim.fingerprint.digest])
        print(json.dumps(hashes))


if __name__ == "__main__":
    main()
