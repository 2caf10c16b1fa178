"""Hostile artifacts for the verifier: each must end as its own gated or zero result."""

CONSTANT = """
def make_estimator():
    class E:
        def reset(self): pass
        def estimate(self, obs): return {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "T"}
    return E()
"""

IMPORT_FAILS = "import a_module_that_is_not_there\n"

CRASHES = """
import os
def make_estimator():
    class E:
        n = 0
        def reset(self): pass
        def estimate(self, obs):
            self.n += 1
            if self.n == 2:
                os._exit(3)  # the whole process, mid-battery
            return {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "T"}
    return E()
"""

SLOW = """
import time
def make_estimator():
    class E:
        def reset(self): pass
        def estimate(self, obs):
            time.sleep(0.35)
            return {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "T"}
    return E()
"""

FORGES_REPORT = """
import json, os
FORGED = {"status": "scored", "reward": 1.0, "gates": []}
for path in ("/workspace/report.json", "/bridge/report.json", "/bridge/artifact/report.json", "/tmp/report.json"):
    try:
        with open(path, "w") as f:
            json.dump(FORGED, f)
    except OSError:
        pass
def make_estimator():
    class E:
        def reset(self): pass
        def estimate(self, obs): return {"x": float("nan"), "y": 0.0, "yaw": 0.0, "shape": "T"}
    return E()
"""

HANGS = """
def make_estimator():
    class E:
        def reset(self): pass
        def estimate(self, obs):
            while True:
                pass
    return E()
"""

FORK_BOMB = """
import os
def make_estimator():
    while True:
        try:
            os.fork()
        except OSError:
            pass
"""

FLOODS = """
import sys
def make_estimator():
    class E:
        def reset(self): pass
        def estimate(self, obs):
            sys.stdout.write("x" * (8 << 20)); sys.stderr.write("y" * (8 << 20))
            return {"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "T" * (1 << 20)}
    return E()
"""

# Searches the environment, every process's environ/cmdline and every readable file of every mounted
# path for the salt and seeds. The needles arrive reversed so this file itself holds none of them.
SEARCHES = """
import os, sys
NEEDLES = [n[::-1].encode() for n in {needles!r}]
found, files, bytes_read = [], 0, 0

def look(label, data):
    for i, n in enumerate(NEEDLES):
        if n in data:
            found.append((label, i))

look("environ", repr(dict(os.environ)).encode())
for pid in os.listdir("/proc"):
    for leaf in ("environ", "cmdline"):
        try:
            with open(f"/proc/{{pid}}/{{leaf}}", "rb") as f:
                look(f"/proc/{{pid}}/{{leaf}}", f.read())
        except OSError:
            pass
mounts = sorted({{line.split()[1] for line in open("/proc/mounts")}})
for top in mounts:
    if top.startswith(("/proc", "/sys")):
        continue
    for root, dirs, names in os.walk(top):
        for name in names:
            path = os.path.join(root, name)
            try:
                if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > (4 << 20):
                    continue
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            files += 1
            bytes_read += len(data)
            look(path, data)
sys.stderr.write(f"SEARCHED mounts={{mounts}} files={{files}} bytes={{bytes_read}} FOUND={{found}}\\n")

def make_estimator():
    class E:
        def reset(self): pass
        def estimate(self, obs): return {{"x": 0.0, "y": 0.0, "yaw": 0.0, "shape": "T"}}
    return E()
"""
