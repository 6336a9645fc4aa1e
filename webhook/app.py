"""The admission webhook's HTTP layer: a thin flask app over :mod:`webhook.handlers`.

Why thin: kube-apiserver treats any non-200 answer, or a body that is not an AdmissionReview, as
a failed call, and with ``failurePolicy: Fail`` the user then reads "Internal error occurred:
failed calling webhook" instead of what is wrong with their Provisioner. So this layer's only
jobs are to turn bytes into a review and back, and to never fail on input: a body that is not
JSON, or not an AdmissionReview v1 for a Provisioner, gets a 400 with a one-line reason, and one
larger than 3 MiB (kube-apiserver's own request limit) a 413, as the extender answers; unknown
paths and methods get a one-line 404/405; anything unexpected is logged and answered as a
denial, never a 500.

Paths: ``POST /mutate``, ``POST /validate``, ``GET /healthz`` (and ``/readyz``), ``GET /metrics``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from flask import Flask, Response

from provisioner import metrics
from provisioner.webapp import RequestBodyError, metrics_response, plain, plain_http_errors, read_body
from webhook.handlers import ReviewError, denied, mutate, validate

log = logging.getLogger(__name__)

#: Largest body accepted, in bytes (kube-apiserver's limit for a request body is 3 MiB too).
MAX_BODY_BYTES = 3 * 1024 * 1024

Handler = Callable[[Any], dict[str, Any]]


class BadRequest(Exception):
    """A request answered with HTTP 400 and ``str(self)`` as its one-line reason."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_review() -> Any:
    """The JSON body of the current request.

    Raises RequestBodyError 413 when larger than :data:`MAX_BODY_BYTES`, 400 when empty;
    BadRequest when not JSON.
    """
    body = read_body(MAX_BODY_BYTES, expected="an AdmissionReview v1 JSON object", limit_note=" (3 MiB)")
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        raise BadRequest("request body is not JSON: nested too deeply") from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = " ".join(str(error).split())[:200]
        raise BadRequest(f"request body is not JSON: {reason}") from None


def _uid_of(review: Any) -> str | None:
    if isinstance(review, dict) and isinstance(review.get("request"), dict):
        uid = review["request"].get("uid")
        if isinstance(uid, str) and uid:
            return uid
    return None


def _operation_of(review: Any) -> str:
    if isinstance(review, dict) and isinstance(review.get("request"), dict):
        operation = review["request"].get("operation")
        if operation in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
            return str(operation)
    return ""


def _admission(endpoint: str, handler: Handler) -> Response:
    with metrics.time_call(metrics.WEBHOOK_DURATION, endpoint=endpoint) as labels:
        review: Any = None
        try:
            review = read_review()
            labels["operation"] = _operation_of(review)
            answer = handler(review)
        except RequestBodyError as error:
            labels["allowed"] = "bad_request"
            log.info("Rejected /%s request: %s", endpoint, error)
            return plain(error.status, f"{'bad request' if error.status == 400 else 'too large'}: {error}")
        except (BadRequest, ReviewError) as error:
            labels["allowed"] = "bad_request"
            log.info("Rejected /%s request: %s", endpoint, error)
            return plain(400, f"bad request: {error}")
        except RecursionError:
            labels["allowed"] = "bad_request"
            return plain(400, "bad request: the object is nested too deeply")
        except Exception as error:  # the last line of defence: a user reads a denial, not a 500
            labels["allowed"] = "error"
            log.exception("Internal error answering /%s", endpoint)
            uid = _uid_of(review)
            if uid is None:
                return plain(400, f"bad request: {type(error).__name__}")
            answer = denied(uid, f"internal error in the Groupless webhook: {type(error).__name__}: {error}",
                            code=500, reason="InternalError")
        else:
            labels["allowed"] = "true" if answer["response"]["allowed"] else "false"
        return Response(json.dumps(answer), status=200, content_type="application/json")


def create_app() -> Flask:
    """The webhook's WSGI app (serve it with :func:`provisioner.serving.serve`)."""
    app = Flask("groupless-webhook")

    @app.post("/mutate")
    def mutate_endpoint() -> Response:
        return _admission("mutate", mutate)

    @app.post("/validate")
    def validate_endpoint() -> Response:
        return _admission("validate", validate)

    @app.get("/healthz")
    @app.get("/readyz")
    def healthz() -> Response:
        return plain(200, "ok")

    app.get("/metrics")(metrics_response)
    plain_http_errors(app)

    return app
