"""Well-known label keys, their deprecated aliases, and the domains a Provisioner may not use.

Sources: Karpenter v0.6.3 ``pkg/apis/provisioning/v1alpha5/labels.go`` (well-known labels,
restricted domains and labels, aliases) and Kubernetes' well-known labels reference. Karpenter
v0.7+ lets a requirement name any label key outside the restricted domains; so do we.
"""

from __future__ import annotations

API_GROUP = "karpenter.sh"
API_VERSION = "karpenter.sh/v1alpha5"
KIND = "Provisioner"

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
PROVISIONER_NAME = "karpenter.sh/provisioner-name"

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"

#: Keys a Provisioner's requirements and instance types speak about natively.
WELL_KNOWN_LABELS = frozenset({ZONE, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, PROVISIONER_NAME, HOSTNAME})

#: The instance-type labels the AWS cloud provider puts on every node it launches (from the EC2
#: catalog: ``provisioner.cloudprovider.aws.catalog.shape_labels``; a unit test keeps the two
#: equal). As in Karpenter v0.10+ (``v1alpha5.WellKnownLabels.Insert(...)`` in the AWS
#: provider), a Provisioner's requirements may name them although ``k8s.aws`` is a restricted
#: domain; its ``labels`` may not (the instance type decides their values).
AWS_INSTANCE_LABELS = frozenset(
    {
        "karpenter.k8s.aws/instance-category",
        "karpenter.k8s.aws/instance-family",
        "karpenter.k8s.aws/instance-generation",
        "karpenter.k8s.aws/instance-size",
        "karpenter.k8s.aws/instance-cpu",
        "karpenter.k8s.aws/instance-memory",
        "karpenter.k8s.aws/instance-hypervisor",
        "karpenter.k8s.aws/instance-gpu-count",
        "karpenter.k8s.aws/instance-gpu-name",
        "karpenter.k8s.aws/instance-gpu-manufacturer",
        "karpenter.k8s.aws/instance-local-nvme",
    }
)

#: Keys a Provisioner's requirements may name although their domain is restricted.
WELL_KNOWN_REQUIREMENT_LABELS = WELL_KNOWN_LABELS | AWS_INSTANCE_LABELS

#: Deprecated alias -> the label it stands for (normalised on input, warned about by the webhook).
LABEL_ALIASES = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "topology.ebs.csi.aws.com/zone": ZONE,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}

#: Region labels are dropped from requirements: a cluster lives in one region (v0.6.3 behaviour).
IGNORED_LABELS = frozenset({REGION, "failure-domain.beta.kubernetes.io/region"})

#: Domains (and their subdomains) a Provisioner may not put in labels or requirement keys,
#: except for the well-known labels above.
RESTRICTED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "k8s.aws")
#: Subdomains exempt from the restriction (kops' own labels, and node-restriction's
#: ``node-restriction.kubernetes.io`` which a kubelet may set).
EXEMPT_LABEL_DOMAINS = ("kops.k8s.io", "node-restriction.kubernetes.io", "node.kubernetes.io")

#: Labels the controller sets itself; a Provisioner may not set them as labels.
RESTRICTED_LABELS = frozenset({HOSTNAME, PROVISIONER_NAME, "karpenter.sh/emptiness-timestamp"})

# Node-lifecycle contract (DESIGN.md, "Contracts between the parts")
NOMINATIONS_ANNOTATION = "groupless.dev/nominations"
#: USD per hour of the offering a node was launched with (written at launch, read by the extender's scores).
PRICE_ANNOTATION = "groupless.dev/price-per-hour"
#: RFC3339 time its instance was launched (written with the Node; an adopted instance's Node is
#: written later than its launch). A node's age, for ``ttlSecondsUntilExpired``, counts from it.
LAUNCHED_AT_ANNOTATION = "groupless.dev/launched-at"
NODE_REQUEST_TAG = "groupless.dev/node-request"
DISRUPTED_TAINT_KEY = "karpenter.sh/disrupted"
NOT_READY_TAINT_KEY = "karpenter.sh/not-ready"
EMPTINESS_TIMESTAMP_ANNOTATION = "karpenter.sh/emptiness-timestamp"
DO_NOT_EVICT_ANNOTATION = "karpenter.sh/do-not-evict"
#: On a Node: ``"true"`` keeps it out of consolidation (Karpenter v0.15-v0.31).
DO_NOT_CONSOLIDATE_ANNOTATION = "karpenter.sh/do-not-consolidate"
TERMINATION_FINALIZER = "karpenter.sh/termination"


def normalize_label_key(key: str) -> str:
    """The canonical key for ``key`` (an alias maps to the label it stands for)."""
    return LABEL_ALIASES.get(key, key)


def label_domain(key: str) -> str:
    """The prefix of a label key before ``/``; ``""`` for an unprefixed key."""
    return key.split("/", 1)[0] if "/" in key else ""


def is_restricted_domain(key: str, *, requirement: bool = False) -> bool:
    """True when ``key`` is not well-known and its domain ends with a restricted domain.

    ``karpenter.sh/capacity-type`` and ``topology.kubernetes.io/zone`` pass (well-known);
    ``node.kubernetes.io/x`` passes as an exempt kubelet domain; ``example.kubernetes.io/x``
    fails. With ``requirement`` (a requirement key rather than a label), the AWS instance-type
    labels (:data:`AWS_INSTANCE_LABELS`) pass too. Source: Karpenter v0.6.3 validation rule 7
    (the domain *ends with* a restricted one), v0.10+ for the AWS labels.
    """
    if key in (WELL_KNOWN_REQUIREMENT_LABELS if requirement else WELL_KNOWN_LABELS):
        return False
    domain = label_domain(key)
    if not domain:
        return False
    if any(domain == d or domain.endswith("." + d) for d in EXEMPT_LABEL_DOMAINS):
        return False
    return any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS)
