"""The machine a benchmark ran on, and what one command took of it.

`describe()` names the machine (cores, CPU model, memory). `CpuMeter` samples, every quarter
second while a command runs: the CPU time of the command (all its processes), the time its tasks
were ready to run but waited for a CPU, the 1-minute load average and the machine's busy and
stolen time (/proc/stat). `between(t0, t1)` interpolates them over a wall-clock interval, so a
figure can be taken over exactly the span of a run's trials.

The CPU time of a trial is what a trial costs whatever else runs on the machine; its wall time is
not (under load it includes the wait for a CPU), which is why both are measured. Where this
process may create a cgroup v2 group (root, a cgroup2 mount), the command runs in a group of its
own: its CPU time is the group's `cpu.stat` (every process the command ever started, exactly), and
its wait is the group's pressure (`cpu.pressure`): `some`, the time at least one of its tasks
waited, and `full`, the time all of them that could run waited. A trial's critical path waited
between the two, so its wall on a machine to itself lies between wall - some and wall - full
(PSI reports a little less than the true stall: a single busy thread on this VM showed wall - some
7-13% above its CPU time). Without a group the CPU time is sampled from /proc over the command's
process tree (utime + stime of every live process and what its reaped children used) and there is
no wait figure. Processes outside the command (a docker container's, which dockerd starts; a Ray
worker's, which a raylet starts) are not counted either way. Every second the meter also adds up
the proportional set size (Pss, /proc/PID/smaps_rollup: shared pages split among the processes that
map them) of the command's live processes; `peak_memory_gib` is the largest such sum. Linux only.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


def describe() -> dict:
    """Cores this process may use, the CPU model and clock, memory, the kernel."""
    model, mhz = "unknown", None
    for line in (PROC / "cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "cpu MHz" and mhz is None:
            mhz = float(value)
    total_kib = next(int(line.split()[1]) for line in (PROC / "meminfo").read_text().splitlines()
                     if line.startswith("MemTotal:"))
    return {"cores": len(os.sched_getaffinity(0)), "cpu_model": model, "cpu_mhz": mhz,
            "memory_gib": round(total_kib / 2**20, 1), "kernel": platform.release()}


class CommandGroup:
    """A cgroup v2 group of its own for one command: `join` (a Popen preexec_fn) moves the child into it."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, name: str) -> CommandGroup | None:
        """A new group below this process's own, or None where none can be made (no cgroup2, not root)."""
        mount = next((line.split()[1] for line in (PROC / "mounts").read_text().splitlines()
                      if line.split()[2] == "cgroup2"), None)
        own = next((line[3:] for line in (PROC / "self" / "cgroup").read_text().splitlines() if line.startswith("0::")), None)
        if mount is None or own is None:
            return None
        path = Path(mount) / own.lstrip("/") / f"{name}-{os.getpid()}"
        try:
            path.mkdir()
        except OSError:
            return None
        return cls(path)

    def join(self) -> None:
        (self.path / "cgroup.procs").write_text("0")

    def read(self) -> tuple[float, float, float]:
        """CPU seconds, and the seconds some and all of the group's runnable tasks waited for a CPU, so far."""
        usage = next(int(line.split()[1]) for line in (self.path / "cpu.stat").read_text().splitlines()
                     if line.startswith("usage_usec"))
        some, full = (int(line.rsplit("total=", 1)[1]) for line in (self.path / "cpu.pressure").read_text().splitlines())
        return usage / 1e6, some / 1e6, full / 1e6

    def remove(self) -> None:
        for _ in range(20):  # the command's last processes may take a moment to be reaped
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.25)


@dataclass(frozen=True)
class Sample:
    at: float               # time.time(), the clock the run records its trials in
    cpu_s: float            # the command's CPU time so far
    wait_some_s: float | None  # time at least one of its runnable tasks waited for a CPU, so far (a group only)
    wait_full_s: float | None  # time all of its runnable tasks waited, so far (a group only)
    load1: float            # the 1-minute load average
    machine_busy_s: float   # all CPUs' user + nice + system + irq + softirq time, so far
    machine_steal_s: float  # time the hypervisor ran something else on this machine's CPUs, so far


@dataclass(frozen=True)
class Usage:
    """What the command and the machine did over one wall-clock interval."""
    wall_s: float
    cpu_s: float
    wait_some_s: float | None
    wait_full_s: float | None
    load1_mean: float
    load1_max: float
    others_cores: float     # cores busy outside the command, on average
    steal_cores: float


def _stat_fields(pid: str) -> list[str] | None:
    try:
        text = (PROC / pid / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # after "pid (comm) ": comm may hold spaces


def _tree(root: int) -> dict[str, list[str]]:
    """/proc/PID/stat fields (from the state on) of root and every live descendant."""
    fields, children = {}, {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (f := _stat_fields(entry.name)) is not None:
            fields[entry.name] = f
            children.setdefault(f[1], []).append(entry.name)
    found, todo = {}, [str(root)]
    while todo:
        pid = todo.pop()
        if pid in fields:
            found[pid] = fields[pid]
            todo += children.get(pid, [])
    return found


def _pss_kib(pid: str) -> int:
    try:
        for line in (PROC / pid / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0  # gone, or a kernel thread


def _machine_times() -> tuple[float, float]:
    cpu = [int(x) for x in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = cpu[:8]
    return (user + nice + system + irq + softirq) / TICK, steal / TICK


class CpuMeter:
    """Samples one command, from a thread until `stop()`: its group where it has one, else its process tree."""

    MEMORY_EVERY = 4  # samples: smaps_rollup walks each process's page tables, so once a second

    def __init__(self, root: int, group: CommandGroup | None, interval_s: float = 0.25):
        self._root, self._group, self._interval = root, group, interval_s
        self.samples: list[Sample] = []
        self.peak_memory_gib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-meter", daemon=True)

    def start(self) -> CpuMeter:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def _sample(self) -> None:
        tree = _tree(self._root) if self._group is None or len(self.samples) % self.MEMORY_EVERY == 0 else None
        if tree:
            self.peak_memory_gib = max(self.peak_memory_gib, sum(_pss_kib(pid) for pid in tree) / 2**20)
        if self._group is not None:
            cpu, some, full = self._group.read()
        else:
            if not tree:
                return  # the command has exited: its last sample stands
            cpu, some, full = sum(int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]) for f in tree.values()) / TICK, None, None
        busy, steal = _machine_times()
        self.samples.append(Sample(time.time(), cpu, some, full, os.getloadavg()[0], busy, steal))

    def between(self, t0: float, t1: float) -> Usage:
        return usage_between(self.samples, t0, t1)


def _at(samples: list[Sample], t: float, field: str) -> float | None:
    """A cumulative field at time t, interpolated between the samples around it (clamped at the ends)."""
    if getattr(samples[0], field) is None:
        return None
    if t <= samples[0].at:
        return getattr(samples[0], field)
    for a, b in zip(samples, samples[1:]):
        if a.at <= t <= b.at:
            share = (t - a.at) / (b.at - a.at) if b.at > a.at else 1.0
            return getattr(a, field) + share * (getattr(b, field) - getattr(a, field))
    return getattr(samples[-1], field)


def usage_between(samples: list[Sample], t0: float, t1: float) -> Usage:
    """What the command and the rest of the machine used from t0 to t1 (time.time() values)."""
    wall = t1 - t0
    delta = {}
    for f in ("cpu_s", "wait_some_s", "wait_full_s", "machine_busy_s", "machine_steal_s"):
        a, b = _at(samples, t0, f), _at(samples, t1, f)
        delta[f] = None if a is None else b - a
    loads = [s.load1 for s in samples if t0 <= s.at <= t1] or [samples[-1].load1]
    return Usage(wall_s=wall, cpu_s=delta["cpu_s"], wait_some_s=delta["wait_some_s"], wait_full_s=delta["wait_full_s"],
                 load1_mean=sum(loads) / len(loads), load1_max=max(loads),
                 others_cores=max(0.0, delta["machine_busy_s"] - delta["cpu_s"]) / wall,
                 steal_cores=delta["machine_steal_s"] / wall)
