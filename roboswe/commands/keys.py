"""CURVE key directories for a remote simulator: ``roboswe keys generate DIR`` writes them.

DIR holds ``server.key`` / ``server.key_secret`` and ``client.key`` / ``client.key_secret``
(zmq.auth certificate files). The server admits every ``*.key`` public key in its DIR other
than its own; copy ``server.key`` plus the client pair to the coordinator's host.
"""

from __future__ import annotations

import os
from pathlib import Path

from roboswe.actors import CurveClientKeys, CurveServerKeys


class KeyDirError(Exception):
    """A key directory that cannot be used; the message names the file and the fix."""


def generate(directory: str | Path, *, force: bool = False) -> dict[str, Path]:
    """Create server and client key pairs in ``directory``; refuses to overwrite unless ``force``."""
    import zmq.auth

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    existing = [p for p in (d / "server.key_secret", d / "client.key_secret") if p.exists()]
    if existing and not force:
        raise KeyDirError(f"{existing[0]} already exists; use another directory or --force to replace the keys")
    paths = {}
    for name in ("server", "client"):
        _public, secret = zmq.auth.create_certificates(str(d), name)
        os.chmod(secret, 0o600)
        paths[name] = Path(secret)
    return paths


def _load(path: Path, need_secret: bool) -> tuple[bytes, bytes | None]:
    import zmq.auth

    if not path.exists():
        raise KeyDirError(f"{path} does not exist; create keys with `roboswe keys generate {path.parent}`")
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except Exception as e:  # noqa: BLE001  (malformed certificate: say which file)
        raise KeyDirError(f"{path} is not a CURVE certificate: {e}") from None
    if need_secret and not secret:
        raise KeyDirError(f"{path} holds no secret key")
    return public, secret


def server_keys(directory: str | Path) -> CurveServerKeys:
    """The simulator host's keys: its secret plus every client public key in the directory."""
    d = Path(directory)
    public, secret = _load(d / "server.key_secret", True)
    clients = [_load(p, False)[0] for p in sorted(d.glob("*.key")) if p.name != "server.key"]
    if not clients:
        raise KeyDirError(f"{d} holds no client public key (*.key); copy client.key there")
    return CurveServerKeys(public_key=public, secret_key=secret, allowed_clients=clients)


def client_keys(directory: str | Path, name: str = "client") -> CurveClientKeys:
    """The coordinator/bridge side: its key pair plus the server's public key."""
    d = Path(directory)
    public, secret = _load(d / f"{name}.key_secret", True)
    server_public, _ = _load(d / "server.key", False)
    return CurveClientKeys(public_key=public, secret_key=secret, server_key=server_public)
