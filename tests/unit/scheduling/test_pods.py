import pytest

from provisioner.api.types import Taint
from provisioner.model.pods import is_daemonset_pod, is_static_pod, is_terminal
from provisioner.model.resources import MIB
from provisioner.scheduling.daemonsets import daemonset_pod
from provisioner.scheduling.pods import Toleration, node_affinity_score, pod_from_manifest, pod_requests, tolerates_all
from tests.builders.pods import manifest


def c(cpu, mem=None, **extra):
    req = {"cpu": cpu}
    if mem:
        req["memory"] = mem
    return {"name": "x", "resources": {"requests": req}, **extra}


def test_requests_sum_containers_max_init_and_add_overhead_and_a_pod_slot():
    obj = {"spec": {
        "containers": [c("100m", "64Mi"), c("200m", "64Mi")],
        "initContainers": [c("2", "32Mi"), c("500m", "1Gi")],
        "overhead": {"cpu": "50m"},
    }}
    assert pod_requests(obj) == {"cpu": 2050, "memory": 1024 * MIB, "pods": 1}


def test_sidecars_add_to_the_app_and_to_later_init_containers():
    sidecar = c("300m", restartPolicy="Always")
    obj = {"spec": {"containers": [c("100m")], "initContainers": [sidecar, c("1")]}}
    # app: 100m + sidecar 300m = 400m; init after the sidecar: 1000m + 300m = 1300m
    assert pod_requests(obj)["cpu"] == 1300


def test_limits_only_count_as_requests():
    obj = {"spec": {"containers": [{"name": "x", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": 1}}}]}}
    assert pod_requests(obj) == {"cpu": 1000, "nvidia.com/gpu": 1, "pods": 1}


@pytest.mark.parametrize(("spec", "field"), [
    ({"containers": [{"name": "x", "resources": {"requests": {"cpu": "lots"}}}]}, "spec.containers[0].resources.requests.cpu"),
    ({"topologySpreadConstraints": [{"maxSkew": 1}]}, "spec.topologySpreadConstraints[0].topologyKey"),
    ({"tolerations": "all"}, "spec.tolerations"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k", "nodeTaintsPolicy": "Sometimes"}]},
     "spec.topologySpreadConstraints[0].nodeTaintsPolicy"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k", "minDomains": 0}]},
     "spec.topologySpreadConstraints[0].minDomains"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k", "minDomains": 2,
                                     "whenUnsatisfiable": "ScheduleAnyway"}]},
     "spec.topologySpreadConstraints[0].minDomains"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["1"]}]}]}}}},
     "nodeSelectorTerms[0].matchExpressions"),
])
def test_malformed_pods_name_the_field(spec, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        pod_from_manifest({"metadata": {"name": "p"}, "spec": spec})


def test_affinity_terms_and_spread_are_read():
    obj = manifest("p", labels={"app": "web", "rev": "1"}, spec={
        "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "ScheduleAnyway", "matchLabelKeys": ["rev"],
                                       "labelSelector": {"matchLabels": {"app": "web"}}}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                               "labelSelector": {"matchLabels": {"app": "web"}}}},
            {"weight": 50, "podAffinityTerm": {"topologyKey": "failure-domain.beta.kubernetes.io/zone",
                                                "labelSelector": {"matchLabels": {"app": "web"}}}}]}},
    })
    pod = pod_from_manifest(obj)
    assert pod.topology_spread[0].selector.match_labels == (("app", "web"), ("rev", "1"))
    assert not pod.topology_spread[0].hard
    assert [(t.weight, t.topology_key) for t in pod.preferred_pod_anti_affinity] == [
        (50, "topology.kubernetes.io/zone"), (5, "kubernetes.io/hostname")]


def test_preferred_node_affinity_is_read_as_kube_scheduler_reads_it():
    def term(weight, *zones, fields=None):
        preference = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                            "values": list(zones)}]} if zones else {}
        if fields:
            preference["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": fields}]
        return {"weight": weight, "preference": preference}

    pod = pod_from_manifest(manifest("p", spec={"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            term(10, "a"), term(0, "b"), term(40), term(30, "c"), term(10, "d"), term(20, fields=["node-1"])]}}}))
    # weight 0 and empty terms count for nothing; heaviest first, equal weights in spec order
    assert [(w, str(r)) for w, r in pod.preferred_node_affinity] == [
        (30, "topology.kubernetes.io/zone In [c]"), (20, "kubernetes.io/hostname In [node-1]"),
        (10, "topology.kubernetes.io/zone In [a]"), (10, "topology.kubernetes.io/zone In [d]")]
    assert node_affinity_score(pod.preferred_node_affinity, {"topology.kubernetes.io/zone": "c"}) == 30
    assert node_affinity_score(pod.preferred_node_affinity, {"kubernetes.io/hostname": "node-1",
                                                             "topology.kubernetes.io/zone": "a"}) == 30
    assert node_affinity_score(pod.preferred_node_affinity, {}) == 0


def test_tolerations():
    taints = [Taint("dedicated", "NoSchedule", "gpu"), Taint("soft", "PreferNoSchedule")]
    assert tolerates_all([Toleration(operator="Exists")], taints, True) is None
    assert tolerates_all([], taints) == "did not tolerate taint dedicated=gpu:NoSchedule"
    only = [Toleration("dedicated", "Equal", "gpu", "NoSchedule")]
    assert tolerates_all(only, taints) is None
    assert tolerates_all(only, taints, prefer_no_schedule=True) == "did not tolerate taint soft:PreferNoSchedule"


def test_owner_and_phase_helpers():
    ds_owned = {"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": "x"}]}}
    mirror = {"metadata": {"annotations": {"kubernetes.io/config.mirror": "abc"}}}
    assert is_daemonset_pod(ds_owned) and not is_daemonset_pod(mirror)
    assert is_static_pod(mirror) and not is_static_pod(ds_owned)
    assert is_terminal({"status": {"phase": "Succeeded"}}) and not is_terminal({"status": {"phase": "Running"}})


def test_daemonset_pod_gets_identity_and_default_tolerations():
    ds = {"metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-1"},
          "spec": {"template": {"metadata": {"labels": {"app": "agent"}},
                                "spec": {"containers": [c("100m", "128Mi")]}}}}
    pod = daemonset_pod(ds)
    assert (pod.uid, pod.namespace, pod.owner_kind) == ("ds-1", "kube-system", "DaemonSet")
    assert pod.requests == {"cpu": 100, "memory": 128 * MIB, "pods": 1}
    assert tolerates_all(pod.tolerations, [Taint("node.kubernetes.io/unschedulable", "NoSchedule")]) is None




def test_spread_policies_and_min_domains_are_read_with_kube_scheduler_defaults():
    spread = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
    defaults = pod_from_manifest(manifest("p", spec={"topologySpreadConstraints": [spread]})).topology_spread[0]
    assert (defaults.min_domains, defaults.node_affinity_policy, defaults.node_taints_policy) == (1, "Honor", "Ignore")
    given = {**spread, "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}
    read = pod_from_manifest(manifest("p", spec={"topologySpreadConstraints": [given]})).topology_spread[0]
    assert (read.min_domains, read.node_affinity_policy, read.node_taints_policy) == (3, "Ignore", "Honor")


def test_a_term_without_label_selector_selects_no_pod():
    # metav1.LabelSelectorAsSelector: nil selects nothing, an empty selector everything
    term = {"topologyKey": "kubernetes.io/hostname"}
    obj = manifest("p", labels={"app": "web", "rev": "7"}, spec={
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname"},
                                      {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "labelSelector": {}},
                                      {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                       "matchLabelKeys": ["rev", "absent"]}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})
    read = pod_from_manifest(obj)
    nil, empty, by_keys = (c.selector for c in read.topology_spread)
    assert not nil.matches({"app": "web"}) and not nil.matches({})
    assert empty.matches({}) and empty.matches({"app": "web"})
    # matchLabelKeys alone: the pod's values of the keys it has
    assert by_keys.matches({"rev": "7"}) and not by_keys.matches({"rev": "8"}) and not by_keys.matches({})
    assert not read.pod_anti_affinity[0].selects("default", {"app": "web"})
