"""GR1 tabletop manifests, the contract a manifest names, its errors and its process checks.

Shared by the stand-in scenes (standin.py) and the native task classes (native.py), which
both build on it and never on each other's internals.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np

from ..backend import SimError
from ..manifest import CONFIGS_DIR, ManifestError, Name, TaskManifest
from .contract import Contract, Fidelity, load_contract

# hash() of this string in a process started with PYTHONHASHSEED=0 (CPython >= 3.11, 64-bit: siphash13). The
# seed asks for PYTHONHASHSEED=0 exactly; sys.flags only says whether hashing is randomized.
HASH_SENTINEL = ("roboswe.gr1.hash-sentinel", 1904134221492686265)

STANDIN_PREFIX = "gr1-standin-"
STANDIN_ENV_PREFIX = "Gr1Standin"

# Folders under the RoboCasa GR1 asset root that the native tabletop tasks load from
# (robocasa_gr1/scripts/download_kitchen_assets.py and download_tabletop_assets.py).
NATIVE_ASSET_FOLDERS = ("textures", "fixtures/fixture_registry", "objects/objaverse", "objects/sketchfab", "objects/lightwheel")


class AssetsMissing(SimError):
    """RoboCasa GR1's downloaded assets are not where a native task needs them; names the missing paths."""

    code = "assets_missing"


class ContractMismatch(SimError):
    """The compiled scene differs from the GR1 contract (joint ranges, actuator mapping, encoders); never run."""

    code = "contract_mismatch"


# ---- manifest --------------------------------------------------------------------------------


class Gr1Upstream(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which GR1 tabletop task a manifest pins; ``registry_horizon`` is the native engine's, recorded only."""

    package: Literal["gr1"] = "gr1"
    version: str  # robosuite.__version__ (praxis-robosuite reports 1.5.2)
    robocasa_gr1: str  # robocasa_gr1.__version__ (praxis-robocasa-gr1 0.2.0 reports 0.2.0.post1)
    mujoco: str  # major.minor series
    env: str  # stand-in: a Gr1Standin* class of sim/gr1/scenes.py; native: a robocasa_gr1 task class
    robot: Literal["GR1ArmsAndWaistFourierHands"] = "GR1ArmsAndWaistFourierHands"
    registry_horizon: int = 1000
    contract: Name = "gr1-tabletop"  # configs/contracts/<contract>.toml
    layouts: list[int] = []  # native: the task's VALID_LAYOUTS (recorded; the gym factory does not force them)
    styles: list[int] = []
    assets_root: str = ""  # native: the asset root; "" = $ROBOCASA_GR1_ASSETS, else robocasa_gr1/models/assets
    # native: "user" = the user's downloaded RoboCasa GR1 assets; "placeholder" = the generated kit
    # (sim/gr1/kit.py), for offline tests only, recorded with every result and never comparable.
    assets: Literal["user", "placeholder"] = "user"


class Gr1Manifest(TaskManifest, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A task manifest of the GR1 tabletop family; its ``fidelity`` is recorded with every result."""

    fidelity: Fidelity
    upstream: Gr1Upstream

    def __post_init__(self) -> None:
        super().__post_init__()
        standin = self.fidelity == "offline-standin"
        if standin != self.id.startswith(STANDIN_PREFIX) or standin != self.upstream.env.startswith(STANDIN_ENV_PREFIX):
            raise ManifestError(
                f"task {self.id!r}: fidelity = {self.fidelity!r} with env {self.upstream.env!r}; stand-in tasks have ids "
                f"starting {STANDIN_PREFIX!r} and {STANDIN_ENV_PREFIX}* scenes, native tasks neither (ids never collide)")
        if self.upstream.assets == "placeholder" and standin:
            raise ManifestError(f"task {self.id!r}: assets = 'placeholder' is for native task classes on the generated kit")
        if self.controller.parts:
            raise ManifestError(f"task {self.id!r}: the GR1 controller comes from the contract; remove [controller.parts]")
        contract = load_contract(contract_path(self.upstream.contract))
        if self.control_hz != contract.control_hz:
            raise ManifestError(f"task {self.id!r}: control_hz = {self.control_hz} but the contract runs at {contract.control_hz} Hz")
        obs = contract.observation
        cams = [(c.name, c.width, c.height, c.depth, c.calibration) for c in self.observation.cameras]
        want = [(obs.image, *obs.pipeline.output, False, False)]
        if cams != want or self.observation.proprio != [obs.state] or self.observation.privileged or self.privileged:
            raise ManifestError(
                f"task {self.id!r}: the GR1 observation allowlist is exactly cameras = [{{name = {obs.image!r}, width = 256, "
                f"height = 256, depth = false, calibration = false}}] and proprio = [{obs.state!r}], nothing privileged")


def gr1_manifest(manifest: TaskManifest | dict) -> Gr1Manifest:
    """The manifest as a Gr1Manifest (from its builtins form if needed); raises ManifestError."""
    if isinstance(manifest, Gr1Manifest):
        return manifest
    data = manifest.to_builtins() if isinstance(manifest, TaskManifest) else manifest
    try:
        return msgspec.convert(data, Gr1Manifest)
    except msgspec.ValidationError as e:
        raise ManifestError(f"not a GR1 tabletop manifest: {e}") from None


def check_hash_sentinel() -> None:
    """Raise SimError unless this process hashes strings as PYTHONHASHSEED=0 does."""
    text, expected = HASH_SENTINEL
    if hash(text) != expected:
        raise SimError("this simulator process does not run with PYTHONHASHSEED=0 (hash sentinel differs); "
                       "start it with PYTHONHASHSEED=0 in its environment, as the GR1 tabletop protocol requires")


def contract_path(name: str) -> Path:
    """configs/contracts/<name>.toml (the shipped configs, wherever roboswe is installed)."""
    return CONFIGS_DIR / "contracts" / f"{name}.toml"


def contract_for(manifest: Gr1Manifest) -> tuple[Contract, str]:
    """The manifest's contract and the sha256 of its file (recorded in every fingerprint's versions)."""
    path = contract_path(manifest.upstream.contract)
    return load_contract(path), hashlib.sha256(path.read_bytes()).hexdigest()


def pinned_versions(manifest: Gr1Manifest) -> dict[str, str]:
    """This process's simulator versions, checked against the manifest's pins; raises SimError naming both."""
    import mujoco
    import robocasa_gr1  # importing it registers its task classes with robosuite
    import robosuite

    up = manifest.upstream
    versions = {"robosuite": robosuite.__version__, "robocasa_gr1": robocasa_gr1.__version__,
                "mujoco": mujoco.__version__, "numpy": np.__version__}
    if (versions["robosuite"] != up.version or versions["robocasa_gr1"] != up.robocasa_gr1
            or not versions["mujoco"].startswith(up.mujoco + ".")):
        raise SimError(f"task {manifest.id!r} pins robosuite {up.version} / robocasa_gr1 {up.robocasa_gr1} / mujoco "
                       f"{up.mujoco}.x but this process has {versions}; install praxis-robocasa-gr1==0.2.0")
    return versions
