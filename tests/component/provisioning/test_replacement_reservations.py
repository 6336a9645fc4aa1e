"""Several nodes expiring at once each get their own replacement capacity, through the process's Replacer.

The old pods stay bound to the expiring nodes while they drain and the replacement carries no
nominations for them; without the room promised to each expiring node, the second node's pods
would be planned into the free room of the first node's replacement, over-committing it.
"""

from .harness import Cluster, wk
from .test_failures import flexible_template, provisioner_with


def one_pod_nodes(cluster, count, cpu):
    """``count`` initialized nodes launched by the controller, each with one bound ``cpu`` pod."""
    bound = []
    for _ in range(count):
        pod = cluster.pending_pod(template=flexible_template(cpu))
        (name,) = cluster.controller.reconcile().nodes
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
    cluster = Cluster(provisioner=provisioner_with(), through_process=True)
    old = one_pod_nodes(cluster, 3, "3")  # 3 CPU: one per m5.xlarge (3920m allocatable)
    assert len({name for name, _ in old}) == 3
    replacements = []
    for name, pod in old:
        disrupt(cluster, name)
        replacements.extend(cluster.replacer([pod], name))
    assert len(set(replacements)) == 3
    assert not {name for name, _ in old} & set(replacements)
    for name in replacements:
        allocatable = cluster.api.get("Node", name)["status"]["allocatable"]["cpu"]
        assert cpu_milli(allocatable) < 2 * 3000  # room for one of the pods only


def test_pods_that_fit_a_spare_node_go_there_but_not_onto_disrupted_nodes():
    cluster = Cluster(provisioner=provisioner_with(), through_process=True)
    old = one_pod_nodes(cluster, 2, "3")
    # a spare Ready node with room for exactly one of the pods
    spare_pod = cluster.pending_pod(template=flexible_template("3"))
    (spare,) = cluster.controller.reconcile().nodes
    initialize(cluster, spare)
    cluster.api.bind(spare_pod["metadata"]["name"], "default", spare)
    cluster.controller.reconcile()  # the bound pod's nomination is released
    cluster.api.delete("Pod", spare_pod["metadata"]["name"], "default")
    cluster.api.reap()
    launches_before = len(cluster.cloud.create_calls)
    replacements = []
    for name, pod in old:
        disrupt(cluster, name)
        replacements.append(cluster.replacer([pod], name))
    # the first pod takes the spare node's room, the second needs a node of its own; the first
    # expiring node (disrupted, not yet gone) is never counted as room for the second's pod
    first, second = replacements
    assert first == [spare]
    assert len(cluster.cloud.create_calls) == launches_before + 1
    (launched,) = second
    assert launched == cluster.cloud.launches[-1].name
    assert launched not in {name for name, _ in old} | {spare}


def test_the_room_held_for_an_evicted_pod_goes_to_the_pod_recreated_for_it():
    cluster = Cluster(provisioner=provisioner_with(), through_process=True)
    ((name, pod),) = one_pod_nodes(cluster, 1, "3")
    disrupt(cluster, name)
    (replacement,) = cluster.replacer([pod], name)
    launches = len(cluster.cloud.create_calls)
    # while the old pod is still bound to the expiring node, its room on the replacement is held
    other = cluster.pending_pod(template=flexible_template("3"))
    held = cluster.controller.reconcile()
    assert held.nodes != () and replacement not in held.nominated_existing
    assert held.launched[0].pod_uids == (other["metadata"]["uid"],)
    # the drain evicts the old pod; its ReplicaSet recreates it (a new UID, pending)
    cluster.api.delete("Pod", pod["metadata"]["name"], "default")
    cluster.api.reap()
    recreated = cluster.pending_pod(template=flexible_template("3"))
    result = cluster.controller.reconcile()
    assert result.nodes == () and len(cluster.cloud.create_calls) == launches + 1
    assert result.nominated_existing == {replacement: (recreated["metadata"]["uid"],)}
