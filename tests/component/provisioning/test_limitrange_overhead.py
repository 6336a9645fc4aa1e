"""DaemonSet overhead with LimitRange defaults: the cluster cache's LimitRanges through the one solver-input builder.

A DaemonSet that sets no requests in a namespace with a LimitRange gets the LimitRange's
defaults on every pod it creates; a new node must keep that room for it, or the DaemonSet pod
is evicted or the pods it was launched for stay pending.
"""

from provisioner.scheduling.solver import solve
from provisioner.state import ClusterState
from provisioner.state.solverinput import build_solver_input, provisionable_pods

from .harness import Cluster


def daemonset_without_requests():
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "node-agent"}},
            "template": {
                "metadata": {"labels": {"app": "node-agent"}},
                "spec": {"containers": [{"name": "agent", "image": "agent"}]},
            },
        },
    }


def limit_range(namespace, cpu):
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": namespace},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": cpu}, "defaultRequest": {"cpu": cpu}}]},
    }


def plan(cluster):
    """The plan of the cluster cache's current snapshot, built as ``groupless plan`` and the benchmarks build it."""
    snapshot = cluster.state.snapshot()
    nodes = cluster.state.node_views.nodes(snapshot)
    now = cluster.clock.now()
    pods = provisionable_pods(snapshot, nodes, now)
    types = {name: cluster.cloud.get_instance_types(p) for name, p in snapshot.provisioners.items()}
    built = build_solver_input(snapshot, nodes, pods, types, now=now)
    assert built.refused == ()
    return built, solve(built.input)


def test_the_daemonsets_namespace_limit_range_sizes_its_overhead_on_new_nodes():
    # r6gd.xlarge has 3820m allocatable: three 1-core pods fit beside a DaemonSet pod of 500m, not of 1 core
    cluster = Cluster()
    cluster.api.create("DaemonSet", daemonset_without_requests())
    for _ in range(3):
        cluster.pending_pod()
    built, result = plan(cluster)
    assert [ds.requests for ds in built.input.daemonsets] == [{"pods": 1}]
    assert [len(n.pods) for n in result.new_nodes] == [3]

    cluster.api.create("LimitRange", limit_range("kube-system", "1"))
    assert [lr["metadata"]["name"] for lr in cluster.state.snapshot().limit_ranges] == ["defaults"]
    built, result = plan(cluster)
    assert [ds.requests for ds in built.input.daemonsets] == [{"cpu": 1000, "pods": 1}]
    assert sorted(len(n.pods) for n in result.new_nodes) == [1, 2]
    assert {it.name for n in result.new_nodes for it in n.instance_type_options} == {"r6gd.xlarge"}

    # a LimitRange of the pods' namespace does not size the DaemonSet; deleting the DaemonSet's reaches the cache
    cluster.api.create("LimitRange", limit_range("default", "500m"))
    cluster.api.delete("LimitRange", "defaults", "kube-system")
    built, result = plan(cluster)
    assert [ds.requests for ds in built.input.daemonsets] == [{"pods": 1}]
    assert [len(n.pods) for n in result.new_nodes] == [3]


def test_the_cluster_cache_lists_limit_ranges_at_its_first_sync():
    cluster = Cluster()
    cluster.api.create("LimitRange", limit_range("kube-system", "250m"))
    state = ClusterState(cluster.api, cluster.clock)
    state.resync()
    assert state.synced()
    assert [(lr["metadata"]["namespace"], lr["metadata"]["name"]) for lr in state.snapshot().limit_ranges] == [
        ("kube-system", "defaults")]
