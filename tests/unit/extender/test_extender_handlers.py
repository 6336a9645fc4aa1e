"""The filter and prioritize handlers against kube-scheduler-shaped request bodies (tests/fixtures/extender)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from extender import handlers
from extender.assumed import AssumedPods
from extender.handlers import BadRequest
from provisioner.model.resources import Resources
from tests.fixtures.extender import body, cluster, now, state
from tests.fixtures.extender.build_fixtures import N1, N2, N3, N4, N5, N6, N7, N8, NOMINATED, UNKNOWN

LATE_UID = "5a1f0c2e-8d3b-4c77-9e10-000000000004"
FIRST_UID = NOMINATED["inflate-6cd4d7d8f9-kq2xv"]

EXPECTED_FAILED = {N2: "node is reserved for nominated pods"}
EXPECTED_UNRESOLVABLE = {
    N3: "node is being disrupted",
    N4: "node is being deleted",
    N5: "node's Provisioner has taints the pod does not tolerate",
}


def test_filter_node_names_mode_exact_answer() -> None:
    calls: list[str] = []
    result = handlers.filter(body("filter-nodenames"), state(), now(), calls.append)
    assert result == {
        "Nodes": None,
        "NodeNames": [N1, N6, N7, UNKNOWN],
        "FailedNodes": EXPECTED_FAILED,
        "FailedAndUnresolvableNodes": EXPECTED_UNRESOLVABLE,
        "Error": "",
    }
    assert calls == []  # nodes passed: no provisioning signal
    # reasons come in request order, so the JSON answer is the same on every run
    assert list(result["FailedAndUnresolvableNodes"]) == [N3, N4, N5]


def test_filter_nodes_mode_answers_the_surviving_items() -> None:
    request = body("filter-nodes")
    result = handlers.filter(request, state(), now())
    assert result["NodeNames"] is None
    assert result["Nodes"]["metadata"] == {}
    assert [i["metadata"]["name"] for i in result["Nodes"]["items"]] == [N1, N6, N7, UNKNOWN]
    assert result["Nodes"]["items"][0] == request["Nodes"]["items"][0]  # the objects, unchanged
    assert result["FailedNodes"] == EXPECTED_FAILED
    assert result["FailedAndUnresolvableNodes"] == EXPECTED_UNRESOLVABLE


def test_filter_reads_lowercase_keys_of_old_schedulers() -> None:
    assert handlers.filter(body("filter-lowercase"), state(), now()) == handlers.filter(
        body("filter-nodenames"), state(), now()
    )


def test_filter_none_left_triggers_provisioning_and_says_so() -> None:
    calls: list[str] = []
    result = handlers.filter(body("filter-none-left"), state(), now(), calls.append)
    assert calls == [LATE_UID]
    assert result["NodeNames"] == []
    suffix = " (groupless is provisioning a node for this pod)"
    assert result["FailedNodes"] == {N2: "node is reserved for nominated pods" + suffix}
    assert result["FailedAndUnresolvableNodes"] == {N3: "node is being disrupted" + suffix}


def test_filter_none_left_without_trigger_keeps_plain_reasons() -> None:
    result = handlers.filter(body("filter-none-left"), state(), now(), None)
    assert result["FailedNodes"] == {N2: "node is reserved for nominated pods"}


def test_filter_trigger_failure_is_swallowed() -> None:
    def broken(uid: str) -> None:
        raise RuntimeError("controller stopped")

    result = handlers.filter(body("filter-none-left"), state(), now(), broken)
    assert result["FailedNodes"] == {N2: "node is reserved for nominated pods"}


def test_nominated_pod_passes_its_node_only() -> None:
    result = handlers.filter(body("filter-nominated"), state(), now())
    assert result["NodeNames"] == [N2]
    assert result["FailedNodes"] == {}
    assert result["FailedAndUnresolvableNodes"] == {N1: "node is not the one launched for this pod"}


def test_reservation_ends_at_deadline() -> None:
    result = handlers.filter(body("filter-nodenames"), state(), now() + 300)
    assert N2 in result["NodeNames"]
    assert result["FailedNodes"] == {}


def test_reservation_ends_when_a_nominated_pod_binds_elsewhere() -> None:
    data = cluster()
    bound = next(p for p in data["pods"] if p["metadata"]["uid"] == FIRST_UID)
    bound["spec"]["nodeName"] = N1  # one of the three went elsewhere: 2 cpu held, 1.82 free on N2
    result = handlers.filter(body("filter-nodenames"), state(data), now())
    assert N2 in result["NodeNames"]


def test_reservation_ends_when_nominated_pods_are_deleted() -> None:
    data = cluster()
    data["pods"] = [p for p in data["pods"] if p["metadata"]["uid"] not in set(NOMINATED.values())]
    assert N2 in handlers.filter(body("filter-nodenames"), state(data), now())["NodeNames"]


def test_reservation_blocks_only_what_it_turns_into_not_fitting() -> None:
    request = body("filter-nodenames")
    small = copy.deepcopy(request)
    small["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "800m"  # 820m free beside the held 3
    assert N2 in handlers.filter(small, state(), now())["NodeNames"]
    huge = copy.deepcopy(request)
    huge["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "8"  # never fits: kube-scheduler's call
    assert N2 in handlers.filter(huge, state(), now())["NodeNames"]


def test_daemonset_pods_are_never_kept_off_by_reservations() -> None:
    request = body("filter-nodenames")
    request["Pod"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter", "uid": "x", "controller": True}
    ]
    result = handlers.filter(request, state(), now())
    assert N2 in result["NodeNames"]


def test_provisioner_requirements_that_do_not_intersect_reject() -> None:
    request = body("filter-nodenames")
    spec = request["Pod"]["spec"]
    spec["tolerations"].append({"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"})
    spec["nodeSelector"] = {"kubernetes.io/arch": "amd64"}  # team-a only allows arm64
    result = handlers.filter(request, state(), now())
    assert result["FailedAndUnresolvableNodes"][N5] == "node's Provisioner requirements do not match the pod"
    spec["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    assert N5 in handlers.filter(request, state(), now())["NodeNames"]


def test_required_node_affinity_terms_are_ored() -> None:
    request = body("filter-nodenames")
    spec = request["Pod"]["spec"]
    del spec["nodeSelector"]
    spec["tolerations"].append({"key": "team", "operator": "Exists"})
    term = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]}
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    assert handlers.filter(request, state(), now())["FailedAndUnresolvableNodes"][N5] == (
        "node's Provisioner requirements do not match the pod")
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms.append({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [N5]}]})
    assert N5 in handlers.filter(request, state(), now())["NodeNames"]  # a matchFields term constrains no label


def test_an_empty_node_selector_term_selects_no_node() -> None:
    # kube-scheduler's NodeAffinity skips a term without matchExpressions and matchFields: the
    # pod's other term alone decides, and team-a's nodes do not meet it
    request = body("filter-nodenames")
    spec = request["Pod"]["spec"]
    del spec["nodeSelector"]
    spec["tolerations"].append({"key": "team", "operator": "Exists"})
    term = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]}
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}, term]}}}
    assert handlers.filter(request, state(), now())["FailedAndUnresolvableNodes"][N5] == (
        "node's Provisioner requirements do not match the pod")


def test_cordoned_nodes_of_ours_are_rejected() -> None:
    data = cluster()
    next(n for n in data["nodes"] if n["metadata"]["name"] == N1)["spec"]["unschedulable"] = True
    result = handlers.filter(body("filter-nodenames"), state(data), now())
    assert result["FailedAndUnresolvableNodes"][N1] == "node is cordoned for disruption"


def test_empty_state_passes_everything() -> None:
    from extender.state import EMPTY_STATE

    result = handlers.filter(body("filter-nodenames"), EMPTY_STATE, now())
    assert result["NodeNames"] == body("filter-nodenames")["NodeNames"]
    assert result["FailedNodes"] == {} and result["FailedAndUnresolvableNodes"] == {}


def test_answer_is_json_serialisable_with_go_field_names() -> None:
    text = json.dumps(handlers.filter(body("filter-nodenames"), state(), now()))
    assert set(json.loads(text)) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


# ------------------------------------------------------------------------------ prioritize
def test_prioritize_exact_scores() -> None:
    # N2: launched for this pod -> 10. N7 expires in 10 min, the unknown node is not in our
    # cache -> 0. N1 (cpu 3.1/3.92 after placing, memory idle: packing 0.395 -> tier 1) and
    # N6 (not ours, packing 0.316 -> tier 1, no price) -> 1 + 2 = 3; N8 (tier 1, and the
    # pod's share of its spot price, 0.0691 * 1/3.92, is the cheapest) -> 4.
    result = handlers.prioritize(body("prioritize-nominated"), state(), now())
    assert result == [
        {"Host": N1, "Score": 3},
        {"Host": N2, "Score": 10},
        {"Host": N6, "Score": 3},
        {"Host": N7, "Score": 0},
        {"Host": N8, "Score": 4},
        {"Host": UNKNOWN, "Score": 0},
    ]


def test_prioritize_nodes_mode_same_rules() -> None:
    result = handlers.prioritize(body("prioritize-nodes"), state(), now())
    assert result == [{"Host": N1, "Score": 3}, {"Host": N6, "Score": 3}, {"Host": N7, "Score": 0},
                      {"Host": N8, "Score": 4}]


def test_prioritize_nomination_expires_with_deadline() -> None:
    scores = {r["Host"]: r["Score"] for r in handlers.prioritize(body("prioritize-nominated"), state(), now() + 301)}
    # N2 after the deadline: cpu (0.1 + 1) / 3.92 = 0.28, memory 0 -> packing 0.14 -> tier 0, price not cheapest
    assert scores[N2] == 1


def test_prioritize_packs_fuller_nodes_higher() -> None:
    data = cluster()
    # two more inflate pods on N1: cpu (4.1 + 1)/3.92 capped at 1, memory 0 -> packing 0.5 -> tier 2
    extra = [p for p in data["pods"] if p["metadata"]["name"] == "inflate-6cd4d7d8f9-a1b2c"][0]
    for suffix in ("1", "2"):
        clone = copy.deepcopy(extra)
        clone["metadata"]["uid"] = clone["metadata"]["uid"][:-1] + suffix
        data["pods"].append(clone)
    scores = {r["Host"]: r["Score"] for r in handlers.prioritize(body("prioritize-nominated"), state(data), now())}
    assert scores[N1] == 5
    assert scores[N8] == 4


def test_prioritize_expiry_horizon_is_settable() -> None:
    scores = {r["Host"]: r["Score"] for r in handlers.prioritize(body("prioritize-nominated"), state(), now(),
                                                                 expiry_horizon=300)}
    assert scores[N7] == 1  # 600 s left > 300 s horizon: ranked normally (tier 0, not cheapest)


def test_prioritize_is_deterministic() -> None:
    first = handlers.prioritize(body("prioritize-nominated"), state(), now())
    assert all(handlers.prioritize(body("prioritize-nominated"), state(), now()) == first for _ in range(3))


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "request body must be a JSON object (ExtenderArgs), got list"),
        ({"Nodes": None, "NodeNames": []}, "missing Pod"),
        ({"Pod": "x", "NodeNames": []}, "Pod must be an object, got str"),
        ({"Pod": {}}, "neither Nodes nor NodeNames given"),
        ({"Pod": {}, "Nodes": None, "NodeNames": None}, "neither Nodes nor NodeNames given"),
        ({"Pod": {}, "NodeNames": "a"}, "NodeNames must be a list of strings"),
        ({"Pod": {}, "NodeNames": [1]}, "NodeNames must be a list of strings"),
        ({"Pod": {}, "Nodes": []}, "Nodes must be a NodeList object, got list"),
        ({"Pod": {}, "Nodes": {"items": {}}}, "Nodes.items must be a list, got dict"),
        ({"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}, "Nodes.items[0]: missing metadata.name"),
    ],
)
def test_bad_args_name_the_field(args: Any, message: str) -> None:
    with pytest.raises(BadRequest) as raised:
        handlers.filter(args, state(), now())
    assert str(raised.value) == message
    with pytest.raises(BadRequest):
        handlers.prioritize(args, state(), now())


def test_null_items_is_an_empty_node_list() -> None:
    result = handlers.filter({"Pod": {}, "Nodes": {"metadata": {}, "items": None}, "NodeNames": None}, state(), now())
    assert result["Nodes"] == {"metadata": {}, "items": []}


def test_odd_pod_content_does_not_fail() -> None:
    request = body("filter-nodenames")
    request["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    request["Pod"]["spec"]["tolerations"] = "everything"
    request["Pod"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}]}}}
    result = handlers.filter(request, state(), now())
    assert N1 in result["NodeNames"]


def test_both_fields_sent_are_both_answered() -> None:
    request = body("filter-nodes")
    request["NodeNames"] = [N1, N2, N3]  # no scheduler sends both; answer each consistently
    result = handlers.filter(request, state(), now())
    assert result["NodeNames"] == [N1]
    assert [i["metadata"]["name"] for i in result["Nodes"]["items"]] == [N1]


def test_no_node_left_is_logged_with_counted_reasons(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="groupless.extender"):
        handlers.filter(body("filter-none-left"), state(), now(), lambda uid: None)
    assert caplog.messages == [
        "No node left for pod default/inflate-6cd4d7d8f9-zz9yx after Groupless' rules "
        "(1 node is being disrupted, 1 node is reserved for nominated pods); signalled the provisioner"
    ]


def test_room_beside_a_reservation_is_passed_once_while_bindings_reach_the_cache() -> None:
    # N2 holds 3 cpu for its nominated pod with 820m free beside it: two 500m pods that are not
    # nominated are filtered against the same (stale) state, as kube-scheduler does in a burst
    # before the first one's binding reaches the cache
    assumed = AssumedPods(ttl_seconds=2.0)
    first, second = copy.deepcopy(body("filter-nodenames")), copy.deepcopy(body("filter-nodenames"))
    for request, uid in ((first, "u-first"), (second, "u-second")):
        request["Pod"]["metadata"]["uid"] = uid
        request["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    assert N2 in handlers.filter(first, state(), now(), assumed=assumed)["NodeNames"]
    refused = handlers.filter(second, state(), now(), assumed=assumed)
    assert N2 not in refused["NodeNames"]
    assert refused["FailedNodes"][N2] == handlers.REASON_RESERVED
    # the first pod filtered again (kube-scheduler's retry) does not count against itself
    assert N2 in handlers.filter(first, state(), now() + 1, assumed=assumed)["NodeNames"]
    # once the pass is older than its time to live, the room is the cache's to tell
    assert N2 in handlers.filter(second, state(), now() + 3.5, assumed=assumed)["NodeNames"]
    # without the record, both pass (the race the record closes)
    assert N2 in handlers.filter(second, state(), now())["NodeNames"]


def test_a_pass_counts_until_the_cache_shows_its_pod_bound_however_long_that_takes() -> None:
    # the same two 500m pods beside N2's reservation (820m free), on a loaded API server: the
    # first pod's binding reaches the cache 10 s after its pass
    assumed = AssumedPods()
    first, second = copy.deepcopy(body("filter-nodenames")), copy.deepcopy(body("filter-nodenames"))
    for request, uid in ((first, "u-first"), (second, "u-second")):
        request["Pod"]["metadata"]["uid"] = uid
        request["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    pending = {"metadata": {"uid": "u-first", "name": "first", "namespace": "default"}, "spec": {}}
    assert N2 in handlers.filter(first, state(), now(), assumed=assumed)["NodeNames"]
    stale = state()
    stale.pods = {"u-first": pending}  # the cache holds the pod, not yet bound
    assert N2 not in handlers.filter(second, stale, now() + 10, assumed=assumed)["NodeNames"]
    # bound elsewhere (kube-scheduler chose N3): the room beside N2's reservation is free again
    bound = {**pending, "spec": {"nodeName": N3}}
    fresh = state()
    fresh.pods = {"u-first": bound}
    assert N2 in handlers.filter(second, fresh, now() + 10, assumed=assumed)["NodeNames"]
    assert assumed.on(N2, now() + 10, "u-second", fresh.settled) == Resources()  # the first pass was dropped


def test_state_settled_tells_bound_and_deleting_pods_from_pending_and_unknown_ones() -> None:
    from extender.state import ExtenderState

    pods = {
        "pending": {"metadata": {"uid": "pending"}, "spec": {}},
        "bound": {"metadata": {"uid": "bound"}, "spec": {"nodeName": "n1"}},
        "deleting": {"metadata": {"uid": "deleting", "deletionTimestamp": "2026-12-02T00:00:00Z"}, "spec": {}},
    }
    with_pods = ExtenderState(pods=pods)
    assert [uid for uid in ("pending", "bound", "deleting", "unknown") if with_pods.settled(uid)] == ["bound", "deleting"]
    assert not ExtenderState().settled("bound")
