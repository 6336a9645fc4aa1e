"""The requirements algebra: label constraints as immutable set values.

Modelled on Karpenter's ``pkg/scheduling/requirement.go`` and ``requirements.go``, with one
deliberate change: nothing here mutates. A :class:`Requirement` is a set of allowed values of
one label key, stored as ``(complement, values, greater_than, less_than)``:

=================  ==========  ===========  =====================
operator           complement  values       bounds
=================  ==========  ===========  =====================
``In [a, b]``      False       {a, b}       -
``NotIn [a]``      True        {a}          -
``Exists``         True        {}           -
``DoesNotExist``   False       {}           -
``Gt n``           True        {}           greater_than = n
``Lt n``           True        {}           less_than = n
=================  ==========  ===========  =====================

so intersection is plain set algebra. Keys are normalised on input (deprecated aliases such as
``failure-domain.beta.kubernetes.io/zone`` become ``topology.kubernetes.io/zone``).
:class:`Requirements` maps keys to requirements; ``a & b`` intersects key by key.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.model.labels import normalize_label_key

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
#: Operators that need the label to be present: an empty intersection with one of these on
#: either side cannot be met (NotIn and DoesNotExist are met by an absent label).
POSITIVE_OPERATORS = frozenset({IN, EXISTS, GT, LT})


class RequirementError(ValueError):
    """A requirement that cannot be built: unknown operator, or Gt/Lt without one integer."""


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """The set of values allowed for one label key.

    Build with :meth:`of` (operator form) rather than the constructor.
    """

    key: str
    complement: bool
    values: frozenset[str]
    greater_than: int | None = None
    less_than: int | None = None

    @classmethod
    def of(cls, key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
        """A requirement from the Kubernetes operator form.

        Raises RequirementError for an unknown operator, or for Gt/Lt whose values are not
        exactly one integer (kube-apiserver's rule for node selector requirements).
        """
        key = normalize_label_key(key)
        vals = frozenset(str(v) for v in values)
        if operator == IN:
            return cls(key, False, vals)
        if operator == NOT_IN:
            return cls(key, True, vals)
        if operator == EXISTS:
            return cls(key, True, frozenset())
        if operator == DOES_NOT_EXIST:
            return cls(key, False, frozenset())
        if operator in (GT, LT):
            if len(vals) != 1 or _as_int(next(iter(vals))) is None:
                raise RequirementError(
                    f"operator {operator} for key {key} needs exactly one integer value, got {sorted(vals)}"
                )
            bound = int(next(iter(vals)))
            if operator == GT:
                return cls(key, True, frozenset(), greater_than=bound)
            return cls(key, True, frozenset(), less_than=bound)
        raise RequirementError(f"operator {operator!r} for key {key} is not one of {', '.join(OPERATORS)}")

    # ---------------------------------------------------------------------------- queries
    @property
    def operator(self) -> str:
        """The Kubernetes operator that describes this set (Gt/Lt when bounded)."""
        if self.complement:
            if self.values:
                return NOT_IN
            if self.greater_than is not None and self.less_than is None:
                return GT
            if self.less_than is not None and self.greater_than is None:
                return LT
            return EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def _within_bounds(self, value: str) -> bool:
        if self.greater_than is None and self.less_than is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        if self.greater_than is not None and number <= self.greater_than:
            return False
        return not (self.less_than is not None and number >= self.less_than)

    def has(self, value: str) -> bool:
        """True when ``value`` is allowed."""
        if self.complement:
            return value not in self.values and self._within_bounds(value)
        return value in self.values and self._within_bounds(value)

    def __len__(self) -> int:
        """Number of allowed values; a complement set counts as unbounded (``sys.maxsize``)."""
        if self.complement:
            if self.greater_than is not None and self.less_than is not None:
                return max(0, self.less_than - self.greater_than - 1 - len(self.values))
            return sys.maxsize - len(self.values)
        return len(self.values)

    def is_empty(self) -> bool:
        """True when no value is allowed (DoesNotExist, or an empty intersection)."""
        return len(self) == 0

    def allows_absent(self) -> bool:
        """True when a node without the label meets this requirement: NotIn and DoesNotExist.

        In, Exists, Gt and Lt need the label (kube's ``labels.Selector``: a Gt or Lt with NotIn
        values still needs a number to compare). An empty intersection of In sets reads as
        DoesNotExist here; :meth:`Requirements.infeasible_keys` tells those apart.
        """
        if self.greater_than is not None or self.less_than is not None:
            return False
        return self.complement == bool(self.values)

    def any_value(self) -> str | None:
        """The smallest allowed value of a finite set; None for a complement set."""
        if self.complement:
            return None
        return min(self.values) if self.values else None

    # ---------------------------------------------------------------------------- algebra
    def intersection(self, other: Requirement) -> Requirement:
        """The values allowed by both (keys must match)."""
        greater = _max_opt(self.greater_than, other.greater_than)
        less = _min_opt(self.less_than, other.less_than)
        if self.complement and other.complement:
            values = self.values | other.values
            complement = True
        elif self.complement:
            values = other.values - self.values
            complement = False
        elif other.complement:
            values = self.values - other.values
            complement = False
        else:
            values = self.values & other.values
            complement = False
        result = Requirement(self.key, complement, frozenset(values), greater, less)
        if not complement and (greater is not None or less is not None):
            result = Requirement(
                self.key, False, frozenset(v for v in values if result._within_bounds(v)), greater, less
            )
        if greater is not None and less is not None and less - greater <= 1:
            return Requirement(self.key, False, frozenset(), greater, less)
        return result

    def to_dict(self) -> dict[str, Any]:
        """The NodeSelectorRequirement form ``{"key", "operator", "values"}``."""
        operator = self.operator
        if operator == GT:
            return {"key": self.key, "operator": GT, "values": [str(self.greater_than)]}
        if operator == LT:
            return {"key": self.key, "operator": LT, "values": [str(self.less_than)]}
        if operator in (EXISTS, DOES_NOT_EXIST):
            return {"key": self.key, "operator": operator}
        return {"key": self.key, "operator": operator, "values": sorted(self.values)}

    def __str__(self) -> str:
        operator = self.operator
        if operator in (EXISTS, DOES_NOT_EXIST):
            return f"{self.key} {operator}"
        if operator == GT:
            return f"{self.key} Gt {self.greater_than}"
        if operator == LT:
            return f"{self.key} Lt {self.less_than}"
        return f"{self.key} {operator} [{', '.join(sorted(self.values))}]"


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _merge(existing: Requirement, incoming: Requirement, infeasible: set[str]) -> Requirement:
    result = existing.intersection(incoming)
    if result.is_empty() and (
        existing.operator in POSITIVE_OPERATORS or incoming.operator in POSITIVE_OPERATORS
    ):
        infeasible.add(result.key)
    return result


class Requirements(Mapping[str, Requirement]):
    """An immutable map of label key to :class:`Requirement`; absent keys are unconstrained."""

    __slots__ = ("_by_key", "_hash", "_infeasible")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        by_key: dict[str, Requirement] = {}
        infeasible: set[str] = set()
        for requirement in requirements:
            existing = by_key.get(requirement.key)
            if existing is None:
                by_key[requirement.key] = requirement
            else:
                by_key[requirement.key] = _merge(existing, requirement, infeasible)
        self._by_key = by_key
        self._infeasible = frozenset(infeasible)
        self._hash: int | None = None

    # ---------------------------------------------------------------------- constructors
    @classmethod
    def from_node_selector_requirements(cls, items: Iterable[Mapping[str, Any]]) -> Requirements:
        """From Kubernetes ``[{"key", "operator", "values"}]`` (matchExpressions form).

        Raises RequirementError on an unknown operator or a malformed Gt/Lt.
        """
        return cls(Requirement.of(str(i["key"]), str(i["operator"]), i.get("values") or ()) for i in items)

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        """Each label ``k=v`` as ``k In [v]`` (how nodeSelector and Provisioner labels act)."""
        return cls(Requirement.of(k, IN, (v,)) for k, v in labels.items())

    # ---------------------------------------------------------------------- mapping
    def __getitem__(self, key: str) -> Requirement:
        return self._by_key[normalize_label_key(key)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and normalize_label_key(key) in self._by_key

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._by_key.values()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Requirements):
            return self._by_key == other._by_key
        return NotImplemented

    def __repr__(self) -> str:
        return "Requirements(" + "; ".join(str(r) for _, r in sorted(self._by_key.items())) + ")"

    def __str__(self) -> str:
        return ", ".join(str(r) for _, r in sorted(self._by_key.items()))

    # ---------------------------------------------------------------------- algebra
    def __and__(self, other: Requirements) -> Requirements:
        return self.intersection(other)

    def intersection(self, other: Requirements) -> Requirements:
        """Key-by-key intersection; a key present on one side only is kept as it is."""
        if not other._by_key:
            return self
        if not self._by_key:
            return other
        merged = dict(self._by_key)
        infeasible = set(self._infeasible | other._infeasible)
        for key, requirement in other._by_key.items():
            existing = merged.get(key)
            merged[key] = requirement if existing is None else _merge(existing, requirement, infeasible)
        result = Requirements()
        result._by_key = merged
        result._infeasible = frozenset(infeasible)
        return result

    def with_requirement(self, requirement: Requirement) -> Requirements:
        """A copy with ``requirement`` intersected in."""
        return self.intersection(Requirements((requirement,)))

    def without(self, key: str) -> Requirements:
        """A copy without ``key``."""
        return Requirements(r for k, r in self._by_key.items() if k != normalize_label_key(key))

    def has(self, key: str, value: str) -> bool:
        """True when ``value`` is allowed for ``key`` (an absent key allows everything)."""
        requirement = self._by_key.get(normalize_label_key(key))
        return True if requirement is None else requirement.has(value)

    def infeasible_keys(self) -> tuple[str, ...]:
        """Keys whose intersection is empty although an In/Exists/Gt/Lt asked for a value.

        ``zone In [a] & zone In [b]`` is infeasible; ``zone NotIn [a] & zone DoesNotExist``
        is not (a node without the label meets both).
        """
        return tuple(sorted(self._infeasible))

    def intersects(self, incoming: Requirements) -> str | None:
        """None when every shared key has a common value, else a reason naming key and sets.

        As Karpenter's ``Requirements.Intersects``: an empty intersection is still fine when
        both sides are NotIn/DoesNotExist on that key.
        """
        for key in sorted(self._by_key.keys() & incoming._by_key.keys()):
            existing = self._by_key[key]
            wanted = incoming._by_key[key]
            if existing.intersection(wanted).is_empty():
                if wanted.operator in (NOT_IN, DOES_NOT_EXIST) and existing.operator in (NOT_IN, DOES_NOT_EXIST):
                    continue
                return f"key {key}, {wanted} not in {existing}"
        return None

    def compatible(self, incoming: Requirements, allow_undefined: frozenset[str] = frozenset()) -> str | None:
        """None when a node with these requirements can satisfy ``incoming``, else the reason.

        As Karpenter's ``Requirements.Compatible``: a key ``incoming`` asks values of (In,
        Exists, Gt, Lt) must be defined here unless it is in ``allow_undefined`` (the
        well-known labels an instance type fills in at launch); then shared keys must intersect.
        """
        for key in sorted(incoming._by_key.keys() - self._by_key.keys()):
            if key in allow_undefined:
                continue
            operator = incoming._by_key[key].operator
            if operator in (NOT_IN, DOES_NOT_EXIST):
                continue
            return f"label {key} does not have known values"
        return self.intersects(incoming)

    def mismatch(self, labels: Mapping[str, str]) -> str | None:
        """None when a node with ``labels`` meets every requirement, else why not (the first key unmet).

        kube-scheduler's node selector term match (``component-helpers`` ``nodeaffinity``): a
        present label must be an allowed value; an absent one meets only NotIn and DoesNotExist
        (:meth:`Requirement.allows_absent`); a key whose intersection is empty although an In,
        Exists, Gt or Lt asked for a value is met by no node.
        """
        for key, requirement in self._by_key.items():
            if key in self._infeasible:
                return f"{requirement} cannot be met (an empty intersection)"
            value = labels.get(key)
            if value is None:
                if not requirement.allows_absent():
                    return f"label {key} is absent, {requirement} required"
            elif not requirement.has(value):
                return f"label {key}={value} does not meet {requirement}"
        return None

    def labels(self) -> dict[str, str]:
        """Labels implied by single-valued In requirements (what a new node will carry)."""
        return {
            k: next(iter(r.values))
            for k, r in self._by_key.items()
            if not r.complement and len(r.values) == 1
        }

    def to_list(self) -> list[dict[str, Any]]:
        """The NodeSelectorRequirement list, sorted by key."""
        return [r.to_dict() for _, r in sorted(self._by_key.items())]


EMPTY_REQUIREMENTS = Requirements()
