import copy
import json

import pytest

from provisioner.cloudprovider.types import LaunchError
from provisioner.controllers.provisioning import ReplacementError
from provisioner.controllers.provisioning.nominations import patch_nominations
from provisioner.kube.api import ApiError
from provisioner.model import labels as wk
from provisioner.settings import ProvisioningSettings

from .harness import Cluster, catalog, walkthrough


def flexible_template(cpu="1"):
    """The inflate template without the nodeSelector: any type, zone and capacity type."""
    tpl = copy.deepcopy(walkthrough("02-inflate-deployment.yaml")["spec"]["template"])
    tpl["spec"].pop("nodeSelector")
    tpl["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return tpl


def provisioner_with(limits_cpu=None, capacity_types=("on-demand",)):
    prov = walkthrough("01-provisioner.yaml")
    prov["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    if limits_cpu is None:
        prov["spec"].pop("limits", None)
    else:
        prov["spec"]["limits"] = {"resources": {"cpu": limits_cpu}}
    return prov


def test_insufficient_capacity_falls_back_to_the_next_offering():
    cluster = Cluster(provisioner=provisioner_with())
    # the cheapest offering (m5.large, 1a, on-demand) has no capacity
    cluster.cloud.insufficient_capacity.add(("m5.large", "ap-south-1a", "on-demand"))
    cluster.pending_pod(template=flexible_template("1"))
    result = cluster.controller.reconcile()
    assert len(result.nodes) == 1
    machine = cluster.cloud.launches[0]
    assert (machine.instance_type, machine.capacity_type) == ("m5.large", "on-demand")
    assert machine.zone != "ap-south-1a"
    assert cluster.api.events(reason="InsufficientCapacity") == []  # the provider found another offering


def test_insufficient_capacity_of_every_allowed_offering_resolves_with_the_rest():
    cluster = Cluster(provisioner=provisioner_with(capacity_types=("spot", "on-demand")))
    # spot is preferred, but no spot offering has capacity anywhere: the launch fails with ICE
    for it in catalog():
        for zone in ("ap-south-1a", "ap-south-1b", "ap-south-1c"):
            cluster.cloud.insufficient_capacity.add((it.name, zone, "spot"))
    cluster.pending_pod(template=flexible_template("1500m"))
    result = cluster.controller.reconcile()
    assert len(cluster.cloud.create_calls) == 2
    assert len(result.nodes) == 1, result
    machine = cluster.cloud.launches[0]
    assert (machine.instance_type, machine.capacity_type) == ("m5.large", "on-demand")
    # the retried request did not reuse the failed request's idempotency token
    ids = [r.id for r in cluster.cloud.create_calls]
    assert len(ids) == len(set(ids))
    (ice,) = cluster.api.events(reason="InsufficientCapacity")
    assert ice["involvedObject"]["kind"] == "Provisioner"


def test_limits_hold():
    # cpu limit 5: one m5.xlarge (4 cores) fits the limit, a second node would not
    cluster = Cluster(provisioner=provisioner_with(limits_cpu=5))
    for _ in range(6):
        cluster.pending_pod(template=flexible_template("1"))
    result = cluster.controller.reconcile()
    launched_cpu = sum(
        next(t for t in catalog() if t.name == m.instance_type).capacity["cpu"]
        for m in cluster.cloud.launches
    )
    # one m5.xlarge (3 pods of 1 core on 3920m allocatable); an m5.large (2 cores) would overshoot
    assert [m.instance_type for m in cluster.cloud.launches] == ["m5.xlarge"]
    assert launched_cpu == 4000
    assert len(result.nodes) == 1
    assert len(result.unschedulable) == 3
    assert all("exceed limits" in reason for reason in result.unschedulable.values())
    # a later round does not launch beyond the limit either
    cluster.pending_pod(template=flexible_template("1"))
    cluster.controller.reconcile()
    launched_cpu = sum(
        next(t for t in catalog() if t.name == m.instance_type).capacity["cpu"]
        for m in cluster.cloud.launches
    )
    assert launched_cpu <= 5000


def add_tainted_node(cluster, cpu):
    """A Ready node of the Provisioner that no test pod tolerates: it only counts against limits."""
    cluster.api.create(
        "Node",
        {
            "metadata": {"name": "existing", "labels": {wk.PROVISIONER_NAME: "default"}},
            "spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )


def test_usage_at_limit_blocks_launch_with_an_event():
    cluster = Cluster(provisioner=provisioner_with(limits_cpu=2))
    add_tainted_node(cluster, cpu="2")
    pod = cluster.pending_pod(template=flexible_template("1"))
    result = cluster.controller.reconcile()
    assert cluster.cloud.create_calls == []
    assert result.nodes == ()
    assert list(result.unschedulable) == [f"default/{pod['metadata']['name']}"]
    (event,) = cluster.api.events(reason="FailedProvisioning")
    assert "exceed limits" in event["message"]


def test_launch_is_checked_against_limits_even_when_the_plan_is_not():
    """The pre-launch check catches a plan made with stale usage (a solver that ignored it here)."""
    from dataclasses import replace

    from provisioner.scheduling.solver import solve

    cluster = Cluster(provisioner=provisioner_with(limits_cpu=2))
    cluster.controller.provisioner.solver = lambda given: solve(replace(given, provisioner_usage={}))
    add_tainted_node(cluster, cpu="2")
    pod = cluster.pending_pod(template=flexible_template("1"))
    result = cluster.controller.reconcile()
    assert cluster.cloud.create_calls == []
    message = "Could not launch node, cpu resource usage of 2 exceeds limit of 2"
    assert result.failed == {f"default/{pod['metadata']['name']}": message}
    (event,) = cluster.api.events(reason="LimitExceeded")
    assert event["involvedObject"]["kind"] == "Provisioner" and event["message"] == message


def test_options_that_would_overshoot_the_limit_are_dropped():
    from dataclasses import replace

    from provisioner.scheduling.solver import solve

    cluster = Cluster(provisioner=provisioner_with(limits_cpu=3))
    cluster.controller.provisioner.solver = lambda given: solve(replace(given, provisioner_usage={}))
    cluster.pending_pod(template=flexible_template("1"))
    cluster.controller.reconcile()
    (request,) = cluster.cloud.create_calls
    assert request.instance_type_options
    assert all(t.capacity["cpu"] <= 3000 for t in request.instance_type_options)


def test_launch_errors_back_off_per_provisioner():
    cluster = Cluster(provisioner=provisioner_with())
    cluster.cloud.next_error = LaunchError("RequestLimitExceeded: throttled")
    cluster.pending_pod(template=flexible_template("1"))
    result = cluster.controller.reconcile()
    assert result.nodes == ()
    (event,) = cluster.api.events(reason="LaunchFailed")
    assert event["type"] == "Warning"
    assert "throttled" in event["message"] and "retrying in 5s" in event["message"]
    # during the back-off nothing is launched
    cluster.controller.reconcile()
    assert len(cluster.cloud.create_calls) == 1
    cluster.clock.advance(5)
    result = cluster.controller.reconcile()
    assert len(result.nodes) == 1 and len(cluster.cloud.create_calls) == 2


def test_backoff_grows_exponentially_and_is_capped():
    settings = ProvisioningSettings(backoff_base_seconds=5, backoff_max_seconds=12)
    cluster = Cluster(provisioner=provisioner_with(), settings=settings)
    cluster.pending_pod(template=flexible_template("1"))
    delays = []
    for _ in range(3):
        cluster.cloud.next_error = LaunchError("boom")
        cluster.controller.reconcile()
        delays.append(cluster.controller.launcher.backoff.remaining("default"))
        cluster.clock.advance(delays[-1])
    assert delays == [5, 10, 12]


def test_node_refused_for_good_terminates_the_instance():
    cluster = Cluster(provisioner=provisioner_with())
    cluster.api.fail_next[("create", "Node")] = [ApiError(422, "Invalid", "metadata.labels: Invalid value")]
    cluster.pending_pod(template=flexible_template("1"))
    result = cluster.controller.reconcile()
    assert result.nodes == ()
    assert cluster.cloud.delete_calls == [cluster.cloud.launches[0].provider_id]
    assert cluster.cloud.machines == []
    assert cluster.api.events(reason="LaunchFailed")


def test_node_write_failing_transiently_keeps_the_instance_for_adoption():
    cluster = Cluster(provisioner=provisioner_with())
    cluster.api.fail_next[("create", "Node")] = [ApiError(500, "InternalError", "etcd timeout")]
    pod = cluster.pending_pod(template=flexible_template("1"))
    result = cluster.controller.reconcile()
    assert result.nodes == ()
    (machine,) = cluster.cloud.machines
    assert cluster.cloud.delete_calls == []
    assert cluster.api.events(reason="LaunchFailed")
    # the next round adopts the instance (its tags are the launch record) and launches nothing new
    cluster.clock.advance(cluster.controller.launcher.backoff.remaining("default"))
    result = cluster.controller.reconcile()
    (node,) = cluster.nodes()
    assert node["spec"]["providerID"] == machine.provider_id
    # its age counts from the launch, a round earlier than the Node
    assert node["metadata"]["annotations"][wk.LAUNCHED_AT_ANNOTATION] == machine.launch_time
    # the pending pod it was launched for is nominated to it
    assert result.nominated_existing == {node["metadata"]["name"]: (pod["metadata"]["uid"],)}
    nominations = json.loads(node["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION])
    assert list(nominations["pods"]) == [pod["metadata"]["uid"]]
    assert len(cluster.cloud.create_calls) == 1
    assert cluster.cloud.delete_calls == []
    (adopted,) = cluster.api.events(reason="Adopted")
    assert adopted["involvedObject"]["name"] == node["metadata"]["name"]


def test_pod_no_provisioner_can_serve_gets_a_warning():
    cluster = Cluster(provisioner=provisioner_with())
    tpl = flexible_template("1")
    tpl["spec"]["nodeSelector"] = {wk.ARCH: "arm64"}  # the Provisioner only allows amd64
    pod = cluster.pending_pod(template=tpl)
    result = cluster.controller.reconcile()
    assert result.nodes == ()
    (event,) = cluster.api.events(reason="FailedProvisioning")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert "arm64" in event["message"] or "kubernetes.io/arch" in event["message"]


def test_nothing_launched_twice_for_one_pod_before_the_cache_sees_the_node():
    cluster = Cluster(provisioner=provisioner_with())
    # the cache stops following the API: the created Node is unknown to it
    cluster.api._subscribers.clear()
    cluster.state.resync()
    cluster.pending_pod(template=flexible_template("1"))
    cluster.state.resync()
    cluster.controller.reconcile()
    cluster.controller.reconcile()
    assert len(cluster.cloud.create_calls) == 1


def test_odd_pods_do_not_stop_the_round():
    cluster = Cluster(provisioner=provisioner_with())
    tpl = flexible_template("1")
    tpl["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    cluster.pending_pod(template=tpl, name="bad")
    cluster.pending_pod(template=flexible_template("1"), name="good")
    result = cluster.controller.reconcile()
    assert len(result.nodes) == 1
    assert "default/bad" in result.unschedulable
    nominations = json.loads(cluster.nodes()[0]["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION])
    assert [v["pod"] for v in nominations["pods"].values()] == ["default/good"]


def test_provision_for_replacement_excludes_the_node():
    cluster = Cluster(provisioner=provisioner_with(), through_process=True)
    cluster.pending_pod(template=flexible_template("1"))
    cluster.controller.reconcile()
    (old,) = cluster.nodes()
    old_name = old["metadata"]["name"]
    cluster.api.set_node_ready(old_name)
    (pod,) = [p for p in cluster.api.list("Pod")[0]]
    bound = cluster.api.bind(pod["metadata"]["name"], "default", old_name)
    (replacement,) = cluster.replacer([bound], old_name)
    assert replacement != old_name and len(cluster.cloud.create_calls) == 2
    assert cluster.cloud.launches[-1].name == replacement
    new = cluster.api.get("Node", replacement)
    # replacement capacity carries no nomination for a pod bound elsewhere
    assert wk.NOMINATIONS_ANNOTATION not in new["metadata"]["annotations"]
    # asked again, the replacement node (in flight, empty, its room promised to these very pods)
    # takes the pod: nothing launched
    assert cluster.replacer([bound], old_name) == [replacement]
    assert len(cluster.cloud.create_calls) == 2


def test_replacer_raises_when_pods_cannot_be_placed():
    cluster = Cluster(provisioner=provisioner_with(limits_cpu=2), through_process=True)
    cluster.pending_pod(template=flexible_template("1"))
    cluster.controller.reconcile()
    (old,) = cluster.nodes()
    name = old["metadata"]["name"]
    (pod,) = cluster.api.list("Pod")[0]
    bound = cluster.api.bind(pod["metadata"]["name"], "default", name)
    with pytest.raises(ReplacementError) as err:
        cluster.replacer([bound], name)
    assert "default/" in str(err.value) and "limit" in str(err.value)


def test_nomination_writes_do_not_overwrite_a_concurrent_change():
    cluster = Cluster(provisioner=provisioner_with())
    cluster.pending_pod(template=flexible_template("1"))
    cluster.controller.reconcile()
    (node,) = cluster.nodes()
    name = node["metadata"]["name"]
    stale = node["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION]
    moved = json.loads(stale)
    moved["deadline"] = "2030-01-01T00:00:00Z"  # the initialization controller moved the deadline
    moved_raw = json.dumps(moved)
    cluster.api.patch("Node", name, {"metadata": {"annotations": {wk.NOMINATIONS_ANNOTATION: moved_raw}}})
    assert patch_nominations(cluster.api, name, stale, None) is None
    assert cluster.api.get("Node", name)["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION] == moved_raw
    assert patch_nominations(cluster.api, name, moved_raw, None) is not None
    assert wk.NOMINATIONS_ANNOTATION not in cluster.api.get("Node", name)["metadata"]["annotations"]


def test_replacer_leaves_daemonset_pods_alone():
    cluster = Cluster(provisioner=provisioner_with(), through_process=True)
    ds_pod = cluster.pending_pod(template=flexible_template("1"))
    ds_pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x", "uid": "d", "controller": True}
    ]
    assert cluster.replacer([ds_pod], "some-node") == [] and cluster.cloud.create_calls == []
