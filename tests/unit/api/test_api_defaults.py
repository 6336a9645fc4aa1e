"""Defaulting as a pure function: only adds, is idempotent, never fails on odd input."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.api.defaults import DEFAULT_METADATA_OPTIONS, default_provisioner, defaulting_patch

ANY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6),
              st.sampled_from(["kubernetes.io/arch", "beta.kubernetes.io/arch", "karpenter.sh/capacity-type"])),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)),
    max_leaves=8,
)
REQUIREMENT = st.fixed_dictionaries({"key": st.sampled_from(
    ["kubernetes.io/arch", "beta.kubernetes.io/arch", "karpenter.sh/capacity-type", "example.com/x"]),
    "operator": st.sampled_from(["In", "Exists"])})
SPEC = st.fixed_dictionaries({}, optional={
    "requirements": st.one_of(st.lists(REQUIREMENT, max_size=3), ANY),
    "labels": st.one_of(st.dictionaries(st.sampled_from(["kubernetes.io/arch", "team"]), st.just("x")), ANY),
    "provider": st.one_of(st.fixed_dictionaries({}, optional={
        "launchTemplate": st.one_of(st.none(), st.just("lt")), "amiFamily": st.one_of(st.none(), st.just("AL2")),
        "metadataOptions": st.one_of(st.none(), st.just({"httpTokens": "optional"})),
        "subnetSelector": st.just({"a": "b"})}), ANY),
})
OBJECTS = st.one_of(SPEC.map(lambda spec: {"metadata": {"name": "p"}, "spec": spec}), ANY)


def leaves(obj: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    if isinstance(obj, dict) and obj:
        return {k: v for key, value in obj.items() for k, v in leaves(value, (*path, key)).items()}
    if isinstance(obj, list) and obj:
        return {k: v for i, value in enumerate(obj) for k, v in leaves(value, (*path, i)).items()}
    return {path: obj}


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(OBJECTS)
def test_defaulting_only_adds_and_is_idempotent(obj: Any) -> None:
    before = copy.deepcopy(obj)
    ops = defaulting_patch(obj)
    assert obj == before
    assert all(op["op"] == "add" for op in ops)
    if not isinstance(obj, dict):
        assert ops == []
        return
    defaulted = default_provisioner(obj)
    # every value that was set stays (a null may be filled in)
    original = {k: v for k, v in leaves(obj).items() if v is not None and v != {} and v != []}
    kept = leaves(defaulted)
    assert all(kept.get(k) == v for k, v in original.items())
    assert defaulting_patch(defaulted) == []


def test_metadata_defaults_are_a_fresh_copy_each_time() -> None:
    obj = {"spec": {"provider": {"subnetSelector": {"a": "b"}}}}
    first = default_provisioner(obj)
    first["spec"]["provider"]["metadataOptions"]["httpTokens"] = "optional"
    second = default_provisioner(obj)
    assert second["spec"]["provider"]["metadataOptions"] == DEFAULT_METADATA_OPTIONS
    assert DEFAULT_METADATA_OPTIONS["httpTokens"] == "required"
