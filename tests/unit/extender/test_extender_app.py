"""The flask layer in-process: recording, fail-open on internal errors, readiness, limits."""

from __future__ import annotations

from pathlib import Path

from extender.app import create_app
from extender.state import EMPTY_STATE, ExtenderState
from provisioner.clock import FakeClock
from tests.fixtures.extender import body, now, raw_body, state
from tests.fixtures.extender.build_fixtures import N1, N2


def test_records_the_first_bodies_of_each_verb(tmp_path: Path) -> None:
    app = create_app(state, clock=FakeClock(now()), record_dir=str(tmp_path / "rec"), record_limit=2)
    client = app.test_client()
    for _ in range(3):
        assert client.post("/filter", data=raw_body("filter-nodenames")).status_code == 200
    assert client.post("/prioritize", data=raw_body("prioritize-nominated")).status_code == 200
    assert client.post("/filter", data=b"{bad").status_code == 400
    assert sorted(p.name for p in (tmp_path / "rec").iterdir()) == ["filter-1.json", "filter-2.json",
                                                                     "prioritize-1.json"]
    assert (tmp_path / "rec" / "filter-2.json").read_bytes() == raw_body("filter-nodenames")


def test_internal_error_answers_open_never_500() -> None:
    def broken() -> ExtenderState:
        raise RuntimeError("cache exploded")

    client = create_app(broken).test_client()
    answer = client.post("/filter", data=raw_body("filter-nodenames"))
    assert answer.status_code == 200
    assert answer.get_json() == {"Nodes": None, "NodeNames": body("filter-nodenames")["NodeNames"],
                                 "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
    scores = client.post("/prioritize", data=raw_body("prioritize-nominated")).get_json()
    assert {s["Score"] for s in scores} == {0}
    nodes_mode = client.post("/filter", data=raw_body("filter-nodes")).get_json()
    assert nodes_mode["Nodes"] == body("filter-nodes")["Nodes"]
    assert client.post("/filter", data=b'{"Pod": {}}').status_code == 400


def test_readiness_follows_the_callback() -> None:
    ready = [False]
    client = create_app(lambda: EMPTY_STATE, ready=lambda: ready[0]).test_client()
    assert client.get("/readyz").status_code == 503
    assert client.get("/healthz").status_code == 200  # liveness never waits for the cache
    ready[0] = True
    assert client.get("/readyz").data == b"ok\n"


def test_content_length_over_the_cap_is_413_without_reading() -> None:
    client = create_app(lambda: EMPTY_STATE, max_body_bytes=100).test_client()
    response = client.post("/prioritize", data=b"x" * 101)
    assert response.status_code == 413
    assert response.data == b"too large: request body of 101 bytes exceeds the limit of 100 bytes\n"


def test_answers_use_the_injected_clock() -> None:
    late = create_app(state, clock=FakeClock(now() + 301)).test_client()
    assert N2 in late.post("/filter", data=raw_body("filter-nodenames")).get_json()["NodeNames"]
    early = create_app(state, clock=FakeClock(now())).test_client()
    names = early.post("/filter", data=raw_body("filter-nodenames")).get_json()["NodeNames"]
    assert N1 in names and N2 not in names


def test_wrong_method_is_405_not_500() -> None:
    client = create_app(lambda: EMPTY_STATE).test_client()
    assert client.get("/filter").status_code == 405
    assert client.post("/nowhere", data=b"{}").status_code == 404


def test_unknown_paths_and_methods_get_one_plain_line_not_html() -> None:
    client = create_app(lambda: EMPTY_STATE).test_client()
    missing = client.post("/bind", data=b"{}")
    assert (missing.status_code, missing.content_type, missing.data) == (
        404, "text/plain; charset=utf-8", b"not found: POST /bind\n")
    wrong = client.get("/filter")
    assert (wrong.status_code, wrong.content_type, wrong.data) == (
        405, "text/plain; charset=utf-8", b"method not allowed: GET /filter (allowed: POST)\n")
    assert set(wrong.headers["Allow"].split(", ")) == {"POST", "OPTIONS"}
