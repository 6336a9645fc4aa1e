"""Resource lists of the pure core: integers in fixed units, immutable, cheap to combine.

Kubernetes quantities (``250m``, ``1Gi``, ``1.5``) are parsed once, at the edge, by
:func:`provisioner.model.quantity.parse_quantity`; inside the core every amount is an ``int``:

- ``cpu`` in milli-CPU (``1`` core = ``1000``),
- ``memory``, ``ephemeral-storage`` and ``hugepages-*`` in bytes,
- ``pods`` and extended resources (``nvidia.com/gpu``, ``amd.com/gpu``,
  ``aws.amazon.com/neuron``, ...) as counts.

A :class:`Resources` value never changes: ``+`` and ``-`` return new values. Missing names
count as zero, so ``Resources({"cpu": 100}).get("memory") == 0``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
AWS_NEURON = "aws.amazon.com/neuron"
AWS_POD_ENI = "vpc.amazonaws.com/pod-eni"

#: Accelerators: an instance type that has one only serves pods that ask for one
#: (Karpenter's GPU exclusivity, v0.6.3 packer and today's).
ACCELERATORS = (NVIDIA_GPU, AMD_GPU, AWS_NEURON)

MIB = 1024 * 1024
GIB = 1024 * MIB


class Resources(Mapping[str, int]):
    """An immutable map of resource name to amount (milli-CPU, bytes or a count).

    Zero amounts are dropped on construction, so two lists with the same non-zero amounts are
    equal and hash alike. Negative amounts are kept (a deficit is information).
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[str, int] = {k: int(v) for k, v in pairs if v}
        self._hash: int | None = None

    # Mapping protocol -------------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, name: str, default: int = 0) -> int:  # type: ignore[override]
        """Amount of ``name``; ``default`` (0) when absent."""
        return self._items.get(name, default)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == {k: v for k, v in other.items() if v}
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in sorted(self._items.items()))
        return f"Resources({inner})"

    # Algebra ----------------------------------------------------------------------------
    def __add__(self, other: Mapping[str, int]) -> Resources:
        merged = dict(self._items)
        for name, amount in other.items():
            merged[name] = merged.get(name, 0) + amount
        return Resources(merged)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        merged = dict(self._items)
        for name, amount in other.items():
            merged[name] = merged.get(name, 0) - amount
        return Resources(merged)

    def short_only_within(self, room: Resources, left: Resources) -> bool:
        """True when some amount here fits in ``room`` but not in ``left`` (part of the room is taken).

        The question a reservation asks of a pod: would the pod fit but for the part of the
        node's free ``room`` that is held for others (``left`` = room minus what is held)? A
        name absent from either counts as zero there.
        """
        room_get, left_get = room._items.get, left._items.get
        for name, amount in self._items.items():
            if amount <= room_get(name, 0) and amount > left_get(name, 0):
                return True
        return False

    def fits(self, capacity: Mapping[str, int]) -> bool:
        """True when every amount here is at most the same amount in ``capacity``.

        A name absent from ``capacity`` counts as zero there, so a pod that asks for
        ``nvidia.com/gpu`` does not fit a node without GPUs.
        """
        get = capacity.get
        return all(amount <= (get(name) or 0) for name, amount in self._items.items())

    def exceeding(self, capacity: Mapping[str, int]) -> tuple[str, ...]:
        """Names whose amount here is larger than in ``capacity``, sorted."""
        get = capacity.get
        return tuple(sorted(n for n, a in self._items.items() if a > (get(n) or 0)))

    def max(self, other: Mapping[str, int]) -> Resources:
        """Element-wise maximum (how kube-scheduler combines init containers)."""
        merged = dict(self._items)
        for name, amount in other.items():
            if amount > merged.get(name, 0):
                merged[name] = amount
        return Resources(merged)

    def scaled(self, factor: int) -> Resources:
        """Each amount multiplied by ``factor``."""
        return Resources({k: v * factor for k, v in self._items.items()})

    def to_dict(self) -> dict[str, int]:
        """A plain dict copy (for JSON)."""
        return dict(self._items)

    @classmethod
    def sum(cls, lists: Iterable[Mapping[str, int]]) -> Resources:
        """Sum of many resource lists."""
        total: dict[str, int] = {}
        for resources in lists:
            for name, amount in resources.items():
                total[name] = total.get(name, 0) + amount
        return cls(total)


EMPTY = Resources()
