"""Every cache of one solve, in one place, with what keeps each one right."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provisioner.model.requirements import Requirement, Requirements
    from provisioner.scheduling.instancetypes import Offering
    from provisioner.scheduling.solver.planned import OpenNode
    from provisioner.scheduling.solver.preferences import Alternative, Relaxation
    from provisioner.scheduling.solver.pricing import BulkTable, PricedOption
    from provisioner.scheduling.solver.queue import PodShape
    from provisioner.scheduling.solver.templates import TypeOption
    from provisioner.scheduling.solver.topology import DomainFilter, TopologyConstraint
    from provisioner.scheduling.solver.vectors import Vector

    Options = list[TypeOption]


@dataclass(eq=False)
class Memo:
    """The caches of one solve (one :class:`Memo` per solve, dropped with it).

    Invariants every cache relies on:

    * A cached value is a function of its key alone: a hit returns exactly what recomputing
      would, so the caches change the solve's speed, never its plan (``skip`` and ``failures``
      are the two exceptions, documented below, and are part of the algorithm).
    * Option lists (``list[TypeOption]``: a template's options, the options a node keeps, the
      lists narrowed, pinned or filtered from them) are never mutated after they are built;
      a change builds a new list. Caches keyed on ``id(list)`` rely on it. Each such entry
      stores the list itself next to its value, so the id cannot be reused by another list
      while the entry lives, and each lookup also checks ``entry[0] is options``.
    * Templates, :class:`TypeOption` values, pod shapes and existing nodes' labels do not change
      during a solve; ``Requirements`` and ``Pod`` values are immutable. Caches keyed on an
      option or a shape (hashed by identity: one object per option of a template, one per
      distinct shape), or on a template's or an existing node's ``index``, rely on it.

    The caches (key -> value):

    * ``offerings``: (option, zone requirement, capacity-type requirement) -> the option's
      available offerings those allow.
    * ``template_compatibility``: (template index, requirement alternative) -> why the
      template cannot take a pod with those requirements, None when it can.
    * ``template_options``: (template index, requirements, accelerator) -> the options meeting
      the requirements, with or without accelerators.
    * ``template_fits``: (template index, requirements, accelerator, requests) -> those options
      that hold the requests.
    * ``narrowed``: (planned node, alternative) -> the node's options and requirements when it
      was computed, then those narrowed by the alternative, or why they cannot be. A node's
      options and requirements are replaced (never mutated) as pods join, so an entry counts
      only while both are the very objects it stores.
    * ``existing_compatibility``: (existing node index, alternative) -> whether the node's
      labels meet the alternative.
    * ``existing_scores``: (existing node index, shape) -> the node's raw NodeAffinity and
      TaintToleration scores for such a pod (:mod:`~provisioner.scheduling.solver.scores`).
    * ``shapes``: what identical pods share -> their :class:`PodShape`.
    * ``constraints``: (shape, relaxation) -> the pod's active topology constraints and the
      ways a new node may take it (its requirement alternatives with the preferred terms held).
    * ``spread_domains``: (domain filter, topology key) -> the values of the key the
      Provisioners the filter admits offer on new nodes.
    * ``envelopes``: id(options) -> the list, its largest allocatable and largest capacity.
    * ``limit_envelopes``: (id(options), first limited resource) -> the list, its options'
      capacities of that resource ascending and the running largest allocatable.
    * ``domains``: (id(options), requirements, key) -> the list and the values of ``key`` its
      options can offer.
    * ``pinned``: (id(options), requirements, pinned topology values) -> the list, the
      requirements with the values pinned and the options that still offer them.
    * ``bulk_tables``: (template index, alternative, accelerator, requests) -> the template's
      options by how many such pods each holds, with the best price per pod below and the
      cheapest price from each count on (:func:`~provisioner.scheduling.solver.pricing.bulk_price`
      answers any count from it by bisection; its ``from_price[0]`` is the standalone price).
    * ``price_lists``: (id(options), zone requirement, capacity-type requirement) -> the list
      and its options with their cheapest allowed offering, cheapest first.

    Algorithm state kept here because it is keyed like the caches:

    * ``skip``: (shape, relaxation, requests) -> the first planned node worth trying for
      such a pod. Nodes before it refused such a pod for a reason that only gets worse as
      nodes fill (resources, taints, requirements, anti-affinity, host ports, limits, or, counted
      as permanent by heuristic, a price above a node of its own or a hostname spread count
      above what the minimum allows), so a hit can skip a
      node that would have accepted a pod later: this shapes the plan, deterministically.
    * ``full``: requests -> the first planned node that might still hold them; every node
      before it lacks room for them in all of its options (exact and lasting: a node's requests
      only grow and its options only narrow), so any pod with those requests skips them.
    * ``failures``: (shape, requests, relaxation, pods placed so far) -> why such a pod
      failed. No state changes while no pod is placed, so a pod identical in shape, requests
      and relaxation fails the same way; keying on the placement count drops the entry as
      soon as anything is placed.
    """

    offerings: dict[tuple[TypeOption, Requirement | None, Requirement | None], tuple[Offering, ...]] = field(
        default_factory=dict)
    template_compatibility: dict[tuple[int, Requirements], str | None] = field(default_factory=dict)
    template_options: dict[tuple[int, Requirements, bool], Options] = field(default_factory=dict)
    template_fits: dict[tuple[int, Requirements, bool, Vector], Options] = field(default_factory=dict)
    narrowed: dict[tuple[OpenNode, Requirements],
                   tuple[Options, Requirements, tuple[Requirements, Options] | str]] = field(default_factory=dict)
    existing_compatibility: dict[tuple[int, Requirements], bool] = field(default_factory=dict)
    existing_scores: dict[tuple[int, object], tuple[int, int]] = field(default_factory=dict)
    shapes: dict[tuple[Any, ...], PodShape] = field(default_factory=dict)
    constraints: dict[tuple[PodShape, Relaxation],
                      tuple[list[TopologyConstraint], list[Alternative]]] = field(default_factory=dict)
    spread_domains: dict[tuple[DomainFilter, str], frozenset[str]] = field(default_factory=dict)
    envelopes: dict[int, tuple[Options, Vector, Vector]] = field(default_factory=dict)
    limit_envelopes: dict[tuple[int, int], tuple[Options, list[int], list[Vector]]] = field(default_factory=dict)
    domains: dict[tuple[int, Requirements, str], tuple[Options, frozenset[str]]] = field(default_factory=dict)
    pinned: dict[tuple[int, Requirements, tuple[tuple[str, str], ...]],
                 tuple[Options, Requirements, Options]] = field(default_factory=dict)
    bulk_tables: dict[tuple[int, Requirements, bool, Vector], BulkTable] = field(default_factory=dict)
    price_lists: dict[tuple[int, Requirement | None, Requirement | None],
                      tuple[Options, list[PricedOption]]] = field(default_factory=dict)
    skip: dict[tuple[PodShape, Relaxation, Vector], int] = field(default_factory=dict)
    full: dict[Vector, int] = field(default_factory=dict)
    failures: dict[tuple[PodShape, Vector, Relaxation, int], str] = field(default_factory=dict)
