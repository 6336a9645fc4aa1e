"""Provisioning latency: from the last pod of a burst to the launch calls, batch window excluded.

    .venv/bin/python -m benchmarks.provisioning_latency [N ...] [--repeat R] [--existing-nodes M]

Target: under 1 s for a burst of 1,000 pods. The whole controller runs in process
against the in-memory API (:class:`~provisioner.kube.fake.FakeKubeAPI`, the cluster state
cache fed by its watch events), the fake cloud provider and a fake clock: pods are created
Unschedulable, the batching window is closed by moving the fake clock (so the 1 s idle wait
is excluded, as the target says), and the wall time is measured from the moment the window
closes (the last pod is in) to the first and to the last ``CloudProvider.create`` call, and to
the end of the round (every Node created, every Nominated event recorded).

With ``--existing-nodes`` the cluster already has that many Ready nodes (10 running pods
each) and the controller has run one idle round before the burst, as a running one would have.

The pods are the walkthrough's ``inflate`` shape with varied requests (250m..2 cores,
256Mi..4Gi, deterministic), unconstrained, so the solver chooses among the whole catalog.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider, default_instance_types
from provisioner.cloudprovider.types import Machine, NodeRequest
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.settings import ProvisioningSettings
from provisioner.state import ClusterState

PROVISIONER: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "default"},
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]},
        ],
        "provider": {
            "subnetSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
            "securityGroupSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
        },
        "ttlSecondsAfterEmpty": 30,
    },
}


class TimedCloud(FakeCloudProvider):
    """The fake provider, stamping each ``create`` call with ``time.perf_counter()``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamps: list[float] = []

    def create(self, request: NodeRequest) -> Machine:
        self.stamps.append(time.perf_counter())
        return super().create(request)


def pod(i: int, rng: random.Random) -> dict[str, Any]:
    cpu = rng.choice(["250m", "500m", "1", "1500m", "2"])
    memory = rng.choice(["256Mi", "512Mi", "1Gi", "2Gi", "4Gi"])
    return {
        "metadata": {
            "name": f"inflate-{i:05d}",
            "namespace": "default",
            "labels": {"app": "inflate"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "inflate-1",
                    "uid": "rs-1",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "inflate",
                    "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.5",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def existing_node(i: int) -> dict[str, Any]:
    """A Ready m5.xlarge-sized node of the Provisioner, full enough that new pods do not fit."""
    return {
        "metadata": {
            "name": f"ip-10-1-{i // 250}-{i % 250}.ap-south-1.compute.internal",
            "labels": {
                "karpenter.sh/provisioner-name": "default",
                "node.kubernetes.io/instance-type": "m5.xlarge",
                "topology.kubernetes.io/zone": "ap-south-1a",
                "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
            },
        },
        "spec": {"providerID": f"aws:///ap-south-1a/i-{i:017x}"},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def run(n: int, seed: int = 1, existing: int = 0, pods_per_node: int = 10) -> dict[str, float]:
    clock = FakeClock()
    api = FakeKubeAPI(clock)
    cloud = TimedCloud(default_instance_types(), clock=clock)
    recorder = EventRecorder(api, clock=clock, instance="bench")
    state = ClusterState(api, clock)
    api.create("Provisioner", PROVISIONER)
    for i in range(existing):
        node = api.create("Node", existing_node(i))["metadata"]["name"]
        for j in range(pods_per_node):
            bound = pod(100_000 + i * pods_per_node + j, random.Random(i))
            bound["metadata"]["name"] = f"running-{i}-{j}"
            bound["spec"]["nodeName"] = node
            bound["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "390m", "memory": "1Gi"}
            bound["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            api.create("Pod", bound)
    state.resync()
    api.subscribe(state.handle)
    controller = ProvisioningController(api, state, cloud, clock, recorder, ProvisioningSettings())
    controller.watch_state()
    controller.reconcile()  # a running controller has looked at the cluster before the burst
    rng = random.Random(seed)
    for i in range(n):
        api.create("Pod", pod(i, rng))
    clock.advance(1.0)  # the idle window passes (excluded from the figure)
    batch = controller.batcher.take()
    assert batch is not None, "the batching window did not close"
    start = time.perf_counter()
    result = controller.reconcile(batch)
    end = time.perf_counter()
    assert cloud.stamps, "nothing was launched"
    return {
        "pods": float(result.pods),
        "nodes": float(len(result.nodes)),
        "first_launch": cloud.stamps[0] - start,
        "last_launch": cloud.stamps[-1] - start,
        "round": end - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--existing-nodes",
        type=int,
        default=0,
        help="Ready nodes (10 running pods each) already in the cluster",
    )
    args = parser.parse_args()
    print(f"existing nodes: {args.existing_nodes} (x10 running pods)")
    print(
        f"{'pods':>6} {'nodes':>6} {'first launch':>13} {'last launch':>12} {'round':>8}  (median of {args.repeat})"
    )
    for n in args.sizes:
        runs = [run(n, seed=r + 1, existing=args.existing_nodes) for r in range(args.repeat)]

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        verdict = "OK" if med("last_launch") < 1.0 else "OVER TARGET"
        print(
            f"{int(med('pods')):>6} {int(med('nodes')):>6} {med('first_launch') * 1000:>10.0f} ms "
            f"{med('last_launch') * 1000:>9.0f} ms {med('round') * 1000:>5.0f} ms  target last launch < 1000 ms: {verdict}"
        )


if __name__ == "__main__":
    main()
