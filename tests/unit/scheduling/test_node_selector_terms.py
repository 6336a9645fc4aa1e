"""Required node selector terms as kube-scheduler matches them (``component-helpers`` ``nodeaffinity``).

* The expressions of one term are ANDed: ``Exists`` with ``NotIn [x]`` on one key needs the
  label, with another value; a node without the label does not meet the term.
* A term without ``matchExpressions`` and ``matchFields`` selects no node: it is left out of the
  ORed terms, and a pod whose terms are all empty is never bound (kube-apiserver accepts it).

Exact plans, through Node and Pod manifests and the production input builder.
"""

from __future__ import annotations

from typing import Any

from provisioner.model.labels import ZONE
from provisioner.model.requirements import Requirements
from provisioner.scheduling.pods import pod_from_manifest
from tests.builders.catalog import instance_type
from tests.builders.nodes import node_manifest
from tests.builders.plans import on_existing, plan_of
from tests.builders.pods import manifest
from tests.builders.provisioners import provisioner

A, B = "ap-south-1a", "ap-south-1b"
GPU = "example.com/gpu"
AMD64_OD = (("karpenter.sh/capacity-type", "In", ("on-demand",)), ("kubernetes.io/arch", "In", ("amd64",)))
M5_XLARGE = instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202)
TYPES = {"default": [M5_XLARGE]}


def node(name: str, zone: str = A, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return node_manifest(name, provisioner="default", labels={ZONE: zone, **(labels or {})},
                         allocatable={"cpu": "2", "memory": "16Gi", "pods": "110"}, ready=True)


def requiring(name: str, *terms: dict[str, Any]) -> dict[str, Any]:
    """A pending pod (1 cpu) whose required node affinity has ``terms``."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}
    return manifest(name, cpu="1", spec={"affinity": affinity})


def expressions(*items: tuple[Any, ...]) -> dict[str, Any]:
    return {"matchExpressions": [{"key": k, "operator": o, **({"values": list(v)} if v else {})} for k, o, *v in items]}


NOT_K80 = expressions((GPU, "Exists"), (GPU, "NotIn", "k80"))


# ----------------------------------------------------------------------------- Exists AND NotIn
def test_exists_and_not_in_skips_the_existing_node_without_the_label():
    # n1 (tried first) has no gpu label: kube-scheduler would never bind the pod there
    plan = plan_of([requiring("p", NOT_K80)], [provisioner(requirements=AMD64_OD)], TYPES,
                   nodes=[node("n1"), node("n2", labels={GPU: "k80"}), node("n3", labels={GPU: "t4"})])
    assert on_existing(plan) == {"n3": ["p"]}


def test_exists_and_not_in_gives_a_new_node_the_label_with_another_value():
    # a Provisioner that does not name the key cannot launch a node carrying it
    plain = plan_of([requiring("p", NOT_K80)], [provisioner(requirements=AMD64_OD)], TYPES, nodes=[node("n1")])
    assert plain.new_nodes == () and on_existing(plain) == {}
    assert plain.unschedulable[0].reason == (
        f"provisioner default: incompatible requirements, label {GPU} does not have known values")
    gpus = provisioner(requirements=AMD64_OD + ((GPU, "In", ("k80", "t4")),))
    plan = plan_of([requiring("p", NOT_K80)], [gpus], TYPES, nodes=[node("n1")])
    assert on_existing(plan) == {}
    assert [(n.labels[GPU], [p.name for p in n.pods]) for n in plan.new_nodes] == [("t4", ["p"])]


# ----------------------------------------------------------------------------- empty terms
def test_an_empty_term_is_left_out_of_the_ored_terms():
    pod = pod_from_manifest(requiring("p", {}, expressions((ZONE, "In", B))))
    assert pod.required_node_affinity == (Requirements.from_labels({ZONE: B}),)
    plan = plan_of([requiring("p", {}, expressions((ZONE, "In", B)))], [provisioner(requirements=AMD64_OD)], TYPES,
                   nodes=[node("n-a", A), node("n-b", B)])
    assert on_existing(plan) == {"n-b": ["p"]}


def test_a_pod_whose_terms_are_all_empty_is_never_placed():
    (nothing,) = pod_from_manifest(requiring("p", {}, {"matchExpressions": []})).required_node_affinity
    assert nothing.mismatch({ZONE: A}) is not None and nothing.mismatch({}) is not None
    plan = plan_of([requiring("p", {})], [provisioner(requirements=AMD64_OD)], TYPES, nodes=[node("n-a")])
    assert plan.new_nodes == () and on_existing(plan) == {}
    assert [(e.pod.name, e.reason) for e in plan.unschedulable] == [
        ("p", "provisioner default: incompatible requirements, an empty nodeSelectorTerm (it selects no node) "
              "cannot be met")]


def test_a_required_affinity_without_terms_selects_no_node_and_an_absent_one_every_node():
    none = manifest("p", cpu="1", spec={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}})
    (nothing,) = pod_from_manifest(none).required_node_affinity
    assert nothing.mismatch({ZONE: A}) == "an empty nodeSelectorTerm (it selects no node) cannot be met"
    assert pod_from_manifest(manifest("p", cpu="1", spec={"affinity": {"nodeAffinity": {}}})).required_node_affinity == ()
