"""What a Ray cluster can hold, node by node: the worker count and a refusal before anything starts.

A worker is one Ray actor whose request (``[fleet] ray_cpus``, ``ray_memory_gib``, ``ray_gpus``)
must fit on ONE node: Ray never splits an actor across nodes, and a request no node can satisfy
waits in its queue forever (``ray status`` calls it infeasible demand). So the cluster's totals say
nothing: two 1-CPU nodes hold no 2-CPU worker. The default count is the sum over nodes of what each
holds; a request that no node holds is refused naming the resource, the largest node and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec

from roboswe.config import FleetConfig

MAX_WORKERS = 64  # as [fleet] workers' own bound


class NodeCapacity(msgspec.Struct, frozen=True, kw_only=True):
    """One alive node's total resources as Ray states them (memory in GiB)."""

    node_id: str
    address: str
    cpus: float = 0.0
    memory_gib: float = 0.0
    gpus: float = 0.0

    @classmethod
    def from_ray(cls, node: dict) -> NodeCapacity:
        """From one entry of ``ray.nodes()`` (its ``Resources`` hold memory in bytes)."""
        resources = node.get("Resources") or {}
        return cls(node_id=str(node.get("NodeID", "")), address=str(node.get("NodeManagerAddress", "")),
                   cpus=float(resources.get("CPU", 0.0)), memory_gib=float(resources.get("memory", 0.0)) / 2**30,
                   gpus=float(resources.get("GPU", 0.0)))

    def describe(self) -> str:
        gpus = f", {self.gpus:g} GPU" if self.gpus else ""
        return f"{self.address or self.node_id[:12]} ({self.cpus:g} CPU, {self.memory_gib:.1f} GiB{gpus})"


class Infeasible(ValueError):
    """No node of the cluster can ever hold one worker's request; the message names the fix."""


# Each resource of a worker's request: its [fleet] key, how a node states it, its unit.
_RESOURCES = (("ray_cpus", "cpus", "CPU"), ("ray_memory_gib", "memory_gib", "GiB of memory"),
              ("ray_gpus", "gpus", "GPU"))


def holds(node: NodeCapacity, fleet: FleetConfig) -> int:
    """Workers this node can hold at once: the tightest of its resources against the request."""
    counts = [math.floor(getattr(node, have) / want + 1e-9)
              for key, have, _ in _RESOURCES if (want := getattr(fleet, key)) > 0]
    return max(0, min(counts))


def _shortfall(nodes: list[NodeCapacity], fleet: FleetConfig) -> str:
    """Why no node holds a worker: the first resource the best-provided node lacks, and the fix."""
    for key, have, unit in _RESOURCES:
        want = getattr(fleet, key)
        if want <= 0:
            continue
        best = max(nodes, key=lambda n: getattr(n, have))
        if getattr(best, have) + 1e-9 < want:
            return (f"each worker asks for {want:g} {unit} ([fleet] {key}) and the largest node, {best.describe()}, "
                    f"has {getattr(best, have):g}: lower [fleet] {key} to at most {getattr(best, have):g} "
                    "or add a node that large")
    best = max(nodes, key=lambda n: holds(n, fleet))
    return (f"no node holds all of one worker's request at once (largest: {best.describe()}); lower [fleet] "
            "ray_cpus / ray_memory_gib / ray_gpus")


def plan_workers(nodes: Iterable[NodeCapacity], fleet: FleetConfig, tasks: int,
                 asked: int | None = None) -> tuple[int, str]:
    """The worker count for this cluster and the rule that gave it; raises Infeasible when none fits.

    ``asked`` (``--workers`` or ``[fleet] workers``) is kept even above what the nodes hold now (the
    others queue until a worker finishes or a node joins), but never when no node can hold even one.
    """
    nodes = list(nodes)
    if not nodes:
        raise Infeasible("the cluster has no alive node")
    per_node = [holds(n, fleet) for n in nodes]
    capacity = sum(per_node)
    if capacity == 0:
        raise Infeasible(_shortfall(nodes, fleet))
    if asked is not None:
        return asked, f"the cluster holds {capacity} at once ({_spread(nodes, per_node)})"
    workers = max(1, min(tasks, MAX_WORKERS, capacity))
    return workers, (f"default: {workers} = min({tasks} task(s), what the nodes hold: {_spread(nodes, per_node)}); "
                     "set [fleet] workers or --workers to change it")


def _spread(nodes: list[NodeCapacity], per_node: list[int]) -> str:
    shown = " + ".join(f"{k} on {n.describe()}" for n, k in zip(nodes, per_node, strict=True))
    return shown if len(nodes) <= 4 else f"{sum(per_node)} on {len(nodes)} nodes"
