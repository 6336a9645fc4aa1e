"""Several nodes expiring at once each get their own replacement capacity (issue 6 follow-up).

On the real control plane three one-pod nodes expiring in the same resync shared one
replacement: the old pods stay bound to the expiring nodes while they drain and the
replacement carries no nominations for them, so the second node's pods were planned into the
free room of the first node's replacement, which was then over-committed.
"""

from .harness import Cluster, wk
from .test_failures import flexible_template, provisioner_with


def one_pod_nodes(cluster, count, cpu):
    """``count`` initialized nodes launched by the controller, each with one bound ``cpu`` pod."""
    bound = []
    for _ in range(count):
        pod = cluster.pending_pod(template=flexible_template(cpu))
        (name,) = cluster.controller.reconcile_once().nodes
        initialize(cluster, name)
        bound.append((name, cluster.api.bind(pod["metadata"]["name"], "default", name)))
    return bound


def initialize(cluster, name):
    """Ready, startup taint removed (kubelet and the initialization controller)."""
    cluster.api.set_node_ready(name)
    cluster.api.patch("Node", name, {"spec": {"taints": None}})


def disrupt(cluster, name):
    """What the expiration controller does before asking for replacement capacity."""
    node = cluster.api.get("Node", name)
    taints = [*(node["spec"].get("taints") or []), {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]
    cluster.api.patch("Node", name, {"spec": {"taints": taints}})


def cpu_milli(value):
    return int(float(value[:-1])) if value.endswith("m") else int(float(value) * 1000)


def test_nodes_expiring_together_each_get_their_own_replacement():
    cluster = Cluster(provisioner=provisioner_with())
    old = one_pod_nodes(cluster, 3, "3")  # 3 CPU: one per m5.xlarge (3920m allocatable)
    assert len({name for name, _ in old}) == 3
    replacements = []
    for name, pod in old:
        disrupt(cluster, name)
        replacements.extend(cluster.controller.replace_capacity([pod], name))
    assert len(set(replacements)) == 3
    assert not {name for name, _ in old} & set(replacements)
    for name in replacements:
        allocatable = cluster.api.get("Node", name)["status"]["allocatable"]["cpu"]
        assert cpu_milli(allocatable) < 2 * 3000  # room for one of the pods only


def test_pods_that_fit_a_spare_node_go_there_but_not_onto_disrupted_nodes():
    cluster = Cluster(provisioner=provisioner_with())
    old = one_pod_nodes(cluster, 2, "3")
    # a spare Ready node with room for exactly one of the pods
    spare_pod = cluster.pending_pod(template=flexible_template("3"))
    (spare,) = cluster.controller.reconcile_once().nodes
    initialize(cluster, spare)
    cluster.api.bind(spare_pod["metadata"]["name"], "default", spare)
    cluster.controller.reconcile_once()  # the bound pod's nomination is released
    cluster.api.delete("Pod", spare_pod["metadata"]["name"], "default")
    cluster.api.reap()
    launched = []
    for name, pod in old:
        disrupt(cluster, name)
        launched.extend(cluster.controller.replace_capacity([pod], name))
    # the first pod takes the spare node's room, the second needs a node of its own; the first
    # expiring node (disrupted, not yet gone) is never counted as room for the second's pod
    assert len(launched) == 1
    assert launched[0] not in {name for name, _ in old} | {spare}
