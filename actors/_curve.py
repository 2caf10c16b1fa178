"""CURVE encryption and client authentication, for actors served over a network.

A server holds its key pair and the public keys of the clients it admits; a ZAP
authenticator (pyzmq's, one thread per process) checks each connecting client and
logs a refusal. A client holds its own key pair and the server's public key.

Key directories (``roboswe keys generate DIR`` writes one) hold ``server.key`` /
``server.key_secret`` and ``client.key`` / ``client.key_secret`` (zmq.auth certificate
files). The server admits every ``*.key`` public key in its DIR other than its own; copy
``server.key`` plus the client pair to the coordinator's host.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import structlog
import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

log = structlog.get_logger()

_DOMAIN = "roboswe"  # pyzmq matches the ZAP domain exactly, so server sockets and the allow-list share it


class CurveServerKeys:
    """Server secret/public key plus the client public keys it admits (Z85 bytes)."""

    def __init__(self, *, public_key: bytes, secret_key: bytes, allowed_clients: list[bytes]):
        self.public_key = public_key
        self.secret_key = secret_key
        self.allowed_clients = frozenset(allowed_clients)

    def apply(self, socket: zmq.Socket, actor: str) -> None:
        _start_authenticator(socket.context, self, actor)
        socket.curve_server = True
        socket.curve_publickey = self.public_key
        socket.curve_secretkey = self.secret_key
        socket.zap_domain = _DOMAIN.encode()


class CurveClientKeys:
    """Client key pair plus the public key of the server it trusts (Z85 bytes)."""

    def __init__(self, *, public_key: bytes, secret_key: bytes, server_key: bytes):
        self.public_key = public_key
        self.secret_key = secret_key
        self.server_key = server_key

    def apply(self, socket: zmq.Socket) -> None:
        socket.curve_publickey = self.public_key
        socket.curve_secretkey = self.secret_key
        socket.curve_serverkey = self.server_key


def new_key_pair() -> tuple[bytes, bytes]:
    """A fresh (public, secret) CURVE key pair, Z85-encoded."""
    return zmq.curve_keypair()


class KeyDirError(Exception):
    """A key directory that cannot be used; the message names the file and the fix."""


def generate_key_dir(directory: str | Path, *, force: bool = False) -> dict[str, Path]:
    """Create server and client key pairs in ``directory``; raises KeyDirError rather than overwrite unless ``force``."""
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


def load_certificate(path: Path, *, need_secret: bool) -> tuple[bytes, bytes | None]:
    """Read one zmq.auth certificate file as (public, secret or None); raises KeyDirError naming the file."""
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
    """The simulator host's keys: its secret plus every client public key in the directory; raises KeyDirError."""
    d = Path(directory)
    public, secret = load_certificate(d / "server.key_secret", need_secret=True)
    clients = [load_certificate(p, need_secret=False)[0] for p in sorted(d.glob("*.key")) if p.name != "server.key"]
    if not clients:
        raise KeyDirError(f"{d} holds no client public key (*.key); copy client.key there")
    return CurveServerKeys(public_key=public, secret_key=secret, allowed_clients=clients)


def client_keys(directory: str | Path, name: str = "client") -> CurveClientKeys:
    """The coordinator/bridge side: its key pair plus the server's public key; raises KeyDirError."""
    d = Path(directory)
    public, secret = load_certificate(d / f"{name}.key_secret", need_secret=True)
    server_public, _ = load_certificate(d / "server.key", need_secret=False)
    return CurveClientKeys(public_key=public, secret_key=secret, server_key=server_public)


class _AllowList:
    def __init__(self) -> None:
        self.allowed: set[bytes] = set()
        self.actor = "?"

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self.allowed:
            return True
        log.warning("curve_client_refused", actor=self.actor, domain=domain, client_key=key.decode(errors="replace"))
        return False


_auth_lock = threading.Lock()
_authenticators: dict[int, tuple[ThreadAuthenticator, _AllowList]] = {}


def _start_authenticator(context: zmq.Context, keys: CurveServerKeys, actor: str) -> None:
    # ZAP is per context: one authenticator thread per process serves every CURVE socket.
    with _auth_lock:
        entry = _authenticators.get(id(context))
        if entry is None:
            auth = ThreadAuthenticator(context)
            auth.start()
            allow = _AllowList()
            allow.actor = actor
            auth.configure_curve_callback(domain=_DOMAIN, credentials_provider=allow)
            entry = _authenticators[id(context)] = (auth, allow)
        entry[1].allowed |= keys.allowed_clients

