"""`roboswe view`: serve an exported site on localhost with plain http.server (plus byte ranges for video seeking)."""

from __future__ import annotations

import functools
import http.server
import os
import re
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files; honours single byte ranges, which browsers need to seek inside an mp4."""

    def send_head(self):
        header = self.headers.get("Range")
        path = self.translate_path(self.path)
        match = _RANGE.match(header.strip()) if header else None
        if match is None or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        first, last = match.groups()
        if first == "":  # suffix range: the last N bytes
            start, end = max(0, size - int(last or 0)), size - 1
        else:
            start, end = int(first), min(int(last) if last else size - 1, size - 1)
        if start >= size or start > end:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.end_headers()
            return None
        f = open(path, "rb")  # noqa: SIM115 - closed by copyfile's caller
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self._remaining = end - start + 1
        return f

    def copyfile(self, source, outputfile):
        remaining = getattr(self, "_remaining", None)
        if remaining is None:
            return super().copyfile(source, outputfile)
        self._remaining = None
        while remaining > 0:
            data = source.read(min(1 << 16, remaining))
            if not data:
                break
            outputfile.write(data)
            remaining -= len(data)

    def end_headers(self):
        if not self.headers.get("Range"):
            self.send_header("Accept-Ranges", "bytes")
        super().end_headers()

    def log_message(self, format, *args):  # keep the terminal quiet; errors still print
        if args and str(args[1] if len(args) > 1 else "").startswith(("4", "5")):
            super().log_message(format, *args)


def make_server(site: Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server for ``site`` bound to 127.0.0.1 (port 0: a free one)."""
    handler = functools.partial(SiteHandler, directory=str(site))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve_site(site: Path, port: int) -> int:
    """Serve until Ctrl-C; returns the exit code."""
    try:
        server = make_server(site, port)
    except OSError as e:
        print(f"roboswe view: cannot listen on 127.0.0.1:{port}: {e.strerror}; pick another --port")
        return 2
    print(f"roboswe view: serving {site} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
