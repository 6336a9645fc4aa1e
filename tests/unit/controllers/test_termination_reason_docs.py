"""docs/metrics.md lists exactly the ``reason`` values of groupless_nodes_terminated_total the code can emit."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

from provisioner.controllers import objects, termination
from provisioner.model.labels import DISRUPTED_TAINT_KEY, EMPTINESS_TIMESTAMP_ANNOTATION

METRICS_DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def emitted() -> set[str]:
    """Every string literal ``termination_reason`` returns (the only source of the label)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(termination.termination_reason)))
    values = {n.value.value for n in ast.walk(tree)
              if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return)]
    assert len(values) == len(returns), "termination_reason returns something other than a literal"
    return values


def documented() -> set[str]:
    text = METRICS_DOC.read_text()
    match = re.search(r"^- `reason` of `groupless_nodes_terminated_total`:.*?\n((?:  .*\n)+)", text, re.M)
    assert match, "no 'reason of groupless_nodes_terminated_total' item in docs/metrics.md"
    return set(re.findall(r"^  - `([a-z_]+)`:", match.group(1), re.M))


def test_the_metric_is_labelled_by_termination_reason_only() -> None:
    package = METRICS_DOC.parents[1] / "provisioner"
    uses = [m for path in sorted(package.rglob("*.py"))
            for m in re.findall(r"NODES_TERMINATED\.labels\((.*)", path.read_text())]
    assert uses and all(re.search(r"reason=termination_reason\(", use) for use in uses), uses


def test_documented_reasons_are_exactly_the_emitted_ones() -> None:
    assert documented() == emitted()
    assert {"provisioner_deleted", "emptiness", "expiration", "deleted"} <= emitted()


def node(taint: bool = False, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "n", "annotations": annotations},
            "spec": {"taints": [{"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}] if taint else []}}


def test_each_documented_reason_is_read_from_the_marks_the_docs_name() -> None:
    stamp = {EMPTINESS_TIMESTAMP_ANNOTATION: "2026-01-01T00:00:00Z"}
    reason = objects.DISRUPTION_REASON_ANNOTATION
    cases = {
        "provisioner_deleted": node(True, **{reason: objects.REASON_PROVISIONER_DELETED}),
        "expiration": node(True),
        "emptiness": node(False, **stamp),
        "deleted": node(False),
    }
    assert {termination.termination_reason(n): want for want, n in cases.items()} == {w: w for w in cases}


def test_a_node_the_emptiness_controller_tainted_counts_as_emptiness_not_expiration() -> None:
    # emptiness now taints karpenter.sh/disrupted before deleting; its reason annotation says whose taint it is
    stamp = {EMPTINESS_TIMESTAMP_ANNOTATION: "2026-01-01T00:00:00Z"}
    tainted = node(True, **{objects.DISRUPTION_REASON_ANNOTATION: objects.REASON_EMPTINESS}, **stamp)
    assert termination.termination_reason(tainted) == "emptiness"
