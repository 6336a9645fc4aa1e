"""A pod nominated to a node launched for it waits for that node: exact filter answers around it.

The cluster is the fixtures' (tests/fixtures/extender): N2 was launched for three inflate pods
(``NOMINATED``, 1 cpu each, deadline five minutes after ``now()``); FIRST is one of them. While
N2 starts, kube-scheduler's own filters reject it (its taints), so the extender is asked about
the other nodes only.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender import handlers
from extender.state import ExtenderState
from provisioner.model import nominations as nom
from tests.builders.nodes import as_starting
from tests.fixtures.extender import cluster, now, state
from tests.fixtures.extender.build_fixtures import N1, N2, N3, N7, N8, NOMINATED, UNKNOWN

FIRST = "inflate-6cd4d7d8f9-kq2xv"
LATE = "inflate-6cd4d7d8f9-zz9yx"
NOT_ITS_NODE = "node is not the one launched for this pod"
#: What kube-scheduler sends for FIRST while N2 starts: the on-demand r6gd.xlarge nodes its
#: nodeSelector allows, N2 left out by TaintToleration.
CANDIDATES = [N1, N3, N7, UNKNOWN]


def node_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in data["nodes"] if n["metadata"]["name"] == name)


def pod_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in data["pods"] if p["metadata"]["name"] == name)


def with_n2_starting(**options: Any) -> dict[str, Any]:
    data = cluster()
    as_starting(node_of(data, N2), **options)
    return data


def names_request(pod: str, names: list[str], data: dict[str, Any] | None = None) -> dict[str, Any]:
    """nodeCacheCapable: true."""
    return {"Pod": pod_of(data or cluster(), pod), "Nodes": None, "NodeNames": list(names)}


def nodes_request(pod: str, names: list[str], data: dict[str, Any]) -> dict[str, Any]:
    """nodeCacheCapable: false (the UNKNOWN node is not in ``data``: a bare Node stands in)."""
    items = [copy.deepcopy(node_of(data, n)) if n != UNKNOWN else {"metadata": {"name": n}} for n in names]
    return {"Pod": pod_of(data, pod), "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}


WAITING = {N1: NOT_ITS_NODE, N3: "node is being disrupted", N7: NOT_ITS_NODE, UNKNOWN: NOT_ITS_NODE}


def test_a_pod_waits_for_its_starting_node() -> None:
    signals: list[str] = []
    answer = handlers.filter(names_request(FIRST, CANDIDATES), state(with_n2_starting()), now(), signals.append)
    # N1 has 1.72 cpu free and would take it; the pod keeps to N2. A marked node keeps its own reason.
    assert answer == {"Nodes": None, "NodeNames": [], "FailedNodes": {}, "FailedAndUnresolvableNodes": WAITING,
                      "Error": ""}
    assert signals == []  # its node is on its way: nothing to provision, and no "provisioning" suffix


def test_a_pod_waits_for_its_starting_node_in_nodes_mode() -> None:
    data = with_n2_starting()
    answer = handlers.filter(nodes_request(FIRST, CANDIDATES, data), state(data), now())
    assert answer == {"Nodes": {"metadata": {}, "items": []}, "NodeNames": None, "FailedNodes": {},
                      "FailedAndUnresolvableNodes": WAITING, "Error": ""}


def test_its_node_once_a_candidate_is_the_only_one_passed() -> None:
    data = cluster()  # N2 Ready and untainted: kube-scheduler sends it
    answer = handlers.filter(names_request(FIRST, [N1, N2, N8]), state(data), now())
    assert answer == {"Nodes": None, "NodeNames": [N2], "FailedNodes": {},
                      "FailedAndUnresolvableNodes": {N1: NOT_ITS_NODE, N8: NOT_ITS_NODE}, "Error": ""}
    nodes_answer = handlers.filter(nodes_request(FIRST, [N1, N2, N8], data), state(data), now())
    assert [item["metadata"]["name"] for item in nodes_answer["Nodes"]["items"]] == [N2]
    # and its score there is the highest
    assert {r["Host"]: r["Score"] for r in handlers.prioritize(names_request(FIRST, [N1, N2, N8]), state(data),
                                                                now())} == {N1: 3, N2: 10, N8: 4}


@pytest.mark.parametrize(
    ("taints", "ready"),
    [
        ((), False),  # the kubelet has not reported; ours and the lifecycle taint are on
        (({"key": "karpenter.sh/not-ready", "effect": "NoSchedule"},), True),  # Ready, not yet initialised by us
        (({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},), True),  # Ready, lifecycle taint left
        (({"key": "example.com/agent-not-ready", "effect": "NoExecute"},), True),  # the Provisioner's startupTaint
    ],
    ids=["not-ready", "ready-before-initialization", "ready-before-the-lifecycle-controller", "startup-taint"],
)
def test_every_moment_of_a_start_holds_the_pod(taints: tuple[dict[str, str], ...], ready: bool) -> None:
    data = cluster()
    data["provisioners"][0]["spec"]["startupTaints"] = [{"key": "example.com/agent-not-ready", "effect": "NoExecute"}]
    if taints:
        as_starting(node_of(data, N2), ready=ready, taints=taints)
    else:
        as_starting(node_of(data, N2))
    answer = handlers.filter(names_request(FIRST, CANDIDATES, data), state(data), now())
    assert answer["NodeNames"] == []
    assert answer["FailedAndUnresolvableNodes"] == WAITING


def _free(data: dict[str, Any], at: float | None = None) -> dict[str, Any]:
    return handlers.filter(names_request(FIRST, CANDIDATES, data), state(data), now() if at is None else at)


FREE = {"Nodes": None, "NodeNames": [N1, N7, UNKNOWN], "FailedNodes": {},
        "FailedAndUnresolvableNodes": {N3: "node is being disrupted"}, "Error": ""}


def test_the_pod_is_free_again_at_the_nomination_deadline() -> None:
    assert _free(with_n2_starting(), at=now() + 299)["NodeNames"] == []
    assert _free(with_n2_starting(), at=now() + 300) == FREE


def test_the_pod_is_free_again_when_its_node_is_deleted() -> None:
    gone = with_n2_starting()
    gone["nodes"] = [n for n in gone["nodes"] if n["metadata"]["name"] != N2]
    assert _free(gone) == FREE
    deleting = with_n2_starting()
    node_of(deleting, N2)["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert _free(deleting) == FREE
    disrupted = with_n2_starting()
    node_of(disrupted, N2)["spec"]["taints"].append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})
    assert _free(disrupted) == FREE


def test_the_pod_is_free_when_its_nomination_is_pruned() -> None:
    data = with_n2_starting()
    del node_of(data, N2)["metadata"]["annotations"]["groupless.dev/nominations"]
    assert _free(data) == FREE


def test_a_started_node_that_kube_scheduler_rejects_does_not_hold_the_pod() -> None:
    # N2 is up (Ready, untainted) but not among the candidates: kube-scheduler bound other pods
    # there first, or the pod has a constraint the plan did not foresee. The pod may go elsewhere.
    assert _free(cluster()) == FREE


def test_a_node_initialised_once_and_now_failing_does_not_hold_the_pod() -> None:
    data = cluster()
    as_starting(node_of(data, N2), taints=({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},))
    assert _free(data) == FREE


def test_another_rule_rejecting_its_node_frees_the_pod() -> None:
    # the Provisioner's requirements changed since the launch: N2 no longer takes the pod
    data = with_n2_starting()
    data["provisioners"][0]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
    answer = handlers.filter(names_request(FIRST, [N1, N8]), state(data), now())
    assert answer["NodeNames"] == []  # both default nodes now fail the same rule, not the wait
    assert answer["FailedAndUnresolvableNodes"] == {
        N1: "node's Provisioner requirements do not match the pod", N8: "node's Provisioner requirements do not match the pod"}


# ----------------------------------------------------- pods outside the batch, the promised room
def test_pods_not_nominated_keep_off_the_room_promised_on_a_started_node() -> None:
    # N2 is up with its three pods still pending: 0.82 of its 3.82 cpu left is free for others
    answer = handlers.filter(names_request(LATE, [N1, N2]), state(), now())
    assert answer["NodeNames"] == [N1]
    assert answer["FailedNodes"] == {N2: "node is reserved for nominated pods"}
    assert answer["FailedAndUnresolvableNodes"] == {}


def test_a_pod_waiting_for_another_node_gets_neither_that_room_nor_free_room() -> None:
    # LATE is nominated to N8, which is starting; N2 is up and holds room for its three
    data = cluster()
    late = pod_of(data, LATE)
    promised = nom.nominate(nom.EMPTY, late["metadata"]["uid"], f"default/{LATE}", {"cpu": 1000}, now() + 300)
    node_of(data, N8)["metadata"]["annotations"]["groupless.dev/nominations"] = nom.encode(promised)
    as_starting(node_of(data, N8))
    answer = handlers.filter(names_request(LATE, [N1, N2], data), state(data), now())
    assert answer == {"Nodes": None, "NodeNames": [], "FailedNodes": {N2: "node is reserved for nominated pods"},
                      "FailedAndUnresolvableNodes": {N1: NOT_ITS_NODE}, "Error": ""}


def test_the_nominated_pods_of_a_started_node_pass_it_and_others_still_cannot() -> None:
    # two of N2's pods bound there; the third passes, LATE still may not take its slot
    data = cluster()
    first, second, third = NOMINATED
    for name in (first, second):
        pod_of(data, name)["spec"]["nodeName"] = N2
    current: ExtenderState = state(data)
    assert handlers.filter(names_request(third, [N1, N2], data), current, now())["NodeNames"] == [N2]
    late = handlers.filter(names_request(LATE, [N1, N2], data), current, now())
    # N2: 3.82 - 0.1 - 2 bound = 1.72 cpu free, 1 held: LATE's 1 cpu would leave 0.72 < 1
    assert late["FailedNodes"] == {N2: "node is reserved for nominated pods"}



# ----------------------------------------------------- refusals the binding order lifts
SPREAD = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "inflate"}}}


def following(constraint: dict[str, Any]) -> dict[str, Any]:
    """The cluster with FIRST carrying ``constraint`` (merged into its spec); N2 is up."""
    data = cluster()
    pod_of(data, FIRST)["spec"].update(constraint)
    return data


@pytest.mark.parametrize(
    "constraint",
    [
        {"topologySpreadConstraints": [{**SPREAD, "whenUnsatisfiable": "DoNotSchedule"}]},
        {"topologySpreadConstraints": [{k: v for k, v in SPREAD.items()}]},  # DoNotSchedule by default
        {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "db"}}}]}}},
    ],
    ids=["spread", "spread-default-policy", "pod-affinity"],
)
def test_a_started_node_kube_scheduler_refuses_for_now_holds_a_pod_that_follows_other_pods(
        constraint: dict[str, Any]) -> None:
    # N2 is up with room for FIRST, but kube-scheduler left it out: FIRST's zone would run ahead
    # of one whose pods are still on their way (spread), or no db pod is bound yet (affinity).
    # The plan counted on those pods; FIRST waits for them rather than leave N2 without it.
    data = following(constraint)
    answer = handlers.filter(names_request(FIRST, CANDIDATES, data), state(data), now())
    assert answer == {"Nodes": None, "NodeNames": [], "FailedNodes": {}, "FailedAndUnresolvableNodes": WAITING,
                      "Error": ""}
    # until the nomination ends
    late = handlers.filter(names_request(FIRST, CANDIDATES, data), state(data), now() + 300)
    assert late == FREE


def test_a_pod_with_only_preferences_about_other_pods_is_not_held() -> None:
    data = following({"topologySpreadConstraints": [{**SPREAD, "whenUnsatisfiable": "ScheduleAnyway"}]})
    assert handlers.filter(names_request(FIRST, CANDIDATES, data), state(data), now()) == FREE


def test_a_pod_that_follows_other_pods_is_not_held_by_a_node_without_room_for_it() -> None:
    # LATE, not nominated there, was bound to N2 first and took 3 cpu: FIRST no longer fits
    data = following({"topologySpreadConstraints": [{**SPREAD, "whenUnsatisfiable": "DoNotSchedule"}]})
    late = pod_of(data, LATE)
    late["spec"]["nodeName"] = N2
    late["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    assert handlers.filter(names_request(FIRST, CANDIDATES, data), state(data), now()) == FREE


def test_no_node_left_names_the_nominated_node_kube_scheduler_did_not_offer(caplog: pytest.LogCaptureFixture) -> None:
    # N2 is Ready: the pod may go elsewhere, but the only candidate offered is being disrupted
    with caplog.at_level("INFO", logger="groupless.extender"):
        answer = handlers.filter(names_request(FIRST, [N3]), state(cluster()), now(), lambda uid: None)
    assert answer["NodeNames"] == []
    assert caplog.messages == [
        f"No node left for pod default/{FIRST} after Groupless' rules (1 node is being disrupted); its nominated "
        f"node {N2} was not among the 1 candidates; signalled the provisioner"
    ]


def test_no_node_left_names_no_nomination_past_its_deadline(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="groupless.extender"):
        handlers.filter(names_request(FIRST, [N3]), state(cluster()), now() + 300, lambda uid: None)
    assert caplog.messages == [
        f"No node left for pod default/{FIRST} after Groupless' rules (1 node is being disrupted); "
        "signalled the provisioner"
    ]
