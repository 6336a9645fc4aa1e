"""The replacement relation: the codec of ``groupless.dev/replacements`` and its inverse."""

from typing import Any

import pytest

from provisioner.model import replacements
from provisioner.model.replacements import REPLACEMENTS_ANNOTATION


def node(name: str, recorded: str | None = None, *, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if recorded is not None:
        metadata["annotations"] = {REPLACEMENTS_ANNOTATION: recorded}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata}


@pytest.mark.parametrize(("raw", "expected"), [
    ('["b", "a"]', ("b", "a")),
    ("[]", ()),
    (None, None),
    ("not json", None),
    ('{"a": 1}', None),
    ('["a", 3]', None),
    ('[""]', None),
    (7, None),
])
def test_decode_reads_a_list_of_node_names_and_nothing_else(raw: object, expected: tuple[str, ...] | None) -> None:
    assert replacements.decode(raw) == expected


def test_encode_is_sorted_and_deduplicated_so_rewrites_are_identical() -> None:
    assert replacements.encode(["b", "a", "b"]) == '["a", "b"]'
    assert replacements.decode(replacements.encode(["n2", "n1"])) == ("n1", "n2")


def test_replaced_by_inverts_the_relation_including_draining_nodes() -> None:
    nodes = [
        node("old-1", '["new-1"]', deleting=True),
        node("old-2", '["new-1", "new-2"]'),
        node("new-1"),
        node("other", "garbage"),
        {"metadata": {"annotations": {REPLACEMENTS_ANNOTATION: '["x"]'}}},  # no name: ignored
        {"metadata": "odd"},
    ]
    assert replacements.replaced_by(nodes) == {"new-1": ("old-1", "old-2"), "new-2": ("old-2",)}
    assert replacements.replaces("new-2", nodes) == ("old-2",)
    assert replacements.replaces("other", nodes) == ()
