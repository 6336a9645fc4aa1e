"""Faults on the local cluster: components killed and restarted, EC2 failing, and what must never happen.

The controller talks to EC2 through :class:`localcluster.faults.FaultProxy` (its EC2 endpoint
setting points at the proxy, which forwards to moto): 30 % of CreateFleet and TerminateInstances
calls fail with throttling, 503s or lost answers, drawn evenly. Components are killed with
SIGKILL and restarted (the controller by its supervisor, as a kubelet restarts a container), or
stopped for a while (kube-apiserver, the webhook, the extender, the leader with a standby
running). A watcher polls every second, through every scenario, for what must never happen:

* an instance launched twice: two live instances tagged with the same node request;
* an instance left without a Node for longer than :data:`ROUND_SECONDS` while a leader runs and
  kube-apiserver answers (the clock of an instance stops while nobody can act on it);
* a broken PodDisruptionBudget: fewer Ready pods than ``minAvailable`` once the workload is up;
* a lost pod: a pod without an owner (nothing recreates it) that disappears, or a workload that
  does not end Running;
* a crashed server: a Groupless process that exits without being killed, or a traceback in a
  Groupless log.

One scenario per test, each on its own Provisioner, in file order; the last one hands the
controller back to the cluster without the proxy.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from localcluster.cluster import CLUSTER_NAME, LocalCluster
from localcluster.faults import KINDS, FaultPlan, FaultProxy
from localcluster.walkthrough import LogCursor, Observer, node_age_seconds
from provisioner.kube.api import ApiError
from provisioner.kube.client import KubeClient

#: The EC2 faults of every scenario: this share of these calls fail, the fault drawn from KINDS.
PLAN = FaultPlan(rate=0.3, kinds=KINDS, actions=frozenset({"CreateFleet", "TerminateInstances"}))
#: One provisioning round, in seconds: the 10 s batch window, a launch with its EC2 retries at the
#: faults' rate (botocore's three attempts and the provider's back-off on throttling: up to ~10 s),
#: the 5 s back-off after a launch error; for a new leader, its cache sync and, when its warm-up has
#: not finished yet, the instance-type catalog it sizes adopted Nodes with (moto's
#: DescribeInstanceTypes through the proxy: seconds on a quiet machine, 35-49 s measured at load
#: average 18-24 on 2 cores). Garbage collection's grace, which this replaces, is 300 s.
ROUND_SECONDS = 60.0
WAITING_FOR_LEASE = re.compile(r"Waiting for lease \S+ as (\S+)")
LEASE = ("kube-system", "groupless-controller")
GROUPLESS = ("webhook", "extender", "controller")
TRACEBACK = "Traceback (most recent call last)"
EXITED = re.compile(r"supervisor: (\S+) exited \(([^)]*)\)")


def say(message: str) -> None:
    print(f"[e2e faults {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Watcher:
    """Polls the cluster and moto every second and records what must never happen (see the module docstring)."""

    cluster: LocalCluster
    kube: KubeClient
    observer: Observer
    started: float = field(default_factory=time.time)
    violations: list[str] = field(default_factory=list)
    #: Set while a leader runs and kube-apiserver answers: the instances' clocks run.
    accountable: threading.Event = field(default_factory=threading.Event)
    nodeless: dict[str, float] = field(default_factory=dict)
    longest_nodeless: float = 0.0
    longest_overall: float = 0.0
    pdbs: dict[str, int] = field(default_factory=dict)
    #: Pods nothing recreates (no owner), name -> their app: each must exist until the test deletes it.
    kept_pods: dict[str, str] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ec2: Any = None

    def start(self) -> None:
        """Two loops, each at most once a second: pods (PDBs, kept pods), and instances against Nodes."""
        self._ec2 = self.observer.ec2()  # moto itself, not the proxy: the watcher sees no fault
        for name, poll in (("pods", self._poll_pods), ("instances", self._poll_instances)):
            thread = threading.Thread(target=self._run, args=(name, poll), name=f"fault-watcher-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def arm_pdb(self, selector: str, min_available: int) -> None:
        with self._lock:
            self.pdbs[selector] = min_available

    def disarm_pdb(self, selector: str) -> None:
        with self._lock:
            self.pdbs.pop(selector, None)

    def take(self) -> tuple[list[str], float]:
        """The violations recorded since the last call, and the longest an instance had no Node meanwhile (seconds)."""
        with self._lock:
            found, self.violations = self.violations, []
            longest, self.longest_nodeless = self.longest_nodeless, 0.0
        return found, longest

    def _violation(self, message: str) -> None:
        say(f"VIOLATION: {message}")
        with self._lock:
            self.violations.append(message)

    def _run(self, name: str, poll: Callable[[float], None]) -> None:
        last = time.monotonic()
        while not self._stop.wait(max(0.0, 1.0 - (time.monotonic() - last))):
            now = time.monotonic()
            try:
                poll(now - last)
            except ApiError:
                pass  # kube-apiserver is down: nothing to see, and no clock runs
            except Exception as error:  # a broken poll must be visible, not silent
                self._violation(f"the watcher could not poll {name}: {error!r}")
            last = now
            self.polls[name] = self.polls.get(name, 0) + 1

    def _live_instances(self) -> dict[str, dict[str, str]]:
        """Our pending or running instances: id -> tags."""
        filters = [{"Name": "tag:groupless.dev/cluster", "Values": [CLUSTER_NAME]},
                   {"Name": "instance-state-name", "Values": ["pending", "running"]}]
        found: dict[str, dict[str, str]] = {}
        for page in self._ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    found[instance["InstanceId"]] = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        return found

    def _poll_instances(self, elapsed: float) -> None:
        instances = self._live_instances()
        nodes, _ = self.kube.list("Node")
        self._launched_twice(instances)
        self._nodes_of_instances(instances, nodes, elapsed)

    def _launched_twice(self, instances: dict[str, dict[str, str]]) -> None:
        live: dict[str, list[str]] = {}
        for instance_id, tags in instances.items():
            request = tags.get("groupless.dev/node-request")
            if request:
                live.setdefault(request, []).append(instance_id)
        for request, ids in live.items():
            if len(ids) > 1:
                self._violation(f"node request {request} has {len(ids)} live instances: {sorted(ids)}")

    def _nodes_of_instances(self, instances: dict[str, dict[str, str]], nodes: list[dict[str, Any]],
                            elapsed: float) -> None:
        with_node = {str((n.get("spec") or {}).get("providerID", "")).rsplit("/", 1)[-1] for n in nodes}
        counting = self.accountable.is_set()
        for gone in set(self.nodeless) - set(instances):
            del self.nodeless[gone]
        for instance_id in instances:
            if instance_id in with_node:
                self.nodeless.pop(instance_id, None)
                continue
            waited = self.nodeless.get(instance_id, 0.0) + (elapsed if counting else 0.0)
            self.nodeless[instance_id] = waited
            self.longest_nodeless = max(self.longest_nodeless, waited)
            self.longest_overall = max(self.longest_overall, waited)
            if waited > ROUND_SECONDS and waited - elapsed <= ROUND_SECONDS:
                self._violation(f"instance {instance_id} has had no Node for {waited:.0f}s while a leader ran")

    def _poll_pods(self, elapsed: float) -> None:
        pods, _ = self.kube.list("Pod", "default")
        names = {p["metadata"]["name"] for p in pods}
        with self._lock:
            kept, pdbs = set(self.kept_pods), dict(self.pdbs)
        for name in sorted(kept - names):
            self._violation(f"pod {name} was lost")
            with self._lock:
                self.kept_pods.pop(name, None)
        for selector, minimum in pdbs.items():
            key, value = selector.split("=", 1)
            ready = [p for p in pods if (p["metadata"].get("labels") or {}).get(key) == value
                     and not p["metadata"].get("deletionTimestamp") and _ready(p)]
            if len(ready) < minimum:
                self._violation(f"PodDisruptionBudget of {selector} broken: {len(ready)} Ready pods < {minimum}")


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


@dataclass
class Faults:
    """The cluster with the controller behind the fault proxy, the watcher, and the scenarios' helpers."""

    cluster: LocalCluster
    proxy: FaultProxy
    watcher: Watcher
    observer: Observer
    kube: KubeClient
    logs: dict[str, LogCursor] = field(default_factory=dict)
    expected_exits: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {"GROUPLESS_AWS_ENDPOINT_URL": self.proxy.url}

    # ----- leadership ------------------------------------------------------------------------
    def leader(self) -> str:
        try:
            lease = self.kube.get("Lease", LEASE[1], LEASE[0])
        except ApiError:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def identity(self, log: LogCursor, timeout: float = 90) -> str:
        """The Lease identity a controller process announces in its log (read from ``log`` on)."""
        seen: list[str] = []

        def announced() -> str | None:
            seen.extend(m.group(1) for line in log.read() for m in [WAITING_FOR_LEASE.search(line)] if m)
            return seen[-1] if seen else None

        return str(self.observer.wait_for(announced, timeout, f"a controller to announce its identity in {log.path}"))

    def wait_leader(self, identity: str, timeout: float = 90) -> None:
        """Wait until ``identity`` holds the Lease; the watcher's clocks run again from then."""
        started = time.monotonic()
        self.observer.wait_for(lambda: self.leader() == identity, timeout, f"{identity} to lead", interval=0.5)
        self.watcher.accountable.set()
        say(f"{identity} leads after {time.monotonic() - started:.1f}s")

    def wait_new_leader(self, old: str, timeout: float = 90) -> str:
        """Wait for a leader other than ``old``; the watcher's clocks run again from then."""
        started = time.monotonic()
        leader = self.observer.wait_for(lambda: (lambda h: h if h not in ("", old) else None)(self.leader()),
                                        timeout, f"a leader other than {old}", interval=0.5)
        self.watcher.accountable.set()
        say(f"new leader {leader} after {time.monotonic() - started:.1f}s")
        return str(leader)

    def kill_controller(self) -> str:
        """SIGKILL the leading controller's process (its supervisor restarts it); returns the killed leader."""
        old = self.leader()
        pid = self.cluster.child_pid("controller")
        assert pid is not None, "the controller's supervisor recorded no child pid"
        self.watcher.accountable.clear()
        os.kill(pid, signal.SIGKILL)
        self.expected_exits.append("controller")
        say(f"killed the controller (pid {pid}, leader {old})")
        return old

    # ----- objects -----------------------------------------------------------------------------
    def provisioner(self, name: str, types: list[str], **spec: Any) -> None:
        manifest = {
            "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": name},
            "spec": {
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "provider": {"subnetSelector": {f"kubernetes.io/cluster/{CLUSTER_NAME}": "*"},
                             "securityGroupSelector": {f"kubernetes.io/cluster/{CLUSTER_NAME}": "*"}},
                **spec,
            },
        }
        self.observer.apply(manifest)

    def deployment(self, name: str, replicas: int, cpu: str = "1") -> None:
        self.observer.apply({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                             "nodeSelector": {"karpenter.sh/provisioner-name": name},
                             "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]},
                },
            },
        })

    def bare_pod(self, name: str, index: int, cpu: str = "1") -> None:
        """A pod of app ``name`` without an owner (nothing would recreate it): the watcher keeps it."""
        pod = f"{name}-bare-{index}"
        self.observer.apply({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "default", "labels": {"app": name}},
            "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"karpenter.sh/provisioner-name": name},
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]},
        })
        with self.watcher._lock:
            self.watcher.kept_pods[pod] = name

    def pdb(self, name: str, min_available: int) -> None:
        self.observer.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": name, "namespace": "default"},
                             "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}}})

    def running(self, name: str, count: int, timeout: float = 180) -> list[dict[str, Any]]:
        """Wait until ``count`` pods of app ``name`` are Running and Ready (and no more exist)."""
        def ready() -> list[dict[str, Any]] | None:
            pods = self.observer.pods(f"app={name}")
            up = [p for p in self.observer.running(pods) if _ready(p)]
            return up if len(up) == count == len([p for p in pods if not p["metadata"].get("deletionTimestamp")]) \
                else None

        found: list[dict[str, Any]] = self.observer.wait_for(ready, timeout, f"{count} pods of {name} Running and Ready",
                                                             interval=1)
        return found

    def nodes(self, provisioner: str) -> dict[str, dict[str, Any]]:
        return {n["metadata"]["name"]: n for n in self.observer.nodes(provisioner)}

    def instances(self, provisioner: str) -> dict[str, dict[str, Any]]:
        """Live instances tagged for ``provisioner``."""
        return {i: v for i, v in self.observer.live_instances().items()
                if v["tags"].get("karpenter.sh/provisioner-name") == provisioner}

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.observer.events() if e.get("reason") == reason]

    def clean_up(self, name: str) -> None:
        """Delete the scenario's workload and Provisioner; wait until its nodes and instances are gone."""
        self.watcher.disarm_pdb(f"app={name}")
        with self.watcher._lock:
            for pod in [p for p, app in self.watcher.kept_pods.items() if app == name]:
                del self.watcher.kept_pods[pod]
        for kind in ("deployment", "pdb"):
            self.cluster.kubectl("delete", kind, name, "-n", "default", "--ignore-not-found", "--wait=false")
        self.cluster.kubectl("delete", "pods", "-l", f"app={name}", "-n", "default", "--wait=false")
        self.observer.wait_for(lambda: not self.observer.pods(f"app={name}"), 120, f"the pods of {name} to go")
        self.cluster.kubectl("delete", "provisioners.karpenter.sh", name, "--ignore-not-found")
        self.observer.wait_for(lambda: not self.nodes(name) and not self.instances(name), 180,
                               f"the nodes and instances of {name} to go", interval=2)

    def finish(self, name: str) -> None:
        """Check the scenario, clean it up, and check the clean-up (its drains and terminations) too."""
        self.check()
        self.clean_up(name)
        self.check()

    # ----- what must never happen ----------------------------------------------------------------
    def check(self) -> None:
        """Fail with every violation the watcher saw, and every crash the logs show, since the last check."""
        problems, longest = self.watcher.take()
        say(f"checked: {len(problems)} violation(s); longest an instance had no Node while a leader ran: "
            f"{longest:.1f}s (limit {ROUND_SECONDS:.0f}s)")
        for component, cursor in self.logs.items():
            for line in cursor.read():
                if TRACEBACK in line:
                    problems.append(f"{component} logged a traceback: {line}")
                exited = EXITED.search(line)
                if exited:
                    if exited.group(1) in self.expected_exits:
                        self.expected_exits.remove(exited.group(1))
                    else:
                        problems.append(f"{component} exited unexpectedly: {line}")
        self.expected_exits.clear()
        assert problems == [], "\n".join(problems)


@pytest.fixture(scope="module")
def faults(cluster: LocalCluster) -> Iterator[Faults]:
    endpoint = cluster.aws_endpoint_url
    assert endpoint is not None, "the fault tests need the aws cloud provider (moto)"
    proxy = FaultProxy(endpoint, plan=PLAN).start()
    kube = KubeClient.from_kubeconfig(str(cluster.kubeconfig))
    observer = Observer(cluster)
    watcher = Watcher(cluster, kube, observer)
    context = Faults(cluster, proxy, watcher, observer, kube,
                     logs={c: LogCursor(cluster.log_path(c)) for c in GROUPLESS})
    for cursor in context.logs.values():
        cursor.skip()
    log = LogCursor(cluster.log_path("controller"))
    log.skip()
    cluster.stop_component("controller")
    cluster.start_component("controller", env=context.env)
    say(f"controller restarted behind the fault proxy {proxy.url} ({PLAN.rate:.0%} of "
        f"{', '.join(sorted(PLAN.actions))} failing)")
    watcher.start()
    context.wait_leader(context.identity(log))
    try:
        yield context
    finally:
        watcher.stop()
        for name in ("controller-standby", "controller"):
            if any(c.name == name for c in cluster.components):
                cluster.stop_component(name)
        cluster.start_component("controller")  # without the proxy, for the tests that follow
        proxy.stop()
        counts = proxy.counts()
        say("EC2 calls through the proxy: " + ", ".join(f"{a} {k} {n}" for (a, k), n in sorted(counts.items())))
        say(f"watcher: {watcher.polls} polls; longest time an instance had no Node while a leader ran: "
            f"{watcher.longest_overall:.1f}s (limit {ROUND_SECONDS:.0f}s)")
        kube.close()


def instance_of(node: dict[str, Any]) -> str:
    return str(node["spec"]["providerID"]).rsplit("/", 1)[-1]


# 1 ---------------------------------------------------------------------------------------------------
def test_controller_killed_mid_launch_while_the_workload_changes(faults: Faults) -> None:
    """Killed with CreateFleet answers in flight, rescaled while down: the instances adopted and used."""
    name = "faults-launch"
    faults.provisioner(name, ["m5.xlarge"], ttlSecondsAfterEmpty=30)
    faults.proxy.hold_answers("CreateFleet")
    try:
        faults.deployment(name, 6)  # 3 pods of 1 cpu per m5.xlarge: two nodes, launched together when one batch
        faults.observer.wait_for(lambda: faults.proxy.holding("CreateFleet") >= 1, 90,
                                 "a CreateFleet call launched, its answer held", interval=0.2)
        with contextlib.suppress(TimeoutError):  # the second, unless the pods came in two batches
            faults.observer.wait_for(lambda: faults.proxy.holding("CreateFleet") >= 2, 5, "a second", interval=0.2)
        orphans = set(faults.instances(name))
        old = faults.kill_controller()
    finally:
        faults.proxy.release_answers("CreateFleet")
    assert 1 <= len(orphans) <= 2 and not faults.nodes(name), (orphans, faults.nodes(name))
    say(f"{len(orphans)} instance(s) launched without a Node: {sorted(orphans)}")
    faults.observer.scale(name, 7)  # the workload changes while no controller runs: two more pods,
    faults.bare_pod(name, 1)  # and two that nothing would recreate if they were lost
    faults.bare_pod(name, 2)
    faults.wait_new_leader(old)
    faults.running(name, 9)
    nodes = faults.nodes(name)
    assert orphans <= {instance_of(n) for n in nodes.values()}, "an instance launched before the kill has no Node"
    assert len(faults.instances(name)) == 3, "9 pods of 1 cpu need three m5.xlarge, the two orphans among them"
    adopted = {e["involvedObject"]["name"] for e in faults.events("Adopted")}
    assert {n for n, node in nodes.items() if instance_of(node) in orphans} <= adopted
    assert not faults.events("OrphanTerminated")
    faults.finish(name)


# 2 ---------------------------------------------------------------------------------------------------
def test_a_lost_createfleet_answer_while_the_workload_changes_is_adopted_by_the_next_round(faults: Faults) -> None:
    """Every try of one CreateFleet loses its answer (the instance runs, the controller sees an error)."""
    name = "faults-lost"
    faults.provisioner(name, ["m5.xlarge"], ttlSecondsAfterEmpty=30)
    faults.proxy.inject_next("CreateFleet", "lost", "lost", "lost")
    faults.deployment(name, 3)
    faults.observer.wait_for(lambda: faults.instances(name), 90, "the instance whose answer is lost", interval=0.5)
    [orphan] = faults.instances(name)
    faults.observer.scale(name, 2)
    faults.running(name, 2)
    [node] = faults.nodes(name).values()
    assert instance_of(node) == orphan and len(faults.instances(name)) == 1
    faults.finish(name)


# 3 ---------------------------------------------------------------------------------------------------
def test_controller_killed_mid_drain(faults: Faults) -> None:
    """A node drained one pod at a time (PDB minAvailable 5 of 6); the controller killed after the first eviction."""
    name = "faults-drain"
    faults.provisioner(name, ["m5.xlarge"])
    faults.deployment(name, 6)
    faults.running(name, 6)
    faults.pdb(name, 5)
    faults.watcher.arm_pdb(f"app={name}", 5)
    victim = sorted(faults.nodes(name))[0]
    on_victim = {p["metadata"]["name"] for p in faults.observer.pods(f"app={name}") if p["spec"].get("nodeName") == victim}
    faults.cluster.kubectl("delete", "node", victim, "--wait=false")
    faults.observer.wait_for(
        lambda: {p["metadata"]["name"] for p in faults.observer.pods(f"app={name}")
                 if p["spec"].get("nodeName") == victim and not p["metadata"].get("deletionTimestamp")} < on_victim,
        120, f"the first eviction from {victim}", interval=0.5)
    old = faults.kill_controller()
    faults.wait_new_leader(old)
    faults.observer.wait_for(lambda: victim not in faults.nodes(name), 240, f"{victim} drained and deleted", interval=1)
    pods = faults.running(name, 6)
    assert all(p["spec"]["nodeName"] != victim for p in pods)
    evicted = {e["involvedObject"]["name"] for e in faults.events("Evicted")}
    assert on_victim <= evicted, f"{sorted(on_victim - evicted)} left {victim} without an eviction"
    faults.finish(name)


# 4 ---------------------------------------------------------------------------------------------------
def test_controller_killed_mid_replacement(faults: Faults) -> None:
    """An expired node's replacement launched, its answer held, the controller killed: one replacement, adopted."""
    name = "faults-expire"
    expire_after = 45
    faults.provisioner(name, ["m5.xlarge"])
    faults.deployment(name, 3)
    faults.running(name, 3)
    faults.pdb(name, 2)
    faults.watcher.arm_pdb(f"app={name}", 2)
    [old_node] = faults.nodes(name)
    faults.observer.wait_for(lambda: node_age_seconds(faults.nodes(name)[old_node]) > expire_after + 2, 120,
                             f"{old_node} older than {expire_after}s", interval=1)
    faults.proxy.hold_answers("CreateFleet")
    try:
        faults.provisioner(name, ["m5.xlarge"], ttlSecondsUntilExpired=expire_after)
        faults.observer.wait_for(lambda: faults.proxy.holding("CreateFleet") >= 1, 90,
                                 "the replacement's CreateFleet launched, its answer held", interval=0.2)
        [replacement] = set(faults.instances(name)) - {instance_of(faults.nodes(name)[old_node])}
        old = faults.kill_controller()
    finally:
        faults.proxy.release_answers("CreateFleet")
    faults.wait_new_leader(old)

    def deleted() -> bool:  # being deleted, or gone already (kwok pods move in a second)
        node = faults.nodes(name).get(old_node)
        return node is None or bool(node["metadata"].get("deletionTimestamp"))

    faults.observer.wait_for(deleted, 120, f"{old_node} deleted once its replacement is Ready", interval=0.5)
    faults.provisioner(name, ["m5.xlarge"])  # the replacement must not expire in turn
    faults.observer.wait_for(lambda: old_node not in faults.nodes(name), 180, f"{old_node} drained", interval=1)
    pods = faults.running(name, 3)
    [node] = faults.nodes(name).values()
    assert instance_of(node) == replacement, "the replacement launched before the kill was not the one used"
    assert {p["spec"]["nodeName"] for p in pods} == {node["metadata"]["name"]}
    assert len(faults.instances(name)) == 1
    faults.finish(name)


# 5 ---------------------------------------------------------------------------------------------------
def test_kube_apiserver_restarted_mid_launch(faults: Faults) -> None:
    """kube-apiserver killed while nodes launch, kept down until the leader loses its Lease, then restarted."""
    name = "faults-apiserver"
    faults.provisioner(name, ["m5.xlarge"], ttlSecondsAfterEmpty=30)
    launches = faults.proxy.counts().get(("CreateFleet", "forwarded"), 0)
    faults.bare_pod(name, 1)
    faults.bare_pod(name, 2)
    faults.deployment(name, 4)
    faults.observer.wait_for(lambda: faults.proxy.counts().get(("CreateFleet", "forwarded"), 0) > launches, 90,
                             "the first CreateFleet", interval=0.1)
    old = faults.leader()
    faults.watcher.accountable.clear()
    faults.cluster.stop_component("kube-apiserver", kill=True)
    controller_log = LogCursor(faults.cluster.log_path("controller"))
    controller_log.offset = faults.logs["controller"].offset
    faults.observer.wait_for(lambda: any("Lost lease" in line for line in controller_log.read()), 60,
                             "the leader to give up its Lease (renew deadline 10 s)", interval=1)
    faults.expected_exits.append("controller")  # a replica that loses its Lease exits, and is restarted
    faults.cluster.start_component("kube-apiserver")
    say("kube-apiserver restarted")
    faults.wait_new_leader(old, timeout=120)
    faults.running(name, 6)
    assert len(faults.instances(name)) == 2
    faults.finish(name)


# 6 ---------------------------------------------------------------------------------------------------
def test_webhook_down_refuses_every_provisioner_and_stores_none(faults: Faults) -> None:
    valid = "faults-webhook-valid"
    invalid = "faults-webhook-invalid"

    def apply(name: str, **spec: Any) -> Any:
        provider = {"subnetSelector": {f"kubernetes.io/cluster/{CLUSTER_NAME}": "*"},
                    "securityGroupSelector": {f"kubernetes.io/cluster/{CLUSTER_NAME}": "*"}}
        manifest = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": name},
                    "spec": {"provider": provider, **spec}}
        return faults.observer.apply(manifest, check=False)

    faults.cluster.stop_component("webhook")
    try:
        for name, spec in ((valid, {"ttlSecondsAfterEmpty": 30}), (invalid, {"ttlSecondsAfterEmpty": -1})):
            answer = apply(name, **spec)
            assert answer.returncode != 0, answer.stdout
            assert "failed calling webhook" in answer.stderr, answer.stderr
            assert "webhook.provisioners.groupless.dev" in answer.stderr, answer.stderr
            stored = faults.cluster.kubectl("get", "provisioners.karpenter.sh", name, check=False)
            assert stored.returncode != 0 and "NotFound" in stored.stderr, stored.stdout
    finally:
        faults.cluster.start_component("webhook")
    refused = apply(invalid, ttlSecondsAfterEmpty=-1)
    assert refused.returncode != 0 and "denied the request" in refused.stderr and "ttlSecondsAfterEmpty" in refused.stderr
    assert apply(valid, ttlSecondsAfterEmpty=30).returncode == 0
    faults.cluster.kubectl("delete", "provisioners.karpenter.sh", valid)
    faults.check()


# 7 ---------------------------------------------------------------------------------------------------
def test_extender_down_scheduling_and_provisioning_go_on(faults: Faults) -> None:
    name = "faults-extender"
    faults.cluster.stop_component("extender")
    try:
        faults.provisioner(name, ["m5.xlarge"], ttlSecondsAfterEmpty=30)
        faults.deployment(name, 4)
        pods = faults.running(name, 4)
        assert {p["spec"]["nodeName"] for p in pods} <= set(faults.nodes(name))
        assert len(faults.instances(name)) == 2
    finally:
        faults.cluster.start_component("extender")
    faults.finish(name)


# 8 ---------------------------------------------------------------------------------------------------
def test_leader_killed_with_a_standby_running(faults: Faults) -> None:
    """The leader's process group killed mid-launch (no restart): the standby takes the Lease and adopts."""
    name = "faults-standby"
    faults.cluster.start_component("controller-standby", env=faults.env)
    faults.logs["controller-standby"] = LogCursor(faults.cluster.log_path("controller-standby"))
    identity = faults.identity(LogCursor(faults.cluster.log_path("controller-standby")))
    leader = faults.leader()
    assert leader and leader != identity
    faults.provisioner(name, ["m5.xlarge"], ttlSecondsAfterEmpty=30)
    faults.proxy.hold_answers("CreateFleet")
    try:
        faults.deployment(name, 3)
        faults.observer.wait_for(lambda: faults.proxy.holding("CreateFleet") >= 1, 90,
                                 "a CreateFleet launched, its answer held", interval=0.2)
        orphans = set(faults.instances(name))
        faults.watcher.accountable.clear()
        faults.cluster.stop_component("controller", kill=True)
        say(f"killed the leader's process group ({leader})")
    finally:
        faults.proxy.release_answers("CreateFleet")
    assert faults.wait_new_leader(leader) == identity
    faults.running(name, 3)
    assert orphans == set(faults.instances(name)) and len(orphans) == 1
    [node] = faults.nodes(name).values()
    assert node["metadata"]["name"] in {e["involvedObject"]["name"] for e in faults.events("Adopted")}
    faults.check()
    faults.clean_up(name)
    # hand the Lease back to the cluster's own controller
    log = LogCursor(faults.cluster.log_path("controller"))
    log.skip()
    faults.cluster.start_component("controller", env=faults.env)
    faults.cluster.stop_component("controller-standby")
    faults.wait_leader(faults.identity(log))
    faults.check()

