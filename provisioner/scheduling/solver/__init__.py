"""The solver: pending pods in, a plan of nodes to launch (and pods for existing nodes) out.

Pure and deterministic: frozen values in (:class:`SolverInput`), a :class:`Plan` out, no clock,
no randomness, no I/O. The provisioning controller and ``groupless plan`` run this solver, so
they make the same decisions from the same input. The scheduler extender does not call it: it
shares the solver's rules for reading pods, tolerating taints and matching Provisioners
(:mod:`provisioner.scheduling.pods`, :mod:`provisioner.scheduling.provisioners`) but filters
and scores kube-scheduler's candidate nodes by its own rules (:mod:`extender.handlers`).

The algorithm follows today's Karpenter (``pkg/controllers/provisioning/scheduling``), which
fixed v0.6.3's shortcomings (one Provisioner at a time, pods with affinity ignored, limits
checked once per batch, topology always hard); the modules mirror its files:

* :mod:`.queue` (``queue.go``): pods are queued by cpu, then memory, descending (first-fit
  decreasing), then creation time and UID, so the plan does not depend on input order.
* :mod:`.existing` (``existingnode.go``), :mod:`.planned` (``nodeclaim.go``),
  :mod:`.templates` (``nodeclaimtemplate.go``): each pod is tried on existing nodes first, as
  kube-scheduler would bind it: among the nodes that meet its required constraints and have
  room (its preferences never keep it off one), an initialised one before an in-flight one,
  then the highest score of kube-scheduler's plugins for its preferences (:mod:`.scores`:
  TaintToleration, NodeAffinity, InterPodAffinity, with their default weights), then by
  name. Then on
  the new nodes planned so far (in the order they were opened: the first that takes it, unless
  one of the next few takes it for less), and on a new node of the first Provisioner
  (``weight`` desc, then name) whose requirements, taints, limits and instance types can take
  it. A planned node keeps every instance type that still fits all of its pods plus that type's
  DaemonSet overhead and still has an allowed offering; a pod joins only if one remains, and
  (in :func:`solve`, not :func:`solve_first_fit`) only if that raises the node's price by no
  more than a node of its own would cost, or, on a node opened for a run of identical pods
  still to place that a larger node holds for less a pod, while it stays within that node's
  price (:func:`.pricing.bulk_price`). The node's requirements narrow as pods join (a zone
  chosen for topology, a node selector). Requirements are met by the labels a node will really
  carry (:mod:`.templates`): an instance type without a label other types carry meets only
  NotIn and DoesNotExist on it; existing nodes are judged by their labels.
* :mod:`.topology` (``topology.go``, ``topologygroup.go``): topology spread, pod affinity and
  anti-affinity, counted per domain as pods are placed. Spread follows kube-scheduler's
  PodTopologySpread (existing nodes are domains, for the hostname too; node inclusion policies;
  ``minDomains``; the domains follow the pod's required constraints, never its preferences),
  judged as kube-scheduler will judge each placement: now for existing nodes, against the
  finished plan for new ones, whatever order they register in. When a workload alone on new
  nodes leant on counts the finished plan does not keep, the input is solved again (at most
  :data:`~.solve.MAX_SOLVES` times in all).
* :mod:`.preferences` (``preferences.go``): existing nodes take a pod by its required
  constraints alone; new nodes hold a pod's preferences as if required,
  preferred node affinity as the set of terms with the highest total weight a new node can
  meet. When a pod fits nowhere, one preference is relaxed (preferred pod affinity, preferred
  pod anti-affinity, the next set of preferred node affinity terms by total weight, ScheduleAnyway
  spread, then PreferNoSchedule taints) and the pod goes to the back of the queue; the loop
  ends after a full pass without progress, so affinity chains settle.
* :mod:`.pricing`: each planned node's instance type options are ordered by the price of their
  cheapest allowed offering and cut to :data:`MAX_INSTANCE_TYPES`; its price is the cheapest
  option's.
* :mod:`.solve` (``scheduler.go``): the loop and the :class:`Plan`; :mod:`.memo` holds every
  cache of a solve; :mod:`.vectors` the resource vectors.

Limits are enforced while packing: each planned node holds the capacity of its cheapest option
that fits its pods against its Provisioner's limits, and launches only options no larger than
that in any limited resource; a node is opened, or grows into a larger option, only when the capacity fits
``limits - usage - capacity held by the other nodes planned so far``, so a burst never
overshoots a limit.
"""

from provisioner.scheduling.solver.pricing import MAX_INSTANCE_TYPES
from provisioner.scheduling.solver.solve import (
    ExistingPlacement,
    Plan,
    PlannedNode,
    PodError,
    SolverInput,
    solve,
    solve_first_fit,
)

__all__ = [
    "MAX_INSTANCE_TYPES",
    "ExistingPlacement",
    "Plan",
    "PlannedNode",
    "PodError",
    "SolverInput",
    "solve",
    "solve_first_fit",
]
