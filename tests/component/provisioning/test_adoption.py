"""Adoption: an instance launched without a Node gets its Node from its tags, or is terminated at once.

A controller killed between CreateFleet and the Node's creation is played by a ``Crash`` (a
BaseException nothing in the controller catches) raised by the API on the Node's create; the
restarted controller is a new :class:`ControllerProcess` over the same API, cloud and clock, as
``groupless controller`` builds it. "Within one round" is one ``reconcile()`` of the new process.
"""

import copy
import json
import logging
import threading

import pytest

from provisioner.app.controller import ControllerProcess
from provisioner.cloudprovider.fake import FakeCloudProvider
from provisioner.cloudprovider.types import LaunchError, Machine
from provisioner.controllers.provisioning.adoption import Outcome
from provisioner.kube.api import ApiError
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model import labels as wk
from provisioner.settings import from_mapping
from tests.builders.expectations import eventually
from tests.builders.pods import unschedulable_status

from .harness import Cluster, walkthrough

FLAGS = {"cloud_provider": "fake", "node_annotations": "kwok.x-k8s.io/node=fake"}
STARTUP_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}


class Crash(BaseException):
    """The controller process dies here (nothing in it catches a BaseException)."""


def provisioner():
    """The walkthrough's Provisioner with labels, a taint, a startup taint and a ``workload`` requirement."""
    prov = walkthrough("01-provisioner.yaml")
    prov["spec"]["labels"] = {"team": "checkout"}
    prov["spec"]["taints"] = [{"key": "dedicated", "value": "checkout", "effect": "NoSchedule"}]
    prov["spec"]["startupTaints"] = [STARTUP_TAINT]
    prov["spec"]["requirements"].append({"key": "workload", "operator": "In", "values": ["web", "batch"]})
    return prov


def template(workload="web", cpu="1"):
    """The walkthrough's pod (r6gd.xlarge, on-demand, ap-south-1a, arm64), tolerating the taint, for one workload."""
    tpl = copy.deepcopy(walkthrough("02-inflate-deployment.yaml")["spec"]["template"])
    tpl["spec"]["nodeSelector"]["workload"] = workload
    tpl["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "checkout", "effect": "NoSchedule"}]
    tpl["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return tpl


def crash_mid_launch(cluster):
    """One round whose process dies after CreateFleet, before the Node is written."""
    cluster.api.fail_next[("create", "Node")] = [Crash()]
    with pytest.raises(Crash):
        cluster.controller.reconcile()
    [machine] = cluster.cloud.machines
    assert cluster.nodes() == []
    return machine


def restart(cluster):
    """A new controller process over the same API server, cloud and clock; its cache synced."""
    cluster.stop_following()
    process = ControllerProcess(from_mapping(FLAGS), cluster.api, cluster.cloud, cluster.clock)
    process.state.resync()
    cluster.stop_following = cluster.api.subscribe(process.state.handle)
    process.provisioning.watch_state()
    cluster.process, cluster.state, cluster.controller = process, process.state, process.provisioning
    return process


def events(cluster, reason):
    """The Events of ``reason``, once the process's asynchronous recorder has written them."""
    cluster.controller.adoption.recorder.flush()
    return cluster.api.events(reason=reason)


def nominated(node):
    raw = node["metadata"].get("annotations", {}).get(wk.NOMINATIONS_ANNOTATION)
    return sorted(json.loads(raw)["pods"]) if raw else []


def uids(pods):
    return sorted(p["metadata"]["uid"] for p in pods)


def without_nominations(node):
    """What a Node says about its instance: labels, annotations, taints, capacity, owner, finalizers.

    Nominations and the node request (both derive from the pods' UIDs, which differ between twins) aside.
    """
    meta = node["metadata"]
    per_launch = {wk.NOMINATIONS_ANNOTATION, wk.NODE_REQUEST_TAG}
    annotations = {k: v for k, v in meta.get("annotations", {}).items() if k not in per_launch}
    owners = [{k: v for k, v in o.items() if k != "uid"} for o in meta.get("ownerReferences", [])]
    return (meta["name"], meta["labels"], annotations, owners, meta["finalizers"], node["spec"], node["status"])


def test_a_launch_cut_off_before_its_node_is_adopted_and_its_pods_use_it():
    cluster = Cluster(provisioner=provisioner(), through_process=True)
    pods = [cluster.pending_pod(template=template()) for _ in range(3)]
    machine = crash_mid_launch(cluster)
    assert machine.record is not None and machine.record.labels["workload"] == "web"

    restart(cluster)
    result = cluster.controller.reconcile()

    [node] = cluster.nodes()
    assert node["spec"]["providerID"] == machine.provider_id
    assert result.nodes == () and len(cluster.cloud.create_calls) == 1  # nothing launched again
    assert sorted(result.nominated_existing[machine.name]) == uids(pods)
    assert nominated(node) == uids(pods)
    # the Node is the one the launcher would have written (a twin cluster that did not crash)
    twin = Cluster(provisioner=provisioner(), through_process=True)
    for _ in range(3):
        twin.pending_pod(template=template())
    twin.controller.reconcile()
    [expected] = twin.nodes()
    assert without_nominations(node) == without_nominations(expected)
    assert node["metadata"]["annotations"][wk.NODE_REQUEST_TAG] == machine.node_request_id
    labels, taints = node["metadata"]["labels"], node["spec"]["taints"]
    assert labels["workload"] == "web" and labels["team"] == "checkout" and labels[wk.PROVISIONER_NAME] == "default"
    assert STARTUP_TAINT in taints and {"key": wk.NOT_READY_TAINT_KEY, "effect": "NoSchedule"} in taints
    assert node["status"]["allocatable"]["cpu"] == "3820m"
    [event] = events(cluster, "Adopted")
    assert event["involvedObject"]["name"] == machine.name and machine.instance_id in event["message"]


def test_the_workload_changed_meanwhile_the_adopted_node_takes_what_fits_and_only_the_rest_launches():
    cluster = Cluster(provisioner=provisioner(), through_process=True)
    first = [cluster.pending_pod(template=template()) for _ in range(3)]
    machine = crash_mid_launch(cluster)
    for pod in first:  # rescaled while the controller was down: new pods, other UIDs
        cluster.api.delete("Pod", pod["metadata"]["name"], "default")
    web = [cluster.pending_pod(template=template(cpu="1500m")) for _ in range(3)]
    batch = cluster.pending_pod(template=template(workload="batch", cpu="500m"))

    restart(cluster)
    result = cluster.controller.reconcile()

    nodes = {n["metadata"]["name"]: n for n in cluster.nodes()}
    assert set(nodes) == {m.name for m in cluster.cloud.machines}  # every instance has its Node
    adopted = nodes[machine.name]
    # 3820m allocatable: two of the 1.5-core web pods; the batch pod needs workload=batch, not web
    assert len(nominated(adopted)) == 2 and set(nominated(adopted)) < set(uids(web))
    # new launches only for the rest: the third web pod, and the batch pod (a workload=batch node)
    assert sorted(sorted(n.pod_uids) for n in result.launched) == sorted(
        [sorted(set(uids(web)) - set(nominated(adopted))), [batch["metadata"]["uid"]]])
    assert len(cluster.cloud.launches) == 3


def test_an_instance_without_a_provisioner_tag_is_terminated_at_once(caplog):
    cluster = Cluster(provisioner=provisioner(), through_process=True)
    stray = Machine(provider_id="aws:///ap-south-1a/i-0stray", instance_id="i-0stray",
                    name="ip-10-9-9-9.ap-south-1.compute.internal", instance_type="m5.large", zone="ap-south-1a",
                    capacity_type="on-demand")
    cluster.cloud.add_machine(stray)
    restart(cluster)
    with caplog.at_level(logging.WARNING):
        cluster.controller.reconcile()
    assert cluster.cloud.delete_calls == [stray.provider_id]
    assert cluster.nodes() == [] and cluster.cloud.machines == []
    [event] = events(cluster, "OrphanTerminated")
    assert event["type"] == "Warning" and event["involvedObject"] == {
        "kind": "Node", "name": stray.name, "uid": "", "apiVersion": "v1"}
    assert "no karpenter.sh/provisioner-name tag" in event["message"]
    assert any("Terminated instance i-0stray" in r.getMessage() for r in caplog.records)


def test_an_instance_whose_provisioner_was_deleted_is_terminated_at_once():
    cluster, machine, _ = crashed_and_restarted()
    cluster.api.delete("Provisioner", "default")
    result = restart(cluster).provisioning.adopt()
    assert result is not None and result.outcomes == {machine.provider_id: Outcome.TERMINATED}
    assert cluster.cloud.delete_calls == [machine.provider_id] and cluster.nodes() == []
    [event] = events(cluster, "OrphanTerminated")
    assert "its Provisioner default no longer exists" in event["message"]


def test_adoption_is_idempotent_one_node_per_instance():
    cluster, machine, first = crashed_and_restarted()
    # the replica that leads next: its cache synced before the first one's adoption wrote anything
    second = ControllerProcess(from_mapping(FLAGS), cluster.api, cluster.cloud, cluster.clock)
    second.state.resync()
    assert first.provisioning.adopt().outcomes == {machine.provider_id: Outcome.ADOPTED}
    assert first.provisioning.adopt().outcomes == {}  # its cache shows the Node now
    # the second's cache does not: its create finds the Node of the same instance and takes it
    assert second.provisioning.adopt().outcomes == {machine.provider_id: Outcome.ADOPTED}
    assert machine.name in second.provisioning.ledger.written()
    assert [n["metadata"]["name"] for n in cluster.nodes()] == [machine.name]
    assert len(cluster.cloud.launches) == 1 and cluster.cloud.delete_calls == []
    assert len(events(cluster, "Adopted")) == 1


def test_a_launch_whose_answer_was_lost_is_adopted_by_the_next_round_although_the_workload_changed():
    cluster = Cluster(provisioner=provisioner(), through_process=True)
    create = cluster.cloud.create

    def lost_answer(request):
        create(request)  # EC2 launched it; the controller never hears back
        raise LaunchError("creating fleet: Read timeout on endpoint URL")

    cluster.cloud.create = lost_answer
    first = [cluster.pending_pod(template=template()) for _ in range(3)]
    cluster.controller.reconcile()
    [machine] = cluster.cloud.machines
    assert cluster.nodes() == [] and events(cluster, "LaunchFailed")
    cluster.cloud.create = create
    for pod in first:
        cluster.api.delete("Pod", pod["metadata"]["name"], "default")
    second = [cluster.pending_pod(template=template()) for _ in range(2)]
    cluster.clock.advance(1)
    result = cluster.controller.reconcile()
    [node] = cluster.nodes()
    assert node["spec"]["providerID"] == machine.provider_id and nominated(node) == uids(second)
    assert result.nodes == () and len(cluster.cloud.launches) == 1


def test_an_instance_the_launcher_could_not_terminate_is_adopted_by_the_next_round():
    cluster = Cluster(provisioner=provisioner(), through_process=True)
    pods = [cluster.pending_pod(template=template()) for _ in range(2)]
    cluster.api.fail_next[("create", "Node")] = [ApiError(500, "InternalError", "etcd timeout")]
    cluster.cloud.next_delete_error = LaunchError("terminating instance: RequestLimitExceeded")
    cluster.controller.reconcile()
    [machine] = cluster.cloud.machines
    assert cluster.nodes() == []
    cluster.clock.advance(1)
    cluster.controller.reconcile()
    [node] = cluster.nodes()
    assert node["spec"]["providerID"] == machine.provider_id and nominated(node) == uids(pods)
    assert len(cluster.cloud.launches) == 1


def crashed_and_restarted():
    """A cluster whose controller died mid-launch for one pending pod, restarted: (cluster, the instance, the process)."""
    cluster = Cluster(provisioner=provisioner(), through_process=True)
    cluster.pending_pod(template=template())
    machine = crash_mid_launch(cluster)
    return cluster, machine, restart(cluster)


def test_a_node_write_refused_for_a_while_is_retried_next_round():
    cluster, machine, process = crashed_and_restarted()
    cluster.api.fail_next[("create", "Node")] = [ApiError(503, "ServiceUnavailable", "connection refused")]
    assert process.provisioning.adopt().outcomes == {machine.provider_id: Outcome.RETRY}
    assert process.provisioning.adoption.due and cluster.cloud.machines == [machine]
    assert process.provisioning.adopt().outcomes == {machine.provider_id: Outcome.ADOPTED}
    assert not process.provisioning.adoption.due


def test_a_node_write_refused_for_good_terminates_the_instance():
    cluster, machine, process = crashed_and_restarted()
    cluster.api.fail_next[("create", "Node")] = [ApiError(422, "Invalid", "metadata.labels: Invalid value")]
    assert process.provisioning.adopt().outcomes == {machine.provider_id: Outcome.TERMINATED}
    assert cluster.cloud.machines == [] and cluster.nodes() == []
    [event] = events(cluster, "OrphanTerminated")
    assert "the API refused its node" in event["message"] and "422 Invalid" in event["message"]


def test_the_controller_process_adopts_before_its_first_round():
    """``groupless controller`` wiring with real threads: the orphan takes the pending pod, nothing else launches."""
    kube = FakeKubeAPI()
    cloud = FakeCloudProvider()
    seed = Cluster(provisioner=provisioner(), through_process=True)  # launch the orphan the way a round does
    seed.pending_pod(template=template())
    orphan = crash_mid_launch(seed)
    cloud.add_machine(orphan)
    kube.create("Provisioner", provisioner())
    pod = kube.create("Pod", {"metadata": {"name": "web", "namespace": "default"},
                              "spec": template()["spec"], "status": unschedulable_status()})
    settings = from_mapping({**FLAGS, "listen_address": "127.0.0.1:0", "leader_elect": "false",
                             "batch_idle_duration": "0.05", "batch_max_duration": "0.2"})
    process = ControllerProcess(settings, kube, cloud, identity="replica-1")
    runner = threading.Thread(target=process.run, daemon=True)
    runner.start()
    try:
        def adopted_and_nominated():
            nodes = kube.list("Node")[0]
            return len(nodes) == 1 and nominated(nodes[0]) == [pod["metadata"]["uid"]]

        assert eventually(adopted_and_nominated, 10)
        [node] = kube.list("Node")[0]
        assert node["metadata"]["name"] == orphan.name and node["metadata"]["labels"]["workload"] == "web"
        assert cloud.launches == [] and cloud.create_calls == []
    finally:
        process.stop.set()
        kube.close()
        runner.join(10)
