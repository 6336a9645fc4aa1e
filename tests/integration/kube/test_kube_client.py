"""KubeClient's wire behaviour against a tiny HTTP server on loopback standing in for kube-apiserver."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client as k8s_client

from provisioner.kube.api import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    GoneError,
    NotFoundError,
    TooManyRequestsError,
)
from provisioner.kube.client import KubeClient, error_from_response, resource_path, watch_event_from_raw
from provisioner.kube.fake import FakeKubeAPI


class Server:
    """Records requests; answers from a route table ``(method, path) -> (status, body or list of lines)``."""

    def __init__(self):
        self.requests = []
        self.routes = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path, _, query = self.path.partition("?")
                server.requests.append(
                    {
                        "method": self.command,
                        "path": path,
                        "query": query,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                answer = server.routes.get((self.command, path))
                if callable(answer):
                    answer = answer(query)
                status, payload = answer or (
                    404,
                    {"kind": "Status", "reason": "NotFound", "message": "no route"},
                )
                if isinstance(payload, list):  # a watch stream
                    data = b"".join(json.dumps(line).encode() + b"\n" for line in payload)
                else:
                    data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture
def kube(server):
    cfg = k8s_client.Configuration()
    cfg.host = server.url
    c = KubeClient(k8s_client.ApiClient(cfg), qps=0)
    yield c
    c.close()


def test_resource_paths():
    assert (
        resource_path("Pod", "web-1", "default", "eviction")
        == "/api/v1/namespaces/default/pods/web-1/eviction"
    )
    assert resource_path("Pod") == "/api/v1/pods"
    assert resource_path("Node", "n1") == "/api/v1/nodes/n1"
    assert resource_path("Provisioner", "default") == "/apis/karpenter.sh/v1alpha5/provisioners/default"
    assert (
        resource_path("PodDisruptionBudget", None, "ns")
        == "/apis/policy/v1/namespaces/ns/poddisruptionbudgets"
    )
    with pytest.raises(ApiError) as raised:
        resource_path("Widget")
    assert (raised.value.status, raised.value.message) == (404, "the server doesn't have a resource type 'Widget'")


def test_unknown_kind_is_the_same_not_found_from_the_fake():
    with pytest.raises(ApiError) as raised:
        FakeKubeAPI().get("Widget", "w")
    assert (raised.value.status, raised.value.message) == (404, "the server doesn't have a resource type 'Widget'")


def test_error_mapping():
    assert isinstance(error_from_response(404, b'{"reason":"NotFound","message":"x"}'), NotFoundError)
    assert isinstance(error_from_response(409, b'{"reason":"AlreadyExists"}'), AlreadyExistsError)
    assert isinstance(error_from_response(409, b'{"reason":"Conflict"}'), ConflictError)
    assert isinstance(error_from_response(410, b"{}"), GoneError)
    assert isinstance(error_from_response(429, b"{}"), TooManyRequestsError)
    err = error_from_response(422, b'{"reason":"Invalid","message":"spec.x: bad"}')
    assert (err.status, err.reason, err.message) == (422, "Invalid", "spec.x: bad")
    err = error_from_response(502, b"<html>bad gateway</html>", "Bad Gateway")
    assert (err.status, err.reason, err.message) == (502, "Bad Gateway", "<html>bad gateway</html>")


def test_watch_event_decoding():
    event = watch_event_from_raw({"type": "ADDED", "raw_object": {"metadata": {"name": "n"}}}, "Node")
    assert event.type == "ADDED" and event.object["kind"] == "Node" and event.object["apiVersion"] == "v1"
    with pytest.raises(GoneError):
        watch_event_from_raw(
            {"type": "ERROR", "raw_object": {"code": 410, "reason": "Expired", "message": "too old"}}, "Node"
        )
    assert watch_event_from_raw({"type": "WEIRD", "raw_object": {}}, "Node") is None


def test_get_create_patch_delete(server, kube):
    server.routes[("GET", "/api/v1/nodes/n1")] = (200, {"metadata": {"name": "n1"}})
    assert kube.get("Node", "n1") == {"metadata": {"name": "n1"}, "apiVersion": "v1", "kind": "Node"}

    server.routes[("POST", "/api/v1/namespaces/default/events")] = (201, {"metadata": {"name": "e"}})
    kube.create("Event", {"metadata": {"name": "e"}, "reason": "R"})
    sent = server.requests[-1]
    assert json.loads(sent["body"])["kind"] == "Event" and json.loads(sent["body"])["apiVersion"] == "v1"

    server.routes[("PATCH", "/api/v1/nodes/n1")] = (200, {"metadata": {"name": "n1"}})
    kube.patch("Node", "n1", {"metadata": {"labels": {"a": "b"}}})
    assert server.requests[-1]["headers"]["content-type"] == "application/merge-patch+json"
    kube.patch("Node", "n1", [{"op": "remove", "path": "/spec/taints/0"}])
    assert server.requests[-1]["headers"]["content-type"] == "application/json-patch+json"
    assert json.loads(server.requests[-1]["body"]) == [{"op": "remove", "path": "/spec/taints/0"}]

    server.routes[("PATCH", "/apis/karpenter.sh/v1alpha5/provisioners/p/status")] = (200, {"metadata": {}})
    kube.patch("Provisioner", "p", {"status": {"resources": {"cpu": "4"}}}, subresource="status")
    assert server.requests[-1]["path"] == "/apis/karpenter.sh/v1alpha5/provisioners/p/status"

    server.routes[("DELETE", "/api/v1/nodes/n1")] = (200, {"kind": "Status", "status": "Success"})
    kube.delete("Node", "n1")
    assert server.requests[-1]["query"] == "propagationPolicy=Background"

    with pytest.raises(NotFoundError):
        kube.get("Node", "absent")


def test_create_conflicts_map_to_typed_errors(server, kube):
    server.routes[("POST", "/api/v1/nodes")] = (
        409,
        {"kind": "Status", "reason": "AlreadyExists", "message": "exists"},
    )
    with pytest.raises(AlreadyExistsError):
        kube.create("Node", {"metadata": {"name": "n1"}})
    server.routes[("PUT", "/api/v1/nodes/n1")] = (
        409,
        {"kind": "Status", "reason": "Conflict", "message": "stale"},
    )
    with pytest.raises(ConflictError):
        kube.replace("Node", {"metadata": {"name": "n1", "resourceVersion": "1"}})


def test_eviction(server, kube):
    path = "/api/v1/namespaces/web/pods/p0/eviction"
    server.routes[("POST", path)] = (201, {"kind": "Status", "status": "Success"})
    kube.evict("p0", "web")
    body = json.loads(server.requests[-1]["body"])
    assert body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p0", "namespace": "web"},
    }
    server.routes[("POST", path)] = (
        429,
        {
            "kind": "Status",
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        },
    )
    with pytest.raises(TooManyRequestsError) as err:
        kube.evict("p0", "web")
    assert "disruption budget" in err.value.message


def test_list_follows_continue_tokens(server, kube):
    def pages(query):
        if "continue=tok" in query:
            return 200, {"metadata": {"resourceVersion": "77"}, "items": [{"metadata": {"name": "b"}}]}
        return 200, {
            "metadata": {"resourceVersion": "77", "continue": "tok"},
            "items": [{"metadata": {"name": "a"}}],
        }

    server.routes[("GET", "/api/v1/pods")] = pages
    items, rv = kube.list("Pod", label_selector="app=web")
    assert [i["metadata"]["name"] for i in items] == ["a", "b"]
    assert all(i["kind"] == "Pod" for i in items)
    assert rv == "77"
    assert (
        "labelSelector=app%3Dweb" in server.requests[0]["query"]
        and "limit=500" in server.requests[0]["query"]
    )


def test_list_retries_transient_errors(server, kube):
    calls = []

    def flaky(query):
        calls.append(query)
        if len(calls) == 1:
            return 503, {"kind": "Status", "reason": "ServiceUnavailable"}
        return 200, {"metadata": {"resourceVersion": "5"}, "items": []}

    server.routes[("GET", "/api/v1/nodes")] = flaky
    assert kube.list("Node") == ([], "5")
    assert len(calls) == 2


def test_watch_streams_events_and_raises_gone(server, kube):
    server.routes[("GET", "/api/v1/nodes")] = (
        200,
        [
            {"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "11"}}},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
            {"type": "DELETED", "object": {"metadata": {"name": "n1", "resourceVersion": "13"}}},
        ],
    )
    events = list(kube.watch("Node", "10", timeout_seconds=5))
    assert [(e.type, e.object["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "11"),
        ("BOOKMARK", "12"),
        ("DELETED", "13"),
    ]
    query = server.requests[-1]["query"]
    assert "watch=true" in query and "resourceVersion=10" in query and "allowWatchBookmarks=true" in query

    server.routes[("GET", "/api/v1/nodes")] = (
        200,
        [
            {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "code": 410,
                    "reason": "Expired",
                    "message": "too old resource version",
                },
            }
        ],
    )
    with pytest.raises(GoneError):
        list(kube.watch("Node", "1", timeout_seconds=5))

    server.routes[("GET", "/api/v1/nodes")] = (
        410,
        {"kind": "Status", "reason": "Expired", "message": "gone"},
    )
    with pytest.raises(GoneError):
        list(kube.watch("Node", "1", timeout_seconds=5))


def test_from_kubeconfig(tmp_path, server):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server.url}}],
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    kube = KubeClient.from_kubeconfig(str(kubeconfig), pool_size=4)
    server.routes[("GET", "/api/v1/nodes/n1")] = (200, {"metadata": {"name": "n1"}})
    assert kube.get("Node", "n1")["metadata"]["name"] == "n1"
    assert server.requests[-1]["headers"]["authorization"] == "Bearer abc"
    assert kube.api_client.configuration.connection_pool_maxsize == 4
    kube.close()


def test_connection_errors_are_service_unavailable():
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    cfg = k8s_client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.retries = False
    kube = KubeClient(k8s_client.ApiClient(cfg), qps=0)
    kube._read = lambda path, query=None: kube._request("GET", path, query=query)  # no backoff in a unit test
    with pytest.raises(ApiError) as err:
        kube.get("Node", "n1")
    assert err.value.status == 503 and "GET /api/v1/nodes/n1" in err.value.message
    with pytest.raises(ApiError) as err:
        kube.create("Node", {"metadata": {"name": "n1"}})
    assert err.value.status == 503
    kube.close()


def pool_maxsize(kube):
    """The maxsize urllib3's pool manager really uses, besides what the configuration says."""
    configured = kube.api_client.configuration.connection_pool_maxsize
    return configured, kube.api_client.rest_client.pool_manager.connection_pool_kw["maxsize"]


def test_pool_size_of_a_callers_api_client(server):
    cfg = k8s_client.Configuration()
    cfg.host = server.url
    assert cfg.connection_pool_maxsize != 32  # the kubernetes client's default: cpu_count * 5
    kube = KubeClient(k8s_client.ApiClient(cfg), qps=0)
    assert pool_maxsize(kube) == (32, 32)
    server.routes[("GET", "/api/v1/nodes/n1")] = (200, {"metadata": {"name": "n1"}})
    assert kube.get("Node", "n1")["metadata"]["name"] == "n1"  # the rebuilt pool works
    kube.close()
    bigger = KubeClient(k8s_client.ApiClient(k8s_client.Configuration()), pool_size=48)
    assert pool_maxsize(bigger) == (48, 48)
    with pytest.raises(ValueError, match="pool_size must be at least 1, got 0"):
        KubeClient(k8s_client.ApiClient(k8s_client.Configuration()), pool_size=0)


def test_pool_size_in_cluster(tmp_path, monkeypatch):
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    kube = KubeClient.from_kubeconfig(None)
    assert kube.api_client.configuration.host == "https://10.96.0.1:443"
    assert pool_maxsize(kube) == (32, 32)
    kube.close()
    sized = KubeClient.from_kubeconfig(None, pool_size=20)
    assert pool_maxsize(sized) == (20, 20)
    sized.close()


@pytest.mark.parametrize(("pool_size", "discarded"), [(4, True), (32, False)])
def test_sixteen_concurrent_requests_keep_their_connections(server, caplog, pool_size, discarded):
    """The provisioning controller's 16 launch threads at once: every connection goes back to the pool."""
    threads = 16
    server.httpd.RequestHandlerClass.protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver
    barrier = threading.Barrier(threads, timeout=10)

    def all_at_once(query):
        barrier.wait()  # every request holds its own connection until all 16 are open
        return 200, {"metadata": {"name": "n1"}}

    server.routes[("GET", "/api/v1/nodes/n1")] = all_at_once
    cfg = k8s_client.Configuration()
    cfg.host = server.url
    kube = KubeClient(k8s_client.ApiClient(cfg), qps=0, pool_size=pool_size)
    names, errors = [], []

    def get():
        try:
            names.append(kube.get("Node", "n1")["metadata"]["name"])
        except Exception as error:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(error)

    with caplog.at_level("WARNING", logger="urllib3.connectionpool"):
        workers = [threading.Thread(target=get) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=20)
    kube.close()
    assert (names, errors) == (["n1"] * threads, [])
    full = [r for r in caplog.records if "Connection pool is full" in r.getMessage()]
    assert bool(full) is discarded
