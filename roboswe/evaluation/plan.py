"""What is fixed about one series, and the small facts series, trial and verify share.

Kept apart from ``series`` and ``trial`` so that both (and ``verify``) import it without
importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from roboswe.evaluation.admission import AdmittedTask
from roboswe.evaluation.series_config import Budgets
from roboswe.protocol import recorder as rec
from roboswe.protocol.bridge import ScriptLimits
from roboswe.sandbox.walk import remove_tree


class SeriesPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Everything fixed about one series."""

    run_id: str
    series_id: str
    task: AdmittedTask
    budgets: Budgets
    trials: int
    retain: Literal["retain", "none"]
    backend: str | None  # sandbox backend ("docker" | "bwrap"); None: the bridge chooses
    model: str
    run_dir: str

    @property
    def manifest(self) -> dict[str, Any]:
        return self.task.manifest

    @property
    def reference_fingerprint(self) -> str:
        return (self.task.fingerprint or {}).get("digest", "")

    @property
    def seed(self) -> int:
        return int((self.task.fingerprint or {}).get("seed", self.task.manifest["seed"]))

    @property
    def assets(self) -> str | None:
        """Whose assets the admitted scene was built from ("placeholder": RoboCasa's offline kit), as the
        simulator's fingerprint says (else the manifest); None for a family without the notion."""
        versions = (self.task.fingerprint or {}).get("versions") or {}
        return versions.get("assets") or (self.task.manifest.get("upstream") or {}).get("assets")

    def limits(self) -> ScriptLimits:
        return ScriptLimits(steps=self.budgets.script_steps, seconds=self.budgets.script_seconds)

    def workspace_dir(self) -> Path:
        return Path(self.run_dir) / "workspaces" / slug(self.series_id)


def trial_id(series_id: str, index: int, attempt: int) -> str:
    return f"{series_id}/t{index}a{attempt}"


def previous_figures(index: int, end: rec.TrialEnded) -> dict[str, Any]:
    """What the next trial's opening says of trial ``index`` (see instructions.trial_opening)."""
    return {"index": index, "outcome": end.outcome, "reason": end.reason, "control_steps": end.control_steps,
            "sim_time": end.sim_time, "active_time": end.active_time}


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def make_dir(path: Path) -> Path:
    """Create a directory the sandbox user can traverse (bwrap binds it as that user)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def fresh_dir(path: Path) -> Path:
    """An empty directory at ``path``; earlier content is removed (checkpoints hold it).

    The sandbox user built that content: remove_tree walks any depth without following links.
    """
    remove_tree(path)
    make_dir(path.parent)
    return make_dir(path)
