"""Lifecycle controllers at scale: a full resync of N nodes, and a concurrent drain under PDBs.

    .venv/bin/python -m benchmarks.lifecycle_scale [--nodes 500] [--pods-per-node 10] [--drain 50]

Everything runs in process as ``groupless controller`` wires it (cluster-state cache reads,
the pods-by-node index, one work queue) against the in-memory API and the fake cloud, with a
fake clock. (The in-memory API's setup cost grows with the square of the object count, so
the defaults stay at 500 nodes; the controllers' own cost is what the figures show.) Printed:

* resync: wall time and reconciles per second for one full pass of every node controller over
  N nodes with their pods (the steady-state cost of ``--resync-period``);
* drain: ``--drain`` nodes deleted at once, every pod under a PodDisruptionBudget
  (``maxUnavailable: 1`` per application of 10 pods, one on each of 10 neighbouring nodes, so
  draining neighbours contends for the same budgets), a ReplicaSet played
  by recreating each evicted pod on spare capacity one fake second later; figures are the fake
  time until every node is gone, the number of Eviction API calls (and how many the API server
  refused with 429), the lowest number of healthy pods seen per application (must stay >= 9),
  and the wall time. Under a profiler the drain's wall time is almost all the in-memory API's
  own eviction check (it scans every object for budgets and graceful deletions per call); the
  controllers' share is a few percent.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections import defaultdict
from typing import Any

from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider
from provisioner.cloudprovider.types import Machine
from provisioner.controllers.manager import Manager, PodsByNode
from provisioner.controllers.objects import Context, LogEvents
from provisioner.kube.fake import FakeKubeAPI, pod_is_healthy
from provisioner.model.labels import PROVISIONER_NAME, TERMINATION_FINALIZER
from provisioner.settings import ControllerSettings
from provisioner.state.cluster import ClusterState


class QuietEvents(LogEvents):
    def normal(self, obj: Any, reason: str, message: str) -> None:
        return

    def warning(self, obj: Any, reason: str, message: str) -> None:
        return


APP_SIZE = 10


def build(nodes: int, pods_per_node: int) -> tuple[FakeClock, FakeKubeAPI, FakeCloudProvider, Manager]:
    clock = FakeClock()
    kube = FakeKubeAPI(clock)
    cloud = FakeCloudProvider(clock=clock)
    kube.create("Provisioner", {"metadata": {"name": "default"}, "spec": {"ttlSecondsAfterEmpty": 30,
                                                                          "ttlSecondsUntilExpired": 86400}})
    serial = itertools.count()
    apps = max(1, nodes * pods_per_node // APP_SIZE)
    for n in range(nodes):
        name = f"node-{n}"
        cloud.add_machine(Machine(provider_id=f"aws:///z/i-{n}", instance_id=f"i-{n}", name=name,
                                  instance_type="m5.large", zone="z", capacity_type="on-demand"))
        kube.create("Node", {"metadata": {"name": name, "labels": {PROVISIONER_NAME: "default"},
                                          "finalizers": [TERMINATION_FINALIZER]},
                             "spec": {"providerID": f"aws:///z/i-{n}"},
                             "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
        kube.set_node_ready(name)
        for j in range(pods_per_node):
            i = next(serial)
            app = ((n // APP_SIZE) * pods_per_node + j) % apps  # an app's pods sit on 10 neighbouring nodes
            pod = f"app{app}-{i}"
            kube.create("Pod", {"metadata": {"name": pod, "namespace": "default", "labels": {"app": f"app{app}"},
                                             "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u"}]},
                                "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}})
            kube.bind(pod, "default", name)
            kube.set_pod_running(pod, "default")
    state = ClusterState(kube, clock)
    pods = PodsByNode()
    kube.subscribe(state.handle)
    state.subscribe(pods.on_change)
    ctx = Context(kube=kube, cloud=cloud, clock=clock, events=QuietEvents(), pods_on_node=pods,
                  reader=state.get, lister=state.objects)
    manager = Manager(ctx, ControllerSettings())
    state.subscribe(manager.on_change)
    state.resync()
    return clock, kube, cloud, manager


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--drain", type=int, default=50)
    args = parser.parse_args()

    started = time.perf_counter()
    clock, kube, cloud, manager = build(args.nodes, args.pods_per_node)
    print(f"setup: {args.nodes} nodes, {args.nodes * args.pods_per_node} pods in {time.perf_counter() - started:.1f}s")
    manager.run_until_idle(max_reconciles=10**7)  # the initial events
    before = manager.reconciles
    started = time.perf_counter()
    manager.resync()
    manager.run_until_idle(max_reconciles=10**7)
    wall = time.perf_counter() - started
    count = manager.reconciles - before
    print(f"resync: {count} reconciles over {args.nodes} nodes in {wall:.2f}s = {count / wall:,.0f} reconciles/s")

    apps = {p["metadata"]["labels"]["app"] for p in kube.list("Pod", "default")[0]}
    for app in sorted(apps):
        kube.create("PodDisruptionBudget", {"metadata": {"name": app, "namespace": "default"},
                                            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}}})
    spare = [f"node-{n}" for n in range(args.drain, args.nodes)]
    starting: list[str] = []
    serial = itertools.count()

    def replicaset(pod: dict[str, Any]) -> None:
        app = pod["metadata"]["labels"]["app"]
        name = f"{app}-r{next(serial)}"
        kube.create("Pod", {"metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u"}]},
                            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}})
        kube.bind(name, "default", spare[next(serial) % len(spare)])
        starting.append(name)

    kube.on_pod_deleted(replicaset)
    healthy: dict[str, set[str]] = defaultdict(set)
    for pod in kube.list("Pod", "default")[0]:
        if pod_is_healthy(pod):
            healthy[pod["metadata"]["labels"]["app"]].add(pod["metadata"]["name"])
    lowest = {app: len(names) for app, names in healthy.items()}

    def track(kind: str, event: Any) -> None:
        if kind != "Pod":
            return
        app = event.object["metadata"]["labels"]["app"]
        name = event.object["metadata"]["name"]
        if event.type != "DELETED" and pod_is_healthy(event.object):
            healthy[app].add(name)
        else:
            healthy[app].discard(name)
        lowest[app] = min(lowest[app], len(healthy[app]))

    kube.subscribe(track)
    evictions_before = sum(1 for c in kube.calls if c[0] == "evict")
    started = time.perf_counter()
    t0 = clock.now()
    for n in range(args.drain):
        kube.delete("Node", f"node-{n}")
    gone = False
    for _ in range(100_000):
        manager.run_until_idle(max_reconciles=10**7)
        ready = list(starting)
        starting.clear()
        clock.advance(0.5)
        for name in ready:
            kube.set_pod_running(name, "default")
        if all(kube_node_gone(kube, f"node-{n}") for n in range(0, args.drain, max(1, args.drain // 10))) and \
                len(kube.list("Node")[0]) == args.nodes - args.drain:
            gone = True
            break
    wall = time.perf_counter() - started
    calls = [c for c in kube.calls if c[0] == "evict"][evictions_before:]
    evicted = args.drain * args.pods_per_node
    print(f"drain: {args.drain} nodes, {evicted} pods, all gone={gone} after {clock.now() - t0:.1f}s fake time, "
          f"{wall:.1f}s wall; {len(calls)} Eviction API calls ({len(calls) - evicted} refused by PDBs); "
          f"lowest healthy pods per app: {min(lowest.values())} of {APP_SIZE} (PDB maxUnavailable 1)")
    print(f"instances terminated: {len(cloud.delete_calls)}")


def kube_node_gone(kube: FakeKubeAPI, name: str) -> bool:
    try:
        kube.get("Node", name)
    except Exception:
        return True
    return False


if __name__ == "__main__":
    main()
