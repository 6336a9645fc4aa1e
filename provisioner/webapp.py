"""Flask pieces the admission webhook and the scheduler extender share.

Why shared: both are thin flask apps that a Kubernetes component (kube-apiserver,
kube-scheduler) calls with one JSON body. Both must cap that body before reading it, so a
caller's bug or a hostile client cannot make the process hold gigabytes; both answer bad input
with a one-line plain-text reason (never a 500); and both expose the same Prometheus
``/metrics``. Parsing the JSON stays with each app (the extender uses orjson for 50 MiB node
lists, the webhook the standard library with NaN/Infinity refused).
"""

from __future__ import annotations

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from provisioner import metrics


class RequestBodyError(ValueError):
    """A request body that cannot be read as one: ``status`` 413 (too large) or 400 (empty, malformed)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


#: How much of an over-limit body is read and thrown away (64 KiB at a time, never held) before
#: the 413 goes out. A client still sending when the server answers and closes would otherwise
#: see a connection reset or TLS EOF instead of the 413 and its reason; past this amount the
#: server stops reading and the client may see the reset.
DRAIN_LIMIT_BYTES = 16 * 1024 * 1024
_CHUNK = 64 * 1024


def _discard(amount: int) -> None:
    remaining = amount
    while remaining > 0:
        chunk = request.stream.read(min(_CHUNK, remaining))
        if not chunk:
            return
        remaining -= len(chunk)


def read_body(max_bytes: int, *, expected: str, limit_note: str = "") -> bytes:
    """The raw body of the current flask request, at most ``max_bytes`` bytes.

    Raises RequestBodyError 413 when ``Content-Length`` exceeds ``max_bytes`` (up to
    :data:`DRAIN_LIMIT_BYTES` of it are read and discarded, none kept, so the caller sees the 413)
    or the body turns out longer (chunked uploads; ``max_bytes + 1`` bytes at most are read),
    with the reason ``request body [of N bytes] exceeds the limit of M bytes<limit_note>``; 400
    when it is empty (``request body is empty: expected <expected>``).
    """
    length = request.content_length
    if length is not None and length > max_bytes:
        _discard(min(length, DRAIN_LIMIT_BYTES))
        raise RequestBodyError(413, f"request body of {length} bytes exceeds the limit of {max_bytes} bytes{limit_note}")
    body = request.stream.read(length if length is not None else max_bytes + 1)
    if len(body) > max_bytes:
        raise RequestBodyError(413, f"request body exceeds the limit of {max_bytes} bytes{limit_note}")
    if not body:
        raise RequestBodyError(400, f"request body is empty: expected {expected}")
    return body


def plain(status: int, text: str) -> Response:
    """A ``text/plain; charset=utf-8`` answer of ``text`` and a newline."""
    return Response(text + "\n", status=status, content_type="text/plain; charset=utf-8")


def plain_http_errors(app: Flask) -> None:
    """Answer every HTTP error flask raises itself (404, 405, ...) as one plain-text line, not HTML.

    ``404 GET /nope`` answers ``not found: GET /nope``; ``GET /mutate`` answers ``405`` with
    ``method not allowed: GET /mutate (allowed: POST)`` and the ``Allow`` header (RFC 9110
    15.5.6). The status codes stay werkzeug's.
    """

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        status = error.code or 500
        text = f"{(error.name or 'error').lower()}: {request.method} {request.path}"
        allowed = sorted(set(error.valid_methods or ()) - {"HEAD", "OPTIONS"}) \
            if isinstance(error, MethodNotAllowed) else []
        if allowed:
            text += f" (allowed: {', '.join(allowed)})"
        response = plain(status, text)
        if isinstance(error, MethodNotAllowed) and error.valid_methods:
            response.headers["Allow"] = ", ".join(error.valid_methods)
        return response


def metrics_response() -> Response:
    """The ``/metrics`` answer: every Groupless metric in the Prometheus text exposition format."""
    body, content_type = metrics.exposition()
    return Response(body, status=200, content_type=content_type)
