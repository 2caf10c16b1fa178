"""The sandbox's configuration read back directly, not inferred from what a hostile program failed
to do: the trial container's settings as Docker reports them, and from inside both backends the
kernel's own view (network interfaces, capabilities, no_new_privs, user namespaces).

A hostile-program test can pass for the wrong reason (this daemon runs with ``--bridge=none``, so a
container without ``network_mode="none"`` still has no route out); these read the settings."""

from __future__ import annotations

import json
import os

import pytest
from roboswe.sandbox.images import docker_client

# Run inside the sandbox: prints one JSON object with what the kernel says about this process.
PROBE = r"""
import ctypes, json, os, shutil, subprocess

status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
report = {
    # /proc/net/dev is the reading process's network namespace; bwrap mounts no /sys at all.
    "interfaces": sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]),
    "sys_class_net": sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else None,
    "cap_eff": status["CapEff"].strip(),
    "cap_prm": status["CapPrm"].strip(),
    "cap_bnd": status["CapBnd"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "uid": os.getuid(),
}
# The unshare binary becomes uid 0 in a new user namespace when nesting is allowed.
if shutil.which("unshare"):
    p = subprocess.run(["unshare", "-U", "-r", "id", "-u"], capture_output=True, text=True)
    report["unshare_binary"] = {"rc": p.returncode, "stdout": p.stdout.strip(), "stderr": p.stderr.strip()[:200]}
# The syscall itself, whatever the image holds: CLONE_NEWUSER = 0x10000000.
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.unshare(0x10000000)
report["unshare_syscall"] = {"rc": rc, "errno": ctypes.get_errno()}
print(json.dumps(report))
"""


async def _probe(trial) -> dict:
    fb = await trial.run(PROBE, name="probe.py")
    assert fb.exit_status == 0, fb.stderr
    return json.loads(fb.stdout)


async def test_only_loopback_no_capabilities_no_new_privileges_no_user_namespaces(trial):
    report = await _probe(trial)
    assert report["interfaces"] == ["lo"], report
    assert report["sys_class_net"] in (None, ["lo"]), report
    assert int(report["cap_eff"], 16) == 0 and int(report["cap_prm"], 16) == 0, report
    assert report["no_new_privs"] == "1", report
    if trial.sandbox.backend.name == "docker" or os.geteuid() == 0:  # assumes root under bwrap: only root can
        assert report["uid"] == trial.sandbox.backend.image.uid != 0   # drop bwrap to the image's sandbox user
    # A nested user namespace would make the program uid 0 (with every capability) inside it.
    syscall = report["unshare_syscall"]
    assert syscall["rc"] == -1 and syscall["errno"] != 0, report
    binary = report.get("unshare_binary")
    if binary is not None:
        assert binary["rc"] != 0 and binary["stdout"] != "0", report


@pytest.mark.parametrize("backend", ["docker"], indirect=True)  # container settings exist only there
async def test_docker_trial_container_settings(trial):
    container = docker_client().containers.get(trial.sandbox.backend._container_id)
    host = container.attrs["HostConfig"]
    assert host["NetworkMode"] == "none", host["NetworkMode"]
    assert set(container.attrs["NetworkSettings"]["Networks"]) <= {"none"}, container.attrs["NetworkSettings"]
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd"), (host["CapDrop"], host.get("CapAdd"))
    assert "no-new-privileges" in (host.get("SecurityOpt") or []), host.get("SecurityOpt")
    assert host["ReadonlyRootfs"] is True
    assert host["Privileged"] is False
    assert host["IpcMode"] == "private"
    assert host["PidsLimit"] and host["PidsLimit"] > 0
    assert host["Memory"] > 0 and host["MemorySwap"] == host["Memory"]
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/bridge"]["RW"] is False and mounts["/workspace"]["RW"] is True
    assert set(mounts) == {"/bridge", "/workspace"}, sorted(mounts)  # nothing else of the host is bound
