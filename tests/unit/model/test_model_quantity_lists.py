"""Resource lists: the strict and the lenient reader, and the one formatter."""

from __future__ import annotations

import pytest

from provisioner.model.quantity import (
    QuantityError,
    format_quantity,
    parse_resource_list,
    readable_resource_list,
    to_wire_resource_list,
)
from provisioner.model.resources import GIB, MIB, Resources


def test_strict_reader_returns_resources_and_names_the_field() -> None:
    assert parse_resource_list({"cpu": "3820m", "memory": "29217Mi", "pods": "58"}) == Resources(
        {"cpu": 3820, "memory": 29217 * MIB, "pods": 58})
    assert parse_resource_list(None) == Resources() and parse_resource_list({}) == Resources()
    with pytest.raises(QuantityError, match=r"^node n: status.allocatable.cpu: invalid quantity 'lots'"):
        parse_resource_list({"cpu": "lots"}, "node n: status.allocatable")
    with pytest.raises(QuantityError, match=r"^memory: invalid quantity"):
        parse_resource_list({"memory": "x"})
    with pytest.raises(QuantityError, match=r"^status.capacity: expected a resource map, got \['4'\]$"):
        parse_resource_list(["4"], "status.capacity")


def test_lenient_reader_skips_unreadable_entries_and_keeps_zeros() -> None:
    skipped: list[tuple[str, object]] = []
    result = readable_resource_list({"cpu": "4", "memory": "bogus", "nvidia.com/gpu": "0"},
                                    lambda name, value, error: skipped.append((name, value)))
    assert result == {"cpu": 4000, "nvidia.com/gpu": 0}
    assert skipped == [("memory", "bogus")]
    assert readable_resource_list(None) == {} and readable_resource_list("4") == {}


def test_one_formatter_in_kubelets_form() -> None:
    assert [format_quantity("cpu", v) for v in (4000, 3820, 0)] == ["4", "3820m", "0"]
    assert format_quantity("memory", 30310 * MIB) == "30310Mi"
    assert format_quantity("memory", 16 * GIB) == "16Gi"
    assert format_quantity("memory", 2048) == "2Ki"
    assert format_quantity("memory", 1000) == "1000"
    assert format_quantity("memory", 0) == "0"
    assert format_quantity("storage", 20 * GIB) == "20Gi"
    assert format_quantity("hugepages-2Mi", 4 * MIB) == "4Mi"
    assert format_quantity("pods", 58) == "58"
    assert to_wire_resource_list({"pods": 58, "cpu": 4000, "memory": 16 * GIB}) == {
        "cpu": "4", "memory": "16Gi", "pods": "58"}
    assert parse_resource_list(to_wire_resource_list({"cpu": 3820, "memory": 29217 * MIB})) == Resources(
        {"cpu": 3820, "memory": 29217 * MIB})
