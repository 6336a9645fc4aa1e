"""``Resources.short_only_within``: would the amounts fit the free room but for the part held for others."""

import pytest

from provisioner.model.resources import Resources

FREE = Resources({"cpu": 2000, "memory": 8 << 30, "pods": 10})


@pytest.mark.parametrize(
    ("requests", "left", "short"),
    [
        ({"cpu": 1000}, {"cpu": 1000, "memory": 8 << 30, "pods": 10}, False),  # fits beside the held room
        ({"cpu": 1500}, {"cpu": 1000, "memory": 8 << 30, "pods": 10}, True),  # only the held cpu would fit it
        ({"cpu": 2500}, {"cpu": 1000, "memory": 8 << 30, "pods": 10}, False),  # does not fit the room at all
        ({"cpu": 500, "memory": 6 << 30}, {"cpu": 1500, "memory": 4 << 30, "pods": 10}, True),  # memory held
        ({"cpu": 500, "pods": 1}, {"cpu": 1500, "memory": 4 << 30}, True),  # every pod slot is held
        ({"nvidia.com/gpu": 1}, {"cpu": 1000}, False),  # absent from the room: kube-scheduler's call
    ],
)
def test_short_only_within_the_held_part(requests: dict[str, int], left: dict[str, int], short: bool) -> None:
    assert Resources(requests).short_only_within(FREE, Resources(left)) is short
