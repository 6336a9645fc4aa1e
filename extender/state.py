"""The extender's read-only view of the cluster: what it knows about each node, built once per change.

Why a view of its own: kube-scheduler calls the extender once per pod per scheduling attempt,
with up to every node in the cluster, and waits for the answer (the default timeout is 5 s,
and the call blocks the scheduling loop). So every fact that does not depend on the pod is
computed here, once per cluster change, not per request: which nodes are managed by a
Provisioner, which are marked for deletion or disruption, the node sets of each Provisioner,
which nodes carry nominations, and the numbers the scores need. The handlers then work with
set operations over node names and touch per-node data only for the few nodes that matter.

Built from plain Kubernetes objects (Nodes and Pods as dicts) and Provisioners, so it serves
both the in-process extender (fed by the controller's state cache) and the standalone one
(fed by its own watch). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from provisioner.api.types import Provisioner
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.model import objects
from provisioner.model.pods import awaits_capacity, node_name
from provisioner.model.requirements import Requirements
from provisioner.model.resources import CPU, MEMORY, PODS, Resources
from provisioner.model.resources import EMPTY as EMPTY_RESOURCES
from provisioner.model.taints import Taint
from provisioner.scheduling.extenderscore import inverse
from provisioner.scheduling.provisioners import provisioner_requirements, provisioner_taints
from provisioner.state.nodes import NodeViews, PriceLookup, StateNode, state_node

if TYPE_CHECKING:
    from provisioner.state import Snapshot

#: Optional Node annotation with the node's price in USD per hour (set at launch when known).
PRICE_ANNOTATION = wk.PRICE_ANNOTATION

MARK_DELETING = "deleting"
MARK_DISRUPTED = "disrupted"
MARK_CORDONED = "cordoned"
#: Not a mark on the node itself: its Provisioner is gone or being deleted, so the ownership
#: controller is about to delete it (Provisioner deletion takes its nodes along).
MARK_PROVISIONER_DELETED = "provisioner-deleted"

#: The filter's reason for each mark (never naming the node: kube-scheduler counts reasons).
MARK_REASONS = {
    MARK_DELETING: "node is being deleted",
    MARK_DISRUPTED: "node is being disrupted",
    MARK_CORDONED: "node is cordoned for disruption",
    MARK_PROVISIONER_DELETED: "node's Provisioner is deleted or being deleted",
}

__all__ = [
    "EMPTY_STATE", "MARK_CORDONED", "MARK_DELETING", "MARK_DISRUPTED", "MARK_PROVISIONER_DELETED", "MARK_REASONS",
    "PRICE_ANNOTATION", "ExtenderState", "NodeInfo", "PriceLookup", "ProvisionerInfo", "Reservation",
    "SnapshotAdapter", "build_state", "node_info", "score_row",
]


@dataclass(frozen=True, slots=True)
class ProvisionerInfo:
    """What the filter checks of a Provisioner: its requirements (with its labels) and taints.

    ``startup_taints`` and ``ttl_seconds_until_expired`` are what its nodes' views need
    (:func:`provisioner.state.nodes.state_node`).
    """

    name: str
    requirements: Requirements = field(default_factory=Requirements)
    taints: tuple[Taint, ...] = ()
    ttl_seconds_until_expired: int | None = None
    deleting: bool = False  # metadata.deletionTimestamp is set
    startup_taints: tuple[Taint, ...] = ()

    @classmethod
    def from_provisioner(cls, provisioner: Provisioner) -> ProvisionerInfo:
        """From the API type (:func:`provisioner.scheduling.provisioners.provisioner_requirements`).

        Requirements that cannot be built (the validating webhook refuses those) leave the
        Provisioner unconstrained here: the extender never rejects a node on a constraint it
        cannot read.
        """
        try:
            requirements = provisioner_requirements(provisioner)
        except ValueError:
            requirements = Requirements()
        return cls(
            name=provisioner.name,
            requirements=requirements,
            taints=provisioner_taints(provisioner),
            ttl_seconds_until_expired=provisioner.spec.ttl_seconds_until_expired,
            deleting=bool((provisioner.metadata or {}).get("deletionTimestamp")),
            startup_taints=provisioner.spec.startup_taints,
        )


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node as the extender knows it.

    ``provisioner``: the ``karpenter.sh/provisioner-name`` label, None for a node we do not
    manage. ``allocatable`` and ``requested`` (sum over bound, non-terminated pods, ``pods``
    counted) in core units. ``nominations``: the decoded ``groupless.dev/nominations``
    annotation (pruning happens per request). ``mark``: ``"deleting"`` (deletionTimestamp),
    ``"disrupted"`` (``karpenter.sh/disrupted`` taint), ``"cordoned"`` (``spec.unschedulable``)
    or None. ``price``: USD per hour if known. ``expires_at``: epoch seconds when
    ``ttlSecondsUntilExpired`` retires it, if set. ``starting``: launched and not yet taking
    pods (:attr:`provisioner.state.nodes.StateNode.starting`).
    """

    name: str
    provisioner: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=Resources)
    requested: Resources = field(default_factory=Resources)
    nominations: nom.Nominations = nom.EMPTY
    mark: str | None = None
    price: float | None = None
    expires_at: float | None = None
    starting: bool = False

    @classmethod
    def from_state_node(cls, view: StateNode) -> NodeInfo:
        """The extender's reading of the shared node view (:class:`provisioner.state.nodes.StateNode`)."""
        mark: str | None = None
        if view.deleting:
            mark = MARK_DELETING
        elif view.disrupted:
            mark = MARK_DISRUPTED
        elif view.cordoned:
            mark = MARK_CORDONED
        return cls(
            name=view.name,
            provisioner=view.provisioner,
            labels=view.labels,
            taints=view.taints,
            allocatable=view.allocatable,
            requested=view.requested,
            nominations=view.nominations,
            mark=mark,
            price=view.price,
            expires_at=view.expires_at,
            starting=view.starting,
        )


#: ``(1/allocatable cpu, 1/allocatable memory, 1/number of those present, requested cpu,
#: requested memory, 1/allocatable pods, price, expires_at)``; an inverse is 0.0 where the
#: node reports none of that resource, ``expires_at`` None for nodes we do not manage.
ScoreRow = tuple[float, float, float, int, int, float, float | None, float | None]


def score_row(info: NodeInfo) -> ScoreRow:
    """The numbers prioritize needs of one node (see :data:`ScoreRow`)."""
    cpu, memory = info.allocatable.get(CPU), info.allocatable.get(MEMORY)
    present = (cpu > 0) + (memory > 0)
    return (
        inverse(cpu), inverse(memory), inverse(present), info.requested.get(CPU), info.requested.get(MEMORY),
        inverse(info.allocatable.get(PODS)), info.price, info.expires_at if info.provisioner is not None else None,
    )


@dataclass(frozen=True, slots=True)
class Reservation:
    """A node's nominations that have not ended by binding or deletion, ready for the filter.

    ``deadline``: epoch seconds after which none holds. ``uids``: the nominated pods.
    ``held``: what they request together (a ``pods`` slot each). ``free``: the node's
    allocatable minus what its bound pods request. ``left``: ``free`` minus ``held``, what the
    node has for other pods.
    """

    deadline: float
    uids: frozenset[str]
    held: Resources
    free: Resources
    left: Resources = field(init=False)

    def __post_init__(self) -> None:
        # worked out once: the filter asks every candidate's reservation about every pod
        object.__setattr__(self, "left", self.free - self.held)

    def holds(self, now: float) -> bool:
        """True while the reservation is in force at ``now`` (epoch seconds)."""
        return now < self.deadline and bool(self.uids)


class ExtenderState:
    """A read-only snapshot: nodes by name, Provisioners by name, ended pod UIDs, and indexes.

    ``ended_pod_uids``: UIDs of nominated pods that are bound (anywhere) or deleted; their
    reservations no longer hold. Indexes (computed once): :attr:`managed`, :attr:`marked`
    (mark -> names), :attr:`by_provisioner` (unmarked managed names per Provisioner),
    :attr:`nominated` (names with pods still nominated, deadline aside), :attr:`nominated_node` (pod UID ->
    node name), :attr:`reservations` (node name -> :class:`Reservation`, for the unended ones).

    ``existing_provisioners``: the names of every Provisioner object in the cluster (decodable or
    not), when the cache has listed them. Then a managed node whose Provisioner is not among them,
    or is being deleted (:attr:`ProvisionerInfo.deleting`), is marked
    :data:`MARK_PROVISIONER_DELETED`: the ownership controller is deleting it, and a pod bound
    there now would be evicted at once (a bare pod lost). ``None`` (not listed yet): no such mark,
    since an unknown Provisioner is not a deleted one.
    """

    __slots__ = ("nodes", "provisioners", "ended_pod_uids", "managed", "marked", "by_provisioner",
                 "nominated", "nominated_node", "reservations", "score_rows", "mark_verdicts", "version", "pods")

    def __init__(
        self,
        nodes: Iterable[NodeInfo] = (),
        provisioners: Iterable[ProvisionerInfo] = (),
        ended_pod_uids: Iterable[str] = (),
        version: object = None,
        existing_provisioners: Iterable[str] | None = None,
        pods: nom.PodsByUID | None = None,
    ) -> None:
        self.nodes: Mapping[str, NodeInfo] = {n.name: n for n in nodes}
        #: Pod UID -> pod (wire form) of the same moment, when the state was built from pods.
        self.pods: nom.PodsByUID | None = pods
        self.provisioners: Mapping[str, ProvisionerInfo] = {p.name: p for p in provisioners}
        existing = None if existing_provisioners is None else frozenset(existing_provisioners)
        going = {p.name for p in self.provisioners.values() if p.deleting}
        self.ended_pod_uids: frozenset[str] = frozenset(ended_pod_uids)
        self.version = version
        marked: dict[str, set[str]] = {}
        by_provisioner: dict[str, set[str]] = {}
        nominated: set[str] = set()
        nominated_node: dict[str, str] = {}
        for info in self.nodes.values():
            if info.provisioner is None:
                continue
            mark = info.mark
            if mark is None and (info.provisioner in going or (existing is not None and info.provisioner not in existing)):
                mark = MARK_PROVISIONER_DELETED
            if mark is not None:
                marked.setdefault(mark, set()).add(info.name)
                continue
            by_provisioner.setdefault(info.provisioner, set()).add(info.name)
            if info.nominations.pods:
                nominated.add(info.name)
                for uid in info.nominations.pods:
                    nominated_node[uid] = info.name
        self.managed: frozenset[str] = frozenset(n for n, i in self.nodes.items() if i.provisioner is not None)
        self.marked: Mapping[str, frozenset[str]] = {k: frozenset(v) for k, v in marked.items()}
        #: name -> (filter reason, unresolvable) for every marked managed node.
        self.mark_verdicts: Mapping[str, tuple[str, bool]] = {
            name: (MARK_REASONS[mark], True) for mark, names in marked.items() for name in names
        }
        self.by_provisioner: Mapping[str, frozenset[str]] = {k: frozenset(v) for k, v in by_provisioner.items()}
        self.nominated_node: Mapping[str, str] = nominated_node
        reservations: dict[str, Reservation] = {}
        for name in nominated:
            info = self.nodes[name]
            # the deadline is checked per request (it depends on the time); binding and deletion here
            active = nom.active(info.nominations, float("-inf"), self.ended_pod_uids)
            if active.pods:
                reservations[name] = Reservation(
                    info.nominations.deadline, frozenset(active.pods), nom.reserved(active),
                    info.allocatable - info.requested,
                )
        self.reservations: Mapping[str, Reservation] = reservations
        #: name -> :data:`ScoreRow`: plain numbers, so prioritize does arithmetic, not Resources
        #: algebra, per node.
        self.score_rows: Mapping[str, ScoreRow] = {name: score_row(info) for name, info in self.nodes.items()}
        self.nominated: frozenset[str] = frozenset(reservations)

    def active_nominations(self, info: NodeInfo, now: float) -> nom.Nominations:
        """``info``'s nominations still in force at ``now`` (epoch seconds)."""
        return nom.active(info.nominations, now, self.ended_pod_uids)

    def settled(self, uid: str) -> bool:
        """True when this state shows pod ``uid`` bound (to any node) or being deleted.

        Such a pod no longer awaits room: a pass the filter recorded for it
        (:mod:`extender.assumed`) has reached the cache. False for a pod the state does not hold
        (the pods watch may not have delivered a pod kube-scheduler already filters) and when
        the state was built without pods.
        """
        pod = None if self.pods is None else self.pods.get(uid)
        return pod is not None and not awaits_capacity(pod)

    def reservation(self, name: str, now: float) -> Reservation | None:
        """Node ``name``'s reservation if one holds at ``now``."""
        reservation = self.reservations.get(name)
        return reservation if reservation is not None and reservation.holds(now) else None

    def holding_node(self, uid: str, now: float) -> str | None:
        """The node pod ``uid`` is nominated to while its nomination holds at ``now`` (epoch seconds), else None."""
        node = self.nominated_node.get(uid)
        if node is None:
            return None
        reservation = self.reservation(node, now)
        return node if reservation is not None and uid in reservation.uids else None


EMPTY_STATE = ExtenderState()


def node_info(
    node: Mapping[str, Any],
    requested: Resources = EMPTY_RESOURCES,
    provisioners: Mapping[str, ProvisionerInfo] | None = None,
    price_of: PriceLookup | None = None,
) -> NodeInfo | None:
    """A :class:`NodeInfo` from a v1.Node dict; None when the object has no name.

    ``requested``: what the pods bound to it request. ``provisioners``: by name, for the
    node's expiry time. ``price_of``: the price of a managed node without the price annotation.
    """
    info = (provisioners or {}).get(str(objects.labels(node).get(wk.PROVISIONER_NAME) or ""))
    view = _view(node, (), info, price_of)
    return None if view is None else replace(NodeInfo.from_state_node(view), requested=requested)


def _view(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], info: ProvisionerInfo | None,
          price_of: PriceLookup | None) -> StateNode | None:
    return state_node(
        node, pods,
        startup_taints=info.startup_taints if info is not None else (),
        ttl_seconds_until_expired=info.ttl_seconds_until_expired if info is not None else None,
        price_of=price_of,
    )


def _ended(infos: Iterable[NodeInfo], pods: nom.PodsByUID) -> set[str]:
    """Nominated pod UIDs whose reservation ended by the pod's state (bound, being deleted, absent)."""
    ended: set[str] = set()
    for info in infos:
        if info.nominations.pods:
            ended |= nom.ended(info.nominations, pods)
    return ended


def build_state(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    provisioners: Iterable[Provisioner | ProvisionerInfo],
    *,
    price_of: PriceLookup | None = None,
    version: object = None,
    existing_provisioners: Iterable[str] | None = None,
) -> ExtenderState:
    """An :class:`ExtenderState` from the cluster's objects (v1.Node and v1.Pod dicts).

    Pods serve twice: bound ones add to their node's ``requested`` (a pod whose requests cannot
    be read counts as one pod slot); a nominated pod UID is *ended* when its pod is bound, being
    deleted, or absent from ``pods`` (deleted). ``existing_provisioners``: see :class:`ExtenderState`.
    """
    infos = {
        p.name: p if isinstance(p, ProvisionerInfo) else ProvisionerInfo.from_provisioner(p) for p in provisioners
    }
    # every pod of the list counts (the cache's index would keep one pod per UID)
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    by_uid: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        if not isinstance(pod, Mapping) or not isinstance(pod.get("metadata"), Mapping):
            continue
        by_uid[objects.uid(pod)] = pod
        if node_name(pod):
            by_node.setdefault(node_name(pod), []).append(pod)
    node_infos = []
    for node in nodes:
        info = infos.get(str(objects.labels(node).get(wk.PROVISIONER_NAME) or ""))
        view = _view(node, by_node.get(objects.name(node), ()), info, price_of)
        if view is not None:
            node_infos.append(NodeInfo.from_state_node(view))
    return ExtenderState(node_infos, infos.values(), _ended(node_infos, by_uid), version=version,
                         existing_provisioners=existing_provisioners, pods=by_uid)


class SnapshotAdapter:
    """Builds :class:`ExtenderState` from :class:`provisioner.state.Snapshot` through the shared node views.

    The views (:class:`provisioner.state.nodes.NodeViews`: the cluster state cache's own, so the
    controller process decodes each node once for the extender, the metrics and the solver)
    reuse a node's view while its objects are the same; an unchanged view keeps its
    :class:`NodeInfo`. A rebuild after one pod binds then re-reads one node, not 5,000.
    """

    def __init__(self, price_of: PriceLookup | None = None, views: NodeViews | None = None) -> None:
        self.views = views if views is not None else NodeViews(price_of)
        self._infos: dict[str, tuple[StateNode, NodeInfo]] = {}

    def build(self, snapshot: Snapshot, version: object = None) -> ExtenderState:
        """The state of one :class:`provisioner.state.Snapshot` (the cache's consistent view)."""
        provisioners = {name: ProvisionerInfo.from_provisioner(p) for name, p in snapshot.provisioners.items()}
        # every Provisioner object (an undecodable one still exists), once the cache has listed them
        listed = "Provisioner" in snapshot.resource_versions
        existing = set(snapshot.provisioner_objects) | set(provisioners) if listed else None
        infos: list[NodeInfo] = []
        kept: dict[str, tuple[StateNode, NodeInfo]] = {}
        for name, view in self.views.nodes(snapshot).items():
            previous = self._infos.get(name)
            info = previous[1] if previous is not None and previous[0] is view else NodeInfo.from_state_node(view)
            kept[name] = (view, info)
            infos.append(info)
        self._infos = kept
        return ExtenderState(infos, provisioners.values(), _ended(infos, snapshot.pods), version=version,
                             existing_provisioners=existing, pods=snapshot.pods)
