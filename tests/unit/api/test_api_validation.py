"""validate_provisioner as a pure function: result shape, never raising, and the Kubernetes name rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.api.validation import (
    FieldError,
    ValidationResult,
    is_qualified_name,
    is_valid_label_value,
    iter_messages,
    validate_provisioner,
)

VALID: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "default"},
    "spec": {"provider": {"subnetSelector": {"Name": "*"}, "securityGroupSelector": {"Name": "*"}}},
}


def test_valid_object() -> None:
    assert validate_provisioner(VALID) == ValidationResult([], [])
    assert validate_provisioner(VALID).ok


def test_result_message_and_lines() -> None:
    result = validate_provisioner({**VALID, "spec": {**VALID["spec"], "weight": 0, "ttlSecondsAfterEmpty": -1}})
    assert result.errors == [  # in the order the fields appear in the object
        FieldError("spec.weight", 0, "must be between 1 and 100"),
        FieldError("spec.ttlSecondsAfterEmpty", -1, "cannot be negative"),
    ]
    assert result.message == ("spec.weight: invalid value 0: must be between 1 and 100; "
                              "spec.ttlSecondsAfterEmpty: invalid value -1: cannot be negative")
    assert list(iter_messages(result)) == result.message.split("; ")
    assert not result.ok


@pytest.mark.parametrize(("obj", "message"), [
    (None, "<root>: invalid value null: a Provisioner must be a JSON object"),
    ({"metadata": {"name": "a"}}, "spec: required field is missing"),
    ({"metadata": {"name": "a"}, "spec": {"provider": {"subnetSelector": {"a": "b"}, "launchTemplate": ""}}},
     'spec.provider.launchTemplate: invalid value "": must not be empty'),
])
def test_odd_objects(obj: Any, message: str) -> None:
    assert validate_provisioner(obj).message == message


@pytest.mark.parametrize(("key", "why"), [
    ("team", None), ("example.com/team", None), ("a.b-c_d", None), ("x" * 63, None),
    ("", "must not be empty"), ("/a", "prefix part must not be empty"), ("a/", "name part must not be empty"),
    ("x" * 64, "name part must be no more than 63 characters"),
    ("Example.com/a", "prefix part must be a lowercase DNS subdomain (e.g. example.com)"),
    ("a/b/c", "prefix part must be a lowercase DNS subdomain (e.g. example.com)"),
    ("-a", "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
           "alphanumeric character"),
])
def test_qualified_names(key: str, why: str | None) -> None:
    assert is_qualified_name(key) == why


@pytest.mark.parametrize(("value", "ok"), [("", True), ("a", True), ("a-b.c_d", True), ("-a", False),
                                           ("a b", False), ("x" * 63, True), ("x" * 64, False)])
def test_label_values(value: str, ok: bool) -> None:
    assert (is_valid_label_value(value) is None) == ok


ANY_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=8), c, max_size=3)),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(spec=st.dictionaries(st.sampled_from(["requirements", "labels", "taints", "startupTaints", "limits",
                                             "provider", "kubeletConfiguration", "weight", "ttlSecondsAfterEmpty"]),
                            ANY_JSON, max_size=5))
def test_never_raises_and_every_error_names_a_path(spec: dict[str, Any]) -> None:
    result = validate_provisioner({"metadata": {"name": "a"}, "spec": spec})
    for error in result.errors:
        assert error.path.startswith(("spec", "metadata")), error
        assert str(error).startswith(error.path + ": ")
