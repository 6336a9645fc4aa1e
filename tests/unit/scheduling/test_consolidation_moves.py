"""The pure parts of consolidation's search: which sets are tried, how many nodes a move may take."""

from __future__ import annotations

import pytest

from provisioner.scheduling.consolidation import Candidate, max_disrupted, order, prefix_sizes


@pytest.mark.parametrize(("count", "limit", "sizes"), [
    (1, 10, []),
    (2, 10, [2]),
    (5, 10, [2, 3, 4, 5]),
    (40, 40, [2, 3, 4, 6, 8, 12, 16, 24, 32, 40]),
    (40, 10, [2, 3, 4, 6, 8, 10]),
])
def test_prefix_sizes_grow_by_half_steps_up_to_the_limit(count: int, limit: int, sizes: list[int]) -> None:
    assert prefix_sizes(count, limit) == sizes


@pytest.mark.parametrize(("total", "share", "disrupted", "allowed"), [
    (0, 0.1, 0, 0),
    (3, 0.1, 0, 1),  # at least one node
    (3, 0.1, 1, 0),
    (100, 0.1, 4, 6),
    (100, 1.0, 0, 100),
])
def test_max_disrupted_is_a_share_of_the_nodes_less_those_going(total: int, share: float, disrupted: int,
                                                                allowed: int) -> None:
    assert max_disrupted(total, share, disrupted) == allowed


def test_candidates_are_ordered_least_full_first_then_fewer_pods_then_pricier() -> None:
    def c(name: str, utilization: float, price: float) -> Candidate:
        return Candidate(name=name, provisioner="p", price=price, capacity_type="on-demand", instance_type="m5.large",
                         utilization=utilization)

    assert [x.name for x in order([c("a", 0.5, 0.1), c("b", 0.2, 0.1), c("c", 0.2, 0.3), c("d", 0.0, 0.1)])] == [
        "d", "c", "b", "a"]
