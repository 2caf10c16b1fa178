"""sim/ and protocol/sim.py know nothing of ZeroMQ, and importing them builds no scene."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import roboswe.protocol.sim, roboswe.sim, roboswe.sim.backend, roboswe.sim.manifest, roboswe.sim.render
import roboswe.sim.session, roboswe.sim.video, roboswe.sim.robosuite_backend
heavy = [m for m in ("zmq", "trio", "robosuite", "mujoco") if m in sys.modules]
print(",".join(heavy))
"""


def test_sim_imports_no_transport_and_no_simulator():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""
