"""The Helm chart renders with default and custom values, and every object is a valid Kubernetes object.

helm is built from the Go module proxy on first use (``localcluster.helm.build_helm``); the
rendered objects are checked against the Kubernetes OpenAPI models (``kube_schema``) and for the
operational properties the chart promises (non-root, read-only root filesystem, probes,
least-privilege RBAC, empty caBundle, leader election, the scheduler snippet).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.helm import build_helm

from .kube_schema import SchemaError, validate

CHART = Path(__file__).resolve().parents[3] / "deploy" / "chart" / "groupless"
REQUIRED = ["--set", "clusterName=karpenter-demo", "--set", "clusterEndpoint=https://ABCD.gr7.ap-south-1.eks.amazonaws.com"]


@pytest.fixture(scope="module")
def helm() -> Path:
    return build_helm()


def render(helm: Path, *args: str, release: str = "groupless", namespace: str = "groupless") -> list[dict[str, Any]]:
    proc = subprocess.run([str(helm), "template", release, str(CHART), "--namespace", namespace, *args],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"helm template failed: {proc.stderr}")
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<from>") for e in container.get("env", [])}


@pytest.fixture(scope="module")
def default_objects(helm: Path) -> list[dict[str, Any]]:
    return render(helm, *REQUIRED)


@pytest.fixture(scope="module")
def custom_objects(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    values = {
        "replicas": 3,
        "serviceCIDR": "172.20.0.0/16",
        "aws": {"defaultInstanceProfile": "KarpenterNodeInstanceProfile-karpenter-demo", "region": "ap-south-1"},
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/groupless"}},
        "logLevel": "debug",
        "logFormat": "json",
        "controller": {"batchIdleDuration": "2s", "batchMaxDuration": "20s", "nodeLabels": {"team": "a", "env": "prod"},
                       "consolidation": {"settlePeriod": "1m", "minSavings": 0.2}},
        "secondScheduler": {"enabled": True, "schedulerName": "groupless-scheduler"},
        "schedulerExtender": {"weight": 7, "httpTimeout": "3s"},
        "image": {"repository": "registry.example.com/groupless", "tag": "1.2.3"},
    }
    path = tmp_path_factory.mktemp("values") / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return render(helm, *REQUIRED, "-f", str(path), release="gl", namespace="platform")


def test_default_render_objects_are_valid_kubernetes_objects(default_objects: list[dict[str, Any]]) -> None:
    kinds = sorted({o["kind"] for o in default_objects})
    assert kinds == sorted([
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service",
        "PodDisruptionBudget", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ConfigMap",
    ])
    for obj in default_objects:
        validate(obj)
    namespaced = [o for o in default_objects if o["kind"] not in
                  ("ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"groupless"}


def test_custom_render_objects_are_valid(custom_objects: list[dict[str, Any]]) -> None:
    for obj in custom_objects:
        validate(obj)
    assert len(by_kind(custom_objects, "Deployment")) == 2  # groupless + the second scheduler


def test_validator_rejects_a_misspelt_field_and_a_missing_required_one() -> None:
    good = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 443, "targetPort": "https"}]}}
    validate(good)
    with pytest.raises(SchemaError, match="unknown field 'prot'"):
        validate({**good, "spec": {"ports": [{"prot": 443}]}})
    with pytest.raises(SchemaError, match="port"):
        validate({**good, "spec": {"ports": [{"name": "x"}]}})
    with pytest.raises(SchemaError, match="expected a list"):
        validate({**good, "spec": {"ports": {"port": 443}}})


def test_default_service_cidr_is_the_documented_one_and_parses(default_objects: list[dict[str, Any]]) -> None:
    from provisioner.settings import from_mapping

    deployment = by_kind(default_objects, "Deployment")[0]
    controller = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "controller")
    env = env_of(controller)
    assert env["GROUPLESS_SERVICE_CIDR"] == "10.100.0.0/16"
    assert from_mapping({}, environ={"GROUPLESS_SERVICE_CIDR": env["GROUPLESS_SERVICE_CIDR"]}).aws.service_cidr == "10.100.0.0/16"
    assert "GROUPLESS_CLUSTER_CA_BUNDLE" not in env  # empty: discovered from the service account


def test_missing_cluster_name_fails_with_a_clear_message(helm: Path) -> None:
    proc = subprocess.run([str(helm), "template", "g", str(CHART)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "clusterName is required" in proc.stderr


def test_walkthrough_flags_reach_the_controller(custom_objects: list[dict[str, Any]]) -> None:
    deployment = next(d for d in by_kind(custom_objects, "Deployment") if d["metadata"]["name"] == "gl-groupless")
    assert deployment["spec"]["replicas"] == 3
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert sorted(containers) == ["controller", "extender", "webhook"]
    env = env_of(containers["controller"])
    assert env["GROUPLESS_CLUSTER_NAME"] == "karpenter-demo"
    assert env["GROUPLESS_CLUSTER_ENDPOINT"] == "https://ABCD.gr7.ap-south-1.eks.amazonaws.com"
    assert env["GROUPLESS_DEFAULT_INSTANCE_PROFILE"] == "KarpenterNodeInstanceProfile-karpenter-demo"
    assert env["GROUPLESS_AWS_REGION"] == "ap-south-1"
    assert env["GROUPLESS_SERVICE_CIDR"] == "172.20.0.0/16"
    assert env["GROUPLESS_BATCH_IDLE_DURATION"] == "2s"
    assert env["GROUPLESS_BATCH_MAX_DURATION"] == "20s"
    # consolidation's churn guards, as the controller parses them
    from provisioner.settings import from_mapping

    consolidation = from_mapping({}, environ={k: v for k, v in env.items() if "CONSOLIDATION" in k}).consolidation
    assert (consolidation.settle_seconds, consolidation.min_savings_fraction, consolidation.spot_options) == (60.0, 0.2, 15)
    assert (consolidation.interval_seconds, consolidation.validation_seconds, consolidation.max_disrupted_share) == (
        10.0, 15.0, 0.1)
    assert env["GROUPLESS_NODE_LABELS"] == "env=prod,team=a"
    assert env["GROUPLESS_LEADER_ELECT"] == "true"
    assert env["GROUPLESS_LEASE_NAME"] == "gl-groupless-controller"
    for container in containers.values():
        assert container["image"] == "registry.example.com/groupless:1.2.3"
        assert env_of(container)["GROUPLESS_LOG_LEVEL"] == "debug"
        assert env_of(container)["GROUPLESS_LOG_FORMAT"] == "json"
    account = next(a for a in by_kind(custom_objects, "ServiceAccount") if a["metadata"]["name"] == "gl-groupless")
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/groupless"}


def test_pod_is_non_root_read_only_probed_and_spread(default_objects: list[dict[str, Any]]) -> None:
    deployment = by_kind(default_objects, "Deployment")[0]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    for container in pod["containers"]:
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, container["name"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert container["livenessProbe"] and container["readinessProbe"], container["name"]
        assert container["args"][0] == container["name"]  # groupless <controller|webhook|extender>
        assert {"name": "tmp", "mountPath": "/tmp", "subPath": container["name"]} in container["volumeMounts"]
        assert "limits" in container["resources"] and "requests" in container["resources"]
        assert {"POD_NAME", "POD_NAMESPACE", "GROUPLESS_LOG_LEVEL", "GROUPLESS_LOG_FORMAT"} <= set(env_of(container))
    assert {"topology.kubernetes.io/zone", "kubernetes.io/hostname"} == {
        c["topologyKey"] for c in pod["topologySpreadConstraints"]}
    selector = deployment["spec"]["selector"]["matchLabels"]
    for constraint in pod["topologySpreadConstraints"]:
        assert constraint["labelSelector"]["matchLabels"] == selector
    pdb = by_kind(default_objects, "PodDisruptionBudget")[0]
    assert pdb["spec"]["selector"]["matchLabels"] == selector and pdb["spec"]["maxUnavailable"] == 1


def test_second_scheduler_pods_are_not_selected_by_the_groupless_selectors(
        custom_objects: list[dict[str, Any]]) -> None:
    def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    deployments = {d["metadata"]["name"]: d for d in by_kind(custom_objects, "Deployment")}
    main, scheduler = deployments["gl-groupless"], deployments["gl-groupless-scheduler"]
    main_pod = main["spec"]["template"]["metadata"]["labels"]
    scheduler_pod = scheduler["spec"]["template"]["metadata"]["labels"]
    assert (main_pod["app.kubernetes.io/component"], scheduler_pod["app.kubernetes.io/component"]) == (
        "controller", "scheduler")
    (service,) = by_kind(custom_objects, "Service")
    (pdb,) = by_kind(custom_objects, "PodDisruptionBudget")
    selectors = {"deployment": main["spec"]["selector"]["matchLabels"], "service": service["spec"]["selector"],
                 "pdb": pdb["spec"]["selector"]["matchLabels"]}
    selectors |= {f"spread {c['topologyKey']}": c["labelSelector"]["matchLabels"]
                  for c in main["spec"]["template"]["spec"]["topologySpreadConstraints"]}
    for what, selector in selectors.items():
        assert selects(selector, main_pod) and not selects(selector, scheduler_pod), what
    scheduler_selector = scheduler["spec"]["selector"]["matchLabels"]
    assert selects(scheduler_selector, scheduler_pod) and not selects(scheduler_selector, main_pod)


def test_single_replica_has_no_pdb_that_would_block_every_drain(helm: Path) -> None:
    objects = render(helm, *REQUIRED, "--set", "replicas=1")
    assert by_kind(objects, "PodDisruptionBudget") == []


def test_rbac_is_least_privilege(default_objects: list[dict[str, Any]]) -> None:
    cluster_role = by_kind(default_objects, "ClusterRole")[0]
    for rule in cluster_role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        assert "secrets" not in rule["resources"], "secrets are read in the release namespace only"
        if "pods" in rule["resources"]:
            assert set(rule["verbs"]) == {"get", "list", "watch"}, "Groupless never deletes or binds pods"
    grants = {(res, verb) for rule in cluster_role["rules"] for res in rule["resources"] for verb in rule["verbs"]}
    assert ("pods/eviction", "create") in grants
    assert ("nodes", "delete") in grants and ("provisioners/status", "patch") in grants
    webhook_rules = [r for r in cluster_role["rules"] if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    names = {n for r in webhook_rules for n in r["resourceNames"]}
    assert names == {o["metadata"]["name"] for o in default_objects if o["kind"].endswith("WebhookConfiguration")}
    role = by_kind(default_objects, "Role")[0]
    secret_rules = [r for r in role["rules"] if "secrets" in r["resources"] and "get" in r["verbs"]]
    assert secret_rules[0]["resourceNames"] == ["groupless-cert"]
    lease_rules = [r for r in role["rules"] if "leases" in r["resources"] and "update" in r["verbs"]]
    assert lease_rules[0]["resourceNames"] == ["groupless-controller"]


def test_webhooks_leave_ca_bundle_to_the_bootstrap_and_match_create_update(default_objects: list[dict[str, Any]]) -> None:
    service = by_kind(default_objects, "Service")[0]
    paths = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (config,) = by_kind(default_objects, kind)
        (hook,) = config["webhooks"]
        assert "caBundle" not in hook["clientConfig"]
        assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        assert hook["clientConfig"]["service"]["port"] in {p["port"] for p in service["spec"]["ports"]}
        assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
        assert hook["rules"][0]["resources"] == ["provisioners"]
        assert hook["sideEffects"] == "None" and hook["failurePolicy"] == "Fail"
        paths[kind] = hook["clientConfig"]["service"]["path"]
    assert paths == {"MutatingWebhookConfiguration": "/mutate", "ValidatingWebhookConfiguration": "/validate"}


def test_scheduler_snippet_registers_the_extender_ignorable(default_objects: list[dict[str, Any]]) -> None:
    (config_map,) = by_kind(default_objects, "ConfigMap")
    config = yaml.safe_load(config_map["data"]["kube-scheduler-config.yaml"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    (extender,) = config["extenders"]
    assert extender == yaml.safe_load(config_map["data"]["extenders.yaml"])["extenders"][0]
    assert extender["urlPrefix"] == "https://groupless.groupless.svc:8888"
    assert extender["filterVerb"] == "filter" and extender["prioritizeVerb"] == "prioritize"
    assert extender["ignorable"] is True and extender["nodeCacheCapable"] is True
    assert extender["httpTimeout"] == "2s" and extender["weight"] == 5
    # the same choices as the plain configuration in deploy/scheduler/
    plain = yaml.safe_load((CHART.parents[1] / "scheduler" / "kube-scheduler-config.yaml").read_text())
    (plain_extender,) = plain["extenders"]
    for key in ("urlPrefix", "filterVerb", "prioritizeVerb", "weight", "nodeCacheCapable", "ignorable", "httpTimeout",
                "enableHTTPS"):
        assert extender[key] == plain_extender[key], key
    assert extender["tlsConfig"]["serverName"] == plain_extender["tlsConfig"]["serverName"]


def test_second_scheduler_is_upstream_kube_scheduler_with_our_extender(custom_objects: list[dict[str, Any]]) -> None:
    scheduler = next(d for d in by_kind(custom_objects, "Deployment") if d["metadata"]["name"] == "gl-groupless-scheduler")
    (container,) = scheduler["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("registry.k8s.io/kube-scheduler:")
    config_map = next(c for c in by_kind(custom_objects, "ConfigMap") if c["metadata"]["name"] == "gl-groupless-scheduler")
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["profiles"] == [{"schedulerName": "groupless-scheduler"}]
    assert config["leaderElection"]["resourceName"] == "groupless-scheduler"
    assert config["leaderElection"]["resourceNamespace"] == "platform"
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "https://gl-groupless.platform.svc:8888"
    assert extender["weight"] == 7 and extender["httpTimeout"] == "3s"
    assert extender["tlsConfig"]["caFile"] == "/etc/groupless/certs/ca.crt"
    bindings = {b["roleRef"]["name"] for b in by_kind(custom_objects, "ClusterRoleBinding")
                if b["subjects"][0]["name"] == "gl-groupless-scheduler"}
    assert bindings == {"system:kube-scheduler", "system:volume-scheduler"}


def test_container_args_and_environment_are_understood_by_groupless(custom_objects: list[dict[str, Any]]) -> None:
    """Every flag the chart passes parses with the real ``groupless`` parser; every GROUPLESS_* variable is a setting."""
    from provisioner import settings
    from provisioner.cli import build_parser

    parser = build_parser()
    deployment = next(d for d in by_kind(custom_objects, "Deployment") if d["metadata"]["name"] == "gl-groupless")
    known_env = {settings.env_name(name) for name in settings.option_names()}
    known_env |= {"GROUPLESS_LOG_LEVEL", "GROUPLESS_LOG_FORMAT"}
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        args = parser.parse_args(container["args"])
        assert args.command == container["name"]
        unknown = {n for n in env_of(container) if n.startswith("GROUPLESS_")} - known_env
        assert unknown == set(), container["name"]
    webhook = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "webhook")
    parsed = parser.parse_args(webhook["args"])
    assert parsed.bootstrap_certs and parsed.namespace == "platform"
    assert parsed.secret_name == "gl-groupless-cert" and parsed.service_name == "gl-groupless"
    extender = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "extender")
    assert parser.parse_args(extender["args"]).tls_cert_file == f"{parsed.cert_dir}/tls.crt"


@pytest.mark.parametrize(("setting", "complaint"), [
    ("logLevel=verbose", "/logLevel"),
    ("logFormat=xml", "/logFormat"),
    ("replicas=0", "/replicas"),
    ("controller.batchIdleDuration=soon", "/controller/batchIdleDuration"),
    ("aws.defaultInstanceProfil=typo", "defaultInstanceProfil"),
    ("webhook.failurePolicy=Maybe", "/webhook/failurePolicy"),
    ("serviceCIDR=ten", "/serviceCIDR"),
    ("controller.consolidation.minSavings=2", "/controller/consolidation/minSavings"),
    ("controller.consolidation.settlePeriod=later", "/controller/consolidation/settlePeriod"),
])
def test_values_schema_rejects_bad_values_naming_them(helm: Path, setting: str, complaint: str) -> None:
    proc = subprocess.run([str(helm), "template", "g", str(CHART), *REQUIRED, "--set", setting],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert complaint in proc.stderr


def test_chart_crd_is_the_deploy_crd_and_validates(helm: Path) -> None:
    deploy_crds = sorted((CHART.parents[1] / "crds").glob("*.yaml"))
    assert deploy_crds, "deploy/crds holds the Provisioner CRD"
    for source in deploy_crds:
        copy = CHART / "crds" / source.name
        assert copy.read_text() == source.read_text(), f"copy {source} to {copy}"
    objects = render(helm, *REQUIRED, "--include-crds")
    (crd,) = by_kind(objects, "CustomResourceDefinition")
    validate(crd)
    assert crd["metadata"]["name"] == "provisioners.karpenter.sh"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha5"]


def test_chart_rbac_grants_what_the_plain_manifests_grant(default_objects: list[dict[str, Any]]) -> None:
    """deploy/rbac.yaml (plain manifests) and the chart must not drift apart."""
    plain = [d for d in yaml.safe_load_all((CHART.parents[1] / "rbac.yaml").read_text()) if d]
    for kind in ("ClusterRole", "Role"):
        (chart_role,) = [o for o in by_kind(default_objects, kind) if o["metadata"]["name"] == "groupless"]
        (plain_role,) = by_kind(plain, kind)
        assert chart_role["rules"] == plain_role["rules"], kind


def test_helm_lint_strict_passes(helm: Path) -> None:
    proc = subprocess.run([str(helm), "lint", "--strict", str(CHART), *REQUIRED], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize("toggles", [
    ("webhook.enabled=false",),
    ("extender.enabled=false",),
    ("serviceAccount.create=false", "serviceAccount.name=existing"),
    ("image.digest=sha256:" + "a" * 64,),
])
def test_optional_parts_render_valid_objects(helm: Path, toggles: tuple[str, ...]) -> None:
    args = [a for t in toggles for a in ("--set", t)]
    objects = render(helm, *REQUIRED, *args)
    for obj in objects:
        validate(obj)
    deployment = by_kind(objects, "Deployment")[0]
    pod = deployment["spec"]["template"]["spec"]
    names = [c["name"] for c in pod["containers"]]
    kinds = {o["kind"] for o in objects}
    if "webhook.enabled=false" in toggles:
        assert "webhook" not in names and "MutatingWebhookConfiguration" not in kinds
        assert "secret" in next(v for v in pod["volumes"] if v["name"] == "certs")  # extender reads the Secret
    if "extender.enabled=false" in toggles:
        assert "extender" not in names and "ConfigMap" not in kinds
    if "serviceAccount.create=false" in toggles:
        assert "ServiceAccount" not in kinds and pod["serviceAccountName"] == "existing"
    if any(t.startswith("image.digest") for t in toggles):
        assert {c["image"] for c in pod["containers"]} == {"ghcr.io/groupless/groupless@sha256:" + "a" * 64}


def test_grafana_dashboard_queries_only_groupless_metrics_that_exist(helm: Path) -> None:
    import json
    import re

    from provisioner import metrics

    dashboard = json.loads((CHART / "dashboards" / "groupless.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 12
    known = set(metrics.metric_names())
    known |= {f"{n}_{suffix}" for n in metrics.metric_names() for suffix in ("bucket", "count", "sum")}
    used = {name for expr in exprs for name in re.findall(r"\bgroupless_\w+", expr)}
    assert used - known == set()
    # every metric family appears on the dashboard
    families = {re.sub(r"_(bucket|count|sum)$", "", n) for n in used}
    assert families == set(metrics.metric_names()) - {"groupless_provisioner_usage", "groupless_provisioner_limit"}
    objects = render(helm, *REQUIRED, "--set", "grafanaDashboard.enabled=true")
    (config_map,) = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    validate(config_map)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["groupless.json"]) == dashboard


def test_alert_rules_are_the_documented_ones_and_use_existing_metrics(helm: Path) -> None:
    import re

    from provisioner import metrics

    rules = yaml.safe_load((CHART / "alerts" / "rules.yaml").read_text())
    doc = (CHART.parents[2] / "docs" / "metrics.md").read_text()
    block = re.search(r"### Suggested alerts\n.*?```yaml\n(.*?)```", doc, re.S)
    assert block is not None and yaml.safe_load(block.group(1)) == rules
    known = set(metrics.metric_names())
    known |= {f"{n}_{suffix}" for n in metrics.metric_names() for suffix in ("bucket", "count", "sum")}
    for rule in rules:
        assert rule["alert"].startswith("Groupless") and rule["annotations"]["summary"]
        assert set(re.findall(r"\bgroupless_\w+", rule["expr"])) <= known, rule["alert"]
    objects = render(helm, *REQUIRED, "--set", "prometheusRule.enabled=true")
    (rule_object,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    assert rule_object["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule_object["spec"]["groups"] == [{"name": "groupless", "rules": rules}]
