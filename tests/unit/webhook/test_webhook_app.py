"""The HTTP envelope: 400 (413 when too large) with a one-line reason for bad bodies, never a 500, health and metrics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient

import webhook.app as webhook_app
from tests.builders.admission import review, valid
from webhook.app import MAX_BODY_BYTES
from webhook.handlers import mutate, validate


def bad(client: FlaskClient, path: str, data: bytes | str, status: int = 400) -> str:
    reply = client.post(path, data=data, content_type="application/json")
    assert reply.status_code == status
    assert reply.content_type == "text/plain; charset=utf-8"
    text = reply.get_data(as_text=True)
    assert text.endswith("\n") and text.count("\n") == 1
    return text.rstrip("\n")


def with_request(**changes: Any) -> dict[str, Any]:
    body = review(valid())
    for key, value in changes.items():
        if value is ...:
            del body["request"][key]
        else:
            body["request"][key] = value
    return body


BAD_BODIES: list[tuple[str, bytes | str, str]] = [
    ("empty", b"", "bad request: request body is empty: expected an AdmissionReview v1 JSON object"),
    ("not JSON", b"{not json",
     "bad request: request body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ("NaN", b'{"a": NaN}', "bad request: request body is not JSON: NaN is not valid JSON"),
    ("not UTF-8", b'{"a": "\xff"}',
     "bad request: request body is not JSON: 'utf-8' codec can't decode byte 0xff in position 7: invalid start byte"),
    ("too deep", b"[" * 100_000, "bad request: request body is not JSON: nested too deeply"),
    ("array", b"[]", "bad request: expected a JSON object (an AdmissionReview), got list"),
    ("v1beta1", json.dumps({**review(valid()), "apiVersion": "admission.k8s.io/v1beta1"}),
     'bad request: expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got apiVersion '
     '"admission.k8s.io/v1beta1" and kind "AdmissionReview"'),
    ("wrong kind", json.dumps({**review(valid()), "kind": "TokenReview"}),
     'bad request: expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got apiVersion '
     '"admission.k8s.io/v1" and kind "TokenReview"'),
    ("no request", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
     "bad request: request is missing or not an object"),
    ("no uid", json.dumps(with_request(uid=...)), "bad request: request.uid is missing or not a non-empty string"),
    ("empty uid", json.dumps(with_request(uid="")), "bad request: request.uid is missing or not a non-empty string"),
    ("numeric uid", json.dumps(with_request(uid=7)), "bad request: request.uid is missing or not a non-empty string"),
    ("no operation", json.dumps(with_request(operation=...)),
     "bad request: request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got null"),
    ("no request.kind", json.dumps(with_request(kind=...)), "bad request: request.kind is missing or not an object"),
    ("a Pod", json.dumps(with_request(kind={"group": "", "version": "v1", "kind": "Pod"})),
     'bad request: this webhook admits karpenter.sh Provisioner objects, got request.kind '
     '{"group": "", "kind": "Pod", "version": "v1"}'),
]


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
@pytest.mark.parametrize(("body", "reason"), [(b, r) for _, b, r in BAD_BODIES], ids=[i for i, _, _ in BAD_BODIES])
def test_bad_bodies_get_400_with_a_one_line_reason(client: FlaskClient, path: str, body: Any, reason: str) -> None:
    assert bad(client, path, body) == reason


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_bodies_over_3_mib_get_413(client: FlaskClient, path: str) -> None:
    body = review(valid())
    body["request"]["object"]["metadata"]["annotations"] = {"big": "x" * MAX_BODY_BYTES}
    data = json.dumps(body)
    assert bad(client, path, data, status=413) == (
        f"too large: request body of {len(data)} bytes exceeds the limit of 3145728 bytes (3 MiB)")


@pytest.mark.parametrize(("method", "path", "status", "text", "allow"), [
    ("GET", "/nope", 404, "not found: GET /nope", None),
    ("POST", "/healthz", 405, "method not allowed: POST /healthz (allowed: GET)", {"GET", "HEAD", "OPTIONS"}),
    ("GET", "/mutate", 405, "method not allowed: GET /mutate (allowed: POST)", {"POST", "OPTIONS"}),
    ("PUT", "/validate", 405, "method not allowed: PUT /validate (allowed: POST)", {"POST", "OPTIONS"}),
])
def test_unknown_paths_and_methods_get_one_plain_line(
    client: FlaskClient, method: str, path: str, status: int, text: str, allow: set[str] | None
) -> None:
    reply = client.open(path, method=method)
    assert reply.status_code == status
    assert reply.content_type == "text/plain; charset=utf-8"
    assert reply.get_data(as_text=True) == text + "\n"
    assert (set(reply.headers["Allow"].split(", ")) if allow else reply.headers.get("Allow")) == allow


def test_a_body_of_exactly_3_mib_is_read(client: FlaskClient) -> None:
    body = review(valid())
    body["request"]["object"]["metadata"]["annotations"] = {"big": ""}
    padding = MAX_BODY_BYTES - len(json.dumps(body))
    body["request"]["object"]["metadata"]["annotations"]["big"] = "x" * padding
    data = json.dumps(body)
    assert len(data) == MAX_BODY_BYTES
    reply = client.post("/validate", data=data, content_type="application/json")
    assert reply.status_code == 200
    assert reply.get_json()["response"]["allowed"] is True


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_delete_and_connect_are_allowed_without_an_object(post: Any, path: str) -> None:
    for operation in ("DELETE", "CONNECT"):
        body = review(valid(), operation=operation, uid=f"uid-{operation}")
        body["request"]["object"] = None
        assert post(path, body)["response"] == {"uid": f"uid-{operation}", "allowed": True}


def test_status_subresource_writes_are_not_validated(post: Any) -> None:
    obj = valid()
    obj["spec"]["weight"] = -1
    body = review(obj, operation="UPDATE", old=valid())
    body["request"]["subResource"] = "status"
    assert post("/validate", body)["response"] == {"uid": body["request"]["uid"], "allowed": True}


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
@pytest.mark.parametrize("obj", [None, "a string", [1, 2]])
def test_a_create_without_an_object_is_denied_as_a_bad_request(post: Any, path: str, obj: Any) -> None:
    body = review(valid())
    body["request"]["object"] = obj
    assert post(path, body)["response"] == {
        "uid": body["request"]["uid"],
        "allowed": False,
        "status": {"status": "Failure", "code": 400, "reason": "BadRequest",
                   "message": f"request.object: expected a Provisioner object, got {json.dumps(obj)}"},
    }


def test_the_uid_is_echoed_and_validating_answers_carry_no_patch(post: Any) -> None:
    for uid in ("a", "00000000-0000-0000-0000-000000000000"):
        answer = post("/validate", review(valid(), uid=uid))
        assert answer["response"] == {"uid": uid, "allowed": True}


def test_handlers_are_pure_functions_equal_to_the_http_answers(post: Any) -> None:
    body = review(valid())
    del body["request"]["object"]["spec"]["provider"]["amiFamily"]
    assert mutate(body) == post("/mutate", body)
    assert validate(body) == post("/validate", body)


def test_an_unexpected_error_is_a_denial_not_a_500(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(review: Any) -> dict[str, Any]:
        raise KeyError("surprise")

    monkeypatch.setattr(webhook_app, "validate", boom)
    app = webhook_app.create_app()
    reply = app.test_client().post("/validate", json=review(valid(), uid="u-1"))
    assert reply.status_code == 200
    assert reply.get_json()["response"] == {
        "uid": "u-1",
        "allowed": False,
        "status": {"status": "Failure", "code": 500, "reason": "InternalError",
                   "message": "internal error in the Groupless webhook: KeyError: 'surprise'"},
    }
    reply = app.test_client().post("/validate", json={"no": "uid"})
    assert reply.status_code == 400
    assert reply.get_data(as_text=True) == "bad request: KeyError\n"


def test_health_and_metrics(client: FlaskClient) -> None:
    assert client.get("/healthz").get_data(as_text=True) == "ok\n"
    assert client.get("/readyz").status_code == 200
    client.post("/validate", json=review(valid()))
    client.post("/mutate", data=b"nope")
    text = client.get("/metrics").get_data(as_text=True)
    assert ('groupless_webhook_request_duration_seconds_count{allowed="true",endpoint="validate",'
            'operation="CREATE"}') in text
    assert ('groupless_webhook_request_duration_seconds_count{allowed="bad_request",endpoint="mutate",'
            'operation=""}') in text


def test_wrong_methods_and_paths_are_4xx(client: FlaskClient) -> None:
    assert client.get("/mutate").status_code == 405
    assert client.post("/healthz").status_code == 405
    assert client.post("/admit").status_code == 404
