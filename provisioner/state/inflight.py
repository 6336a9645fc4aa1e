"""What the provisioning controller has done that the cluster state cache may not show yet.

The cache lags the controller's own writes, so the controller remembers, under one lock:

* **pods in flight**: pods capacity is on its way for, covered so that no later round launches
  for them again. A pod is in flight from the plan (its launch running, :attr:`InFlight.node`
  ``None``) until a snapshot shows its nomination on the Node, or its launch ends without a
  node;
* **written Nodes**: the latest Node object the controller wrote (created, nominations
  patched), whose capacity and nominations count until a snapshot shows that write;
* **launch reservations**: per launch whose Node is not written yet, the room it holds against
  its Provisioner's limits (the capacity of its largest instance type option), so that a round
  solving while another round's launches run counts them (limits never overshoot when rounds
  overlap); a launch's reservation ends when its Node is written (:meth:`InFlightLedger.wrote`
  with ``settles``: from then on the Node's capacity counts) or it fails (:meth:`InFlightLedger.unreserve`);
* **displaced-from**: per pod, the nodes whose nomination of it ended because they filled up;
  it salts the pod's next node request, whose ClientToken would otherwise return that node;
* **placements on existing nodes**: per node, until when a round's placement of pending pods
  there makes it count as nominated (Karpenter's ``NominateNodeForPod``: the emptiness
  controller leaves it alone meanwhile, :meth:`InFlightLedger.nominated_until`);
* **promised room**: per target node, the room held for each pod of an expiring node that the
  target was chosen to take, while that pod is still bound to the expiring node (its drain has
  not reached it: once evicted, the pod its owner recreates, with a new UID, is solved as
  pending and may take the room).

Only a snapshot releases (:meth:`InFlightLedger.release`, :meth:`InFlightLedger.reserved`),
never a watch event that may arrive after a round took its snapshot: that gap let a burst launch
twice for the same pods. The one exception is a Node deletion (:meth:`InFlightLedger.forget_node`):
a deleted Node is newer than anything the controller wrote.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.kube.api import Object
from provisioner.model.resources import Resources
from provisioner.state.cluster import Snapshot

#: Reads the UIDs of the pods a Node's nominations annotation names (deadline not considered).
NominatedOn = Callable[[Mapping[str, Any]], Collection[str]]


@dataclass(frozen=True, slots=True)
class Writes:
    """One consistent reading of the controller's writes the cache may not show yet.

    ``written``: node name -> the latest Node written. ``launching``: Provisioner name -> the
    room reserved by its launches whose Node is not written yet (core units). Read together
    (:meth:`InFlightLedger.writes`), a launch is counted exactly once: by its reservation until
    its Node is written, by the Node after.
    """

    written: Mapping[str, Object]
    launching: Mapping[str, Resources]


@dataclass(frozen=True, slots=True)
class InFlight:
    """A pod capacity is on its way for: covered, so no later round launches for it again.

    ``node``: the Node it is nominated to, ``None`` while its launch is still running.
    ``until``: clock wall time when this memory ends at the latest (the nomination's deadline).
    Released earlier when a snapshot shows the nomination on the Node, the pod bound or gone,
    the Node gone, or (``node is None``) when the round that launches it ends without a node
    for it.
    """

    node: str | None
    until: float

    @property
    def launching(self) -> bool:
        return self.node is None


class InFlightLedger:
    """Pods in flight, written Nodes, launch reservations, placements, displaced-from, promised room: one lock.

    ``nominated_on`` reads a Node's nominated pod UIDs (the provisioning controller passes its
    nominations rule); the ledger reads it to tell when a snapshot shows a nomination.
    """

    def __init__(self, nominated_on: NominatedOn) -> None:
        self._nominated_on = nominated_on
        self._lock = threading.Lock()
        self._in_flight: dict[str, InFlight] = {}
        self._written: dict[str, Object] = {}
        # launch (node request id) -> (Provisioner name, room reserved against its limits)
        self._reservations: dict[str, tuple[str, Resources]] = {}
        self._displaced_from: dict[str, frozenset[str]] = {}
        # replacement (or existing) node name -> (expiring node name, pod UID) -> the pod's requests
        self._promised: dict[str, dict[tuple[str, str], Resources]] = {}
        self._placed: dict[str, float] = {}  # existing node name -> clock wall time its nomination window ends

    # ------------------------------------------------------------------ reading
    def covers(self, pod_uid: str) -> bool:
        """Whether capacity is on its way for the pod (launching or nominated)."""
        with self._lock:
            return pod_uid in self._in_flight

    def in_flight(self) -> dict[str, InFlight]:
        """A copy of the pods in flight: pod UID -> :class:`InFlight`."""
        with self._lock:
            return dict(self._in_flight)

    def written(self) -> dict[str, Object]:
        """A copy of the Nodes written that no snapshot has shown yet: node name -> Node."""
        with self._lock:
            return dict(self._written)

    def writes(self) -> Writes:
        """The Nodes written and the launch reservations, read under one lock (see :class:`Writes`)."""
        with self._lock:
            launching: dict[str, Resources] = {}
            for provisioner, room in self._reservations.values():
                launching[provisioner] = launching.get(provisioner, Resources()) + room
            return Writes(dict(self._written), launching)

    def reservations(self) -> dict[str, tuple[str, Resources]]:
        """A copy of the launch reservations: launch id -> (Provisioner name, room)."""
        with self._lock:
            return dict(self._reservations)

    def nominated_until(self, node_name: str) -> float:
        """Clock wall time (epoch seconds) until which a round's placement makes the node count as nominated; 0.0 if none."""
        with self._lock:
            return self._placed.get(node_name, 0.0)

    def displaced_from(self, pod_uids: Iterable[str]) -> list[str]:
        """Sorted names of the nodes whose nominations of any of ``pod_uids`` ended because they filled up."""
        with self._lock:
            return sorted(set().union(*(self._displaced_from.get(uid, ()) for uid in pod_uids)))

    # ------------------------------------------------------------------ recording
    def launching(self, pod_uids: Iterable[str], until: float) -> None:
        """The pods' launch is running: covered until it ends (:meth:`end_launches`) or ``until``."""
        with self._lock:
            for uid in pod_uids:
                self._in_flight[uid] = InFlight(None, until)

    def end_launches(self, pod_uids: Iterable[str]) -> None:
        """Forget those of ``pod_uids`` still launching: their round ended without a node for them."""
        with self._lock:
            for uid in pod_uids:
                entry = self._in_flight.get(uid)
                if entry is not None and entry.launching:
                    del self._in_flight[uid]

    def placed(self, node_names: Iterable[str], now: float, until: float) -> None:
        """A round at ``now`` placed pending pods on these existing nodes: nominated until ``until`` (epoch seconds).

        A later placement extends the window; windows ended by ``now`` are forgotten.
        """
        with self._lock:
            for name in [n for n, end in self._placed.items() if end <= now]:
                del self._placed[name]
            for name in node_names:
                self._placed[name] = max(until, self._placed.get(name, 0.0))

    def reserve(self, launch: str, provisioner: str, room: Resources) -> None:
        """Launch ``launch`` (its node request id) holds ``room`` against ``provisioner``'s limits until it ends."""
        with self._lock:
            self._reservations[launch] = (provisioner, room)

    def unreserve(self, launches: Iterable[str]) -> None:
        """These launches ended without a Node (failed, insufficient capacity, their round gave up): their room is free."""
        with self._lock:
            for launch in launches:
                self._reservations.pop(launch, None)

    def wrote(
        self, name: str, node: Object, pod_uids: Iterable[str] = (), until: float = 0.0, *, settles: str | None = None
    ) -> None:
        """The controller wrote Node ``name`` (``node``: what the API answered).

        ``pod_uids`` are nominated to it until ``until``. ``settles``: the launch that created
        it, whose reservation ends in the same step (the Node's capacity counts from now on).
        """
        with self._lock:
            self._written[name] = node
            for uid in pod_uids:
                self._in_flight[uid] = InFlight(name, until)
            if settles is not None:
                self._reservations.pop(settles, None)

    def rewrote(self, name: str, node: Object) -> None:
        """A later write of Node ``name``: replaces the ledger's copy if it still holds one."""
        with self._lock:
            if name in self._written:
                self._written[name] = node

    def displaced(self, pod_uids: Iterable[str], node_name: str) -> None:
        """The nominations of ``pod_uids`` on ``node_name`` ended: the node filled up."""
        with self._lock:
            for uid in pod_uids:
                self._displaced_from[uid] = self._displaced_from.get(uid, frozenset()) | {node_name}

    def promise(self, holder: str, room: Mapping[str, Mapping[str, Resources]]) -> None:
        """Hold room for expiring node ``holder``'s pods: target node -> pod UID -> its requests.

        Replaces the earlier promises to ``holder``.
        """
        with self._lock:
            self._withdraw(holder)
            for target, pods in room.items():
                for uid, amount in pods.items():
                    if amount:
                        self._promised.setdefault(target, {})[(holder, uid)] = amount

    def withdraw(self, holder: str) -> None:
        """Drop the room promised to ``holder``'s pods (they are being placed again)."""
        with self._lock:
            self._withdraw(holder)

    def _withdraw(self, holder: str) -> None:
        for target in list(self._promised):
            for key in [k for k in self._promised[target] if k[0] == holder]:
                del self._promised[target][key]
            if not self._promised[target]:
                del self._promised[target]

    # ------------------------------------------------------------------ releasing
    def forget_node(self, name: str) -> None:
        """A watch saw the Node deleted: our copy of it is stale (the only release by an event)."""
        with self._lock:
            self._written.pop(name, None)
            self._placed.pop(name, None)

    def release(self, snapshot: Snapshot, now: float) -> None:
        """Forget what ``snapshot`` (taken at the start of a round) shows on its own.

        A pod in flight is released when the snapshot's Node carries its nomination, when the
        pod is bound or gone, when its Node is gone (deleted: the pod needs capacity again), or
        at its deadline (``now``, clock wall time); a pod still launching is left to the round
        that launches it. A written Node is released when the snapshot shows it and no pod in
        flight still needs our copy.
        """
        nominated: dict[str, Collection[str]] = {}  # each node's nominations read once, not once per pod
        with self._lock:
            for uid, entry in list(self._in_flight.items()):
                if entry.node is None:
                    continue  # its launch is running; the launching round decides
                node = snapshot.nodes.get(entry.node)
                if uid not in snapshot.pods or uid in snapshot.bound_pod_uids or now >= entry.until:
                    del self._in_flight[uid]
                elif node is None:
                    if entry.node not in self._written:  # deleted before the cache showed it
                        del self._in_flight[uid]
                else:
                    if entry.node not in nominated:
                        nominated[entry.node] = self._nominated_on(node)
                    if uid in nominated[entry.node]:
                        del self._in_flight[uid]
            needed = {entry.node for entry in self._in_flight.values()}
            for name in list(self._written):
                if name in snapshot.nodes and name not in needed:
                    del self._written[name]

    def release_displaced(self, snapshot: Snapshot) -> None:
        """Forget the displaced-from memory of pods ``snapshot`` shows gone or bound."""
        with self._lock:
            for uid in list(self._displaced_from):
                if uid not in snapshot.pods or uid in snapshot.bound_pod_uids:
                    del self._displaced_from[uid]

    def reserved(self, nodes: Collection[str], snapshot: Snapshot) -> dict[str, Resources]:
        """Per target node, the room still promised (forgets the promises ``snapshot`` shows ended).

        ``nodes``: names of the snapshot's Nodes and of our own writes it does not show yet. A promise holds while
        its expiring node is in ``nodes`` and its pod is in ``snapshot``, bound to that node and
        not being deleted; after that the pod's owner recreates it (a new UID, pending) and the
        room is the new pod's to take.
        """
        reserved: dict[str, Resources] = {}
        with self._lock:
            for target in list(self._promised):
                held = {
                    (old, uid): amount
                    for (old, uid), amount in self._promised[target].items()
                    if old in nodes and _still_bound(snapshot.pods.get(uid), old)
                }
                if not held:
                    del self._promised[target]  # every pod it was promised to has moved or gone
                    continue
                self._promised[target] = held
                if target not in nodes:
                    continue  # not in this snapshot (yet): kept for the next round
                total = Resources()
                for amount in held.values():
                    total = total + amount
                reserved[target] = total
        return reserved


def _still_bound(pod: Mapping[str, Any] | None, node_name: str) -> bool:
    """Whether ``pod`` exists, is bound to ``node_name`` and is not being deleted (not evicted yet)."""
    if pod is None:
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("spec") or {}).get("nodeName") == node_name
