"""The requirements algebra: label constraints as immutable set values.

Modelled on Karpenter's ``pkg/scheduling/requirement.go`` and ``requirements.go``, with one
deliberate change: nothing here mutates. A :class:`Requirement` is a set of allowed values of
one label key, stored as ``(complement, values, greater_than, less_than, exists)``:

=================  ==========  ===========  =====================  ======
operator           complement  values       bounds                 exists
=================  ==========  ===========  =====================  ======
``In [a, b]``      False       {a, b}       -                      True
``NotIn [a]``      True        {a}          -                      False
``Exists``         True        {}           -                      True
``DoesNotExist``   False       {}           -                      False
``Gt n``           True        {}           greater_than = n       True
``Lt n``           True        {}           less_than = n          True
=================  ==========  ===========  =====================  ======

so intersection is plain set algebra. ``exists`` says whether a node must carry the label at
all: kube's label selectors never let an absent label meet In, Exists, Gt or Lt, and an
intersection needs the label when either side does (``Exists`` AND ``NotIn [a]`` is met only by
a node carrying the label with another value; a value set that is empty although the label is
needed is met by no node). Keys are normalised on input (deprecated aliases such as
``failure-domain.beta.kubernetes.io/zone`` become ``topology.kubernetes.io/zone``).
:class:`Requirements` maps keys to requirements; ``a & b`` intersects key by key.
:data:`NOTHING` is met by no node (what an empty ``nodeSelectorTerm`` selects).
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


class RequirementError(ValueError):
    """A requirement that cannot be built: unknown operator, or Gt/Lt without one integer."""


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """The set of values allowed for one label key, and whether the label must be there at all.

    Build with :meth:`of` (operator form) rather than the constructor. ``exists``: a node
    without the label does not meet it (In, Exists, Gt, Lt, and any intersection with one of
    them).
    """

    key: str
    complement: bool
    values: frozenset[str]
    greater_than: int | None = None
    less_than: int | None = None
    exists: bool = False

    @classmethod
    def of(cls, key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
        """A requirement from the Kubernetes operator form.

        Raises RequirementError for an unknown operator, or for Gt/Lt whose values are not
        exactly one integer (kube-apiserver's rule for node selector requirements).
        """
        key = normalize_label_key(key)
        vals = frozenset(str(v) for v in values)
        if operator == IN:
            return cls(key, False, vals, exists=True)
        if operator == NOT_IN:
            return cls(key, True, vals)
        if operator == EXISTS:
            return cls(key, True, frozenset(), exists=True)
        if operator == DOES_NOT_EXIST:
            return cls(key, False, frozenset())
        if operator in (GT, LT):
            if len(vals) != 1 or _as_int(next(iter(vals))) is None:
                raise RequirementError(
                    f"operator {operator} for key {key} needs exactly one integer value, got {sorted(vals)}"
                )
            bound = int(next(iter(vals)))
            if operator == GT:
                return cls(key, True, frozenset(), greater_than=bound, exists=True)
            return cls(key, True, frozenset(), less_than=bound, exists=True)
        raise RequirementError(f"operator {operator!r} for key {key} is not one of {', '.join(OPERATORS)}")

    # ---------------------------------------------------------------------------- queries
    @property
    def operator(self) -> str:
        """The Kubernetes operator that describes this set best (Gt/Lt when bounded).

        A set no single operator describes (``Exists`` AND ``NotIn [a]``, ``Gt 3`` AND
        ``NotIn [7]``) answers NotIn; :meth:`expressions` gives every operator it needs.
        """
        if self.complement:
            if self.values:
                return NOT_IN
            if self.greater_than is not None and self.less_than is None:
                return GT
            if self.less_than is not None and self.greater_than is None:
                return LT
            return EXISTS if self.exists else NOT_IN
        return IN if self.values or self.exists else DOES_NOT_EXIST

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

    def infeasible(self) -> bool:
        """True when no node meets this requirement: the label is needed and no value is allowed."""
        return self.exists and self.is_empty()

    def allows_absent(self) -> bool:
        """True when a node without the label meets this requirement: NotIn and DoesNotExist.

        In, Exists, Gt and Lt need the label, and so does any intersection with one of them
        (kube's ``labels.Selector`` ANDs the expressions of a term: ``Exists`` AND ``NotIn [a]``
        needs the label; a Gt or Lt with NotIn values still needs a number to compare).
        """
        return not self.exists

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
        exists = self.exists or other.exists
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
        result = Requirement(self.key, complement, frozenset(values), greater, less, exists)
        if not complement and (greater is not None or less is not None):
            result = Requirement(
                self.key, False, frozenset(v for v in values if result._within_bounds(v)), greater, less, exists
            )
        if greater is not None and less is not None and less - greater <= 1:
            return Requirement(self.key, False, frozenset(), greater, less, exists)
        return result

    def expressions(self) -> list[dict[str, Any]]:
        """The NodeSelectorRequirements (``{"key", "operator", "values"}``) whose AND is this set.

        One for a plain operator; ``Exists`` and ``NotIn``, or ``Gt``/``Lt`` and ``NotIn``, for
        the sets an intersection makes; ``In []`` for a set no node meets.
        """
        key = self.key
        if not self.complement:
            if self.values or self.exists:
                return [{"key": key, "operator": IN, "values": sorted(self.values)}]
            return [{"key": key, "operator": DOES_NOT_EXIST}]
        found: list[dict[str, Any]] = []
        if self.greater_than is not None:
            found.append({"key": key, "operator": GT, "values": [str(self.greater_than)]})
        if self.less_than is not None:
            found.append({"key": key, "operator": LT, "values": [str(self.less_than)]})
        if self.exists and not found:
            found.append({"key": key, "operator": EXISTS})
        if self.values or not found:
            found.append({"key": key, "operator": NOT_IN, "values": sorted(self.values)})
        return found

    def __str__(self) -> str:
        if self.key == _NOTHING_KEY:
            return "an empty nodeSelectorTerm (it selects no node)"
        parts = []
        for expression in self.expressions():
            operator = expression["operator"]
            values = expression.get("values")
            if values is None:
                parts.append(f"{self.key} {operator}")
            elif operator in (GT, LT):
                parts.append(f"{self.key} {operator} {values[0]}")
            else:
                parts.append(f"{self.key} {operator} [{', '.join(values)}]")
        return " and ".join(parts)


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


class Requirements(Mapping[str, Requirement]):
    """An immutable map of label key to :class:`Requirement`; absent keys are unconstrained."""

    __slots__ = ("_by_key", "_hash", "_infeasible")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        by_key: dict[str, Requirement] = {}
        for requirement in requirements:
            existing = by_key.get(requirement.key)
            by_key[requirement.key] = requirement if existing is None else existing.intersection(requirement)
        self._by_key = by_key
        self._hash: int | None = None
        self._infeasible: tuple[str, ...] | None = None

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
        for key, requirement in other._by_key.items():
            existing = merged.get(key)
            merged[key] = requirement if existing is None else existing.intersection(requirement)
        result = Requirements()
        result._by_key = merged
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
        """Keys no node can meet: the label is needed (In, Exists, Gt, Lt) and no value is left.

        ``zone In [a] & zone In [b]`` is infeasible; ``zone NotIn [a] & zone DoesNotExist``
        is not (a node without the label meets both).
        """
        if self._infeasible is None:
            self._infeasible = tuple(sorted(k for k, r in self._by_key.items() if r.infeasible()))
        return self._infeasible

    def intersects(self, incoming: Requirements) -> str | None:
        """None when every shared key has a common value, else a reason naming key and sets.

        As Karpenter's ``Requirements.Intersects``: an empty intersection is still fine when
        neither side needs the label (both NotIn/DoesNotExist on that key).
        """
        for key in sorted(self._by_key.keys() & incoming._by_key.keys()):
            existing = self._by_key[key]
            wanted = incoming._by_key[key]
            if existing.intersection(wanted).infeasible():
                return f"key {key}, {wanted} not in {existing}"
        return None

    def compatible(self, incoming: Requirements, allow_undefined: frozenset[str] = frozenset()) -> str | None:
        """None when a node with these requirements can satisfy ``incoming``, else the reason.

        As Karpenter's ``Requirements.Compatible``: ``incoming`` must be satisfiable at all (not
        :data:`NOTHING`, no empty intersection that needs the label); a key it needs the label
        of (In, Exists, Gt, Lt) must be defined here unless it is in ``allow_undefined`` (the
        well-known labels an instance type fills in at launch); then shared keys must intersect.
        """
        for _, wanted in sorted(incoming._by_key.items()):
            if wanted.infeasible():
                return _unmeetable(wanted)
        for key in sorted(incoming._by_key.keys() - self._by_key.keys()):
            if key in allow_undefined or incoming._by_key[key].allows_absent():
                continue
            return f"label {key} does not have known values"
        return self.intersects(incoming)

    def mismatch(self, labels: Mapping[str, str]) -> str | None:
        """None when a node with ``labels`` meets every requirement, else why not (the first key unmet).

        kube-scheduler's node selector term match (``component-helpers`` ``nodeaffinity``): a
        present label must be an allowed value; an absent one meets only NotIn and DoesNotExist
        (:meth:`Requirement.allows_absent`); a key whose intersection is empty although the label
        is needed is met by no node, nor is :data:`NOTHING`.
        """
        for key, requirement in self._by_key.items():
            if requirement.infeasible():
                return _unmeetable(requirement)
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
        return [expression for _, r in sorted(self._by_key.items()) for expression in r.expressions()]


def _unmeetable(requirement: Requirement) -> str:
    """Why no node meets ``requirement`` (:meth:`Requirement.infeasible`)."""
    if requirement.key == _NOTHING_KEY:
        return f"{requirement} cannot be met"
    return f"no value of {requirement.key} meets every requirement on it (an empty intersection)"


EMPTY_REQUIREMENTS = Requirements()

#: The key of :data:`NOTHING`'s one requirement: not a valid label key, so no node carries it.
_NOTHING_KEY = "<nothing>"
#: Requirements no node meets: kube's ``labels.Nothing()``, what a ``nodeSelectorTerm`` without
#: ``matchExpressions`` and ``matchFields`` selects (``component-helpers`` ``nodeaffinity``).
NOTHING = Requirements((Requirement(_NOTHING_KEY, False, frozenset(), exists=True),))
