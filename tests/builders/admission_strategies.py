"""hypothesis strategies for bodies thrown at the webhook, and the check every answer must pass."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
from hypothesis import strategies as st

from tests.builders.admission import review, valid

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "AL2023", "", "*", "-1", "1Gi",
                     "kubernetes.io/arch", "beta.kubernetes.io/arch", "karpenter.sh/provisioner-name",
                     "NoSchedule", "enabled", "required"]),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=10), children, max_size=4)),
    max_leaves=8,
)
FIELDS = ["apiVersion", "kind", "metadata", "spec", "status", "requirements", "labels", "taints", "startupTaints",
          "limits", "resources", "provider", "subnetSelector", "securityGroupSelector", "amiFamily",
          "launchTemplate", "metadataOptions", "httpPutResponseHopLimit", "tags", "blockDeviceMappings", "ebs",
          "kubeletConfiguration", "clusterDNS", "maxPods", "ttlSecondsAfterEmpty", "weight", "key", "operator",
          "values", "effect", "value", "name"]


def _containers(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if isinstance(obj, (dict, list)) else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += _containers(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found += _containers(value, (*path, i))
    return found


@st.composite
def mutated_provisioner(draw: st.DrawFn) -> Any:
    """A valid Provisioner with a few random edits: values replaced, fields added or deleted."""
    obj = valid()
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        containers = _containers(obj)
        path = draw(st.sampled_from(containers))
        target: Any = obj
        for segment in path:
            target = target[segment]
        action = draw(st.sampled_from(["set", "delete", "add"]))
        if isinstance(target, dict):
            key = draw(st.sampled_from(sorted(target) + FIELDS)) if action != "add" else draw(
                st.one_of(st.sampled_from(FIELDS), st.text(max_size=8)))
            if action == "delete":
                target.pop(key, None)
            else:
                target[key] = draw(JSON)
        elif target:
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            if action == "delete":
                del target[index]
            else:
                target[index] = draw(JSON)
    return obj


@st.composite
def admission_review(draw: st.DrawFn) -> Any:
    """Mostly well-formed reviews with odd objects, some with broken envelopes."""
    obj = draw(st.one_of(mutated_provisioner(), JSON))
    body = review(obj, uid=draw(st.text(min_size=1, max_size=12)),
                  operation=draw(st.sampled_from(["CREATE", "UPDATE", "CREATE", "DELETE"])),
                  old=draw(st.sampled_from([None, obj, valid()])))
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        section = draw(st.sampled_from([body, body["request"]]))
        key = draw(st.sampled_from(sorted(section)))
        section[key] = draw(JSON)
    return body


BODIES = st.one_of(
    admission_review().map(lambda b: json.dumps(b).encode()),
    JSON.map(lambda b: json.dumps(b).encode()),
    st.binary(max_size=64),
    admission_review().map(lambda b: json.dumps(b).encode()).map(lambda raw: raw[: len(raw) // 2]),
)


def check_answer(status: int, body: bytes, sent: bytes) -> None:
    """A 400 with one line of text, or a 200 AdmissionReview that kube-apiserver accepts."""
    assert status in (200, 400), (status, body[:200])
    if status == 400:
        text = body.decode()
        assert text.startswith("bad request: ") and text.count("\n") == 1
        return
    answer = json.loads(body)
    request = json.loads(sent)["request"]
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == request["uid"]
    assert isinstance(response["allowed"], bool)
    assert set(response) <= {"uid", "allowed", "status", "patch", "patchType", "warnings"}
    if not response["allowed"]:
        assert response["status"]["code"] in (400, 422), response  # 500 would mean a bug was caught
        assert isinstance(response["status"]["message"], str) and response["status"]["message"]
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        patch = json.loads(base64.b64decode(response["patch"]))
        assert all(op["op"] == "add" for op in patch)
        jsonpatch.apply_patch(copy.deepcopy(request["object"]), patch)
    for warning in response.get("warnings", []):
        assert isinstance(warning, str)
