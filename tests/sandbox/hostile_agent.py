"""A participant (the `python` provider kind) whose programs attack the harness from inside the
sandbox: every class of issue 16 in one series. Importable by the provider_client actor."""

from __future__ import annotations

from roboswe.protocol.participant import (
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    Observe,
    ReadFile,
    Wait,
    WriteFile,
)

PLANT = r"""
import os
open(b"bad-\xff-name.py", "w").write("x")
def chain(name, depth):
    fd = os.open(".", os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
chain("d", 1200)
chain("L" * 200, 30)
open("shared.bin", "wb").write(os.urandom(4096))
for i in range(50):
    os.link("shared.bin", f"link{i}.bin")
with open("sparse.bin", "wb") as f:
    f.truncate(200 << 20)
os.mkfifo("target.py")
open("suid.sh", "w").write("#!/bin/sh\n")
os.chmod("suid.sh", 0o6755)
print("planted")
"""

FORGE = r"""
import sys
marker = "\x1eroboswe-exception "
sys.stderr.write("\n" + marker + "[1, 2, 3]\n")
sys.stderr.write("\n" + marker + "[" * 30000 + "]" * 30000 + "\n")
print("forged")
"""

FLOOD = r"""
import os, socket, robot
from roboswe.bridge import wire
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["ROBOSWE_BRIDGE"])
s.sendall(wire.HEADER.pack(900_000, 2) + b"\0" * 1000)  # a message that never finishes
held = []
try:
    for _ in range(5000):
        c = socket.socket(socket.AF_UNIX)
        c.connect(os.environ["ROBOSWE_BRIDGE"])
        held.append(c)
except OSError as e:
    print("connections stopped at", len(held), e.errno)
for c in held:
    c.close()
print("cameras", sorted(robot.observe([robot.spec()["cameras"][0]["name"]] * 400)))
"""

FILL = r"""
import os
n = 0
try:
    while n < 32:  # 2 GiB: past the 1 GiB workspace, and bounded where no sized workspace exists
        with open(f"fill{n}", "wb") as f:
            f.write(b"x" * (64 << 20))
        n += 1
except OSError as e:
    print("full", e.errno)
for i in range(n + 1):
    if os.path.exists(f"fill{i}"):
        os.remove(f"fill{i}")
print("\x1b[2K\rsuccess: True")
os.chmod(".", 0)
"""

AFTER = "import robot\nrobot.step(robot.spec()['action']['hold'])\nprint('still served')\n"

MANY = r"""
import os
top = os.path.join("m" * 240, "n" * 240, "o" * 240)
os.makedirs(top)
for i in range(1990):  # ~950-byte paths: a listing of ~1.9 MB, ~500k tokens, if it entered the context whole
    open(os.path.join(top, f"{i:04d}" + "p" * 200), "w").close()
print("made", len(os.listdir(top)))
"""


class HostileAgent:
    """Trial 1 runs every attack on the sandbox, then an honest script; later trials make a file layout
    whose listing would fill the context, list it, run the honest script and wait far past the steps left."""

    def decide(self, request: DecisionRequest):
        done = sum(1 for t in request.conversation if t.role == "assistant" and t.trial == request.trial)
        if request.trial > 1:
            plan = [ListFiles(), WriteFile(path="many.py", content=MANY), Exec(path="many.py"), ListFiles(),
                    Exec(path="after.py"), Wait(steps=100_000), Finish(reason="done")]
        else:
            plan = [
                WriteFile(path="plant.py", content=PLANT), Exec(path="plant.py"),
                WriteFile(path="forge.py", content=FORGE), Exec(path="forge.py"),
                WriteFile(path="flood.py", content=FLOOD), Exec(path="flood.py"),
                WriteFile(path="fill.py", content=FILL), Exec(path="fill.py"),
                WriteFile(path="target.py", content="print('over the fifo')\n"),
                ReadFile(path="target.py"),
                Observe(cameras=["agentview"] * 32),  # the schema's maximum, each camera rendered once
                ListFiles(),
                WriteFile(path="after.py", content=AFTER), Exec(path="after.py"),
                Finish(reason="done"),
            ]  # fmt: skip
        return plan[min(done, len(plan) - 1)]
