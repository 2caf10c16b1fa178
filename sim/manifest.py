"""Task manifests and datasets: typed Structs decoded from TOML, typos fail loudly."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

Positive = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
Name = Annotated[str, msgspec.Meta(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")]

from roboswe.configs import CONFIGS_DIR  # noqa: E402 - shipped package data (importlib.resources): checkout or wheel


class ManifestError(ValueError):
    """A manifest or dataset file that cannot be used; the message names the file and the field."""


class _Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class Upstream(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which upstream task this manifest pins, and its own episode horizon (not our budget)."""

    package: Literal["robosuite", "fake"] = "robosuite"  # the simulator family (sim/families.py); "fake": sim/fake/
    version: str
    mujoco: str  # major.minor series, e.g. "3.3"
    env: str  # robosuite environment class, e.g. "Lift"
    robot: str  # robosuite robot name, e.g. "Panda"
    registry_horizon: Positive  # upstream default horizon, recorded only; budgets below govern trials
    env_kwargs: dict[str, str | int | float | bool] = {}


class Controller(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """robosuite composite controller: the robot's default BASIC config, with whole-part replacements."""

    composite: Literal["BASIC"] = "BASIC"
    # part name -> complete robosuite part config that replaces the default (e.g. absolute JOINT_POSITION arms)
    parts: dict[str, dict[str, Any]] = {}


class Camera(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    width: Positive = 256
    height: Positive = 256
    depth: bool = False
    calibration: bool = False  # expose K and T_world_camera


class Observation(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The allowlist: only these keys and cameras ever leave the simulator."""

    proprio: list[Name]
    cameras: list[Camera]
    privileged: list[Name] = []  # object state keys; allowed only when the manifest says privileged = true


class Video(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    cameras: list[Name]
    fps: Positive = 10
    width: Positive = 256
    height: Positive = 256


class Budget(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    steps: Positive
    seconds: PositiveFloat


class Budgets(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    trial: Budget
    script: Budget


class Success(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    interval: Positive  # consecutive control steps the upstream predicate must hold


class TaskManifest(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One admitted-able task: upstream pin, controller, observation allowlist, budgets."""

    id: Name
    instruction: str
    seed: Annotated[int, msgspec.Meta(ge=0)]
    control_hz: Positive
    privileged: bool = False
    notes: str = ""
    upstream: Upstream
    controller: Controller = Controller()
    observation: Observation
    video: Video
    success: Success
    budgets: Budgets

    def __post_init__(self) -> None:
        if self.observation.privileged and not self.privileged:
            raise ManifestError(
                f"task {self.id!r}: observation.privileged lists {self.observation.privileged} "
                "but the manifest does not say privileged = true; either remove those keys or label the task privileged"
            )
        if self.control_hz % self.video.fps:
            raise ManifestError(
                f"task {self.id!r}: video.fps = {self.video.fps} must divide control_hz = {self.control_hz} "
                "(frames are taken every control_hz/fps control steps)"
            )
        if self.budgets.script.steps > self.budgets.trial.steps:
            raise ManifestError(f"task {self.id!r}: script step budget exceeds the trial step budget")
        names = [c.name for c in self.observation.cameras]
        if len(set(names)) != len(names):
            raise ManifestError(f"task {self.id!r}: duplicate camera in observation.cameras: {names}")

    def camera(self, name: str) -> Camera:
        """The allowed camera of that name; raises KeyError naming the allowed ones."""
        for cam in self.observation.cameras:
            if cam.name == name:
                return cam
        raise KeyError(f"camera {name!r} is not allowed for task {self.id!r}; allowed: {[c.name for c in self.observation.cameras]}")

    @property
    def allowed_state_keys(self) -> list[str]:
        return [*self.observation.proprio, *self.observation.privileged]

    def to_builtins(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    def digest(self) -> str:
        """sha256 of the canonical JSON form; pins the exact manifest a trial ran."""
        return hashlib.sha256(msgspec.json.encode(self.to_builtins(), order="sorted")).hexdigest()


class Dataset(_Config, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A named list of task manifests (by id, resolved in configs/tasks/)."""

    id: Name
    description: str = ""
    tasks: list[Name]
    excluded: dict[Name, str] = {}  # task id -> recorded reason it is not in `tasks`


def _decode(path: Path, kind: type, what: str):
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ManifestError(f"cannot read {what} {path}: {e.strerror}") from None
    try:
        if kind is TaskManifest:  # a family's manifest type, chosen by its upstream.package
            from .families import manifest_type

            raw = msgspec.toml.decode(data)
            return msgspec.convert(raw, manifest_type(raw))
        return msgspec.toml.decode(data, type=kind)
    except msgspec.ValidationError as e:
        raise ManifestError(f"{path}: invalid {what}: {e}. Fix that field (compare configs/tasks/lift-panda.toml).") from None
    except msgspec.DecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    except ManifestError as e:
        raise ManifestError(f"{path}: {e}") from None


def load_manifest(path: str | Path) -> TaskManifest:
    """Decode one task manifest; raises ManifestError naming the file and the bad field."""
    return _decode(Path(path), TaskManifest, "task manifest")


def manifest_from_builtins(data: dict[str, Any]) -> TaskManifest:
    """Rebuild a manifest from its to_builtins() form (admitted.json, wire); raises ManifestError."""
    from .families import manifest_type

    try:
        return msgspec.convert(data, manifest_type(data))
    except msgspec.ValidationError as e:
        raise ManifestError(f"invalid task manifest: {e}") from None


class _Package(msgspec.Struct):
    package: str | None = None


class _FamilyOf(msgspec.Struct):
    """Only what names a manifest's family: its Struct type follows from it (``families.family(name).manifest``)."""

    upstream: _Package | None = None


def manifest_from_wire(data: bytes | msgspec.Raw) -> TaskManifest:
    """Decode a manifest as Load carries it (``protocol.sim.encode_manifest``) into its family's manifest
    Struct, every field checked; an unknown or missing family decodes as TaskManifest, whose check names
    the allowed ones. Raises ManifestError."""
    from .families import family

    try:
        name = (msgspec.msgpack.decode(data, type=_FamilyOf).upstream or _Package()).package
        try:
            kind = family(name).manifest if name is not None else TaskManifest
        except KeyError:
            kind = TaskManifest
        return msgspec.msgpack.decode(data, type=kind)
    except msgspec.DecodeError as e:  # ValidationError included
        raise ManifestError(f"invalid task manifest: {e}") from None


def resolve_dataset(name_or_path: str | Path) -> Path:
    """A dataset path, or a shipped dataset name like 'robosuite-pilot'; raises ManifestError."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        return p
    shipped = CONFIGS_DIR / "datasets" / f"{name_or_path}.toml"
    if shipped.exists():
        return shipped
    from roboswe.terminal import did_you_mean

    known = sorted(x.stem for x in (CONFIGS_DIR / "datasets").glob("*.toml"))
    raise ManifestError(f"dataset {str(name_or_path)!r} not found{did_you_mean(str(name_or_path), known)}: give a .toml path or one of {known}")


def load_dataset(name_or_path: str | Path) -> tuple[Dataset, list[TaskManifest]]:
    """Decode a dataset and every task it lists; raises ManifestError.

    The task manifests are looked for where a dataset keeps them: ``../tasks/`` as in configs/
    (configs/datasets/X.toml, configs/tasks/ID.toml), or a ``tasks/`` folder beside the dataset,
    or the dataset's own folder (a dataset of one's own anywhere, its manifests beside it).
    """
    path = resolve_dataset(name_or_path)
    dataset = _decode(path, Dataset, "dataset")
    here = path.resolve().parent
    places = [here.parent / "tasks", here / "tasks", here]
    tasks_dir = next((d for d in places if dataset.tasks and (d / f"{dataset.tasks[0]}.toml").is_file()), places[0])
    if dataset.tasks and not (tasks_dir / f"{dataset.tasks[0]}.toml").is_file():
        raise ManifestError(f"{path}: no manifest {dataset.tasks[0]}.toml for its first task in "
                            + ", ".join(str(d) for d in places) + " (put the task manifests in one of them)")
    manifests = []
    for task_id in dataset.tasks:
        m = load_manifest(tasks_dir / f"{task_id}.toml")
        if m.id != task_id:
            raise ManifestError(f"{tasks_dir / (task_id + '.toml')}: id = {m.id!r} but dataset {dataset.id!r} lists it as {task_id!r}")
        manifests.append(m)
    return dataset, manifests
