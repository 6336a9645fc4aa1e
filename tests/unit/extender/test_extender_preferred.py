"""prioritize never favours a node kube-scheduler's NodeAffinity plugin ranks lower for the pod.

kube-scheduler adds the extender's score (times ``weight`` × 10, 50 at the shipped weight 5) to
the in-tree plugins', NodeAffinity's among them (0..100 times its weight 2, by the sum of the
weights of the preferred terms a node meets). Without this rule the packing score alone (up to
8 → 400) outweighs a preferred term (200) and the pod lands on a fuller node it prefers less.
"""

from __future__ import annotations

import json
from typing import Any

from extender import handlers
from extender.state import ProvisionerInfo, build_state
from tests.builders.nodes import node_manifest
from tests.builders.pods import manifest

ZONE = "topology.kubernetes.io/zone"
NOW = 1_000_000.0
ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "58"}


def term(weight: int, zone: str) -> dict[str, Any]:
    return {"weight": weight, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}}


def pending(*terms: dict[str, Any]) -> dict[str, Any]:
    spec = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(terms)}}}
    return manifest("web", cpu="500m", uid="uid-web", spec=spec)


def bound(name: str, node: str, cpu: str, memory: str) -> dict[str, Any]:
    return manifest(name, cpu=cpu, memory=memory, spec={"nodeName": node})


def cluster(nominated_to: str | None = None) -> Any:
    """full-a (zone a, 3 CPU and 12Gi of 4 and 16Gi requested), half-b (zone b, 2 CPU, 8Gi), empty-c (zone c)."""
    nodes = [node_manifest("full-a", provisioner="default", labels={ZONE: "a"}, allocatable=ALLOCATABLE),
             node_manifest("half-b", provisioner="default", labels={ZONE: "b"}, allocatable=ALLOCATABLE),
             node_manifest("empty-c", provisioner="default", labels={ZONE: "c"}, allocatable=ALLOCATABLE)]
    if nominated_to is not None:
        annotation = json.dumps({"deadline": "1970-01-12T13:50:00Z",  # NOW + 200 s
                                 "pods": {"uid-web": {"pod": "default/web", "requests": {"cpu": 500, "pods": 1}}}})
        for node in nodes:
            if node["metadata"]["name"] == nominated_to:
                node["metadata"]["annotations"] = {"groupless.dev/nominations": annotation}
    pods = [bound("a1", "full-a", "3", "12Gi"), bound("b1", "half-b", "2", "8Gi"), pending()]
    return build_state(nodes, pods, [ProvisionerInfo("default")])


def scores(pod: dict[str, Any], state: Any) -> dict[str, int]:
    answer = handlers.prioritize({"Pod": pod, "NodeNames": ["full-a", "half-b", "empty-c"]}, state, NOW)
    return {row["Host"]: row["Score"] for row in answer}


def test_without_preferences_the_fuller_node_scores_higher() -> None:
    assert scores(pending(), cluster()) == {"full-a": 7, "half-b": 5, "empty-c": 1}


def test_only_the_nodes_meeting_the_heaviest_terms_get_a_score() -> None:
    # empty-c meets the 10 term, half-b the 5 term: the fuller nodes no longer outrank empty-c
    assert scores(pending(term(5, "b"), term(10, "c")), cluster()) == {"full-a": 0, "half-b": 0, "empty-c": 1}
    # two nodes meet terms of the same total: packing ranks them
    assert scores(pending(term(10, "b"), term(10, "c")), cluster()) == {"full-a": 0, "half-b": 5, "empty-c": 1}
    # no candidate meets any term: every node is in the top tier (score 0 for all), as before
    assert scores(pending(term(10, "z")), cluster()) == {"full-a": 7, "half-b": 5, "empty-c": 1}


def test_the_nominated_node_keeps_its_score_only_among_the_top_tier() -> None:
    assert scores(pending(term(10, "c")), cluster(nominated_to="half-b"))["half-b"] == 0
    assert scores(pending(term(10, "b")), cluster(nominated_to="half-b"))["half-b"] == 10


def test_terms_that_cannot_be_read_are_left_out() -> None:
    broken = {"weight": 50, "preference": {"matchExpressions": [{"key": ZONE, "operator": "Near", "values": ["a"]}]}}
    assert scores(pending(broken, term(10, "c")), cluster()) == {"full-a": 0, "half-b": 0, "empty-c": 1}
