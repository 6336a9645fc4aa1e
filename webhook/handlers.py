"""Admission handlers for Provisioners: pure functions from an AdmissionReview to its answer.

Why pure: the whole admission contract (echo ``request.uid``, base64 JSONPatch, denial status,
warnings) is decided here without a server, so every rule is tested by calling a function and
the flask app in :mod:`webhook.app` only moves bytes. Protocol facts (``reference/protocols.md``
section 2.1): the answer has the request's ``apiVersion``/``kind`` (``admission.k8s.io/v1``
``AdmissionReview``) and a ``response`` with ``uid`` and ``allowed``; a patch travels as the
base64 of a JSON array with ``patchType: JSONPatch``; a denial's ``status.message`` reaches the
``kubectl`` user verbatim after ``admission webhook "<name>" denied the request:``, and its
``status.code`` becomes the HTTP code the user's client receives (422 ``Invalid`` for a
Provisioner that breaks a rule, as kube-apiserver answers for its own validation).

A review that is not an AdmissionReview v1 for a Provisioner raises :class:`ReviewError`
(the app answers HTTP 400); a well-formed review of an undecodable Provisioner is *denied*
with the decoding error, so the user sees it in ``kubectl apply``.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from provisioner.api.defaults import defaulting_patch
from provisioner.api.schemas import describe_value
from provisioner.api.validation import FieldError, validate_provisioner
from provisioner.model.labels import API_GROUP, KIND

log = logging.getLogger(__name__)

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
#: Names the webhook configurations in ``deploy/webhooks/`` register (and users see in errors).
MUTATING_WEBHOOK_NAME = "defaulting.webhook.provisioners.groupless.dev"
VALIDATING_WEBHOOK_NAME = "validation.webhook.provisioners.groupless.dev"

__all__ = [
    "ADMISSION_API_VERSION",
    "ADMISSION_KIND",
    "MUTATING_WEBHOOK_NAME",
    "VALIDATING_WEBHOOK_NAME",
    "ReviewError",
    "allowed",
    "denial_message",
    "denied",
    "mutate",
    "parse_request",
    "validate",
]


class ReviewError(ValueError):
    """The body is not an AdmissionReview v1 request for a Provisioner; ``str()`` is a one-line reason."""


def parse_request(review: Any) -> dict[str, Any]:
    """The ``request`` of an AdmissionReview v1 about a ``karpenter.sh`` Provisioner.

    Raises ReviewError when ``review`` is not an object, has another apiVersion/kind, has no
    ``request`` object, no non-empty string ``request.uid``, an unknown ``request.operation``,
    or a ``request.kind`` other than ``karpenter.sh`` ``Provisioner``.
    """
    if not isinstance(review, dict):
        raise ReviewError(f"expected a JSON object (an AdmissionReview), got {type(review).__name__}")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if api_version != ADMISSION_API_VERSION or kind != ADMISSION_KIND:
        raise ReviewError(
            f"expected apiVersion {ADMISSION_API_VERSION} and kind {ADMISSION_KIND}, "
            f"got apiVersion {describe_value(api_version, 60)} and kind {describe_value(kind, 60)}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing or not a non-empty string")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise ReviewError(f"request.operation must be one of {', '.join(OPERATIONS)}, got {describe_value(operation, 60)}")
    gvk = request.get("kind")
    if not isinstance(gvk, dict):
        raise ReviewError("request.kind is missing or not an object")
    if gvk.get("group") != API_GROUP or gvk.get("kind") != KIND:
        raise ReviewError(
            f"this webhook admits {API_GROUP} {KIND} objects, got request.kind {describe_value(gvk, 100)}"
        )
    return request


def allowed(uid: str, *, patch: list[dict[str, Any]] | None = None, warnings: list[str] | None = None) -> dict[str, Any]:
    """An allowing AdmissionReview answer, with a base64 JSONPatch when ``patch`` is non-empty."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return _review(response)


def denied(
    uid: str, message: str, *, code: int = 422, reason: str = "Invalid", warnings: list[str] | None = None
) -> dict[str, Any]:
    """A denying AdmissionReview answer: ``status`` carries ``code``, ``reason`` and ``message``."""
    response: dict[str, Any] = {
        "uid": uid,
        "allowed": False,
        "status": {"status": "Failure", "code": code, "reason": reason, "message": message},
    }
    if warnings:
        response["warnings"] = list(warnings)
    return _review(response)


#: At most this many violations are spelled out in one denial; kubectl prints the message whole.
MAX_REPORTED_ERRORS = 50
#: Warnings become HTTP ``Warning`` headers; kube-apiserver may truncate those over 256 characters.
MAX_WARNING_CHARS = 256


def denial_message(errors: Sequence[FieldError]) -> str:
    """The errors joined by ``"; "``, the first :data:`MAX_REPORTED_ERRORS` of them and a count of the rest."""
    shown = "; ".join(str(e) for e in errors[:MAX_REPORTED_ERRORS])
    rest = len(errors) - MAX_REPORTED_ERRORS
    return shown if rest <= 0 else f"{shown}; and {rest} more error(s)"


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": response}


def _object_name(obj: Any, request: dict[str, Any]) -> str:
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        name = obj["metadata"].get("name") or obj["metadata"].get("generateName")
        if isinstance(name, str) and name:
            return name
    name = request.get("name")
    return name if isinstance(name, str) else ""


def _admit(review: Any, decide: Callable[[str, dict[str, Any], dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    request = parse_request(review)
    uid: str = request["uid"]
    if request["operation"] not in ("CREATE", "UPDATE") or request.get("subResource"):
        # DELETE carries no object and must never be blocked; status writes are the controller's.
        return allowed(uid)
    obj = request.get("object")
    if not isinstance(obj, dict):
        return denied(uid, f"request.object: expected a Provisioner object, got {describe_value(obj, 60)}",
                      code=400, reason="BadRequest")
    return decide(uid, request, obj)


def mutate(review: Any) -> dict[str, Any]:
    """Answer a mutating AdmissionReview: allowed, with a JSONPatch adding the missing defaults.

    The defaults are :func:`provisioner.api.defaults.defaulting_patch`'s; a Provisioner that
    already has them gets no patch. Defaulting never denies a Provisioner it can read (bad
    values are the validating webhook's to report); it denies (400 BadRequest) only a
    CREATE/UPDATE without an object. Raises ReviewError for a body that is not an
    AdmissionReview v1 request for a Provisioner.
    """

    def decide(uid: str, request: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
        ops = defaulting_patch(obj)
        if ops:
            log.debug("Defaulted Provisioner %s: %s", _object_name(obj, request), [op["path"] for op in ops])
        return allowed(uid, patch=ops)

    return _admit(review, decide)


def validate(review: Any) -> dict[str, Any]:
    """Answer a validating AdmissionReview: allowed, or denied (422 Invalid) listing every violation.

    Deprecated alias labels are allowed with a warning naming the label they stand for. On
    UPDATE, an object being deleted, or one whose spec is unchanged from ``oldObject``, is
    allowed (its problems become warnings) so that an object stored before a rule existed can
    still get finalizers and metadata changed. Raises ReviewError for a body that is not an
    AdmissionReview v1 request for a Provisioner.
    """

    def decide(uid: str, request: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
        result = validate_provisioner(obj)
        name = _object_name(obj, request)
        if result.ok:
            return allowed(uid, warnings=result.warnings)
        old = request.get("oldObject")
        metadata = obj.get("metadata")
        being_deleted = isinstance(metadata, dict) and metadata.get("deletionTimestamp") is not None
        unchanged = isinstance(old, dict) and "spec" in obj and old.get("spec") == obj.get("spec")
        if request["operation"] == "UPDATE" and (being_deleted or unchanged):
            why = "it is being deleted" if being_deleted else "its spec did not change"
            warning = f"Provisioner {name} is invalid (allowed because {why}): {result.message}"
            if len(warning) > MAX_WARNING_CHARS:  # kube-apiserver may cut longer warnings anyway
                warning = warning[: MAX_WARNING_CHARS - 3] + "..."
            return allowed(uid, warnings=[*result.warnings, warning])
        message = denial_message(result.errors)
        log.info("Denied Provisioner %s: %s", name, message)
        return denied(uid, message, warnings=result.warnings)

    return _admit(review, decide)
