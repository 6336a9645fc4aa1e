"""One YAML loader for the product: libyaml's C loader when PyYAML has it, the pure one otherwise."""

from __future__ import annotations

import datetime
import importlib
import re
from pathlib import Path

import pytest
import yaml

from provisioner import yamlload
from provisioner.plan import read_inputs

REPO = Path(__file__).resolve().parents[3]
PRODUCT = [REPO / d for d in ("provisioner", "extender", "webhook", "certs", "localcluster")]

#: Manifests with the scalars YAML 1.1 resolves specially (booleans, octal, sexagesimal, floats,
#: timestamps, nulls), anchors and aliases, block and folded strings, unicode, flow collections.
TRICKY = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: &meta
  name: default
  labels: {team: "a/b", on: yes, off: no, octal: 0755, sexagesimal: 1:30, hex: 0x1F}
spec:
  owner: *meta
  ttlSecondsAfterEmpty: 30
  weight: ~
  ratio: 1.5e3
  notANumber: .nan
  created: 2026-01-01T00:00:00Z
  day: 2026-01-02
  empty: ""
  script: |
    #!/bin/sh
    echo "héllo ☃"
  folded: >
    one
    two
---
# an empty document
---
apiVersion: v1
kind: Pod
metadata: {name: web-0}
spec:
  containers: [{name: c, image: "pause", resources: {requests: {cpu: 100m, memory: 128Mi}}}]
"""


def test_the_c_loader_is_chosen_when_pyyaml_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    class StandIn(yaml.CSafeLoader):
        pass

    monkeypatch.setattr(yaml, "CSafeLoader", StandIn)
    assert yamlload.safe_loader() is StandIn


def test_the_pure_loader_is_the_fallback_without_libyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(yaml, "CSafeLoader")
    assert yamlload.safe_loader() is yaml.SafeLoader
    assert yamlload.load("a: [1, 2]") == {"a": [1, 2]}


def test_the_helper_imports_without_libyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(yaml, "CSafeLoader")
    try:
        reloaded = importlib.reload(yamlload)
        assert reloaded.safe_loader() is yaml.SafeLoader
    finally:
        monkeypatch.undo()
        importlib.reload(yamlload)
    assert yamlload.safe_loader() is yaml.CSafeLoader


def test_this_installation_has_the_c_loader() -> None:
    # PyYAML's manylinux wheels are built with libyaml; `groupless plan`'s speed depends on it
    assert yamlload.safe_loader() is yaml.CSafeLoader


def test_both_loaders_give_the_same_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = list(yamlload.load_all(TRICKY))
    with monkeypatch.context() as patched:
        patched.delattr(yaml, "CSafeLoader")
        pure = list(yamlload.load_all(TRICKY))
        pure_one = yamlload.load(TRICKY.split("---")[0])
    assert fast[0]["spec"]["notANumber"] != fast[0]["spec"]["notANumber"]  # nan
    for doc in (fast[0], pure[0]):
        doc["spec"].pop("notANumber")
    assert fast == pure == list(yaml.safe_load_all(TRICKY.replace("  notANumber: .nan\n", "")))
    assert fast[1] is None
    spec = fast[0]["spec"]
    assert spec["created"] == datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert spec["day"] == datetime.date(2026, 1, 2)
    assert fast[0]["metadata"]["labels"] == {"team": "a/b", True: True, False: False, "octal": 493,
                                             "sexagesimal": 90, "hex": 31}
    assert spec["script"] == '#!/bin/sh\necho "héllo ☃"\n' and spec["folded"] == "one two\n"
    assert spec["owner"] is fast[0]["metadata"] and pure[0]["spec"]["owner"] is pure[0]["metadata"]
    assert fast[2]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}}
    assert yamlload.load(TRICKY.split("---")[0])["metadata"] == pure_one["metadata"]


def test_both_loaders_refuse_what_is_not_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(yaml.YAMLError, match="line 2"):
        list(yamlload.load_all("a: [\n"))
    monkeypatch.delattr(yaml, "CSafeLoader")
    with pytest.raises(yaml.YAMLError, match="line 2"):
        list(yamlload.load_all("a: [\n"))


PLANNABLE = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  provider: &provider {subnetSelector: {a: "*"}, securityGroupSelector: {a: "*"}}
  ttlSecondsAfterEmpty: 30
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {on: yes}}
spec:
  nodeSelector: {kubernetes.io/arch: arm64}
  containers: [{name: c, image: pause, resources: {requests: {cpu: 1.5, memory: 1Gi}}}]
"""


def test_plan_reads_manifests_through_the_chosen_loader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    manifest = tmp_path / "manifests.yaml"
    manifest.write_text(PLANNABLE)
    used: list[str] = []

    class Counting(yaml.CSafeLoader):
        def __init__(self, stream: str) -> None:
            used.append("fast")
            super().__init__(stream)

    monkeypatch.setattr(yaml, "CSafeLoader", Counting)
    fast = read_inputs([str(manifest)])
    assert used == ["fast"]
    monkeypatch.delattr(yaml, "CSafeLoader")
    pure = read_inputs([str(manifest)])
    assert [p.name for p in fast.provisioners] == [p.name for p in pure.provisioners] == ["default"]
    assert fast.pods == pure.pods
    assert fast.pods[0]["metadata"]["labels"] == {True: True}
    assert fast.pods[0]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": 1.5, "memory": "1Gi"}


def test_every_yaml_read_of_the_product_goes_through_yamlload() -> None:
    direct = re.compile(r"\byaml\.(safe_load|safe_load_all|load|load_all|full_load|unsafe_load)\(|\bSafeLoader\b")
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for root in PRODUCT
        for path in sorted(root.rglob("*.py"))
        if path.name != "yamlload.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert offenders == []
