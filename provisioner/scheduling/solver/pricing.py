"""Prices of instance type options (USD per hour of their cheapest allowed offering).

An option list is priced under a node's zone and capacity-type requirements: each option with
its cheapest allowed offering, cheapest first (ties by instance type name). A planned node's
price is its cheapest option that holds its pods; at launch it asks for at most
:data:`MAX_INSTANCE_TYPES` options, cheapest first. A pod alone costs the cheapest option that
holds it (:func:`standalone_price`); a run of identical pods, the option cheapest per pod for as
many of them as it holds (:func:`bulk_price`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from operator import le
from typing import NamedTuple

from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.scheduling.instancetypes import Offering
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.templates import NodeTemplate, TypeOption, cheapest_offering, meeting_options
from provisioner.scheduling.solver.vectors import Vector, fits

#: At most this many instance type options per planned node (the AWS provider's cut, Karpenter v1).
MAX_INSTANCE_TYPES = 60
#: How many pods an option holds when they request nothing it has (no pods resource either).
MAX_HELD = 1 << 30
#: A per-pod price this many USD/hour below the standalone price counts as lower.
_PER_POD_EPSILON = 1e-9


class PricedOption(NamedTuple):
    """An option with its cheapest allowed offering; ``price`` is that offering's USD/hour."""

    price: float
    name: str
    option: TypeOption
    offering: Offering


class PriceFit(NamedTuple):
    """The cheapest option of a price list that holds a total: ``by_price[position]``."""

    by_price: list[PricedOption]
    position: int

    @property
    def cheapest(self) -> PricedOption:
        return self.by_price[self.position]

    @property
    def price(self) -> float:
        return self.by_price[self.position].price


def by_price(memo: Memo, options: list[TypeOption], requirements: Requirements) -> list[PricedOption]:
    """``options`` that have an allowed offering under ``requirements``, cheapest first."""
    key = (id(options), requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE))
    cached = memo.price_lists.get(key)
    if cached is None or cached[0] is not options:
        priced = []
        for t in options:
            offering = cheapest_offering(memo, t, requirements)
            if offering is not None:
                priced.append(PricedOption(offering.price, t.instance_type.name, t, offering))
        priced.sort(key=lambda p: (p.price, p.name))
        cached = (options, priced)
        memo.price_lists[key] = cached
    return cached[1]


def first_fit(priced: list[PricedOption], total: Vector, start: int = 0) -> PriceFit | None:
    """The cheapest entry of ``priced`` from ``start`` on that holds ``total``; None when none does."""
    for i in range(start, len(priced)):
        if all(map(le, total, priced[i].option.allocatable)):
            return PriceFit(priced, i)
    return None


def launch_options(memo: Memo, options: list[TypeOption], requirements: Requirements,
                   total: Vector) -> list[PricedOption]:
    """The (at most :data:`MAX_INSTANCE_TYPES`) cheapest options that hold ``total``: what a launch asks for."""
    chosen = []
    for entry in by_price(memo, options, requirements):
        if all(map(le, total, entry.option.allocatable)):
            chosen.append(entry)
            if len(chosen) == MAX_INSTANCE_TYPES:
                break
    return chosen


class BulkTable(NamedTuple):
    """A template's options for a run of identical pods, by how many of the pods each holds.

    ``counts`` ascending: how many pods of the requests each option holds (its allocatable, less
    DaemonSet overhead, divided by the requests in every resource, the pods resource included);
    options that hold none are left out. Over the options before position ``i``, each full:
    ``below_per_pod[i]`` the least USD/hour per pod and ``below_price[i]`` the USD/hour of the
    cheapest option with that per-pod price; ``from_price[i]``: the least USD/hour from ``i``
    on (``from_price[0]``: the standalone price; inf when no option holds a pod). Arrays of
    machine numbers: a table per template, alternative and requests lives for the solve.
    """

    counts: array[int]
    below_per_pod: array[float]
    below_price: array[float]
    from_price: array[float]


def _bulk_table(memo: Memo, template: NodeTemplate, alternative: Requirements, accelerator: bool,
                requests: Vector) -> BulkTable:
    """The :class:`BulkTable` of ``template`` under ``alternative`` for pods of ``requests`` (cached)."""
    key = (template.index, alternative, accelerator, requests)
    found = memo.bulk_tables.get(key)
    if found is not None:
        return found
    requirements = template.requirements & alternative
    entries: list[tuple[int, float]] = []
    for t in meeting_options(memo, template, requirements, accelerator):
        offering = cheapest_offering(memo, t, requirements)
        if offering is None or not fits(requests, t.allocatable):
            continue
        held = min((have // need for have, need in zip(t.allocatable, requests, strict=True) if need > 0),
                   default=MAX_HELD)
        entries.append((held, offering.price))
    entries.sort()
    inf = float("inf")
    below: list[tuple[float, float]] = [(inf, inf)]
    for held, price in entries:
        below.append(min(below[-1], (price / held, price)))
    from_price = [inf]
    for _, price in reversed(entries):
        from_price.append(min(from_price[-1], price))
    from_price.reverse()
    found = BulkTable(array("q", (held for held, _ in entries)), array("d", (b[0] for b in below)),
                      array("d", (b[1] for b in below)), array("d", from_price))
    memo.bulk_tables[key] = found
    return found


def standalone_price(memo: Memo, template: NodeTemplate, alternative: Requirements, accelerator: bool,
                     requests: Vector) -> float:
    """USD/hour of the cheapest node of ``template`` for one pod alone (inf when there is none).

    The options meeting ``template.requirements & alternative``, with accelerators when the pod
    asks for one and without otherwise, that hold ``requests``: the cheapest of the
    :class:`BulkTable`'s (cached with the table).
    """
    return _bulk_table(memo, template, alternative, accelerator, requests).from_price[0]


def bulk_price(memo: Memo, template: NodeTemplate, alternative: Requirements, accelerator: bool,
               requests: Vector, count: int) -> float | None:
    """USD/hour of the node of ``template`` cheapest per pod for ``count`` identical pods; None when no cheaper than alone.

    Each option that meets ``template.requirements & alternative`` (and matches ``accelerator``,
    as :func:`standalone_price` chooses) holds ``n`` pods of ``requests`` (every resource, the
    pods resource included) and costs its price / min(``count``, ``n``) a pod; the least of
    these, ties to the cheaper (smaller) node. Its price is returned when that per-pod price is
    below the standalone price (a node for one such pod alone), else None.

    Why: the marginal rule grows a planned node by a pod only when that adds no more than a
    node of its own would cost. For identical pods, one more pod on a small node rarely pays
    while a full larger node does (8 pods of 900m / 3100Mi cost less a pod on an m6g.2xlarge
    than each alone on a t4g.medium), so growing one pod at a time never gets over that hump.
    Looking at the run of identical pods still to place gets over it. (Karpenter's
    first-fit-decreasing grows a node while any type still holds it, whatever the price: it
    gets over the hump but may overpay.) O(log options) once the template's table is built,
    once per solve.
    """
    if count < 2:
        return None
    table = _bulk_table(memo, template, alternative, accelerator, requests)
    if not table.counts:
        return None
    split = bisect_left(table.counts, count)
    per_pod, price = table.below_per_pod[split], table.below_price[split]
    cheapest = table.from_price[split]
    if (cheapest / count, cheapest) < (per_pod, price):
        per_pod, price = cheapest / count, cheapest
    alone = standalone_price(memo, template, alternative, accelerator, requests)
    return price if per_pod < alone - _PER_POD_EPSILON else None
