"""An existing node a round placed pending pods on counts as nominated for the nomination window.

Karpenter's ``NominateNodeForPod`` / ``IsNominated``: a round that places pending pods on a
Ready node (no ``groupless.dev/nominations`` entry: the node is not in flight) leaves them in
kube-scheduler's queue; were the node empty meanwhile, the emptiness controller would start its
TTL and delete it under them. The node counts as nominated for ``max(2 x batch max, 10 s)``
after each such placement, through the wiring ``groupless controller`` builds.
"""

from provisioner.clock import rfc3339
from provisioner.controllers.emptiness import is_empty
from provisioner.model import labels as wk

from .harness import Cluster

SPARE = "spare"


def ready_empty_node(cluster, name=SPARE):
    """A Ready r6gd.xlarge of the walkthrough's Provisioner (``ttlSecondsAfterEmpty: 30``), no pod on it."""
    return cluster.api.create(
        "Node",
        {
            "metadata": {"name": name, "labels": {
                wk.PROVISIONER_NAME: "default",
                # what the walkthrough's pods select
                "node.kubernetes.io/instance-type": "r6gd.xlarge",
                "karpenter.sh/capacity-type": "on-demand",
                "topology.kubernetes.io/zone": "ap-south-1a",
                "kubernetes.io/arch": "arm64",
            }},
            "spec": {},
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )


def emptiness_stamp(cluster, name=SPARE):
    return cluster.api.get("Node", name)["metadata"].get("annotations", {}).get(wk.EMPTINESS_TIMESTAMP_ANNOTATION)


def test_the_process_wires_the_ledgers_placements_into_the_lifecycle_controllers():
    cluster = Cluster(through_process=True)
    assert cluster.process.ctx.nominated_until == cluster.process.provisioning.ledger.nominated_until


def test_a_ready_node_the_round_placed_a_pod_on_is_not_emptied_within_the_window():
    cluster = Cluster(through_process=True)
    ready_empty_node(cluster)
    pod = cluster.pending_pod(cpu="1")
    placed_at = cluster.clock.now()

    result = cluster.controller.reconcile()

    assert result.nodes == ()
    assert dict(result.placed_existing) == {SPARE: (pod["metadata"]["uid"],)}
    assert is_empty(cluster.process.ctx.pods(SPARE))  # the pod waits in kube-scheduler's queue
    window = cluster.process.settings.provisioning.batching.nomination_window_seconds
    assert window == 20.0  # twice the 10 s batch maximum
    emptiness = cluster.process.manager.emptiness

    held = emptiness.reconcile(cluster.api.get("Node", SPARE))
    assert emptiness_stamp(cluster) is None
    assert held.requeue_after == window  # woken when the window ends

    cluster.clock.advance(window - 1)
    assert emptiness.reconcile(cluster.api.get("Node", SPARE)).requeue_after == 1.0
    assert emptiness_stamp(cluster) is None

    cluster.clock.advance(1)  # the window ended and no round placed the pod there again
    emptiness.reconcile(cluster.api.get("Node", SPARE))
    assert emptiness_stamp(cluster) == rfc3339(placed_at + window)


def test_each_round_that_places_the_pod_again_extends_the_window():
    cluster = Cluster(through_process=True)
    ready_empty_node(cluster)
    cluster.pending_pod(cpu="1")
    ledger = cluster.process.provisioning.ledger
    start = cluster.clock.now()

    cluster.controller.reconcile()
    assert ledger.nominated_until(SPARE) == start + 20.0
    cluster.clock.advance(15)
    cluster.controller.reconcile()  # still pending: placed there again
    assert ledger.nominated_until(SPARE) == start + 35.0

    cluster.clock.advance(19)
    emptiness = cluster.process.manager.emptiness
    assert emptiness.reconcile(cluster.api.get("Node", SPARE)).requeue_after == 1.0
    assert emptiness_stamp(cluster) is None


def test_a_deleted_node_leaves_no_window_behind():
    cluster = Cluster(through_process=True)
    ready_empty_node(cluster)
    cluster.pending_pod(cpu="1")
    cluster.controller.reconcile()
    ledger = cluster.process.provisioning.ledger
    assert ledger.nominated_until(SPARE) > cluster.clock.now()

    cluster.api.delete("Node", SPARE)

    assert ledger.nominated_until(SPARE) == 0.0
