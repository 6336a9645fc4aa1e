"""``groupless controller`` wiring end to end in one process: real threads, fake API and cloud."""

from __future__ import annotations

import json
import threading
import urllib.request

from provisioner.app.controller import ControllerProcess
from provisioner.cloudprovider.fake import FakeCloudProvider
from provisioner.cloudprovider.types import Machine
from provisioner.controllers.leaderelection import lease_holder
from provisioner.kube.api import NotFoundError
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model.labels import PROVISIONER_NAME, TERMINATION_FINALIZER
from provisioner.settings import from_mapping
from tests.builders.expectations import eventually
from tests.builders.pods import unschedulable_status


def test_controller_process_leads_serves_probes_and_terminates_nodes() -> None:
    kube = FakeKubeAPI()
    cloud = FakeCloudProvider()
    kube.create("Provisioner", {"metadata": {"name": "default"}, "spec": {}})
    cloud.add_machine(Machine(provider_id="aws:///z/i-1", instance_id="i-1", name="n1", instance_type="m5.large",
                              zone="z", capacity_type="on-demand"))
    kube.create("Node", {"metadata": {"name": "n1", "labels": {PROVISIONER_NAME: "default"},
                                      "finalizers": [TERMINATION_FINALIZER]},
                         "spec": {"providerID": "aws:///z/i-1"}, "status": {"capacity": {"cpu": "2"}}})
    settings = from_mapping({"cloud_provider": "fake", "listen_address": "127.0.0.1:0", "lease_namespace": "default",
                             "lease_duration": "3", "renew_deadline": "2", "retry_period": "0.2",
                             "resync_period": "1", "batch_idle_duration": "0.05", "batch_max_duration": "0.2",
                             "extender_address": "127.0.0.1:0"})
    process = ControllerProcess(settings, kube, cloud, identity="replica-1")
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(process.run()), daemon=True)
    runner.start()
    try:
        assert eventually(lambda: process.leading.is_set() and process.state.synced() and process.health_server is not None)
        port = process.health_server.server_address[1]
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read() == b"ok\n"
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status == 200
        assert b"groupless_evictions_total" in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read()
        assert lease_holder(kube.get("Lease", "groupless-controller", "default")) == "replica-1"
        # the scheduler extender, served from the same cache
        extender = process.extender_server.server_address[1]
        assert eventually(lambda: urllib.request.urlopen(f"http://127.0.0.1:{extender}/healthz").status == 200)
        request = urllib.request.Request(
            f"http://127.0.0.1:{extender}/filter", method="POST", headers={"Content-Type": "application/json"},
            data=json.dumps({"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
                                     "spec": {"containers": [{"name": "c"}]}},
                             "NodeNames": ["n1"]}).encode())
        answer = json.loads(urllib.request.urlopen(request).read())
        assert answer.get("Error", "") == "" and "NodeNames" in answer
        assert eventually(lambda: kube.get("Provisioner", "default").get("status", {}).get("resources") == {"cpu": "2"})
        kube.delete("Node", "n1")

        def gone() -> bool:
            try:
                kube.get("Node", "n1")
            except NotFoundError:
                return True
            return False

        assert eventually(gone)
        assert cloud.delete_calls == ["aws:///z/i-1"]
        # the provisioning controller runs in the same process: a pending pod gets a node
        assert process.provisioning is not None
        kube.create("Pod", {"metadata": {"name": "web", "namespace": "default"},
                            "spec": {"containers": [{"name": "c", "image": "pause",
                                                     "resources": {"requests": {"cpu": "1"}}}]},
                            "status": unschedulable_status()})
        assert eventually(lambda: len(kube.list("Node")[0]) == 1)
        assert len(cloud.launches) == 1
    finally:
        process.stop.set()
        kube.close()
        runner.join(10)
    assert result == [0]
    assert lease_holder(kube.get("Lease", "groupless-controller", "default")) == ""


def test_worker_threads_drain_nodes_concurrently_within_the_pdb() -> None:
    kube = FakeKubeAPI()
    cloud = FakeCloudProvider()
    kube.create("Provisioner", {"metadata": {"name": "default"}, "spec": {}})
    for n in range(6):
        cloud.add_machine(Machine(provider_id=f"aws:///z/i-{n}", instance_id=f"i-{n}", name=f"n{n}",
                                  instance_type="m5.large", zone="z", capacity_type="on-demand"))
        kube.create("Node", {"metadata": {"name": f"n{n}", "labels": {PROVISIONER_NAME: "default"},
                                          "finalizers": [TERMINATION_FINALIZER]},
                             "spec": {"providerID": f"aws:///z/i-{n}"}})
        kube.set_node_ready(f"n{n}")

    def start(name: str, node: str) -> None:
        kube.create("Pod", {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u"}]},
                            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}})
        kube.bind(name, "default", node)
        kube.set_pod_running(name, "default")

    for i in range(8):  # two pods on each of n0..n3
        start(f"web-{i}", f"n{i // 2}")
    kube.create("PodDisruptionBudget", {"metadata": {"name": "web", "namespace": "default"},
                                        "spec": {"minAvailable": 7, "selector": {"matchLabels": {"app": "web"}}}})
    serial = iter(range(100))
    kube.on_pod_deleted(lambda pod: start(f"web-r{next(serial)}", f"n{4 + next(serial) % 2}")
                        if pod["metadata"].get("labels", {}).get("app") == "web" else None)
    lowest = [8]

    def track(kind: str, event: object) -> None:
        if kind == "Pod":
            from provisioner.kube.fake import pod_is_healthy

            lowest[0] = min(lowest[0], sum(1 for p in kube.list("Pod", "default")[0] if pod_is_healthy(p)))

    settings = from_mapping({"cloud_provider": "fake", "listen_address": "127.0.0.1:0", "leader_elect": "false"})
    process = ControllerProcess(settings, kube, cloud)
    runner = threading.Thread(target=process.run, daemon=True)
    runner.start()
    try:
        assert eventually(process.state.synced)
        kube.subscribe(track)
        for n in range(4):
            kube.delete("Node", f"n{n}")
        assert eventually(lambda: sorted(n["metadata"]["name"] for n in kube.list("Node")[0]) == ["n4", "n5"], 30)
    finally:
        process.stop.set()
        kube.close()
        runner.join(10)
    assert lowest[0] >= 7
    assert sorted(cloud.delete_calls) == [f"aws:///z/i-{n}" for n in range(4)]
