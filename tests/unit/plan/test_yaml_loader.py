"""One YAML loader for the product: libyaml's C loader when PyYAML has it, the pure one otherwise."""

from __future__ import annotations

import datetime
import importlib
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

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


#: What the one-pass loader leaves to PyYAML's own path, each in a document after plain ones.
LEFT_TO_PYYAML = [
    "base: &b {a: 1}\nmerged:\n  <<: *b\n  c: 2\n",  # merge key
    "s: !!set {a, b}\n",
    "o: !!omap [{a: 1}, {b: 2}]\n",
    "=: value key\n",
]
#: What the one-pass loader builds itself: explicit core tags, anchors on scalars and
#: collections, recursive aliases, duplicate keys, empty values, every scalar style.
BUILT = """\
explicit: [!!str 123, !!int "42", !!float "1.5", !!bool "yes", !!null "", !!binary aGVsbG8=]
scalar: &s 12:30:00
again: *s
seq: &q [1, 2, {x: y}]
same: *q
dup: 1
dup: 2
empty:
quoted: ['1', "true", 'null']
styles:
  - plain
  - 'single'
  - "double\\n"
  - |-
    literal
  - >-
    folded
    text
""" + "---\n" + "self: &me {name: loop}\n" + "---\n" + "!!map {a: 1}\n" + "---\n" + "- !!seq [1]\n"


@pytest.mark.parametrize("pure", [False, True], ids=["libyaml", "pure"])
def test_the_one_pass_builds_what_safe_load_all_builds(pure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if pure:
        monkeypatch.delattr(yaml, "CSafeLoader")
    for text in (BUILT, TRICKY.replace("  notANumber: .nan\n", ""), PLANNABLE):
        assert list(yamlload.load_all(text)) == list(yaml.load_all(text, Loader=yaml.SafeLoader))
    docs = list(yamlload.load_all(BUILT))
    assert docs[0]["again"] is docs[0]["scalar"] == 45000 and docs[0]["same"] is docs[0]["seq"]
    assert docs[0]["dup"] == 2 and docs[0]["explicit"][-1] == b"hello"


@pytest.mark.parametrize("pure", [False, True], ids=["libyaml", "pure"])
@pytest.mark.parametrize("tail", LEFT_TO_PYYAML)
def test_what_the_one_pass_leaves_to_pyyaml_comes_out_the_same(pure: bool, tail: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if pure:
        monkeypatch.delattr(yaml, "CSafeLoader")
    text = "a: 1\n---\nb: [2]\n---\n" + tail + "---\nz: last\n"
    assert list(yamlload.load_all(text)) == list(yaml.load_all(text, Loader=yaml.SafeLoader))


@pytest.mark.parametrize("text", ["a: *nowhere\n", "a: &x 1\nb: &x 2\n", "a: !!python/name:os.system\n",
                                  "ok: 1\n---\na: [\n", "? [a, b]\n: complex key\n", "? {a: 1}\n: complex key\n"])
def test_errors_are_pyyamls(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as ours:
        list(yamlload.load_all(text))
    with pytest.raises(yaml.YAMLError) as theirs:
        list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


def test_documents_before_a_bad_one_are_yielded_first() -> None:
    documents = yamlload.load_all("first: 1\n---\na: [\n")
    assert next(documents) == {"first": 1}
    with pytest.raises(yaml.YAMLError, match="line 4"):
        next(documents)


def test_a_recursive_alias_is_the_object_itself() -> None:
    (ours,) = yamlload.load_all("self: &me {name: loop, again: *me}\n")
    (theirs,) = yaml.load_all("self: &me {name: loop, again: *me}\n", Loader=yaml.SafeLoader)
    assert ours["self"]["again"] is ours["self"] and theirs["self"]["again"] is theirs["self"]
    assert ours["self"]["name"] == theirs["self"]["name"] == "loop"


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                     st.sampled_from(["yes", "off", "0755", "1:30", "0x1F", "1e3", ".inf", "~", "2026-01-02", "<<"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=25)


@settings(max_examples=150, deadline=None)
@given(documents=st.lists(_VALUES, min_size=1, max_size=3), flow=st.sampled_from([None, True, False]))
def test_any_dumped_documents_load_the_same(documents: list[object], flow: bool | None) -> None:
    text = yaml.safe_dump_all(documents, default_flow_style=flow, allow_unicode=True)
    assert list(yamlload.load_all(text)) == list(yaml.load_all(text, Loader=yaml.SafeLoader))


def test_a_loader_with_path_resolvers_gets_pyyamls_own_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # a tag resolved by position needs PyYAML's composer, which tracks the position
    class Pathed(yaml.SafeLoader):
        pass

    Pathed.add_path_resolver("tag:yaml.org,2002:str", [(yaml.MappingNode, "port")], yaml.ScalarNode)

    def one_pass(loader: object, tags: object) -> None:
        raise AssertionError("the one pass does not track positions")

    monkeypatch.setattr(yamlload, "safe_loader", lambda: Pathed)
    monkeypatch.setattr(yamlload, "_document", one_pass)
    text = "port: 80\nother: [80]\n"
    assert list(yamlload.load_all(text)) == list(yaml.load_all(text, Loader=Pathed))
