"""Hidden seeds: HMAC-SHA256(salt, "task|version|index"), readable only where the salt is.

The salt lives in a file only the verifier opens (never in the repository for a real run, never in
the sandbox, never in an environment variable). The record holds ``sha256(salt)`` and a commitment
to the plan the seeds produce; the seeds themselves are written into the record only after
verification, so a replay can re-run the battery without the salt and check it against the
commitment. The public salt shipped here is for CI and calibration and is labelled ``public``;
a different salt is a different protocol version (``protocol_id``), and the index never mixes them.
"""

from __future__ import annotations

import hashlib
import hmac
from importlib import resources
from pathlib import Path

import msgspec

PUBLIC_LABEL = "public"
SEED_BITS = 63  # numpy accepts any non-negative int; 63 bits stay positive in every JSON reader


class Salt(msgspec.Struct, frozen=True, kw_only=True):
    """A salt and what may be said of it in a record: its label and its hash."""

    secret: bytes
    label: str  # "public" for the shipped one, else the file's name

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.secret).hexdigest()

    def __repr__(self) -> str:  # never print the secret by accident
        return f"Salt(label={self.label!r}, sha256={self.sha256[:12]}...)"

    __str__ = __repr__


class SaltError(ValueError):
    pass


def public_salt() -> Salt:
    shipped = msgspec.json.decode(resources.files("roboswe.rle").joinpath("public_salt.json").read_bytes())
    return Salt(secret=shipped["salt"].encode(), label=PUBLIC_LABEL)


def load_salt(path: Path | None) -> Salt:
    """The salt in ``path`` (at least 16 bytes), or the public one when None."""
    if path is None:
        return public_salt()
    try:
        data = Path(path).read_bytes().strip()
    except OSError as e:
        raise SaltError(f"cannot read the salt file {path}: {e.strerror}") from e
    if len(data) < 16:
        raise SaltError(f"the salt in {path} is {len(data)} bytes; use at least 16 (e.g. `openssl rand -hex 32`)")
    salt = Salt(secret=data, label=Path(path).name)
    if salt.sha256 == public_salt().sha256:
        return public_salt()  # the public salt is public under whatever name
    return salt


def hidden_seeds(salt: Salt, task: str, version: str, count: int) -> list[int]:
    """The battery's seeds: one per group/episode, in order."""
    out = []
    for index in range(count):
        mac = hmac.new(salt.secret, f"{task}|{version}|{index}".encode(), hashlib.sha256).digest()
        out.append(int.from_bytes(mac[:8], "big") >> (64 - SEED_BITS))
    return out


def protocol_id(version: str, salt_sha256: str, salt_label: str) -> str:
    """The identity the index pools by: the rules' version and which salt drew the seeds."""
    return f"{version}+{'public' if salt_label == PUBLIC_LABEL else 'private'}:{salt_sha256[:16]}"


def commitment(plan: object) -> str:
    """sha256 over the plan's canonical JSON (seeds included, so the commitment pins them)."""
    return hashlib.sha256(msgspec.json.encode(plan, order="sorted")).hexdigest()
