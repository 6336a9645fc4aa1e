import pytest

from provisioner.model.requirements import NOTHING, Requirement, RequirementError, Requirements

ZONE = "topology.kubernetes.io/zone"


def reqs(*items):
    return Requirements.from_node_selector_requirements(
        [{"key": k, "operator": o, "values": list(v)} for k, o, v in items]
    )


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (("In", ["a", "b"]), ("In", ["b", "c"]), "In [b]"),
        (("In", ["a", "b"]), ("NotIn", ["a"]), "In [b]"),
        (("NotIn", ["a"]), ("NotIn", ["b"]), "NotIn [a, b]"),
        (("Exists", []), ("In", ["a"]), "In [a]"),
        (("Exists", []), ("DoesNotExist", []), "In []"),  # needs the label, allows no value: no node
        (("NotIn", ["a"]), ("DoesNotExist", []), "DoesNotExist"),
        (("Exists", []), ("NotIn", ["a"]), "Exists and k NotIn [a]"),  # the label, with another value
        (("Gt", ["3"]), ("NotIn", ["7"]), "Gt 3 and k NotIn [7]"),
        (("Gt", ["3"]), ("In", ["1", "5", "x"]), "In [5]"),
    ],
)
def test_intersection_matrix(a, b, expected):
    left = Requirement.of("k", a[0], a[1])
    right = Requirement.of("k", b[0], b[1])
    assert str(left.intersection(right)) == f"k {expected}"


def test_gt_and_lt_bound_both_sides():
    result = Requirement.of("k", "Gt", ["3"]).intersection(Requirement.of("k", "Lt", ["5"]))
    assert [v for v in ("3", "4", "5", "x") if result.has(v)] == ["4"]
    assert Requirement.of("k", "Gt", ["3"]).intersection(Requirement.of("k", "Lt", ["4"])).is_empty()


def test_aliases_are_normalised():
    r = Requirements.from_labels({"failure-domain.beta.kubernetes.io/zone": "ap-south-1a"})
    assert list(r) == [ZONE]
    assert r.has("failure-domain.beta.kubernetes.io/zone", "ap-south-1a")


def test_infeasible_keys_only_for_positive_operators():
    assert reqs((ZONE, "In", ["a"]), (ZONE, "In", ["b"])).infeasible_keys() == (ZONE,)
    assert reqs((ZONE, "NotIn", ["a"]), (ZONE, "DoesNotExist", [])).infeasible_keys() == ()
    assert reqs((ZONE, "Exists", []), (ZONE, "DoesNotExist", [])).infeasible_keys() == (ZONE,)


def test_compatible_reasons_name_key_and_sets():
    provisioner = reqs((ZONE, "In", ["ap-south-1a", "ap-south-1b"]))
    pod = reqs((ZONE, "In", ["ap-south-1c"]))
    assert provisioner.compatible(pod) == (
        f"key {ZONE}, {ZONE} In [ap-south-1c] not in {ZONE} In [ap-south-1a, ap-south-1b]"
    )
    assert provisioner.compatible(reqs(("example.com/team", "In", ["a"]))) == (
        "label example.com/team does not have known values"
    )
    assert provisioner.compatible(reqs(("example.com/team", "NotIn", ["a"]))) is None


def test_gt_needs_one_integer():
    with pytest.raises(RequirementError, match="exactly one integer"):
        Requirement.of("k", "Gt", ["x"])
    with pytest.raises(RequirementError, match="not one of"):
        Requirement.of("k", "Near", ["x"])


@pytest.mark.parametrize(
    ("items", "absent_ok"),
    [
        ((("k", "In", ["a"]),), False),
        ((("k", "Exists", []),), False),
        ((("k", "Gt", ["3"]),), False),
        ((("k", "Lt", ["3"]),), False),
        ((("k", "NotIn", ["a"]),), True),
        ((("k", "DoesNotExist", []),), True),
        ((("k", "Gt", ["3"]), ("k", "NotIn", ["7"])), False),  # still needs a number to compare
    ],
)
def test_an_absent_label_meets_only_not_in_and_does_not_exist(items, absent_ok):
    assert reqs(*items)["k"].allows_absent() is absent_ok
    assert (reqs(*items).mismatch({}) is None) is absent_ok


def test_mismatch_follows_kube_node_selector_matching():
    term = reqs((ZONE, "In", ["a", "b"]), ("disk", "Gt", ["100"]), ("gpu", "DoesNotExist", []))
    assert term.mismatch({ZONE: "a", "disk": "150"}) is None
    assert term.mismatch({ZONE: "c", "disk": "150"}) == f"label {ZONE}=c does not meet {ZONE} In [a, b]"
    assert term.mismatch({ZONE: "a", "disk": "fast"}) == "label disk=fast does not meet disk Gt 100"
    assert term.mismatch({ZONE: "a"}) == "label disk is absent, disk Gt 100 required"
    assert term.mismatch({ZONE: "a", "disk": "150", "gpu": "t4"}) == "label gpu=t4 does not meet gpu DoesNotExist"
    # two In sets with nothing in common: no node meets them, with or without the label
    conflicting = reqs((ZONE, "In", ["a"]), (ZONE, "In", ["b"]))
    assert conflicting.mismatch({}) == f"no value of {ZONE} meets every requirement on it (an empty intersection)"


K = "example.com/gpu"
NOT_K80 = [{"key": K, "operator": "Exists"}, {"key": K, "operator": "NotIn", "values": ["k80"]}]


def test_exists_and_not_in_on_one_key_needs_the_label():
    term = Requirements.from_node_selector_requirements(NOT_K80)
    assert term[K] == Requirement(K, True, frozenset({"k80"}), exists=True)
    assert term.mismatch({}) == f"label {K} is absent, {K} Exists and {K} NotIn [k80] required"
    assert term.mismatch({K: "k80"}) == f"label {K}=k80 does not meet {K} Exists and {K} NotIn [k80]"
    assert term.mismatch({K: "t4"}) is None
    assert term[K].expressions() == NOT_K80[:1] + [
        {"key": K, "operator": "NotIn", "values": ["k80"]}]


def test_nothing_is_met_by_no_node_and_compatible_with_no_template():
    assert NOTHING.mismatch({}) == "an empty nodeSelectorTerm (it selects no node) cannot be met"
    assert NOTHING.infeasible_keys() != ()
    assert Requirements().compatible(NOTHING) == "an empty nodeSelectorTerm (it selects no node) cannot be met"
    assert (reqs((ZONE, "In", ["a"])) & NOTHING).mismatch({ZONE: "a"}) is not None
