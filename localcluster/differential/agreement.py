"""Whether kube-scheduler's bindings agree with a plan, pod by pod, and why not (pure).

The rule: a pod *agrees* when

* kube-scheduler bound it to the node the plan put it on (``same-node``);
* or to another node like it (``alike-node``): the same labels but the ones that name a node
  (``kubernetes.io/hostname``, ``groupless.dev/node-request``), the same taints, the same
  allocatable, and likewise launched for the plan or there before it. Such nodes are
  interchangeable for every rule kube-scheduler filters on (resources, labels, taints, ports,
  topology domains other than the hostname), so which of them takes which pod is
  kube-scheduler's free choice. The room the pod took there was planned for another pod; if
  that matters, the other pod finds no room and disagrees itself, so nothing is hidden;
* or to the node the plan put a *twin* on (``twin-node``): pods alike but for their names (same
  namespace, labels, spec; a Deployment's replicas) are indistinguishable to every scheduling
  rule, so the plan holds when the twins are bound to the nodes planned for the twins, in any
  order (matched as multisets of nodes, alike nodes counting as one);
* or the plan put it on room of a node that existed before the plan and kube-scheduler bound it
  to another such node (``existing-elsewhere``): the plan launches nothing for such a pod
  whichever existing node takes it (the provisioning controller acts on the plan's new nodes
  only; placements on Ready nodes are not nominated), and which existing node wins is decided
  by kube-scheduler's scores, which the plan models only in part (TaintToleration, NodeAffinity,
  InterPodAffinity, the resource scores and the extender's packing score; not its price score,
  and ties, which kube-scheduler breaks at random).
  A consequence for other pods (room they needed) shows in their verdicts;
* or the plan found no place for it and kube-scheduler left it Pending (``unplaced-pending``).

Everything else disagrees, with a cause naming both sides: a pod the plan launched a node for
that kube-scheduler bound to a node that existed before (``existing-not-new``: the plan launches
for a pod existing room takes; the reverse check), a pod the plan put on existing room that
kube-scheduler sent to a new node (``new-not-existing``), a pod bound to a new node unlike its
planned one (``other-node``: the labels or taints that differ are named), a pod left Pending
(``pending``: kube-scheduler's last message says why), and a pod the plan could not place that
kube-scheduler bound (``unplaced-bound``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

#: Labels that name one node rather than describe it: nodes differing only there are alike.
IDENTITY_LABELS = frozenset({"kubernetes.io/hostname", "groupless.dev/node-request"})
#: The labels a node is described by in causes.
_DESCRIBED = ("node.kubernetes.io/instance-type", "topology.kubernetes.io/zone", "karpenter.sh/capacity-type")


@dataclass(frozen=True)
class NodeFacts:
    """What makes a node what it is to kube-scheduler: labels, taints ``(key, value, effect)``, allocatable.

    ``planned``: launched for the plan (True) or there before it (False). ``allocatable`` holds
    the wire quantities as the Node shows them (``{"cpu": "3920m", ...}``).
    """

    name: str
    labels: Mapping[str, str]
    taints: frozenset[tuple[str, str, str]] = frozenset()
    allocatable: Mapping[str, str] = field(default_factory=dict)
    planned: bool = True

    @property
    def shape(self) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str, str]], frozenset[tuple[str, str]], bool]:
        """What two alike nodes share (see the module docstring)."""
        labels = frozenset((k, v) for k, v in self.labels.items() if k not in IDENTITY_LABELS)
        return labels, self.taints, frozenset(self.allocatable.items()), self.planned

    def describe(self) -> str:
        """``name (m5.large, ap-south-1a, on-demand)``, ``existing`` when it was there before the plan."""
        facts = [self.labels[k] for k in _DESCRIBED if k in self.labels]
        if not self.planned:
            facts.append("existing")
        return f"{self.name} ({', '.join(facts)})" if facts else self.name


@dataclass(frozen=True)
class Expected:
    """The plan's answer for one pod (``namespace/name``): its node, or None with the plan's reason.

    ``twins``: a key shared by the pods alike but for their names (see the module docstring);
    empty: the pod has no twins.
    """

    pod: str
    node: str | None
    reason: str = ""
    twins: str = ""


@dataclass(frozen=True)
class Observed:
    """kube-scheduler's answer for one pod: the node it is bound to, or None with its last FailedScheduling message."""

    pod: str
    node: str | None
    message: str = ""


@dataclass(frozen=True)
class Verdict:
    """One pod's verdict: whether it agrees, the planned and the bound node, the cause in words, and its kind.

    ``kind``: one of the names in the module docstring (``same-node``, ``pending``, ...).
    """

    pod: str
    agrees: bool
    planned: str | None
    bound: str | None
    cause: str
    kind: str


@dataclass(frozen=True)
class Agreement:
    """Every pod's verdict, in the order of the plan's pods."""

    verdicts: tuple[Verdict, ...]

    @property
    def agreed(self) -> int:
        return sum(v.agrees for v in self.verdicts)

    @property
    def total(self) -> int:
        return len(self.verdicts)

    @property
    def rate(self) -> float:
        """Agreeing pods over all pods (1.0 when there are none)."""
        return self.agreed / self.total if self.verdicts else 1.0

    @property
    def disagreements(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.agrees]


def alike(a: NodeFacts, b: NodeFacts) -> bool:
    """Whether ``a`` and ``b`` are interchangeable for kube-scheduler (see the module docstring)."""
    return a.shape == b.shape


def _differences(planned: NodeFacts, bound: NodeFacts) -> str:
    """What tells ``bound`` from ``planned``: labels, taints, allocatable, whether launched for the plan."""
    parts = []
    keys = sorted((set(planned.labels) | set(bound.labels)) - IDENTITY_LABELS)
    labels = [f"{k}={planned.labels.get(k, '<none>')}/{bound.labels.get(k, '<none>')}" for k in keys
              if planned.labels.get(k) != bound.labels.get(k)]
    if labels:
        parts.append("labels " + ", ".join(labels))
    if planned.taints != bound.taints:
        parts.append(f"taints {sorted(planned.taints)}/{sorted(bound.taints)}")
    if dict(planned.allocatable) != dict(bound.allocatable):
        parts.append(f"allocatable {dict(planned.allocatable)}/{dict(bound.allocatable)}")
    return "; ".join(parts) or "nothing but the name"


def _verdict(expected: Expected, observed: Observed, nodes: Mapping[str, NodeFacts]) -> Verdict:
    """The verdict of one pod by itself (twins are matched afterwards, in :func:`judge`)."""
    planned, bound = expected.node, observed.node

    def facts(name: str) -> NodeFacts:
        return nodes.get(name) or NodeFacts(name, {}, planned=False)

    def verdict(agrees: bool, kind: str, cause: str) -> Verdict:
        return Verdict(expected.pod, agrees, planned, bound, cause, kind)

    if planned is None:
        if bound is None:
            return verdict(True, "unplaced-pending", f"no place in the plan ({expected.reason}) and left Pending")
        return verdict(False, "unplaced-bound", f"no place in the plan ({expected.reason}), but kube-scheduler "
                                                f"bound it to {facts(bound).describe()}")
    want = facts(planned)
    if bound is None:
        return verdict(False, "pending", f"planned on {want.describe()}, left Pending: "
                                         f"{observed.message or 'no message'}")
    if bound == planned:
        return verdict(True, "same-node", f"bound to its planned node {want.describe()}")
    got = facts(bound)
    if alike(want, got):
        return verdict(True, "alike-node", f"bound to {got.describe()}, a node like its planned {want.describe()}")
    if want.planned and not got.planned:
        return verdict(False, "existing-not-new", f"the plan launched {want.describe()} for it, but kube-scheduler "
                                                  f"bound it to the existing node {got.describe()}")
    if not want.planned and got.planned:
        return verdict(False, "new-not-existing", f"planned on the existing node {want.describe()}, but "
                                                  f"kube-scheduler bound it to the new node {got.describe()}")
    if not want.planned:
        return verdict(True, "existing-elsewhere", f"planned on the existing node {want.describe()}, bound to the "
                                                   f"existing node {got.describe()}")
    return verdict(False, "other-node", f"planned on {want.describe()}, bound to {got.describe()}: "
                                        f"{_differences(want, got)}")


def _place(name: str | None, nodes: Mapping[str, NodeFacts]) -> object:
    """What a node counts as when twins are matched: its shape (alike nodes are one), or its name when unknown."""
    if name is None:
        return None
    found = nodes.get(name)
    return found.shape if found is not None else name


def _match_twins(verdicts: list[Verdict], expected: Sequence[Expected], nodes: Mapping[str, NodeFacts]) -> None:
    """Turn into ``twin-node`` agreements the disagreeing pods bound where the plan put one of their twins."""
    classes: dict[str, list[int]] = {}
    for index, e in enumerate(expected):
        if e.twins and not verdicts[index].agrees and verdicts[index].kind != "unplaced-bound":
            classes.setdefault(e.twins, []).append(index)
    for members in classes.values():
        if len(members) < 2:
            continue
        slots = Counter(_place(verdicts[i].planned, nodes) for i in members)
        for i in members:
            v = verdicts[i]
            place = _place(v.bound, nodes)
            if v.bound is None or not slots[place]:
                continue
            slots[place] -= 1
            twin = next(verdicts[j].pod for j in members if _place(verdicts[j].planned, nodes) == place)
            verdicts[i] = replace(v, agrees=True, kind="twin-node",
                                  cause=f"bound to {(nodes.get(v.bound) or NodeFacts(v.bound, {})).describe()}, "
                                        f"where the plan put its twin {twin}")


def judge(expected: Sequence[Expected], observed: Iterable[Observed], nodes: Iterable[NodeFacts]) -> Agreement:
    """The verdict of every pod of ``expected`` (see the module docstring).

    ``observed``: kube-scheduler's answers (a pod of ``expected`` missing there counts as
    Pending without a message). ``nodes``: every planned and existing node by its facts (a
    node named in a placement but missing there is described by its name alone).
    """
    seen = {o.pod: o for o in observed}
    by_name = {n.name: n for n in nodes}
    verdicts = [_verdict(e, seen.get(e.pod) or Observed(e.pod, None), by_name) for e in expected]
    _match_twins(verdicts, expected, by_name)
    return Agreement(tuple(verdicts))


__all__ = ["IDENTITY_LABELS", "Agreement", "Expected", "NodeFacts", "Observed", "Verdict", "alike", "judge"]
