"""Exact answers for request bodies recorded from a real kube-scheduler (tests/fixtures/extender/recorded)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from extender import handlers
from extender.state import ExtenderState, build_state
from provisioner.api.schemas import load_provisioner
from provisioner.clock import parse_rfc3339
from tests.builders.nodes import as_starting

RECORDED = Path(__file__).parents[2] / "fixtures" / "extender" / "recorded"
N4, N5, N6 = (f"ip-10-0-0-{i}.ec2.internal" for i in (4, 5, 6))
LAUNCHED_AT = parse_rfc3339("2026-11-30T10:28:43Z")  # -5 and -6 launched, nominations written


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / f"{name}.json").read_text())


def cluster_at(bound: dict[str, str], pending: list[str], nominations: dict[str, str],
               starting: tuple[str, ...] = ()) -> ExtenderState:
    """The recorded cluster with these pods bound (pod name -> node) or pending, and these annotations.

    ``starting``: nodes as they were before their kubelet reported (the recording ends with every node up).
    """
    data = recorded("cluster")
    pods = {p["metadata"]["name"]: p for p in [*data["pods"], *data["deleted_pods"]]}
    objects = []
    for name in [*bound, *pending]:
        pod = copy.deepcopy(pods[name])
        pod["spec"].pop("nodeName", None)
        if name in bound:
            pod["spec"]["nodeName"] = bound[name]
        objects.append(pod)
    nodes = copy.deepcopy(data["nodes"])
    for node in nodes:
        annotation = nominations.get(node["metadata"]["name"])
        if annotation is not None:
            node["metadata"].setdefault("annotations", {})["groupless.dev/nominations"] = annotation
        if node["metadata"]["name"] in starting:
            as_starting(node)
    return build_state(nodes, objects, [load_provisioner(p) for p in data["provisioners"]])


FIRST_THREE = {"inflate-6778cd65b8-nz65d": N4, "inflate-6778cd65b8-mkkdc": N4, "inflate-6778cd65b8-5qs6h": N4}
BURST = ["inflate-6778cd65b8-x9c6c", "inflate-6778cd65b8-phckl", "inflate-6778cd65b8-q6krh",
         "inflate-6778cd65b8-vk5pj"]


def test_shape_is_what_the_scheduler_sends() -> None:
    body = recorded("filter-x9c6c")
    assert set(body) == {"Pod", "Nodes", "NodeNames"}
    assert body["Nodes"] is None and body["NodeNames"] == [N6]
    assert body["Pod"]["metadata"]["uid"] == "55435fb7-286d-4579-987a-7b60557b9d12"


def test_pod_nominated_to_a_starting_node_waits_for_it() -> None:
    # x9c6c was nominated to -5 (not Ready yet, so filtered out in-tree); -6, up already, holds
    # 1 cpu for q6krh and has 2.82 cpu left over. Taking it would leave -5's third slot idle.
    state = cluster_at(FIRST_THREE, BURST, recorded("cluster")["nominations"], starting=(N5,))
    signals: list[str] = []
    assert handlers.filter(recorded("filter-x9c6c"), state, LAUNCHED_AT, signals.append) == {
        "Nodes": None, "NodeNames": [], "FailedNodes": {},
        "FailedAndUnresolvableNodes": {N6: "node is not the one launched for this pod"}, "Error": "",
    }
    assert signals == []


def test_pod_nominated_to_a_node_that_is_up_but_refused_may_use_free_capacity() -> None:
    # -5 is up (as at the end of the recording) and kube-scheduler still did not offer it: its
    # room went to others, so x9c6c may take what -6 has left over
    state = cluster_at(FIRST_THREE, BURST, recorded("cluster")["nominations"])
    assert handlers.filter(recorded("filter-x9c6c"), state, LAUNCHED_AT) == {
        "Nodes": None, "NodeNames": [N6], "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": "",
    }


def test_same_request_against_a_node_held_for_three_others() -> None:
    # had the controller put the three -5 nominations on -6, 3.82 - 3 cpu would be left: x9c6c may not take it
    nominations = recorded("cluster")["nominations"]
    held = json.loads(nominations[N5])
    del held["pods"]["55435fb7-286d-4579-987a-7b60557b9d12"]  # x9c6c itself
    held["pods"]["e5205e93-742f-4929-acfc-ffc0b617ed2c"] = {"pod": "default/inflate-6778cd65b8-q6krh",
                                                           "requests": {"cpu": 1000, "pods": 1}}
    state = cluster_at(FIRST_THREE, BURST, {N6: json.dumps(held)})
    signals: list[str] = []
    answer = handlers.filter(recorded("filter-x9c6c"), state, LAUNCHED_AT, signals.append)
    assert answer["NodeNames"] == []
    assert answer["FailedNodes"] == {
        N6: "node is reserved for nominated pods (groupless is provisioning a node for this pod)"}
    assert signals == ["55435fb7-286d-4579-987a-7b60557b9d12"]
    # five minutes after launch the reservation is over
    late = handlers.filter(recorded("filter-x9c6c"), state, parse_rfc3339("2026-11-30T10:33:43Z"))
    assert late["NodeNames"] == [N6]


def test_replacement_pod_between_two_equal_nodes() -> None:
    bound = {"inflate-6778cd65b8-nz65d": N4, "inflate-6778cd65b8-mkkdc": N4, "inflate-6778cd65b8-vk5pj": N5,
             "inflate-6778cd65b8-d6zr5": N5, "inflate-6778cd65b8-x9c6c": N6, "inflate-6778cd65b8-phckl": N6,
             "inflate-6778cd65b8-q6krh": N6}
    state = cluster_at(bound, ["inflate-6778cd65b8-gv2np", "inflate-6778cd65b8-g4tnk"], {})
    now = parse_rfc3339("2026-11-30T10:29:32Z")
    filtered = handlers.filter(recorded("filter-gv2np"), state, now)
    assert filtered["NodeNames"] == [N4, N5]
    # both: (2 + 1) of 3.82 cpu, no memory requested -> packing 0.39 -> 1 + 2 x 1; no price known
    assert handlers.prioritize(recorded("prioritize-gv2np"), state, now) == [
        {"Host": N4, "Score": 3}, {"Host": N5, "Score": 3}]
    # with gv2np nominated to -5 (as the controller would for a launch), -5 wins outright
    nomination = json.dumps({"deadline": "2026-11-30T10:34:00Z", "pods": {
        recorded("prioritize-gv2np")["Pod"]["metadata"]["uid"]: {"pod": "default/inflate-6778cd65b8-gv2np",
                                                                 "requests": {"cpu": 1000}}}})
    state = cluster_at(bound, ["inflate-6778cd65b8-gv2np", "inflate-6778cd65b8-g4tnk"], {N5: nomination})
    assert handlers.prioritize(recorded("prioritize-gv2np"), state, now) == [
        {"Host": N4, "Score": 3}, {"Host": N5, "Score": 10}]


def test_first_pod_on_the_first_node() -> None:
    state = cluster_at({}, ["inflate-6778cd65b8-nz65d"], {})
    answer = handlers.filter(recorded("filter-nz65d"), state, LAUNCHED_AT)
    assert answer["NodeNames"] == [N4] and answer["FailedNodes"] == {}


# ---------------------------------------------------------------- nodeCacheCapable: false
A, B, DELETING = (f"ip-10-0-1-{i}.ec2.internal" for i in (10, 11, 12))
NODES_MODE_NOW = parse_rfc3339("2026-11-30T10:33:25Z")


def nodes_mode_cluster(bound: dict[str, str]) -> ExtenderState:
    data = recorded("nodes-mode-cluster")
    pods = []
    for pod in copy.deepcopy(data["pods"]):
        pod["spec"].pop("nodeName", None)
        if pod["metadata"]["name"] in bound:
            pod["spec"]["nodeName"] = bound[pod["metadata"]["name"]]
        pods.append(pod)
    return build_state(data["nodes"], pods, [load_provisioner(p) for p in data["provisioners"]])


def test_nodes_mode_shape_is_what_the_scheduler_sends() -> None:
    body = recorded("nodes-mode-filter-nom-3")
    assert body["NodeNames"] is None
    assert set(body["Nodes"]) == {"metadata", "items"}  # a NodeList without apiVersion/kind
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == [B, DELETING, A]


def test_nodes_mode_nominated_pod_and_a_node_being_deleted() -> None:
    state = nodes_mode_cluster({})
    body = recorded("nodes-mode-filter-nom-3")
    answer = handlers.filter(body, state, NODES_MODE_NOW)
    assert answer["NodeNames"] is None
    # A, the node it is nominated to, is a candidate: the pod goes there and nowhere else
    assert answer["Nodes"] == {"metadata": {}, "items": [body["Nodes"]["items"][2]]}
    assert answer["FailedNodes"] == {}
    assert answer["FailedAndUnresolvableNodes"] == {B: "node is not the one launched for this pod",
                                                    DELETING: "node is being deleted"}
    # B: (0 + 1) of 3.82 cpu, memory idle -> tier 0, and the only (so cheapest) price -> 1 + 0 + 1
    assert handlers.prioritize(recorded("nodes-mode-prioritize-nom-3"), state, NODES_MODE_NOW) == [
        {"Host": B, "Score": 2}, {"Host": A, "Score": 10}]


def test_nodes_mode_late_pod_is_kept_off_the_reserved_node() -> None:
    # inflate-nom-3 is bound to A; nom-1 and nom-2 still hold 2 of the 2.82 cpu left there
    state = nodes_mode_cluster({"inflate-nom-3": A})
    body = recorded("nodes-mode-filter-late")
    answer = handlers.filter(body, state, NODES_MODE_NOW)
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == [B]
    assert answer["FailedNodes"] == {A: "node is reserved for nominated pods"}
    assert answer["FailedAndUnresolvableNodes"] == {DELETING: "node is being deleted"}
