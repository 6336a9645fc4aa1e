"""The labels a launched node carries: one fact for the plan, DaemonSet overhead and the Node object.

A new node carries its instance type's labels, its zone and capacity type, its name as
``kubernetes.io/hostname``, the Provisioner's labels and ``karpenter.sh/provisioner-name``, the
labels its requirements decide, and the labels the controller's settings put on every node
(``nodes.labels``) on keys the Provisioner does not name. A pod's node selector and required
node affinity are met, and a DaemonSet's pod runs there (DaemonSet overhead), exactly as
kube-scheduler and the DaemonSet controller would decide against those labels. Exact plans through
manifests and the production input builder; the Node the controller writes is checked with the
same labels.

Units: m5.xlarge allocatable 3820m cpu, m5.2xlarge 7810m; every DaemonSet requests 1 cpu.
"""

from __future__ import annotations

from typing import Any

from provisioner.cloudprovider.types import Machine
from provisioner.controllers.provisioning.nodes import node_labels
from provisioner.model.labels import HOSTNAME, ZONE
from provisioner.scheduling.solver import Plan
from tests.builders.catalog import instance_type
from tests.builders.plans import plan_of
from tests.builders.pods import manifest
from tests.builders.provisioners import provisioner

AMD64_OD = (("karpenter.sh/capacity-type", "In", ("on-demand",)), ("kubernetes.io/arch", "In", ("amd64",)))
M5_XLARGE = instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202)
M5_2XLARGE = instance_type("m5.2xlarge", "amd64", 8000, 29936, 58, 7810, 28843, 0.404)
TYPES = {"default": [M5_XLARGE, M5_2XLARGE]}
GPU = "example.com/gpu"


def daemonset(name: str, *expressions: tuple[Any, ...], node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A DaemonSet whose pods request 1 cpu and require ``expressions`` (one term) and ``node_selector``."""
    spec: dict[str, Any] = {"containers": [{"name": "agent", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    if expressions:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": k, "operator": o, **({"values": list(v)} if v else {})}
                                  for k, o, *v in expressions]}]}}}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system",
                                                                       "uid": f"uid-{name}"},
            "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def three_cpu(name: str = "p", **spec: Any) -> dict[str, Any]:
    """A pending pod of 3 cpu: with 1 cpu of DaemonSet beside it, it needs an m5.2xlarge."""
    return manifest(name, cpu="3", spec=spec)


def launched(plan: Plan) -> list[tuple[str, list[str]]]:
    """Each new node as (its cheapest instance type, its pods)."""
    return [(n.instance_type.name, [p.name for p in n.pods]) for n in plan.new_nodes]


def plan(pending: list[dict[str, Any]], daemonsets: list[dict[str, Any]] = (), prov: Any = None,
         node_labels_setting: dict[str, str] | None = None) -> Plan:
    return plan_of(pending, [prov or provisioner(requirements=AMD64_OD)], TYPES, daemonsets=list(daemonsets),
                   node_labels=node_labels_setting)


# ----------------------------------------------------------------------------- DaemonSet overhead
def test_a_daemonset_requiring_the_hostname_runs_on_every_new_node():
    # every node carries kubernetes.io/hostname (its name): Exists, and NotIn another name, are met
    assert launched(plan([three_cpu()], [daemonset("agent", (HOSTNAME, "Exists"))])) == [("m5.2xlarge", ["p"])]
    assert launched(plan([three_cpu()], [daemonset("agent", (HOSTNAME, "NotIn", "old-node"))])) == [
        ("m5.2xlarge", ["p"])]
    # a DaemonSet pinned to one node by name runs on no new node
    assert launched(plan([three_cpu()], [daemonset("agent", (HOSTNAME, "In", "old-node"))])) == [("m5.xlarge", ["p"])]


def test_a_daemonset_requiring_a_label_from_the_settings_runs_on_every_new_node():
    agent = daemonset("agent", node_selector={"team": "a"})
    assert launched(plan([three_cpu()], [agent], node_labels_setting={"team": "a"})) == [("m5.2xlarge", ["p"])]
    assert launched(plan([three_cpu()], [agent], node_labels_setting={"team": "b"})) == [("m5.xlarge", ["p"])]
    assert launched(plan([three_cpu()], [agent])) == [("m5.xlarge", ["p"])]


def test_a_daemonset_requiring_an_absent_zone_or_a_label_no_node_carries_is_not_counted():
    # every new node has a zone: DoesNotExist is never met
    assert launched(plan([three_cpu()], [daemonset("agent", (ZONE, "DoesNotExist"))])) == [("m5.xlarge", ["p"])]
    # Exists AND NotIn needs the label; the Provisioner's nodes never carry it
    assert launched(plan([three_cpu()], [daemonset("agent", (GPU, "Exists"), (GPU, "NotIn", "k80"))])) == [
        ("m5.xlarge", ["p"])]
    # NotIn alone is met by the absent label
    assert launched(plan([three_cpu()], [daemonset("agent", (GPU, "NotIn", "k80"))])) == [("m5.2xlarge", ["p"])]


def test_a_daemonset_on_one_instance_type_counts_on_that_type_only():
    agent = daemonset("agent", ("node.kubernetes.io/instance-type", "In", "m5.xlarge"))
    # on an m5.xlarge it leaves 2820m: the pod of 3 cpu needs the m5.2xlarge, where it does not run
    [node] = plan([three_cpu()], [agent]).new_nodes
    assert [t.name for t in node.instance_type_options] == ["m5.2xlarge"]
    [node] = plan([manifest("small", cpu="2")], [agent]).new_nodes
    assert [t.name for t in node.instance_type_options] == ["m5.xlarge", "m5.2xlarge"]


# ----------------------------------------------------------------------------- the settings' labels
def test_a_pod_selecting_a_label_from_the_settings_gets_a_node_that_carries_it():
    selecting = three_cpu(nodeSelector={"team": "a"})
    result = plan([selecting], node_labels_setting={"team": "a"})
    assert [(n.labels["team"], [p.name for p in n.pods]) for n in result.new_nodes] == [("a", ["p"])]
    refused = plan([selecting], node_labels_setting={"team": "b"})
    assert refused.new_nodes == ()
    assert refused.unschedulable[0].reason == (
        "provisioner default: incompatible requirements, key team, team In [a] not in team In [b]")


def test_the_provisioner_decides_the_keys_it_names():
    # the Provisioner requires team In [b]: the setting's team=a is not put on its nodes
    teams = provisioner(requirements=AMD64_OD + (("team", "In", ("b",)),))
    assert plan([three_cpu(nodeSelector={"team": "a"})], prov=teams, node_labels_setting={"team": "a"}).new_nodes == ()
    result = plan([three_cpu(nodeSelector={"team": "b"})], prov=teams, node_labels_setting={"team": "a", "env": "prod"})
    [planned] = result.new_nodes
    assert (planned.labels["team"], planned.labels["env"]) == ("b", "prod")
    # the Node the controller writes carries the same labels
    machine = Machine(provider_id="aws:///ap-south-1a/i-1", instance_id="i-1", name="ip-10-0-0-1",
                      instance_type="m5.xlarge", zone="ap-south-1a", capacity_type="on-demand")
    written = node_labels(teams, machine, M5_XLARGE, planned.labels, {"team": "a", "env": "prod"})
    assert (written["team"], written["env"], written[HOSTNAME]) == ("b", "prod", "ip-10-0-0-1")
    # a key the Provisioner leaves open (Exists) is not the setting's either
    open_team = provisioner(requirements=AMD64_OD + (("team", "Exists", ()),))
    assert "team" not in node_labels(open_team, machine, M5_XLARGE, {}, {"team": "a"})
