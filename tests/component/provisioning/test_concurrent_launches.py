"""Concurrent launches: limit accounting and results do not depend on which launch ends first, nor on overlapping rounds.

Launch threads return outcomes that the round merges on its own thread, in plan order. Here the
fake cloud's creates block until the test releases them, in the reverse of the plan order, one
at a time; a launch that hits insufficient capacity sends its pod to a second solve whose limit
check sits exactly on the boundary: it sees the right usage only if every launch's reservation
ended exactly once (with its Node written, or with its failure), a lost update either way
changes its answer. A second round solving while the first one's launches run counts their
reservations.
"""

import threading

from provisioner.cloudprovider.types import InsufficientCapacityError
from provisioner.model.requirements import Requirements
from provisioner.scheduling.solver import Plan, PlannedNode

from .harness import Cluster
from .test_failures import flexible_template, provisioner_with

WAIT = 10.0  # real seconds a thread may take to reach a point (never reached when things work)
POD_LABEL = "example.com/pod"


def one_node_per_pod(given):
    """A solver that plans one node per pod with options m5.xlarge (4 CPU) then m5.2xlarge (8 CPU)."""
    types = {t.name: t for t in given.instance_types["default"]}
    options = (types["m5.xlarge"], types["m5.2xlarge"])
    nodes = []
    for pod in given.pods:
        offering = next(o for t in options for o in t.offerings if o.available and o.capacity_type == "on-demand")
        nodes.append(PlannedNode(
            provisioner="default",
            pods=(pod,),
            requirements=Requirements.from_labels({"karpenter.sh/capacity-type": "on-demand"}),
            instance_type_options=options,
            offering=offering,
            price=offering.price,
            labels={POD_LABEL: pod.name},
            taints=(),
        ))
    return Plan(new_nodes=tuple(nodes))


class GatedCreates:
    """Wraps ``cloud.create``: each call waits until the test releases it by (pod name, attempt).

    ``insufficient`` names the calls that fail with insufficient capacity in zone a.
    """

    def __init__(self, cloud, insufficient=()):
        self._create = cloud.create
        self._cond = threading.Condition()
        self._attempts = {}
        self.gates = {}
        self.requests = {}
        self.finished = []
        self.insufficient = set(insufficient)
        cloud.create = self

    def __call__(self, request):
        name = request.labels[POD_LABEL]
        with self._cond:
            key = (name, self._attempts.get(name, 0))
            self._attempts[name] = key[1] + 1
            gate = self.gates[key] = threading.Event()
            self.requests[key] = request
            self._cond.notify_all()
        assert gate.wait(WAIT), f"launch {key} never released"
        try:
            if key in self.insufficient:
                raise InsufficientCapacityError("no capacity", [
                    ("m5.xlarge", "ap-south-1a", "on-demand"), ("m5.2xlarge", "ap-south-1a", "on-demand"),
                ])
            return self._create(request)
        finally:
            with self._cond:
                self.finished.append(key)
                self._cond.notify_all()

    def release_all(self):
        """Open every gate (a failed test must not leave launch threads waiting)."""
        with self._cond:
            for gate in self.gates.values():
                gate.set()

    def wait_blocked(self, count):
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.gates) - len(self.finished) >= count, WAIT)

    def release(self, key):
        """Let launch ``key`` run and wait until it has returned or raised."""
        with self._cond:
            assert self._cond.wait_for(lambda: key in self.gates, WAIT), f"launch {key} never started"
        self.gates[key].set()
        with self._cond:
            assert self._cond.wait_for(lambda: key in self.finished, WAIT), f"launch {key} never ended"


def test_limit_usage_and_results_are_merged_in_plan_order_whatever_the_launch_order():
    cluster = Cluster(provisioner=provisioner_with(limits_cpu=20))
    cluster.controller.provisioner.solver = one_node_per_pod
    creates = GatedCreates(cluster.cloud, insufficient={("p2", 0)})
    pods = {name: cluster.pending_pod(template=flexible_template("3"), name=name) for name in ("p1", "p2", "p3")}
    results = []
    round_ = threading.Thread(target=lambda: results.append(cluster.controller.reconcile()), daemon=True)
    round_.start()
    try:
        check_round(cluster, creates, pods, round_, results)
    finally:
        creates.release_all()


def check_round(cluster, creates, pods, round_, results):
    # the limit check before each launch reserves the largest option still within the limit:
    # p1 8 CPU (usage 8), p2 8 (16), p3 only m5.xlarge fits the remaining 4 (20)
    creates.wait_blocked(3)  # the three launches run at once
    requested = {key[0]: [t.name for t in r.instance_type_options] for key, r in creates.requests.items()}
    assert requested == {"p1": ["m5.xlarge", "m5.2xlarge"], "p2": ["m5.xlarge", "m5.2xlarge"], "p3": ["m5.xlarge"]}
    for key in (("p3", 0), ("p2", 0), ("p1", 0)):  # the reverse of the plan order
        creates.release(key)
    # p1 and p3 launched m5.xlarge: their Nodes count 4 + 4; p2's launch launched nothing, its 8 are
    # free again. Its second solve has 12 CPU of headroom: both types (a reservation still counted
    # beside its written Node makes the usage 20 and fails it on the limit; the failed launch's
    # reservation kept leaves 4: m5.xlarge only)
    creates.release(("p2", 1))
    round_.join(WAIT)
    assert not round_.is_alive()

    (result,) = results
    assert result.failed == {} and result.unschedulable == {}
    assert [t.name for t in creates.requests[("p2", 1)].instance_type_options] == ["m5.xlarge", "m5.2xlarge"]
    assert cluster.controller.ledger.reservations() == {}
    assert len(cluster.cloud.create_calls) == 3  # p2's first launch never reached the cloud
    assert cluster.api.events(reason="LimitExceeded") == []
    # merged in plan order on the round's thread, not in the order the launches ended
    uid = {name: pod["metadata"]["uid"] for name, pod in pods.items()}
    assert [launched.pod_uids for launched in result.launched] == [(uid["p1"],), (uid["p3"],), (uid["p2"],)]
    assert creates.finished == [("p3", 0), ("p2", 0), ("p1", 0), ("p2", 1)]
    assert len(cluster.nodes()) == 3


def test_a_round_solving_while_another_round_launches_counts_its_reservations():
    cluster = Cluster(provisioner=provisioner_with(limits_cpu=20))
    cluster.controller.provisioner.solver = one_node_per_pod
    creates = GatedCreates(cluster.cloud)
    for name in ("p1", "p2"):
        cluster.pending_pod(template=flexible_template("3"), name=name)
    first = cluster.controller.begin()  # returns once its launches started
    try:
        creates.wait_blocked(2)  # p1 and p2 reserve 8 CPU each: 16 of 20
        assert {launch for launch, _ in cluster.controller.ledger.reservations().values()} == {"default"}
        for name in ("p3", "p4"):
            cluster.pending_pod(template=flexible_template("3"), name=name)
        # the second round solves now, while the first one's launches run (no Node written yet)
        second = cluster.controller.begin()
        creates.wait_blocked(3)
        # 4 CPU left: p3 gets m5.xlarge only and takes them; p4 exceeds the limit
        assert [t.name for t in creates.requests[("p3", 0)].instance_type_options] == ["m5.xlarge"]
        assert ("p4", 0) not in creates.gates
        for key in (("p1", 0), ("p2", 0), ("p3", 0)):
            creates.release(key)
        results = [first.result(WAIT), second.result(WAIT)]
    finally:
        creates.release_all()
    assert [len(r.launched) for r in results] == [2, 1]
    assert list(results[1].failed) == ["default/p4"]
    assert results[1].failed["default/p4"].endswith("cpu resource usage of 20 exceeds limit of 20")
    assert cluster.controller.ledger.reservations() == {}
    # the Nodes now count instead: 3 x m5.xlarge = 12 CPU, so p4 fits on the next round
    cluster.cloud.create = creates._create  # launches are no longer gated
    assert len(cluster.controller.reconcile().launched) == 1
