import json

import pytest

from provisioner.model import nominations as nom
from provisioner.model.nominations import NominatedPod, Nominations, NominationsError
from provisioner.model.resources import GIB, Resources

DEADLINE = 1_767_225_900.0  # 2026-01-01T00:05:00Z

SAMPLE = (
    '{"deadline":"2026-01-01T00:05:00Z","pods":{'
    '"uid-a":{"pod":"default/inflate-a","requests":{"cpu":500,"memory":1073741824}},'
    '"uid-b":{"pod":"default/inflate-b","requests":{"cpu":250}}}}'
)


def sample() -> Nominations:
    return Nominations(
        deadline=DEADLINE,
        pods={
            "uid-b": NominatedPod("default/inflate-b", Resources({"cpu": 250})),
            "uid-a": NominatedPod("default/inflate-a", Resources({"cpu": 500, "memory": GIB})),
        },
    )


def test_encode_is_compact_sorted_and_matches_the_contract() -> None:
    assert nom.encode(sample()) == SAMPLE


def test_decode_round_trips() -> None:
    decoded = nom.decode(SAMPLE)
    assert decoded == sample()
    assert decoded.deadline == DEADLINE
    assert decoded.pods["uid-a"].requests == Resources({"cpu": 500, "memory": GIB})
    assert not decoded.malformed
    assert nom.encode(decoded) == SAMPLE


def test_encode_rounds_fractional_deadline_up() -> None:
    text = nom.encode(Nominations(deadline=DEADLINE + 0.25))
    assert json.loads(text) == {"deadline": "2026-01-01T00:05:01Z", "pods": {}}


@pytest.mark.parametrize("value", [None, "", "   "])
def test_absent_annotation_is_empty(value: str | None) -> None:
    result = nom.decode(value)
    assert result == nom.EMPTY
    assert not result
    assert not result.malformed


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("{", "not JSON"),
        ("[]", "expected a JSON object, got list"),
        ('{"pods": {}}', "deadline: expected an RFC 3339 timestamp, got None"),
        ('{"deadline": "tomorrow", "pods": {}}', "deadline: expected an RFC 3339 timestamp, got 'tomorrow'"),
        ('{"deadline": "2026-01-01T00:05:00", "pods": {}}', "has no time zone"),
        ('{"deadline": "2026-01-01T00:05:00Z", "pods": []}', "pods: expected an object"),
        ('{"deadline": "2026-01-01T00:05:00Z", "pods": {"u": 3}}', "pods.u: expected an object, got 3"),
        ('{"deadline": "2026-01-01T00:05:00Z", "pods": {"u": {"pod": "nons"}}}', 'pods.u.pod: expected "<namespace>/<name>"'),
        ('{"deadline": "2026-01-01T00:05:00Z", "pods": {"u": {"pod": "a/b", "requests": {"cpu": true}}}}',
         "pods.u.requests.cpu: expected an integer, got True"),
        ('{"deadline": "2026-01-01T00:05:00Z", "pods": {"u": {"pod": "a/b", "requests": {"cpu": -1}}}}',
         "pods.u.requests.cpu: negative amount -1"),
        ('{"deadline": "2026-01-01T00:05:00Z", "pods": {"u": {"pod": "a/b", "requests": {"cpu": "lots"}}}}',
         "pods.u.requests.cpu: invalid quantity 'lots'"),
        ('{"deadline": "2026-01-01T00:05:00Z", "pods": {"u": {"pod": "a/b", "requests": [1]}}}',
         "pods.u.requests: expected an object"),
    ],
)
def test_malformed_decodes_to_no_reservation_and_says_why(value: str, fragment: str) -> None:
    result = nom.decode(value)
    assert not result
    assert result.malformed
    assert result.error is not None and fragment in result.error
    with pytest.raises(NominationsError, match=None) as raised:
        nom.parse(value)
    assert fragment in str(raised.value)


def test_deeply_nested_json_does_not_crash() -> None:
    result = nom.decode("[" * 100_000 + "]" * 100_000)
    assert result.malformed and not result


def test_hand_written_quantities_and_offsets_are_read() -> None:
    text = ('{"deadline": "2026-01-01T01:05:00+01:00", '
            '"pods": {"u": {"pod": "a/b", "requests": {"cpu": "1500m", "memory": "1Gi"}}}}')
    result = nom.decode(text)
    assert result.deadline == DEADLINE
    assert result.pods["u"] == NominatedPod("a/b", Resources({"cpu": 1500, "memory": GIB}))


def test_active_drops_bound_or_deleted_pods() -> None:
    result = nom.active(sample(), DEADLINE - 1, {"uid-b", "other"})
    assert set(result.pods) == {"uid-a"}
    assert result.deadline == DEADLINE


def test_active_keeps_everything_before_deadline() -> None:
    original = sample()
    assert nom.active(original, DEADLINE - 0.001, set()) == original


def test_active_ends_everything_at_deadline() -> None:
    result = nom.active(sample(), DEADLINE, set())
    assert not result
    assert result.deadline == DEADLINE


def test_active_clears_error() -> None:
    broken = nom.decode("{")
    assert not nom.active(broken, 0.0, set()).malformed


def test_reserved_sums_requests() -> None:
    assert nom.reserved(sample()) == Resources({"cpu": 750, "memory": GIB, "pods": 2})
    assert nom.reserved(nom.EMPTY) == Resources()
    assert nom.reserved(nom.active(sample(), DEADLINE - 1, {"uid-a"})) == Resources({"cpu": 250, "pods": 1})


def test_reserved_counts_a_pod_slot_once() -> None:
    n = Nominations(DEADLINE, {"u": NominatedPod("a/b", Resources({"cpu": 100, "pods": 1}))})
    assert nom.reserved(n) == Resources({"cpu": 100, "pods": 1})


def test_nominate_adds_and_sets_deadline() -> None:
    added = nom.nominate(nom.EMPTY, "uid-c", "ns/c", {"cpu": 100}, deadline=DEADLINE)
    assert added == Nominations(DEADLINE, {"uid-c": NominatedPod("ns/c", Resources({"cpu": 100}))})
    again = nom.nominate(added, "uid-d", "ns/d", {"memory": 5})
    assert again.deadline == DEADLINE
    assert sorted(again.pods) == ["uid-c", "uid-d"]
