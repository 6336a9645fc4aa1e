"""The shared request-body cap of the webhook and the extender (:mod:`provisioner.webapp`)."""

from __future__ import annotations

import io

import pytest
from flask import Flask, abort

from provisioner.webapp import RequestBodyError, metrics_response, plain, plain_http_errors, read_body

APP = Flask("test")


def _read(data: bytes, *, with_length: bool, max_bytes: int = 10) -> bytes:
    if with_length:
        context = APP.test_request_context("/", method="POST", data=data)
    else:  # chunked: no Content-Length, the server says the stream ends by itself
        context = APP.test_request_context("/", method="POST", headers={"Transfer-Encoding": "chunked"},
                                           environ_overrides={"wsgi.input": io.BytesIO(data),
                                                              "wsgi.input_terminated": True})
    with context:
        return read_body(max_bytes, expected="JSON", limit_note=" (note)")


@pytest.mark.parametrize("with_length", [True, False])
def test_a_body_up_to_the_limit_is_returned_whole(with_length: bool) -> None:
    assert _read(b"0123456789", with_length=with_length) == b"0123456789"


def test_announced_length_over_the_limit_is_413_naming_both_sizes() -> None:
    with pytest.raises(RequestBodyError) as raised:
        _read(b"x" * 11, with_length=True)
    assert (raised.value.status, str(raised.value)) == (
        413, "request body of 11 bytes exceeds the limit of 10 bytes (note)")


def test_unannounced_body_over_the_limit_is_413() -> None:
    with pytest.raises(RequestBodyError) as raised:
        _read(b"x" * 500, with_length=False)
    assert (raised.value.status, str(raised.value)) == (413, "request body exceeds the limit of 10 bytes (note)")


def test_empty_body_is_400_saying_what_was_expected() -> None:
    with pytest.raises(RequestBodyError) as raised:
        _read(b"", with_length=True)
    assert (raised.value.status, str(raised.value)) == (400, "request body is empty: expected JSON")


def test_plain_and_metrics_answers() -> None:
    answer = plain(503, "not ready")
    assert (answer.status_code, answer.get_data(), answer.content_type) == (
        503, b"not ready\n", "text/plain; charset=utf-8")
    with APP.app_context():
        exposition = metrics_response()
    assert exposition.status_code == 200
    assert b"groupless_webhook_request_duration_seconds" in exposition.get_data()


def test_plain_http_errors_turns_flask_errors_into_one_line() -> None:
    app = Flask("t")

    @app.get("/gone")
    def gone() -> str:
        abort(410)

    plain_http_errors(app)
    client = app.test_client()
    assert (client.get("/gone").status_code, client.get("/gone").data) == (410, b"gone: GET /gone\n")
    assert client.delete("/gone").data == b"method not allowed: DELETE /gone (allowed: GET)\n"
