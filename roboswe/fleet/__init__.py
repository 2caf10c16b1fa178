"""The fleet: series workers placed on the nodes of a Ray cluster (`roboswe run --ray`).

A worker is one simulator and one sandbox bridge, each its own OS process, serving tcp with
CURVE on a cluster node; the coordinator, recorder, provider client and context managers stay
on the machine where `roboswe run` runs and reach the worker over those endpoints. Ray places
the worker (a Ray actor holding the two processes, with explicit resource requests), restarts
it elsewhere when its node dies, and `ray status` shows what it holds.

- ``node``: what runs on a cluster node: the Ray actor that checks the node (sandbox image
  digest, the run directory at the same path) and starts and watches the two processes.
- ``node_process``: the entry of those processes (``python -m roboswe.fleet.node_process``).
- ``ray_pool``: the coordinator's side: connect, place, replace a lost worker, release.
- ``roster``: RUN_DIR/fleet/workers.json, where each worker is and what it does, for `roboswe status`.

Local workers (``--workers N`` without ``--ray``) are the supervisor's actors; see
roboswe/evaluation/run.py.
"""
