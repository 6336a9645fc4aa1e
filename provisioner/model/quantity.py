"""Kubernetes quantities (``250m``, ``1Gi``, ``1.5``, ``2e3``) parsed into integers, once, at the edge.

The grammar is ``resource.Quantity``'s (k8s.io/apimachinery): a signed decimal number with an
optional binary suffix (Ki, Mi, Gi, Ti, Pi, Ei), decimal suffix (n, u, m, k, M, G, T, P, E) or
exponent (e3, E-2). Results: cpu in milli-CPU, everything else in base units (bytes, counts),
rounded up as Kubernetes rounds requests up to the next milli / unit.

Resource lists are read here once, two ways: :func:`parse_resource_list` raises on a bad entry
(sizes a decision depends on), :func:`readable_resource_list` leaves it out (reports). One
formatter, :func:`format_quantity`, writes amounts back in the form kubelet uses.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from provisioner.model.resources import EMPTY, Resources

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$")


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message names the value."""


def parse_decimal(value: str | int | float) -> Decimal:
    """The exact value of a quantity in base units (cores, bytes) as a Decimal.

    Raises QuantityError for anything ``resource.ParseQuantity`` would refuse.
    """
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"invalid quantity {value!r}")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}: expected a string or number")
    match = _PATTERN.match(value.strip())
    if not match or not value.strip():
        raise QuantityError(f"invalid quantity {value!r}: quantities must match the regular expression "
                            r"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    number, suffix, exponent = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation as error:  # pragma: no cover - the regex already guards
        raise QuantityError(f"invalid quantity {value!r}") from error
    if exponent is not None:
        return amount.scaleb(int(exponent))
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    return amount * _DECIMAL[suffix or ""]


def parse_quantity(value: str | int | float, resource: str = "") -> int:
    """The quantity as an int: milli-CPU when ``resource == "cpu"``, else base units, rounded up.

    >>> parse_quantity("250m", "cpu"), parse_quantity("1", "cpu"), parse_quantity("1Gi", "memory")
    (250, 1000, 1073741824)

    Raises QuantityError naming the value.
    """
    if type(value) in _CACHED_TYPES:  # a 5,000-node cluster writes the same few quantities over and over
        return _parse_cached(value, resource)
    return _parse(value, resource)


def _parse(value: str | int | float, resource: str) -> int:
    amount = parse_decimal(value)
    if resource == "cpu":
        amount *= 1000
    return int(amount.to_integral_value(rounding="ROUND_CEILING"))


_CACHED_TYPES = (str, int, float)
#: Results by (value, resource, their types): pure, so shared by every reader (errors are not kept).
_parse_cached = functools.lru_cache(maxsize=8192, typed=True)(_parse)


def parse_resource_list(resources: Any, where: str = "") -> Resources:
    """A wire resource list in core units: ``{"cpu": "1", "memory": "1Gi"}`` -> ``Resources(cpu=1000, memory=1073741824)``.

    The strict reading, for what must be right (a solver's node sizes, a Provisioner's limits).
    ``None`` or ``{}`` is the empty list. Raises QuantityError naming the field (``where.<name>``,
    or ``<name>`` without ``where``) and the value, or ``where`` when ``resources`` is not a map.
    """
    if not resources:
        return EMPTY
    if not isinstance(resources, Mapping):
        raise QuantityError(f"{where or 'resources'}: expected a resource map, got {resources!r}")
    result: dict[str, int] = {}
    for name, raw in resources.items():
        try:
            result[str(name)] = parse_quantity(raw, str(name))
        except QuantityError as error:
            raise QuantityError(f"{where}.{name}: {error}" if where else f"{name}: {error}") from error
    return Resources(result)


def readable_resource_list(
    resources: Any, skipped: Callable[[str, object, QuantityError], None] | None = None
) -> dict[str, int]:
    """A wire resource list in core units, leaving out entries that cannot be read (never raises).

    The lenient reading, for what only reports (metrics, status, display): a plain dict, so an
    entry of 0 is kept (a limit of 0 is shown; :class:`Resources` drops zeros). ``skipped(name,
    value, error)`` is called for each entry left out (to log it). Anything but a map reads as empty.
    """
    result: dict[str, int] = {}
    if not isinstance(resources, Mapping):
        return result
    for name, raw in resources.items():
        try:
            result[str(name)] = parse_quantity(raw, str(name))
        except QuantityError as error:
            if skipped is not None:
                skipped(str(name), raw, error)
    return result


def format_cpu(milli: int) -> str:
    """``1500`` -> ``"1500m"``, ``2000`` -> ``"2"`` (the form kubectl shows)."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(amount: int) -> str:
    """Bytes as the largest exact binary suffix: ``1073741824`` -> ``"1Gi"``, ``1000`` -> ``"1000"``."""
    for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)


#: Resources measured in bytes (formatted with binary suffixes).
BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def format_quantity(name: str, amount: int) -> str:
    """A core-unit amount in wire form, as kubelet writes it.

    cpu via :func:`format_cpu` (``4000`` -> ``"4"``, ``3820`` -> ``"3820m"``); memory, storage
    and ``hugepages-*`` via :func:`format_bytes` (``30310 * 2**20`` -> ``"30310Mi"``); counts as
    they are (``pods``, GPUs).
    """
    if name == "cpu":
        return format_cpu(amount)
    if name in BYTE_RESOURCES or name.startswith("hugepages-"):
        return format_bytes(amount)
    return str(amount)


def to_wire_resource_list(values: Mapping[str, int]) -> dict[str, str]:
    """Core-unit amounts as a wire ResourceList, names sorted: ``{"cpu": 4000}`` -> ``{"cpu": "4"}``."""
    return {name: format_quantity(name, int(value)) for name, value in sorted(values.items())}
