"""Resource vectors: one solve's resource amounts as tuples of ints in a fixed order.

A :class:`Dimensions` fixes the order (every resource name a pod, DaemonSet, instance type or
node of the solve mentions, plus cpu, memory and pods, sorted by name); amounts are in the
units of :mod:`provisioner.model.resources` (milli-CPU, bytes, counts). Plain tuples keep the
packing loop's comparisons cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import add, le, sub

#: Amounts per resource, in the order of the solve's :class:`Dimensions`.
Vector = tuple[int, ...]


def fits(need: Vector, have: Vector) -> bool:
    """True when every amount of ``need`` is at most the same amount of ``have``."""
    return all(map(le, need, have))


def plus(a: Vector, b: Vector) -> Vector:
    return tuple(map(add, a, b))


def minus(a: Vector, b: Vector) -> Vector:
    return tuple(map(sub, a, b))


def largest(a: Vector, b: Vector) -> Vector:
    """The per-resource maximum of ``a`` and ``b``."""
    return tuple(map(max, a, b))


@dataclass(frozen=True)
class Dimensions:
    """The resource names of one solve, in vector order, and the zero vector."""

    names: tuple[str, ...]
    zero: Vector

    @classmethod
    def of(cls, names: Iterable[str]) -> Dimensions:
        ordered = tuple(sorted(set(names)))
        return cls(ordered, tuple(0 for _ in ordered))

    def vector(self, resources: Mapping[str, int]) -> Vector:
        """``resources`` as a vector (a name it lacks counts 0)."""
        get = resources.get
        return tuple(get(name) or 0 for name in self.names)

    def indices(self, names: Iterable[str]) -> tuple[int, ...]:
        """Positions of ``names`` that are dimensions of this solve, in vector order."""
        wanted = set(names)
        return tuple(i for i, name in enumerate(self.names) if name in wanted)
