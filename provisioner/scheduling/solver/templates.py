"""Node templates: what a new node of each Provisioner may be (Karpenter's ``nodeclaimtemplate.go``).

A :class:`NodeTemplate` holds one Provisioner's requirements (narrowed to what its instance
types offer), taints, labels and limits, and its instance types as :class:`TypeOption` values:
each with its allocatable less the DaemonSet overhead that lands on a node of that type, so
every fit check already counts the DaemonSets. Templates come in the order the solver tries
them (``weight`` desc, then name: :func:`provisioner.scheduling.provisioners.order_provisioners`).

**The labels a new node carries** decide which requirements it meets, because kube-scheduler
matches a pod's node selector and required node affinity against the Node's labels alone. A
node launched for a plan carries (``provisioner.controllers.provisioning.nodes.node_labels``):

* the labels of its instance type and offering (``node.kubernetes.io/instance-type``,
  ``kubernetes.io/arch``, ``kubernetes.io/os``, the zone, the capacity type and the provider's
  ``karpenter.k8s.aws/instance-*`` labels). A key some of the Provisioner's instance types carry
  and others lack (``karpenter.k8s.aws/instance-local-nvme``, ``instance-gpu-*``) is absent on
  a node of a type that lacks it: that type meets only NotIn and DoesNotExist on the key
  (Karpenter gets the same from instance types that list such keys as DoesNotExist);
* ``kubernetes.io/hostname``, the node's name, unknown before launch: Exists and NotIn are met,
  In, Gt, Lt and DoesNotExist are not;
* the Provisioner's ``labels`` and ``karpenter.sh/provisioner-name``, and the controller's
  settings' labels for every node on keys the Provisioner does not name
  (:func:`provisioner.scheduling.provisioners.provisioner_node_labels`, which the Node builder
  reads too);
* every other key the node's requirements (the Provisioner's, narrowed by its pods) give a finite
  set of values: the smallest of them (:meth:`NodeTemplate.launch_labels`; Karpenter labels a
  NodeClaim with one value of each such requirement too). A key left open (Exists, NotIn, Gt,
  Lt) is not carried, so a pod's In, Exists, Gt or Lt on it is not met
  (:func:`unmet_at_launch`).

The same labels decide DaemonSet overhead: a DaemonSet's pod is counted on a node of a type when
kube-scheduler would run it there (:func:`daemonset_runs_on`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import le

from provisioner.api.types import Provisioner, Taint
from provisioner.model import labels as wk
from provisioner.model.quantity import format_quantity
from provisioner.model.requirements import IN, Requirement, Requirements
from provisioner.model.resources import Resources
from provisioner.scheduling.instancetypes import InstanceType, Offering
from provisioner.scheduling.pods import HostPort, Pod, tolerates_all
from provisioner.scheduling.provisioners import (
    order_provisioners,
    provisioner_limits,
    provisioner_node_labels,
    provisioner_requirements,
    provisioner_taints,
)
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.vectors import Dimensions, Vector, minus

#: Keys an instance type or offering fills in at launch: a pod may ask for them even when the
#: Provisioner does not mention them.
LAUNCH_KEYS = frozenset({wk.ZONE, wk.INSTANCE_TYPE, wk.ARCH, wk.OS, wk.CAPACITY_TYPE})


@dataclass(eq=False, slots=True)
class TypeOption:
    """An instance type as one template offers it.

    ``allocatable`` is the type's allocatable minus the requests of the DaemonSets that would
    run on a node of this template and type; ``capacity`` the type's capacity (what limits
    count); ``daemonset_ports`` the host ports those DaemonSets take; ``absent_keys`` the
    instance-type label keys (:attr:`NodeTemplate.type_keys`) this type does not carry.
    """

    instance_type: InstanceType
    allocatable: Vector
    capacity: Vector
    accelerator: bool
    daemonset_ports: tuple[HostPort, ...]
    absent_keys: frozenset[str] = frozenset()


@dataclass(eq=False, slots=True)
class NodeTemplate:
    """A Provisioner as a source of new nodes.

    ``requirements`` are the Provisioner's, with its subnets' zones, narrowed to the zones,
    capacity types, architectures and operating systems its options offer (Karpenter's
    effective requirements). ``options`` are sorted largest allocatable first. ``limits``,
    ``usage`` and ``reserved`` are vectors: the Provisioner's limits (None: unlimited), the
    capacity its existing nodes already count, and the capacity the nodes planned so far hold.
    ``limited`` lists the positions of limited resources; ``first_limited`` the first of them
    (-1: none). ``type_keys`` are the label keys the instance type decides (the launch keys and
    every key one of the Provisioner's instance types carries, but for the Provisioner's own
    labels); ``allow_undefined`` the keys a pod may require although the template's
    requirements do not name them (``type_keys`` and ``kubernetes.io/hostname``).
    """

    index: int
    provisioner: Provisioner
    requirements: Requirements
    taints: tuple[Taint, ...]
    labels: dict[str, str]
    options: list[TypeOption]
    limits: Vector | None
    usage: Vector
    reserved: Vector
    allow_undefined: frozenset[str]
    type_keys: frozenset[str]
    dimensions: Dimensions
    limited: tuple[int, ...]
    first_limited: int

    def budget(self) -> Vector:
        """``limits - usage - reserved``: the capacity a new node may still hold."""
        assert self.limits is not None
        return minus(minus(self.limits, self.usage), self.reserved)

    def within(self, capacity: Vector, budget: Vector) -> bool:
        """True when ``capacity`` fits ``budget`` in every limited resource."""
        for i in self.limited:
            if capacity[i] > budget[i]:
                return False
        return True

    def limits_text(self) -> str:
        """``cpu: 8 in use or planned of 8``, per limited resource."""
        assert self.limits is not None
        names = self.dimensions.names
        return ", ".join(
            f"{names[i]}: {format_quantity(names[i], self.usage[i] + self.reserved[i])} in use or planned of "
            f"{format_quantity(names[i], self.limits[i])}"
            for i in self.limited
        )

    def smallest_addition(self, options: Sequence[TypeOption]) -> str:
        """``cpu: 4``: per limited resource, the least capacity any of ``options`` would add."""
        names = self.dimensions.names
        return ", ".join(
            f"{names[i]}: {format_quantity(names[i], min(t.capacity[i] for t in options))}" for i in self.limited
        )

    def limits_reason(self, options: Sequence[TypeOption] = ()) -> str:
        """Why a node of this template would exceed its Provisioner's limits."""
        text = self.limits_text()
        if options:
            text += f"; the smallest instance type that fits the pod adds {self.smallest_addition(options)}"
        return f"would exceed limits of provisioner {self.provisioner.name} ({text})"

    def launch_labels(self, requirements: Requirements) -> dict[str, str]:
        """The labels a new node of this template under ``requirements`` is launched with, before its instance's.

        Each single-valued requirement; each other key outside :attr:`type_keys` with a finite
        set of values, as the smallest of them (an instance-type key gets its value from the
        instance); then the Provisioner's labels and ``karpenter.sh/provisioner-name``. Never
        ``kubernetes.io/hostname`` (the node's name).
        """
        labels = requirements.labels()
        for key, requirement in requirements.items():
            if key not in labels and key not in self.type_keys:
                value = requirement.any_value()
                if value is not None:
                    labels[key] = value
        labels.update(self.labels)
        labels.pop(wk.HOSTNAME, None)
        return labels

    def no_option_reason(self, requirements: Requirements, accelerator: bool) -> str:
        """Why no option of this template meets ``requirements`` for a pod (with accelerators or not)."""
        if not self.options:
            return "no instance type matches the provisioner's requirements"
        if not accelerator and all(t.accelerator for t in self.options):
            return "only accelerator instance types are allowed and the pod asks for none"
        if accelerator and not any(t.accelerator for t in self.options):
            return "no accelerator instance type for a pod that asks for one"
        return f"no instance type meets {requirements}"


# --------------------------------------------------------------------------- options
def offerings(memo: Memo, option: TypeOption, requirements: Requirements) -> tuple[Offering, ...]:
    """Available offerings of ``option`` whose zone and capacity type ``requirements`` allow."""
    key = (option, requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE))
    found = memo.offerings.get(key)
    if found is None:
        found = option.instance_type.available_offerings(requirements)
        memo.offerings[key] = found
    return found


def cheapest_offering(memo: Memo, option: TypeOption, requirements: Requirements) -> Offering | None:
    """The cheapest allowed offering (ties: capacity type, then zone, by name); None when none is."""
    found = offerings(memo, option, requirements)
    if not found:
        return None
    return min(found, key=lambda o: (o.price, o.capacity_type, o.zone))


def meets(instance_type: InstanceType, absent_keys: frozenset[str], requirements: Requirements) -> bool:
    """True when a node of ``instance_type`` meets ``requirements`` on the instance-type keys.

    A key the type carries must intersect; a key of ``absent_keys`` (carried by other types, not
    this one) is absent on its nodes and meets only NotIn and DoesNotExist.
    """
    if instance_type.requirements.intersects(requirements) is not None:
        return False
    for key in absent_keys:
        requirement = requirements.get(key)
        if requirement is not None and not requirement.allows_absent():
            return False
    return True


def allows(memo: Memo, option: TypeOption, requirements: Requirements) -> bool:
    """True when ``option`` meets ``requirements`` (:func:`meets`) and has an allowed offering."""
    return meets(option.instance_type, option.absent_keys, requirements) and bool(offerings(memo, option, requirements))


def unmet_at_launch(template: NodeTemplate, requirements: Requirements, alternative: Requirements) -> str | None:
    """Why a new node of ``template`` with ``requirements`` would not meet ``alternative``; None when it may.

    ``alternative``: what a pod asks of its node (node selector, one required node affinity
    term, the preferred terms held). Karpenter's ``Compatible`` first (a key the template's
    requirements do not name needs to be an instance-type key or to accept an absent label),
    then what the node will carry (see the module docstring): the hostname is met only by
    Exists and NotIn, another key outside the instance-type keys only when the node's
    requirements and ``alternative`` leave a finite set of values to label it with. The
    instance-type keys are checked per option (:func:`allows`).
    """
    reason = requirements.compatible(alternative, template.allow_undefined)
    if reason is not None:
        return reason
    for key, wanted in alternative.items():
        if key in template.type_keys:
            continue
        if key == wk.HOSTNAME:
            if hostname_met(wanted):
                continue
            return f"label {key} of a new node is its name, not known before launch: {wanted} cannot be met"
        if wanted.allows_absent():
            continue
        carried = requirements[key].intersection(wanted)
        if carried.complement or not carried.values:
            return f"label {key} would not be on a new node: {carried} gives it no value"
    return None


def hostname_met(wanted: Requirement) -> bool:
    """Whether a new node's ``kubernetes.io/hostname``, its name, meets ``wanted`` before the name is known.

    The label is there and its value is a new name: Exists and NotIn are met (and both
    together); In, Gt, Lt and DoesNotExist are not.
    """
    return wanted.complement and wanted.greater_than is None and wanted.less_than is None


def option_domains(memo: Memo, option: TypeOption, requirements: Requirements, key: str) -> set[str]:
    """Values of ``key`` a node of ``option`` under ``requirements`` may take (empty: undecidable)."""
    if key in (wk.ZONE, wk.CAPACITY_TYPE):
        found = offerings(memo, option, requirements)
        return {o.zone if key == wk.ZONE else o.capacity_type for o in found}
    requirement = (requirements & option.instance_type.requirements).get(key)
    if requirement is None or requirement.complement:
        return set()
    return set(requirement.values)


def any_fits(options: list[TypeOption], total: Vector) -> bool:
    """True when some option holds ``total`` (options are sorted largest first, so this is quick)."""
    for t in options:
        if all(map(le, total, t.allocatable)):
            return True
    return False


def fitting(options: list[TypeOption], total: Vector) -> list[TypeOption]:
    """The options that hold ``total``, in their order."""
    return [t for t in options if all(map(le, total, t.allocatable))]


def without_port_conflicts(options: list[TypeOption], ports: tuple[HostPort, ...]) -> list[TypeOption]:
    """The options whose DaemonSets take none of ``ports``."""
    return [t for t in options if not any(hp.conflicts(o) for hp in ports for o in t.daemonset_ports)]


# --------------------------------------------------------------------------- building
def daemonset_runs_on(daemonset: Pod, requirements: Requirements, instance_type: InstanceType,
                      absent_keys: frozenset[str]) -> bool:
    """Whether ``daemonset``'s pod may run on a new node of a template with ``requirements``, of ``instance_type``.

    kube-scheduler, and the DaemonSet controller before it (``NodeShouldRunDaemonPod``), match
    the pod's node selector AND one of its required node affinity terms
    (``GetRequiredNodeAffinity``) against the Node's labels; its taints are checked apart. The
    labels are those the node is launched with (module docstring): one term is met when each
    of its keys may carry a value it allows, or may be absent where it allows that
    (:func:`_may_meet`). Exact for every label fixed before pods join (the hostname, the
    Provisioner's and the settings' labels, the instance type's own); for a label pods or the
    launch still decide (the zone and capacity type among the type's offerings, a key the
    Provisioner leaves open), the DaemonSet counts when some outcome runs it: the overhead is
    then reserved on a node it may skip, never missing on one it runs on.
    """
    return any(all(_may_meet(key, wanted, requirements, instance_type, absent_keys) for key, wanted in alternative.items())
               for alternative in daemonset.required_affinity)


def _may_meet(key: str, wanted: Requirement, requirements: Requirements, instance_type: InstanceType,
              absent_keys: frozenset[str]) -> bool:
    """Whether label ``key`` of a new node of ``instance_type`` under ``requirements`` may meet ``wanted``."""
    if wanted.infeasible():
        return False
    if key == wk.HOSTNAME:
        return hostname_met(wanted)
    carried = instance_type.requirements.get(key)
    if carried is not None:  # the type's labels, its offerings' zones and capacity types: always carried
        allowed = requirements.get(key)
        values = carried if allowed is None else carried.intersection(allowed)
        return not values.intersection(wanted).is_empty()
    if key in absent_keys:
        return wanted.allows_absent()
    decided = requirements.get(key)
    if decided is None or (not decided.exists and not decided.complement):
        return wanted.allows_absent()  # never carried (not named, or DoesNotExist)
    if not decided.complement:
        return not decided.intersection(wanted).is_empty()  # one of a finite set of values
    # left open (Exists, NotIn, Gt, Lt): carried only when a pod narrows it to values
    return wanted.allows_absent() or not decided.intersection(wanted).is_empty()


def type_keys(instance_types: Sequence[InstanceType], provisioner_labels: Mapping[str, str]) -> frozenset[str]:
    """The label keys the instance type of a node decides.

    The launch keys and every key one of ``instance_types`` carries, but for the Provisioner's
    own labels (``provisioner_labels``: set on every node of the Provisioner).
    """
    keys = set(LAUNCH_KEYS)
    for it in instance_types:
        keys.update(it.requirements)
    return frozenset(keys - provisioner_labels.keys())


def _type_options(
    dimensions: Dimensions, requirements: Requirements, taints: tuple[Taint, ...],
    instance_types: Sequence[InstanceType], daemonsets: Sequence[Pod], keys: frozenset[str],
) -> list[TypeOption]:
    """The options that meet ``requirements`` (instance-type ``keys`` a type lacks are absent), largest allocatable first."""
    options: list[TypeOption] = []
    for it in instance_types:
        absent = keys.difference(it.requirements)
        if not meets(it, absent, requirements) or not it.available_offerings(requirements):
            continue
        overhead = Resources()
        ports: list[HostPort] = []
        for ds in daemonsets:
            if tolerates_all(ds.tolerations, taints) is not None:
                continue
            if not daemonset_runs_on(ds, requirements, it, absent):
                continue
            overhead = overhead + ds.requests
            ports.extend(ds.host_ports)
        options.append(TypeOption(it, dimensions.vector(it.allocatable - overhead), dimensions.vector(it.capacity),
                                  it.has_accelerator, tuple(ports), absent))
    options.sort(key=lambda t: (tuple(-x for x in t.allocatable), t.instance_type.name))
    return options


def _offered(memo: Memo, requirements: Requirements, options: list[TypeOption]) -> Requirements:
    """Karpenter's effective requirements: ``requirements`` narrowed to what ``options`` offer.

    A pod asking for another zone, architecture or capacity type is then told the sets that exist.
    """
    found = [o for t in options for o in offerings(memo, t, requirements)]
    return requirements & Requirements((
        Requirement.of(wk.ZONE, IN, sorted({o.zone for o in found})),
        Requirement.of(wk.CAPACITY_TYPE, IN, sorted({o.capacity_type for o in found})),
        Requirement.of(wk.ARCH, IN, sorted({t.instance_type.arch for t in options})),
        Requirement.of(wk.OS, IN, sorted({t.instance_type.os for t in options})),
    ))


def build_templates(
    memo: Memo,
    dimensions: Dimensions,
    provisioners: Sequence[Provisioner],
    instance_types: Mapping[str, Sequence[InstanceType]],
    daemonsets: Sequence[Pod],
    usage: Mapping[str, Resources],
    zones: Mapping[str, frozenset[str]] | None,
    node_labels: Mapping[str, str],
) -> list[NodeTemplate]:
    """One template per Provisioner, in the order new nodes are tried.

    ``instance_types``, ``usage`` and ``zones`` are keyed by Provisioner name, ``node_labels``
    go on every launched node (see :class:`~provisioner.scheduling.solver.SolverInput`).
    Raises ValueError for an invalid Provisioner (an unknown requirement operator, a malformed
    limit).
    """
    templates = []
    for index, p in enumerate(order_provisioners(provisioners)):
        requirements = provisioner_requirements(p, node_labels)
        labels = provisioner_node_labels(p, node_labels)
        if zones is not None and p.name in zones:
            requirements = requirements.with_requirement(Requirement.of(wk.ZONE, IN, sorted(zones[p.name])))
        taints = provisioner_taints(p)
        types = instance_types.get(p.name, ())
        keys = type_keys(types, labels)
        options = _type_options(dimensions, requirements, taints, types, daemonsets, keys)
        if options:
            requirements = _offered(memo, requirements, options)
        limits = provisioner_limits(p)
        limited = dimensions.indices(limits) if limits else ()
        templates.append(NodeTemplate(
            index=index, provisioner=p, requirements=requirements, taints=taints, labels=labels,
            options=options, limits=dimensions.vector(limits) if limits is not None else None,
            usage=dimensions.vector(usage.get(p.name, Resources())), reserved=dimensions.zero,
            allow_undefined=keys | {wk.HOSTNAME}, type_keys=keys, dimensions=dimensions,
            limited=limited, first_limited=limited[0] if limited else -1,
        ))
    return templates


# --------------------------------------------------------------------------- a new node's options
def matching_options(memo: Memo, template: NodeTemplate, accelerator: bool,
                     alternative: Requirements) -> tuple[Requirements, list[TypeOption]] | str:
    """A new node of ``template`` under ``alternative``: its requirements and the options that meet them.

    The options match the need for an accelerator and have an allowed offering; a reason when
    there are none or ``alternative`` cannot be met at launch (:func:`unmet_at_launch`).
    """
    key = (template.index, alternative)
    if key in memo.template_compatibility:
        reason = memo.template_compatibility[key]
    else:
        reason = unmet_at_launch(template, template.requirements, alternative)
        if reason is None and (template.requirements & alternative).infeasible_keys():
            reason = "requirements cannot be met together"
        memo.template_compatibility[key] = reason
    if reason is not None:
        return f"incompatible requirements, {reason}"
    requirements = template.requirements & alternative
    matching = meeting_options(memo, template, requirements, accelerator)
    if not matching:
        return template.no_option_reason(requirements, accelerator)
    return requirements, matching


def meeting_options(memo: Memo, template: NodeTemplate, requirements: Requirements,
                    accelerator: bool) -> list[TypeOption]:
    """The options of ``template`` (largest first) that meet ``requirements`` (:func:`allows`), with accelerators or without."""
    key = (template.index, requirements, accelerator)
    matching = memo.template_options.get(key)
    if matching is None:
        matching = [t for t in template.options if t.accelerator == accelerator and allows(memo, t, requirements)]
        memo.template_options[key] = matching
    return matching


def options_for(memo: Memo, template: NodeTemplate, pod: Pod, accelerator: bool, requests: Vector,
                alternative: Requirements) -> tuple[Requirements, list[TypeOption]] | str:
    """A new node of ``template`` for ``pod`` alone, under ``alternative``: requirements and options.

    Returns the node's requirements and the options that hold the pod (``requests``), or why
    there are none.

    Options must meet the requirements (:func:`matching_options`), match the pod's need for an
    accelerator, hold its requests plus DaemonSet overhead, leave its host ports free of
    DaemonSets' and, under limits, fit what the Provisioner has left.
    """
    matched = matching_options(memo, template, accelerator, alternative)
    if isinstance(matched, str):
        return matched
    requirements, matching = matched
    fits_key = (template.index, requirements, accelerator, requests)
    options = memo.template_fits.get(fits_key)
    if options is None:
        options = fitting(matching, requests)
        memo.template_fits[fits_key] = options
    if not options:
        return f"no instance type has room for the pod's requests {_format_requests(pod.requests)} plus DaemonSet overhead"
    if pod.host_ports:
        options = without_port_conflicts(options, pod.host_ports)
        if not options:
            return "host port already used by a DaemonSet"
    if template.limits is not None:
        budget = template.budget()
        if not any(template.within(t.capacity, budget) for t in options):
            return template.limits_reason(options)
    return requirements, options


def _format_requests(resources: Resources) -> str:
    """``cpu=1500m, memory=1Gi, pods=1``: amounts as Kubernetes quantities, as users read them."""
    return ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(resources.items()))
