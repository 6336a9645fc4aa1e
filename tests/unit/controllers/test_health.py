from __future__ import annotations

from typing import Any

from provisioner.controllers.health import health_app


def call(app: Any, path: str) -> tuple[str, bytes]:
    seen: list[str] = []
    body = b"".join(app({"PATH_INFO": path}, lambda status, headers: seen.append(status)))
    return seen[0], body


def test_probes_and_metrics() -> None:
    app = health_app(lambda: (True, "ok"), lambda: (False, "cluster state not synced"))
    assert call(app, "/healthz") == ("200 OK", b"ok\n")
    assert call(app, "/readyz") == ("503 Service Unavailable", b"cluster state not synced\n")
    status, body = call(app, "/metrics")
    assert status == "200 OK" and b"groupless_nodes_terminated_total" in body
    assert call(app, "/other")[0] == "404 Not Found"


