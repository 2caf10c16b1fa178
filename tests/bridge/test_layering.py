"""Layering: the sandbox backends, the allow-list and the door know nothing of ZeroMQ."""

import subprocess
import sys


def test_sandbox_allowlist_and_door_import_without_zeromq():
    code = (
        "import sys\n"
        "import roboswe.sandbox, roboswe.bridge.allowlist, roboswe.bridge.door, roboswe.bridge.apidoc, roboswe.sandbox.images\n"
        "bad = sorted(m for m in sys.modules if m == 'zmq' or m.startswith('zmq.') or m == 'docker')\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
