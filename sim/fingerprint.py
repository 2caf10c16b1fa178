"""What a scene's fingerprint hashes, free of where things are installed.

A model built from the same files in another folder must fingerprint the same, so absolute
paths (the asset root, the simulator packages) are replaced by placeholders such as
``{robosuite}`` before anything is hashed, and a compiled model is digested by its arrays, not
by ``mj_saveModel`` bytes that embed paths. Every family that fingerprints compiled scenes
uses these (robosuite, RoboCasa kitchens, GR1 tabletop).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .backend import SimError

FILE_ATTR = re.compile(r'\bfile="([^"]+)"')
"""An MJCF ``file="..."`` attribute: the asset files a scene's XML names."""

PathTokens = Sequence[tuple[str, str]]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def path_tokens(paths: Mapping[str, str]) -> list[tuple[str, str]]:
    """``{absolute path: placeholder}`` as pairs, longest path first (a root inside another is replaced first)."""
    return sorted(paths.items(), key=lambda kv: -len(kv[0]))


def portable(text: str, tokens: PathTokens) -> str:
    """``text`` with each path replaced by its placeholder: where the assets and packages live is not part of a scene."""
    for path, token in tokens:
        text = text.replace(path, token)
    return text


def used_assets(task: str, files: list[str], tokens: PathTokens, hashes: dict[str, str]) -> list[tuple[str, str]]:
    """(path with ``tokens`` replaced, content sha256) of every asset file a scene names, sorted: the used-asset
    closure a fingerprint covers. ``hashes`` caches the contents' digests between resets; raises SimError
    naming an unreadable file."""
    entries = []
    for f in files:
        if f not in hashes:
            try:
                hashes[f] = sha256_hex(Path(f).read_bytes())
            except OSError as e:
                raise SimError(f"task {task!r}: the scene names asset {f}, which cannot be read: {e.strerror}") from None
        entries.append((portable(f, tokens), hashes[f]))
    return sorted(entries)


def compiled_model_digest(model) -> str:
    """sha256 over every array of the compiled model except its file paths.

    ``mj_saveModel`` bytes (the robosuite backend's choice) embed the absolute path of every
    asset file and the paths' total length, so the same kitchen built from a kit in another
    folder would look different; the arrays (meshes, textures, bodies, options' effects) are
    what a changed asset would change.
    """
    h = hashlib.sha256()
    for name in sorted(dir(model)):
        if "path" in name or name.startswith("_"):
            continue
        value = getattr(model, name, None)
        if isinstance(value, np.ndarray):
            h.update(f"{name}:{value.dtype.str}:{value.shape};".encode())
            h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()
