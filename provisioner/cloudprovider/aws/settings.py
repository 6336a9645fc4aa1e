"""Settings of the AWS cloud provider, one frozen value built once at start-up.

Why a separate value from the controller's settings: the provider is also built by tests and by
``groupless plan`` without a controller; it needs only what is here. Field names follow
Karpenter v0.6.3's flags (``CLUSTER_NAME``, ``CLUSTER_ENDPOINT``, ``AWS_DEFAULT_INSTANCE_PROFILE``,
``AWS_ENI_LIMITED_POD_DENSITY``) plus what AL2023's nodeadm needs (CA bundle, service CIDR).
Durations are seconds.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

import boto3
import yaml

from provisioner import yamlload
from provisioner.settings import ControllerSettings, SettingsError

#: The Kubernetes minor the AMI parameters are looked up for when the caller does not say
#: (the controller should pass the API server's ``major.minor``).
DEFAULT_KUBERNETES_VERSION = "1.36"

#: ``--service-cidr``'s default: EKS's Service CIDR unless the VPC is in 10.0.0.0/8 (then
#: 172.20.0.0/16, which must be set). nodeadm (AL2023) requires one and derives clusterDNS from it.
DEFAULT_SERVICE_CIDR = "10.100.0.0/16"


def resolve_region(explicit: str | None, session: boto3.session.Session | None = None) -> str:
    """The AWS region: ``explicit`` (``--aws-region``) when set, else boto3's default chain.

    Then ``AWS_REGION`` (what EKS's IAM Roles for Service Accounts and Pod Identity inject; the
    Go SDK Karpenter uses reads it, botocore does not, so it is read here first), then boto3's
    chain through ``boto3.session.Session().region_name`` (or ``session``'s):
    ``AWS_DEFAULT_REGION``, then the profile's ``region`` in ``~/.aws/config``. Raises
    SettingsError, naming every way to set one, when none gives a region: a controller must
    never silently manage capacity in a region nobody chose.
    """
    if explicit:
        return explicit
    if os.environ.get("AWS_REGION"):
        return os.environ["AWS_REGION"]
    region = (session or boto3.session.Session()).region_name
    if not region:
        raise SettingsError(
            "no AWS region: set --aws-region (GROUPLESS_AWS_REGION), or AWS_REGION / AWS_DEFAULT_REGION "
            "or a profile region for the SDK's default chain"
        )
    return str(region)


#: The CA a pod's service account mounts (what client-go's in-cluster config trusts).
SERVICE_ACCOUNT_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"


def _kubeconfig_ca(path: str) -> str:
    """Base64 CA of the kubeconfig ``path``'s current context's cluster; "" when none.

    ``certificate-authority-data`` as is, or the ``certificate-authority`` file (relative to the
    kubeconfig) encoded; "" when it has neither or cannot be read (launches then refuse,
    naming --cluster-ca-bundle).
    """
    try:
        config = yamlload.load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return ""
    if not isinstance(config, dict):
        return ""
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or [] if isinstance(c, dict)}
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or [] if isinstance(c, dict)}
    context = contexts.get(config.get("current-context"), {})
    cluster = clusters.get(context.get("cluster")) if isinstance(context, dict) else None
    if cluster is None and len(clusters) == 1:
        cluster = next(iter(clusters.values()))
    if not isinstance(cluster, dict):
        return ""
    if cluster.get("certificate-authority-data"):
        return str(cluster["certificate-authority-data"])
    if cluster.get("certificate-authority"):
        try:
            ca_file = Path(path).parent / str(cluster["certificate-authority"])
            return base64.b64encode(ca_file.read_bytes()).decode()
        except OSError:
            return ""
    return ""


def discover_cluster_ca(
    explicit: str, kubeconfig: str | None = None, service_account_ca: str = SERVICE_ACCOUNT_CA
) -> str:
    """The base64 PEM CA bundle of the API server for node user data; "" when none is found.

    ``explicit`` (``--cluster-ca-bundle``) wins. Otherwise the CA the controller's own client
    trusts, as Karpenter takes it from its REST config: with ``kubeconfig`` set, that file's
    current cluster; else the service account's ``ca.crt`` when running in a pod; else
    ``$KUBECONFIG`` (first file) or ``~/.kube/config``. Never raises: a missing CA only stops
    launches (ConfigurationError from the provider), not ``groupless controller`` itself.
    """
    if explicit:
        return explicit
    if kubeconfig:
        return _kubeconfig_ca(kubeconfig.split(os.pathsep)[0])
    try:
        return base64.b64encode(Path(service_account_ca).read_bytes()).decode()
    except OSError:
        pass
    fallback = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    return _kubeconfig_ca(fallback.split(os.pathsep)[0])


@dataclass(frozen=True, slots=True)
class AWSSettings:
    """Everything the AWS provider needs besides its clients.

    ``cluster_ca_bundle`` is the base64 PEM of the cluster CA (``--b64-cluster-ca``; "" refuses
    launches, see :func:`discover_cluster_ca`); ``service_cidr`` the cluster's Service CIDR
    (nodeadm requires it and derives the cluster DNS IP from it; EKS's default is
    ``10.100.0.0/16``, ``172.20.0.0/16`` when the VPC is in ``10.0.0.0/8``); ``endpoint_url``
    points the EC2 and SSM clients at another endpoint (a moto server, a VPC endpoint);
    ``pricing_endpoint_url`` points the Pricing API client (its own service,
    ``api.pricing.<us-east-1|eu-central-1|ap-south-1>.amazonaws.com``: the EC2 override is never
    applied to it). With ``endpoint_url`` set and ``pricing_endpoint_url`` not, the Pricing API
    is not called (an EC2 override means a private or fake EC2, whose Pricing API is unknown).
    ``region`` defaults to ``ap-south-1`` only for direct construction (tests, embedding); the
    controller resolves it with :func:`resolve_region` (never a silent default).
    ``pricing_file`` overrides prices (``--pricing-file``); ``pricing_api`` turns the Pricing
    API on (off: static table and spot history only).
    """

    cluster_name: str
    cluster_endpoint: str = ""
    cluster_ca_bundle: str = ""
    region: str = "ap-south-1"
    endpoint_url: str | None = None
    pricing_endpoint_url: str | None = None
    default_instance_profile: str | None = None
    eni_limited_pod_density: bool = True
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    service_cidr: str = DEFAULT_SERVICE_CIDR
    cluster_dns: str | None = None
    pricing_file: str | None = None
    pricing_api: bool = True
    instance_types_ttl: float = 300.0
    subnets_ttl: float = 60.0
    on_demand_refresh_interval: float = 12 * 3600.0
    spot_refresh_interval: float = 600.0
    describe_attempts: int = 6
    describe_interval: float = 1.0

    @property
    def uses_pricing_api(self) -> bool:
        """Whether the Pricing API is called: on, and not only an EC2 endpoint override without a pricing one."""
        return self.pricing_api and (self.pricing_endpoint_url is not None or self.endpoint_url is None)

    @property
    def kubernetes_minor(self) -> str:
        """``major.minor`` of ``kubernetes_version`` (``v1.36.3`` -> ``1.36``)."""
        parts = self.kubernetes_version.lstrip("v").split(".")
        return ".".join(parts[:2])

    @classmethod
    def from_controller_settings(
        cls,
        settings: ControllerSettings,
        kubernetes_version: str | None = None,
        session: boto3.session.Session | None = None,
    ) -> AWSSettings:
        """From the process settings' :class:`~provisioner.settings.AWS` group and kubeconfig.

        The region is ``aws.region`` or boto3's default chain (:func:`resolve_region`, through
        ``session`` when given); SettingsError when neither gives one.
        """
        aws = settings.aws
        return cls(
            cluster_name=aws.cluster_name,
            cluster_endpoint=aws.cluster_endpoint,
            cluster_ca_bundle=discover_cluster_ca(aws.cluster_ca_bundle, settings.kubeconfig),
            service_cidr=aws.service_cidr or DEFAULT_SERVICE_CIDR,
            region=resolve_region(aws.region, session),
            endpoint_url=aws.endpoint_url or None,
            pricing_endpoint_url=aws.pricing_endpoint_url or None,
            default_instance_profile=aws.default_instance_profile or None,
            eni_limited_pod_density=aws.eni_limited_pod_density,
            kubernetes_version=kubernetes_version or DEFAULT_KUBERNETES_VERSION,
        )
