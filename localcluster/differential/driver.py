"""The differential test's cluster driver: plan a workload, launch the plan on kwok, let kube-scheduler bind, compare.

It runs on a local cluster whose Groupless controller is not started
(``Settings(controller=False)``): the webhook and the extender run, nothing launches on its
own. For one :class:`~localcluster.differential.workload.Workload`, :meth:`Driver.run`:

1. applies the workload's setup (Namespace, RuntimeClass, Provisioners through the admission
   webhook, LimitRange, DaemonSets, zonal PersistentVolumes and their claims) and waits for the
   claims to bind;
2. launches the existing nodes (kwok Nodes of the general Provisioner), initialises them, binds
   the filler pods there and waits for every DaemonSet pod to be bound;
3. plans, as ``groupless plan`` does (:func:`~localcluster.differential.planning.plan_objects`),
   over what the cluster holds (Provisioners, Nodes, pods, DaemonSets, LimitRanges, volumes) and
   the workload's pods, which do not exist yet;
4. creates the pods in the solver's queue order (cpu, then memory, descending, then name; the
   requests as the solver read them, LimitRange defaults included), so
   kube-scheduler meets them in the order the plan placed them, and waits until each is bound
   or marked Unschedulable: kube-scheduler has placed what existing room takes
   (the reverse check: the plan must launch nothing for those);
5. launches the planned nodes exactly as the provisioning controller does: a
   :class:`~provisioner.cloudprovider.types.NodeRequest` per planned node (its labels, the
   Provisioner's, its taints), the kwok cloud provider's offering choice, and the Node from
   :func:`provisioner.controllers.provisioning.nodes.node_manifest` through the controller's
   :class:`~provisioner.controllers.provisioning.launcher.Launcher` (labels, taints, capacity,
   allocatable, the nominations of the pods planned there), waits until the extender holds
   each nominated pod to its node (:meth:`Driver.wait_extender_holds`: a real instance boots
   for minutes, a kwok one at once), then removes each node's ``karpenter.sh/not-ready`` taint
   once kwok reports it Ready with the controller's own
   :class:`~provisioner.controllers.initialization.InitializationController`;
6. waits until every pod the plan placed is bound and every pod it could not place has been
   judged by kube-scheduler against every node (or :attr:`Driver.settle_seconds` pass), and
   compares (:func:`~localcluster.differential.agreement.judge`);
7. deletes everything the workload made (its namespace, Nodes, Provisioners, volumes).

Raises :class:`DriverError` when the cluster does not do its part (an object refused, a node
that never turns Ready); a pod that is not bound where planned is a disagreement, not an error.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from localcluster.cluster import LocalCluster
from localcluster.differential.agreement import Agreement, Expected, NodeFacts, Observed, judge
from localcluster.differential.planning import Planned, plan_objects
from localcluster.differential.workload import ExistingNode, Workload
from provisioner.api.types import Provisioner
from provisioner.clock import RealClock
from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.cloudprovider.types import NodeRequest
from provisioner.controllers.initialization import InitializationController
from provisioner.controllers.objects import Context
from provisioner.controllers.provisioning.launcher import Launcher, LaunchJob, LaunchStatus
from provisioner.controllers.provisioning.nodes import node_request, node_request_id, taint_dicts
from provisioner.kube.api import ConflictError, NotFoundError, Object
from provisioner.kube.client import KubeClient
from provisioner.model import labels as wk
from provisioner.model import objects
from provisioner.model.requirements import IN, Requirement, Requirements
from provisioner.model.resources import CPU, MEMORY
from provisioner.scheduling.pods import Pod
from provisioner.scheduling.provisioners import provisioner_node_labels
from provisioner.scheduling.solver import PlannedNode
from provisioner.settings import ProvisioningSettings


class DriverError(RuntimeError):
    """The cluster did not do its part for a workload; the message says what and for which object."""


@dataclass(frozen=True)
class Outcome:
    """One workload's run: the plan, the verdicts, the nodes launched for the plan, and timings (seconds)."""

    workload: Workload
    planned: Planned
    agreement: Agreement
    launched: tuple[str, ...]
    timings: Mapping[str, float] = field(default_factory=dict)


def queue_order(pods: Sequence[Mapping[str, Any]], read: Iterable[Pod]) -> list[Mapping[str, Any]]:
    """``pods`` (manifests) in the solver's queue order: cpu, then memory, descending, then name.

    ``read``: the same pods as the solver read them (:attr:`Planned.pods
    <localcluster.differential.planning.Planned.pods>`: effective requests, with the
    LimitRange defaults admission gives a container without requests); a manifest's own
    requests would put such a pod last.
    """
    requests = {p.key: p.requests for p in read}

    def key(pod: Mapping[str, Any]) -> tuple[int, int, str]:
        name = str(pod["metadata"]["name"])
        asked = requests[f"{pod['metadata'].get('namespace') or 'default'}/{name}"]
        return -asked.get(CPU), -asked.get(MEMORY), name
    return sorted(pods, key=key)


def _yaml(objs: Iterable[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all([dict(o) for o in objs], sort_keys=False)


def _unschedulable_message(pod: Object) -> str | None:
    """kube-scheduler's message when it marked the pod Unschedulable, else None."""
    condition = objects.condition(pod, "PodScheduled")
    if condition and condition.get("status") == "False" and condition.get("reason") == "Unschedulable":
        return str(condition.get("message") or "")
    return None


def _facts(node: Object, planned: bool) -> NodeFacts:
    taints = frozenset((str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                       for t in (objects.spec(node).get("taints") or ()))
    allocatable = {str(k): str(v) for k, v in (objects.status(node).get("allocatable") or {}).items()}
    return NodeFacts(objects.name(node), dict(objects.labels(node)), taints, allocatable, planned)


class Driver:
    """Runs workloads on ``cluster`` (see the module docstring); :meth:`close` when done.

    ``settle_seconds``: how long kube-scheduler gets to bind the pods once the planned nodes are
    Ready. ``progress``: called with a line per step.
    """

    def __init__(self, cluster: LocalCluster, *, settle_seconds: float = 90.0, ready_seconds: float = 120.0,
                 progress: Callable[[str], None] | None = None) -> None:
        self.cluster = cluster
        self.settle_seconds = settle_seconds
        self.ready_seconds = ready_seconds
        self.say = progress or (lambda line: None)
        self.api = KubeClient.from_kubeconfig(str(cluster.kubeconfig), qps=200, burst=400)
        self.clock = RealClock()
        self.cloud = KwokCloudProvider(self.api, clock=self.clock)
        self.launcher = Launcher(self.api, self.cloud, self.clock, ProvisioningSettings())
        self.initialization = InitializationController(Context(kube=self.api, cloud=self.cloud, clock=self.clock))

    def close(self) -> None:
        self.launcher.shutdown()
        self.api.close()

    # ------------------------------------------------------------------ helpers
    def _wait(self, done: Callable[[], bool], seconds: float, what: str, interval: float = 0.25) -> bool:
        """Poll ``done`` until it holds (True) or ``seconds`` pass (False)."""
        deadline = time.monotonic() + seconds
        while True:
            if done():
                return True
            if time.monotonic() >= deadline:
                self.say(f"gave up waiting for {what} after {seconds:.0f}s")
                return False
            time.sleep(interval)

    def _pods(self, namespace: str) -> list[Object]:
        return self.api.list("Pod", namespace=namespace)[0]

    def _kubectl_json(self, *args: str) -> list[Object]:
        items: list[Object] = self.cluster.kubectl_json("get", *args).get("items") or []
        return items

    # ------------------------------------------------------------------ steps
    def apply_setup(self, workload: Workload) -> None:
        """Step 1: the setup objects, then every claim Bound."""
        self.cluster.kubectl("apply", "-f", "-", input=_yaml(workload.setup))
        claims = [o for o in workload.setup if o["kind"] == "PersistentVolumeClaim"]
        if claims and not self._wait(
            lambda: all(objects.status(c).get("phase") == "Bound"
                        for c in self.api.list("PersistentVolumeClaim", namespace=workload.namespace)[0])
            and len(self.api.list("PersistentVolumeClaim", namespace=workload.namespace)[0]) == len(claims),
            60, "the claims to bind"):
            raise DriverError(f"workload {workload.seed}: the claims did not bind to their PersistentVolumes")

    def _provisioner(self, name: str) -> tuple[Provisioner, str]:
        """The Provisioner ``name`` as the cluster holds it (defaulted by the webhook), and its UID."""
        from provisioner.api.schemas import load_provisioner

        obj = self.api.get("Provisioner", name)
        return load_provisioner(obj), objects.uid(obj)

    def launch(self, jobs: Sequence[LaunchJob]) -> list[str]:
        """Launch ``jobs`` through the controller's launcher; the Node names, in order. DriverError when one fails."""
        names = []
        for outcome in self.launcher.launch(jobs):
            if outcome.status is not LaunchStatus.LAUNCHED or outcome.machine is None:
                raise DriverError(f"launching a node for {[p.key for p in outcome.planned.pods]}: "
                                  f"{outcome.status.value}: {outcome.error}")
            names.append(outcome.machine.name)
        return names

    def initialise(self, names: Sequence[str]) -> None:
        """Wait for every node of ``names`` to be Ready, and take its startup taint off as the controller does."""
        pending = set(names)

        def step() -> bool:
            for name in sorted(pending):
                node = self.api.get("Node", name)
                if objects.is_ready(node):
                    try:
                        self.initialization.reconcile(node)
                    except ConflictError:  # kwok wrote the node meanwhile: the controller's requeue
                        continue
                    node = self.api.get("Node", name)
                    if not any(t.get("key") == wk.NOT_READY_TAINT_KEY for t in objects.spec(node).get("taints") or ()):
                        pending.discard(name)
            return not pending

        if not self._wait(step, self.ready_seconds, "the nodes to turn Ready", interval=0.5):
            raise DriverError(f"nodes never turned Ready and initialised: {sorted(pending)}")

    def existing_nodes(self, workload: Workload) -> dict[str, str]:
        """Step 2: launch and initialise the existing nodes, bind the fillers; ExistingNode key -> Node name."""
        if not workload.existing:
            return {}
        provisioner, uid = self._provisioner(workload.general_provisioner)
        catalog = {it.name: it for it in self.cloud.get_instance_types(provisioner)}
        jobs = [self._existing_job(workload, provisioner, uid, node, catalog) for node in workload.existing]
        names = dict(zip((n.key for n in workload.existing), self.launch(jobs), strict=True))
        self.initialise(list(names.values()))
        fillers = []
        for pod in workload.fillers:
            spec = dict(pod["spec"])
            spec["nodeName"] = names[spec["nodeName"]]
            fillers.append({**pod, "spec": spec})
        if fillers:
            self.cluster.kubectl("create", "-f", "-", input=_yaml(fillers))
        return names

    def _existing_job(self, workload: Workload, provisioner: Provisioner, uid: str, node: ExistingNode,
                      catalog: Mapping[str, Any]) -> LaunchJob:
        instance_type = catalog[node.instance_type]
        requirements = Requirements((Requirement.of(wk.ZONE, IN, [node.zone]),
                                     Requirement.of(wk.CAPACITY_TYPE, IN, [wk.CAPACITY_TYPE_ON_DEMAND])))
        offering = next(o for o in instance_type.offerings
                        if o.zone == node.zone and o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND)
        planned = PlannedNode(provisioner=provisioner.name, pods=(), requirements=requirements,
                              instance_type_options=(instance_type,), offering=offering, price=offering.price,
                              labels={}, taints=tuple(provisioner.spec.taints))
        request = NodeRequest(
            id=node_request_id(provisioner, (), salt=f"{workload.namespace}/{node.key}"),
            provisioner=provisioner, instance_type_options=(instance_type,), requirements=requirements,
            labels=provisioner_node_labels(provisioner, {}), taints=tuple(taint_dicts(provisioner.spec.taints)),
        )
        return LaunchJob(planned, request, nominate=False, provisioner_uid=uid)

    def wait_daemonsets(self, workload: Workload) -> None:
        """Every DaemonSet of the workload has a pod bound on every node it wants."""
        if not any(o["kind"] == "DaemonSet" for o in workload.setup):
            return

        def done() -> bool:
            sets = self.api.list("DaemonSet", namespace=workload.namespace)[0]
            pods = self._pods(workload.namespace)
            for ds in sets:
                status = objects.status(ds)
                generation = objects.meta(ds).get("generation") or 0
                if not status or int(str(generation)) > int(status.get("observedGeneration") or 0):
                    return False
                bound = [p for p in pods if objects.spec(p).get("nodeName")
                         and any(r.get("name") == objects.name(ds) for r in objects.owner_references(p))]
                if len(bound) != int(status.get("desiredNumberScheduled") or 0):
                    return False
            return True

        if not self._wait(done, 90, "the DaemonSet pods"):
            raise DriverError(f"workload {workload.seed}: DaemonSet pods were not all bound")

    def plan(self, workload: Workload) -> Planned:
        """Step 3: the plan over the cluster's objects and the workload's pods (not created yet)."""
        ns = workload.namespace
        provisioners = [p for p in self._kubectl_json("provisioners.karpenter.sh")
                        if objects.name(p) in {objects.name(w) for w in workload.provisioners}]
        live = [
            *provisioners,
            *self._kubectl_json("nodes"),
            *self._kubectl_json("pods", "-n", ns),
            *self._kubectl_json("daemonsets", "-n", ns),
            *self._kubectl_json("limitranges", "-n", ns),
            *[pv for pv in self._kubectl_json("persistentvolumes") if objects.name(pv).startswith(f"diff-{workload.seed}-")],
            *self._kubectl_json("persistentvolumeclaims", "-n", ns),
        ]
        return plan_objects([*live, *workload.pods])

    def create_pods(self, workload: Workload, planned: Planned) -> None:
        """Step 4: the pods, in the solver's queue order; then wait until each is bound or Unschedulable."""
        ordered = queue_order(workload.pods, planned.pods)
        self.cluster.kubectl("create", "-f", "-", input=_yaml(ordered))
        names = {p["metadata"]["name"] for p in workload.pods}

        def judged() -> bool:
            pods = [p for p in self._pods(workload.namespace) if objects.name(p) in names]
            return len(pods) == len(names) and all(
                objects.spec(p).get("nodeName") or _unschedulable_message(p) is not None for p in pods)

        if not self._wait(judged, 90, "kube-scheduler's first verdict on every pod"):
            raise DriverError(f"workload {workload.seed}: kube-scheduler did not judge every pod within 90s")

    def launch_plan(self, workload: Workload, planned: Planned) -> list[str]:
        """Step 5: the planned nodes, as the provisioning controller launches them; their Node names, in plan order."""
        uids = {objects.key(p): objects.uid(p) for p in self._pods(workload.namespace)}
        jobs = []
        for node in planned.plan.new_nodes:
            provisioner = planned.provisioners[node.provisioner]
            _, provisioner_uid = self._provisioner(node.provisioner)
            pods = tuple(replace(p, uid=uids.get(p.key, p.uid)) for p in node.pods)
            request = node_request(provisioner, node, node_request_id(provisioner, (p.uid for p in pods)), {})
            jobs.append(LaunchJob(replace(node, pods=pods), request, nominate=True, provisioner_uid=provisioner_uid))
        names = self.launch(jobs)
        self.wait_extender_holds(workload, dict(zip(names, (job.planned.pods for job in jobs), strict=True)))
        self.initialise(names)
        return names

    def _extender_filter(self, pod: Object, names: list[str]) -> list[str]:
        """The extender's ``/filter`` answer for ``pod`` over ``names``: the names that pass (as kube-scheduler asks)."""
        url = f"https://127.0.0.1:{self.cluster.ports['extender']}/filter"
        request = urllib.request.Request(url, data=json.dumps({"Pod": pod, "NodeNames": names}).encode(),
                                         headers={"Content-Type": "application/json"})
        context = ssl.create_default_context(cafile=str(self.cluster.pki.ca.cert))
        with urllib.request.urlopen(request, timeout=10, context=context) as response:  # noqa: S310
            answer = json.loads(response.read())
        return list(answer.get("NodeNames") or [])

    def wait_extender_holds(self, workload: Workload, planned: Mapping[str, Sequence[Any]]) -> None:
        """Wait until the extender keeps every pending pod nominated to a new node (``planned``: node -> pods) to it.

        The provisioning controller writes a Node minutes before its instance is Ready; here kwok
        makes it Ready at once, so this waits, as that time would, for the extender to have seen
        the nominations (its answer to kube-scheduler's filter call is the pod's node alone)
        before the nodes are initialised.
        """
        wanted = {pod.key: node for node, pods in planned.items() for pod in pods}
        names = [objects.name(n) for n in self.api.list("Node")[0]]

        def holds() -> bool:
            for pod in self._pods(workload.namespace):
                node = wanted.get(objects.key(pod))
                if node is not None and not objects.spec(pod).get("nodeName") and \
                        self._extender_filter(pod, names) != [node]:
                    return False
            return True

        if not self._wait(holds, 60, "the extender to hold the nominated pods", interval=0.5):
            raise DriverError(f"workload {workload.seed}: the extender did not hold the nominated pods to their "
                              f"nodes within 60s")

    def settle(self, workload: Workload, expected: Sequence[Expected]) -> list[Object]:
        """Step 6: the pods once every placed one is bound and every unplaced one was judged against every node."""
        placed = {e.pod for e in expected if e.node is not None}
        unplaced = {e.pod for e in expected if e.node is None}
        pods: list[Object] = []

        def settled() -> bool:
            nonlocal pods
            pods = self._pods(workload.namespace)
            total = len(self.api.list("Node")[0])
            by_key = {objects.key(p): p for p in pods}
            if any(not objects.spec(by_key[k]).get("nodeName") for k in placed if k in by_key):
                return False
            for key in unplaced:
                pod = by_key.get(key)
                message = _unschedulable_message(pod) if pod is not None else None
                if pod is not None and not objects.spec(pod).get("nodeName") and (
                        message is None or not message.startswith(f"0/{total} nodes")):
                    return False
            return True

        self._wait(settled, self.settle_seconds, "the pods to settle", interval=0.5)
        return pods

    def cleanup(self, workload: Workload) -> None:
        """Step 7: delete the workload's namespace, Nodes, Provisioners, volumes and RuntimeClass; wait for the Nodes to go."""
        ns = workload.namespace
        self.cluster.kubectl("delete", "pods", "--all", "-n", ns, "--force", "--grace-period=0", "--wait=false",
                             check=False)
        self.cluster.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)
        names = {objects.name(p) for p in workload.provisioners}
        for node in self.api.list("Node")[0]:
            if objects.labels(node).get(wk.PROVISIONER_NAME) in names:
                name = objects.name(node)
                try:
                    self.api.patch("Node", name, {"metadata": {"finalizers": None}})
                    self.api.delete("Node", name)
                except NotFoundError:
                    pass
        for name in sorted(names):
            self.cluster.kubectl("delete", "provisioners.karpenter.sh", name, "--ignore-not-found", "--wait=false",
                                 check=False)
        for obj in workload.setup:
            if obj["kind"] in ("PersistentVolume", "RuntimeClass"):
                self.cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found",
                                     "--wait=false", check=False)
        self._wait(lambda: not any(objects.labels(n).get(wk.PROVISIONER_NAME) in names
                                   for n in self.api.list("Node")[0]), 60, "the nodes to be deleted")

    # ------------------------------------------------------------------ the run
    def run(self, workload: Workload) -> Outcome:
        """Steps 1-7 for ``workload`` (see the module docstring); the cleanup runs whatever happens."""
        timings: dict[str, float] = {}
        started = time.monotonic()

        def mark(step: str) -> None:
            timings[step] = round(time.monotonic() - started - sum(timings.values()), 2)
            self.say(f"workload {workload.seed}: {step} done ({timings[step]:.1f}s)")

        try:
            self.apply_setup(workload)
            mark("setup")
            existing = self.existing_nodes(workload)
            self.wait_daemonsets(workload)
            mark("existing nodes")
            planned = self.plan(workload)
            mark("plan")
            expected = expectations(workload, planned)
            self.create_pods(workload, planned)
            mark("pods")
            launched = self.launch_plan(workload, planned)
            mark("launch")
            pods = self.settle(workload, [_named(e, launched) for e in expected])
            mark("settle")
            nodes = self.api.list("Node")[0]
            launched_set = set(launched)
            facts = [_facts(n, objects.name(n) in launched_set) for n in nodes
                     if objects.name(n) in launched_set or objects.name(n) in existing.values()]
            agreement = judge([_named(e, launched) for e in expected], observations(pods), facts)
            return Outcome(workload, planned, agreement, tuple(launched), timings)
        finally:
            self.cleanup(workload)
            mark("cleanup")


#: A planned new node, before it has a Node name: ``new:<index in plan.new_nodes>``.
_NEW = "new:"


def expectations(workload: Workload, planned: Planned) -> list[Expected]:
    """The plan's answer for each of the workload's pods, in the workload's order.

    New nodes are named ``new:<index>`` until launched (:func:`_named` gives them their Node name).
    """
    where: dict[str, str] = {}
    for index, node in enumerate(planned.plan.new_nodes):
        for pod in node.pods:
            where[pod.key] = f"{_NEW}{index}"
    for placement in planned.plan.existing:
        for pod in placement.pods:
            where[pod.key] = placement.node
    reasons = {e.pod.key: e.reason for e in planned.plan.unschedulable}
    result = []
    for manifest in workload.pods:
        key = f"{manifest['metadata']['namespace']}/{manifest['metadata']['name']}"
        result.append(Expected(key, where.get(key), reasons.get(key, "not in the plan"), twins_key(manifest)))
    return result


def twins_key(pod: Mapping[str, Any]) -> str:
    """What a pod shares with its twins: the manifest without its name (namespace, labels, spec), as canonical JSON."""
    metadata = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "name"}
    return json.dumps({**pod, "metadata": metadata}, sort_keys=True)


def _named(expected: Expected, launched: Sequence[str]) -> Expected:
    if expected.node is not None and expected.node.startswith(_NEW):
        return replace(expected, node=launched[int(expected.node[len(_NEW):])])
    return expected


def observations(pods: Iterable[Object]) -> list[Observed]:
    """kube-scheduler's answer for each pod: its node, or its Unschedulable message."""
    return [Observed(objects.key(p), objects.spec(p).get("nodeName") or None, _unschedulable_message(p) or "")
            for p in pods]


def describe(outcome: Outcome) -> str:
    """A multi-line report: the workload's agreement, then each disagreement with its cause."""
    a = outcome.agreement
    lines = [f"seed {outcome.workload.seed}: {a.agreed}/{a.total} pods agree; {len(outcome.launched)} node(s) "
             f"launched; features {json.dumps(dict(outcome.workload.features), sort_keys=True)}"]
    lines += [f"  DISAGREES {v.pod}: {v.cause}" for v in a.disagreements]
    return "\n".join(lines)


__all__ = ["Driver", "DriverError", "Outcome", "describe", "expectations", "observations", "queue_order", "twins_key"]
