"""Whether kube-scheduler's bindings agree with a plan, pod by pod, and why not (pure).

The rule (a pod *agrees* when):

* the plan put it on a node (a new one launched for it, or an existing one) and kube-scheduler
  bound it to that node, **or to another node like it**: the same labels (but the ones that
  name a node: ``kubernetes.io/hostname``, ``groupless.dev/node-request``), the same taints,
  the same allocatable, and likewise launched for the plan or there before it. Such nodes are
  interchangeable for every rule kube-scheduler filters on (resources, labels, taints, ports,
  topology domains other than the hostname), so which of them takes which pod is
  kube-scheduler's free choice (its scores tie or differ only by how full each node is). The
  pod kube-scheduler bound there took room the plan gave another pod on that node; when that
  matters, the other pod finds no room and disagrees itself, so nothing is hidden. Hostname
  topology is kept by the swap too: the pods exchanged carry over their counts one for one only
  when the pods are alike, and when they are not, a pod left without a place disagrees.
* or the plan found no place for it and kube-scheduler left it Pending.

Everything else disagrees, with a cause naming both sides: a pod the plan launched a node for
that kube-scheduler bound to a node that existed before (the plan launches for a pod existing
room takes: the reverse check), a pod the plan put on existing room that kube-scheduler sent to a
new node, a pod bound to a node unlike its planned one (the labels or taints that differ are
named), a pod left Pending beside its planned node (kube-scheduler's last message says why),
and a pod the plan could not place that kube-scheduler bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

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
    """The plan's answer for one pod (``namespace/name``): its node, or None with the plan's reason."""

    pod: str
    node: str | None
    reason: str = ""


@dataclass(frozen=True)
class Observed:
    """kube-scheduler's answer for one pod: the node it is bound to, or None with its last FailedScheduling message."""

    pod: str
    node: str | None
    message: str = ""


@dataclass(frozen=True)
class Verdict:
    """One pod's verdict: whether it agrees, the planned and the bound node, and the cause in words."""

    pod: str
    agrees: bool
    planned: str | None
    bound: str | None
    cause: str


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
    planned, bound = expected.node, observed.node

    def facts(name: str) -> NodeFacts:
        return nodes.get(name) or NodeFacts(name, {}, planned=False)

    def verdict(agrees: bool, cause: str) -> Verdict:
        return Verdict(expected.pod, agrees, planned, bound, cause)

    if planned is None:
        if bound is None:
            return verdict(True, f"no place in the plan ({expected.reason}) and left Pending")
        return verdict(False, f"no place in the plan ({expected.reason}), but kube-scheduler bound it to "
                              f"{facts(bound).describe()}")
    want = facts(planned)
    if bound is None:
        return verdict(False, f"planned on {want.describe()}, left Pending: {observed.message or 'no message'}")
    if bound == planned:
        return verdict(True, f"bound to its planned node {want.describe()}")
    got = facts(bound)
    if alike(want, got):
        return verdict(True, f"bound to {got.describe()}, a node like its planned {want.describe()}")
    if want.planned and not got.planned:
        return verdict(False, f"the plan launched {want.describe()} for it, but kube-scheduler bound it to "
                              f"the existing node {got.describe()}")
    if not want.planned and got.planned:
        return verdict(False, f"planned on the existing node {want.describe()}, but kube-scheduler bound it to "
                              f"the new node {got.describe()}")
    return verdict(False, f"planned on {want.describe()}, bound to {got.describe()}: {_differences(want, got)}")


def judge(expected: Sequence[Expected], observed: Iterable[Observed], nodes: Iterable[NodeFacts]) -> Agreement:
    """The verdict of every pod of ``expected`` (see the module docstring).

    ``observed``: kube-scheduler's answers (a pod of ``expected`` missing there counts as
    Pending without a message). ``nodes``: every planned and existing node by its facts (a
    node named in a placement but missing there is described by its name alone).
    """
    seen = {o.pod: o for o in observed}
    by_name = {n.name: n for n in nodes}
    return Agreement(tuple(_verdict(e, seen.get(e.pod) or Observed(e.pod, None), by_name) for e in expected))


__all__ = ["IDENTITY_LABELS", "Agreement", "Expected", "NodeFacts", "Observed", "Verdict", "alike", "judge"]
