"""CURVE encryption and client authentication, for actors served over a network.

A server holds its key pair and the public keys of the clients it admits; a ZAP
authenticator (pyzmq's, one thread per process) checks each connecting client and
logs a refusal. A client holds its own key pair and the server's public key.
"""

from __future__ import annotations

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


def load_key_file(path: str | Path) -> tuple[bytes, bytes | None]:
    """Read a zmq.auth certificate file; returns (public, secret or None)."""
    return zmq.auth.load_certificate(str(path))


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


def stop_authenticators() -> None:
    """Stop ZAP threads (at process exit or test teardown)."""
    with _auth_lock:
        for auth, _ in _authenticators.values():
            auth.stop()
        _authenticators.clear()
