"""A loopback fake of each provider's free model-lookup endpoints (GET), for the online preflight.

It enforces what the real services do: a request without the right key is refused the way
that provider refuses it (401 with its error body; Google: 400 API_KEY_INVALID), an unknown
model is a JSON 404 in the provider's error shape, Anthropic insists on its version header,
and a path the service does not have is a bare HTML 404. tests/providers/fakes.py serves
only the POST (generation and count) endpoints.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class FakeModelLookup:
    """GET model lookups for one wire; ``models`` are the ids it knows, ``key`` the key it accepts."""

    def __init__(self, wire: str, *, key: str, models: tuple[str, ...], status_override: int | None = None):
        self.wire, self.key, self.models = wire, key, set(models)
        self.status_override = status_override  # answer every request with this status (e.g. 503)
        self.seen: list[tuple[str, dict[str, str]]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"lookup-{wire}", daemon=True)

    def __enter__(self) -> FakeModelLookup:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self._server.server_address[1]}"
        return {"openai": root + "/v1", "openrouter": root + "/api/v1", "anthropic": root, "google": root}[self.wire]

    # ---- the service's rules

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, Any]:
        if self.status_override:
            return self.status_override, _error(self.wire, self.status_override, "service unavailable")
        url = urlsplit(path)
        route = self._route(url.path)
        if route is None:
            return 404, "<html><body>404 Not Found</body></html>"
        kind, model = route
        if self.wire == "anthropic" and "anthropic-version" not in headers:
            return 400, _error("anthropic", 400, "anthropic-version: header is required")
        if not self._authorized(headers, parse_qs(url.query)):
            if self.wire == "google":
                return 400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                       "status": "INVALID_ARGUMENT",
                                       "details": [{"reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}
            return 401, _error(self.wire, 401, "invalid x-api-key" if self.wire == "anthropic" else "Incorrect API key provided")
        if kind == "key":
            return 200, {"data": {"label": "sk-or-v1-...", "limit": None, "usage": 0}}
        if model not in self.models:
            return 404, _error(self.wire, 404, f"model: {model}" if self.wire == "anthropic" else f"The model `{model}` does not exist")
        return 200, {"id": model, "type": "model", "object": "model", "name": f"models/{model}"}

    def _route(self, path: str) -> tuple[str, str] | None:
        prefix = {"anthropic": "/v1/models/", "openai": "/v1/models/", "google": "/v1beta/models/"}.get(self.wire)
        if prefix is not None:
            return ("model", path[len(prefix):]) if path.startswith(prefix) and len(path) > len(prefix) else None
        if path == "/api/v1/key":
            return "key", ""
        if path.startswith("/api/v1/models/") and path.endswith("/endpoints"):
            return "model", path[len("/api/v1/models/"):-len("/endpoints")]
        return None

    def _authorized(self, headers: dict[str, str], query: dict[str, list[str]]) -> bool:
        if self.wire == "anthropic":
            return headers.get("x-api-key") == self.key
        if self.wire == "google":
            return headers.get("x-goog-api-key") == self.key or query.get("key") == [self.key]
        return headers.get("authorization") == f"Bearer {self.key}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                headers = {k.lower(): v for k, v in self.headers.items()}
                fake.seen.append((self.path, headers))
                status, body = fake.answer(self.path, headers)
                raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "text/html" if isinstance(body, str) else "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _error(wire: str, status: int, message: str) -> dict[str, Any]:
    if wire == "anthropic":
        kind = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if wire == "google":
        return {"error": {"code": status, "message": message, "status": "NOT_FOUND" if status == 404 else "UNAVAILABLE"}}
    if wire == "openrouter":
        return {"error": {"code": status, "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": "model_not_found" if status == 404 else "invalid_api_key"}}
