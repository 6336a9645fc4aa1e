"""Each server's ``/metrics`` after real work: the controller, the webhook and the extender.

The work is the walkthrough's: three 1-CPU pods provisioned by the real provisioning controller
(fake cloud, in-memory API, fake clock), the walkthrough's Provisioner admitted by the webhook
app, and filter/prioritize calls to the extender app. Each scrape goes through the server's own
``/metrics`` route and is parsed with Prometheus' parser; the test checks the deltas the work
must have caused and that the values are sane (counts match, durations non-negative and small,
gauges in base units). The JSON log of the round carries the walkthrough's lines.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.test import Client

from extender.app import create_app as extender_app
from extender.state import ExtenderState
from provisioner import metrics
from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider, make_instance_type
from provisioner.controllers.health import health_app
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.logging import configure_logging
from provisioner.model.resources import MIB
from provisioner.settings import ProvisioningSettings
from provisioner.state import ClusterState
from tests.builders.pods import unschedulable_status
from tests.builders.walkthrough import walkthrough
from webhook.app import create_app as webhook_app

ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(get: Callable[[str], tuple[int, str, bytes]]) -> Samples:
    status, content_type, body = get("/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def flask_get(app: Any) -> Callable[[str], tuple[int, str, bytes]]:
    client = app.test_client()

    def get(path: str) -> tuple[int, str, bytes]:
        response = client.get(path)
        return response.status_code, response.content_type, response.data

    return get


def wsgi_get(app: Any) -> Callable[[str], tuple[int, str, bytes]]:
    client = Client(app)

    def get(path: str) -> tuple[int, str, bytes]:
        response = client.get(path)
        return response.status_code, response.headers.get("Content-Type", ""), response.get_data()

    return get


def pending_pod(api: FakeKubeAPI, n: int) -> dict[str, Any]:
    template = walkthrough("02-inflate-deployment.yaml")["spec"]["template"]
    metadata = template.get("metadata", {})
    metadata.update(name=f"inflate-{n}", namespace="default")
    return api.create("Pod", {
        "metadata": metadata, "spec": template["spec"],
        "status": unschedulable_status("0/0 nodes are available"),
    })


@pytest.fixture()
def json_log() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)


def test_controller_metrics_after_provisioning_the_walkthrough(json_log: io.StringIO) -> None:
    clock = FakeClock()
    api = FakeKubeAPI(clock)
    r6gd = make_instance_type("r6gd.xlarge", cpu_milli=4000, memory_bytes=30310 * MIB, pods=58, arch="arm64",
                              zones=ZONES, price={"on-demand": 0.2304, "spot": 0.0691},
                              overhead={"cpu": 180, "memory": (30310 - 29217) * MIB})
    cloud = FakeCloudProvider([r6gd], clock=clock)
    state = ClusterState(api, clock)
    api.create("Provisioner", walkthrough("01-provisioner.yaml"))
    state.resync()
    api.subscribe(state.handle)
    controller = ProvisioningController(api, state, cloud, clock, EventRecorder(api, clock=clock, instance="t"),
                                        ProvisioningSettings())
    controller.watch_state()
    get = wsgi_get(health_app(lambda: (True, "ok"), lambda: (True, "ok")))
    untrack = metrics.track_cluster_state(state)
    before = scrape(get)

    for n in range(3):
        pending_pod(api, n)
    assert controller.batcher.take() is None  # the window is still open
    clock.advance(1.0)
    batch = controller.batcher.take()
    assert batch is not None
    controller.reconcile(batch)
    assert len(cloud.launches) == 1
    after = scrape(get)  # the gauges are refreshed from the cluster cache by the scrape itself

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("groupless_provisioner_batch_size_pods_count") == 1
    assert delta("groupless_provisioner_batch_size_pods_sum") == 3
    assert delta("groupless_provisioner_batch_duration_seconds_count") == 1
    assert delta("groupless_provisioner_batch_duration_seconds_sum") == pytest.approx(1.0, abs=0.05)  # fake clock
    assert delta("groupless_provisioner_solve_duration_seconds_count") >= 1
    assert 0 <= delta("groupless_provisioner_solve_duration_seconds_sum") < 5
    assert delta("groupless_cloudprovider_duration_seconds_count", method="create", outcome="success") == 1
    assert delta("groupless_nodes_launched_total", provisioner="default", capacity_type="on-demand",
                 zone=cloud.launches[0].zone) == 1
    assert delta("groupless_provisioner_pods_nominated_total", provisioner="default") == 3
    node_name = cloud.launches[0].name
    assert value(after, "groupless_node_allocatable", node=node_name, provisioner="default", resource="cpu") == 3.82
    assert value(after, "groupless_node_allocatable", node=node_name, provisioner="default",
                 resource="memory") == 29217 * MIB
    # no label carries a pod name
    assert not [k for k in after if any("inflate-" in v for _, v in k[1])]

    messages = [json.loads(line)["message"] for line in json_log.getvalue().splitlines()]
    assert any(m.startswith("Batched 3 pods in 1") for m in messages), messages
    assert "Computed packing of 1 node(s) for 3 pod(s) with instance type option(s) [r6gd.xlarge]" in messages
    assert any(m.startswith("Launched instance: ") and "type: r6gd.xlarge" in m and "capacityType: on-demand" in m
               for m in messages), messages
    untrack()
    metrics.update_cluster_gauges([], [])


def admission_review(obj: dict[str, Any], uid: str, operation: str = "CREATE") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": operation, "object": obj,
                        "kind": {"group": "karpenter.sh", "version": "v1alpha5", "kind": "Provisioner"},
                        "resource": {"group": "karpenter.sh", "version": "v1alpha5", "resource": "provisioners"},
                        "name": obj["metadata"]["name"], "userInfo": {"username": "admin"}}}


def test_webhook_metrics_after_admitting_and_denying() -> None:
    app = webhook_app()
    client = app.test_client()
    get = flask_get(app)
    before = scrape(get)
    provisioner = walkthrough("01-provisioner.yaml")
    mutated = client.post("/mutate", json=admission_review(provisioner, "u1")).get_json()
    assert mutated["response"]["allowed"] is True
    patch = json.loads(base64.b64decode(mutated["response"]["patch"]))
    assert isinstance(patch, list)
    assert client.post("/validate", json=admission_review(provisioner, "u2")).get_json()["response"]["allowed"]
    bad = copy.deepcopy(provisioner)
    bad["spec"]["ttlSecondsAfterEmpty"] = -1
    denied = client.post("/validate", json=admission_review(bad, "u3", "UPDATE")).get_json()
    assert denied["response"]["allowed"] is False
    assert client.post("/validate", data=b"not json", content_type="application/json").status_code == 400
    after = scrape(get)

    def delta(**labels: str) -> float:
        name = "groupless_webhook_request_duration_seconds_count"
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta(endpoint="mutate", operation="CREATE", allowed="true") == 1
    assert delta(endpoint="validate", operation="CREATE", allowed="true") == 1
    assert delta(endpoint="validate", operation="UPDATE", allowed="false") == 1
    assert delta(endpoint="validate", operation="", allowed="bad_request") == 1
    total = value(after, "groupless_webhook_request_duration_seconds_sum", endpoint="validate", operation="CREATE",
                  allowed="true")
    assert 0 <= total < 5


def test_extender_metrics_after_filter_and_prioritize() -> None:
    app = extender_app(lambda: ExtenderState())
    client = app.test_client()
    get = flask_get(app)
    before = scrape(get)
    pod = {"metadata": {"name": "inflate-0", "namespace": "default", "uid": "u-0"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    args = {"Pod": pod, "NodeNames": ["ip-1", "ip-2"]}
    filtered = client.post("/filter", json=args).get_json()
    assert sorted(filtered["NodeNames"]) == ["ip-1", "ip-2"]  # unknown nodes pass
    scores = client.post("/prioritize", json=args).get_json()
    assert {s["Host"] for s in scores} == {"ip-1", "ip-2"}
    assert client.post("/filter", json={"NodeNames": []}).status_code == 400  # no Pod
    after = scrape(get)

    def delta(**labels: str) -> float:
        name = "groupless_extender_request_duration_seconds_count"
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta(verb="filter", code="200") == 1
    assert delta(verb="prioritize", code="200") == 1
    assert delta(verb="filter", code="400") == 1
    # a filter answer takes milliseconds: the 0.25 s bucket holds it
    bucket = "groupless_extender_request_duration_seconds_bucket"
    assert (value(after, bucket, verb="filter", code="200", le="0.25")
            - value(before, bucket, verb="filter", code="200", le="0.25")) == 1
