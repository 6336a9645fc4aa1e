"""The cluster state cache lists and watches only what the controller's ClusterRole grants."""

from pathlib import Path

import yaml

from provisioner.kube.api import RESOURCES
from provisioner.state.cluster import DEFAULT_KINDS

DEPLOY = Path(__file__).parents[3] / "deploy"


def test_every_cached_kind_is_granted_list_and_watch() -> None:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    grants = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
              for resource in rule["resources"] for verb in rule["verbs"]}
    missing = [(kind, verb) for kind in DEFAULT_KINDS for verb in ("list", "watch")
               if (RESOURCES[kind].group, RESOURCES[kind].plural, verb) not in grants]
    assert missing == []
    assert "LimitRange" in DEFAULT_KINDS
