"""Inside the verifier's sandbox: import the sealed entry point and answer the verifier's calls.

Copied into the sandbox's read-only /bridge beside the sealed artifact; runs on the image's python3
with numpy and the bridge framing (roboswe.bridge.wire), nothing else of roboswe. It holds no
secret: it sees one observation at a time and sends back what the artifact returned. The verifier
times every call on its own side and trusts nothing this process says about time or success.
"""

import importlib.util
import json
import socket
import sys

import numpy as np

from roboswe.bridge import wire

SOCKET = "/bridge/artifact.sock"
ARTIFACT = "/bridge/artifact"


def _plain(value):
    """numpy scalars to Python numbers; anything else JSON cannot carry fails the call."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _observation(head, blobs):
    h, w = head["height"], head["width"]
    obs = {"rgb": np.frombuffer(blobs[0], dtype=np.uint8).reshape(h, w, 3).copy(), "camera": head["camera"]}
    if len(blobs) > 1:
        obs["depth"] = np.frombuffer(blobs[1], dtype=np.float32).reshape(h, w).copy()
    return obs


def _load(entry_file, entry_function):
    sys.path.insert(0, ARTIFACT)
    name = entry_file.rsplit("/", 1)[-1].removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, f"{ARTIFACT}/{entry_file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return getattr(module, entry_function)()


def main():
    entry_file, entry_function = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(SOCKET)
    estimator = None
    while True:
        frames = wire.read_message(sock.recv)  # partial reads and the verifier's close (EOFError) handled there
        head = json.loads(frames[0])
        call = head.get("call")
        try:
            if call == "close":
                return
            if call == "load":
                estimator, value = _load(entry_file, entry_function), None
            elif call == "reset":
                estimator.reset()
                value = None
            elif call == "estimate":
                value = estimator.estimate(_observation(head, frames[1:]))
            else:
                raise ValueError(f"unknown call {call!r}")
            reply = json.dumps({"ok": True, "value": value}, default=_plain, allow_nan=False)
        except BaseException as e:  # noqa: BLE001 - the artifact's failure (SystemExit too) is its answer, never the runner's end
            reply = json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]})
        sock.sendall(wire.encode([reply.encode()]))


if __name__ == "__main__":
    main()
