"""A launch whose pods were scheduled elsewhere since the plan is not made (or is made for those left).

Between a round's plan and each of its launches (up to a minute when dozens are queued behind
slow CreateFleet calls) the pods of a not yet created node hold no nomination, and
kube-scheduler may place them in room that appeared meanwhile (a node launched for other pods
of the burst). Here the solver is wrapped so that, right after planning, kube-scheduler "binds"
some planned pods elsewhere, as it would while the launches wait their turn.
"""

import json

from provisioner.model import labels as wk
from provisioner.scheduling.solver import solve

from .harness import Cluster


def nominated(cluster, node):
    """Names of the pods nominated to ``node``, sorted."""
    raw = cluster.api.get("Node", node)["metadata"].get("annotations", {}).get(wk.NOMINATIONS_ANNOTATION)
    return sorted(entry["pod"].split("/")[1] for entry in json.loads(raw)["pods"].values()) if raw else []


def bind_after_planning(cluster, pick):
    """Wrap the solver: after each solve, bind the planned pods ``pick(plan)`` names to an existing node."""

    def solver(given):
        plan = solve(given)
        for name in pick(plan):
            cluster.api.bind(name, "default", "elsewhere")
        return plan

    cluster.controller.provisioner.solver = solver


def four_pods():
    cluster = Cluster()
    cluster.api.create("Node", {"metadata": {"name": "elsewhere"}, "status": {"allocatable": {"cpu": "8"}}})
    pods = [cluster.pending_pod(cpu="1")["metadata"]["name"] for _ in range(4)]  # 3 + 1 per r6gd.xlarge
    return cluster, pods


def test_a_launch_whose_pods_all_went_elsewhere_is_not_made():
    cluster, pods = four_pods()
    single = []

    def the_single_pods_node(plan):
        (node,) = [n for n in plan.new_nodes if len(n.pods) == 1]
        single.append(node.pods[0].name)
        return single

    bind_after_planning(cluster, the_single_pods_node)
    result = cluster.controller.reconcile()
    assert len(result.nodes) == 1 and len(cluster.cloud.create_calls) == 1
    (node,) = result.nodes
    assert nominated(cluster, node) == sorted(set(pods) - set(single))
    assert [n["metadata"]["name"] for n in cluster.nodes()] == ["elsewhere", node]
    # the pod went elsewhere: no Nominated event for it, and nothing is left covering it
    assert not cluster.api.events(reason="Nominated", involved_name=single[0])
    assert cluster.controller.ledger.in_flight().keys() <= {
        cluster.api.get("Pod", p, "default")["metadata"]["uid"] for p in pods if p not in single}


def test_a_launch_is_made_for_the_pods_still_waiting():
    cluster, pods = four_pods()
    gone = []

    def two_of_the_three(plan):
        (node,) = [n for n in plan.new_nodes if len(n.pods) == 3]
        gone.extend(p.name for p in node.pods[:2])
        return gone

    bind_after_planning(cluster, two_of_the_three)
    result = cluster.controller.reconcile()
    assert len(result.nodes) == 2 and len(cluster.cloud.create_calls) == 2
    assert sorted(len(launched.pod_uids) for launched in result.launched) == [1, 1]
    assert sorted(p for node in result.nodes for p in nominated(cluster, node)) == sorted(set(pods) - set(gone))
    assert sorted(e["involvedObject"]["name"] for e in cluster.api.events(reason="Nominated")) == sorted(
        set(pods) - set(gone))
