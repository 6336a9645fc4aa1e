"""Pods as the scheduler sees them: one frozen value per pod, read once from its manifest.

The provisioning controller, the extender and ``groupless plan`` all turn Kubernetes pod
objects (plain dicts, the wire form) into :class:`Pod` values here, so that every part sizes a
pod and reads its constraints the same way kube-scheduler does:

- requests (:func:`pod_requests`) follow kube-scheduler's ``PodRequests``: the sum of the
  regular containers and of the restartable (sidecar) init containers, element-wise max with
  every ordinary init container (plus the sidecars started before it), plus ``spec.overhead``,
  plus one pod slot;
- a container that sets only ``limits`` gets ``requests = limits`` (what the API server's
  defaulting does, so manifests read from files size like admitted pods);
- node selector, node affinity (required terms ORed, preferred terms by weight; ``matchFields``
  on ``metadata.name`` read as the hostname label; an empty term selects no node), tolerations,
  topology spread constraints, pod (anti-)affinity, host ports.

Malformed input raises :class:`ValueError` naming the field and value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.model import labels as wk
from provisioner.model import objects
from provisioner.model.pods import TERMINAL_PHASES
from provisioner.model.quantity import QuantityError, parse_quantity
from provisioner.model.requirements import NOTHING, RequirementError, Requirements
from provisioner.model.resources import PODS, Resources
from provisioner.model.taints import Taint

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
#: ``nodeAffinityPolicy`` / ``nodeTaintsPolicy`` values (``v1.NodeInclusionPolicy``).
HONOR = "Honor"
IGNORE = "Ignore"


# --------------------------------------------------------------------------- tolerations
@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (``operator`` Equal or Exists; empty ``effect`` matches every effect)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kube's ``Toleration.ToleratesTaint``: an empty key with Exists tolerates every taint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == (taint.value or "")


def tolerates_all(
    tolerations: Iterable[Toleration], taints: Iterable[Taint], prefer_no_schedule: bool = False
) -> str | None:
    """None when every NoSchedule/NoExecute taint is tolerated, else a reason naming the taint.

    PreferNoSchedule taints are only checked with ``prefer_no_schedule=True`` (the solver holds
    them while a pod's preferences are still held, as Karpenter does).
    """
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE and not prefer_no_schedule:
            continue
        if not any(t.tolerates(taint) for t in tols):
            value = f"={taint.value}" if taint.value else ""
            return f"did not tolerate taint {taint.key}{value}:{taint.effect}"
    return None


# --------------------------------------------------------------------------- selectors
@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector`` (matchLabels ANDed with matchExpressions).

    An empty selector matches every pod; an absent one (``labelSelector`` not set) matches none
    (``nothing``), as ``metav1.LabelSelectorAsSelector`` reads them for kube-scheduler.
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for key, operator, values in self.match_expressions:
            present = key in labels
            if operator == "In":
                if not present or labels[key] not in values:
                    return False
            elif operator == "NotIn":
                if present and labels[key] in values:
                    return False
            elif operator == "Exists":
                if not present:
                    return False
            elif operator == "DoesNotExist":
                if present:
                    return False
        return True


#: The selector of a term without ``labelSelector``: it selects no pod.
NO_POD = LabelSelector(nothing=True)


def label_selector(obj: Any, where: str) -> LabelSelector:
    """A :class:`LabelSelector` from its wire form; ValueError naming ``where`` when malformed.

    ``None`` (the field not set) is the selector that matches nothing (:data:`NO_POD`).
    """
    if obj is None:
        return NO_POD
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a label selector object, got {obj!r}")
    match_labels = obj.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise ValueError(f"{where}.matchLabels: expected a map, got {match_labels!r}")
    expressions = []
    for i, expr in enumerate(obj.get("matchExpressions") or ()):
        if not isinstance(expr, Mapping) or "key" not in expr or "operator" not in expr:
            raise ValueError(f"{where}.matchExpressions[{i}]: expected {{key, operator, values}}, got {expr!r}")
        operator = str(expr["operator"])
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"{where}.matchExpressions[{i}].operator: {operator!r} is not In, NotIn, Exists or DoesNotExist")
        expressions.append((str(expr["key"]), operator, frozenset(str(v) for v in expr.get("values") or ())))
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in match_labels.items())),
        tuple(sorted(expressions, key=lambda e: (e[0], e[1], sorted(e[2])))),
    )


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """``spec.topologySpreadConstraints[]`` as kube-scheduler's PodTopologySpread reads it.

    ``selector`` already includes the pod's values of ``matchLabelKeys``. ``min_domains``: 1 when
    unset (kube-scheduler's default). ``node_affinity_policy`` (default Honor) and
    ``node_taints_policy`` (default Ignore), each :data:`HONOR` or :data:`IGNORE`, say whether a
    node must meet the pod's required node affinity, and have no NoSchedule/NoExecute taint the
    pod does not tolerate, to be a domain of the constraint (``common.go``, ``filtering.go``).
    """

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == DO_NOT_SCHEDULE


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term; ``namespaces`` empty with ``all_namespaces`` False means the pod's own.

    ``weight`` is None for a required term, the preference weight (1-100) otherwise.
    """

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str]
    all_namespaces: bool = False
    weight: int | None = None

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """True when a pod in ``namespace`` with ``labels`` is one this term counts."""
        if not self.all_namespaces and namespace not in self.namespaces:
            return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class HostPort:
    """A ``containerPort`` with a ``hostPort``; ``ip`` ``0.0.0.0`` conflicts with every ip."""

    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)


# --------------------------------------------------------------------------- pod
@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as the solver sees it.

    ``requests`` is kube-scheduler's effective request (init containers, sidecars, overhead,
    ``pods: 1``). ``required_node_affinity`` holds the ORed ``nodeSelectorTerms`` (empty: no
    required affinity; :data:`~provisioner.model.requirements.NOTHING` alone when every term is
    empty: :func:`required_node_terms`); ``preferred_node_affinity`` the weighted terms, heaviest first.
    ``volume_requirements`` are ANDed with everything else (bound PV node affinity, the
    StorageClass's allowedTopologies for unbound claims).
    """

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    annotations: Mapping[str, str] = field(default_factory=dict, compare=False)
    requests: Resources = field(default_factory=lambda: Resources({PODS: 1}))
    node_selector: Mapping[str, str] = field(default_factory=dict, compare=False)
    required_node_affinity: tuple[Requirements, ...] = ()
    preferred_node_affinity: tuple[tuple[int, Requirements], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volume_requirements: tuple[Requirements, ...] = ()
    owner_kind: str | None = None
    owner_name: str | None = None
    priority_class_name: str | None = None
    priority: int = 0
    node_name: str | None = None
    nominated_node_name: str | None = None
    phase: str = "Pending"
    deleting: bool = False
    creation_timestamp: str = ""

    @property
    def key(self) -> str:
        """``namespace/name`` (how events and logs name a pod)."""
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Finished (phase Succeeded or Failed, :data:`provisioner.model.pods.TERMINAL_PHASES`): holds nothing."""
        return self.phase in TERMINAL_PHASES

    @property
    def base_requirements(self) -> Requirements:
        """NodeSelector as ``In [v]`` ANDed with volume topology (never relaxed)."""
        result = Requirements.from_labels(self.node_selector)
        for extra in self.volume_requirements:
            result = result & extra
        return result

    @property
    def required_affinity(self) -> tuple[Requirements, ...]:
        """kube-scheduler's ``GetRequiredNodeAffinity``: the node selector AND each required term.

        One alternative (the node selector alone) when the pod has no required terms; volume
        topology is not part of it (PodTopologySpread's ``nodeAffinityPolicy`` reads this).
        """
        selector = Requirements.from_labels(self.node_selector)
        return tuple(selector & term for term in self.required_node_affinity) or (selector,)

    def __repr__(self) -> str:
        return f"Pod({self.key})"


def _map(obj: Any, where: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected an object, got {obj!r}")
    return obj


def _list(obj: Any, where: str) -> Sequence[Any]:
    if obj is None:
        return ()
    if not isinstance(obj, list | tuple):
        raise ValueError(f"{where}: expected a list, got {obj!r}")
    return obj


def _str_map(obj: Any, where: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(obj, where).items()}


def requests_defaulted_to_limits(requests: Mapping[str, Any], limits: Mapping[str, Any]) -> dict[str, Any]:
    """A container's ``resources.requests`` with each resource it only limits requesting its limit.

    The API server's pod defaulting (``SetDefaults_Pod``, ``pkg/apis/core/v1/defaults.go``), for
    containers and init containers alike; values stay as given (wire quantities).
    """
    result = dict(requests)
    for name, value in limits.items():
        result.setdefault(name, value)
    return result


def _container_requests(container: Mapping[str, Any], where: str) -> Resources:
    resources = _map(container.get("resources"), f"{where}.resources")
    limits = _map(resources.get("limits"), f"{where}.resources.limits")
    requests = requests_defaulted_to_limits(_map(resources.get("requests"), f"{where}.resources.requests"), limits)
    result: dict[str, int] = {}
    for name, value in requests.items():
        try:
            result[str(name)] = parse_quantity(value, str(name))
        except QuantityError as error:
            raise ValueError(f"{where}.resources.requests.{name}: {error}") from error
    return Resources(result)


def pod_requests(obj: Mapping[str, Any]) -> Resources:
    """kube-scheduler's effective requests of a pod object (its ``spec``), including ``pods: 1``.

    Source: k8s.io/component-helpers ``resource.PodRequests`` (sidecar-aware since 1.28):
    regular containers summed; each restartable init container (``restartPolicy: Always``)
    adds to that sum and to the base of every later init container; the result is the
    element-wise max with each init container's request; then ``spec.overhead`` is added.
    Raises ValueError naming the field of a malformed quantity.
    """
    spec = _map(obj.get("spec"), "spec")
    total = Resources()
    for i, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        total = total + _container_requests(_map(container, f"spec.containers[{i}]"), f"spec.containers[{i}]")
    sidecars = Resources()
    init_max = Resources()
    for i, container in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        where = f"spec.initContainers[{i}]"
        requests = _container_requests(_map(container, where), where)
        if _map(container, where).get("restartPolicy") == "Always":
            total = total + requests
            sidecars = sidecars + requests
            init_max = init_max.max(sidecars)
        else:
            init_max = init_max.max(requests + sidecars)
    total = total.max(init_max)
    overhead = _map(spec.get("overhead"), "spec.overhead")
    if overhead:
        total = total + _container_requests({"resources": {"requests": overhead}}, "spec.overhead")
    return total + {PODS: 1}


def effective_requests(obj: Mapping[str, Any]) -> Resources:
    """:func:`pod_requests`, or one ``pods`` slot when the pod's requests cannot be read; never raises.

    What a pod that exists holds on its node: kube-scheduler counts every pod against the
    node's ``pods`` allocatable, whatever its spec says.
    """
    try:
        return pod_requests(obj)
    except ValueError:
        return _ONE_POD


_ONE_POD = Resources({PODS: 1})


def _node_selector_terms(terms: Any, where: str) -> tuple[Requirements, ...]:
    result = []
    for i, term in enumerate(_list(terms, where)):
        term_map = _map(term, f"{where}[{i}]")
        expressions = list(_list(term_map.get("matchExpressions"), f"{where}[{i}].matchExpressions"))
        for j, field_req in enumerate(_list(term_map.get("matchFields"), f"{where}[{i}].matchFields")):
            # matchFields can only name metadata.name (the DaemonSet controller pins its pods so);
            # a node's name is its hostname label, which a new node does not have yet.
            if not isinstance(field_req, Mapping) or field_req.get("key") != "metadata.name":
                raise ValueError(f"{where}[{i}].matchFields[{j}].key: only metadata.name is supported, got "
                                 f"{field_req.get('key') if isinstance(field_req, Mapping) else field_req!r}")
            expressions.append({**field_req, "key": wk.HOSTNAME})
        try:
            result.append(Requirements.from_node_selector_requirements(expressions))
        except (RequirementError, KeyError, TypeError) as error:
            raise ValueError(f"{where}[{i}].matchExpressions: {error}") from error
    return tuple(result)


def required_node_terms(selector: Any, where: str) -> tuple[Requirements, ...]:
    """A required node affinity (a ``NodeSelector``: ``where``) as its ORed terms; ``()`` when not set.

    As kube-scheduler reads it (``nodeaffinity.NewLazyErrorNodeSelector``): a term without
    ``matchExpressions`` and ``matchFields`` selects no node and is left out; a selector left
    with no term selects none (:data:`~provisioner.model.requirements.NOTHING`), so such a pod
    is never bound. Raises ValueError naming the field of a malformed term.
    """
    if selector is None:
        return ()
    terms = _list(_map(selector, where).get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
    parsed = _node_selector_terms(terms, f"{where}.nodeSelectorTerms")
    kept = tuple(term for term, raw in zip(parsed, terms, strict=True) if not empty_node_selector_term(raw))
    return kept or (NOTHING,)


def empty_node_selector_term(term: Any) -> bool:
    """A ``nodeSelectorTerm`` with neither ``matchExpressions`` nor ``matchFields`` (``isEmptyNodeSelectorTerm``)."""
    return not (isinstance(term, Mapping) and (term.get("matchExpressions") or term.get("matchFields")))


def preferred_node_terms(items: Any, where: str) -> tuple[tuple[int, Requirements], ...]:
    """``preferredDuringSchedulingIgnoredDuringExecution`` of a node affinity as ``(weight, term)``, heaviest first.

    As kube-scheduler reads them (``nodeaffinity.NewPreferredSchedulingTerms``): a term of weight
    0 or without ``matchExpressions`` and ``matchFields`` counts for nothing and is left out.
    Terms of equal weight keep their order. Raises ValueError naming the field of a malformed term.
    """
    preferred: list[tuple[int, Requirements]] = []
    for i, item in enumerate(_list(items, where)):
        item_map = _map(item, f"{where}[{i}]")
        preference = _map(item_map.get("preference"), f"{where}[{i}].preference")
        terms = _node_selector_terms([preference], f"{where}[{i}].preference")
        try:
            weight = int(item_map.get("weight") or 0)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}[{i}].weight: not an integer: {item_map.get('weight')!r}") from error
        if weight == 0 or empty_node_selector_term(preference):
            continue
        preferred.append((weight, terms[0]))
    preferred.sort(key=lambda wr: -wr[0])
    return tuple(preferred)


def node_affinity_score(terms: Iterable[tuple[int, Requirements]], labels: Mapping[str, str]) -> int:
    """The sum of the weights of the preferred node affinity ``terms`` a node with ``labels`` meets.

    kube-scheduler's NodeAffinity score before normalisation (``PreferredSchedulingTerms.Score``);
    the plugin then scales it to 0..100 against the highest score among the feasible nodes, so
    the order of nodes by this sum is the order the plugin gives them.
    """
    return sum(weight for weight, term in terms if term.mismatch(labels) is None)


def _affinity_terms(items: Any, where: str, namespace: str, weighted: bool) -> tuple[PodAffinityTerm, ...]:
    result = []
    for i, item in enumerate(_list(items, where)):
        item_map = _map(item, f"{where}[{i}]")
        weight = None
        term = item_map
        if weighted:
            weight = int(item_map.get("weight") or 0)
            term = _map(item_map.get("podAffinityTerm"), f"{where}[{i}].podAffinityTerm")
        topology_key = term.get("topologyKey")
        if not topology_key:
            raise ValueError(f"{where}[{i}].topologyKey: required")
        namespaces = frozenset(str(n) for n in _list(term.get("namespaces"), f"{where}[{i}].namespaces"))
        all_namespaces = term.get("namespaceSelector") is not None and not _map(
            term.get("namespaceSelector"), f"{where}[{i}].namespaceSelector")
        result.append(PodAffinityTerm(
            selector=label_selector(term.get("labelSelector"), f"{where}[{i}].labelSelector"),
            topology_key=wk.normalize_label_key(str(topology_key)),
            namespaces=namespaces or frozenset({namespace}),
            all_namespaces=all_namespaces,
            weight=weight,
        ))
    if weighted:
        result.sort(key=lambda t: -(t.weight or 0))
    return tuple(result)


def _positive_int(value: Any, where: str) -> int:
    """``value`` as an integer of at least 1; ValueError naming ``where`` otherwise."""
    try:
        number = int(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: not an integer: {value!r}") from error
    if number < 1:
        raise ValueError(f"{where}: must be at least 1, got {number}")
    return number


def _inclusion_policy(value: Any, where: str, default: str) -> str:
    if value is None:
        return default
    if value not in (HONOR, IGNORE):
        raise ValueError(f"{where}: {value!r} is not Honor or Ignore")
    return str(value)


def _spread_constraint(tsc: Any, where: str, labels: Mapping[str, str]) -> TopologySpreadConstraint:
    """One ``topologySpreadConstraints`` item of a pod with ``labels``.

    As kube-scheduler reads it (``filterTopologySpreadConstraints`` in ``common.go``): the pod's
    values of ``matchLabelKeys`` join the selector (keys the pod lacks are skipped; with no
    ``labelSelector`` the selector is those labels alone), ``minDomains`` defaults to 1, the
    policies to Honor (node affinity) and Ignore (taints). ``minDomains`` is only allowed with
    DoNotSchedule, as the API server validates.
    """
    tsc_map = _map(tsc, where)
    max_skew = _positive_int(tsc_map.get("maxSkew", 1), f"{where}.maxSkew")
    key = tsc_map.get("topologyKey")
    if not key:
        raise ValueError(f"{where}.topologyKey: required")
    when = str(tsc_map.get("whenUnsatisfiable") or DO_NOT_SCHEDULE)
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ValueError(f"{where}.whenUnsatisfiable: {when!r} is not DoNotSchedule or ScheduleAnyway")
    selector = label_selector(tsc_map.get("labelSelector"), f"{where}.labelSelector")
    match_label_keys = [str(k) for k in _list(tsc_map.get("matchLabelKeys"), f"{where}.matchLabelKeys")]
    extra = tuple((k, labels[k]) for k in match_label_keys if k in labels)
    if extra:
        selector = LabelSelector(tuple(sorted(set(selector.match_labels) | set(extra))), selector.match_expressions)
    min_domains = 1
    if tsc_map.get("minDomains") is not None:
        min_domains = _positive_int(tsc_map["minDomains"], f"{where}.minDomains")
        if when != DO_NOT_SCHEDULE:
            raise ValueError(f"{where}.minDomains: only allowed with whenUnsatisfiable DoNotSchedule")
    return TopologySpreadConstraint(
        max_skew, wk.normalize_label_key(str(key)), when, selector, min_domains,
        _inclusion_policy(tsc_map.get("nodeAffinityPolicy"), f"{where}.nodeAffinityPolicy", HONOR),
        _inclusion_policy(tsc_map.get("nodeTaintsPolicy"), f"{where}.nodeTaintsPolicy", IGNORE),
    )


def pod_from_manifest(obj: Mapping[str, Any], volume_requirements: Sequence[Requirements] = ()) -> Pod:
    """A :class:`Pod` from a pod object (wire form). ``volume_requirements`` from :mod:`.volumes`.

    Raises ValueError naming the field for malformed input (a bad quantity, an unknown
    operator, a term without topologyKey, ``matchFields`` on a field other than metadata.name).
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"pod: expected an object, got {type(obj).__name__}")
    metadata = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    namespace = str(metadata.get("namespace") or "default")
    name = str(metadata.get("name") or metadata.get("generateName") or "")
    labels = _str_map(metadata.get("labels"), "metadata.labels")
    affinity = _map(spec.get("affinity"), "spec.affinity")
    node_affinity = _map(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    required_terms = required_node_terms(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
                                         "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
    preferred = preferred_node_terms(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution")

    tolerations = []
    for i, tol in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        tol_map = _map(tol, f"spec.tolerations[{i}]")
        seconds = tol_map.get("tolerationSeconds")
        tolerations.append(Toleration(
            key=str(tol_map.get("key") or ""),
            operator=str(tol_map.get("operator") or "Equal"),
            value=str(tol_map.get("value") or ""),
            effect=str(tol_map.get("effect") or ""),
            toleration_seconds=int(seconds) if seconds is not None else None,
        ))

    spreads = [
        _spread_constraint(tsc, f"spec.topologySpreadConstraints[{i}]", labels)
        for i, tsc in enumerate(_list(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints"))
    ]

    pod_aff = _map(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    pod_anti = _map(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    rq, pf = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"

    ports = []
    for ci, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        for pi, port in enumerate(_list(_map(container, f"spec.containers[{ci}]").get("ports"),
                                        f"spec.containers[{ci}].ports")):
            port_map = _map(port, f"spec.containers[{ci}].ports[{pi}]")
            host_port = port_map.get("hostPort")
            if host_port:
                try:
                    number = int(host_port)
                except (TypeError, ValueError) as error:
                    raise ValueError(f"spec.containers[{ci}].ports[{pi}].hostPort: not an integer: {host_port!r}") from error
                ports.append(HostPort(number, str(port_map.get("protocol") or "TCP"), str(port_map.get("hostIP") or "0.0.0.0")))

    node_selector = {wk.normalize_label_key(k): v for k, v in _str_map(spec.get("nodeSelector"), "spec.nodeSelector").items()
                     if k not in wk.IGNORED_LABELS}
    owner = objects.controller_owner(obj)
    try:
        priority = int(spec.get("priority") or 0)
    except (TypeError, ValueError) as error:
        raise ValueError(f"spec.priority: not an integer: {spec.get('priority')!r}") from error
    return Pod(
        uid=str(metadata.get("uid") or f"{namespace}/{name}"),
        namespace=namespace,
        name=name,
        labels=labels,
        annotations=_str_map(metadata.get("annotations"), "metadata.annotations"),
        requests=pod_requests(obj),
        node_selector=node_selector,
        required_node_affinity=required_terms,
        preferred_node_affinity=preferred,
        tolerations=tuple(tolerations),
        topology_spread=tuple(spreads),
        pod_affinity=_affinity_terms(pod_aff.get(rq), f"spec.affinity.podAffinity.{rq}", namespace, False),
        pod_anti_affinity=_affinity_terms(pod_anti.get(rq), f"spec.affinity.podAntiAffinity.{rq}", namespace, False),
        preferred_pod_affinity=_affinity_terms(pod_aff.get(pf), f"spec.affinity.podAffinity.{pf}", namespace, True),
        preferred_pod_anti_affinity=_affinity_terms(pod_anti.get(pf), f"spec.affinity.podAntiAffinity.{pf}", namespace, True),
        host_ports=tuple(ports),
        volume_requirements=tuple(volume_requirements),
        owner_kind=None if owner is None else str(owner.get("kind") or ""),
        owner_name=None if owner is None else str(owner.get("name") or ""),
        priority_class_name=str(spec["priorityClassName"]) if spec.get("priorityClassName") else None,
        priority=priority,
        node_name=str(spec["nodeName"]) if spec.get("nodeName") else None,
        nominated_node_name=str(status["nominatedNodeName"]) if status.get("nominatedNodeName") else None,
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(metadata.get("deletionTimestamp")),
        creation_timestamp=str(metadata.get("creationTimestamp") or ""),
    )
