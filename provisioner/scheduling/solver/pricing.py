"""Prices of instance type options (USD per hour of their cheapest allowed offering).

An option list is priced under a node's zone and capacity-type requirements: each option with
its cheapest allowed offering, cheapest first (ties by instance type name). A planned node's
price is its cheapest option that holds its pods; at launch it asks for at most
:data:`MAX_INSTANCE_TYPES` options, cheapest first.
"""

from __future__ import annotations

from operator import le
from typing import NamedTuple

from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.scheduling.instancetypes import Offering
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.templates import NodeTemplate, TypeOption, allows, cheapest_offering
from provisioner.scheduling.solver.vectors import Vector, fits

#: At most this many instance type options per planned node (the AWS provider's cut, Karpenter v1).
MAX_INSTANCE_TYPES = 60


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


def standalone_price(memo: Memo, template: NodeTemplate, alternative: Requirements, accelerator: bool,
                     requests: Vector) -> float:
    """USD/hour of the cheapest node of ``template`` for one pod alone (inf when there is none)."""
    key = (template.index, alternative, accelerator, requests)
    found = memo.standalone_prices.get(key)
    if found is None:
        requirements = template.requirements & alternative
        options = [t for t in template.options if t.accelerator == accelerator and allows(memo, t, requirements)]
        prices = [o.price for t in options if fits(requests, t.allocatable)
                  for o in (cheapest_offering(memo, t, requirements),) if o]
        found = min(prices, default=float("inf"))
        memo.standalone_prices[key] = found
    return found
